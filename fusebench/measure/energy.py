"""Energy per call, from NVML's total-energy counter: shown beside the times, never gated.

``nvmlDeviceGetTotalEnergyConsumption`` is the board's energy since the driver loaded, in mJ
(NVIDIA Volta and later). The counter advances in steps (about every 100 ms on an H200), so a
window read at arbitrary times holds a whole number of steps for a fraction of them in calls. The
window therefore runs from one observed step to the next: the case's calls go in chunks of about
:data:`CHUNK_MS` of GPU time, synchronized and followed by a reading; the first chunk after which
the counter changed starts it, the chunk after which it changed :data:`PERIODS` more times ends it,
and the rise over the calls of the chunks between is the energy of whole update periods over the
calls the GPU ran in them, to within one chunk. That is the whole board's energy, idle power
included (the short synchronizations between chunks too), as the GPU draws it while running the op
and nothing else. pJ per byte divides it by the op's declared bytes moved. On the CPU, or where
NVML or the counter is missing, nothing is measured (the fields stay None). Calls too short for the
host to keep the GPU busy include the GPU's idle power between launches: the figure is then what a
caller pays per call, not the kernel's.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable

import torch

from fusebench.measure import timing

#: GPU time of one chunk of calls (ms) between readings: a step is located to within one chunk,
#: so it is small beside the counter's update period.
CHUNK_MS = 2.0
#: Most calls in one chunk (a very short call is bounded by the host anyway).
MAX_CHUNK_CALLS = 20_000
#: Most host time one chunk may take to issue (s): a host-bound call ends its chunk on the host clock.
CHUNK_HOST_S = 0.005
#: Longest wait for the first step (s): two and a half update periods of an H200.
WAIT_S = 0.25
#: Update periods between the two observed steps.
PERIODS = 1
#: Fewest chunks between the two steps: the calls are counted to within one chunk, so more steps are
#: waited for while fewer (calls of several ms) would leave that error above 5 %.
MIN_CHUNKS = 20
#: Longest time from the first step to the last (s): by then the figure ends at the latest step
#: seen, and without one there is none.
CAP_S = 0.5


@dataclass(frozen=True)
class Energy:
    """One case's energy reading.

    Attributes:
        mj_per_call: the counter's rise between two observed steps / calls run between them, mJ.
        calls: calls counted between the two steps.
        seconds: the time between the two readings that saw the steps (host clock, synchronized).
    """

    mj_per_call: float
    calls: int
    seconds: float

    def pj_per_byte(self, bytes_moved: int) -> float | None:
        """Energy per byte the call must move, pJ (1 mJ = 1e9 pJ); None without bytes."""
        return self.mj_per_call * 1e9 / bytes_moved if bytes_moved else None


def counter(dev: torch.device) -> Callable[[], float] | None:
    """A reader of ``dev``'s total-energy counter (mJ), or None: the CPU, no NVML, or a GPU
    whose driver does not report it (checked with one reading)."""
    if dev.type != "cuda":
        return None
    from fusebench.measure.environment import _nvml_handle

    handle = _nvml_handle(dev.index or 0)
    if handle is None:
        return None
    import pynvml

    def read() -> float:
        return float(pynvml.nvmlDeviceGetTotalEnergyConsumption(handle))

    try:
        read()
    except Exception:  # NVML_ERROR_NOT_SUPPORTED on pre-Volta boards, an old driver
        return None
    return read


def per_call(fn: Callable[[], object], dev: torch.device, read: Callable[[], float],
             call_ms: float, *, chunk_ms: float = CHUNK_MS, chunk_host_s: float = CHUNK_HOST_S,
             wait_s: float = WAIT_S, periods: int = PERIODS, min_chunks: int = MIN_CHUNKS,
             cap_s: float = CAP_S) -> Energy | None:
    """Energy per call of ``fn`` between two observed steps of the counter.

    Args:
        fn: the case's ready callable (warmed up).
        read: the counter (:func:`counter`).
        call_ms: one call's time (the case's hot device time), to size the chunks.
        chunk_ms, chunk_host_s, wait_s, periods, min_chunks, cap_s: as the module's constants.

    Returns None when the counter did not step within ``wait_s``, did not step again within
    ``cap_s`` of that, or went backwards (a driver reload).
    """
    size = max(1, min(MAX_CHUNK_CALLS, math.ceil(chunk_ms / max(call_ms, 1e-6))))

    def chunk() -> tuple[int, float, float]:
        stop = time.perf_counter() + chunk_host_s
        calls = 0
        while calls < size and (calls == 0 or time.perf_counter() < stop):
            fn()
            calls += 1
        timing.synchronize(dev)
        return calls, read(), time.perf_counter()

    timing.synchronize(dev)
    last, start = read(), time.perf_counter()
    while True:  # phase 1: run until the counter steps; the window starts at that reading
        _, value, now = chunk()
        if value < last:
            return None
        if value > last:
            break
        if now - start > wait_s:
            return None
    first = last = value
    t0 = now
    calls = chunks = steps = 0
    end = None  # (energy, calls, time) at the latest step
    while True:  # phase 2: count calls until enough steps and chunks lie between the two
        n, value, now = chunk()
        calls, chunks = calls + n, chunks + 1
        if value < last:
            return None
        if value > last:
            last, steps = value, steps + 1
            end = (value, calls, now)
            if steps >= periods and chunks >= min_chunks:
                break
        if now - t0 > cap_s:
            if end is None:
                return None
            break
    energy, calls, t1 = end
    return Energy((energy - first) / calls, calls, t1 - t0)


def fill(rec, fn: Callable[[], object], dev: torch.device, read: Callable[[], float]) -> None:
    """Set ``rec.energy_mj_per_call`` and ``rec.energy_pj_per_byte`` of a timed record
    (``fusebench.record.Record``); a failure of the reading leaves them None and says why
    in ``rec.energy_reason`` (never fails the case)."""
    call_ms = rec.main_time_ms()
    if rec.status != "ok" or not call_ms:
        return
    try:
        reading = per_call(fn, dev, read, call_ms)
    except Exception as exc:  # noqa: BLE001 - energy is shown, never gated: the case stands
        rec.energy_reason = f"energy: {type(exc).__name__}: {exc}"
        return
    if reading is None:
        rec.energy_reason = "energy: the counter did not step twice within the wait (or went backwards)"
        return
    rec.energy_mj_per_call = reading.mj_per_call
    rec.energy_pj_per_byte = reading.pj_per_byte(rec.bytes_moved)
