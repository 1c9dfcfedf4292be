"""Launches per call: GPU kernels (and other GPU operations) one call of a backend issues.

Counted with ``torch.profiler`` (Kineto/CUPTI activity records, CUDA activity only) around one
warmed-up call. Eager GELU issues 9 kernels per call, a fused backend 1.
"""

from __future__ import annotations

from typing import Callable

import torch


def launches_per_call(fn: Callable[[], object], device: torch.device) -> int | None:
    """GPU operations issued by one call of ``fn``; ``None`` on the CPU (nothing is launched).

    Raises:
        RuntimeError: the profiler could not record (reported as the case's failure reason).
    """
    if device.type != "cuda":
        return None
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize(device)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize(device)
    return sum(1 for e in prof.events() if e.device_type == DeviceType.CUDA)
