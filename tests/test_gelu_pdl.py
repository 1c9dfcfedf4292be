"""Programmatic dependent launch of GELU in both hand-written backends (Triton and CUDA): the same
results as the plain launch in a dependent chain. Marked ``gpu``."""

import pytest
import torch

from fusebench.measure import correctness
from fusebench.ops import get_op

pytestmark = pytest.mark.gpu


def _gelu_chain(gelu, x, calls=8):
    """``calls`` GELUs back to back, each reading the previous one's output (a dependency PDL
    must honour: a dependent kernel may start early but must not read before the wait)."""
    y = x
    for _ in range(calls):
        y = gelu(y)
    return y


@pytest.mark.parametrize("backend", ["triton", "cuda"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_gelu_with_pdl_matches_the_plain_launch_in_a_dependent_chain(backend, dtype):
    if backend == "cuda":
        from fusebench.kernels import cuda_ext

        def plain(t):
            return cuda_ext.gelu(t, pdl=False)

        def pdl(t):
            return cuda_ext.gelu(t, pdl=True)
    else:
        from fusebench.kernels.gelu import triton as tg

        d = tg._launch_config(torch.empty((), dtype=dtype).element_size())
        on = tg.GeluConfig(d.block, d.num_warps, pdl=True)

        def plain(t):
            return tg.gelu(t, _config=d)

        def pdl(t):
            return tg.gelu(t, _config=on)

    x = torch.randn((1 << 24) + 3, device="cuda", dtype=dtype) * 4  # ragged: the scalar tail too
    r = correctness.check(get_op("gelu"), lambda: pdl(x), x)
    assert r.passed, r.reason
    # Same kernel arithmetic either way: a dependency broken by an early start would differ.
    assert torch.equal(_gelu_chain(pdl, x), _gelu_chain(plain, x))
