"""Run a profiling plan: every case ready before the window opens, then one range per case inside it.

1. :func:`prepare` (outside any capture window): build the backend (compilation, extension
   build), pass the correctness gate, warm up, and on a GPU measure the harness's own device
   time (:func:`fusebench.measure.timing.device_time`) and how long the host takes to launch one call.
2. :func:`rewarm`, just before the window: call every ready case again. Building a ``compile``
   case resets Dynamo's caches (``fusebench.backends.compiled``), so the cases compiled before
   it would otherwise recompile on their first call, inside the window. :func:`run_window`
   checks that no graph was compiled inside a range, and fails the case if one was.
3. :func:`run_window`: for each ready case, queue a blocking kernel long enough for the host to
   launch all the case's calls (the harness's method: the GPU then never waits for Python, so
   the range's projection times the kernels, as the harness's events do), open the case's
   range, launch ``calls`` calls, close the range, synchronize.

The window is either ``cudaProfilerStart`` / ``cudaProfilerStop`` with NVTX ranges (for
``nsys profile --capture-range=cudaProfilerApi``) or a ``torch.profiler`` session with
``record_function`` ranges of the same names (:func:`nvtx_window`, :func:`torch_window`).
"""

from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass, field
from typing import Callable, ContextManager, Iterator

import torch

from fusebench.errors import first_line
from fusebench.measure import sweep, timing
from fusebench.measure.torch_logs import quiet_profiler
from fusebench.nsys.capture_summary import SIDE_FORMAT
from fusebench.nsys.nvtx_ranges import Markers
from fusebench.nsys.plan import Case
from fusebench.registry import PRECISIONS, Op


@dataclass
class Prepared:
    """A case made ready, or the reason it cannot run.

    Attributes:
        case: the planned case.
        status: ``"ok"``, ``"skipped"`` (machine or backend cannot run it) or ``"failed"``
            (gate or run failed).
        reason: why not ok.
        fn: the ready zero-argument callable (None unless ok).
        bytes_moved: the op's declared traffic for the case, bytes.
        device_time: harness device time (CUDA events, hot), GPU only.
        launch_ms: host time to launch one call, ms (sizes the blocking kernel), GPU only.
        max_rel_error: the gate's normwise relative error.
    """

    case: Case
    status: str = "ok"
    reason: str = ""
    fn: Callable[[], object] | None = field(default=None, repr=False)
    bytes_moved: int = 0
    device_time: timing.Timing | None = None
    launch_ms: float | None = None
    max_rel_error: float | None = None

    def side_entry(self) -> dict:
        """The case's entry of the side file (JSON-serializable)."""
        c = self.case
        t = self.device_time
        return {"range": c.range, "op": c.op, "backend": c.backend, "shape": c.shape_label,
                "dtype": c.dtype, "calls": c.calls, "status": self.status, "reason": self.reason,
                "bytes_moved": self.bytes_moved, "max_rel_error": self.max_rel_error,
                "device_time_ms": t.median_ms if t else None,
                "device_time_iqr_ms": t.iqr_ms if t else None,
                "repeats": t.repeats if t else None}


def prepare(op: Op, case: Case, dev: torch.device) -> Prepared:
    """Build, gate, warm up and (on a GPU) time one case. Never raises for a failing backend."""
    p = Prepared(case, bytes_moved=op.bytes_moved(case.shape, PRECISIONS[case.dtype].dtype))
    built = sweep.build_and_gate(op, case.backend, case.shape, case.dtype, dev)
    p.max_rel_error = built.gate.max_rel_error if built.gate else None
    if built.status != "ok":
        p.status, p.reason = built.status, built.reason
        return p
    fn = built.fn
    try:
        if dev.type == "cuda":
            p.device_time = timing.measure(fn, dev)
            p.launch_ms = timing.enqueue_ms(fn)
        else:
            timing.warm_up(fn, dev)
    except Exception as exc:
        p.status, p.reason = "failed", f"warm-up or timing: {first_line(exc)}"
        return p
    p.fn = fn
    return p


def prepare_all(op: Op, cases: list[Case], dev: torch.device, out=sys.stderr) -> list[Prepared]:
    """:func:`prepare` every case, printing one line per case to ``out``."""
    done = []
    for i, case in enumerate(cases, 1):
        p = prepare(op, case, dev)
        done.append(p)
        head = f"[{i:>{len(str(len(cases)))}}/{len(cases)}] {case.range:<40}"
        if p.status != "ok":
            print(f"{head} {p.status}: {p.reason}", file=out, flush=True)
        elif p.device_time is not None:
            print(f"{head} ready, harness {p.device_time.median_ms * 1e3:10.1f} µs", file=out, flush=True)
        else:
            print(f"{head} ready", file=out, flush=True)
        if p.status == "failed" and dev.type == "cuda":
            torch.cuda.empty_cache()  # e.g. after an out-of-memory failure
    return done


def compiled_graphs() -> int:
    """Graphs torch.compile (Dynamo) has compiled in this process so far."""
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


def allow_recompiles(n: int) -> None:
    """Let Dynamo keep ``n`` compiled variants of one function (one per compiled case).

    Past its limit (8 by default) Dynamo stops compiling and runs the function eagerly; a plan
    with more ``compile`` cases than that would then time eager code under the name ``compile``.
    """
    from torch._dynamo import config

    for name in ("recompile_limit", "cache_size_limit"):  # the name since torch 2.6, the older one
        if hasattr(config, name):
            setattr(config, name, max(getattr(config, name), n))
            return


def rewarm(prepared: list[Prepared], dev: torch.device, calls: int = 2) -> None:
    """Call every ready case ``calls`` times just before the window (caches and clocks warm).

    A case that raises is marked failed, with its reason.
    """
    for p in prepared:
        if p.status != "ok":
            continue
        try:
            for _ in range(calls):
                p.fn()
            timing.synchronize(dev)
        except Exception as exc:
            p.status, p.reason = "failed", f"re-warm-up: {first_line(exc)}"


def block_ms(p: Prepared) -> float:
    """Length of the blocking kernel queued before a case's range, ms: twice the host's launch
    time for all its calls, at most :data:`fusebench.measure.timing.BLOCK_MS_MAX`."""
    per_call = 2.0 * (p.launch_ms or 0.0) + 0.02
    return min(timing.BLOCK_MS_MAX, p.case.calls * per_call)


def run_window(prepared: list[Prepared], dev: torch.device,
               enter: Callable[[Case], ContextManager]) -> None:
    """Run each ready case's calls inside ``enter(case)`` (its range), one case after another.

    A case that raises inside the window is marked failed, with its reason, and the rest runs.
    """
    for p in prepared:
        if p.status != "ok":
            continue
        fn, calls = p.fn, p.case.calls
        graphs = compiled_graphs()
        if dev.type == "cuda":  # last host work before the range: the spin must outlast the launches
            torch.cuda._sleep(int(block_ms(p) * timing.block_clock_ghz() * 1e6))
        try:
            with enter(p.case):
                for _ in range(calls):
                    fn()
            timing.synchronize(dev)
        except Exception as exc:
            p.status, p.reason = "failed", f"in the capture window: {first_line(exc)}"
            continue
        if compiled_graphs() != graphs:
            p.status, p.reason = "failed", "torch.compile compiled inside the capture window"


@contextlib.contextmanager
def nvtx_window(cases: list[Case]) -> Iterator[Callable[[Case], ContextManager]]:
    """The nsys window: ``cudaProfilerStart``, NVTX markers built for ``cases``, ..., ``Stop``.

    Yields ``enter(case)``, a context manager pushing and popping the case's NVTX range. The
    domain and its registered strings are created just after the window opens (host-only calls,
    once, before any case), so the capture holds their registration whatever nsys does with
    events from before the window.
    """
    cudart = torch.cuda.cudart()
    torch.cuda.synchronize()
    cudart.cudaProfilerStart()
    try:
        markers = Markers((c.range, c.color) for c in cases)

        @contextlib.contextmanager
        def enter(case: Case):
            markers.push(case.range)
            try:
                yield
            finally:
                markers.pop()

        yield enter
    finally:
        torch.cuda.synchronize()
        cudart.cudaProfilerStop()


@contextlib.contextmanager
def torch_window(dev: torch.device) -> Iterator[tuple[Callable[[Case], ContextManager], object]]:
    """A ``torch.profiler`` session (CPU activity, and CUDA on a GPU) with ``record_function`` ranges.

    Yields ``(enter, profiler)``; after the block, ``profiler.export_chrome_trace(path)`` writes
    a Chrome trace (open it in https://ui.perfetto.dev).
    """
    from torch.profiler import ProfilerActivity, profile, record_function

    activities = [ProfilerActivity.CPU]
    if dev.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    timing.synchronize(dev)
    quiet_profiler()  # no Kineto 'USDT: profiler_start/stop' lines on stderr
    with profile(activities=activities) as prof:
        yield (lambda case: record_function(case.range)), prof
        timing.synchronize(dev)


def side_file(op: Op, prepared: list[Prepared], environment: dict) -> dict:
    """The side file the summary reads: plan, statuses, bytes moved, harness device times."""
    return {"format": SIDE_FORMAT, "op": op.name, "environment": environment,
            "calls": prepared[0].case.calls if prepared else None,
            "cases": [p.side_entry() for p in prepared]}
