"""The sweep: every case (op × backend × shape × dtype) built, gated, then timed in rounds, in one process.

One process measures all cases (compilation caches, the CUDA context and the copy ceiling are
shared); the asv suite then stores and publishes the records, one asv parameter combination per
case. Records are named the nvbench way: axes, samples, median, noise, cold or hot, skip reason.

A run has phases:

1. **build**: the builds a backend's cases share start in the background
   (``fusebench.backends.start_builds``: the CUDA extension, whose nvcc then runs while the other
   backends' cases build; its first case waits for it, and the rounds for all of them); each
   case's factory runs once (compile, extension build), then the correctness gate
   (**gate**), then warm-up, the hot batch size and a profiled call (launches and the identity
   of the kernels that ran: ``fusebench.measure.launches``) (**profile**). The built callables are kept.
2. **rounds**: R passes over every built case (``ROUNDS``, default :data:`DEFAULT_ROUNDS`),
   interleaved: all cases once in grid order, then all again in reverse order, then in seeded
   shuffled orders, so that a slow drift of the machine (clocks, temperature, a neighbour) is
   spread over the cases instead of landing on one block of them. Each round re-measures the
   copy ceiling and, per case, warms up, then times hot device time, cold device time, graph
   device time and wall time, reading NVML before, between and after (``environment.gpu_sample``).
   Hot, cold and wall samples stop once the median is known well enough, within a cap (the
   stopping rule, ``fusebench.measure.stopping``; the case file's ``settings.timing``); graph
   replays are one queued block per round, around which NVML's energy counter is read
   (``fusebench.measure.energy``).
3. a case's figure is the **median over rounds** of its per-round medians; its **noise** is the
   spread between rounds, (max - min) / median of the per-round figures (one batch's IQR
   underestimates the spread that a comparison of two runs meets). Every round's figures are
   kept in the record (``Record.rounds``).
4. **energy top-up**: a case whose rounds' energy readings add up to too short a window for a
   figure gets one more window (``energy.top_up``); energy is shown, never gated.

A round measured while the GPU was throttled or shared with another process is printed loudly
and left out of the case's figures while most rounds are clean; a case with fewer clean rounds
is **contaminated**: marked in the record (``contamination``), never judged by the gate.
"""

from __future__ import annotations

import random
import statistics
import sys
import time
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

import torch

from fusebench import backends
from fusebench.errors import SkipCase, first_line
from fusebench.measure import (
    correctness,
    energy,
    environment,
    inputs,
    launches,
    metrics,
    progress,
    stopping,
    timing,
)
from fusebench.record import ROUND_FIELDS, Record, Sweep, clean_rounds
from fusebench.registry import BACKENDS, PRECISIONS, Op, Shape, no_backend_reason, shape_label

#: Rounds of a run unless ``ROUNDS=`` says otherwise.
DEFAULT_ROUNDS = 3
#: Seconds each timing mode (hot, cold, graph, wall) of one case may take in one round: the
#: stopping rule's cap (``stopping.StopRule.max_s``): at most the repeats that fill it at the
#: estimated call time (``timing.repeats_for``; in cold mode with the flush before each call counted
#: in), at least :data:`MIN_ROUND_SAMPLES`. Graph mode always fills it (one queued block: the
#: energy window).
ROUND_BUDGET_S = stopping.DEFAULT.max_s
#: Contaminated cases named one by one in a round's warnings (a shared CPU contaminates them
#: all); the rest are counted in one line.
LOUD_PER_ROUND = 3
#: Fewest timed samples per mode and round (hot batches, cold calls, graph replays, wall calls):
#: a call of a millisecond or more moves by well under 1 % between its samples, and those long
#: cases would otherwise take most of a round.
MIN_ROUND_SAMPLES = stopping.DEFAULT.min_samples
#: Most wall-time samples per round (wall time is shown, never judged).
MAX_WALL_SAMPLES = 50


def grid_name(dev: torch.device, quick: bool) -> str:
    """``default`` on a GPU and ``cpu`` on the CPU; with ``quick``, ``quick`` and ``cpu-quick``."""
    full, small = ("default", "quick") if dev.type == "cuda" else ("cpu", "cpu-quick")
    return small if quick else full


def cases(ops: Iterable[Op], grid: str, backend_names: Iterable[str] = BACKENDS,
          dtype_names: Iterable[str] = PRECISIONS) -> list[tuple[Op, str, Shape, str]]:
    """The cases of ``grid`` in run order: op, then shape, then dtype, then backend.

    Each op contributes only the selected dtypes on its own dtype axis (``Op.dtypes``).
    """
    backend_names, dtype_names = list(backend_names), list(dtype_names)
    return [(op, b, shape, d) for op in ops for shape in op.grids[grid]
            for d in dtype_names if d in op.dtypes for b in backend_names]


@dataclass
class Built:
    """A case built and through the correctness gate (see :func:`build_and_gate`).

    ``status`` is ``"ok"``, ``"skipped"`` or ``"failed"`` with its ``reason``; ``fn`` and ``x``
    are the ready callable and its input (None unless built); ``gate`` the gate's result (None
    unless the case was built). ``build_s`` and ``gate_s`` are the seconds the factory and the
    gate took.
    """

    status: str = "ok"
    reason: str = ""
    fn: Callable[[], object] | None = None
    x: torch.Tensor | None = None
    gate: correctness.GateResult | None = None
    build_s: float = 0.0
    gate_s: float = 0.0


def build_and_gate(op: Op, backend: str, shape: Shape, dtype: str, dev: torch.device) -> Built:
    """Build one case on its seeded input and run the correctness gate. Never raises for a
    failing backend: a :class:`SkipCase` becomes ``skipped``, any other error ``failed``.

    ``dtype`` is a dtype-axis name (:data:`fusebench.registry.PRECISIONS`).
    """
    precision = PRECISIONS[dtype]
    start = time.perf_counter()
    try:
        factory = op.get_backend(backend).factory
        x = inputs.make_input(shape, precision.dtype, str(dev))
        fn = precision.bind(factory, x)
    except SkipCase as exc:
        return Built("skipped", str(exc), build_s=time.perf_counter() - start)
    except Exception as exc:
        return Built("failed", first_line(exc), build_s=time.perf_counter() - start)
    built_at = time.perf_counter()
    gate = correctness.check(op, fn, x, dtype)
    build_s, gate_s = built_at - start, time.perf_counter() - built_at
    if not gate.passed:
        return Built("failed", f"correctness gate: {gate.reason}", gate=gate, build_s=build_s, gate_s=gate_s)
    return Built(fn=fn, x=x, gate=gate, build_s=build_s, gate_s=gate_s)


def new_record(op: Op, backend: str, shape: Shape, dtype: str) -> Record:
    """An empty record of one case, with its declared work (bytes moved, flops)."""
    return Record(op.name, backend, shape_label(shape), dtype, roofline=op.roofline,
                  bytes_moved=op.bytes_moved(shape, PRECISIONS[dtype].dtype),
                  flops=op.flops(shape) if op.flops else None)


def prepare(rec: Record, built: Built, dev: torch.device) -> None:
    """After the gate: warm up, fix the hot batch size, profile one call (launches, kernels).

    Fills ``compile_s``, the gate's error, ``hot_calls``, ``launches``, ``kernels``, ``kernel_id``
    and ``kernel_by_timing`` of ``rec``; a failure of these marks the case failed.
    """
    if built.gate is not None:
        rec.max_rel_error, rec.tolerance = built.gate.max_rel_error, built.gate.tolerance
    rec.compile_s = getattr(built.fn, "compile_s", None)
    if built.status != "ok":
        rec.status, rec.reason = built.status, built.reason
        return
    rec.kernel_by_timing = bool(getattr(built.fn, "chosen_by_timing", False))
    try:
        timing.warm_up(built.fn, dev)
        if dev.type == "cuda":
            one_call_ms = batch_estimate_ms(built.fn)
            rec.hot_calls = timing.hot_calls(built.fn, one_call_ms)
            rec.graph_calls = timing.graph_calls(one_call_ms)
            prof = launches.profile_call(built.fn, dev)
            rec.launches, rec.kernels, rec.kernel_id = prof.launches, list(prof.kernels), prof.kernel_id
            if picks := getattr(built.fn, "autotuned", ()):  # the autotuner's pick is the kernel too
                rec.kernels += [f"autotuned {p}" for p in picks]
                rec.kernel_id = launches.identity([prof.kernel_id or "", *picks])
    except Exception as exc:
        rec.status, rec.reason = "failed", f"timing: {first_line(exc)}"


def ready(todo: Iterable[tuple[Op, str, Shape, str]],
          dev: torch.device) -> Iterator[tuple[Record, Callable[[], object]]]:
    """Each case of ``todo`` (:func:`cases`) built, gated and prepared (:func:`prepare`) on
    ``dev``, yielded as its record and ready callable; a failed or skipped case is passed over.
    What a probe that times the cases its own way starts from."""
    for op, backend, shape, dtype in todo:
        rec = new_record(op, backend, shape, dtype)
        built = build_and_gate(op, backend, shape, dtype, dev)
        prepare(rec, built, dev)
        if rec.status == "ok":
            yield rec, built.fn


#: Estimates of one call's device time the batch sizes are chosen from; the smallest is used.
BATCH_ESTIMATES = 3


def batch_estimate_ms(fn: Callable[[], object], estimate=None) -> float:
    """Device time of one call (event pair per call), the smallest of :data:`BATCH_ESTIMATES`
    medians of 5: the hot and graph batch sizes follow from it, and one estimate stalled by the
    host (the queue ran dry) would shrink a batch tenfold and move a small kernel's figure."""
    estimate = estimate or (lambda: timing.device_time(fn, 5).median_ms)
    return min(estimate() for _ in range(BATCH_ESTIMATES))


#: A repeat's GPU time that a blocking kernel may count on (``timing.device_time``'s ``gpu_ms``),
#: as a fraction of the case's fastest hot figure so far (and, in cold mode, of the flush's time):
#: a floor below what the repeat takes, so that the host stays ahead of the GPU.
GPU_FLOOR = 0.8
#: The host seconds of a round's parts, summed over its cases (:func:`time_round`'s ``spent``);
#: ``readings`` are NVML's on a GPU, the host's load on the CPU.
ROUND_PARTS = ("warm-up", "hot", "cold", "graph", "wall", "readings")


def time_round(rec: Record, fn: Callable[[], object], dev: torch.device, flush: torch.Tensor | None,
               budget_s: float | None = None, spent: dict[str, float] | None = None,
               rule: stopping.StopRule | None = None, read: Callable[[], float] | None = None) -> dict:
    """One round of one case: warm-up, hot, cold and graph device time (GPU), wall time, NVML
    around. Samples per mode fill at most the rule's cap (``rule.max_s``, or ``budget_s`` where
    given) at the estimated call time, at least ``rule.min_samples``; hot, cold and wall stop
    earlier once their median is known well enough (``fusebench.measure.stopping``); graph mode
    fills the cap in one queued block. ``rule`` None: :data:`stopping.DEFAULT`.

    Appends the round's figures (ms) to ``rec.rounds`` and returns them, with the round's
    contamination (``environment.contamination`` of the readings; :func:`finish` decides what
    it means for the case) and ``samples``, the samples each mode took. With ``read`` (NVML's
    energy counter, ``energy.counter``), the counter's rise around the graph replays, their calls
    and seconds are kept as ``energy`` (``{"mj", "calls", "s"}``: ``energy.accumulate``).
    ``spent``, when given, gains the seconds each part took (:data:`ROUND_PARTS`): where a run's
    time goes.
    """
    rule = rule or stopping.DEFAULT
    budget_s = rule.max_s if budget_s is None else budget_s
    lo = rule.min_samples
    spent = {} if spent is None else spent
    last = time.perf_counter()

    def took(part: str) -> None:
        nonlocal last
        now = time.perf_counter()
        spent[part] = spent.get(part, 0.0) + now - last
        last = now

    before = environment.gpu_sample(dev)
    took("readings")
    estimate_s = timing.warm_up(fn, dev)
    reps = timing.repeats_for(estimate_s, budget_s, lo, timing.MAX_REPEATS)
    took("warm-up")
    fig: dict = {"repeats": reps}
    taken: dict[str, int] = {}
    samples = [before]
    if dev.type == "cuda":
        calls = rec.hot_calls or 1
        earlier = [r["device_time_ms"] for r in rec.rounds if r.get("device_time_ms")]
        hot = timing.device_time(fn, max(lo, reps // calls), calls=calls,
                                 gpu_ms=GPU_FLOOR * calls * min(earlier, default=0.0), launches=rec.launches,
                                 rule=rule)
        taken["hot"] = hot.repeats
        took("hot")
        samples.append(environment.gpu_sample(dev))
        took("readings")
        flush_ms = timing.flush_ms(flush) if flush is not None else 0.0
        # Cold repeats fill the budget with the flush that precedes each of them counted in.
        cold_reps = timing.repeats_for(estimate_s + flush_ms * 1e-3, budget_s, lo, timing.MAX_REPEATS)
        cold = timing.device_time(fn, cold_reps, flush, gpu_ms=GPU_FLOOR * (flush_ms + hot.median_ms),
                                  launches=rec.launches, rule=rule)
        fig["cold_repeats"] = cold_reps
        taken["cold"] = cold.repeats
        took("cold")
        fig.update(device_time_ms=hot.median_ms, device_time_iqr_ms=hot.iqr_ms,
                   device_time_cold_ms=cold.median_ms, device_time_cold_iqr_ms=cold.iqr_ms)
        if rec.graph_calls and not rec.graph_reason:
            try:
                # One queued block, no stopping rule: the energy window (energy module doc); its
                # blocking kernel cut to its lead by the replays' known GPU time (the case's graph
                # figures so far, its hot figure in the first round).
                known = [r["device_time_graph_ms"] for r in rec.rounds if r.get("device_time_graph_ms")]
                graph, reading = timing.graph_replays(
                    fn, max(lo, reps // rec.graph_calls), rec.graph_calls,
                    gpu_ms=GPU_FLOOR * rec.graph_calls * min(known, default=hot.median_ms), read=read)
                fig.update(device_time_graph_ms=graph.median_ms, device_time_graph_iqr_ms=graph.iqr_ms)
                taken["graph"] = graph.repeats
                if reading is not None:
                    fig["energy"] = {"mj": reading[0], "calls": graph.repeats * rec.graph_calls,
                                     "s": reading[1]}
            except timing.CaptureError as exc:
                rec.graph_reason = f"not captured in a CUDA graph: {exc}"
            took("graph")
    wall = timing.wall_time(fn, min(reps, MAX_WALL_SAMPLES), dev, rule=rule)
    taken["wall"] = wall.repeats
    fig["samples"] = taken
    took("wall")
    samples.append(environment.gpu_sample(dev))
    took("readings")
    fig.update(wall_time_ms=wall.median_ms, wall_time_iqr_ms=wall.iqr_ms, clock=wall.clock
               if dev.type != "cuda" else "cuda-events", before=before, after=samples[-1])
    fig["contamination"] = environment.contamination(samples)
    rec.rounds.append(fig)
    return fig


def spread(values: list[float]) -> float:
    """(max - min) / median of ``values`` (dimensionless; NaN for an empty list or median 0)."""
    if not values:
        return float("nan")
    med = statistics.median(values)
    return (max(values) - min(values)) / med if med > 0 else float("nan")


def finish(rec: Record, ceiling_gbps: float, peak_tflops: float | None) -> None:
    """Set a timed record's figures from its rounds (:func:`clean_rounds`): medians over rounds,
    noise between rounds, bandwidth, % of ceiling, TFLOP/s, % of peak, the cache flag, the
    contamination (see :class:`Record`)."""
    if rec.status != "ok" or not rec.rounds:
        return
    rounds, rec.contamination = clean_rounds(rec.rounds)
    rec.dropped_rounds = [i for i, r in enumerate(rec.rounds) if not any(r is c for c in rounds)]
    for name in ROUND_FIELDS:
        values = [r[name] for r in rounds if r.get(name) is not None]
        setattr(rec, name, statistics.median(values) if values else None)
    if rec.graph_reason:  # a capture that failed in a later round: no figure from fewer rounds
        rec.device_time_graph_ms = rec.device_time_graph_iqr_ms = None
    rec.repeats = rounds[-1]["repeats"]
    rec.clock = rounds[-1]["clock"]
    main_field = "device_time_ms" if rec.device_time_ms is not None else "wall_time_ms"
    iqr_field = main_field.replace("_ms", "_iqr_ms")
    main_ms = getattr(rec, main_field)
    within = [r[iqr_field] / r[main_field] for r in rounds if r[main_field] > 0]
    rec.noise_within = statistics.median(within) if within else None
    rec.noise = spread([r[main_field] for r in rounds]) if len(rounds) > 1 else rec.noise_within
    if rec.device_time_cold_ms is not None:
        rec.bandwidth_cold_gbps = metrics.effective_bandwidth_gbps(rec.bytes_moved, rec.device_time_cold_ms)
    rec.bandwidth_gbps = metrics.effective_bandwidth_gbps(rec.bytes_moved, main_ms)
    rec.pct_of_ceiling = metrics.pct_of_ceiling(rec.bandwidth_gbps, ceiling_gbps)
    rec.cache_flag = rec.roofline == "memory" and rec.pct_of_ceiling > metrics.CACHE_FLAG_PCT
    if rec.flops is not None:
        rec.tflops = metrics.tflops(rec.flops, main_ms)
        if peak_tflops:
            rec.pct_of_peak = metrics.pct_of_peak(rec.tflops, peak_tflops)


def _time_rounds(rec: Record, fn: Callable[[], object], dev: torch.device, flush, rounds: int) -> None:
    try:
        for _ in range(rounds):
            time_round(rec, fn, dev, flush)
    except Exception as exc:
        rec.status, rec.reason = "failed", f"timing: {first_line(exc)}"


def run_case(op: Op, backend: str, shape: Shape, dtype: str, dev: torch.device,
             ceiling_gbps: float, flush: torch.Tensor | None,
             peak_tflops: float | None = None, rounds: int = 1) -> Record:
    """Build, gate, warm up and time one case in ``rounds`` back-to-back rounds. Never raises
    for a failing backend (see ``status``).

    ``dtype`` is a dtype-axis name (:data:`fusebench.registry.PRECISIONS`); ``peak_tflops`` the
    run's matrix peak, needed for ``pct_of_peak`` of an op that declares flops. (A run
    interleaves its rounds over all cases instead: :func:`run`.)
    """
    rec = new_record(op, backend, shape, dtype)
    built = build_and_gate(op, backend, shape, dtype, dev)
    prepare(rec, built, dev)
    if rec.status == "ok":
        _time_rounds(rec, built.fn, dev, flush, rounds)
        finish(rec, ceiling_gbps, peak_tflops)
        rec.clocks = environment.clocks(dev)
    return rec


def skipped_text(skipped: Counter) -> str:
    """``skipped`` (reason -> cases) as the end of the build's line: ``; 18 skipped (18: needs a
    CUDA GPU; each case's reason is in the run's record, bench -v prints each)``; empty if none."""
    if not skipped:
        return ""
    most = "; ".join(f"{n}: {why}" for why, n in skipped.most_common(3))
    rest = "; and others" if len(skipped) > 3 else ""
    return (f"; {sum(skipped.values())} skipped ({most}{rest}; each case's reason is in the run's record, "
            "bench -v prints each)")


def progress_line(i: int, n: int, rec: Record) -> str:
    """One line per case, e.g. ``[ 12/255] gelu triton 16777216 float32  ok 0.0421 ms ...``."""
    head = f"[{i:>{len(str(n))}}/{n}] {rec.op:<8} {rec.backend:<8} {rec.shape:>12} {rec.dtype:<9}"
    if rec.status != "ok":
        return f"{head} {rec.status}: {rec.reason}"
    from fusebench.report.marks import MARKS, doubts, noise_text

    t = rec.main_time_ms()
    text = f"{head} ok {t:9.4f} ms {noise_text(rec.noise)} "
    if rec.roofline == "compute":
        text += f"{rec.tflops:8.2f} TFLOP/s"
        if rec.pct_of_peak is not None:
            text += f" {rec.pct_of_peak:5.1f}% of peak"
    else:
        text += f"{rec.bandwidth_gbps:8.1f} GB/s {rec.pct_of_ceiling:5.1f}% of ceiling"
    if rec.device_time_graph_ms is not None:
        text += f"  graph {rec.device_time_graph_ms:.4f} ms"
    if rec.launches is not None:
        text += f"  {rec.launches} launch{'es' if rec.launches != 1 else ''}"
    if rec.energy_mj_per_call is not None:
        text += f"  {rec.energy_mj_per_call:.3g} mJ/call"
    if rec.cache_flag:
        text += "  (above the copy ceiling: caches measured)"
    if "peak" in doubts(rec):
        text += f"  ({MARKS['peak'][1]})"
    if rec.contaminated:
        text += f"  CONTAMINATED: {contamination_text(rec.contamination)}"
    return text


def contamination_text(reasons: list[str]) -> str:
    """The reasons of a case's contamination, each kind once (the text before its first `` (``,
    whose figures differ from round to round), e.g. ``other processes share the CPU (load 3 on
    2 cores, ...) in 3 rounds``."""
    kinds: dict[str, list[str]] = {}
    for reason in reasons:
        kinds.setdefault(reason.split(" (")[0], []).append(reason)
    return "; ".join(found[0] + (f" in {len(found)} rounds" if len(found) > 1 else "")
                     for found in kinds.values())


def round_order(n: int, index: int) -> list[int]:
    """The order of the cases in round ``index`` (0-based): grid order, then reversed, then
    shuffled with the round's index as seed (the same orders on every machine)."""
    order = list(range(n))
    if index == 1:
        order.reverse()
    elif index >= 2:
        random.Random(index).shuffle(order)
    return order


def _loud(message: str, out, warnings: list[str], bar=None) -> None:
    """Say ``message`` as a warning (above ``bar``, the live progress bar, if any) and keep it."""
    progress.say(bar, f"fusebench: WARNING: {message}", out)
    warnings.append(message)


def run(ops: Iterable[Op], *, quick: bool = False, backend_names: Iterable[str] = BACKENDS,
        dtype_names: Iterable[str] = PRECISIONS, rounds: int = DEFAULT_ROUNDS,
        rule: stopping.StopRule | None = None, energy_scope: str = energy.DEFAULT_SCOPE,
        out=sys.stderr, verbose: bool = False) -> Sweep:
    """Measure every case on this machine's device in ``rounds`` interleaved rounds (see the module
    doc), printing progress to ``out``, each mode's samples under ``rule`` (None:
    :data:`stopping.DEFAULT`; the case file's ``settings.timing``), energy topped up for the
    cases ``energy_scope`` selects (``energy.SCOPES``); ``verbose``: each skipped case's line too
    (:func:`measure`). (All GPUs of a host at once: ``fusebench.measure.workers``.)

    Raises:
        ValueError: ``rounds`` < 1.
    """
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    dev = environment.device()
    grid = grid_name(dev, quick)
    todo = cases(ops, grid, backend_names, dtype_names)
    # The CUDA extension's build starts now, in the background, when a cuda case will be built:
    # its first case waits for it, the rounds start only once it is done.
    shared = backends.start_builds([case[1] for case in todo if case[1] in case[0].backends], dev)
    return measure(enumerate(todo), len(todo), grid, dev, rounds=rounds, rule=rule,
                   peak=any(op.flops for op, *_ in todo), identity=environment.gpu_identity(dev),
                   before_rounds=lambda built: [wait() for wait in shared],
                   energy_scope=energy_scope, out=out, verbose=verbose)


def measure(todo: Iterable[tuple[int, tuple[Op, str, Shape, str]]], total: int, grid: str,
            dev: torch.device, *, rounds: int, peak: bool, identity: dict | None = None,
            before_rounds: Callable[[int], None] | None = None, rule: stopping.StopRule | None = None,
            energy_scope: str = energy.DEFAULT_SCOPE, out=sys.stderr, verbose: bool = False) -> Sweep:
    """The two phases of a run (module doc) over the cases ``todo`` on ``dev``.

    Args:
        todo: ``(position in the grid, case)`` pairs, consumed once during the build phase (a
            worker of ``fusebench.measure.workers`` pulls them from a shared queue); the rounds then go
            over the cases built here, in grid order (:func:`round_order`).
        total: the number of cases of the whole grid (progress lines say ``[position/total]``).
        grid: the grid's name (:func:`grid_name`).
        rounds: rounds per case (>= 1).
        peak: measure the matrix peak first (some op of the run declares flops).
        identity: the GPU's ``gpu_index``, ``gpu_serial`` (``environment.gpu_identity``): put in
            the environment and in every record.
        before_rounds: called with the number of cases built, between the phases (a worker waits
            there for the others to finish building, so that no GPU is timed beside a compile).
        rule: the stopping rule of each mode in each round (None: :data:`stopping.DEFAULT`).
        energy_scope: which cases get an energy top-up window (``energy.SCOPES``,
            :func:`energy.selected`); the others keep what their rounds read, if that is a figure.
        verbose: print each skipped case's line as the build meets it; else one line after the
            build counts them by reason (each reason is in the record). A failed case's line is
            always printed.

    Returns:
        The sweep of these cases, records in grid order.
    """
    identity = identity or {}
    rule = rule or stopping.DEFAULT
    env = dict(environment.capture(dev), **identity)
    warnings: list[str] = []
    if dev.type == "cuda":
        torch.zeros(1, device=dev)  # this process's context first, so NVML lists it as ours
    if others := environment.other_processes(dev):
        _loud(f"{len(others)} other process(es) hold the GPU ("
              + ", ".join(f"pid {p['pid']} {p['mem_mib']} MiB" for p in others)
              + "): their work slows the cases, which will be marked contaminated", out, warnings)
    phases: dict[str, float] = {}
    start = time.perf_counter()
    peak_run = metrics.measure_matrix_peak(dev) if peak else None
    peak_tflops = peak_run.tflops if peak_run else None
    print(f"fusebench: {total} cases on {env.get('gpu', 'the CPU')} ({grid} grid), {rounds} round"
          f"{'s' if rounds != 1 else ''}" + (f"; {peak_run.describe()}" if peak_run else ""),
          file=out, flush=True)
    if peak_run and not peak_run.stable:
        _loud(peak_run.describe(), out, warnings)

    # Phase 1: build, gate, profile; the callables are kept for the rounds.
    built_cases: list[tuple[int, Record, Callable[[], object] | None]] = []
    tops: set[tuple] = set()  # the keys of the cases energy_scope selects for a top-up window
    for k in ("build", "gate", "profile"):
        phases[k] = 0.0
    building = progress.build_bar(total)
    skipped: Counter = Counter()
    for pos, (op, backend, shape, dtype) in todo:
        rec = new_record(op, backend, shape, dtype)
        if energy.selected(op, shape, grid, energy_scope):
            tops.add(rec.key)
        rec.gpu_index, rec.gpu_serial = identity.get("gpu_index"), identity.get("gpu_serial")
        progress.show(building, "build", rec.op, rec.backend, rec.shape, rec.dtype)
        built = build_and_gate(op, backend, shape, dtype, dev)
        phases["build"] += built.build_s
        phases["gate"] += built.gate_s
        t = time.perf_counter()
        prepare(rec, built, dev)
        phases["profile"] += time.perf_counter() - t
        built_cases.append((pos, rec, built.fn if rec.status == "ok" else None))
        building.update()
        if rec.status != "ok" and rec.reason != no_backend_reason(rec.op, rec.backend):
            # an op without such a backend is no news (fusebench list leaves those out too); a
            # skip is counted after the build (88 lines on a CPU otherwise), a failure said now
            if rec.status == "failed" or verbose:
                progress.say(building, progress_line(pos + 1, total, rec), out)
            else:
                skipped[rec.reason] += 1
            if dev.type == "cuda" and rec.status == "failed":
                torch.cuda.empty_cache()  # e.g. after an out-of-memory failure
    building.close()
    built_cases.sort(key=lambda c: c[0])
    positions = [c[0] for c in built_cases]
    records = [c[1] for c in built_cases]
    fns = [c[2] for c in built_cases]
    built_n = sum(f is not None for f in fns)
    print(f"fusebench: built and gated {built_n} of {len(records)} cases in "
          f"{time.perf_counter() - start:.0f} s "
          f"(build {phases['build']:.0f} s, gate {phases['gate']:.0f} s, profile {phases['profile']:.0f} s)"
          + skipped_text(skipped), file=out, flush=True)
    if before_rounds is not None:
        before_rounds(built_n)

    # Phase 2: the rounds, interleaved over the built cases.
    flush = timing.l2_flush_buffer(dev) if dev.type == "cuda" else None
    read = energy.counter(dev)  # read around each round's graph replays: shown, never gated
    ceilings = []
    bar = progress.rounds_bar(rounds * built_n)
    spent: dict[str, float] = {}
    for r in range(rounds if built_n else 0):  # nothing built: no round to time
        t = time.perf_counter()
        ceilings.append(metrics.measure_copy_ceiling(dev).gbps)
        spent_before = dict(spent)
        unsaid = 0  # contaminated cases of this round beyond the first LOUD_PER_ROUND: counted
        for idx in round_order(len(records), r):
            fn, rec = fns[idx], records[idx]
            if fn is None or rec.status != "ok":
                continue
            progress.show(bar, f"round {r + 1}/{rounds}", rec.op, rec.backend, rec.shape, rec.dtype)
            try:
                fig = time_round(rec, fn, dev, flush, spent=spent, rule=rule, read=read)
            except Exception as exc:
                rec.status, rec.reason = "failed", f"timing: {first_line(exc)}"
                fns[idx] = None
                progress.say(bar, progress_line(positions[idx] + 1, total, rec), out)
                continue
            bar.update()
            if r == rounds - 1:
                rec.clocks = environment.clocks(dev)
            said = sum(w.startswith(f"round {r + 1}: ") for w in warnings)
            if fig["contamination"] and said < LOUD_PER_ROUND:
                _loud(f"round {r + 1}: {rec.op}/{rec.backend}/{rec.shape}/{rec.dtype} contaminated: "
                      + "; ".join(fig["contamination"]), out, warnings, bar)
            elif fig["contamination"]:
                unsaid += 1
        if unsaid:
            _loud(f"round {r + 1}: {unsaid} more case(s) contaminated (each case's reasons are in the "
                  "record and the summary)", out, warnings, bar)
        phases[f"round {r + 1}"] = time.perf_counter() - t
        parts = ", ".join(f"{k} {spent[k] - spent_before.get(k, 0.0):.0f}" for k in ROUND_PARTS if k in spent)
        progress.say(bar, f"fusebench: round {r + 1}/{rounds}: {built_n} cases in "
                     f"{phases[f'round {r + 1}']:.0f} s" + (f" ({parts} s)" if parts else "")
                     + f"; copy ceiling {ceilings[-1]:.0f} GB/s", out)
    bar.close()
    if not ceilings:  # the record still says what this device copies
        ceilings.append(metrics.measure_copy_ceiling(dev).gbps)
    phases.update((f"rounds: {k}", spent[k]) for k in ROUND_PARTS if k in spent)
    ceiling = statistics.median(ceilings)
    for rec in records:
        finish(rec, ceiling, peak_tflops)
    if read is not None:  # the rounds' readings, topped up where too short (energy module doc)
        t = time.perf_counter()
        for fn, rec in zip(fns, records):
            if fn is not None and rec.status == "ok":
                try:
                    if rec.key in tops:
                        energy.fill(rec, energy.top_up(rec, fn, dev, read))
                    else:
                        energy.fill(rec, energy.accumulate(rec.rounds),
                                    energy.not_selected_reason(energy_scope))
                except Exception as exc:  # noqa: BLE001 - energy is shown, never gated: the case stands
                    rec.energy_reason = f"energy: {type(exc).__name__}: {first_line(exc)}"
        phases["energy top-up"] = time.perf_counter() - t
    for pos, rec in zip(positions, records):
        if rec.status == "ok":
            print(progress_line(pos + 1, total, rec), file=out, flush=True)
    del fns
    inputs.clear()
    env["clocks_after"] = environment.clocks(dev)
    env["sweep_seconds"] = round(time.perf_counter() - start, 1)
    return Sweep(env, ceiling, grid, records, peak_tflops=peak_tflops, rounds=rounds,
                 ceilings_gbps=ceilings, phases={k: round(v, 1) for k, v in phases.items()},
                 warnings=warnings, timing=rule.as_dict(), energy_scope=energy_scope)
