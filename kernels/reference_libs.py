"""The reference backends' libraries: the field's public kernels, called the way their users call them.

``liger``, ``quack`` and ``flaggems`` are backends of the ops these libraries implement
(docs/reference-backends.md). This module is the one place that knows them: which package each backend is
(:data:`LIBRARIES`, pinned in ``requirements-reference.lock``), how to import it, and one small
adapter per (library, op) that returns a ready zero-argument callable, so that an op module registers
each reference backend with one line (``return reference_libs.liger_softmax(x)``).

What each library computes, read from the pinned releases' sources:

- Liger-Kernel 0.8.5 (``liger_kernel/ops/softmax.py``, ``rms_norm.py``): a Triton softmax over the
  last dimension (``LigerSoftmaxFunction``; rows longer than 65536 are refused by its
  ``calculate_settings``) and ``LigerRMSNormFunction``. Its only GELU is GEGLU (``gelu(a) * b``), a
  different op with twice the input traffic: not a ``gelu`` backend.
- QuACK 0.6.5 (``quack/softmax.py``, ``rmsnorm.py``; CuTe DSL kernels on ``nvidia-cutlass-dsl``):
  ``quack.softmax(x)`` of a 2-D tensor (M, N), and ``quack.rmsnorm(x, weight, eps=...)``. Its GELU
  exists only as a GEMM epilogue (``quack/activation.py``): not a ``gelu`` backend.
- FlagGems 5.0.2 (``flag_gems/ops/softmax.py``, ``gelu.py``; Triton): ``flag_gems.ops.softmax(x, dim)``
  and ``flag_gems.ops.gelu(x, approximate="tanh")``, which computes
  0.5·x·(1 + tanh(0.79788456·x·(1 + 0.044715·x²))): the same function as fusebench's ``gelu`` op.

Import costs: nothing here imports a library at module import; each adapter imports its library on
first use, inside the backend's factory (FlagGems raises at import on a machine with no GPU).

Skips (:class:`fusebench.errors.SkipCase`), in the order they are checked: the input is not on a
CUDA GPU; the package is not installed, or cannot be imported (the reason names the package, its
pinned version and how to install the reference group); the library refuses this shape or dtype:
each adapter calls the library once, before returning, and a refusal there is a skip with the
library's own first line. The callable returned then goes through the same correctness gate as
every other backend.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
from dataclasses import dataclass
from types import ModuleType
from typing import Callable

import torch

from fusebench.errors import SkipCase, first_line

#: How to install the libraries (docs/reference-backends.md); named in every "not installed" skip.
INSTALL = ("install the reference group: make venv REFERENCE=1, or pip install --no-deps "
           "--require-hashes -r requirements-reference.lock")


@dataclass(frozen=True)
class Library:
    """One reference library.

    Attributes:
        backend: the backend name (one of ``fusebench.registry.BACKENDS``).
        package: the distribution's name on PyPI (``liger-kernel``).
        version: the version pinned in ``requirements-reference.lock`` (tests check they agree).
        module: the top-level import name (``liger_kernel``).
    """

    backend: str
    package: str
    version: str
    module: str

    def installed_version(self) -> str | None:
        """The installed distribution's version (from its metadata, nothing imported), or None."""
        try:
            return importlib.metadata.version(self.package)
        except importlib.metadata.PackageNotFoundError:
            return None

    def label(self) -> str:
        """``"liger-kernel 0.8.5"``: the installed version, or the pinned one when not installed."""
        return f"{self.package} {self.installed_version() or self.version}"


#: The reference libraries by backend name, in report order.
LIBRARIES: dict[str, Library] = {lib.backend: lib for lib in (
    Library("liger", "liger-kernel", "0.8.5", "liger_kernel"),
    Library("quack", "quack-kernels", "0.6.5", "quack"),
    Library("flaggems", "flag-gems", "5.0.2", "flag_gems"),
)}


def load(backend: str, x: torch.Tensor, module: str) -> ModuleType:
    """Import ``module`` (a module of ``backend``'s library) for a case on ``x``.

    Raises:
        SkipCase: ``x`` is not on a CUDA GPU; the library is not installed; or importing it failed
            (a missing runtime dependency, no usable GPU), with the import's first line.
    """
    lib = LIBRARIES[backend]
    if not x.is_cuda:
        raise SkipCase(f"{lib.package} needs a CUDA GPU")
    if importlib.util.find_spec(lib.module) is None:
        raise SkipCase(f"{lib.package} {lib.version} is not installed; {INSTALL}")
    try:
        return importlib.import_module(module)
    except Exception as exc:  # ImportError of a dependency, or the library's own check at import
        raise SkipCase(f"{lib.label()} cannot be imported ({first_line(exc)}); {INSTALL}") from exc


def ready(backend: str, x: torch.Tensor, call: Callable[[], torch.Tensor]) -> Callable[[], torch.Tensor]:
    """``call`` after one call of it on ``x`` went through (compiled, launched, synchronized).

    Raises:
        SkipCase: the library refused the case: ``"<package> <version> refuses <shape> <dtype>:
            <its first line>"`` (the case is skipped with the library's reason, not failed).
    """
    lib = LIBRARIES[backend]
    try:
        call()
        if x.is_cuda:
            torch.cuda.synchronize(x.device)
    except Exception as exc:  # the library's refusal of this shape or dtype, in its own words
        shape = "x".join(str(d) for d in x.shape)
        dtype = str(x.dtype).removeprefix("torch.")
        raise SkipCase(f"{lib.label()} refuses {shape} {dtype}: {first_line(exc)}") from exc
    return call


def rows(x: torch.Tensor) -> torch.Tensor:
    """``x`` as the 2-D (rows, last dimension) view a row-wise kernel takes (no copy for a
    contiguous ``x``)."""
    return x.reshape(-1, x.shape[-1]) if x.dim() != 2 else x


# --- softmax over the last dimension -----------------------------------------------------------

def liger_softmax(x: torch.Tensor) -> Callable[[], torch.Tensor]:
    """Liger-Kernel's softmax of ``x`` over its last dimension (``LigerSoftmaxFunction.apply``).

    float32, bfloat16, float16; any shape (flattened to rows). Raises :class:`SkipCase` (see
    :func:`load`, :func:`ready`); Liger refuses rows longer than 65536.
    """
    fn = load("liger", x, "liger_kernel.ops.softmax").LigerSoftmaxFunction.apply
    return ready("liger", x, lambda: fn(x))


def quack_softmax(x: torch.Tensor) -> Callable[[], torch.Tensor]:
    """QuACK's softmax of ``x`` over its last dimension (``quack.softmax`` of the (rows, N) view).

    float32, bfloat16, float16. Raises :class:`SkipCase` (see :func:`load`, :func:`ready`); QuACK
    refuses a row too long for its shared memory.
    """
    fn = load("quack", x, "quack").softmax
    x2 = rows(x)
    return ready("quack", x, lambda: fn(x2).view(x.shape))


def flaggems_softmax(x: torch.Tensor) -> Callable[[], torch.Tensor]:
    """FlagGems' softmax of ``x`` over its last dimension (``flag_gems.ops.softmax(x, -1)``).

    Raises :class:`SkipCase` (see :func:`load`, :func:`ready`).
    """
    fn = load("flaggems", x, "flag_gems.ops").softmax
    return ready("flaggems", x, lambda: fn(x, -1))


# --- GELU, tanh approximation ------------------------------------------------------------------

def flaggems_gelu(x: torch.Tensor) -> Callable[[], torch.Tensor]:
    """FlagGems' GELU, tanh approximation (``flag_gems.ops.gelu(x, approximate="tanh")``), any shape.

    Raises :class:`SkipCase` (see :func:`load`, :func:`ready`).
    """
    fn = load("flaggems", x, "flag_gems.ops").gelu
    return ready("flaggems", x, lambda: fn(x, approximate="tanh"))


# --- RMSNorm over the last dimension (for the rmsnorm op; not registered until it exists) --------

def liger_rmsnorm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> Callable[[], torch.Tensor]:
    """Liger-Kernel's RMSNorm: x / sqrt(mean(x², last dim) + eps) · weight, in x's dtype.

    ``LigerRMSNormFunction.apply(x, weight, eps)`` with Liger's defaults: no weight offset,
    ``casting_mode="llama"`` (only the inverse RMS in float32, as Llama's and Hugging Face's
    ``LlamaRMSNorm``). ``weight``: shape (N,), N = ``x.shape[-1]``. Raises :class:`SkipCase` (see
    :func:`load`, :func:`ready`).
    """
    fn = load("liger", x, "liger_kernel.ops.rms_norm").LigerRMSNormFunction.apply
    return ready("liger", x, lambda: fn(x, weight, eps))


def quack_rmsnorm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> Callable[[], torch.Tensor]:
    """QuACK's RMSNorm: ``quack.rmsnorm(x, weight, eps=eps)`` (float32 arithmetic, output in x's
    dtype). ``weight``: shape (N,). Raises :class:`SkipCase` (see :func:`load`, :func:`ready`).
    """
    fn = load("quack", x, "quack").rmsnorm
    return ready("quack", x, lambda: fn(x, weight, eps=eps))
