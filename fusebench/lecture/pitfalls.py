"""The two classic GPU timing mistakes, measured side by side on the same work (``make pitfalls``).

The work is the matmul op's ``torch`` backend, ``X @ X`` with X n x n (default 4096 on a GPU,
as in the lecture's demo; 1024 on the CPU, where 4096 takes seconds per call).

1. **Timing the first call.** The first call after the inputs exist (CUDA context already up)
   also pays one-time costs: cuBLAS handle and workspace creation, lazy loading of the kernel
   module, the CPU BLAS's thread pool. Measured: host clock with synchronization around that
   first call, against the median of the same clock over warmed-up calls.
   ``first_call_ratio`` = first / warmed-up median: how much the first call overstates.
2. **A host clock without synchronization.** CUDA launches are asynchronous: ``fn()`` returns
   once the kernel is queued. Measured over ``launches`` back-to-back calls (10 by default):
   the host clock read right after the last launch (no synchronize), the host clock after a
   synchronize, and CUDA events recorded around the same launches; each divided by
   ``launches``. ``understatement`` = events / no-sync: how much the unsynchronized clock
   understates. On the CPU this mistake does not exist (see :data:`CPU_NOTE`).

Each of the three clocks is taken over ``rounds`` separate runs; the medians are reported.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass

import torch

from fusebench.measure import inputs, timing
from fusebench.registry import PRECISIONS, Op

#: Why the synchronization pitfall cannot be shown on the CPU.
CPU_NOTE = ("On the CPU there is no asynchronous queue: each PyTorch op runs to completion before "
            "the call returns, so a host clock without synchronization already measures the work. "
            "The synchronization pitfall exists only on an asynchronous device (a GPU).")

DEFAULT_N_CUDA, DEFAULT_N_CPU = 4096, 1024


@dataclass
class PitfallsResult:
    """The figures of one pitfalls run; times in ms (per call).

    ``nosync_ms``, ``synced_ms``, ``events_ms`` and ``understatement`` are None on the CPU.
    """

    device: str
    n: int
    dtype: str
    launches: int
    rounds: int
    first_call_ms: float
    warm_median_ms: float
    warm_iqr_ms: float
    warm_repeats: int
    first_call_ratio: float
    nosync_ms: float | None = None
    synced_ms: float | None = None
    events_ms: float | None = None
    understatement: float | None = None
    note: str = ""


def _first_call_ms(fn, dev: torch.device) -> float:
    timing.synchronize(dev)
    start = time.perf_counter()
    fn()
    timing.synchronize(dev)
    return (time.perf_counter() - start) * 1e3


def _launch_clocks(fn, launches: int) -> tuple[float, float, float]:
    """One round on a GPU: (no-sync host, synced host, CUDA events) time per launch, ms."""
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(launches):
        fn()
    nosync = time.perf_counter() - start  # the mistake: the GPU is still working
    torch.cuda.synchronize()
    synced = time.perf_counter() - start
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    begin.record()
    for _ in range(launches):
        fn()
    end.record()
    torch.cuda.synchronize()
    return nosync * 1e3 / launches, synced * 1e3 / launches, begin.elapsed_time(end) / launches


def measure(matmul: Op, dev: torch.device, n: int | None = None, dtype: str = "float32",
            launches: int = 10, rounds: int = 5, warm_budget_s: float = 0.5) -> PitfallsResult:
    """Measure both pitfalls on ``dev`` for an ``n x n`` matmul in ``dtype`` (a dtype-axis name).

    Call this before any other matmul in the process, or the "first call" is not the first.

    Args:
        matmul: the matmul op (``kernels/matmul/__init__.py``); its ``torch`` backend is timed.
        n: matrix size; default 4096 on a GPU, 1024 on the CPU.
        launches: back-to-back calls per round for the synchronization pitfall (>= 1).
        rounds: rounds per clock (>= 1); the median is reported.
        warm_budget_s: seconds of warmed-up calls to take the median of (5 to 50 calls).

    Raises:
        ValueError: ``n``, ``launches`` or ``rounds`` below 1.
        SkipCase: ``dtype`` cannot run on ``dev`` (tf32 on the CPU).
    """
    if n is None:
        n = DEFAULT_N_CUDA if dev.type == "cuda" else DEFAULT_N_CPU
    if min(n, launches, rounds) < 1:
        raise ValueError(f"n, launches and rounds must be >= 1 (got {n}, {launches}, {rounds})")
    precision = PRECISIONS[dtype]
    x = inputs.make_input((n, n), precision.dtype, str(dev))
    fn = precision.bind(matmul.get_backend("torch").factory, x)

    first = _first_call_ms(fn, dev)
    warm = timing.measure(fn, dev, warm_budget_s, clock="wall", bounds=(5, 50))
    res = PitfallsResult(dev.type, n, dtype, launches, rounds, first, warm.median_ms, warm.iqr_ms,
                         warm.repeats, first / warm.median_ms)
    if dev.type != "cuda":
        res.note = CPU_NOTE
        return res
    clocks = [_launch_clocks(fn, launches) for _ in range(rounds)]
    res.nosync_ms, res.synced_ms, res.events_ms = (statistics.median(c) for c in zip(*clocks))
    res.understatement = res.events_ms / res.nosync_ms
    return res


def render(res: PitfallsResult, header: str) -> str:
    """Markdown of a :class:`PitfallsResult`, ``header`` naming the device and versions."""
    flops = 2 * res.n ** 3
    out = [f"# Timing pitfalls: {res.n} x {res.n} matmul, {res.dtype}", "", header, "",
           "## 1. Timing the first call", "",
           "| measurement | ms per call |", "|---|---:|",
           f"| first call (host clock, synchronized) | {res.first_call_ms:.3f} |",
           f"| warmed-up median of {res.warm_repeats} (same clock) | {res.warm_median_ms:.3f} "
           f"(IQR {res.warm_iqr_ms:.3f}) |", "",
           f"**The first call overstates the steady-state time {res.first_call_ratio:.1f}x.**", "",
           "## 2. A host clock without synchronization", ""]
    if res.events_ms is None:
        out += [res.note]
    else:
        out += [f"{res.launches} back-to-back launches, median of {res.rounds} rounds, per launch:", "",
                "| clock | ms per launch | TFLOP/s it implies |", "|---|---:|---:|"]
        for label, ms in (("host clock, no synchronize (wrong)", res.nosync_ms),
                          ("host clock after synchronize", res.synced_ms),
                          ("CUDA events", res.events_ms)):
            out.append(f"| {label} | {ms:.4f} | {flops / (ms * 1e-3) / 1e12:.1f} |")
        out += ["", f"**Without synchronization the host clock understates the time "
                    f"{res.understatement:.0f}x**: it measures how long queueing the launches took, "
                    f"not the work."]
    return "\n".join(out)


def as_data(res: PitfallsResult) -> dict:
    """The JSON-serializable figures of ``res`` (stored with the report)."""
    return {"params": {"n": res.n, "dtype": res.dtype, "launches": res.launches, "rounds": res.rounds,
                       "work": "torch.matmul(x, x), the matmul op's torch backend"},
            "results": asdict(res)}
