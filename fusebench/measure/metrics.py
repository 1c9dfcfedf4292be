"""Effective bandwidth, the copy ceiling, and % of ceiling.

* effective bandwidth = bytes moved / time, in GB/s with 1 GB = 1e9 bytes; bytes moved is the
  op's declared minimal traffic (:meth:`fusebench.registry.Op.bytes_moved`);
* copy ceiling = bandwidth of a device-to-device copy (``dst.copy_(src)``) on the same device in
  the same run, counting bytes read plus bytes written, the practical roofline for memory-bound
  kernels (STREAM's Copy, McCalpin 1995);
* % of ceiling above :data:`CACHE_FLAG_PCT` means caches are being measured, not memory;
* for an op that declares its arithmetic (``Op.flops``): throughput = flops / time, in TFLOP/s
  (1e12 floating-point operations per second), against the **matrix peak**: the throughput of a
  large bfloat16 matmul (``torch.matmul``, i.e. cuBLAS) measured on the same device in the same
  run, the practical compute roof (tensor cores fed at their best), as the copy is the memory
  roof. % of peak = throughput / matrix peak.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from fusebench.measure import timing
from fusebench.metrictable import CACHE_FLAG_PCT  # noqa: F401  (the sweep's name for it)

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

    t = timing.measure(copy, device)
    return CopyCeiling(effective_bandwidth_gbps(2 * src.numel() * 4, t.median_ms), src.numel() * 4, t)


def tflops(flops: int, time_ms: float) -> float:
    """``flops`` floating-point operations done in ``time_ms`` milliseconds, in TFLOP/s (1e12/s)."""
    return flops / (time_ms * 1e-3) / 1e12 if time_ms > 0 else float("nan")


def pct_of_peak(tflops_value: float, peak_tflops: float) -> float:
    """``tflops_value`` as a percentage of ``peak_tflops``."""
    return 100.0 * tflops_value / peak_tflops if peak_tflops > 0 else float("nan")


#: The matrix-peak measurement: n x n x n matmuls in each candidate dtype, the best kept. On a
#: GPU bfloat16 8192^3 (tensor cores; about 2 ms on an H200); on the CPU smaller, float32 and
#: bfloat16 (CPUs with AMX or AVX512-BF16 run bfloat16 faster, others emulate it).
PEAK_N_CUDA, PEAK_DTYPES_CUDA = 8192, (torch.bfloat16,)
PEAK_N_CPU, PEAK_DTYPES_CPU = 512, (torch.float32, torch.bfloat16)


#: The matrix peak is measured again until the best figure is reproduced within this fraction
#: (a second try at least ``1 - PEAK_STABLE`` of the best), at most :data:`PEAK_TRIES` times.
PEAK_STABLE = 0.05
PEAK_TRIES = 6


@dataclass(frozen=True)
class MatrixPeak:
    """The matrix peak of one device in one run.

    Attributes:
        tflops: 2 n^3 / median time of the fastest dtype, TFLOP/s: the best of its tries.
        n: the square matmul's size.
        dtype: the fastest dtype's name (``"bfloat16"`` on a GPU).
        timing: its timing (device time on a GPU, host time on the CPU).
        tries: the fastest dtype's figure at each try, TFLOP/s, in order.
        stable: the best figure was reproduced within :data:`PEAK_STABLE`; False when the tries
            ran out first (a shared or throttling host): every % of peak is then in doubt.
    """

    tflops: float
    n: int
    dtype: str
    timing: timing.Timing
    tries: tuple[float, ...] = ()
    stable: bool = True

    def describe(self) -> str:
        """``"matrix peak 0.123 TFLOP/s (float32 512^3)"``, and the tries when unstable."""
        text = f"matrix peak {self.tflops:.3g} TFLOP/s ({self.dtype} {self.n}^3)"
        if not self.stable:
            text += (f", UNSTABLE: {len(self.tries)} tries from {min(self.tries):.3g} to "
                     f"{max(self.tries):.3g} TFLOP/s; every % of peak is in doubt")
        return text


def settled(tries: list[float], tolerance: float = PEAK_STABLE) -> bool:
    """True when the best of ``tries`` was reproduced: the second best is within ``tolerance`` of it."""
    return len(tries) >= 2 and sorted(tries)[-2] >= (1 - tolerance) * max(tries)


def measure_matrix_peak(device: torch.device, n: int | None = None,
                        dtypes: tuple[torch.dtype, ...] | None = None,
                        max_tries: int = PEAK_TRIES) -> MatrixPeak:
    """Measure the matmul throughput of ``device`` on ``n x n`` by ``n x n`` products (hot),
    again until the best figure is reproduced (:func:`settled`) or ``max_tries`` ran out.

    Args:
        device: ``cuda`` (CUDA events, behind a blocking kernel) or ``cpu`` (host clock).
        n, dtypes: default :data:`PEAK_N_CUDA` and :data:`PEAK_DTYPES_CUDA` on a GPU,
            :data:`PEAK_N_CPU` and :data:`PEAK_DTYPES_CPU` on the CPU; the fastest dtype is kept.
        max_tries: most measurements of each dtype (>= 2).
    """
    cuda = device.type == "cuda"
    n = n or (PEAK_N_CUDA if cuda else PEAK_N_CPU)
    best = None
    for dtype in dtypes or (PEAK_DTYPES_CUDA if cuda else PEAK_DTYPES_CPU):
        g = torch.Generator(device=device).manual_seed(0)
        a = torch.randn(n, n, generator=g, device=device).to(dtype)
        b = torch.randn(n, n, generator=g, device=device).to(dtype)
        out = torch.empty(n, n, dtype=dtype, device=device)
        mm = functools.partial(torch.matmul, a, b, out=out)
        tries: list[float] = []
        fastest = None
        while len(tries) < max(2, max_tries) and not settled(tries):
            t = timing.measure(mm, device)
            tries.append(tflops(2 * n ** 3, t.median_ms))
            if fastest is None or tries[-1] >= max(tries):
                fastest = t
        peak = MatrixPeak(max(tries), n, str(dtype).removeprefix("torch."), fastest, tuple(tries),
                          settled(tries))
        if best is None or peak.tflops > best.tflops:
            best = peak
        del a, b, out, mm
    return best
