"""Energy per call, from NVML's total-energy counter: shown beside the times, never gated.

``nvmlDeviceGetTotalEnergyConsumption`` is the board's energy since the driver loaded, in mJ
(NVIDIA Volta and later). A case's energy per call is the counter's rise over one window of
back-to-back calls (about :data:`WINDOW_S` of GPU or host time, whichever ends first, so that the
counter's update period, tens of ms, is small beside it and a host-bound call costs no more than
a GPU-bound one), divided by the calls: the whole board's energy, idle power included, as
the GPU draws it while running the op and nothing else. pJ per byte divides it by the op's
declared bytes moved. On the CPU, or where NVML or the counter is missing, nothing is measured
(the fields stay None). Calls too short for the host to keep the GPU busy include the GPU's
idle power between launches: the figure is then what a caller pays per call, not the kernel's.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable

import torch

from fusebench.measure import timing

#: Seconds of back-to-back calls between the two counter readings: the calls stop when their GPU
#: time (hot device time x calls) or the host's time to issue them reaches it.
WINDOW_S = 0.2
#: Most calls in one window (a very short call is bounded by the host anyway).
MAX_CALLS = 200_000


@dataclass(frozen=True)
class Energy:
    """One case's energy reading.

    Attributes:
        mj_per_call: the counter's rise over the window / calls, mJ.
        calls: calls in the window.
        seconds: the window's length (host clock, synchronized at both ends).
    """

    mj_per_call: float
    calls: int
    seconds: float

    @property
    def watts(self) -> float | None:
        """The window's average power, W: the counter's rise (mJ) over its length (s) / 1000."""
        return self.mj_per_call * self.calls / self.seconds / 1e3 if self.seconds > 0 else None

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
             call_ms: float, window_s: float = WINDOW_S) -> Energy | None:
    """Energy per call of ``fn`` over one window of back-to-back calls.

    Args:
        fn: the case's ready callable (warmed up).
        read: the counter (:func:`counter`).
        call_ms: one call's time (the case's hot device time), to size the window.
        window_s: the window's length, about.

    Returns None when the counter did not rise (it did not update within the window) or went
    backwards (a driver reload).
    """
    most = max(1, min(MAX_CALLS, math.ceil(window_s * 1e3 / max(call_ms, 1e-6))))
    timing.synchronize(dev)
    before, start = read(), time.perf_counter()
    calls, stop = 0, start + window_s
    while calls < most and (calls == 0 or time.perf_counter() < stop):
        fn()
        calls += 1
    timing.synchronize(dev)
    after, seconds = read(), time.perf_counter() - start
    if not after > before:
        return None
    return Energy((after - before) / calls, calls, seconds)


def fill(rec, fn: Callable[[], object], dev: torch.device, read: Callable[[], float]) -> None:
    """Set ``rec.energy_mj_per_call``, ``rec.energy_pj_per_byte`` and ``rec.energy_w`` (the window's
    average power) of a timed record (``fusebench.record.Record``); a failure of the reading
    leaves them None and says why in ``rec.energy_reason`` (never fails the case)."""
    call_ms = rec.main_time_ms()
    if rec.status != "ok" or not call_ms:
        return
    try:
        reading = per_call(fn, dev, read, call_ms)
    except Exception as exc:  # noqa: BLE001 - energy is shown, never gated: the case stands
        rec.energy_reason = f"energy: {type(exc).__name__}: {exc}"
        return
    if reading is None:
        rec.energy_reason = "energy: the counter did not rise within the window"
        return
    rec.energy_mj_per_call = reading.mj_per_call
    rec.energy_pj_per_byte = reading.pj_per_byte(rec.bytes_moved)
    rec.energy_w = reading.watts
