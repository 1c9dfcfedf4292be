"""The axes of a case, named without torch: backends, dtype-axis values, shapes.

Every reader of stored results (the gate, the reports, the site, the case file, the asv suite's
parameters) needs these names and nothing that measures, so they live here, importing no torch
and no triton: ``compare``, ``publish``, ``plots``, ``table``, ``collect``, ``store`` and every
``--help`` run in a Python without them (issue 43; ``tests/test_torch_free.py`` proves it).
:mod:`fusebench.registry` re-exports each name and adds what needs torch (the torch dtypes,
:class:`~fusebench.registry.Precision`, :class:`~fusebench.registry.Op`); import from there in
code that measures, from here in code that reads.
"""

from __future__ import annotations

import math
from typing import Callable

from fusebench.errors import UsageError

#: The package each op is a module of: ``kernels/`` at the project root, imported under this name
#: in a checkout and installed alike (fusebench/__init__.py).
KERNELS = "fusebench.kernels"

#: The fixed backend axis, in report order. ``eager`` is the unfused baseline; after fusebench's own
#: kernels come the reference backends, the field's public kernels under their library's name
#: (``kernels/reference_libs.py``): Liger-Kernel, QuACK, FlagGems.
BACKENDS: tuple[str, ...] = ("eager", "torch", "compile", "triton", "cuda", "liger", "quack", "flaggems")

#: The plain dtypes (names as on the command line and in asv); the memory-bound ops' dtype axis.
PLAIN_DTYPES: tuple[str, ...] = ("float32", "bfloat16", "float16")

#: Every value the dtype axis can take, with the bytes of one stored element: the plain dtypes,
#: then math modes on a storage dtype (``tf32``: float32 storage). The registry's ``PRECISIONS``
#: has the same names, and a test holds the sizes to torch's ``element_size()``.
ELEMENT_SIZE: dict[str, int] = {"float32": 4, "bfloat16": 2, "float16": 2, "tf32": 4}

#: Roofline kinds an op can declare: what bounds it, and so which ceiling its % is taken of.
ROOFLINES = ("memory", "compute")

Shape = tuple[int, ...]


def declared_bytes(shape: Shape, itemsize: int, traffic: Callable[[Shape, int], int] | None = None) -> int:
    """The fewest bytes one call moves: the op's ``traffic(shape, itemsize)`` when it declares
    one, else ``2 * numel * itemsize`` (read the input once, write the output once)."""
    if traffic is not None:
        return traffic(shape, itemsize)
    return 2 * math.prod(shape) * itemsize


def no_backend_reason(op: str, backend: str) -> str:
    """The skip reason of a case whose op does not implement ``backend`` (reports leave its column
    out: the op has no such backend, rather than this machine not running it)."""
    return f"{op} has no {backend} backend"


def shape_label(shape: Shape) -> str:
    """``(8192, 16384)`` -> ``"8192x16384"``; the spelling used in asv, NVTX and tables."""
    return "x".join(str(d) for d in shape)


def parse_shape(label: str) -> Shape:
    """Inverse of :func:`shape_label`.

    Raises:
        UsageError: the label is not positive integers joined by ``x``.
    """
    try:
        shape = tuple(int(p) for p in label.lower().split("x"))
    except ValueError:
        shape = ()
    if not shape or any(d < 0 for d in shape):
        raise UsageError(f"bad shape {label!r}; write dimensions joined by 'x', e.g. 4096x4096")
    return shape
