"""Seeded, cached inputs keyed by (shape, dtype, device, seed).

Every case draws its input here, so a timing and its correctness check see the same tensor, and
a case can be reproduced from its recorded seed. Values are standard normal: GELU then exercises
both its near-linear and saturated ranges, softmax rows have a spread of about 4 around the max.
"""

from __future__ import annotations

import functools

import torch

from fusebench.record import SEED  # declared with the record, which stores it
from fusebench.registry import Shape


@functools.lru_cache(maxsize=1)  # the current case's input only: the larger ones are GBs
def make_input(shape: Shape, dtype: torch.dtype, device: str, seed: int = SEED) -> torch.Tensor:
    """A contiguous standard-normal tensor of ``shape`` and ``dtype`` on ``device``.

    Drawn in float32 with a CPU generator seeded by ``seed`` for shapes up to 2^24 elements
    (identical on every machine), on the device's own generator beyond that (host-side draws of
    GBs are slow); then cast to ``dtype``. Never modified by a backend (callers must not write
    into it: timed calls never modify their inputs).
    """
    numel = 1
    for d in shape:
        numel *= d
    if numel <= 1 << 24 or device == "cpu":
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(shape, generator=g, dtype=torch.float32).to(device)
    else:
        g = torch.Generator(device=device).manual_seed(seed)
        x = torch.randn(shape, generator=g, dtype=torch.float32, device=device)
    return x.to(dtype)


def clear() -> None:
    """Drop cached inputs (frees device memory between ops)."""
    make_input.cache_clear()
