"""What fusebench measures: the ops and their backends.

``OPS`` is the op registry: every consumer (asv suite, sweep, nsys driver, tests, plots)
iterates it, so adding an op is one module plus one entry here.
"""

from __future__ import annotations

from fusebench.errors import UsageError
from fusebench.registry import Op
from kernels import gelu, matmul, rmsnorm, softmax

OPS: dict[str, Op] = {op.name: op for op in (gelu.OP, softmax.OP, rmsnorm.OP, matmul.OP)}


def get_op(name: str) -> Op:
    """The op called ``name``.

    Raises:
        UsageError: unknown op (the message lists the valid ones).
    """
    if name not in OPS:
        raise UsageError(f"unknown op {name!r}; valid ops: {', '.join(OPS)}")
    return OPS[name]
