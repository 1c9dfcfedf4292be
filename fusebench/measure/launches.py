"""Launches per call, and which kernels they are: what one call of a backend issues on the GPU.

Counted with ``torch.profiler`` (Kineto/CUPTI activity records, CUDA activity only) around one
warmed-up call. Eager GELU issues 9 kernels per call, a fused backend 1.

The same record names each kernel with its launch geometry (grid, block, registers, shared
memory: the ``args`` of Kineto's ``kernel`` events in the exported Chrome trace). That is the
identity of the code that ran: a Triton autotuner's or Inductor's pick shows in the kernel's
grid and block (block sizes, warps), a dispatcher's pick (the CUDA backend's ``auto`` variant,
cuBLAS) in the kernel's name. Two runs whose identities differ ran different kernels, whatever
their source says.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import warnings
from dataclasses import dataclass
from typing import Callable

import torch

from fusebench.measure.torch_logs import quiet_profiler

#: Longest kernel name kept in a record (C++ template names run to thousands of characters; the
#: identity hash is taken over the full names).
NAME_CHARS = 160


@dataclass(frozen=True)
class CallProfile:
    """What one call issued on the GPU.

    Attributes:
        launches: GPU operations (kernels, memcpys, memsets) of one call.
        kernels: one text per kernel launch, in order: ``name grid=[x, y, z] block=[x, y, z]
            regs=N smem=B`` (name cut to :data:`NAME_CHARS`).
        kernel_id: 12 hex digits identifying the full kernel list (names uncut), or None when
            nothing was launched.
    """

    launches: int
    kernels: tuple[str, ...]
    kernel_id: str | None


def kernels_from_trace(trace: dict) -> tuple[list[str], list[str]]:
    """Kernel launches of a Chrome trace exported by ``torch.profiler``, in time order.

    Returns ``(full texts, texts with names cut to NAME_CHARS)``; each text names the kernel and
    its geometry from the event's ``args`` (missing fields are left out).
    """
    events = [e for e in trace.get("traceEvents", []) if e.get("cat") == "kernel"]
    events.sort(key=lambda e: e.get("ts", 0))
    full, short = [], []
    for e in events:
        args = e.get("args", {})
        geometry = " ".join(f"{key}={json.dumps(args[field])}" for key, field in
                            (("grid", "grid"), ("block", "block"), ("regs", "registers per thread"),
                             ("smem", "shared memory")) if field in args)
        name = str(e.get("name", "?"))
        full.append(f"{name} {geometry}".strip())
        short.append(f"{name[:NAME_CHARS]} {geometry}".strip())
    return full, short


def identity(kernels: list[str]) -> str | None:
    """12 hex digits of sha256 over the kernel texts; None for an empty list."""
    if not kernels:
        return None
    return hashlib.sha256("\n".join(kernels).encode()).hexdigest()[:12]


def profile_call(fn: Callable[[], object], device: torch.device) -> CallProfile | None:
    """Profile one call of ``fn``; ``None`` on the CPU (nothing is launched).

    Raises:
        RuntimeError: the profiler could not record (reported as the case's failure reason).
    """
    if device.type != "cuda":
        return None
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize(device)
    quiet_profiler()  # no Kineto 'USDT: profiler_start/stop' lines on stderr
    with warnings.catch_warnings():  # "Profiler clears events at the end of each cycle": expected
        warnings.simplefilter("ignore", UserWarning)
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            fn()
            torch.cuda.synchronize(device)
    launches = sum(1 for e in prof.events() if e.device_type == DeviceType.CUDA)
    fd, path = tempfile.mkstemp(prefix="fusebench-trace-", suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        with open(path) as f:
            full, short = kernels_from_trace(json.load(f))
    finally:
        os.unlink(path)
    return CallProfile(launches, tuple(short), identity(full))


def launches_per_call(fn: Callable[[], object], device: torch.device) -> int | None:
    """GPU operations issued by one call of ``fn``; ``None`` on the CPU (see :func:`profile_call`)."""
    prof = profile_call(fn, device)
    return None if prof is None else prof.launches
