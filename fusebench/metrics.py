"""Effective bandwidth, the copy ceiling, and % of ceiling.

* effective bandwidth = bytes moved / time, in GB/s with 1 GB = 1e9 bytes; bytes moved is the
  op's declared minimal traffic (:meth:`fusebench.registry.Op.bytes_moved`);
* copy ceiling = bandwidth of a device-to-device copy (``dst.copy_(src)``) on the same device in
  the same run, counting bytes read plus bytes written, the practical roofline for memory-bound
  kernels (STREAM's Copy, McCalpin 1995);
* % of ceiling above :data:`CACHE_FLAG_PCT` means caches are being measured, not memory.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from fusebench import timing

#: Above this % of the copy ceiling a figure measures caches (L2), not memory: flagged.
CACHE_FLAG_PCT = 105.0

#: Bytes copied by the ceiling measurement (each way): large against any L2 (H200: 60 MB).
COPY_BYTES_CUDA = 1 << 30
COPY_BYTES_CPU = 1 << 27


def effective_bandwidth_gbps(nbytes: int, time_ms: float) -> float:
    """``nbytes`` moved in ``time_ms`` milliseconds, in GB/s (1e9 bytes per second)."""
    return nbytes / (time_ms * 1e-3) / 1e9 if time_ms > 0 else float("nan")


def pct_of_ceiling(gbps: float, ceiling_gbps: float) -> float:
    """``gbps`` as a percentage of ``ceiling_gbps``."""
    return 100.0 * gbps / ceiling_gbps if ceiling_gbps > 0 else float("nan")


@dataclass(frozen=True)
class CopyCeiling:
    """The copy ceiling of one device in one run.

    Attributes:
        gbps: bytes read plus written per second, GB/s (median time).
        nbytes: bytes copied each way.
        timing: the copy's timing (device time on a GPU, host time on the CPU).
    """

    gbps: float
    nbytes: int
    timing: timing.Timing


def measure_copy_ceiling(device: torch.device, nbytes: int | None = None) -> CopyCeiling:
    """Measure the device-to-device copy bandwidth of ``device`` (hot, after warm-up).

    Args:
        device: ``cuda`` device (timed with CUDA events) or ``cpu`` (host clock).
        nbytes: bytes per buffer; default 1 GiB on a GPU, 128 MiB on the CPU.
    """
    if nbytes is None:
        nbytes = COPY_BYTES_CUDA if device.type == "cuda" else COPY_BYTES_CPU
    src = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)

    def copy():
        return dst.copy_(src)

    est = timing.warm_up(copy, device)
    reps = timing.repeats_for(est)
    if device.type == "cuda":
        t = timing.device_time(copy, reps)
    else:
        t = timing.wall_time(copy, reps, device)
    return CopyCeiling(effective_bandwidth_gbps(2 * src.numel() * 4, t.median_ms), src.numel() * 4, t)
