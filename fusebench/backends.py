"""Backend-building helpers shared by every op: torch.compile wrapping and availability checks.

These are what make each op's ``compile``, ``triton`` and ``cuda`` entries one short function.
"""

from __future__ import annotations

import importlib.util
import os
import time
from typing import Callable

import torch

from fusebench.errors import SkipCase


def compiled(eager: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> Callable[[], torch.Tensor]:
    """``torch.compile`` of ``eager`` for exactly ``x``'s shape and dtype, compiled now.

    Dynamo's caches are reset first so that each case gets its own static-shape graph
    (``dynamic=False``): a sweep over many shapes would otherwise hit the recompile limit and
    fall back to eager, or to a slower dynamic-shape kernel. ``fullgraph=True`` makes a graph
    break an error instead of a silent partial compile. The returned callable carries the
    compile time (its first call, seconds) as its ``compile_s`` attribute.

    Raises:
        SkipCase: Inductor cannot compile on this machine (e.g. no C++ compiler), with its reason.
    """
    torch._dynamo.reset()
    fn = torch.compile(eager, dynamic=False, fullgraph=True)
    start = time.perf_counter()
    try:
        fn(x)
    except Exception as exc:  # an unusable compiler toolchain is a skip, with its reason
        raise SkipCase(f"torch.compile failed: {first_line(exc)}") from exc
    if x.is_cuda:
        torch.cuda.synchronize(x.device)
    def run():
        return fn(x)

    run.compile_s = time.perf_counter() - start
    return run


def require_triton(x: torch.Tensor) -> None:
    """Check that a Triton kernel can run on ``x``.

    Raises:
        SkipCase: Triton is not installed, or ``x`` is on the CPU and ``TRITON_INTERPRET=1`` is
            not set (the interpreter is for tests on small shapes, not for timing).
    """
    if importlib.util.find_spec("triton") is None:
        raise SkipCase("triton is not installed")
    if not x.is_cuda and os.environ.get("TRITON_INTERPRET") != "1":
        raise SkipCase("triton needs a CUDA GPU (TRITON_INTERPRET=1 runs it on the CPU, for tests)")


def require_cuda_extension(x: torch.Tensor):
    """The built ``kernels.cuda_ext`` module, ready for ``x`` (builds it on first use).

    Raises:
        SkipCase: ``x`` is not on a CUDA device, or the extension cannot be built or loaded here
            (no nvcc, torch without CUDA, a compile error), with that reason.
    """
    if not x.is_cuda:
        raise SkipCase("needs a CUDA GPU")
    from kernels import cuda_ext

    if reason := cuda_ext.unavailable_reason():
        raise SkipCase(f"cuda extension unavailable: {reason}")
    return cuda_ext


def first_line(exc: BaseException) -> str:
    """The first non-empty line of an exception's message, prefixed by its type."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")
