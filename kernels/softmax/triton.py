"""Softmax over the last dimension in Triton: row, online and split kernels behind one plan.

``y[..., j] = exp(x[..., j] - m) / sum_k exp(x[..., k] - m)`` with ``m`` the row maximum
(numerically stable), float32 arithmetic, output rounded once to the input dtype.

Five strategies; :func:`plan` chooses one of the first three from the shape (the input is viewed
as ``(n_rows, n_cols)``). The last two, "grid" and "coop", are never chosen: their kernels live in
``triton_coop.py``, and the tuning space (``tuning.py``) forces them:

* ``"row"``: the whole row (padded to a power of two, padding masked to ``-inf``) is held in
  registers; one program per ``rows_per_program`` rows. Reads once, writes once. After the
  Triton tutorial 02-fused-softmax. 16-bit rows of up to 65536 elements also take it, holding
  only the raw 16-bit values (``recompute``: each pass widens them again) so that a row fits
  32 warps, or two programs of 16 warps share an SM.
* ``"online"``: long rows, many of them. One program per row; a first loop over the row in
  chunks keeps a per-lane running maximum and running sum (online softmax, Milakov &
  Gimelshein 2018, arXiv:1805.02867), the lanes are combined, and a second loop writes
  ``exp(x - m) / l``. Reads the row twice, the second time partly from L2; optionally the
  last ``tail`` elements are held in registers instead (read once), and L2 eviction hints
  (PTX ``evict_last`` on the first read, ``evict_first`` on the re-read and the store) keep
  the chunks awaiting their re-read in L2.
* ``"split"``: long rows, few of them (one program per row would leave SMs idle). Kernel A,
  grid ``(chunks, rows)``: each program writes its chunk's ``(max, sum exp(x - max))`` to small
  float32 buffers. Kernel B, same grid: each program combines its row's partials and writes
  its chunk normalized. Reads the input twice. Optionally (``pdl``, sm_90+) B is a
  programmatic dependent launch that loads its chunk while A finishes.
* ``"grid"``: few long rows, one launch (GPU). Each program holds one block of a row in
  registers, publishes its partial, waits on the row's arrival counter until all the row's
  partials are published, merges them and writes its block: one read, one write, no second
  launch. Every program must be resident at once (checked from the compiled kernel's
  occupancy; otherwise the launch falls back to "split").
* ``"coop"``: long rows read once from HBM. A row is cut into ``chunks`` blocks, one per
  program; the ``chunks`` programs of a *group* walk the same rows. At each step a program
  issues the loads of its block of the next row, then waits until its group has published the
  partials ``(max, sum exp(x - max))`` of the previous row (an arrival counter per row),
  merges them, re-reads its block of that row (read one step ago: an L2 hit) and writes it
  normalized, and only then reduces and publishes the partial of the block it loaded. The
  wait is one step behind the publications, so it rarely stalls, and the HBM loads of the
  next row are in flight during it. The wait is safe only when every program of the grid is
  resident at once, so the grid never exceeds what the GPU holds: SMs x programs per SM,
  computed from the compiled kernel's registers and shared memory as the Triton tutorial
  02-fused-softmax computes occupancy (the co-residency rule of a CUDA cooperative launch).
  GPU only for more than one program per row: the interpreter runs programs one after
  another, which such a wait cannot survive.

Bytes moved per element: ideally ``2 * itemsize`` (one read, one write), which ``"row"``
achieves, and ``"coop"`` from HBM (its second read hits L2); ``"online"`` and ``"split"`` read twice,
``3 * itemsize`` of traffic, less what the second read finds in L2. Memory-bound in every case.
"""

import functools
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

try:  # programmatic dependent launch (sm_90+): Triton >= 3.4
    from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait
except ImportError:  # pragma: no cover - older Triton: a pdl plan fails at compile time
    gdc_launch_dependents = gdc_wait = None

__all__ = ["SoftmaxPlan", "plan", "sm_count", "softmax"]

# ---------------------------------------------------------------------------------------------
# Plan thresholds (H200: 132 SMs, 64 K registers and 228 KB shared memory per SM, 60 MB L2).

#: Longest row, in elements, held whole in registers ("row"). At 32768 with 16 warps that is 64
#: float32 values per thread: no spill, one program per SM.
ROW_MAX_COLS = 32768
#: 16-bit rows padded to this block: "row" with 16 warps, ``recompute`` and ``maxnreg`` 64 (two
#: programs per SM, no spill; sm_90 ptxas): with one program per SM nothing is in flight while a
#: row is reduced (docs/tuning/softmax.md).
ROW16_TWO_PER_SM_BLOCK = 32768
#: 16-bit rows longer than ROW_MAX_COLS, up to this, held whole by "row" (32 warps, recompute:
#: 64 raw values, 32 registers a thread) when there are rows enough for "online", which reads the
#: row twice.
ROW16_MAX_COLS = 65536
#: Bytes of input per "row" program: short rows are packed ``rows_per_program`` to a tile (warps
#: from ``_row_warps``); 8 KB tiles were ahead of 16 KB on the short rows (docs/tuning/softmax.md).
ROW_TILE_BYTES = 8192
#: "row" packs fewer rows per program while that would leave fewer programs than this x SMs.
ROW_MIN_PROGRAMS_PER_SM = 4
#: "online" chunk (elements per loop step) and warps by element size: 16 values per thread per
#: step; 16-bit rows take half the step (faster at (4096, 65536); docs/tuning/softmax.md).
ONLINE_LAUNCH = {4: (8192, 16), 2: (4096, 8)}
#: "online" tail (elements of each row held in registers, read once) by element size, and L2
#: eviction hints: with 132 rows of 256 KB in flight the re-read finds little in L2, and the tail
#: cuts the re-read and the bytes in flight (docs/tuning/softmax.md).
ONLINE_TAIL = {4: 16384, 2: 8192}
ONLINE_L2_HINTS = True
#: "split": launch kernel B as a programmatic dependent launch when chunk == block: its launch then
#: overlaps kernel A's tail (faster on every long-row shape measured; docs/tuning/softmax.md).
SPLIT_PDL = True
#: Rows longer than ROW_MAX_COLS use "split" when n_rows < SPLIT_MAX_ROWS_PER_SM x SMs (one
#: program per row could not fill the GPU), "online" otherwise.
SPLIT_MAX_ROWS_PER_SM = 4
#: "split" block (elements per program and loop step, in every dtype; 16-bit rows were faster at
#: 4096 than 8192), halved down to SPLIT_MIN_BLOCK while there would be fewer than
#: SPLIT_MIN_PROGRAMS_PER_SM x SMs programs.
SPLIT_BLOCK = 4096
SPLIT_MIN_BLOCK = 1024
SPLIT_MIN_PROGRAMS_PER_SM = 2
#: At most this many chunks per row (kernel B loads all of a row's partials in every program);
#: beyond it each program loops over several blocks.
SPLIT_MAX_CHUNKS = 1024
#: SM count assumed for CPU tensors (the Triton interpreter): an H200's.
INTERPRETER_SM_COUNT = 132

_KINDS = ("row", "online", "split", "coop", "grid")
_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
_MAX_GRID_Y = 65535


@dataclass(frozen=True)
class SoftmaxPlan:
    """How :func:`softmax` launches.

    Attributes:
        kind: ``"row"``, ``"online"``, ``"split"`` or ``"coop"``.
        block: elements per tile row (power of two): the padded row ("row"), the loop step
            ("online", "split"), the block of a row each program holds ("coop").
        num_warps: warps per program.
        rows_per_program: rows per program ("row" only; power of two).
        chunk: elements of a row per program ("split"; a multiple of ``block``).
        programs_per_sm: most programs per SM to launch ("coop" and "grid": fewer when the
            compiled kernel's occupancy is lower; "row" and "online" with ``persistent``:
            exactly this many).
        l2_hints: "coop" and "online": first read ``evict_last``, re-read (and, "online", the
            store) ``evict_first`` (PTX L2 eviction priorities), to keep what awaits its re-read
            in L2.
        tail: "online" only: the last ``tail`` elements of each row (a power of two, or 0) are
            loaded once as one register tile and written from it, so only ``n_cols - tail``
            elements are read twice (less traffic, and fewer bytes between a read and its
            re-read, so the re-read finds more of them in L2).
        pdl: "split" only: launch kernel B as a programmatic dependent launch (sm_90+): its
            programs start and load their chunk while kernel A finishes, and wait
            (``griddepcontrol.wait``) only before reading A's partials.
        persistent: "row": launch ``programs_per_sm x SMs`` programs (at most one per
            tile) that stride over the row tiles, each loading its next tile before it reduces
            and writes the current one (two tiles in flight per program: fewer idle gaps between
            a tile's reduction and the next tile's loads, and no partial last wave). "online":
            launch ``programs_per_sm x SMs`` programs (at most one per row) that stride over the
            rows, which bounds the rows between a first read and its re-read to what L2 can keep.
        recompute: "row" only, 16-bit inputs on a GPU only (ignored for float32 and in the
            interpreter, which has no inline assembly for the conversion): keep only the raw
            16-bit tile live and compute each exp twice (once for the sum, once for the
            output), which halves the registers a thread needs for its values: longer rows, or
            more programs per SM, without spills.
        maxnreg: "row" only, GPU only: registers per thread the compiler may use (PTX
            ``.maxnreg``), 0 for its own choice; e.g. 64 lets two programs of 16 warps share an
            SM.
    """

    kind: str
    block: int
    num_warps: int
    rows_per_program: int = 1
    chunk: int = 0
    programs_per_sm: int = 1
    l2_hints: bool = False
    tail: int = 0
    pdl: bool = False
    persistent: bool = False
    recompute: bool = False
    maxnreg: int = 0

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise ValueError(f"SoftmaxPlan: kind must be one of {_KINDS}, got {self.kind!r}")
        for name in ("block", "num_warps", "rows_per_program"):
            v = getattr(self, name)
            if v < 1 or v & (v - 1):
                raise ValueError(f"SoftmaxPlan: {name} must be a power of two, got {v}")
        if self.tail < 0 or self.tail & (self.tail - 1):
            raise ValueError(f"SoftmaxPlan: tail must be 0 or a power of two, got {self.tail}")
        if self.maxnreg and not 16 <= self.maxnreg <= 255:
            raise ValueError(f"SoftmaxPlan: maxnreg must be 0 or in [16, 255], got {self.maxnreg}")
        if self.programs_per_sm < 1:
            raise ValueError(f"SoftmaxPlan: programs_per_sm must be >= 1, got {self.programs_per_sm}")
        if self.kind == "split" and (self.chunk < self.block or self.chunk % self.block):
            raise ValueError(f"SoftmaxPlan: chunk {self.chunk} is not a multiple of block {self.block}")


def _warps(tile_elements: int, element_size: int = 4) -> int:
    """Warps for a tile: 4 up to 2048 elements, 8 up to 4096, 16 up to 16384, then 32; 16-bit
    tiles: 8 up to 8192 elements, then 32.

    32 warps for a 32768-element row halve the values each thread holds; 16-bit tiles of 8192
    elements run faster on 8 warps than on 16 (docs/tuning/softmax.md).
    """
    if tile_elements <= 2048:
        return 4
    if element_size == 2:
        return 8 if tile_elements <= 8192 else 32
    return 8 if tile_elements <= 4096 else 16 if tile_elements <= 16384 else 32


def _row_warps(tile_elements: int, element_size: int) -> int:
    """Warps for a "row" tile (``block * rows_per_program`` elements): float32 4 up to 2048
    elements, 16 up to 16384, then 32; 16-bit tiles as :func:`_warps` (4 up to 2048, 8 up to 8192,
    then 32).

    float32 tiles of 4096 elements take 16 warps, not :func:`_warps`' 8 (ahead in both tune runs;
    docs/tuning/softmax.md).
    """
    if element_size == 2:
        return _warps(tile_elements, element_size)
    return 4 if tile_elements <= 2048 else 16 if tile_elements <= 16384 else 32


@functools.lru_cache(maxsize=4096)
def plan(
    n_rows: int, n_cols: int, element_size: int, sm_count: int, cooperative: bool = False
) -> SoftmaxPlan:
    """Choose the softmax strategy for an ``(n_rows, n_cols)`` input. Pure Python.

    Args:
        n_rows: rows (product of all but the last dimension), >= 1.
        n_cols: row length, >= 1.
        element_size: bytes per input element, 2 or 4.
        sm_count: streaming multiprocessors of the device.
        cooperative: the device runs programs concurrently (a GPU, not the interpreter): a
            "split" plan's kernel B is then a programmatic dependent launch.

    Returns:
        A :class:`SoftmaxPlan`: "row" up to ``ROW_MAX_COLS`` columns (16-bit rows padded to
        ``ROW16_TWO_PER_SM_BLOCK``: two programs per SM, ``recompute``), and 16-bit rows up to
        ``ROW16_MAX_COLS`` when there are ``SPLIT_MAX_ROWS_PER_SM * sm_count`` rows or more
        (``recompute``); beyond, "split" when ``n_rows < SPLIT_MAX_ROWS_PER_SM * sm_count``,
        else "online" (with an ``ONLINE_TAIL`` held in registers). Never "grid" or "coop"
        (``triton_coop.py``).

    Raises:
        ValueError: a size is out of range.
    """
    if n_rows < 1 or n_cols < 1 or sm_count < 1 or element_size not in (2, 4):
        raise ValueError(f"plan: bad arguments {(n_rows, n_cols, element_size, sm_count)}")
    block = max(16, triton.next_power_of_2(n_cols))
    if element_size == 2 and block == ROW16_TWO_PER_SM_BLOCK:
        return SoftmaxPlan("row", block, 16, recompute=True, maxnreg=64)
    if n_cols <= ROW_MAX_COLS:
        rows = max(1, (ROW_TILE_BYTES // element_size) // block)
        while rows > 1 and triton.cdiv(n_rows, rows) < ROW_MIN_PROGRAMS_PER_SM * sm_count:
            rows //= 2
        return SoftmaxPlan("row", block, _row_warps(block * rows, element_size), rows_per_program=rows)
    if element_size == 2 and n_cols <= ROW16_MAX_COLS and n_rows >= SPLIT_MAX_ROWS_PER_SM * sm_count:
        return SoftmaxPlan("row", block, 32, recompute=True)
    if n_rows >= SPLIT_MAX_ROWS_PER_SM * sm_count:
        block, warps = ONLINE_LAUNCH[element_size]
        return SoftmaxPlan("online", block, warps, tail=ONLINE_TAIL[element_size], l2_hints=ONLINE_L2_HINTS)
    block = SPLIT_BLOCK
    while (
        block > SPLIT_MIN_BLOCK and n_rows * triton.cdiv(n_cols, block) < SPLIT_MIN_PROGRAMS_PER_SM * sm_count
    ):
        block //= 2
    chunk = block * triton.cdiv(triton.cdiv(n_cols, block), SPLIT_MAX_CHUNKS)
    pdl = cooperative and SPLIT_PDL and chunk == block
    return SoftmaxPlan("split", block, _warps(block), chunk=chunk, pdl=pdl)


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
def _row_tile(x_ptr, tile, n_rows, n_cols, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    # The tile's first element (int64), the int32 offsets of its elements from there (ROWS x
    # BLOCK, at most a few tiles' worth: no overflow), mask and raw values (padding and rows
    # past the end load -inf). The offsets a thread holds until the store are int32: one
    # register each, not two.
    rows = tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    start = tile.to(tl.int64) * ROWS * n_cols
    mask = (tile * ROWS + rows < n_rows)[:, None] & (cols < n_cols)[None, :]
    offs = rows[:, None] * n_cols + cols[None, :]
    return start, offs, mask, tl.load(x_ptr + start + offs, mask=mask, other=-float("inf"))


@triton.jit
def _widen(x):
    # float32 from a 16-bit tensor through inline PTX marked impure, so that two calls on the
    # same tensor stay two conversions (GPU only: the interpreter has no inline assembly).
    if x.dtype == tl.bfloat16:  # two at a time: a bfloat16 is the high half of its float32
        return tl.inline_asm_elementwise(
            "shl.b32 $0, $2, 16;\n\tand.b32 $1, $2, 0xffff0000;", "=r,=r,r", [x], dtype=tl.float32,
            is_pure=False, pack=2,
        )  # fmt: skip
    else:
        return tl.inline_asm_elementwise(
            "cvt.f32.f16 $0, $1;", "=r,h", [x], dtype=tl.float32, is_pure=False, pack=1
        )


@triton.jit
def _row_write(y_ptr, start, offs, mask, x_raw, RECOMPUTE: tl.constexpr):
    if RECOMPUTE:
        # Only the raw 16-bit row stays live (half the registers of a float32 copy): each pass
        # widens it again through an opaque conversion (_widen: the compiler cannot merge the
        # passes' conversions into one live float32 tensor), and exp is computed twice,
        # y = exp((x - m) - log s). (x - m) first, never x log2e - m log2e: a bfloat16 beyond
        # FLT_MAX / log2(e) would overflow the product. The error of log s (< 1 ulp of at most
        # ln 65536) is below the 16-bit output's rounding: 16-bit inputs only.
        m = tl.max(_widen(x_raw), axis=1)
        s = tl.sum(tl.exp(_widen(x_raw) - m[:, None]), axis=1)
        y = tl.exp(_widen(x_raw) - m[:, None] - tl.log(s)[:, None])
    else:
        x = x_raw.to(tl.float32)
        m = tl.max(x, axis=1)
        e = tl.exp(x - m[:, None])
        y = e * (1.0 / tl.sum(e, axis=1))[:, None]  # one division per row, not per element
    tl.store(y_ptr + start + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _row_kernel(
    x_ptr, y_ptr, n_rows, n_cols, ROWS: tl.constexpr, BLOCK: tl.constexpr, PERSISTENT: tl.constexpr,
    RECOMPUTE: tl.constexpr,
):  # fmt: skip
    if PERSISTENT:  # stride over the tiles; load tile t + grid before reducing tile t
        n_tiles = tl.cdiv(n_rows, ROWS)
        step = tl.num_programs(0)
        start, offs, mask, x = _row_tile(x_ptr, tl.program_id(0), n_rows, n_cols, ROWS, BLOCK)
        for t in range(tl.program_id(0), n_tiles, step):
            start_n, offs_n, mask_n, x_n = _row_tile(x_ptr, t + step, n_rows, n_cols, ROWS, BLOCK)
            _row_write(y_ptr, start, offs, mask, x, RECOMPUTE)
            start, offs, mask, x = start_n, offs_n, mask_n, x_n
    else:
        start, offs, mask, x = _row_tile(x_ptr, tl.program_id(0), n_rows, n_cols, ROWS, BLOCK)
        _row_write(y_ptr, start, offs, mask, x, RECOMPUTE)


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
def _online_kernel(
    x_ptr, y_ptr, n_rows, n_cols, BLOCK: tl.constexpr, TAIL: tl.constexpr, FIRST: tl.constexpr,
    AGAIN: tl.constexpr, PERSISTENT: tl.constexpr,
):  # fmt: skip
    # One program per row, or (PERSISTENT) program i takes rows i, i + grid, ...: a persistent
    # grid bounds the rows in flight, so their re-reads can hit L2. Without it the kernel is
    # the plain one-row body: a loop around it, even of one trip, was much slower.
    if PERSISTENT:
        for row in range(tl.program_id(0).to(tl.int64), n_rows, tl.num_programs(0)):
            _online_row(x_ptr, y_ptr, row, n_cols, BLOCK, TAIL, FIRST, AGAIN)
    else:
        _online_row(x_ptr, y_ptr, tl.program_id(0).to(tl.int64), n_cols, BLOCK, TAIL, FIRST, AGAIN)


@triton.jit
def _online_row(
    x_ptr, y_ptr, row, n_cols, BLOCK: tl.constexpr, TAIL: tl.constexpr, FIRST: tl.constexpr,
    AGAIN: tl.constexpr,
):  # fmt: skip
    # The row is a head [0, head) streamed twice in BLOCK-element chunks and (TAIL > 0) a tail
    # [head, n_cols) of TAIL elements loaded once into registers. Both head loops load chunk
    # k+1 before working on chunk k (software prefetch: two chunks in flight per program, as
    # there are only one or two programs per SM at these block sizes). FIRST, AGAIN: the PTX
    # eviction policies of the first read, and of the re-read and the store ("": none).
    x_row = x_ptr + row * n_cols
    y_row = y_ptr + row * n_cols
    head = tl.maximum(n_cols - TAIL, 0)
    cols = tl.arange(0, BLOCK)
    n_chunks = tl.cdiv(head, BLOCK)
    m = tl.full([BLOCK], -3.4028234663852886e38, tl.float32)
    l = tl.zeros([BLOCK], tl.float32)
    x = tl.load(x_row + cols, mask=cols < head, other=-float("inf"), eviction_policy=FIRST)
    for c in range(1, n_chunks):
        offs = c * BLOCK + cols
        x_next = tl.load(x_row + offs, mask=offs < head, other=-float("inf"), eviction_policy=FIRST)
        m, l = _online_update(m, l, x.to(tl.float32))
        x = x_next
    m, l = _online_update(m, l, x.to(tl.float32))
    m_row = tl.max(m, axis=0)
    if TAIL > 0:
        t_offs = head + tl.arange(0, TAIL)
        t_mask = t_offs < n_cols
        xt = tl.load(x_row + t_offs, mask=t_mask, other=-float("inf"), eviction_policy=AGAIN)
        m_row = tl.maximum(m_row, tl.max(xt.to(tl.float32), axis=0))
        l_t = tl.sum(tl.exp(xt.to(tl.float32) - m_row), axis=0)
        inv_l = 1.0 / (tl.sum(l * tl.exp(m - m_row), axis=0) + l_t)
        yt = tl.exp(xt.to(tl.float32) - m_row) * inv_l
        tl.store(y_row + t_offs, yt.to(y_ptr.dtype.element_ty), mask=t_mask, eviction_policy=AGAIN)
    else:
        inv_l = 1.0 / tl.sum(l * tl.exp(m - m_row), axis=0)
    # Reverse chunk order: the chunks the first loop read last are the likeliest still in L2.
    offs = (n_chunks - 1) * BLOCK + cols
    mask = (offs >= 0) & (offs < head)  # offs < 0: an empty head (n_cols <= TAIL)
    x = tl.load(x_row + offs, mask=mask, other=0.0, eviction_policy=AGAIN)
    for i in range(1, n_chunks):
        offs_next = (n_chunks - 1 - i) * BLOCK + cols
        x_next = tl.load(x_row + offs_next, eviction_policy=AGAIN)  # never the last, partial chunk
        y = tl.exp(x.to(tl.float32) - m_row) * inv_l
        tl.store(y_row + offs, y.to(y_ptr.dtype.element_ty), mask=mask, eviction_policy=AGAIN)
        x = x_next
        offs = offs_next
        mask = offs < head
    y = tl.exp(x.to(tl.float32) - m_row) * inv_l
    tl.store(y_row + offs, y.to(y_ptr.dtype.element_ty), mask=mask, eviction_policy=AGAIN)


@triton.jit
def _split_partial_kernel(
    x_ptr,
    pm_ptr,
    pl_ptr,
    n_cols,
    chunk,
    n_chunks,
    BLOCK: tl.constexpr,
    LOOP: tl.constexpr,
    PDL: tl.constexpr,
):
    if PDL:  # let kernel B (launched as a dependent) start its programs now
        gdc_launch_dependents()
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
    PDL: tl.constexpr,
):
    # Programs run in the reverse of kernel A's order, so the first ones find in L2 what
    # kernel A read last.
    c = n_chunks - 1 - tl.program_id(0)
    row = (tl.num_programs(1) - 1 - tl.program_id(1)).to(tl.int64)
    x_row = x_ptr + row * n_cols
    y_row = y_ptr + row * n_cols
    cols = tl.arange(0, BLOCK)
    start = c * chunk
    p = tl.arange(0, P_BLOCK)
    pmask = p < n_chunks
    if PDL:  # one block per program (chunk == BLOCK): load it before waiting for kernel A
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=-float("inf")).to(tl.float32)
        gdc_wait()  # kernel A has finished and its partials are visible
        pm = tl.load(pm_ptr + row * n_chunks + p, mask=pmask, other=-3.4028234663852886e38)
        pl = tl.load(pl_ptr + row * n_chunks + p, mask=pmask, other=0.0)
        m_row = tl.max(pm, axis=0)
        inv_l = 1.0 / tl.sum(pl * tl.exp(pm - m_row), axis=0)
        y = tl.exp(x - m_row) * inv_l
        tl.store(y_row + start + cols, y.to(y_ptr.dtype.element_ty), mask=mask)
    else:
        pm = tl.load(pm_ptr + row * n_chunks + p, mask=pmask, other=-3.4028234663852886e38)
        pl = tl.load(pl_ptr + row * n_chunks + p, mask=pmask, other=0.0)
        m_row = tl.max(pm, axis=0)
        inv_l = 1.0 / tl.sum(pl * tl.exp(pm - m_row), axis=0)
        for off in range(start, tl.minimum(start + chunk, n_cols), BLOCK):
            offs = off + cols
            mask = offs < n_cols
            x = tl.load(x_row + offs, mask=mask, other=-float("inf")).to(tl.float32)
            tl.store(y_row + offs, (tl.exp(x - m_row) * inv_l).to(y_ptr.dtype.element_ty), mask=mask)




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
            ``"split"`` plan has more rows than a grid's second dimension allows (65535), or the
            plan is "coop" or "grid" (``triton_coop.softmax`` runs those).

    Bytes moved per element: ``2 * itemsize`` for "row" and "coop", ``3 * itemsize`` for
    "online" and "split" (the row is read twice; the second read partly hits L2). Memory-bound.
    Sources: Triton tutorial 02-fused-softmax ("row"); Milakov & Gimelshein 2018,
    arXiv:1805.02867 (the partials of "online", "split" and "coop"); the co-residency rule of
    CUDA cooperative launches (CUDA C++ Programming Guide, "Grid Synchronization") for "coop".
    """
    if x.dtype not in _DTYPES:
        raise TypeError(f"softmax: unsupported dtype {x.dtype}; expected float32, bfloat16 or float16")
    x = x.contiguous()
    y = torch.empty_like(x)
    if x.numel() == 0:
        return y
    n_cols = x.shape[-1] if x.dim() else 1
    n_rows = x.numel() // n_cols
    p = (
        _plan
        if _plan is not None
        else plan(n_rows, n_cols, x.element_size(), sm_count(x.device), cooperative=x.device.type == "cuda")
    )
    if p.kind in ("coop", "grid"):
        raise ValueError(f"softmax: a {p.kind} plan runs in fusebench.kernels.softmax.triton_coop.softmax")
    if p.pdl and x.device.type != "cuda":
        raise ValueError("softmax: a pdl plan needs a CUDA device (sm_90+)")
    if p.kind == "row":
        if p.block < n_cols:
            raise ValueError(f"softmax: row plan block {p.block} < n_cols {n_cols}")
        # 1-D grid: program i owns rows [i*R, (i+1)*R) as an [R, BLOCK] register tile; BLOCK is
        # the row padded to a power of two. R > 1 only for short rows, so a (65536, 128) input
        # runs 2048 programs of 32 rows rather than 65536 programs of 128 elements. Persistent:
        # programs_per_sm x SMs programs (at most one per tile) stride over the tiles.
        tiles = triton.cdiv(n_rows, p.rows_per_program)
        grid = (min(tiles, p.programs_per_sm * sm_count(x.device)) if p.persistent else tiles,)
        _row_kernel[grid](
            x, y, n_rows, n_cols, ROWS=p.rows_per_program, BLOCK=p.block, PERSISTENT=p.persistent,
            RECOMPUTE=p.recompute and x.element_size() == 2 and x.device.type == "cuda",
            **({"maxnreg": p.maxnreg} if p.maxnreg and x.device.type == "cuda" else {}),
            num_warps=p.num_warps,
        )  # fmt: skip
    elif p.kind == "online":
        # 1-D grid, one program per row (chosen only when there are >= 4 rows per SM); each
        # program loops over the row's first n_cols - tail elements in BLOCK-element steps,
        # twice, and holds the last `tail` in registers.
        grid = (min(n_rows, p.programs_per_sm * sm_count(x.device)) if p.persistent else n_rows,)
        _online_kernel[grid](
            x, y, n_rows, n_cols, BLOCK=p.block, TAIL=p.tail, FIRST="evict_last" if p.l2_hints else "",
            AGAIN="evict_first" if p.l2_hints else "", PERSISTENT=p.persistent, num_warps=p.num_warps,
        )  # fmt: skip
    else:
        if n_rows > _MAX_GRID_Y:
            raise ValueError(f"softmax: split plan supports at most {_MAX_GRID_Y} rows, got {n_rows}")
        if p.pdl and p.chunk != p.block:
            raise ValueError(f"softmax: a pdl split plan needs chunk == block, got {p.chunk} and {p.block}")
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
            PDL=p.pdl,
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
            PDL=p.pdl,
            num_warps=p.num_warps,
            **({"launch_pdl": True} if p.pdl else {}),
        )
    return y
