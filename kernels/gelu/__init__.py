"""GELU, tanh approximation: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).

Hendrycks & Gimpel, "Gaussian Error Linear Units" (arXiv:1606.08415), eq. for the tanh
approximation. Elementwise, memory-bound: the fused op reads each element once and writes it
once (2 × element size bytes per element). The eager version below launches one kernel per
primitive, each reading and writing a full tensor:

    x·x, (x·x)·x      2 kernels, read 3, write 2
    0.044715·x³       read 1, write 1
    x + …             read 2, write 1
    √(2/π)·…          read 1, write 1
    tanh              read 1, write 1
    1 + …             read 1, write 1
    0.5·x             read 1, write 1
    … · (…)           read 2, write 1   -> 9 kernels, 21 tensor-sized transfers against 2.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from fusebench.kernels import cuda_ext, reference_libs

from fusebench.backends import compiled, require_triton
from fusebench.registry import Op

SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def reference(x: torch.Tensor) -> torch.Tensor:
    """float64 GELU (tanh approximation) of ``x`` (any shape); the correctness gate's truth."""
    x = x.double()
    return 0.5 * x * (1.0 + torch.tanh(SQRT_2_OVER_PI * (x + 0.044715 * x.pow(3))))


def gelu_eager(x: torch.Tensor) -> torch.Tensor:
    """GELU written op by op: one PyTorch kernel per primitive (9 launches on CUDA), in x's dtype."""
    inner = SQRT_2_OVER_PI * (x + 0.044715 * (x * x * x))
    return 0.5 * x * (1.0 + torch.tanh(inner))


OP = Op(
    name="gelu",
    reference=reference,
)


@OP.backend("eager")
def eager(x):
    """Unfused baseline: :func:`gelu_eager`."""
    return lambda: gelu_eager(x)


@OP.backend("torch")
def builtin(x):
    """PyTorch's fused built-in, ``F.gelu(x, approximate="tanh")``."""
    return lambda: F.gelu(x, approximate="tanh")


@OP.backend("compile")
def compile_(x):
    """``torch.compile`` of :func:`gelu_eager`, static shape (Inductor fuses it into one kernel)."""
    return compiled(gelu_eager, x)


@OP.backend("triton")
def triton_(x):
    """Hand-written fused Triton kernel (``kernels/gelu/triton.py``)."""
    require_triton(x)
    from fusebench.kernels.gelu import triton as triton_gelu

    return lambda: triton_gelu.gelu(x)



@OP.backend("cuda")
def cuda(x):
    """Hand-written CUDA C++ kernel (``kernels/gelu/gelu.cu``), built as a torch extension."""
    ext = cuda_ext.require(x)
    return lambda: ext.gelu(x)


# Liger-Kernel has no plain GELU (only GEGLU) and QuACK's is a GEMM epilogue: FlagGems is the one
# reference library with this op (kernels/reference_libs.py).
@OP.backend("flaggems")
def flaggems(x):
    """FlagGems' Triton GELU, tanh approximation (``reference_libs.flaggems_gelu``)."""
    return reference_libs.flaggems_gelu(x)
