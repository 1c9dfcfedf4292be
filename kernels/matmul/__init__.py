"""Matmul, n x n: C = X @ X, the lecture's scaling experiment and the compute-bound contrast to
GELU and softmax.

One seeded n x n input X serves as both operands (the harness gives every case one input), so
cuBLAS runs a plain NN GEMM of two n x n operands; they share one buffer, which only matters for
caches at sizes where the work is tiny anyway.

Work, declared from the shape: 2 n^3 floating-point operations (n^2 dot products of length n,
a multiply-add = 2); fewest bytes: read X once, write C once (2 n^2 elements). Arithmetic
intensity n/3 flop per float32 byte: launch-bound below n ~ 512 on an H200 (the time hardly
changes with n: the *plateau*), compute-bound above (time grows as n^3).

The dtype axis is float32 (IEEE float32 arithmetic, CUDA cores), tf32 (float32 storage, TF32
tensor cores: see ``fusebench.registry.Precision``) and bfloat16 (tensor cores, float32
accumulation).
"""

from __future__ import annotations

import math

import torch

from fusebench.registry import Op, Shape

#: Normwise tolerance = OUTPUT[p] + GROWTH[p] * sqrt(k). OUTPUT covers the rounding of the
#: stored result (the elementwise gate's figure); GROWTH * sqrt(k) the accumulated rounding of a
#: length-k dot product, the probabilistic bound's sqrt(k) (Higham & Mary, "A new approach to
#: probabilistic rounding error analysis", SISC 2019). Measured on randn inputs, k = 64..2048:
#: float32 2e-7..6e-7, TF32-rounded inputs 3e-4..4e-4, bfloat16 2e-3..3.4e-3; the float32 bound
#: (1.8e-5..1e-4) stays below the TF32 error, so a float32 case silently run in TF32 fails.
OUTPUT = {"float32": 1e-5, "tf32": 1e-5, "bfloat16": 1.6e-2}
GROWTH = {"float32": 1e-6, "tf32": 2e-4, "bfloat16": 1e-4}


def reference(x: torch.Tensor) -> torch.Tensor:
    """float64 ``x @ x`` of a square matrix; the correctness gate's truth."""
    x = x.double()
    return x @ x


def flops(shape: Shape) -> int:
    """Floating-point operations of ``x @ x`` for ``x`` of shape ``(n, n)``: ``2 n^3``.

    Raises:
        ValueError: the shape is not square 2-D.
    """
    if len(shape) != 2 or shape[0] != shape[1]:
        raise ValueError(f"matmul takes a square n x n input, got {shape}")
    return 2 * shape[0] ** 3


def tolerance(shape: Shape, precision: str) -> float:
    """Gate tolerance for an ``(n, n)`` product in ``precision``: ``OUTPUT + GROWTH * sqrt(n)``."""
    return OUTPUT[precision] + GROWTH[precision] * math.sqrt(shape[-1])


OP = Op(
    name="matmul",
    reference=reference,
    flops=flops,
    roofline="compute",
    tolerance=tolerance,
)


@OP.backend("torch")
def builtin(x):
    """``torch.matmul(x, x)``: cuBLAS (cuBLASLt) on a GPU, the CPU BLAS on the CPU."""
    return lambda: torch.matmul(x, x)
