"""Building asv benchmark classes from the registry (used by ``benchmarks/suite.py``).

asv conventions followed (asv docs, "Writing benchmarks"): ``params`` line up with short
lowercase ``param_names``; ``setup`` raises ``NotImplementedError`` to skip a combination;
``track_*`` methods return a value in ``unit``; an explicit ``version`` keeps history when the
generated source moves; ``setup_cache`` runs once per asv run and its value is passed to every
method.
"""

from __future__ import annotations

import os
from pathlib import Path

from fusebench.registry import BACKENDS, Op, shape_label

#: Environment variable naming a sweep file to publish instead of measuring again.
SWEEP_ENV = "FUSEBENCH_SWEEP"
#: Bump when a metric's meaning changes (asv then starts a new history line).
SUITE_VERSION = "1"
#: asv names benchmarks ``<module>.<Class>.<method>``; the module is ``benchmarks/suite.py``.
BENCHMARK_MODULE = "suite"
#: Suffix of the metrics that hold a time metric's spread (interquartile range, seconds).
NOISE_SUFFIX = "_iqr"
#: Which time metric's spread is each metric's noise (``fusebench.compare`` reads it), first one
#: measured wins: bandwidth and % of ceiling are computed from the hot device time on a GPU, from
#: the wall time on the CPU (no device time there).
NOISE_SOURCE = {
    "track_device_time": ("track_device_time",),
    "track_device_time_cold": ("track_device_time_cold",),
    "track_wall_time": ("track_wall_time",),
    "track_bandwidth": ("track_device_time", "track_wall_time"),
    "track_pct_of_ceiling": ("track_device_time", "track_wall_time"),
    "track_tflops": ("track_device_time", "track_wall_time"),
    "track_pct_of_peak": ("track_device_time", "track_wall_time"),
}


def class_name(op_name: str) -> str:
    """Name of the asv class generated for an op: ``"gelu"`` -> ``"Gelu"``."""
    return op_name.capitalize()


def benchmark_name(op_name: str, metric: str) -> str:
    """asv's name of ``metric`` of the class generated for ``op_name``: ``suite.Gelu.track_bandwidth``."""
    return f"{BENCHMARK_MODULE}.{class_name(op_name)}.{metric}"

try:  # skip a single metric (not the whole combination) from inside a track method
    from asv_runner.benchmarks.mark import SkipNotImplemented
except ImportError:  # pragma: no cover - outside asv
    SkipNotImplemented = NotImplementedError


def load_records() -> dict:
    """The records asv publishes: read from ``$FUSEBENCH_SWEEP`` or measured now.

    Returns ``{"records": {(op, backend, shape, dtype): record dict}, "ceiling_gbps": ...,
    "peak_tflops": ...}``.
    """
    from fusebench import sweep

    path = os.environ.get(SWEEP_ENV)
    if path:
        result = sweep.Sweep.load(Path(path))
    else:
        from kernels import OPS

        result = sweep.run(OPS.values())
    records = {r.key: vars(r) for r in result.records}
    return {"records": records, "ceiling_gbps": result.ceiling_gbps, "peak_tflops": result.peak_tflops}


class _OpSuite:
    """Base of the generated classes; ``op`` is set on each subclass."""

    op = ""
    param_names = ["backend", "shape", "dtype"]
    timeout = 3600  # setup_cache measures the whole sweep when no sweep file is given
    version = SUITE_VERSION

    def setup_cache(self):
        return load_records()

    def setup(self, cache, backend, shape, dtype):
        rec = cache["records"].get((self.op, backend, shape, dtype))
        if rec is None:
            raise NotImplementedError("not in this run's grid")
        if rec["status"] == "skipped":
            raise NotImplementedError(rec["reason"])
        self.rec = rec

    def _value(self, field):
        if self.rec["status"] == "failed":
            raise RuntimeError(f"{self.op}/{self.rec['backend']}/{self.rec['shape']}/"
                               f"{self.rec['dtype']} failed: {self.rec['reason']}")
        value = self.rec[field]
        if value is None:
            raise SkipNotImplemented(f"{field} is not measured on this device")
        return value

    def track_device_time(self, cache, backend, shape, dtype):
        """Device time (hot, CUDA events), median, seconds."""
        return self._value("device_time_ms") * 1e-3

    track_device_time.unit = "seconds"

    def track_device_time_cold(self, cache, backend, shape, dtype):
        """Device time with L2 flushed before each call, median, seconds."""
        return self._value("device_time_cold_ms") * 1e-3

    track_device_time_cold.unit = "seconds"

    def track_device_time_iqr(self, cache, backend, shape, dtype):
        """Interquartile range of the hot device time, seconds: the noise ``make compare`` allows."""
        return self._value("device_time_iqr_ms") * 1e-3

    track_device_time_iqr.unit = "seconds"

    def track_device_time_cold_iqr(self, cache, backend, shape, dtype):
        """Interquartile range of the cold device time, seconds."""
        return self._value("device_time_cold_iqr_ms") * 1e-3

    track_device_time_cold_iqr.unit = "seconds"

    def track_wall_time(self, cache, backend, shape, dtype):
        """Wall time (host clock with synchronization), median, seconds."""
        return self._value("wall_time_ms") * 1e-3

    track_wall_time.unit = "seconds"

    def track_wall_time_iqr(self, cache, backend, shape, dtype):
        """Interquartile range of the wall time, seconds."""
        return self._value("wall_time_iqr_ms") * 1e-3

    track_wall_time_iqr.unit = "seconds"

    def track_bandwidth(self, cache, backend, shape, dtype):
        """Effective bandwidth, bytes moved / device time (host time on the CPU), GB/s."""
        return self._value("bandwidth_gbps")

    track_bandwidth.unit = "GB/s"

    def track_pct_of_ceiling(self, cache, backend, shape, dtype):
        """Effective bandwidth as % of this run's copy ceiling."""
        return self._value("pct_of_ceiling")

    track_pct_of_ceiling.unit = "%"


class _ComputeMetrics:
    """Metrics added to the class of an op that declares its arithmetic (``Op.flops``)."""

    def track_tflops(self, cache, backend, shape, dtype):
        """Throughput, declared flops / device time (host time on the CPU), TFLOP/s."""
        return self._value("tflops")

    track_tflops.unit = "TFLOP/s"

    def track_pct_of_peak(self, cache, backend, shape, dtype):
        """Throughput as % of this run's matrix peak (a large bfloat16 matmul)."""
        return self._value("pct_of_peak")

    track_pct_of_peak.unit = "%"


def suite_class(op: Op) -> type:
    """The asv class for ``op``: named after it (``Gelu``), params = backends × shapes × the op's
    dtypes; with TFLOP/s and % of peak when the op declares flops."""
    params = [list(BACKENDS), [shape_label(s) for s in op.grids["default"]], list(op.dtypes)]
    bases = (_OpSuite, _ComputeMetrics) if op.flops is not None else (_OpSuite,)
    return type(class_name(op.name), bases, {"op": op.name, "params": params,
                                              "__module__": "benchmarks.suite"})
