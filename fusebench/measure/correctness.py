"""The correctness gate: a case is timed only after its output matched the float64 reference.

Method: on the case's freshly drawn, seeded input (the one then timed), the backend's output is
compared with the op's float64 reference by the normwise relative error
``max|y - ref| / max|ref|`` (Higham, *Accuracy and Stability of Numerical Algorithms*, §1.5),
against a tolerance chosen by dtype. Every output element must be written: the first output is
poisoned with NaN and released before the checked call, so a backend whose output buffer is
reused (preallocated, or the caching allocator's same-size block) and not fully written shows
NaN. NaN or inf never passes. The op's invariant (softmax rows sum to 1) is checked too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from fusebench.errors import first_line
from fusebench.registry import PRECISIONS, Op, Shape, dtype_name

#: Normwise relative tolerance by dtype: fp32 well under 1e-5; 16-bit about 1e-2 (bf16 keeps
#: 8 bits of mantissa, so one rounding of the output alone is up to 2^-8 = 3.9e-3).
TOLERANCE: dict[torch.dtype, float] = {
    torch.float32: 1e-5,
    torch.bfloat16: 1.6e-2,
    torch.float16: 2e-3,
}


@dataclass(frozen=True)
class GateResult:
    """Outcome of the gate for one case.

    Attributes:
        passed: True when the output matched.
        max_rel_error: normwise relative error (dimensionless); NaN when it could not be computed.
        tolerance: the dtype's tolerance.
        reason: why it failed ("" when it passed): the check that failed, or the exception.
    """

    passed: bool
    max_rel_error: float
    tolerance: float
    reason: str = ""


def relative_error(y: torch.Tensor, ref: torch.Tensor) -> float:
    """Normwise relative error ``max|y - ref| / max|ref|`` in float64 (0.0 for empty tensors)."""
    if ref.numel() == 0:
        return 0.0
    diff = (y.double() - ref).abs().max().item()
    scale = ref.abs().max().item()
    return diff / scale if scale > 0 else diff


def tolerance(op: Op, shape: Shape, precision: str) -> float:
    """The gate's tolerance for ``op`` on ``shape`` in ``precision`` (a dtype-axis name).

    The op's own rule when it declares one (``Op.tolerance``: matmul's grows with sqrt(k)),
    else the storage dtype's entry of :data:`TOLERANCE`.
    """
    if op.tolerance is not None:
        return op.tolerance(tuple(shape), precision)
    return TOLERANCE[PRECISIONS[precision].dtype]


def check(op: Op, fn: Callable[[], torch.Tensor], x: torch.Tensor,
          precision: str | None = None) -> GateResult:
    """Run the gate on ``fn`` (a backend's ready callable over ``x``, any shape).

    ``precision`` is the case's dtype-axis name (``"tf32"``); by default the name of ``x``'s dtype.
    Never raises for a failing backend: the exception becomes the failure ``reason``.
    """
    tol = tolerance(op, x.shape, precision or dtype_name(x.dtype))
    try:
        first = fn()
        if first.shape == x.shape and first.is_floating_point():
            first.fill_(float("nan"))  # poison: a reused, partly written buffer shows NaN
        del first
        y = fn()
        if x.is_cuda:
            torch.cuda.synchronize(x.device)
    except Exception as exc:
        return GateResult(False, float("nan"), tol, first_line(exc))
    if y.shape != x.shape or y.dtype != x.dtype:
        return GateResult(False, float("nan"), tol,
                          f"output {tuple(y.shape)} {y.dtype}, expected {tuple(x.shape)} {x.dtype}")
    if y.numel() and not torch.isfinite(y).all():
        return GateResult(False, float("nan"), tol, "output has NaN or inf (unwritten elements?)")
    err = relative_error(y, op.reference(x))
    if not err <= tol:
        return GateResult(False, err, tol, f"relative error {err:.3g} > tolerance {tol:.3g}")
    if op.invariant is not None and (broken := op.invariant(y, x)):
        return GateResult(False, err, tol, broken)
    return GateResult(True, err, tol)
