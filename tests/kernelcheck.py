"""Inputs, references and comparisons shared by the kernel tests (per op and backend).

``DEVICE`` is the GPU where there is one, else the CPU (Triton then runs in its interpreter,
``TRITON_INTERPRET=1``, set by conftest.py before triton is imported).
"""

import torch

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
DTYPES = (torch.float32, torch.bfloat16, torch.float16)
#: (rtol, atol) of the elementwise comparison per dtype.
TOL = {torch.float32: (1e-5, 1e-6), torch.bfloat16: (1e-2, 1e-2), torch.float16: (1e-2, 1e-3)}


def close(y: torch.Tensor, ref: torch.Tensor, dtype: torch.dtype) -> None:
    """Assert ``y`` is a contiguous ``dtype`` tensor of ``ref``'s shape, elementwise within
    :data:`TOL` of the float64 ``ref`` (NaN where ``ref`` has NaN)."""
    rtol, atol = TOL[dtype]
    assert y.dtype == dtype and y.shape == ref.shape and y.is_contiguous()
    torch.testing.assert_close(y.double(), ref, rtol=rtol, atol=atol, equal_nan=True)


def randn(shape, dtype, scale=3.0, seed=0):
    """Seeded normal values times ``scale`` (drawn in float32 on the CPU, then cast), on DEVICE."""
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g, dtype=torch.float32) * scale).to(dtype).to(DEVICE)


def softmax_ref(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dimension in float64 (the op's reference)."""
    return torch.softmax(x.double(), dim=-1)
