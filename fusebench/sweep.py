"""The sweep: every case (op × backend × shape × dtype) gated, warmed up and timed, in one process.

One process measures all cases (compilation caches, the CUDA context and the copy ceiling are
shared); the asv suite then stores and publishes the records, one asv parameter combination per
case. Records are named the nvbench way: axes, samples, median, noise, cold or hot, skip reason.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Iterable

import torch

from fusebench import backends, correctness, environment, inputs, launches, metrics, timing
from fusebench.errors import SkipCase
from fusebench.registry import BACKENDS, PRECISIONS, Op, Shape, shape_label

#: Bump when the meaning of a record's fields changes (stored with each sweep).
FORMAT_VERSION = 1


@dataclass
class Record:
    """One case's outcome. Times in ms, bandwidth in GB/s, sizes in bytes, throughput in TFLOP/s.

    ``dtype`` is the dtype-axis name (``"tf32"`` included). ``flops``, ``tflops`` and
    ``pct_of_peak`` (of the run's matrix peak) are set for ops that declare their arithmetic;
    ``roofline`` says which ceiling bounds the op (``cache_flag`` applies to memory-bound ops).
    ``status`` is ``"ok"`` (gated and timed), ``"failed"`` (gate or run failed: ``reason``) or
    ``"skipped"`` (this machine or backend cannot run it: ``reason``). Device times are None on
    the CPU; there ``bandwidth_gbps`` comes from the host clock (``clock`` says which).
    """

    op: str
    backend: str
    shape: str
    dtype: str
    status: str = "ok"
    reason: str = ""
    seed: int = inputs.SEED
    bytes_moved: int = 0
    max_rel_error: float | None = None
    tolerance: float | None = None
    device_time_ms: float | None = None
    device_time_iqr_ms: float | None = None
    device_time_cold_ms: float | None = None
    device_time_cold_iqr_ms: float | None = None
    wall_time_ms: float | None = None
    wall_time_iqr_ms: float | None = None
    repeats: int | None = None
    noise: float | None = None
    clock: str | None = None
    bandwidth_gbps: float | None = None
    bandwidth_cold_gbps: float | None = None
    pct_of_ceiling: float | None = None
    cache_flag: bool = False
    launches: int | None = None
    compile_s: float | None = None
    clocks: dict = field(default_factory=dict)
    roofline: str = "memory"
    flops: int | None = None
    tflops: float | None = None
    pct_of_peak: float | None = None

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.op, self.backend, self.shape, self.dtype)


@dataclass
class Sweep:
    """All records of one run, with the environment and the ceilings they were measured in.

    ``peak_tflops`` is the matrix peak (``metrics.measure_matrix_peak``), measured only when an
    op of the run declares flops; None otherwise.
    """

    environment: dict
    ceiling_gbps: float
    grid: str
    records: list[Record]
    format_version: int = FORMAT_VERSION
    peak_tflops: float | None = None

    def save(self, path: Path) -> None:
        """Write as JSON (atomically: a temporary file, then a rename)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=1))
        tmp.replace(path)

    @classmethod
    def load(cls, path: Path) -> "Sweep":
        """Read a sweep written by :meth:`save`.

        Raises:
            ValueError: the file is not a sweep of this format version.
        """
        data = json.loads(Path(path).read_text())
        if data.get("format_version") != FORMAT_VERSION:
            raise ValueError(f"{path}: not a fusebench sweep of format {FORMAT_VERSION}")
        data["records"] = [Record(**r) for r in data["records"]]
        return cls(**data)

    def by_key(self) -> dict[tuple[str, str, str, str], Record]:
        return {r.key: r for r in self.records}


def grid_name(dev: torch.device, quick: bool) -> str:
    """``quick`` when asked, else ``default`` on a GPU and ``cpu`` on the CPU."""
    return "quick" if quick else ("default" if dev.type == "cuda" else "cpu")


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
    unless the case was built).
    """

    status: str = "ok"
    reason: str = ""
    fn: Callable[[], object] | None = None
    x: torch.Tensor | None = None
    gate: correctness.GateResult | None = None


def build_and_gate(op: Op, backend: str, shape: Shape, dtype: str, dev: torch.device) -> Built:
    """Build one case on its seeded input and run the correctness gate. Never raises for a
    failing backend: a :class:`SkipCase` becomes ``skipped``, any other error ``failed``.

    ``dtype`` is a dtype-axis name (:data:`fusebench.registry.PRECISIONS`).
    """
    precision = PRECISIONS[dtype]
    try:
        factory = op.get_backend(backend).factory
        x = inputs.make_input(shape, precision.dtype, str(dev))
        fn = precision.bind(factory, x)
    except SkipCase as exc:
        return Built("skipped", str(exc))
    except Exception as exc:
        return Built("failed", backends.first_line(exc))
    gate = correctness.check(op, fn, x, dtype)
    if not gate.passed:
        return Built("failed", f"correctness gate: {gate.reason}", gate=gate)
    return Built(fn=fn, x=x, gate=gate)


def run_case(op: Op, backend: str, shape: Shape, dtype: str, dev: torch.device,
             ceiling_gbps: float, flush: torch.Tensor | None,
             peak_tflops: float | None = None) -> Record:
    """Gate, warm up and time one case. Never raises for a failing backend (see ``status``).

    ``dtype`` is a dtype-axis name (:data:`fusebench.registry.PRECISIONS`); ``peak_tflops`` the
    run's matrix peak, needed for ``pct_of_peak`` of an op that declares flops.
    """
    precision = PRECISIONS[dtype]
    rec = Record(op.name, backend, shape_label(shape), dtype, roofline=op.roofline,
                 bytes_moved=op.bytes_moved(shape, precision.dtype),
                 flops=op.flops(shape) if op.flops else None)
    built = build_and_gate(op, backend, shape, dtype, dev)
    if built.gate is not None:
        rec.max_rel_error, rec.tolerance = built.gate.max_rel_error, built.gate.tolerance
    rec.compile_s = getattr(built.fn, "compile_s", None)
    if built.status != "ok":
        rec.status, rec.reason = built.status, built.reason
        return rec
    try:
        _time(rec, built.fn, dev, ceiling_gbps, flush, peak_tflops)
    except Exception as exc:
        rec.status, rec.reason = "failed", f"timing: {backends.first_line(exc)}"
    return rec


def _time(rec: Record, fn: Callable[[], object], dev: torch.device, ceiling_gbps: float,
          flush: torch.Tensor | None, peak_tflops: float | None) -> None:
    reps = timing.repeats_for(timing.warm_up(fn, dev))
    rec.repeats = reps
    if dev.type == "cuda":
        hot = timing.hot_device_time(fn, reps)
        cold = timing.device_time(fn, reps, flush)
        rec.device_time_ms, rec.device_time_iqr_ms = hot.median_ms, hot.iqr_ms
        rec.device_time_cold_ms, rec.device_time_cold_iqr_ms = cold.median_ms, cold.iqr_ms
        rec.bandwidth_cold_gbps = metrics.effective_bandwidth_gbps(rec.bytes_moved, cold.median_ms)
        rec.launches = launches.launches_per_call(fn, dev)
        rec.clocks = environment.clocks(dev)
        main = hot
    wall = timing.wall_time(fn, min(reps, 100), dev)
    rec.wall_time_ms, rec.wall_time_iqr_ms = wall.median_ms, wall.iqr_ms
    if dev.type != "cuda":
        main = wall
    rec.clock, rec.noise = main.clock, main.noise
    rec.bandwidth_gbps = metrics.effective_bandwidth_gbps(rec.bytes_moved, main.median_ms)
    rec.pct_of_ceiling = metrics.pct_of_ceiling(rec.bandwidth_gbps, ceiling_gbps)
    rec.cache_flag = rec.roofline == "memory" and rec.pct_of_ceiling > metrics.CACHE_FLAG_PCT
    if rec.flops is not None:
        rec.tflops = metrics.tflops(rec.flops, main.median_ms)
        if peak_tflops:
            rec.pct_of_peak = metrics.pct_of_peak(rec.tflops, peak_tflops)


def progress_line(i: int, n: int, rec: Record) -> str:
    """One line per case, e.g. ``[ 12/255] gelu triton 16777216 float32  ok 0.0421 ms ...``."""
    head = f"[{i:>{len(str(n))}}/{n}] {rec.op:<8} {rec.backend:<8} {rec.shape:>12} {rec.dtype:<9}"
    if rec.status != "ok":
        return f"{head} {rec.status}: {rec.reason}"
    t = rec.device_time_ms if rec.device_time_ms is not None else rec.wall_time_ms
    text = f"{head} ok {t:9.4f} ms ±{100 * rec.noise:4.1f}% "
    if rec.roofline == "compute":
        text += f"{rec.tflops:8.2f} TFLOP/s"
        if rec.pct_of_peak is not None:
            text += f" {rec.pct_of_peak:5.1f}% of peak"
    else:
        text += f"{rec.bandwidth_gbps:8.1f} GB/s {rec.pct_of_ceiling:5.1f}% of ceiling"
    if rec.launches is not None:
        text += f"  {rec.launches} launch{'es' if rec.launches != 1 else ''}"
    if rec.cache_flag:
        text += "  (above the copy ceiling: caches measured)"
    return text


def run(ops: Iterable[Op], *, quick: bool = False, backend_names: Iterable[str] = BACKENDS,
        dtype_names: Iterable[str] = PRECISIONS, out=sys.stderr) -> Sweep:
    """Measure every case on this machine's device, printing a progress line per case to ``out``."""
    dev = environment.device()
    grid = grid_name(dev, quick)
    todo = cases(ops, grid, backend_names, dtype_names)
    env = environment.capture(dev)
    ceiling = metrics.measure_copy_ceiling(dev)
    peak = metrics.measure_matrix_peak(dev) if any(op.flops for op, *_ in todo) else None
    print(f"fusebench: {len(todo)} cases on {env.get('gpu', 'the CPU')} ({grid} grid); copy ceiling "
          f"{ceiling.gbps:.0f} GB/s" + (f"; matrix peak {peak.tflops:.3g} TFLOP/s ({peak.dtype} "
                                        f"{peak.n}^3)" if peak else ""), file=out, flush=True)
    peak_tflops = peak.tflops if peak else None
    flush = timing.l2_flush_buffer(dev) if dev.type == "cuda" else None
    records, start = [], time.perf_counter()
    for i, (op, backend, shape, dtype) in enumerate(todo, 1):
        rec = run_case(op, backend, shape, dtype, dev, ceiling.gbps, flush, peak_tflops)
        records.append(rec)
        print(progress_line(i, len(todo), rec), file=out, flush=True)
        if dev.type == "cuda" and rec.status == "failed":
            torch.cuda.empty_cache()  # e.g. after an out-of-memory failure
    inputs.clear()
    env["clocks_after"] = environment.clocks(dev)
    env["sweep_seconds"] = round(time.perf_counter() - start, 1)
    return Sweep(env, ceiling.gbps, grid, records, peak_tflops=peak_tflops)

