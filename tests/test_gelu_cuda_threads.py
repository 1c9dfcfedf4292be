"""The CUDA GELU's block sizes (``cuda_ext.gelu(threads=...)``, a tuning knob): each one covers
every element, ragged tails and unaligned views too, with the same arithmetic as the default; a
size that is not built is refused before the extension. The refusal runs anywhere; the rest is
marked ``gpu``."""

import pytest
import torch

from fusebench.measure import correctness
from fusebench.ops import get_op


@pytest.mark.gpu
@pytest.mark.parametrize("threads", [128, 256, 512])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("numel", [9, 4097, (1 << 22) + 5])
def test_every_block_size_gives_the_default_result(threads, dtype, numel):
    from fusebench.kernels import cuda_ext

    g = torch.Generator(device="cuda").manual_seed(numel)
    base = torch.randn(numel + 1, device="cuda", dtype=dtype, generator=g) * 4
    for x in (base[:numel], base[1:]):  # aligned, then 2 or 4 bytes off 16: the scalar path
        y = cuda_ext.gelu(x, threads=threads)
        r = correctness.check(get_op("gelu"), lambda x=x: cuda_ext.gelu(x, threads=threads), x)
        assert r.passed, r.reason
        # Per element the arithmetic does not depend on the geometry: equal bit for bit.
        assert torch.equal(y, cuda_ext.gelu(x))


@pytest.mark.parametrize("threads", [64, 1024, 0, -1])
def test_a_block_size_that_is_not_built_is_refused_before_the_extension(threads, monkeypatch):
    from fusebench.kernels import cuda_ext

    def no_extension():
        raise AssertionError("the extension was reached")

    monkeypatch.setattr(cuda_ext, "_module", no_extension)
    with pytest.raises(ValueError, match=r"gelu: threads must be one of 128, 256, 512, got "):
        cuda_ext.gelu(torch.ones(8), threads=threads)
