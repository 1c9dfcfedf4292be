"""GELU's tuning space (``fusebench tune triton``, ``fusebench tune cuda``; ``fusebench/tuning.py``).

Triton: block and warps around the default, cache hints, persistent grids and programmatic
dependent launches; CUDA: forced plain and programmatic dependent launches, 256 and 512 threads
per block. Both at 2^22, 2^24 and 2^26 elements.
"""

from __future__ import annotations

import torch
from fusebench.kernels import cuda_ext

from fusebench.registry import DTYPES
from fusebench.tuning import Candidate, Space

SIZES = ((1 << 22,), (1 << 24,), (1 << 26,))


def triton_candidates(x: torch.Tensor) -> list[Candidate]:
    """Default first, then block/warps variants, cache hints, persistent grids."""
    from fusebench.kernels.gelu import triton as tg  # Triton imported only where it is tuned

    d = tg._launch_config(x.element_size())
    b, w = d.block, d.num_warps
    cfgs = [
        ("default", None),
        *[
            (f"block={bb} warps={ww}", tg.GeluConfig(bb, ww))
            for bb, ww in ((b // 2, w // 2), (b, w // 2), (b, 2 * w), (2 * b, w), (2 * b, 2 * w))
        ],
        ("default evict_first", tg.GeluConfig(b, w, evict_first=True)),
        ("default .cs store", tg.GeluConfig(b, w, streaming_store=True)),
        ("default evict_first .cs", tg.GeluConfig(b, w, evict_first=True, streaming_store=True)),
        *[(f"persistent {k}/SM", tg.GeluConfig(b, w, programs_per_sm=k)) for k in (1, 2, 4, 8)],
        ("persistent 4/SM block/2 warps/2", tg.GeluConfig(b // 2, w // 2, programs_per_sm=4)),
        ("persistent 8/SM block/2 warps/2", tg.GeluConfig(b // 2, w // 2, programs_per_sm=8)),
        ("persistent 16/SM block/2 warps/2", tg.GeluConfig(b // 2, w // 2, programs_per_sm=16)),
        (
            "persistent 4/SM evict_first .cs",
            tg.GeluConfig(b, w, programs_per_sm=4, evict_first=True, streaming_store=True),
        ),
        ("no pdl", tg.GeluConfig(b, w)),
        ("pdl", tg.GeluConfig(b, w, pdl=True)),
        ("pdl block*2 warps*2", tg.GeluConfig(b * 2, w * 2, pdl=True)),
        ("pdl evict_first .cs", tg.GeluConfig(b, w, evict_first=True, streaming_store=True, pdl=True)),
        ("pdl persistent 4/SM", tg.GeluConfig(b, w, programs_per_sm=4, pdl=True)),
        ("pdl block/2 warps/2", tg.GeluConfig(b // 2, w // 2, pdl=True)),
        *[
            (
                f"pdl even {k}/SM block/{d}",
                tg.GeluConfig(b // d, max(1, w // d), programs_per_sm=k, even=True, pdl=True),
            )
            for k, d in ((4, 1), (8, 2), (8, 4), (16, 4), (16, 8))
        ],
    ]
    return [Candidate(label, lambda x, c=c: lambda: tg.gelu(x, _config=c)) for label, c in cfgs]


def _cuda(**forced):
    def make(x: torch.Tensor):
        ext = cuda_ext.require(x)
        return lambda: ext.gelu(x, **forced)

    return make


def cuda_candidates(x: torch.Tensor) -> list[Candidate]:
    """The CUDA GELU as the suite runs it, then forced plain and programmatic dependent launches
    and 256 and 512 threads per block."""
    return [Candidate("default", _cuda()), Candidate("pdl=0", _cuda(pdl=False)),
            Candidate("pdl=1", _cuda(pdl=True)), Candidate("threads=256", _cuda(threads=256)),
            Candidate("threads=512", _cuda(threads=512))]


def _cases(dtypes):
    return lambda op: [(shape, dtype) for shape in SIZES for dtype in dtypes]


SPACES = {
    "triton": Space(_cases((torch.float32, torch.bfloat16)), triton_candidates),
    "cuda": Space(_cases(tuple(DTYPES.values())), cuda_candidates, budget_s=0.05),
}
