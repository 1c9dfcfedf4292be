"""How time is measured: warm-up, device time with CUDA events, wall time, host time on the CPU.

Method (the one ``triton.testing.do_bench`` and NVIDIA's nvbench use):

* warm-up until compilation and lazy loading are done; the first call is never timed;
* device time: a CUDA event pair around each repeat, one synchronize at the end, per-repeat
  ``elapsed_time`` (CUDA Runtime API, ``cudaEventElapsedTime``: resolution about 0.5 µs).
  Each batch of repeats is queued behind a *blocking kernel* (a spin of known length, the
  method of NVIDIA's nvbench) so the GPU never waits for the host: the events then time the
  kernels, not Python's launch overhead, even for kernels shorter than their launch;
  *cold* mode writes a buffer twice the size of L2 before each repeat, outside the event pair,
  so each timed call reads its input from HBM; *hot* mode runs back to back on the same buffers,
  a batch of calls between each event pair (nvbench's "batch GPU time"): each repeat lasts at
  least ``HOT_BATCH_MS``, so the fixed cost of recording an event pair (about 2 µs on an H200,
  the device time of an empty call) is spread over the batch instead of added to every call;
* graph device time: ``calls`` calls captured in one CUDA graph and replayed, an event pair
  around each replay, queued behind the blocking kernel: what the GPU does when the host is out
  of the way (no launch gaps); the regime of ``triton.testing.do_bench_cudagraph``;
* wall time: synchronize, host ``perf_counter``, call, synchronize, read the clock: what a
  caller sees, launch overhead and Python included;
* on the CPU, host clocks only (there is no asynchronous device to wait for).

Every summary is the median and the interquartile range of the repeats. :func:`measure` is the
sequence every caller uses (warm up, repeats from the estimate and a time budget, time);
the sweep, which times four ways per round, shares its first step (:func:`warm_up`, then
:func:`repeats_for` per mode: cold mode counts its flush in the budget).
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass
from typing import Callable

import torch

from fusebench.measure import stopping
from fusebench.measure.stopping import StopRule

#: Time one measurement (one mode of one case) should take, in seconds: repeats are chosen to
#: fill it, within [MIN_REPEATS, MAX_REPEATS].
BUDGET_S = 0.1
MIN_REPEATS = 20
MAX_REPEATS = 500


@dataclass(frozen=True)
class Timing:
    """Summary of repeated timings.

    Attributes:
        median_ms: median of the repeats, milliseconds.
        iqr_ms: interquartile range (q3 - q1), milliseconds.
        repeats: number of timed repeats.
        clock: ``"cuda-events"``, ``"cuda-graph"`` (replays of a captured graph), ``"wall"`` (host
            clock with synchronization) or ``"host"``.
    """

    median_ms: float
    iqr_ms: float
    repeats: int
    clock: str

    @property
    def noise(self) -> float:
        """Relative spread, iqr / median (nvbench calls it noise); dimensionless."""
        return self.iqr_ms / self.median_ms if self.median_ms > 0 else float("nan")

    @classmethod
    def from_samples(cls, samples_ms: list[float], clock: str) -> "Timing":
        """Summarize ``samples_ms`` (at least one value, ms).

        Raises:
            ValueError: no samples.
        """
        if not samples_ms:
            raise ValueError("no timing samples")
        if len(samples_ms) == 1:
            return cls(samples_ms[0], 0.0, 1, clock)
        q1, _, q3 = statistics.quantiles(samples_ms, n=4, method="inclusive")
        return cls(statistics.median(samples_ms), q3 - q1, len(samples_ms), clock)


def synchronize(device: torch.device) -> None:
    """Wait for all work on ``device``; a no-op on the CPU."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def warm_up(fn: Callable[[], object], device: torch.device, calls: int = 3) -> float:
    """Call ``fn`` ``calls`` times (JIT, autotuning, lazy module loading), then time one more.

    Returns:
        Seconds one call took after warm-up, with synchronization: the estimate repeats are
        chosen from.
    """
    for _ in range(calls):
        fn()
    synchronize(device)
    start = time.perf_counter()
    fn()
    synchronize(device)
    return time.perf_counter() - start


def repeats_for(estimate_s: float, budget_s: float = BUDGET_S, lo: int = MIN_REPEATS,
                hi: int = MAX_REPEATS) -> int:
    """Repeats that fill ``budget_s`` seconds at ``estimate_s`` seconds per call, within [lo, hi]
    (default [MIN_REPEATS, MAX_REPEATS]); ``hi`` when there is no estimate (``estimate_s <= 0``)."""
    if estimate_s <= 0:
        return hi
    return max(lo, min(hi, int(budget_s / estimate_s)))


def planned_repeats(fn: Callable[[], object], device: torch.device, budget_s: float = BUDGET_S,
                    warm_up_calls: int = 3, bounds: tuple[int, int] = (MIN_REPEATS, MAX_REPEATS)) -> int:
    """Warm ``fn`` up (:func:`warm_up`, ``warm_up_calls`` calls), then the repeats that fill
    ``budget_s`` seconds at the time of one warmed-up call, within ``bounds`` (:func:`repeats_for`).

    The first step of :func:`measure`, which times with one clock after it.
    """
    return repeats_for(warm_up(fn, device, warm_up_calls), budget_s, *bounds)


def l2_flush_buffer(device: torch.device) -> torch.Tensor:
    """A buffer twice the size of ``device``'s L2 cache (int8), written to evict L2 in cold mode."""
    props = torch.cuda.get_device_properties(device)
    size = max(2 * getattr(props, "L2_cache_size", 0), 256 << 20)
    return torch.empty(size, dtype=torch.int8, device=device)


_FLUSH_MS: dict[tuple[int, int], float] = {}


def flush_ms(flush: torch.Tensor) -> float:
    """GPU time of one cold-mode flush (zeroing ``flush``), ms: the smallest of three medians of
    five, measured once per buffer."""
    key = (flush.data_ptr(), flush.numel())
    if key not in _FLUSH_MS:
        _FLUSH_MS[key] = min(device_time(flush.zero_, 5).median_ms for _ in range(3))
    return _FLUSH_MS[key]

#: Longest blocking kernel, ms (a group of repeats is at most what the host enqueues in that time).
BLOCK_MS_MAX = 50.0
#: The clock a blocking kernel's cycle count assumes, GHz, when the GPU does not report its own
#: (a slower clock only makes the spin longer, which is harmless; a faster one shorter).
BLOCK_CLOCK_GHZ = 2.0
#: The blocking kernel's lead, ms, beyond the host's deficit (:func:`queued_samples`): it covers
#: the first repeat's launch and a host pause early in a group.
BLOCK_LEAD_MS = 1.0


def block_clock_ghz(device: torch.device | int | None = None) -> float:
    """The SM clock a blocking kernel's cycles are counted in, GHz: the GPU's highest clock
    (``cudaDeviceProp.clockRate``) where torch reports it, else :data:`BLOCK_CLOCK_GHZ`; never
    less than that (the spin lasts at least its nominal length at any clock up to it)."""
    props = torch.cuda.get_device_properties(torch.cuda.current_device() if device is None else device)
    rate_khz = getattr(props, "clock_rate", 0) or 0
    return max(BLOCK_CLOCK_GHZ, rate_khz / 1e6)


def enqueue_ms(fn: Callable[[], object], calls: int = 5,
               pick: Callable[[list[float]], float] = max) -> float:
    """Host time to *launch* one call of ``fn`` (no synchronization), ms: ``pick`` (default the
    slowest) of ``calls`` launches."""
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    torch.cuda.synchronize()
    return pick(times) * 1e3


#: The host's time to enqueue one call, estimated from five launches: 1.25 x their median for a call
#: of one launch, twice the slowest for a call of several or an unknown number (an eager chain's
#: launches vary more from call to call, and a short estimate lets the GPU wait between them).
ONE_LAUNCH_ESTIMATE = (1.25, statistics.median)
SEVERAL_LAUNCHES_ESTIMATE = (2.0, max)


def host_ms_per_call(fn: Callable[[], object], launches: int | None = None) -> float:
    """The host's time to enqueue one call of ``fn``, ms, as the blocking kernel is sized from it
    (:data:`ONE_LAUNCH_ESTIMATE`, :data:`SEVERAL_LAUNCHES_ESTIMATE`)."""
    factor, pick = ONE_LAUNCH_ESTIMATE if launches == 1 else SEVERAL_LAUNCHES_ESTIMATE
    return factor * enqueue_ms(fn, 5, pick)


def device_time(
    fn: Callable[[], object], repeats: int, flush: torch.Tensor | None = None, calls: int = 1,
    gpu_ms: float = 0.0, launches: int | None = None, rule: StopRule | None = None,
) -> Timing:
    """Device time of one call of ``fn`` on the current CUDA stream, CUDA events around each repeat.

    A repeat is ``calls`` back-to-back calls between one event pair; its sample is the elapsed
    time divided by ``calls``. Repeats are queued in groups, each behind a blocking kernel
    (:func:`queued_samples`), so no repeat waits on the host.

    Args:
        fn: ready callable (warmed up).
        repeats: number of timed repeats (samples); with ``rule``, the most of them (the cap).
        flush: when given (cold mode), zeroed before each repeat, outside the timed region.
        calls: calls per repeat, >= 1 (hot mode: see :func:`hot_calls`).
        gpu_ms: GPU time one repeat takes at least (its calls, and the flush), ms, where the caller
            knows it: the blocking kernel then covers only the host time beyond it.
        launches: kernel launches per call where the caller knows them (:func:`host_ms_per_call`).
        rule: the stopping rule (``fusebench.measure.stopping``): repeats in doubling chunks, each
            a queued block of its own, until the median is known well enough or ``repeats`` are
            taken; None: all ``repeats`` in one go.

    Returns:
        Median and interquartile range of the per-call samples, ms.

    Raises:
        ValueError: ``calls < 1``, or ``calls > 1`` with ``flush`` (a flush between the calls of a
            batch would be timed).
    """
    if calls < 1 or (calls > 1 and flush is not None):
        raise ValueError(f"device_time: calls must be 1 in cold mode and >= 1, got {calls}")
    # The host's time per repeat: its calls, two event records and maybe the flush.
    per_repeat_ms = calls * host_ms_per_call(fn, launches) + 0.02

    def body() -> None:
        for _ in range(calls):
            fn()

    def take(n: int) -> list[float]:
        elapsed = queued_samples(body, n, per_repeat_ms, None if flush is None else flush.zero_, gpu_ms)
        return [ms / calls for ms in elapsed]

    samples = take(repeats) if rule is None else stopping.sample_until(take, rule, repeats)
    return Timing.from_samples(samples, "cuda-events")


def block_ms(n: int, per_repeat_ms: float, gpu_ms: float = 0.0) -> float:
    """The blocking kernel's length, ms, ahead of ``n`` repeats that take the host ``per_repeat_ms``
    each to enqueue and the GPU at least ``gpu_ms`` each to run: the host's deficit over the group
    (the GPU, once started, can only catch up where a repeat takes the host longer than the GPU),
    plus :data:`BLOCK_LEAD_MS`."""
    return n * max(per_repeat_ms - gpu_ms, 0.0) + BLOCK_LEAD_MS


def queued_samples(body: Callable[[], object], repeats: int, per_repeat_ms: float,
                   before: Callable[[], object] | None = None, gpu_ms: float = 0.0) -> list[float]:
    """Elapsed ms of ``repeats`` runs of ``body``, each between one CUDA event pair, queued in
    groups behind a blocking kernel (``torch.cuda._sleep``, the method of NVIDIA's nvbench) long
    enough for the host to stay ahead of the GPU at ``per_repeat_ms`` host ms per repeat when a
    repeat keeps the GPU busy for at least ``gpu_ms`` (:func:`block_ms`), so that no repeat waits
    on the host. ``before`` runs before each repeat, outside its event pair (cold mode's flush)."""
    group = max(1, min(repeats, int(BLOCK_MS_MAX / per_repeat_ms)))
    cycles_per_ms = block_clock_ghz() * 1e6
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
    for i, (start, end) in enumerate(zip(starts, ends)):
        if i % group == 0:
            torch.cuda._sleep(int(block_ms(min(group, repeats - i), per_repeat_ms, gpu_ms) * cycles_per_ms))
        if before is not None:
            before()
        start.record()
        body()
        end.record()
    torch.cuda.synchronize()
    return [start.elapsed_time(end) for start, end in zip(starts, ends)]


#: Hot mode: a timed repeat lasts at least this long (ms), as a batch of back-to-back calls...
HOT_BATCH_MS = 0.2
#: ... of at most this many calls.
HOT_MAX_CALLS = 64


def hot_calls(fn: Callable[[], object], one_call_ms: float | None = None) -> int:
    """Calls per hot repeat: enough back-to-back calls of ``fn`` to fill ``HOT_BATCH_MS``.

    From a short per-call event measurement (``one_call_ms`` when the caller has it), which
    overestimates short calls (it includes the event pair's fixed cost), so the batch errs short.
    Method: NVIDIA nvbench, "batch GPU time".
    """
    if one_call_ms is None:
        one_call_ms = device_time(fn, 5).median_ms
    return max(1, min(HOT_MAX_CALLS, math.ceil(HOT_BATCH_MS / max(one_call_ms, 1e-6))))


def wall_time(fn: Callable[[], object], repeats: int, device: torch.device,
              rule: StopRule | None = None) -> Timing:
    """Host-clock time of ``fn`` with synchronization before and after each repeat.

    On a CUDA device this is wall time (launch overhead included, clock ``"wall"``); on the
    CPU it is the only clock there is (``"host"``). With ``rule`` (``fusebench.measure.stopping``),
    ``repeats`` is the most and the repeats stop once the median is known well enough.
    """

    def take(n: int) -> list[float]:
        samples = []
        for _ in range(n):
            synchronize(device)
            start = time.perf_counter()
            fn()
            synchronize(device)
            samples.append((time.perf_counter() - start) * 1e3)
        return samples

    samples = take(repeats) if rule is None else stopping.sample_until(take, rule, repeats)
    return Timing.from_samples(samples, "wall" if device.type == "cuda" else "host")


def hot_device_time(fn: Callable[[], object], repeats: int, calls: int | None = None) -> Timing:
    """Hot device time of one call of ``fn``: batches of ``calls`` back-to-back calls.

    ``calls`` defaults to :func:`hot_calls` (measured now); a caller that fixed it before (the
    sweep, once per case) passes it. ``repeats`` is the number of calls the caller budgets for;
    it is divided among the batches (at least ``MIN_REPEATS`` of them). Returns the median and
    IQR per call, ms.
    """
    if calls is None:
        calls = hot_calls(fn)
    return device_time(fn, max(MIN_REPEATS, repeats // calls), calls=calls)


#: Graph mode: calls captured in one graph, enough to last this long (ms), so that the event
#: pair's and the replay's fixed costs are spread over them ...
GRAPH_BATCH_MS = 0.2
#: ... within these bounds (a longer graph costs more to capture and instantiate than it gains).
GRAPH_CALLS = (1, 256)


class CaptureError(RuntimeError):
    """``fn`` cannot be captured in a CUDA graph (it synchronizes, uses another stream, ...)."""


def graph_calls(one_call_ms: float) -> int:
    """Calls per captured graph for a call of ``one_call_ms``: enough to fill ``GRAPH_BATCH_MS``,
    within :data:`GRAPH_CALLS`."""
    lo, hi = GRAPH_CALLS
    return max(lo, min(hi, math.ceil(GRAPH_BATCH_MS / max(one_call_ms, 1e-6))))


def capture(fn: Callable[[], object], calls: int) -> "torch.cuda.CUDAGraph":
    """``calls`` back-to-back calls of ``fn`` captured in one CUDA graph.

    Warm-up runs on a side stream first, as ``torch.cuda.graphs`` documents (lazy allocations and
    cuBLAS workspaces happen outside the capture). Outputs allocated during capture live in the
    graph's private memory pool and are reused by each replay.

    Raises:
        CaptureError: the capture failed (the reason is the first line of CUDA's or torch's error).
    """
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.stream(side):
            for _ in range(3):
                fn()
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        with torch.cuda.graph(graph):
            for _ in range(calls):
                fn()
        torch.cuda.synchronize()
    except Exception as exc:  # capture errors are RuntimeError, AssertionError, or a library's own
        torch.cuda.synchronize()
        text = str(exc).strip().splitlines()
        raise CaptureError(text[0] if text else type(exc).__name__) from exc
    return graph


def graph_device_time(fn: Callable[[], object], repeats: int, calls: int, gpu_ms: float = 0.0) -> Timing:
    """Graph device time of one call of ``fn``: ``calls`` calls captured in one CUDA graph
    (:func:`capture`), ``repeats`` replays, each between one event pair (:func:`queued_samples`);
    a sample is the replay's elapsed time / ``calls``, ms (median and IQR returned).

    Raises:
        CaptureError: ``fn`` cannot be captured.
    """
    return graph_replays(fn, repeats, calls, gpu_ms)[0]


def graph_replays(fn: Callable[[], object], repeats: int, calls: int, gpu_ms: float = 0.0,
                  read: Callable[[], float] | None = None) -> tuple[Timing, tuple[float, float] | None]:
    """:func:`graph_device_time`, and with ``read`` (a reader of NVML's total-energy counter, mJ:
    ``fusebench.measure.energy.counter``) the counter's rise over the replays and the host seconds
    between its two readings: ``(timing, (mj, seconds))``, else ``(timing, None)``.

    The replays are one queued block (one blocking kernel, one synchronization at its end), so the
    GPU runs nothing but the replays between the readings, bar the blocking kernel: ``gpu_ms``
    (the GPU time one replay takes at least, where the caller knows it) shortens that kernel to
    its lead (:func:`block_ms`), which the reading then holds instead of a spin as long as the
    host's enqueueing.

    Raises:
        CaptureError: ``fn`` cannot be captured.
    """
    graph = capture(fn, calls)
    try:
        graph.replay()  # the first replay uploads the graph: never timed
        torch.cuda.synchronize()
        start = time.perf_counter()
        graph.replay()
        per_repeat_ms = 2.0 * (time.perf_counter() - start) * 1e3 + 0.02
        if read is not None:  # the timing replay done first: the reading holds the block alone
            torch.cuda.synchronize()
            before, began = read(), time.perf_counter()
        elapsed = queued_samples(graph.replay, repeats, per_repeat_ms, gpu_ms=gpu_ms)
        reading = (read() - before, time.perf_counter() - began) if read is not None else None
        return Timing.from_samples([ms / calls for ms in elapsed], "cuda-graph"), reading
    finally:
        graph.reset()


#: What :func:`measure` times: ``"hot"``, hot device time on a GPU and the host clock on the CPU;
#: ``"wall"``, wall time on any device.
CLOCKS = ("hot", "wall")


def measure(fn: Callable[[], object], device: torch.device, budget_s: float = BUDGET_S, *,
            clock: str = "hot", warm_up_calls: int = 3,
            bounds: tuple[int, int] = (MIN_REPEATS, MAX_REPEATS)) -> Timing:
    """Time ``fn`` the one way every caller does: warm up, choose the repeats, time.

    Method: ``warm_up_calls`` untimed calls (compilation, autotuning, lazy loading), one more
    timed with the host clock as the estimate; repeats that fill ``budget_s`` seconds at that
    estimate, within ``bounds`` (:func:`planned_repeats`); then, with ``clock="hot"``, hot device
    time on a CUDA device (:func:`hot_device_time`: CUDA events around batches of back-to-back
    calls, behind a blocking kernel; the method of ``triton.testing.do_bench`` and NVIDIA
    nvbench) or the host clock on the CPU (:func:`wall_time`); with ``clock="wall"``, wall time
    (synchronize, ``perf_counter``, call, synchronize) on any device.

    Args:
        fn: zero-argument callable (a ready backend closure).
        device: where ``fn`` runs (``cuda`` or ``cpu``).
        budget_s: seconds the timed repeats should take, about.
        clock: one of :data:`CLOCKS`.
        warm_up_calls: untimed calls before the estimate, >= 0.
        bounds: (fewest, most) repeats.

    Returns:
        Median and interquartile range per call, milliseconds, with the repeats and the clock
        (``"cuda-events"``, ``"wall"`` or ``"host"``).

    Raises:
        ValueError: ``clock`` not one of :data:`CLOCKS`.
    """
    if clock not in CLOCKS:
        raise ValueError(f"measure: clock must be one of {', '.join(CLOCKS)}, got {clock!r}")
    reps = planned_repeats(fn, device, budget_s, warm_up_calls, bounds)
    if clock == "hot" and device.type == "cuda":
        return hot_device_time(fn, reps)
    return wall_time(fn, reps, device)
