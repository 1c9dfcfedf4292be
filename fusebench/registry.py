"""The op and backend registry.

Each op's folder ``kernels/<op>/`` builds one :class:`Op` (its reference, grids, dtype axis and
declared work: bytes moved, and flops for a compute-bound op) and registers its backends on it with
:meth:`Op.backend`. A backend is a *factory*: given the input tensor it does all setup
(allocation, compilation, extension build) and returns a zero-argument callable; only that
callable is timed (the tritonbench pattern). How to add an op, a backend or a metric:
``docs/extending.md``.

The names of the axes (backends, dtype-axis values, shapes and their labels) are
:mod:`fusebench.axes`', torch-free, re-exported here: whatever imports them from this module keeps
working, and what only reads results imports them from there, without torch.
"""

from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass, field
from typing import Callable, Iterator

import torch

from fusebench.axes import (  # noqa: F401  (re-exported: the registry's names since before fusebench.axes)
    BACKEND_NAME,
    BACKENDS,
    ELEMENT_SIZE,
    KERNELS,
    PLAIN_DTYPES,
    ROOFLINES,
    Shape,
    declared_bytes,
    no_backend_reason,
    parse_shape,
    shape_label,
)
from fusebench.errors import SkipCase, UsageError

#: The plain dtypes (:data:`fusebench.axes.PLAIN_DTYPES`) as torch dtypes; the memory-bound ops'
#: dtype axis.
DTYPES: dict[str, torch.dtype] = dict(zip(PLAIN_DTYPES, (torch.float32, torch.bfloat16, torch.float16)))

Factory = Callable[[torch.Tensor], Callable[[], torch.Tensor]]


@contextlib.contextmanager
def _tf32_matmul() -> Iterator[None]:
    """Let cuBLAS run float32 matmuls on TF32 tensor cores inside the block; restore after.

    torch >= 2.9 has ``torch.backends.cuda.matmul.fp32_precision`` ("tf32"/"ieee"/"none"); once
    it is used, reading the legacy ``allow_tf32`` flag raises (PyTorch refuses the mix), so the
    new API is used where it exists and ``allow_tf32`` only on older torch.
    """
    m = torch.backends.cuda.matmul
    attr, value = ("fp32_precision", "tf32") if hasattr(m, "fp32_precision") else ("allow_tf32", True)
    old = getattr(m, attr)
    setattr(m, attr, value)
    try:
        yield
    finally:
        setattr(m, attr, old)


@dataclass(frozen=True)
class Precision:
    """One value of the dtype axis: a storage dtype and, optionally, a math mode.

    ``float32``, ``bfloat16`` and ``float16`` are plain dtypes. ``tf32`` is not a torch dtype:
    float32 tensors whose matmuls run on TF32 tensor cores (10-bit mantissa products, float32
    accumulation; NVIDIA Ampere and later). It is modelled here, on the dtype axis, rather than
    as a backend, because it is a property of the arithmetic any backend could use, and the
    backend axis is the fixed list of implementations.

    Attributes:
        name: the axis value (``"tf32"``), as in asv parameters and on the command line.
        dtype: the storage dtype of inputs and outputs (``torch.float32`` for ``tf32``).
        tf32: run the backend with TF32 matmuls enabled (see :meth:`bind`).
    """

    name: str
    dtype: torch.dtype
    tf32: bool = False

    def check_device(self, device: torch.device) -> None:
        """Raise :class:`SkipCase` when ``device`` cannot run this precision.

        TF32 exists only on NVIDIA GPUs of compute capability 8.0 and later; on the CPU a
        ``tf32`` case would measure float32 again under another name.
        """
        if not self.tf32:
            return
        if device.type != "cuda":
            raise SkipCase("tf32 is a tensor-core mode of NVIDIA GPUs (sm_80+); on the CPU it is float32")
        if torch.cuda.get_device_capability(device) < (8, 0):
            raise SkipCase("tf32 needs an NVIDIA GPU of compute capability 8.0 or later")

    def bind(self, factory: Factory, x: torch.Tensor) -> Callable[[], torch.Tensor]:
        """``factory(x)`` built and returned in this precision's math mode.

        For a plain dtype this is ``factory(x)`` itself (nothing added to the timed call). For
        ``tf32`` the factory runs with TF32 matmuls enabled, and so does every call of the
        returned callable; the previous setting is restored after each (about 2 µs of host
        time per call: visible in wall time at the smallest sizes, never in device time).

        Raises:
            SkipCase: this device cannot run the precision (:meth:`check_device`), or the factory's.
        """
        self.check_device(x.device)
        if not self.tf32:
            return factory(x)
        with _tf32_matmul():
            fn = factory(x)

        @functools.wraps(fn)  # keeps the attributes a factory sets on its callable (compile_s)
        def in_tf32() -> torch.Tensor:
            with _tf32_matmul():
                return fn()

        return in_tf32


#: Every value the dtype axis can take: the plain dtypes, then math modes on a storage dtype.
PRECISIONS: dict[str, Precision] = {
    **{name: Precision(name, dt) for name, dt in DTYPES.items()},
    "tf32": Precision("tf32", torch.float32, tf32=True),
}


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
    """An operator with its float64 reference, declared work, grids and backends.

    Every op declares its traffic (:meth:`bytes_moved`); an op that also declares its
    arithmetic (``flops``) gets TFLOP/s and % of the measured matrix peak in every report and
    in its asv class, without any consumer naming it.

    Attributes:
        name: short lowercase name (``gelu``, ``softmax``, ``matmul``).
        reference: float64 reference ``reference(x) -> y``; never timed.
        grids: named lists of shapes: ``default`` (GPU), ``cpu``, ``quick`` (GPU) and
            ``cpu-quick`` (``make bench QUICK=1``: fewer shapes than the full grid of the same
            device), ``nsys`` (the few shapes ``make nsys`` profiles); every shape of the others
            is also in ``default`` so that asv parameters stay fixed. Set, with ``dtypes``,
            ``headline`` and the backends measured, from the case file (``fusebench.config``).
        invariant: optional check ``invariant(y, x) -> str | None`` returning what is wrong.
        dtypes: the op's dtype axis, names from :data:`PRECISIONS` (default: the plain dtypes).
        flops: optional ``flops(shape) -> int``, floating-point operations of one call (a
            multiply-add counts 2), declared from the shape like the traffic.
        roofline: ``"memory"`` (bounded by bandwidth: its % is of the copy ceiling, and above
            105 % it is flagged as measuring caches) or ``"compute"`` (bounded by arithmetic:
            its % is of the measured matrix peak); ``"compute"`` needs ``flops``.
        tolerance: optional ``tolerance(shape, precision name) -> float`` replacing the gate's
            per-dtype table, for ops whose rounding error grows with the shape (a length-k dot
            product).
        headline: the shape the op's one-number summaries report (the speedup chart), one of
            ``grids["default"]``.
        traffic: optional ``traffic(shape, element size in bytes) -> int``, the fewest bytes one
            call must move, for ops that read more than one tensor-sized input (a normalization's
            weight vector); default ``2 * numel * element size`` (see :meth:`bytes_moved`).
        backends: registered backends by name, filled by :meth:`backend`.
    """

    name: str
    reference: Callable[[torch.Tensor], torch.Tensor]
    grids: dict[str, list[Shape]] = field(default_factory=dict)
    invariant: Callable[[torch.Tensor, torch.Tensor], str | None] | None = None
    dtypes: tuple[str, ...] = tuple(DTYPES)
    flops: Callable[[Shape], int] | None = None
    roofline: str = "memory"
    tolerance: Callable[[Shape, str], float] | None = None
    headline: Shape | None = None
    traffic: Callable[[Shape, int], int] | None = None
    backends: dict[str, Backend] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.roofline not in ROOFLINES:
            raise ValueError(f"op {self.name!r}: roofline {self.roofline!r} is not one of {ROOFLINES}")
        if self.roofline == "compute" and self.flops is None:
            raise ValueError(f"op {self.name!r}: a compute-bound op must declare flops(shape)")
        if unknown := [d for d in self.dtypes if d not in PRECISIONS]:
            raise ValueError(f"op {self.name!r}: unknown dtypes {unknown}; valid: {', '.join(PRECISIONS)}")

    def backend(self, name: str) -> Callable[[Factory], Factory]:
        """Decorator registering ``factory`` as backend ``name``; the case file lists it in the
        op's ``backends:`` (its place on the backend axis, :data:`BACKENDS`), or reading the case
        file refuses the op (``fusebench.config``: one line naming the file).

        Raises:
            ValueError: the name is not a backend name (lowercase letters, digits, ``_``) or is
                registered twice.
        """
        if not BACKEND_NAME.fullmatch(name):
            raise ValueError(f"backend name {name!r}: write lowercase letters, digits and _")
        if name in self.backends:
            raise ValueError(f"backend {name!r} registered twice for op {self.name!r}")

        def register(factory: Factory) -> Factory:
            self.backends[name] = Backend(name, factory)
            return factory

        return register

    def bytes_moved(self, shape: Shape, dtype: torch.dtype | str) -> int:
        """Fewest bytes the op must move: read the input once, write the output once.

        Returns ``2 * numel * element size`` in bytes, or the op's own ``traffic(shape, element
        size)`` when it declares one (the nvbench way of declaring global memory reads and
        writes from the shape, not guessing them from the timing). ``dtype``: a torch dtype, or
        a dtype-axis name (``"tf32"``: float32 storage), as the reports hold it.
        """
        itemsize = (ELEMENT_SIZE[dtype] if isinstance(dtype, str)
                    else torch.empty((), dtype=dtype).element_size())
        return declared_bytes(shape, itemsize, self.traffic)

    def get_backend(self, name: str) -> Backend:
        """The backend ``name``.

        Raises:
            UsageError: ``name`` is not a backend name (lists the valid ones).
            SkipCase: ``name`` is a valid backend name that this op does not implement.
        """
        if name not in BACKENDS:
            raise UsageError(f"unknown backend {name!r}; valid backends: {', '.join(BACKENDS)}")
        if name not in self.backends:
            raise SkipCase(no_backend_reason(self.name, name))
        return self.backends[name]


def parse_dtype(name: str) -> torch.dtype:
    """``"bfloat16"`` -> ``torch.bfloat16``.

    Raises:
        UsageError: unknown dtype name (lists the valid ones).
    """
    if name not in DTYPES:
        raise UsageError(f"unknown dtype {name!r}; valid dtypes: {', '.join(DTYPES)}")
    return DTYPES[name]


def parse_precision(name: str) -> Precision:
    """``"tf32"`` -> its :class:`Precision` (any dtype-axis value).

    Raises:
        UsageError: unknown name (lists the valid ones).
    """
    if name not in PRECISIONS:
        raise UsageError(f"unknown dtype {name!r}; valid dtypes: {', '.join(PRECISIONS)}")
    return PRECISIONS[name]


def dtype_name(dtype: torch.dtype) -> str:
    """``torch.bfloat16`` -> ``"bfloat16"``."""
    return str(dtype).removeprefix("torch.")
