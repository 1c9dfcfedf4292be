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
from typing import TYPE_CHECKING

from fusebench import metrictable
from fusebench.axes import BACKENDS, shape_label
from fusebench.metrictable import Metric

if TYPE_CHECKING:  # the registry imports torch; writing results from a record must not
    from fusebench.registry import Op

#: Environment variable naming a sweep file to publish instead of measuring again.
SWEEP_ENV = "FUSEBENCH_SWEEP"
#: Bump when a metric's meaning changes (asv then starts a new history line).
SUITE_VERSION = "1"
#: asv names benchmarks ``<module>.<Class>.<method>``; the module is ``benchmarks/suite.py``.
BENCHMARK_MODULE = "suite"


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


#: The record fields a benchmark process reads: the key, the status and every metric's field.
#: asv forks one process per metric and parameter combination and each unpickles the cache, so
#: the cache holds only these (an H200 sweep's full records made it 0.5 MB per process).
CACHED_FIELDS = ("op", "backend", "shape", "dtype", "status", "reason",
                 *(m.field for m in metrictable.METRICS))


def load_records(ops=()) -> dict:
    """The records asv publishes: read from ``$FUSEBENCH_SWEEP``, or measured now over ``ops``
    (the :class:`~fusebench.registry.Op` objects the suite was generated from).

    Every op's records: asv keys a ``setup_cache`` by its source line, so the one defined in
    :class:`_OpSuite` runs once per ``asv run`` and all generated classes share its value.

    Returns ``{"records": {(op, backend, shape, dtype): {field: value} for CACHED_FIELDS},
    "ceiling_gbps": ..., "peak_tflops": ...}``.
    """
    path = os.environ.get(SWEEP_ENV)
    if path:
        from fusebench.record import Sweep

        result = Sweep.load(Path(path))
    else:
        from fusebench.measure import sweep

        result = sweep.run(ops)
    records = {r.key: {f: getattr(r, f) for f in CACHED_FIELDS}
               for r in result.records}
    return {"records": records, "ceiling_gbps": result.ceiling_gbps, "peak_tflops": result.peak_tflops}


class _OpSuite:
    """Base of the generated classes; ``op`` (its op's name) and ``ops`` (every op of the
    suite) are set on each subclass."""

    op = ""
    ops: tuple = ()
    param_names = ["backend", "shape", "dtype"]
    timeout = 3600  # setup_cache measures the whole sweep when no sweep file is given
    version = SUITE_VERSION

    def setup_cache(self):
        return load_records(self.ops)

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



def _track(m: Metric):
    """The asv ``track_*`` method of metric ``m``: the record's value, scaled to ``m.unit``."""

    def track(self, cache, backend, shape, dtype):
        return self._value(m.field) * m.scale

    track.__name__ = m.name
    track.__doc__ = m.doc
    track.unit = m.unit
    return track


def suite_class(op: Op, ops: tuple[Op, ...] = ()) -> type:
    """The asv class for ``op``: named after it (``Gelu``), params = backends × shapes × the op's
    dtypes, one ``track_*`` method per metric of :mod:`fusebench.metrictable` (TFLOP/s and % of
    peak only when the op declares flops). ``ops``: every op of the suite, measured by the shared
    ``setup_cache`` when no sweep file is given (default: ``op`` alone)."""
    params = [list(BACKENDS), [shape_label(s) for s in op.grids["default"]], list(op.dtypes)]
    body = {"op": op.name, "ops": tuple(ops) or (op,), "params": params, "__module__": "benchmarks.suite"}
    body.update({m.name: _track(m) for m in metrictable.for_op(op.flops is not None)})
    return type(class_name(op.name), (_OpSuite,), body)


def suite_classes(ops) -> list[type]:
    """One asv class per op of ``ops`` (an iterable of :class:`~fusebench.registry.Op`, handed
    over by ``benchmarks/suite.py``), each knowing all of them (see :func:`suite_class`)."""
    ops = tuple(ops)
    return [suite_class(op, ops) for op in ops]
