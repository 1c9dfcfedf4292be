"""GELU (tanh approximation) as one elementwise Triton kernel.

``y = 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x**3)))`` (Hendrycks & Gimpel 2016,
arXiv:1606.08415; the same formula as ``torch.nn.functional.gelu(x, approximate="tanh")``).
The kernel evaluates the identical form ``x * sigmoid(2u) = x / (1 + exp(-2u))`` with
``u = sqrt(2/pi) * (x + 0.044715 * x**3)``: one ``exp``, no ``tanh`` (``tl.extra`` libdevice
moved between Triton versions), and no cancellation in ``1 + tanh(u)`` for negative ``u``.

Cost: every element is read once and written once, ``2 * itemsize`` bytes per element (8 for
float32, 4 for bfloat16/float16), and about a dozen flops: memory-bound on any GPU, so the
kernel is written to stream at copy bandwidth (large blocks, 16-byte vector loads).
"""

import torch
import triton
import triton.language as tl

__all__ = ["gelu"]

#: Launch table: itemsize (bytes) -> (BLOCK_SIZE elements per program, num_warps). Each program
#: moves 16 KiB in and 16 KiB out; 256 threads x 16 elements (fp32) or x 32 elements (16-bit),
#: i.e. four 16-byte vector loads per thread.
_LAUNCH = {4: (4096, 8), 2: (8192, 8)}

_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


@triton.jit
def _gelu_kernel(x_ptr, y_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)  # int64: numel may exceed 2**31
    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    u = 0.7978845608028654 * (x + 0.044715 * x * x * x)  # sqrt(2/pi) * (...)
    y = x / (1.0 + tl.exp(-2.0 * u))  # == 0.5 * x * (1 + tanh(u))
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


def _launch_config(itemsize: int) -> tuple[int, int]:
    """``(BLOCK_SIZE, num_warps)`` for an element size in bytes (4 or 2)."""
    return _LAUNCH[itemsize]


def gelu(x: torch.Tensor) -> torch.Tensor:
    """GELU, tanh approximation, elementwise.

    Args:
        x: any shape, float32, bfloat16 or float16, on a CUDA device (or on the CPU under
            ``TRITON_INTERPRET=1``). A non-contiguous ``x`` is first copied with
            ``.contiguous()`` (one extra read and write; the kernel itself needs flat storage).

    Returns:
        A new contiguous tensor of ``x``'s shape and dtype. Arithmetic is float32 throughout;
        the result is rounded once to ``x``'s dtype. An empty ``x`` gives an empty tensor and no
        launch.

    Raises:
        TypeError: ``x`` has another dtype.

    Bytes moved: ``2 * x.element_size()`` per element (one read, one write); memory-bound.
    """
    if x.dtype not in _DTYPES:
        raise TypeError(f"gelu: unsupported dtype {x.dtype}; expected float32, bfloat16 or float16")
    x = x.contiguous()
    y = torch.empty_like(x)
    n = x.numel()
    if n == 0:
        return y
    block, warps = _launch_config(x.element_size())
    # 1-D grid, one program per BLOCK_SIZE consecutive elements of the flattened tensor; the
    # last program is masked. At 2**24 fp32 elements that is 4096 programs, ~31 per SM on a
    # 132-SM H200: enough waves that the tail wave costs little.
    grid = (triton.cdiv(n, block),)
    _gelu_kernel[grid](x, y, n, BLOCK_SIZE=block, num_warps=warps)
    return y
