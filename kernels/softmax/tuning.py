"""Softmax's tuning space (``fusebench tune triton``, ``fusebench tune cuda``; ``fusebench/tuning.py``).

Triton: plans of the kind each shape needs around the default (:func:`triton_plans`); CUDA: every
forced variant of ``cuda_ext.VARIANTS`` and every tuned configuration (``cluster:<chunk>``,
``split:<chunk>[:nopdl]``, ``warp:<vecs>``, ``tma:<chunk_kb>:<threads>:<pieces>[:bulk]``) that the
extension accepts for the shape (``cuda_ext.refusal``: the one source of the variant rules), limited
to the shapes each is meant for (:func:`tuned_scope`). Cases: every shape of the op's default grid
in each dtype.
"""

from __future__ import annotations

import dataclasses

import torch
from fusebench.kernels import cuda_ext

from fusebench.registry import DTYPES
from fusebench.tuning import Candidate, Space


def _describe(p) -> str:
    """A SoftmaxPlan in one short line."""
    extra = {
        "row": f" rows/prog={p.rows_per_program}",
        "split": f" chunk={p.chunk}",
        "coop": f" {p.programs_per_sm}/SM{' l2-hints' if p.l2_hints else ''}",
        "online": f" tail={p.tail}{' l2-hints' if p.l2_hints else ''}",
        "grid": f" {p.programs_per_sm}/SM",
    }.get(p.kind, "")
    if p.persistent:
        extra += f" persistent {p.programs_per_sm}/SM"
    if p.recompute:
        extra += " recompute"
    if p.maxnreg:
        extra += f" maxnreg={p.maxnreg}"
    if p.kind == "split" and p.pdl:
        extra += " pdl"
    return f"{p.kind} block={p.block} warps={p.num_warps}{extra}"


def _row_candidates(ts, default, n_rows: int, n_cols: int, item: int) -> list[tuple[str, object]]:
    """ "row" variants: warps and rows per program around the default (twice the rows and warps:
    the 16 KB tiles of the earlier default); persistent tiles where
    a thread holds few enough values to keep two tiles (<= 8 warps: up to 255 registers); one
    row per program of 4 or 8 warps (Liger's and FlagGems' layout); for 16-bit rows, the same
    with ``recompute`` (and the default without it)."""
    out = []
    b, r, w = default.block, default.rows_per_program, default.num_warps
    if default.recompute or default.maxnreg:
        out.append((None, dataclasses.replace(default, recompute=False, maxnreg=0)))
    if b <= 4096:
        out += [(None, ts.SoftmaxPlan("row", b, ww)) for ww in (4, 8)]
    for rr, ww in ((r, w // 2), (r, 2 * w), (r // 2, w // 2), (2 * r, 2 * w)):
        if 1 <= rr <= n_rows and 1 <= ww <= 32 and b * rr // (32 * ww) <= 64:
            out.append((f"row rows/prog={rr} warps={ww}", ts.SoftmaxPlan("row", b, ww, rr)))
    for rr, ww, pps in ((max(1, r // 2), max(1, w // 4), 2), (r, max(1, w // 2), 1)):
        if ww <= 8 and b * rr // (32 * ww) <= 32:
            out.append(
                (f"row rows/prog={rr} warps={ww} persistent {pps}/SM",
                 ts.SoftmaxPlan("row", b, ww, rr, programs_per_sm=pps, persistent=True))
            )  # fmt: skip
    if b >= 16384:  # one program per SM: the next row's loads in flight while this one is reduced
        out.append((f"row rows/prog={r} warps={w} persistent 1/SM",
                    ts.SoftmaxPlan("row", b, w, r, persistent=True)))  # fmt: skip
    if item == 2:  # only the raw 16-bit tile live
        for p in [default] + [p for _, p in out]:
            out.append((None, dataclasses.replace(p, recompute=True)))
        if b >= 16384 and r == 1:  # two programs of 16 warps per SM: 64 registers a thread
            for pers in (False, True):
                out.append((None, ts.SoftmaxPlan(
                    "row", b, 16, recompute=True, maxnreg=64, programs_per_sm=1 + pers, persistent=pers
                )))  # fmt: skip
    return [(label or _describe(p), p) for label, p in out]


def _long_row_candidates(ts, item: int, n_rows: int, n_cols: int, sms: int) -> list[tuple[str, object]]:
    """Rows beyond ROW_MAX_COLS: "coop" with and without L2 hints (any rows), "online" tails and
    hints (many rows), "grid" blocks and a PDL "split" (few rows)."""
    import triton
    from fusebench.kernels.softmax import triton_coop

    b, per_sm = triton_coop.COOP_BLOCK_BYTES // item, triton_coop.COOP_PROGRAMS_PER_SM
    coop = [ts.SoftmaxPlan("coop", b, ts._warps(b), programs_per_sm=per_sm, l2_hints=h) for h in (0, 1)]
    out = [(_describe(p), p) for p in coop]
    if n_rows >= ts.SPLIT_MAX_ROWS_PER_SM * sms:  # one program per row fills the GPU
        if item == 2 and n_cols <= 65536:  # the whole 16-bit row in the registers of 32 warps
            b = triton.next_power_of_2(n_cols)
            for rc in (False, True):
                p = ts.SoftmaxPlan("row", b, 32, recompute=rc)
                out.append((_describe(p), p))
        for b, w, tail, hints in (
            (8192, 16, 0, False),  # float32's plan before issue 15
            (4096, 8, 0, False),  # 16-bit's plan before issue 15
            (8192, 16, 0, True),
            (8192, 16, 16384, True),
            (8192, 16, 16384, False),
            (4096, 8, 8192, True),
            (8192, 32, 0, True),  # more bytes per step in flight (one program per SM)
            (8192, 32, 16384, True),
        ):
            if tail < n_cols:
                out.append(
                    (f"online block={b} warps={w} tail={tail}{' l2-hints' if hints else ''}",
                     ts.SoftmaxPlan("online", b, w, tail=tail, l2_hints=hints))
                )  # fmt: skip
        for b, w, tail in ((8192, 16, 8192), (8192, 32, 0)):  # a persistent grid: one program per SM
            p = ts.SoftmaxPlan("online", b, w, tail=tail, l2_hints=True, persistent=True)
            out.append((f"online block={b} warps={w} tail={tail} l2-hints persistent 1/SM", p))
        return out
    for b in (2048, 4096, 8192, 16384):
        if n_rows * triton.cdiv(n_cols, b) <= 2 * sms:
            out.append((f"grid block={b} warps={ts._warps(b)}",
                        ts.SoftmaxPlan("grid", b, ts._warps(b), programs_per_sm=2)))  # fmt: skip
    blk = 16384 // item
    for b in (blk // 4, blk // 2, blk):
        if n_rows * triton.cdiv(n_cols, b) <= 65535 * 4 and triton.cdiv(n_cols, b) <= ts.SPLIT_MAX_CHUNKS:
            out.append((f"split block={b} pdl", ts.SoftmaxPlan("split", b, ts._warps(b), chunk=b, pdl=True)))
    plain = ts.plan(n_rows, n_cols, item, sms)  # the split the interpreter would get: no pdl
    out.append((f"no grid/pdl: {_describe(plain)}", plain))
    return out


def triton_plans(x: torch.Tensor) -> list[tuple[str, object]]:
    """(label, plan) for an input ``x`` (any device, ``meta`` included: only its shape, dtype and
    device are read): the default first with plan None, then variants of the kind the shape
    needs as forced :class:`~fusebench.kernels.softmax.triton.SoftmaxPlan` objects, none equal to the
    default or to another (a handful per case: each costs a Triton compilation per dtype)."""
    from fusebench.kernels.softmax import triton as ts

    n_cols = x.shape[-1]
    n_rows = x.numel() // n_cols
    item = x.element_size()
    sms = ts.sm_count(x.device)
    default = ts.plan(n_rows, n_cols, item, sms, cooperative=x.device.type == "cuda")
    plans: list[tuple[str, object]] = [(f"default: {_describe(default)}", None)]
    if n_cols <= ts.ROW_MAX_COLS:
        plans += _row_candidates(ts, default, n_rows, n_cols, item)
        if n_cols > ts.ROW_MAX_COLS // 2:  # one program per SM holds a row: try halves/quarters
            for b in (n_cols // 2, n_cols // 4):
                plans.append(
                    (f"split block={b} pdl", ts.SoftmaxPlan("split", b, ts._warps(b), chunk=b, pdl=True))
                )
    else:
        plans += _long_row_candidates(ts, item, n_rows, n_cols, sms)
    seen, out = set(), []
    for label, p in plans:  # drop duplicates of the default
        if p is not None and (p == default or p in seen):
            continue
        seen.add(p)
        out.append((label, p))
    return out


def _forced_plan(p):
    from fusebench.kernels.softmax import triton as ts
    from fusebench.kernels.softmax import triton_coop

    if p is not None and p.kind in ("coop", "grid"):  # the cooperative plans' own launcher
        return lambda x: lambda: triton_coop.softmax(x, p)
    return lambda x: lambda: ts.softmax(x, _plan=p)


def triton_candidates(x: torch.Tensor) -> list[Candidate]:
    """:func:`triton_plans` as candidates: the default (plan None) and each forced plan."""
    return [Candidate(label, _forced_plan(p)) for label, p in triton_plans(x)]


# tma configurations timed: (chunk_kb, threads, pieces, bulk_store).
TMA_CONFIGS = [(kb, t, p, 0) for kb in (16, 32, 64, 128) for t in (128, 256, 512) for p in (1, 4)] + [
    (kb, 256, 4, 1) for kb in (32, 64, 128)
]


def _knobs(cfg: tuple[int, int, int, int]) -> str:
    return ":".join(map(str, cfg[:3])) + (":bulk" if cfg[3] else "")


def tuned_names() -> list[str]:
    """The tuned configurations: ``cluster:<chunk>``, ``split:<chunk>[:nopdl]``, ``warp:<vecs>``
    and ``tma:<chunk_kb>:<threads>:<pieces>[:bulk]``."""
    return (
        [f"cluster:{c}" for c in cuda_ext.CLUSTER_CHUNKS]
        + [f"split:{c}{p}" for c in (1024, 2048, 4096, 8192, 16384) for p in ("", ":nopdl")]
        + [f"warp:{v}" for v in (1, 2, 8)]
        + [f"tma:{_knobs(c)}" for c in TMA_CONFIGS]
    )


def parse_tma(name: str) -> dict[str, int]:
    """Knobs of ``tma:<chunk_kb>:<threads>:<pieces>[:bulk]`` as keyword arguments of
    ``cuda_ext.refusal`` (ValueError for another form)."""
    parts = name.split(":")
    if parts[0] != "tma" or len(parts) not in (4, 5) or parts[4:] not in ([], ["bulk"]):
        raise ValueError(f"not a tma configuration: {name!r}")
    return {"chunk_kb": int(parts[1]), "threads": int(parts[2]), "pieces": int(parts[3]),
            "bulk_store": int(len(parts) == 5)}


def tuned_scope(name: str, cols: int) -> bool:
    """Whether a tuned configuration is timed on rows of ``cols`` elements at all (where it is
    meant to matter; whether it can run is ``cuda_ext.refusal``'s to say): split configurations
    on rows longer than 32768, cluster configurations on rows longer than 4096, warp
    configurations up to 256 columns, tma configurations from 4096 columns."""
    if name.startswith("split:"):
        return cols > 32768
    if name.startswith("cluster:"):
        return cols > 4096
    if name.startswith("warp:"):
        return cols <= 256
    if name.startswith("tma:"):
        return cols >= 4096
    return True


def applicable(name: str, rows: int, cols: int, itemsize: int = 4, cc_major: int = 9) -> bool:
    """Whether ``name`` (a ``VARIANTS`` name or a tuned configuration) is timed on a (rows, cols)
    problem of ``itemsize``-byte elements (16-byte aligned, as ``make_input`` allocates them) on a
    GPU of compute capability ``cc_major``: in ``tuned_scope`` and accepted by
    ``cuda_ext.refusal`` (needs the extension)."""
    if not tuned_scope(name, cols):
        return False
    base, _, rest = name.partition(":")
    kwargs: dict[str, int] = {}
    chunk = 0
    if base == "tma" and rest:
        kwargs = parse_tma(name)
    elif base == "cluster" and rest:
        chunk = int(rest)
    elif base == "split":
        base = "split_row"
    elif base == "warp":
        base = "warp_per_row"
    return cuda_ext.refusal(rows, cols, itemsize, base, cc_major=cc_major, chunk=chunk, **kwargs) is None


def variant_fn(name: str, x: torch.Tensor):
    """The callable timing forced variant or tuned configuration ``name`` on x."""
    if name.startswith("tma:"):
        k = parse_tma(name)
        return lambda: cuda_ext.softmax_tma(x, *k.values())
    if name.startswith("cluster:"):
        chunk = int(name.split(":", 1)[1])
        return lambda: cuda_ext.softmax_cluster(x, chunk)
    if name.startswith("split:"):
        parts = name.split(":")
        chunk, pdl = int(parts[1]), parts[-1] != "nopdl"
        return lambda: cuda_ext.softmax_split(x, chunk, pdl)
    if name.startswith("warp:"):
        vecs = int(name.split(":", 1)[1])
        return lambda: cuda_ext.softmax_warp(x, vecs)
    return lambda: cuda_ext.softmax_variant(x, name)


def _forced(name: str):
    def make(x: torch.Tensor):
        cuda_ext.require(x)
        return variant_fn(name, x)

    return make


def cuda_candidates(x: torch.Tensor) -> list[Candidate]:
    """``auto`` (the suite's choice, named), then every forced variant and tuned configuration
    :func:`applicable` to ``x`` on its GPU."""
    rows, cols = x.shape
    props = torch.cuda.get_device_properties(x.device)
    sms, cc = props.multi_processor_count, props.major
    code = cuda_ext.pick_variant(rows, cols, x.element_size(), sms)
    picked = next(name for name, c in cuda_ext.VARIANTS.items() if c == code)
    names = [n for n in [*cuda_ext.VARIANTS, *tuned_names()]
             if n != "auto" and applicable(n, rows, cols, x.element_size(), cc)]
    return [Candidate(f"auto (picks {picked})", _forced("auto")), *(Candidate(n, _forced(n)) for n in names)]


def _default_grid(dtypes):
    return lambda op: [(shape, dtype) for dtype in dtypes for shape in op.grids["default"]]


SPACES = {
    "triton": Space(_default_grid(tuple(DTYPES.values())), triton_candidates),
    "cuda": Space(_default_grid(tuple(DTYPES.values())), cuda_candidates, budget_s=0.05),
}
