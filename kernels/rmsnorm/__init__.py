"""RMSNorm over the last dimension: y = x / sqrt(mean(x²) + eps) · w.

Zhang & Sennrich, "Root Mean Square Layer Normalization" (arXiv:1910.07467), eq. 4; the
normalization of Llama-style transformers, and the next fused normalization every kernel library
ships after softmax. ``w`` is a learned per-column weight; here it is a fixed function of the
row length (:func:`weight_for`), so that the input tensor alone defines a case.

Memory-bound: the fused op reads x once, the weight once and writes y once,
``(2 · rows + 1) · cols · itemsize`` bytes. The eager version below is the Llama reference
module's code (in float32, cast back, then scaled), one kernel per primitive:

    x.float()           read 1, write 1   (16-bit inputs only)
    x²                  read 1, write 1
    mean over row       read 1            (reduction)
    + eps, rsqrt        on a column vector
    x · rstd            read 1, write 1
    .to(dtype)          read 1, write 1   (16-bit inputs only)
    · w                 read 1, write 1   -> 6 to 8 kernels, 7 to 11 transfers against 2.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from fusebench.kernels import reference_libs

from fusebench.backends import compiled, require_triton
from fusebench.registry import Op

#: Added to the mean of squares (Llama's ``rms_norm_eps``).
EPS = 1e-6


def weight_for(x: torch.Tensor) -> torch.Tensor:
    """The weight of a case: ``1 + sin(j) / 4`` for column j, shape ``(cols,)``, x's dtype and device.

    Deterministic (every backend and the reference see the same stored values) and not all
    ones, so that a kernel that forgets the weight fails the correctness gate.
    """
    cols = x.shape[-1]
    w = 1.0 + 0.25 * torch.sin(torch.arange(cols, dtype=torch.float64))
    return w.to(dtype=x.dtype, device=x.device)


def reference(x: torch.Tensor) -> torch.Tensor:
    """float64 RMSNorm of ``x`` (shape ``(..., cols)``) with :func:`weight_for`; the gate's truth."""
    xd = x.double()
    rstd = torch.rsqrt(xd.pow(2).mean(dim=-1, keepdim=True) + EPS)
    return xd * rstd * weight_for(x).double()


def rmsnorm_eager(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """RMSNorm written op by op as Llama's reference module does: float32 math, cast, scale."""
    x32 = x.float()
    rstd = torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + EPS)
    return w * (x32 * rstd).to(x.dtype)


def traffic(shape: tuple[int, ...], itemsize: int) -> int:
    """Bytes one call must move: x read and y written once, the weight read once."""
    cols = shape[-1]
    return (2 * math.prod(shape) + cols) * itemsize


OP = Op(
    name="rmsnorm",
    reference=reference,
    traffic=traffic,
)


@OP.backend("eager")
def eager(x):
    """Unfused baseline: :func:`rmsnorm_eager`."""
    w = weight_for(x)
    return lambda: rmsnorm_eager(x, w)


@OP.backend("torch")
def builtin(x):
    """PyTorch's built-in, ``F.rms_norm(x, (cols,), w, EPS)`` (fused on CUDA since torch 2.8)."""
    w = weight_for(x)
    shape = (x.shape[-1],)
    return lambda: F.rms_norm(x, shape, w, EPS)


@OP.backend("compile")
def compile_(x):
    """``torch.compile`` of :func:`rmsnorm_eager`, static shape (Inductor fuses the reduction)."""
    w = weight_for(x)
    return compiled(lambda t: rmsnorm_eager(t, w), x)


@OP.backend("triton")
def triton_(x):
    """Hand-written fused Triton kernel (``kernels/rmsnorm/triton.py``)."""
    require_triton(x)
    from fusebench.kernels.rmsnorm import triton as triton_rmsnorm

    w = weight_for(x)
    return lambda: triton_rmsnorm.rmsnorm(x, w, EPS)


@OP.backend("liger")
def liger(x):
    """Liger-Kernel's Triton RMSNorm (``reference_libs.liger_rmsnorm``)."""
    return reference_libs.liger_rmsnorm(x, weight_for(x), EPS)


@OP.backend("quack")
def quack(x):
    """QuACK's CuTe DSL RMSNorm (``reference_libs.quack_rmsnorm``)."""
    return reference_libs.quack_rmsnorm(x, weight_for(x), EPS)
