"""RMSNorm over the last dimension as one Triton kernel: y = x / sqrt(mean(x²) + eps) · w.

Zhang & Sennrich, "Root Mean Square Layer Normalization" (arXiv:1910.07467), eq. 4; the form
``torch.nn.functional.rms_norm`` computes. Each program owns ``ROWS`` whole rows held in
registers (``BLOCK`` = the row length rounded up to a power of two): it reads every element of
x once, computes the sum of squares in float32, and writes y once; the weight vector (one row)
is read by every program but stays in L2. Traffic: ``(2 · rows + 1) · cols · itemsize`` bytes.
Rows longer than ``ROW_MAX_COLS`` take a looped kernel that reads the row twice (the second
read mostly from L2).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

__all__ = ["RmsNormPlan", "plan", "rmsnorm"]

#: Longest row held whole in one program's registers (elements).
ROW_MAX_COLS = 32768
#: Bytes of x one program's tile holds when rows are short: several rows per program.
ROW_TILE_BYTES = 16384
#: Fewest programs per SM before rows per program are halved (keeps every SM busy).
MIN_PROGRAMS_PER_SM = 4
#: Chunk (elements) of the looped kernel for rows past ``ROW_MAX_COLS``.
LOOP_BLOCK = 8192
#: SM count assumed for CPU tensors (the Triton interpreter): an H200's.
INTERPRETER_SM_COUNT = 132
_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


@dataclass(frozen=True)
class RmsNormPlan:
    """How :func:`rmsnorm` launches.

    Attributes:
        looped: rows are longer than ``ROW_MAX_COLS``: a program loops over ``block`` chunks
            of its row twice (sum of squares, then scale); else the row is held whole.
        block: elements of a row per tile (a power of two, >= the row length unless looped).
        rows_per_program: rows per program (a power of two; 1 when looped).
        num_warps: warps per program.
    """

    looped: bool
    block: int
    rows_per_program: int
    num_warps: int


def _warps(tile_elements: int) -> int:
    """4 warps up to 2048 elements per tile, 8 up to 4096, 16 up to 16384, then 32."""
    if tile_elements <= 2048:
        return 4
    return 8 if tile_elements <= 4096 else 16 if tile_elements <= 16384 else 32


@functools.lru_cache(maxsize=1024)
def plan(n_rows: int, n_cols: int, element_size: int, sm_count: int) -> RmsNormPlan:
    """Choose the launch for an ``(n_rows, n_cols)`` input. Pure Python.

    Raises:
        ValueError: a size is out of range (n_rows, n_cols, sm_count >= 1; element_size 2 or 4).
    """
    if n_rows < 1 or n_cols < 1 or sm_count < 1 or element_size not in (2, 4):
        raise ValueError(f"plan: bad arguments {(n_rows, n_cols, element_size, sm_count)}")
    if n_cols > ROW_MAX_COLS:
        return RmsNormPlan(True, LOOP_BLOCK, 1, _warps(LOOP_BLOCK))
    block = max(16, triton.next_power_of_2(n_cols))
    rows = max(1, (ROW_TILE_BYTES // element_size) // block)
    while rows > 1 and triton.cdiv(n_rows, rows) < MIN_PROGRAMS_PER_SM * sm_count:
        rows //= 2
    return RmsNormPlan(False, block, rows, _warps(block * rows))


@triton.jit
def _row_kernel(x_ptr, w_ptr, y_ptr, n_rows, n_cols, eps, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    col_ok = cols < n_cols
    mask = (rows < n_rows)[:, None] & col_ok[None, :]
    offs = rows.to(tl.int64)[:, None] * n_cols + cols[None, :]
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=1) / n_cols + eps)
    y = x * rstd[:, None] * w[None, :]
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _looped_kernel(x_ptr, w_ptr, y_ptr, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * n_cols
    y_row = y_ptr + row * n_cols
    cols = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        offs = start + cols
        x = tl.load(x_row + offs, mask=offs < n_cols, other=0.0).to(tl.float32)
        acc += x * x
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n_cols + eps)
    for start in range(0, n_cols, BLOCK):
        offs = start + cols
        ok = offs < n_cols
        x = tl.load(x_row + offs, mask=ok, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + offs, mask=ok, other=0.0).to(tl.float32)
        tl.store(y_row + offs, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=ok)


def _sm_count(device: torch.device) -> int:
    if device.type != "cuda":
        return INTERPRETER_SM_COUNT
    index = device.index if device.index is not None else torch.cuda.current_device()
    return torch.cuda.get_device_properties(index).multi_processor_count


def rmsnorm(
    x: torch.Tensor, weight: torch.Tensor, eps: float, *, _plan: RmsNormPlan | None = None
) -> torch.Tensor:
    """RMSNorm of ``x`` over its last dimension, scaled by ``weight``.

    Args:
        x: any shape ``(..., cols)``, float32, bfloat16 or float16, on a CUDA device (or the
            CPU under ``TRITON_INTERPRET=1``); made contiguous (a copy when it is not).
        weight: ``(cols,)``, the same dtype and device.
        eps: added to the mean of squares before the square root.
        _plan: force a launch plan (tuning and tests); default :func:`plan`.

    Returns:
        A new contiguous tensor of x's shape and dtype; the arithmetic is float32.

    Raises:
        ValueError: another dtype, or a weight whose shape or dtype does not match.
    """
    if x.dtype not in _DTYPES:
        raise ValueError(f"rmsnorm: dtype {x.dtype} is not one of {_DTYPES}")
    cols = x.shape[-1] if x.dim() else 1
    if weight.shape != (cols,) or weight.dtype != x.dtype:
        raise ValueError(
            f"rmsnorm: weight {tuple(weight.shape)} {weight.dtype} does not match ({cols},) {x.dtype}")
    x = x.contiguous()
    weight = weight.contiguous()
    y = torch.empty_like(x)
    if x.numel() == 0:
        return y
    rows = x.numel() // cols
    p = _plan or plan(rows, cols, x.element_size(), _sm_count(x.device))
    if p.looped:
        _looped_kernel[(rows,)](x, weight, y, cols, eps, BLOCK=p.block, num_warps=p.num_warps)
    else:
        grid = (triton.cdiv(rows, p.rows_per_program),)
        _row_kernel[grid](x, weight, y, rows, cols, eps, ROWS=p.rows_per_program, BLOCK=p.block,
                          num_warps=p.num_warps)
    return y
