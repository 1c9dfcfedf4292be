"""The op and backend registry.

Each op module in ``kernels/`` builds one :class:`Op` and registers its backends on it with
:meth:`Op.backend`. A backend is a *factory*: given the input tensor it does all setup
(allocation, compilation, extension build) and returns a zero-argument callable; only that
callable is timed (the tritonbench pattern). Adding a backend is one function and one decorator;
adding an op is one module and one entry in ``kernels.OPS``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import torch

from fusebench.errors import SkipCase, UsageError

#: The fixed backend axis, in report order. ``eager`` is the unfused baseline.
BACKENDS: tuple[str, ...] = ("eager", "torch", "compile", "triton", "cuda")

#: Dtypes every op is measured in (names as used on the command line and in asv).
DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
}

Factory = Callable[[torch.Tensor], Callable[[], torch.Tensor]]
Shape = tuple[int, ...]


@dataclass(frozen=True)
class Backend:
    """One implementation of an op.

    Attributes:
        name: one of :data:`BACKENDS`.
        factory: ``factory(x) -> fn``; ``fn()`` returns the op applied to ``x`` (same shape and
            dtype). The factory may raise :class:`SkipCase` with a reason when this machine
            cannot run the backend (no GPU, no compiler, missing package).
    """

    name: str
    factory: Factory


@dataclass
class Op:
    """A memory-bound operator with its float64 reference, traffic model, grids and backends.

    Attributes:
        name: short lowercase name (``gelu``, ``softmax``).
        reference: float64 reference ``reference(x) -> y``; never timed.
        grids: named lists of shapes: ``default`` (GPU), ``cpu``, ``quick`` and ``nsys`` (the
            few shapes ``make nsys`` profiles); every shape of the others is also in ``default``
            so that asv parameters stay fixed.
        invariant: optional check ``invariant(y, x) -> str | None`` returning what is wrong.
        headline: the shape the op's one-number summaries report (the speedup chart), one of
            ``grids["default"]``.
        backends: registered backends by name, filled by :meth:`backend`.
    """

    name: str
    reference: Callable[[torch.Tensor], torch.Tensor]
    grids: dict[str, list[Shape]]
    invariant: Callable[[torch.Tensor, torch.Tensor], str | None] | None = None
    headline: Shape | None = None
    backends: dict[str, Backend] = field(default_factory=dict)

    def backend(self, name: str) -> Callable[[Factory], Factory]:
        """Decorator registering ``factory`` as backend ``name`` (one of :data:`BACKENDS`).

        Raises:
            ValueError: the name is not in :data:`BACKENDS` or is registered twice.
        """
        if name not in BACKENDS:
            raise ValueError(f"backend name {name!r} is not one of {', '.join(BACKENDS)}")
        if name in self.backends:
            raise ValueError(f"backend {name!r} registered twice for op {self.name!r}")

        def register(factory: Factory) -> Factory:
            self.backends[name] = Backend(name, factory)
            return factory

        return register

    def bytes_moved(self, shape: Shape, dtype: torch.dtype) -> int:
        """Fewest bytes the op must move: read the input once, write the output once.

        Returns ``2 * numel * element size`` in bytes (the nvbench way of declaring global
        memory reads and writes from the shape, not guessing them from the timing).
        """
        return 2 * math.prod(shape) * torch.empty((), dtype=dtype).element_size()

    def get_backend(self, name: str) -> Backend:
        """The backend ``name``.

        Raises:
            UsageError: ``name`` is not a backend name (lists the valid ones).
            SkipCase: ``name`` is a valid backend name that this op does not implement.
        """
        if name not in BACKENDS:
            raise UsageError(f"unknown backend {name!r}; valid backends: {', '.join(BACKENDS)}")
        if name not in self.backends:
            raise SkipCase(f"{self.name} has no {name} backend")
        return self.backends[name]


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


def parse_dtype(name: str) -> torch.dtype:
    """``"bfloat16"`` -> ``torch.bfloat16``.

    Raises:
        UsageError: unknown dtype name (lists the valid ones).
    """
    if name not in DTYPES:
        raise UsageError(f"unknown dtype {name!r}; valid dtypes: {', '.join(DTYPES)}")
    return DTYPES[name]


def dtype_name(dtype: torch.dtype) -> str:
    """``torch.bfloat16`` -> ``"bfloat16"``."""
    return str(dtype).removeprefix("torch.")
