"""The Triton GELU kernel (fusebench.kernels.gelu.triton) against the float64 reference.

Without a CUDA device it runs in the Triton interpreter on CPU tensors; shapes are kept small for it.
"""

import pytest
import torch

triton = pytest.importorskip("triton")

from fusebench.kernels.gelu.triton import GeluConfig, gelu
from kernelcheck import DEVICE, DTYPES, close, randn

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # interpreter: exp overflow


def _gelu_ref(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.gelu(x.double(), approximate="tanh")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1,), (7,), (100,), (1000,), (3, 5, 7), (3, 4099), ()])
def test_gelu_matches_reference(shape, dtype):
    x = randn(shape, dtype)
    close(gelu(x), _gelu_ref(x), dtype)


def test_gelu_extremes():
    x = torch.tensor([-1e4, -30.0, -8.0, -1e-20, 0.0, 1e-20, 8.0, 30.0, 1e4], device=DEVICE)
    close(gelu(x), _gelu_ref(x), torch.float32)


@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16))
def test_gelu_non_contiguous(dtype):
    base = randn((40, 30), dtype)
    for x in (base.t(), base[:, ::3], base[5:, 2:17]):
        assert not x.is_contiguous()
        close(gelu(x), _gelu_ref(x), dtype)


@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16))
@pytest.mark.parametrize(
    "config",
    [
        GeluConfig(256, 2),  # several programs, masked last block
        GeluConfig(64, 1, programs_per_sm=1),  # persistent: 132 programs stride over 157 blocks
        GeluConfig(128, 4, programs_per_sm=4, evict_first=True, streaming_store=True),
        GeluConfig(16384, 8, evict_first=True),  # one program, mostly masked
        GeluConfig(64, 1, programs_per_sm=1, even=True),  # 132 programs, runs of 2 blocks, some none
    ],
)
def test_gelu_forced_configs(config, dtype):
    x = randn((10001,), dtype)
    close(gelu(x, _config=config), _gelu_ref(x), dtype)


def test_gelu_config_validation():
    with pytest.raises(ValueError):
        GeluConfig(100, 4)
    with pytest.raises(ValueError):
        GeluConfig(128, 3)
    with pytest.raises(ValueError):
        GeluConfig(128, 4, programs_per_sm=-1)
    with pytest.raises(ValueError, match="even needs"):
        GeluConfig(128, 4, even=True)


@pytest.mark.skipif(DEVICE == "cuda", reason="interpreter behaviour")
def test_gelu_pdl_config_needs_a_gpu():
    with pytest.raises(ValueError, match="needs a CUDA device"):
        gelu(randn((100,), torch.float32), _config=GeluConfig(128, 4, pdl=True))


@pytest.mark.parametrize("shape", [(0,), (0, 5), (4, 0, 3)])
def test_gelu_empty(shape):
    y = gelu(torch.empty(shape, device=DEVICE))
    assert y.shape == shape and y.dtype == torch.float32


@pytest.mark.parametrize("dtype", (torch.float64, torch.int32))
def test_gelu_rejects_dtype(dtype):
    with pytest.raises(TypeError, match="unsupported dtype"):
        gelu(torch.zeros(4, dtype=dtype, device=DEVICE))
