"""The Triton softmax's cooperative plans, "grid" and "coop" (``triton.py`` describes both): never
chosen by :func:`fusebench.kernels.softmax.triton.plan`, timed as forced plans from the op's tuning space
(``tuning.py``).

Each needs every program of its launch resident at once (a program waits for the partials the
others of its row publish), checked from the compiled kernel's occupancy; the interpreter runs
programs one at a time, so there a row gets one program. Why neither is the default: "grid" ties
with "split" as a PDL launch, which needs no co-residency; "coop"'s wait on a global atomic costs
more than its second read from L2 saves (docs/tuning/softmax.md).
"""

import functools

import torch
import triton
import triton.language as tl
from fusebench.kernels.softmax.triton import _DTYPES, SoftmaxPlan, sm_count

#: "coop" plan of the tuning space: a row cut in blocks of this many bytes, one per program, and at
#: most this many programs per SM (fewer when the compiled kernel's occupancy is lower).
COOP_BLOCK_BYTES = 65536
COOP_PROGRAMS_PER_SM = 2
#: A "coop" or "grid" program polls its row's arrival counter at most this many times before it
#: gives up (its output is then wrong and fails the correctness gate, rather than hanging the GPU).
COOP_SPIN_LIMIT = 1 << 22


#: Every "grid" program adds this much to its row's arrival counter in total per call
#: (program 0 adds ``GRID_EPOCH - chunks + 1``, the others 1), so a counter is a multiple of it
#: between calls whatever the chunk count, and needs no reset (int64: never wraps in practice).
GRID_EPOCH = 1 << 20


@triton.jit
def _grid_kernel(
    x_ptr,
    y_ptr,
    pm_ptr,
    pl_ptr,
    count_ptr,
    n_cols,
    CHUNKS: tl.constexpr,
    BLOCK: tl.constexpr,
    P_BLOCK: tl.constexpr,
    EPOCH: tl.constexpr,
    SPIN_LIMIT: tl.constexpr,
):
    # Program (c, row) holds block c of the row in registers: it reduces the block to its
    # partial (max, sum exp(x - max)), publishes it (stores, then a release add on the row's
    # counter), waits until all CHUNKS partials of the row are published (acquire polls), merges
    # them and writes its block normalized. One launch, one read of x, one write of y. Needs
    # every program resident at once (the launch checks it).
    c = tl.program_id(0)
    row = tl.program_id(1).to(tl.int64)
    cols = c * BLOCK + tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=-float("inf")).to(tl.float32)
    # Clamp so an all -inf block gives (-FLT_MAX, 0), never exp(-inf - -inf) = nan.
    m_c = tl.maximum(tl.max(x, axis=0), -3.4028234663852886e38)
    l_c = tl.sum(tl.exp(x - m_c), axis=0)
    tl.store(pm_ptr + row * CHUNKS + c, m_c)
    tl.store(pl_ptr + row * CHUNKS + c, l_c)
    tl.debug_barrier()  # every thread's stores precede the release below
    add = 1 + (c == 0).to(tl.int64) * (EPOCH - CHUNKS)
    old = tl.atomic_add(count_ptr + row, add, sem="release")
    target = old - old % EPOCH + EPOCH  # this call's counter once every program has arrived
    arrived = tl.atomic_add(count_ptr + row, 0, sem="acquire")
    polls = 0
    while (arrived < target) & (polls < SPIN_LIMIT):
        arrived = tl.atomic_add(count_ptr + row, 0, sem="acquire")
        polls += 1
    p = tl.arange(0, P_BLOCK)
    pmask = p < CHUNKS
    pm = tl.load(pm_ptr + row * CHUNKS + p, mask=pmask, other=-3.4028234663852886e38, cache_modifier=".cg")
    pl = tl.load(pl_ptr + row * CHUNKS + p, mask=pmask, other=0.0, cache_modifier=".cg")
    m_row = tl.max(pm, axis=0)
    inv_l = 1.0 / tl.sum(pl * tl.exp(pm - m_row), axis=0)
    y = tl.exp(x - m_row) * inv_l
    tl.store(y_ptr + row * n_cols + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit(do_not_specialize=["n_rows", "n_groups"])
def _coop_kernel(
    x_ptr,
    y_ptr,
    pm_ptr,
    pl_ptr,
    sync_ptr,
    n_rows,
    n_cols,
    n_groups,
    CHUNKS: tl.constexpr,
    BLOCK: tl.constexpr,
    P_BLOCK: tl.constexpr,
    SPIN_LIMIT: tl.constexpr,
    L2_HINTS: tl.constexpr,
):
    # Program (group g, chunk c) owns block c of rows g, g + n_groups, ... (one row per step).
    # Step k, lagging the write by one row:
    #   1. issue the loads of block c of row r_k (first read, from HBM);
    #   2. wait until every program of the group has published its partial of row r_{k-1},
    #      merge them, re-read block c of r_{k-1} (read one step ago by this program: an L2
    #      hit) and write it normalized;
    #   3. reduce the block of step 1 to its partial (max, sum exp(x - max)) and publish it
    #      (stores, then a release atomic on the row's arrival counter), without waiting.
    # Nothing but the loads of step 1 is held across the wait, and they are in flight during
    # it. Deadlock-free when every program is resident: the wait of step k needs only the
    # publications of step k - 1 by the programs of the same group (they share the row
    # sequence), which each made before its own wait of step k.
    # Per row: sync_ptr[2 * row]: programs arrived (partials published); sync_ptr[2 * row + 1]:
    # programs done reading the partials. Both are zero at launch and are zeroed again by the
    # last program to leave the row, so the buffer needs no reset between calls.
    pid = tl.program_id(0)
    g = pid // CHUNKS
    c = pid % CHUNKS
    cols = c * BLOCK + tl.arange(0, BLOCK)
    mask = cols < n_cols
    p = tl.arange(0, P_BLOCK)
    pmask = p < CHUNKS
    row = g.to(tl.int64)
    prev = row - n_groups  # the row written at this step; < 0 at the first step
    while prev < n_rows:
        if L2_HINTS:
            x_raw = tl.load(
                x_ptr + row * n_cols + cols,
                mask=mask & (row < n_rows),
                other=-float("inf"),
                eviction_policy="evict_last",
            )
        else:
            x_raw = tl.load(x_ptr + row * n_cols + cols, mask=mask & (row < n_rows), other=-float("inf"))
        if prev >= 0:
            # Poll with acquire atomics: on an H200 this measured faster than volatile loads.
            arrived = tl.atomic_add(sync_ptr + 2 * prev, 0, sem="acquire")
            polls = 0
            while (arrived < CHUNKS) & (polls < SPIN_LIMIT):
                arrived = tl.atomic_add(sync_ptr + 2 * prev, 0, sem="acquire")
                polls += 1
            pm = tl.load(
                pm_ptr + prev * CHUNKS + p, mask=pmask, other=-3.4028234663852886e38, cache_modifier=".cg"
            )
            pl = tl.load(pl_ptr + prev * CHUNKS + p, mask=pmask, other=0.0, cache_modifier=".cg")
            m_row = tl.max(pm, axis=0)
            inv_l = 1.0 / tl.sum(pl * tl.exp(pm - m_row), axis=0)
            if L2_HINTS:
                xp = tl.load(
                    x_ptr + prev * n_cols + cols, mask=mask, other=0.0, eviction_policy="evict_first"
                )
            else:
                xp = tl.load(x_ptr + prev * n_cols + cols, mask=mask, other=0.0)
            y = tl.exp(xp.to(tl.float32) - m_row) * inv_l
            tl.store(y_ptr + prev * n_cols + cols, y.to(y_ptr.dtype.element_ty), mask=mask)
            tl.debug_barrier()  # every thread has read the partials before this program leaves
            left = tl.atomic_add(sync_ptr + 2 * prev + 1, 1, sem="acq_rel") + 1
            if left == CHUNKS:  # the last to leave: every program is past its wait; reset the row
                tl.atomic_xchg(sync_ptr + 2 * prev, 0)
                tl.atomic_xchg(sync_ptr + 2 * prev + 1, 0)
        if row < n_rows:
            x = x_raw.to(tl.float32)
            # Clamp so an all -inf block gives (-FLT_MAX, 0), never exp(-inf - -inf) = nan.
            m_c = tl.maximum(tl.max(x, axis=0), -3.4028234663852886e38)
            l_c = tl.sum(tl.exp(x - m_c), axis=0)
            tl.store(pm_ptr + row * CHUNKS + c, m_c)
            tl.store(pl_ptr + row * CHUNKS + c, l_c)
            tl.debug_barrier()  # every thread's stores precede the release below
            tl.atomic_add(sync_ptr + 2 * row, 1, sem="release")
        prev = row
        row += n_groups


#: Zeroed "coop" counters, per (device, stream): kept across calls (the kernel leaves them zero),
#: grown when a call has more rows. Calls on one stream run one after another.
_COOP_SYNC: dict[tuple[str, int | None, int], torch.Tensor] = {}


def _coop_sync(device: torch.device, n_rows: int) -> torch.Tensor:
    """At least two int32 counters per row on ``device``, all zero, for the current stream."""
    stream = torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else 0
    key = (device.type, device.index, stream)
    buf = _COOP_SYNC.get(key)
    if buf is None or buf.numel() < 2 * n_rows:
        buf = torch.zeros(2 * max(n_rows, 1024), dtype=torch.int32, device=device)
        _COOP_SYNC[key] = buf
    return buf


#: Programs per SM of each compiled "coop" or "grid" kernel, by specialization key (_occupancy).
_COOP_OCCUPANCY: dict[tuple, int] = {}


@functools.lru_cache(maxsize=256)
def _coop_occupancy(n_regs: int, shared_bytes: int, num_warps: int, device_index: int) -> int:
    """Programs of one compiled "coop" kernel that an SM holds at once (0 if none).

    From the kernel's registers per thread and shared memory per program, against the SM's
    register file (split in 4 quarters, 256-register allocation granules per warp), thread and
    shared-memory limits: the CUDA occupancy rules, as the Triton tutorial 02-fused-softmax
    applies them.
    """
    props = torch.cuda.get_device_properties(device_index)
    regs_per_sm = getattr(props, "regs_per_multiprocessor", 65536)
    threads_per_sm = getattr(props, "max_threads_per_multi_processor", 2048)
    smem_per_sm = getattr(props, "shared_memory_per_multiprocessor", 233472)
    regs_per_warp = -(-max(n_regs, 1) * 32 // 256) * 256
    warps_by_regs = 4 * ((regs_per_sm // 4) // regs_per_warp)
    by_regs = warps_by_regs // num_warps
    by_threads = threads_per_sm // (32 * num_warps)
    by_smem = smem_per_sm // shared_bytes if shared_bytes else by_threads
    return max(0, min(by_regs, by_threads, by_smem, 32))


def _occupancy(kernel, args: tuple, meta: dict, x: torch.Tensor, y: torch.Tensor, n_cols: int) -> int:
    """Programs per SM of ``kernel`` compiled for ``args`` and ``meta`` (GPU only; cached).

    The compiled kernel depends on the constexprs, the dtype and the divisibility of ``n_cols``
    and of the pointers (Triton's specialization); it is compiled (``warmup``) and its occupancy
    computed once per such key.
    """
    key = (kernel.fn.__name__, x.device.index, x.dtype, n_cols % 16 == 0, x.data_ptr() % 16 == 0,
           y.data_ptr() % 16 == 0, tuple(sorted(meta.items())))  # fmt: skip
    occupancy = _COOP_OCCUPANCY.get(key)
    if occupancy is None:
        k = kernel.warmup(*args, grid=(1,), **meta)
        k._init_handles()
        occupancy = _coop_occupancy(k.n_regs, k.metadata.shared, meta["num_warps"], x.device.index or 0)
        _COOP_OCCUPANCY[key] = occupancy
    return occupancy


def _launch_coop(x: torch.Tensor, y: torch.Tensor, n_rows: int, n_cols: int, p: SoftmaxPlan) -> None:
    """Launch ``_coop_kernel`` with a grid every program of which is resident at once.

    1-D grid of ``n_groups * chunks`` programs, ``chunks = cdiv(n_cols, p.block)``; ``n_groups``
    is at most ``SMs * min(p.programs_per_sm, occupancy) // chunks`` and at most ``n_rows``.

    Raises:
        ValueError: a row needs more programs than the device holds at once, or (interpreter) a
            row needs more than one program: the interpreter runs programs one at a time.
    """
    chunks = triton.cdiv(n_cols, p.block)
    sms = sm_count(x.device)
    p_block = max(16, triton.next_power_of_2(chunks))
    pm = torch.empty((n_rows, chunks), dtype=torch.float32, device=x.device)
    pl = torch.empty_like(pm)
    meta = dict(
        CHUNKS=chunks,
        BLOCK=p.block,
        P_BLOCK=p_block,
        SPIN_LIMIT=COOP_SPIN_LIMIT,
        L2_HINTS=p.l2_hints,
        num_warps=p.num_warps,
    )
    sync = _coop_sync(x.device, n_rows)
    args = (x, y, pm, pl, sync, n_rows, n_cols, 1)
    if x.device.type == "cuda":
        resident = sms * min(p.programs_per_sm, _occupancy(_coop_kernel, args, meta, x, y, n_cols))
    else:
        if chunks > 1:
            raise ValueError(
                f"softmax: coop plan with {chunks} programs per row needs a GPU "
                "(the interpreter runs programs one at a time)"
            )
        resident = sms * p.programs_per_sm
    if resident < chunks:
        raise ValueError(
            f"softmax: coop plan needs {chunks} resident programs per row, the device holds {resident}"
        )
    n_groups = min(n_rows, resident // chunks)
    _coop_kernel[(n_groups * chunks,)](x, y, pm, pl, sync, n_rows, n_cols, n_groups, **meta)


#: "grid" arrival counters (int64), per (device, stream); never reset (see GRID_EPOCH).
_GRID_COUNT: dict[tuple[str, int | None, int], torch.Tensor] = {}


def _launch_grid(
    x: torch.Tensor, y: torch.Tensor, n_rows: int, n_cols: int, p: SoftmaxPlan, forced: bool
) -> bool:
    """Launch ``_grid_kernel``, grid ``(chunks, n_rows)``, if all its programs are resident at once.

    Returns:
        False (nothing launched) when the device cannot hold ``n_rows * chunks`` programs at
        once (at most ``p.programs_per_sm`` per SM, fewer when the compiled kernel's occupancy
        is lower) and the plan was not forced.

    Raises:
        ValueError: the same, for a forced plan; or (interpreter) more than one program per row.
    """
    chunks = triton.cdiv(n_cols, p.block)
    stream = torch.cuda.current_stream(x.device).cuda_stream if x.device.type == "cuda" else 0
    key = (x.device.type, x.device.index, stream)
    count = _GRID_COUNT.get(key)
    if count is None or count.numel() < n_rows:
        count = torch.zeros(max(n_rows, 1024), dtype=torch.int64, device=x.device)
        _GRID_COUNT[key] = count
    pm = torch.empty((n_rows, chunks), dtype=torch.float32, device=x.device)
    pl = torch.empty_like(pm)
    meta = dict(CHUNKS=chunks, BLOCK=p.block, P_BLOCK=max(16, triton.next_power_of_2(chunks)),
                EPOCH=GRID_EPOCH, SPIN_LIMIT=COOP_SPIN_LIMIT, num_warps=p.num_warps)  # fmt: skip
    args = (x, y, pm, pl, count, n_cols)
    if x.device.type == "cuda":
        per_sm = min(p.programs_per_sm, _occupancy(_grid_kernel, args, meta, x, y, n_cols))
    elif chunks > 1:
        raise ValueError(
            f"softmax: grid plan with {chunks} programs per row needs a GPU "
            "(the interpreter runs programs one at a time)"
        )
    else:
        per_sm = p.programs_per_sm
    if n_rows * chunks > sm_count(x.device) * per_sm:
        if forced:
            raise ValueError(
                f"softmax: grid plan needs {n_rows * chunks} resident programs, "
                f"the device holds {sm_count(x.device) * per_sm}"
            )
        return False
    _grid_kernel[(chunks, n_rows)](*args, **meta)
    return True


def softmax(x: torch.Tensor, p: SoftmaxPlan) -> torch.Tensor:
    """Softmax over the last dimension with the forced "grid" or "coop" plan ``p``, as
    :func:`fusebench.kernels.softmax.triton.softmax` takes ``x`` (any shape, float32, bfloat16 or
    float16; a CUDA device, or the CPU under ``TRITON_INTERPRET=1``).

    Raises:
        TypeError: ``x`` has another dtype.
        ValueError: ``p`` is of another kind, or needs more programs at once than the device
            holds (in the interpreter: more than one per row).
    """
    if p.kind not in ("coop", "grid"):
        raise ValueError(f"softmax: triton_coop runs coop and grid plans, not {p.kind!r}")
    if x.dtype not in _DTYPES:
        raise TypeError(f"softmax: unsupported dtype {x.dtype}; expected float32, bfloat16 or float16")
    x = x.contiguous()
    y = torch.empty_like(x)
    if x.numel() == 0:
        return y
    n_cols = x.shape[-1] if x.dim() else 1
    n_rows = x.numel() // n_cols
    if p.kind == "grid":
        _launch_grid(x, y, n_rows, n_cols, p, forced=True)
    else:
        _launch_coop(x, y, n_rows, n_cols, p)
    return y
