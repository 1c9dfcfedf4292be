"""Softmax over the last dimension, numerically stable: exp(x - max(x)) / sum(exp(x - max(x))).

Memory-bound: the fused op reads each row once and writes it once (2 × element size bytes per
element) as long as the row stays on chip. The eager version below launches one kernel per
primitive, each a full pass over memory:

    max over row      read 1            (reduction)
    x - max           read 1, write 1
    exp               read 1, write 1
    sum over row      read 1            (reduction)
    / sum             read 1, write 1   -> 5 kernels, 8 tensor-sized transfers against 2.
"""

from __future__ import annotations

import torch
from fusebench.kernels import cuda_ext, reference_libs

from fusebench.backends import compiled, require_triton
from fusebench.registry import Op


def reference(x: torch.Tensor) -> torch.Tensor:
    """float64 softmax of ``x`` over its last dimension; the correctness gate's truth."""
    return torch.softmax(x.double(), dim=-1)


def softmax_eager(x: torch.Tensor) -> torch.Tensor:
    """Softmax written op by op (max, subtract, exp, sum, divide: 5 launches), in x's dtype.

    Raises:
        IndexError: the last dimension has size 0 (``amax`` over an empty row); the built-in
            returns an empty tensor there.
    """
    shifted = x - x.amax(dim=-1, keepdim=True)
    e = torch.exp(shifted)
    return e / e.sum(dim=-1, keepdim=True)


def invariant(y: torch.Tensor, x: torch.Tensor) -> str | None:
    """Softmax rows sum to 1 and every output lies in [0, 1]; returns what is violated, if any."""
    if y.numel() == 0:
        return None
    yd = y.double()
    if yd.min() < 0 or yd.max() > 1:
        return f"outputs outside [0, 1]: min {yd.min().item():.3g}, max {yd.max().item():.3g}"
    # Each output carries a rounding error of at most one unit in the last place of its dtype,
    # so a row sums to 1 within eps (fp32: 1.2e-7; bf16: 7.8e-3), plus the arithmetic's error.
    tol = 4 * torch.finfo(y.dtype).eps + 1e-6
    worst = (yd.sum(dim=-1) - 1).abs().max().item()
    return None if worst <= tol else f"a row sums to 1 {worst:+.3g} (tolerance {tol:.3g})"


OP = Op(
    name="softmax",
    reference=reference,
    invariant=invariant,
)


@OP.backend("eager")
def eager(x):
    """Unfused baseline: :func:`softmax_eager`."""
    return lambda: softmax_eager(x)


@OP.backend("torch")
def builtin(x):
    """PyTorch's fused built-in, ``torch.softmax(x, dim=-1)``."""
    return lambda: torch.softmax(x, dim=-1)


@OP.backend("compile")
def compile_(x):
    """``torch.compile`` of :func:`softmax_eager`, static shape (Inductor fuses the reduction)."""
    return compiled(softmax_eager, x)


@OP.backend("triton")
def triton_(x):
    """Hand-written fused Triton kernels (``kernels/softmax/triton.py``)."""
    require_triton(x)
    from fusebench.kernels.softmax import triton as triton_softmax

    return lambda: triton_softmax.softmax(x)


@OP.backend("cuda")
def cuda(x):
    """Hand-written CUDA C++ kernels (``kernels/softmax/softmax.cu``), built as a torch extension."""
    ext = cuda_ext.require(x)
    return lambda: ext.softmax(x)


@OP.backend("liger")
def liger(x):
    """Liger-Kernel's Triton softmax (``reference_libs.liger_softmax``)."""
    return reference_libs.liger_softmax(x)


@OP.backend("quack")
def quack(x):
    """QuACK's CuTe DSL softmax (``reference_libs.quack_softmax``)."""
    return reference_libs.quack_softmax(x)


@OP.backend("flaggems")
def flaggems(x):
    """FlagGems' Triton softmax (``reference_libs.flaggems_softmax``)."""
    return reference_libs.flaggems_softmax(x)
