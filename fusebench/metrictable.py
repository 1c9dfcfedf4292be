"""The metric table: every metric fusebench stores, declared once.

Each :class:`Metric` says where its value lives in a record, its asv name and unit, which
direction is better, whether it gates (``make compare`` and the site's Regressions tab) and what
its noise comes from. The asv suite (``fusebench.asv.asvsuite``), the regression gate
(``fusebench.gate.compare``), the summary table (``fusebench.report.summary``), the plots
(``fusebench.report.plots``) and ``asv.conf.json``'s regression settings (:func:`asv_regression_settings`,
checked by a test) all read this table; nothing else names a metric's unit or direction.

Only device times gate. Wall time includes the host (Python, launch overhead, the driver) and
moves by tens of % between hosts; bandwidth, % of ceiling, TFLOP/s and % of peak are derived
from the device time and, for the percentages, from the run's own copy ceiling or matrix peak,
whose run-to-run variation they inherit: they are shown, never judged. The ``*_iqr`` metrics
are the spread inside one batch of repeats, kept for reading, never judged (the gate's noise is
the spread between rounds, from the run's record: ``fusebench.gate.compare``). Energy per call
is one reading per run (``fusebench.measure.energy``), with no noise of its own: shown, never gated.

The way of declaring a metric once (tag, name, unit, hint, direction) is nvbench's summaries
(https://github.com/NVIDIA/nvbench/blob/main/docs/benchmarks.md); asv itself has no
higher-is-better flag (asv issue #1617), hence the regression settings written into ``asv.conf.json``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

LOWER, HIGHER = "lower", "higher"
#: The gate's default FACTOR: the slowdown a case may show before it can be a regression
#: (``fusebench.gate.compare`` says why 1.04: a true 5 % slowdown must be caught).
DEFAULT_FACTOR = 1.04
#: Above this % of the copy ceiling a figure measures caches (L2), not memory: flagged. Here, not in
#: ``fusebench.measure.metrics`` (which re-exports it), so that the marks read from stored results
#: need no torch.
CACHE_FLAG_PCT = 105.0


@dataclass(frozen=True)
class Metric:
    """One stored metric.

    Attributes:
        name: asv method name (``track_device_time``); the benchmark is ``suite.<Op>.<name>``.
        field: the :class:`fusebench.record.Record` attribute holding the value.
        unit: asv unit of the stored value (``seconds``, ``GB/s``, ``%``, ``TFLOP/s``).
        scale: stored value = record value × scale (records keep ms; asv wants seconds: 1e-3).
        better: ``"lower"`` or ``"higher"``.
        gates: judged by ``make compare`` and listed in the site's Regressions tab.
        noise: what the metric's noise comes from (shown in docs and ``--help``).
        label: human label, used in tables and plot axes.
        compute_only: stored only for ops that declare their arithmetic (``Op.flops``).
        doc: the asv docstring (shown on the site).
        method: version of the way the value is measured; bump it when that way changes, so
            that the gate's history (``fusebench.gate.noise``) never pairs runs across it.
            Version 2 of hot, cold and wall time: samples under the stopping rule
            (``fusebench.measure.stopping``); of energy: read around the rounds' graph replays.
            Graph time stays 1: its samples are taken as before (one block filling the cap).
    """

    name: str
    field: str
    unit: str
    scale: float
    better: str
    gates: bool
    noise: str
    label: str
    compute_only: bool = False
    doc: str = ""
    method: int = 1

    @property
    def sign(self) -> int:
        """-1 when lower values are better, +1 when higher are."""
        return -1 if self.better == LOWER else 1


_ROUNDS = "the spread of the per-round medians between a run's rounds"
_BATCH = "none of its own (a spread); it describes the repeats of one batch"

METRICS: tuple[Metric, ...] = (
    Metric("track_device_time", "device_time_ms", "seconds", 1e-3, LOWER, True, _ROUNDS,
           "hot device time", doc="Device time (hot, CUDA events, batches of back-to-back calls), "
           "median over rounds, seconds.", method=2),
    Metric("track_device_time_cold", "device_time_cold_ms", "seconds", 1e-3, LOWER, True, _ROUNDS,
           "cold device time", doc="Device time with L2 flushed before each call, median over "
           "rounds, seconds.", method=2),
    Metric("track_device_time_graph", "device_time_graph_ms", "seconds", 1e-3, LOWER, True, _ROUNDS,
           "graph device time", doc="Device time of calls captured in one CUDA graph and replayed "
           "(no launch gaps: what the GPU does), median over rounds, seconds."),
    Metric("track_wall_time", "wall_time_ms", "seconds", 1e-3, LOWER, False,
           "the host: Python, launch overhead, the driver (tens of % between hosts)", "wall time",
           doc="Wall time (host clock around a synchronized call), median over rounds, seconds.",
           method=2),
    Metric("track_bandwidth", "bandwidth_gbps", "GB/s", 1.0, HIGHER, False,
           "the device time it is derived from", "effective bandwidth",
           doc="Effective bandwidth, bytes moved / device time (host time on the CPU), GB/s."),
    Metric("track_pct_of_ceiling", "pct_of_ceiling", "%", 1.0, HIGHER, False,
           "the device time and the run's copy ceiling", "% of copy ceiling",
           doc="Effective bandwidth as % of this run's copy ceiling (median over rounds)."),
    Metric("track_tflops", "tflops", "TFLOP/s", 1.0, HIGHER, False,
           "the device time it is derived from", "throughput", compute_only=True,
           doc="Throughput, declared flops / device time (host time on the CPU), TFLOP/s."),
    Metric("track_pct_of_peak", "pct_of_peak", "%", 1.0, HIGHER, False,
           "the device time and the run's matrix peak", "% of matrix peak", compute_only=True,
           doc="Throughput as % of this run's matrix peak (a large bfloat16 matmul)."),
    Metric("track_device_time_iqr", "device_time_iqr_ms", "seconds", 1e-3, LOWER, False, _BATCH,
           "hot device time IQR", doc="Interquartile range of the hot device time within one "
           "round (median over rounds), seconds."),
    Metric("track_device_time_cold_iqr", "device_time_cold_iqr_ms", "seconds", 1e-3, LOWER, False,
           _BATCH, "cold device time IQR", doc="Interquartile range of the cold device time "
           "within one round (median over rounds), seconds."),
    Metric("track_device_time_graph_iqr", "device_time_graph_iqr_ms", "seconds", 1e-3, LOWER, False,
           _BATCH, "graph device time IQR", doc="Interquartile range of the graph device time "
           "within one round (median over rounds), seconds."),
    Metric("track_wall_time_iqr", "wall_time_iqr_ms", "seconds", 1e-3, LOWER, False, _BATCH,
           "wall time IQR", doc="Interquartile range of the wall time within one round (median "
           "over rounds), seconds."),
    Metric("track_energy", "energy_mj_per_call", "mJ", 1.0, LOWER, False,
           "the counter's 100 ms steps and the board's idle power over the reading (one reading per run)",
           "energy per call", doc="Energy per call: the rise of NVML's total-energy counter of the "
           "board around each round's CUDA-graph replays, summed over the rounds (topped up after "
           "them where too short), idle power included, mJ (none on the CPU).", method=2),
)

BY_NAME: dict[str, Metric] = {m.name: m for m in METRICS}
#: The metrics ``make compare`` judges.
GATED: tuple[Metric, ...] = tuple(m for m in METRICS if m.gates)


def metric(name: str) -> Metric:
    """The metric called ``name`` (an asv method name, or a full benchmark name ending in it).

    Raises:
        KeyError: no such metric.
    """
    return BY_NAME[name.rsplit(".", 1)[-1]]


def methods() -> dict[str, int]:
    """Each metric's method version by record field (stored with every run)."""
    return {m.field: m.method for m in METRICS}


def for_op(flops_declared: bool) -> tuple[Metric, ...]:
    """The metrics stored for an op: all but the compute-only ones unless it declares flops."""
    return tuple(m for m in METRICS if flops_declared or not m.compute_only)


def asv_regression_settings(factor: float = DEFAULT_FACTOR) -> dict:
    """``asv.conf.json``'s ``regressions_first_commits`` and ``regressions_thresholds``.

    Every non-gating metric gets ``null`` (asv's "never look for regressions here": its
    Regressions tab then lists device times only); gated metrics get the gate's
    ``factor`` (default :data:`DEFAULT_FACTOR`) as asv's threshold. The patterns are matched by asv
    with ``re.match`` against ``suite.<Op>.<metric>(<params>)``.
    """
    names = "|".join(re.escape(m.name) for m in METRICS if not m.gates)
    gated = "|".join(re.escape(m.name) for m in GATED)
    return {
        "regressions_first_commits": {rf"suite\.[A-Za-z0-9_]+\.({names})\(": None},
        "regressions_thresholds": {rf"suite\.[A-Za-z0-9_]+\.({gated})\(": round(factor - 1, 4)},
    }
