"""Softmax over the last dimension in Triton: row, online and split kernels behind one plan.

``y[..., j] = exp(x[..., j] - m) / sum_k exp(x[..., k] - m)`` with ``m`` the row maximum
(numerically stable), float32 arithmetic, output rounded once to the input dtype.

Three strategies, chosen by :func:`plan` from the shape (the input is viewed as
``(n_rows, n_cols)``):

* ``"row"``: the whole row (padded to a power of two, padding masked to ``-inf``) is held in
  registers; one program per ``rows_per_program`` rows. Reads once, writes once. After the
  Triton tutorial 02-fused-softmax.
* ``"online"``: long rows, many of them. One program per row; a first loop over the row in
  chunks keeps a per-lane running maximum and running sum (online softmax, Milakov &
  Gimelshein 2018, arXiv:1805.02867), the lanes are combined, and a second loop writes
  ``exp(x - m) / l``. Reads the row twice, the second time mostly from L2.
* ``"split"``: long rows, few of them (one program per row would leave SMs idle). Kernel A,
  grid ``(chunks, rows)``: each program writes its chunk's ``(max, sum exp(x - max))`` to small
  float32 buffers. Kernel B, same grid: each program combines its row's partials and writes
  its chunk normalized. Reads the input twice.
* ``"stream"``: "split"'s two kinds of task in ONE launch, ordered so the second read hits L2.
  Rows are taken ``group`` at a time; each program draws a ticket from an atomic counter, and
  tickets run A-tasks of group g, then B-tasks of group g - 1, then A-tasks of group g + 1, ...
  A B-task spins until its row's A-tasks have published their partials. Between the two reads
  of an element only about three groups' bytes pass through L2, so with a group of a few MB
  the second read is an L2 hit. Deadlock-free on any occupancy: a task waits only on A-tasks,
  which never wait, and only on lower tickets, which programs already running hold (tickets
  are drawn at program start: the argument of CUB's decoupled look-back scan, Merrill &
  Garland 2016, NVR-2016-002).

Bytes moved per element: ideally ``2 * itemsize`` (one read, one write), which ``"row"``
achieves; ``"online"`` and ``"split"`` read twice, ``3 * itemsize`` of traffic, less what the
second read finds in L2. Memory-bound in every case.
"""

import functools
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

__all__ = ["SoftmaxPlan", "plan", "sm_count", "softmax"]

# ---------------------------------------------------------------------------------------------
# Plan thresholds (H200: 132 SMs, 64 K registers and 228 KB shared memory per SM, 60 MB L2).

#: Longest row, in elements, held whole in registers ("row"). At 32768 with 16 warps that is 64
#: float32 values per thread: no spill, one program per SM.
ROW_MAX_COLS = 32768
#: Bytes of input per "row" program: short rows are packed ``rows_per_program`` to a tile.
ROW_TILE_BYTES = 16384
#: "row" packs fewer rows per program while that would leave fewer programs than this x SMs.
ROW_MIN_PROGRAMS_PER_SM = 4
#: "online" chunk (elements per loop step) and warps: 16 float32 values per thread per step.
ONLINE_BLOCK = 8192
ONLINE_WARPS = 16
#: Rows longer than ROW_MAX_COLS use "split" when n_rows < SPLIT_MAX_ROWS_PER_SM x SMs (one
#: program per row could not fill the GPU), "online" otherwise.
SPLIT_MAX_ROWS_PER_SM = 4
#: "split" block (elements per program and loop step): this many bytes, halved down to
#: SPLIT_MIN_BLOCK while there would be fewer than SPLIT_MIN_PROGRAMS_PER_SM x SMs programs.
SPLIT_BLOCK_BYTES = 16384
SPLIT_MIN_BLOCK = 1024
SPLIT_MIN_PROGRAMS_PER_SM = 2
#: At most this many chunks per row (kernel B loads all of a row's partials in every program);
#: beyond it each program loops over several blocks.
SPLIT_MAX_CHUNKS = 1024
#: "stream" (off while 0): rows longer than ROW_MAX_COLS use it when n_rows <
#: STREAM_MAX_ROWS_PER_SM x SMs (checked before "split"/"online"); groups of about
#: STREAM_GROUP_BYTES of input, SPLIT_BLOCK_BYTES per loop step, STREAM_CHUNK_BLOCKS steps per task.
STREAM_MAX_ROWS_PER_SM = 0
STREAM_GROUP_BYTES = 8 << 20
STREAM_CHUNK_BLOCKS = 1
STREAM_WARPS = 8
#: SM count assumed for CPU tensors (the Triton interpreter): an H200's.
INTERPRETER_SM_COUNT = 132

_KINDS = ("row", "online", "split", "stream")
_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
_MAX_GRID_Y = 65535


@dataclass(frozen=True)
class SoftmaxPlan:
    """How :func:`softmax` launches.

    Attributes:
        kind: ``"row"``, ``"online"``, ``"split"`` or ``"stream"`` (:func:`plan` never picks
            ``"stream"`` yet: forced plans only, for tuning).
        block: elements per tile row (power of two): the padded row ("row"), the loop step
            ("online", "split", "stream").
        num_warps: warps per program.
        rows_per_program: rows per program ("row" only; power of two).
        chunk: elements of a row per program ("split", "stream"; a multiple of ``block``).
        group: rows per group ("stream" only, >= 1).
    """

    kind: str
    block: int
    num_warps: int
    rows_per_program: int = 1
    chunk: int = 0
    group: int = 1

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise ValueError(f"SoftmaxPlan: kind must be one of {_KINDS}, got {self.kind!r}")
        for name in ("block", "num_warps", "rows_per_program"):
            v = getattr(self, name)
            if v < 1 or v & (v - 1):
                raise ValueError(f"SoftmaxPlan: {name} must be a power of two, got {v}")
        if self.group < 1:
            raise ValueError(f"SoftmaxPlan: group must be >= 1, got {self.group}")
        if self.kind in ("split", "stream") and (self.chunk < self.block or self.chunk % self.block):
            raise ValueError(f"SoftmaxPlan: chunk {self.chunk} is not a multiple of block {self.block}")


def _warps(tile_elements: int) -> int:
    """Warps for a tile: 4 up to 2048 elements, 8 up to 4096, 16 up to 16384, then 32.

    32 warps for a 32768-element row halves the values each thread holds: 1024 x 32768 bfloat16
    went from 58.2 to 48.7 µs on an H200 (scripts/tune_triton.py, 2026-11-29).
    """
    if tile_elements <= 2048:
        return 4
    return 8 if tile_elements <= 4096 else 16 if tile_elements <= 16384 else 32


@functools.lru_cache(maxsize=4096)
def plan(n_rows: int, n_cols: int, element_size: int, sm_count: int) -> SoftmaxPlan:
    """Choose the softmax strategy for an ``(n_rows, n_cols)`` input. Pure Python.

    Args:
        n_rows: rows (product of all but the last dimension), >= 1.
        n_cols: row length, >= 1.
        element_size: bytes per input element, 2 or 4.
        sm_count: streaming multiprocessors of the device.

    Returns:
        A :class:`SoftmaxPlan`: "row" up to ``ROW_MAX_COLS`` columns; beyond, "stream" when
        ``n_rows < STREAM_MAX_ROWS_PER_SM * sm_count`` (never while that is 0), else "split"
        when ``n_rows < SPLIT_MAX_ROWS_PER_SM * sm_count``, else "online".

    Raises:
        ValueError: a size is out of range.
    """
    if n_rows < 1 or n_cols < 1 or sm_count < 1 or element_size not in (2, 4):
        raise ValueError(f"plan: bad arguments {(n_rows, n_cols, element_size, sm_count)}")
    if n_cols <= ROW_MAX_COLS:
        block = max(16, triton.next_power_of_2(n_cols))
        rows = max(1, (ROW_TILE_BYTES // element_size) // block)
        while rows > 1 and triton.cdiv(n_rows, rows) < ROW_MIN_PROGRAMS_PER_SM * sm_count:
            rows //= 2
        return SoftmaxPlan("row", block, _warps(block * rows), rows_per_program=rows)
    if n_rows < STREAM_MAX_ROWS_PER_SM * sm_count:
        block = SPLIT_BLOCK_BYTES // element_size
        group = max(1, STREAM_GROUP_BYTES // (n_cols * element_size))
        return SoftmaxPlan("stream", block, STREAM_WARPS, chunk=block * STREAM_CHUNK_BLOCKS, group=group)
    if n_rows >= SPLIT_MAX_ROWS_PER_SM * sm_count:
        return SoftmaxPlan("online", ONLINE_BLOCK, ONLINE_WARPS)
    block = SPLIT_BLOCK_BYTES // element_size
    while (
        block > SPLIT_MIN_BLOCK and n_rows * triton.cdiv(n_cols, block) < SPLIT_MIN_PROGRAMS_PER_SM * sm_count
    ):
        block //= 2
    chunk = block * triton.cdiv(triton.cdiv(n_cols, block), SPLIT_MAX_CHUNKS)
    return SoftmaxPlan("split", block, _warps(block), chunk=chunk)


@functools.cache
def _cuda_sm_count(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


def sm_count(device: torch.device) -> int:
    """Streaming multiprocessors of ``device``; ``INTERPRETER_SM_COUNT`` for a non-CUDA device."""
    if device.type != "cuda":
        return INTERPRETER_SM_COUNT
    return _cuda_sm_count(device.index if device.index is not None else torch.cuda.current_device())


# ---------------------------------------------------------------------------------------------
# Kernels. The input is contiguous (n_rows, n_cols); rows start at row * n_cols (int64).


@triton.jit
def _row_kernel(x_ptr, y_ptr, n_rows, n_cols, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    mask = (rows < n_rows)[:, None] & (cols < n_cols)[None, :]
    offs = rows.to(tl.int64)[:, None] * n_cols + cols[None, :]
    x = tl.load(x_ptr + offs, mask=mask, other=-float("inf")).to(tl.float32)
    m = tl.max(x, axis=1)
    e = tl.exp(x - m[:, None])
    y = e / tl.sum(e, axis=1)[:, None]
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _online_update(m, l, x):
    # Per-lane online softmax step with one exp: l is the sum of exp(x_i - m) seen by the lane.
    # Masked lanes load -inf: d = -inf, exp(-inf) = 0, m and l unchanged. m starts at -FLT_MAX
    # (not -inf), so d is never -inf - -inf = nan for -inf inputs.
    d = x - m
    e = tl.exp(-tl.abs(d))
    l = tl.where(d > 0, l * e + 1.0, l + e)
    return tl.maximum(m, x), l


@triton.jit
def _online_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    # Both loops load chunk k+1 before working on chunk k (software prefetch: two chunks in
    # flight per program, as there are only one or two programs per SM at these block sizes).
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * n_cols
    y_row = y_ptr + row * n_cols
    cols = tl.arange(0, BLOCK)
    n_chunks = tl.cdiv(n_cols, BLOCK)
    m = tl.full([BLOCK], -3.4028234663852886e38, tl.float32)
    l = tl.zeros([BLOCK], tl.float32)
    x = tl.load(x_row + cols, mask=cols < n_cols, other=-float("inf"))
    for c in range(1, n_chunks):
        offs = c * BLOCK + cols
        x_next = tl.load(x_row + offs, mask=offs < n_cols, other=-float("inf"))
        m, l = _online_update(m, l, x.to(tl.float32))
        x = x_next
    m, l = _online_update(m, l, x.to(tl.float32))
    m_row = tl.max(m, axis=0)
    inv_l = 1.0 / tl.sum(l * tl.exp(m - m_row), axis=0)
    # Reverse chunk order: the chunks the first loop read last are the likeliest still in L2.
    offs = (n_chunks - 1) * BLOCK + cols
    x = tl.load(x_row + offs, mask=offs < n_cols, other=0.0)
    for i in range(1, n_chunks):
        offs_next = (n_chunks - 1 - i) * BLOCK + cols
        x_next = tl.load(x_row + offs_next)  # never the last, partial chunk: no mask
        y = tl.exp(x.to(tl.float32) - m_row) * inv_l
        tl.store(y_row + offs, y.to(y_ptr.dtype.element_ty), mask=offs < n_cols)
        x = x_next
        offs = offs_next
    y = tl.exp(x.to(tl.float32) - m_row) * inv_l
    tl.store(y_row + offs, y.to(y_ptr.dtype.element_ty), mask=offs < n_cols)


@triton.jit
def _split_partial_kernel(
    x_ptr, pm_ptr, pl_ptr, n_cols, chunk, n_chunks, BLOCK: tl.constexpr, LOOP: tl.constexpr
):
    c = tl.program_id(0)
    row = tl.program_id(1).to(tl.int64)
    x_row = x_ptr + row * n_cols
    cols = tl.arange(0, BLOCK)
    start = c * chunk
    if LOOP:  # chunk > BLOCK: per-lane online accumulation over the chunk's blocks
        m = tl.full([BLOCK], -3.4028234663852886e38, tl.float32)
        l = tl.zeros([BLOCK], tl.float32)
        for off in range(start, tl.minimum(start + chunk, n_cols), BLOCK):
            offs = off + cols
            x = tl.load(x_row + offs, mask=offs < n_cols, other=-float("inf")).to(tl.float32)
            m, l = _online_update(m, l, x)
        m_c = tl.max(m, axis=0)
        l_c = tl.sum(l * tl.exp(m - m_c), axis=0)
    else:  # chunk == BLOCK: one tile; clamp the max so an all -inf chunk gives (-FLT_MAX, 0)
        offs = start + cols
        x = tl.load(x_row + offs, mask=offs < n_cols, other=-float("inf")).to(tl.float32)
        m_c = tl.maximum(tl.max(x, axis=0), -3.4028234663852886e38)
        l_c = tl.sum(tl.exp(x - m_c), axis=0)
    tl.store(pm_ptr + row * n_chunks + c, m_c)
    tl.store(pl_ptr + row * n_chunks + c, l_c)


@triton.jit
def _split_write_kernel(
    x_ptr,
    y_ptr,
    pm_ptr,
    pl_ptr,
    n_cols,
    chunk,
    n_chunks,
    BLOCK: tl.constexpr,
    P_BLOCK: tl.constexpr,
):
    # Programs run in the reverse of kernel A's order, so the first ones find in L2 what
    # kernel A read last.
    c = n_chunks - 1 - tl.program_id(0)
    row = (tl.num_programs(1) - 1 - tl.program_id(1)).to(tl.int64)
    p = tl.arange(0, P_BLOCK)
    pmask = p < n_chunks
    pm = tl.load(pm_ptr + row * n_chunks + p, mask=pmask, other=-3.4028234663852886e38)
    pl = tl.load(pl_ptr + row * n_chunks + p, mask=pmask, other=0.0)
    m_row = tl.max(pm, axis=0)
    inv_l = 1.0 / tl.sum(pl * tl.exp(pm - m_row), axis=0)
    x_row = x_ptr + row * n_cols
    y_row = y_ptr + row * n_cols
    cols = tl.arange(0, BLOCK)
    start = c * chunk
    for off in range(start, tl.minimum(start + chunk, n_cols), BLOCK):
        offs = off + cols
        mask = offs < n_cols
        x = tl.load(x_row + offs, mask=mask, other=-float("inf")).to(tl.float32)
        tl.store(y_row + offs, (tl.exp(x - m_row) * inv_l).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _stream_kernel(
    x_ptr,
    y_ptr,
    pm_ptr,
    pl_ptr,
    sync_ptr,
    n_rows,
    n_cols,
    chunk,
    n_chunks,
    group_rows,
    BLOCK: tl.constexpr,
    P_BLOCK: tl.constexpr,
):
    # sync_ptr[0]: ticket counter; sync_ptr[1 + row]: A-tasks of the row done. All zero at launch.
    # Ticket layout, GC = group_rows * n_chunks tasks per group and stage: virtual ticket
    # v = t + GC; stage s = v // (2 GC) holds A-tasks of group s then B-tasks of group s - 1.
    t = tl.atomic_add(sync_ptr, 1)  # drawn at program start: lower tickets are running or done
    gc = group_rows * n_chunks
    v = t + gc
    stage = v // (2 * gc)
    k = v % (2 * gc)
    is_b = k < gc
    task = tl.where(is_b, k, k - gc)
    group = tl.where(is_b, stage - 1, stage)
    row32 = group * group_rows + task // n_chunks
    c = task % n_chunks
    if row32 < n_rows:
        row = row32.to(tl.int64)
        x_row = x_ptr + row * n_cols
        cols = tl.arange(0, BLOCK)
        start = c * chunk
        end = tl.minimum(start + chunk, n_cols)
        if is_b:
            # Wait for the row's n_chunks A-tasks (all hold lower tickets), then normalize.
            done = tl.atomic_add(sync_ptr + 1 + row, 0, sem="acquire")
            while done < n_chunks:
                done = tl.atomic_add(sync_ptr + 1 + row, 0, sem="acquire")
            p = tl.arange(0, P_BLOCK)
            pmask = p < n_chunks
            pm = tl.load(
                pm_ptr + row * n_chunks + p, mask=pmask, other=-3.4028234663852886e38, cache_modifier=".cg"
            )
            pl = tl.load(pl_ptr + row * n_chunks + p, mask=pmask, other=0.0, cache_modifier=".cg")
            m_row = tl.max(pm, axis=0)
            inv_l = 1.0 / tl.sum(pl * tl.exp(pm - m_row), axis=0)
            y_row = y_ptr + row * n_cols
            for off in range(start, end, BLOCK):
                offs = off + cols
                mask = offs < n_cols
                x = tl.load(x_row + offs, mask=mask, other=0.0, eviction_policy="evict_first")
                y = tl.exp(x.to(tl.float32) - m_row) * inv_l
                tl.store(y_row + offs, y.to(y_ptr.dtype.element_ty), mask=mask)
        else:
            m = tl.full([BLOCK], -3.4028234663852886e38, tl.float32)
            l = tl.zeros([BLOCK], tl.float32)
            for off in range(start, end, BLOCK):
                offs = off + cols
                x = tl.load(
                    x_row + offs, mask=offs < n_cols, other=-float("inf"), eviction_policy="evict_last"
                )
                m, l = _online_update(m, l, x.to(tl.float32))
            m_c = tl.max(m, axis=0)
            l_c = tl.sum(l * tl.exp(m - m_c), axis=0)
            tl.store(pm_ptr + row * n_chunks + c, m_c)
            tl.store(pl_ptr + row * n_chunks + c, l_c)
            tl.debug_barrier()  # every thread's stores precede the release below
            tl.atomic_add(sync_ptr + 1 + row, 1, sem="release")


def softmax(x: torch.Tensor, *, _plan: SoftmaxPlan | None = None) -> torch.Tensor:
    """Softmax over the last dimension, numerically stable.

    Args:
        x: any shape (a 0-d tensor is one row of one element), float32, bfloat16 or float16, on
            a CUDA device (or on the CPU under ``TRITON_INTERPRET=1``). A non-contiguous ``x``
            is first copied with ``.contiguous()`` (one extra read and write); the kernels see
            it as ``(n_rows, n_cols)`` with ``n_cols = x.shape[-1]``.
        _plan: force a strategy (tests); default :func:`plan` for the shape and device.

    Returns:
        A new contiguous tensor of ``x``'s shape and dtype; float32 arithmetic. Rows that are
        all ``-inf`` give NaN, as ``torch.softmax`` does. An empty ``x`` gives an empty tensor
        and no launch.

    Raises:
        TypeError: ``x`` has another dtype.
        ValueError: a forced ``"row"`` plan's block is shorter than the row, or a forced
            ``"split"`` plan has more rows than a grid's second dimension allows (65535), or a
            forced ``"stream"`` plan would need 2**31 or more programs.

    Bytes moved per element: ``2 * itemsize`` for "row", ``3 * itemsize`` for "online",
    "split" and "stream" (the row is read twice; the second read partly hits L2, mostly for
    "stream"). Memory-bound.
    Sources: Triton tutorial 02-fused-softmax ("row"); Milakov & Gimelshein 2018,
    arXiv:1805.02867 ("online", "split", "stream"); Merrill & Garland 2016, NVR-2016-002 (the
    ticket order of "stream").
    """
    if x.dtype not in _DTYPES:
        raise TypeError(f"softmax: unsupported dtype {x.dtype}; expected float32, bfloat16 or float16")
    x = x.contiguous()
    y = torch.empty_like(x)
    if x.numel() == 0:
        return y
    n_cols = x.shape[-1] if x.dim() else 1
    n_rows = x.numel() // n_cols
    p = _plan if _plan is not None else plan(n_rows, n_cols, x.element_size(), sm_count(x.device))

    if p.kind == "row":
        if p.block < n_cols:
            raise ValueError(f"softmax: row plan block {p.block} < n_cols {n_cols}")
        # 1-D grid: program i owns rows [i*R, (i+1)*R) as an [R, BLOCK] register tile; BLOCK is
        # the row padded to a power of two. R > 1 only for short rows, so a (65536, 128) input
        # runs 2048 programs of 32 rows rather than 65536 programs of 128 elements.
        grid = (triton.cdiv(n_rows, p.rows_per_program),)
        _row_kernel[grid](x, y, n_rows, n_cols, ROWS=p.rows_per_program, BLOCK=p.block, num_warps=p.num_warps)
    elif p.kind == "online":
        # 1-D grid, one program per row (chosen only when there are >= 4 rows per SM); each
        # program loops over its row in BLOCK-element steps, twice.
        _online_kernel[(n_rows,)](x, y, n_cols, BLOCK=p.block, num_warps=p.num_warps)
    elif p.kind == "stream":
        n_chunks = triton.cdiv(n_cols, p.chunk)
        group = min(p.group, n_rows)
        n_tasks = 2 * group * n_chunks * triton.cdiv(n_rows, group)
        if n_tasks + group * n_chunks >= 2**31:  # int32 ticket arithmetic
            raise ValueError(f"softmax: stream plan would launch {n_tasks} programs (max 2**31 - 1)")
        pm = torch.empty((n_rows, n_chunks), dtype=torch.float32, device=x.device)
        pl = torch.empty_like(pm)
        sync = torch.zeros(1 + n_rows, dtype=torch.int32, device=x.device)
        # 1-D grid of n_tasks programs; the ticket, not the program id, picks each one's task.
        _stream_kernel[(n_tasks,)](
            x,
            y,
            pm,
            pl,
            sync,
            n_rows,
            n_cols,
            p.chunk,
            n_chunks,
            group,
            BLOCK=p.block,
            P_BLOCK=max(16, triton.next_power_of_2(n_chunks)),
            num_warps=p.num_warps,
        )
    else:
        if n_rows > _MAX_GRID_Y:
            raise ValueError(f"softmax: split plan supports at most {_MAX_GRID_Y} rows, got {n_rows}")
        n_chunks = triton.cdiv(n_cols, p.chunk)
        pm = torch.empty((n_rows, n_chunks), dtype=torch.float32, device=x.device)
        pl = torch.empty_like(pm)
        # 2-D grid (chunks, rows), chunk index fastest: n_rows * n_chunks programs, at least
        # SPLIT_MIN_PROGRAMS_PER_SM per SM when the plan allows, each covering `chunk` elements
        # of one row in BLOCK-element steps. A writes one (max, sum) pair per program; B reads
        # all n_chunks pairs of its row (a P_BLOCK vector), then rereads and writes its chunk.
        grid = (n_chunks, n_rows)
        _split_partial_kernel[grid](
            x,
            pm,
            pl,
            n_cols,
            p.chunk,
            n_chunks,
            BLOCK=p.block,
            LOOP=p.chunk > p.block,
            num_warps=p.num_warps,
        )
        _split_write_kernel[grid](
            x,
            y,
            pm,
            pl,
            n_cols,
            p.chunk,
            n_chunks,
            BLOCK=p.block,
            P_BLOCK=max(16, triton.next_power_of_2(n_chunks)),
            num_warps=p.num_warps,
        )
    return y
