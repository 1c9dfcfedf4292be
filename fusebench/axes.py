"""The axes of a case, named without torch: backends, dtype-axis values, shapes.

The backend axis is the case file's: every backend its ops list (:func:`backend_axis`), so a new
backend is its factory (``@OP.backend("name")`` in ``kernels/<op>/``) and its name in the op's
``backends:`` list, nothing else (docs/extending.md).

Every reader of stored results (the gate, the reports, the site, the case file, the asv suite's
parameters) needs these names and nothing that measures, so they live here, importing no torch
and no triton: ``compare``, ``publish``, ``plots``, ``table``, ``collect``, ``store`` and every
``--help`` run in a Python without them (issue 43; ``tests/test_torch_free.py`` proves it).
:mod:`fusebench.registry` re-exports each name and adds what needs torch (the torch dtypes,
:class:`~fusebench.registry.Precision`, :class:`~fusebench.registry.Op`); import from there in
code that measures, from here in code that reads.
"""

from __future__ import annotations

import functools
import math
import re
from pathlib import Path
from typing import Callable, Iterable

from fusebench import safeyaml
from fusebench.errors import UsageError

#: The package each op is a module of: ``kernels/`` at the project root, imported under this name
#: in a checkout and installed alike (fusebench/__init__.py).
KERNELS = "fusebench.kernels"

#: The case file ``fusebench.yaml`` (at the project root; packaged as ``fusebench/fusebench.yaml``, a
#: link to it): :mod:`fusebench.config` reads its cases, and the backend axis is its backend lists.
CASE_FILE = Path(__file__).resolve().parent / "fusebench.yaml"

#: What a backend name may be: it is an asv parameter, an NVTX range's part, a command-line value.
BACKEND_NAME = re.compile(r"[a-z][a-z0-9_]*")


def backend_axis(lists: Iterable[tuple[str, object]]) -> tuple[str, ...]:
    """The backend axis of ``lists`` (``(op, its backends list)`` in the case file's order): every
    name listed, each op's list in its order, ties by first mention. With ``eager`` first and the
    reference backends last in every list, that is the report order: ``eager``, fusebench's own
    kernels, then Liger-Kernel, QuACK, FlagGems (``kernels/reference_libs.py``). A list that is not
    a list of names is left to the case file's reader (``fusebench.config``), which refuses it.

    Raises:
        UsageError: two lists order the same backends differently (one line naming them).
    """
    after: dict[str, set[str]] = {}  # name -> the names listed before it somewhere
    first: list[str] = []
    for _, names in lists:
        if not isinstance(names, list):
            continue
        names = [n for n in names if isinstance(n, str) and BACKEND_NAME.fullmatch(n)]
        for i, name in enumerate(names):
            after.setdefault(name, set()).update(names[:i])
            if name not in first:
                first.append(name)
    axis: list[str] = []
    while len(axis) < len(first):
        ready = [n for n in first if n not in axis and after[n] <= set(axis)]
        if not ready:
            left = [n for n in first if n not in axis]
            raise UsageError(f"{CASE_FILE.name}: the ops' backends lists order {', '.join(left)} "
                             "differently; list them in one order (the report order) in every op")
        axis.append(ready[0])
    return tuple(axis)


@functools.cache
def _case_file_axis() -> tuple[str, ...]:
    try:
        data = safeyaml.load(CASE_FILE.read_text())
    except (OSError, safeyaml.StrictYAMLError) as exc:
        why = getattr(exc, "strerror", None) or exc
        raise UsageError(f"{CASE_FILE}: cannot read the backend axis: {why}") from None
    ops = data.get("ops") if isinstance(data, dict) else None
    ops = ops if isinstance(ops, dict) else {}
    return backend_axis((str(n), e.get("backends")) for n, e in ops.items() if isinstance(e, dict))


def __getattr__(name: str):
    if name == "BACKENDS":  # read on first use, not at import (a bad case file is then one line)
        return _case_file_axis()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
