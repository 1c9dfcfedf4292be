"""Backend-building helpers shared by every op: torch.compile wrapping and availability checks.

These are what make each op's ``compile``, ``triton`` and ``cuda`` entries one short function.
"""

from __future__ import annotations

import importlib.util
import os
import time
import types
from typing import Callable, Iterable, Mapping

import torch

from fusebench.errors import SkipCase, first_line
from fusebench.measure.torch_logs import quiet_compile


def compiled(eager: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> Callable[[], torch.Tensor]:
    """``torch.compile`` of ``eager`` for exactly ``x``'s shape and dtype, compiled now.

    Each case compiles a fresh copy of ``eager`` (a new code object: Dynamo keeps its compiled
    graphs and guards on the code object), so that each case gets its own static-shape graph
    (``dynamic=False``) without resetting Dynamo: a sweep over many shapes would otherwise hit
    the recompile limit and fall back to eager or a dynamic-shape kernel, and a reset
    (``torch._dynamo.reset()``) would make every case built before recompile, and maybe
    re-autotune, at its next call (a run's cases are built once and timed in several rounds).
    ``fullgraph=True`` makes a graph break an error instead of a silent partial compile.

    The returned callable carries the compile time (its first call, seconds) as ``compile_s``,
    and ``chosen_by_timing = True``: Inductor picks among several launch configurations of a
    generated kernel by timing them at first use, so two processes may run different kernels
    for the same code. ``autotuned`` names each pick (:func:`autotuned`): the kernel's grid and
    block alone do not show it (a reduction's ``R0_BLOCK`` 4096 or 2048 launches the same
    geometry), so the record's kernel identity includes it (``sweep.prepare``).

    Raises:
        SkipCase: Inductor cannot compile on this machine (e.g. no C++ compiler), with its reason.
    """
    fresh = types.FunctionType(eager.__code__.replace(), eager.__globals__, eager.__name__,
                               eager.__defaults__, eager.__closure__)
    fn = torch.compile(fresh, dynamic=False, fullgraph=True)
    loaded = _inductor_modules()
    start = time.perf_counter()
    try:
        with quiet_compile():  # the skip below says it in one line; torch's log would repeat it
            fn(x)
    except Exception as exc:  # an unusable compiler toolchain is a skip, with its reason
        raise SkipCase(f"torch.compile failed: {first_line(exc)}") from exc
    if x.is_cuda:
        torch.cuda.synchronize(x.device)

    def run():
        return fn(x)

    run.compile_s = time.perf_counter() - start
    run.chosen_by_timing = True
    run.autotuned = autotuned([m for m in _inductor_modules() if id(m) not in {id(k) for k in loaded}])
    return run


def _inductor_modules() -> list:
    """The Python modules Inductor has loaded so far (its output code and kernels); empty when
    this torch keeps no such list."""
    try:
        from torch._inductor.codecache import PyCodeCache
    except ImportError:  # pragma: no cover - a torch without Inductor
        return []
    return list(getattr(PyCodeCache, "modules", None) or getattr(PyCodeCache, "modules_no_attr", {}).values())


def autotuned(modules) -> tuple[str, ...]:
    """The launch configuration each Triton kernel of ``modules`` runs with, once its autotuner
    has picked one (Inductor's ``CachingAutotuner``: ``launchers`` narrowed to the winner), as
    ``name XBLOCK=1 R0_BLOCK=4096 num_warps=16 num_stages=1``, sorted; a kernel still holding
    several configurations, or none, is left out. Inductor's internals: read defensively, an
    unknown shape gives nothing."""
    picks = set()
    for module in modules:
        for attr, obj in list(vars(module).items()):
            launchers = getattr(obj, "launchers", None)
            if not isinstance(launchers, list) or len(launchers) != 1:
                continue
            config = getattr(launchers[0], "config", None)
            kwargs = getattr(config, "kwargs", None)
            if not isinstance(kwargs, dict):
                continue
            meta = getattr(obj, "inductor_meta", None)
            name = meta.get("kernel_name", attr) if isinstance(meta, dict) else attr
            parts = [f"{k}={kwargs[k]}" for k in sorted(kwargs)]
            parts += [f"{k}={getattr(config, k)}" for k in ("num_warps", "num_stages") if hasattr(config, k)]
            picks.add(" ".join([str(name), *parts]))
    return tuple(sorted(picks))


def require_triton(x: torch.Tensor) -> None:
    """Check that a Triton kernel can run on ``x``.

    Raises:
        SkipCase: Triton is not installed, or ``x`` is on the CPU and ``TRITON_INTERPRET=1`` is
            not set (the interpreter is for tests on small shapes, not for timing).
    """
    if importlib.util.find_spec("triton") is None:
        raise SkipCase("triton is not installed")
    if not x.is_cuda and os.environ.get("TRITON_INTERPRET") != "1":
        raise SkipCase("triton needs a CUDA GPU (TRITON_INTERPRET=1 emulates it on the CPU for the "
                       "tests only; a run refuses emulated figures)")


#: Builds that every case of a backend shares, by backend, registered by the kernels that need
#: them (:func:`shared_build`; ``cuda``: the CUDA extension, ``kernels/cuda_ext.py``): each starts
#: its build in a background thread and returns what waits for it.
SHARED_BUILDS: dict[str, Callable[[], Callable[[], object]]] = {}


def shared_build(backend: str) -> Callable:
    """Register the decorated function as what starts the build that every case of ``backend``
    shares (:data:`SHARED_BUILDS`); it must return at once, and touch no GPU."""
    def register(start: Callable[[], Callable[[], object]]) -> Callable[[], Callable[[], object]]:
        SHARED_BUILDS[backend] = start
        return start

    return register


def start_builds(backend_names: Iterable[str], dev: torch.device,
                 starts: Mapping[str, Callable[[], Callable[[], object]]] | None = None,
                 ) -> list[Callable[[], object]]:
    """Start, in background threads, the shared builds (``starts``, default :data:`SHARED_BUILDS`)
    of the backends among ``backend_names`` that a run on ``dev`` will build cases of, so that
    they run while the other backends' cases build (the CUDA extension's nvcc beside Inductor's
    and Triton's compiles). Nothing on the CPU: there these backends skip their cases before
    building anything. Returns what waits for each build (the run waits before its rounds, so
    that no compiler runs while a case is timed). Touches no GPU; a failed build is not raised
    here: its cases say why, as when they build it themselves."""
    if dev.type != "cuda":
        return []
    starts = SHARED_BUILDS if starts is None else starts
    return [starts[name]() for name in dict.fromkeys(backend_names) if name in starts]
