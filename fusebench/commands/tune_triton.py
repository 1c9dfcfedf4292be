"""Time candidate launch configurations of the Triton GELU and softmax kernels on one GPU.

Usage: fusebench tune triton [--op softmax|gelu|all] [--only SUBSTRING] [--budget SECONDS]

Softmax cases: every shape of the op's default grid in float32, bfloat16 and float16; GELU
cases: 2^22, 2^24, 2^26 elements in float32 and bfloat16. For each case it checks every
candidate against the op's float64 reference (the suite's correctness gate), then times it hot
the way the suite does (fusebench.measure.timing: warm-up, then batches of calls between CUDA events
behind a blocking kernel), and prints one table: config, median µs, GB/s (the op's declared
bytes: one read + one write), % of the copy ceiling measured at the start of the run
(fusebench.measure.metrics.measure_copy_ceiling, 1 GiB each way), and speedup over the current
default (first row). A ``copy_`` of the same bytes, ``torch`` and the reference backends
``liger``, ``quack`` and ``flaggems`` (where fusebench's registry has them and they run) are
yardstick lines. A candidate that fails to compile, raises or fails the gate is reported and
skipped. At the end: the best candidate of each case against the best yardstick. Needs a CUDA
device; the softmax run takes about three minutes on an H200 (most of it Triton compilation).
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from typing import Callable

import torch

from fusebench.errors import SkipCase, UsageError
from fusebench.measure import timing
from fusebench.measure.correctness import check
from fusebench.measure.inputs import make_input
from fusebench.measure.metrics import effective_bandwidth_gbps, measure_copy_ceiling, pct_of_ceiling
from fusebench.ops import configured, get_op

#: Backends timed beside the candidates when registered for the op: the suite's built-in and
#: the public reference kernels (issue 15).
YARDSTICKS = ("torch", "liger", "quack", "flaggems")

Candidate = tuple[str, Callable[[torch.Tensor], torch.Tensor]]


def gelu_candidates(x: torch.Tensor) -> list[Candidate]:
    """Default first, then block/warps variants, cache hints, persistent grids."""
    from fusebench.ops.gelu import triton as tg

    d = tg._launch_config(x.element_size())
    b, w = d.block, d.num_warps
    cfgs = [
        ("default", None),
        *[
            (f"block={bb} warps={ww}", tg.GeluConfig(bb, ww))
            for bb, ww in ((b // 2, w // 2), (b, w // 2), (b, 2 * w), (2 * b, w), (2 * b, 2 * w))
        ],
        ("default evict_first", tg.GeluConfig(b, w, evict_first=True)),
        ("default .cs store", tg.GeluConfig(b, w, streaming_store=True)),
        ("default evict_first .cs", tg.GeluConfig(b, w, evict_first=True, streaming_store=True)),
        *[(f"persistent {k}/SM", tg.GeluConfig(b, w, programs_per_sm=k)) for k in (1, 2, 4, 8)],
        ("persistent 4/SM block/2 warps/2", tg.GeluConfig(b // 2, w // 2, programs_per_sm=4)),
        ("persistent 8/SM block/2 warps/2", tg.GeluConfig(b // 2, w // 2, programs_per_sm=8)),
        ("persistent 16/SM block/2 warps/2", tg.GeluConfig(b // 2, w // 2, programs_per_sm=16)),
        (
            "persistent 4/SM evict_first .cs",
            tg.GeluConfig(b, w, programs_per_sm=4, evict_first=True, streaming_store=True),
        ),
        ("no pdl", tg.GeluConfig(b, w)),
        ("pdl", tg.GeluConfig(b, w, pdl=True)),
        ("pdl block*2 warps*2", tg.GeluConfig(b * 2, w * 2, pdl=True)),
        ("pdl evict_first .cs", tg.GeluConfig(b, w, evict_first=True, streaming_store=True, pdl=True)),
        ("pdl persistent 4/SM", tg.GeluConfig(b, w, programs_per_sm=4, pdl=True)),
        ("pdl block/2 warps/2", tg.GeluConfig(b // 2, w // 2, pdl=True)),
        *[
            (
                f"pdl even {k}/SM block/{d}",
                tg.GeluConfig(b // d, max(1, w // d), programs_per_sm=k, even=True, pdl=True),
            )
            for k, d in ((4, 1), (8, 2), (8, 4), (16, 4), (16, 8))
        ],
    ]
    return [(label, lambda x, c=c: tg.gelu(x, _config=c)) for label, c in cfgs]


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
    """Rows beyond ROW_MAX_COLS: "online" tails and hints (many rows), "grid" blocks and a
    PDL "split" (few rows)."""
    import triton

    out = []
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


def softmax_plans(x: torch.Tensor) -> list[tuple[str, object]]:
    """(label, plan) for an input ``x`` (any device, ``meta`` included: only its shape, dtype and
    device are read): the default first with plan None, then variants of the kind the shape
    needs as forced :class:`~fusebench.ops.softmax.triton.SoftmaxPlan` objects, none equal to the
    default or to another (a handful per case: each costs a Triton compilation per dtype)."""
    from fusebench.ops.softmax import triton as ts

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


def softmax_candidates(x: torch.Tensor) -> list[Candidate]:
    """:func:`softmax_plans` as timed calls: the default (plan None) and each forced plan."""
    from fusebench.ops.softmax import triton as ts

    return [(label, lambda x, p=p: ts.softmax(x, _plan=p)) for label, p in softmax_plans(x)]


def _softmax_cases(ops: dict | None = None) -> list[tuple[str, tuple[int, ...], torch.dtype, Callable]]:
    from fusebench.registry import DTYPES

    return [
        ("softmax", shape, dtype, softmax_candidates)
        for dtype in DTYPES.values()
        for shape in get_op("softmax", ops).grids["default"]
    ]


GELU_CASES: list[tuple[str, tuple[int, ...], torch.dtype, Callable[[torch.Tensor], list[Candidate]]]] = [
    ("gelu", (1 << 22,), torch.float32, gelu_candidates),
    ("gelu", (1 << 22,), torch.bfloat16, gelu_candidates),
    ("gelu", (1 << 24,), torch.float32, gelu_candidates),
    ("gelu", (1 << 24,), torch.bfloat16, gelu_candidates),
    ("gelu", (1 << 26,), torch.float32, gelu_candidates),
    ("gelu", (1 << 26,), torch.bfloat16, gelu_candidates),
]


def _time_us(fn: Callable[[], object], dev: torch.device, budget_s: float) -> tuple[float, float]:
    """Hot device time of ``fn``: (median µs, noise = iqr / median)."""
    t = timing.measure(fn, dev, budget_s)
    return t.median_ms * 1e3, t.noise


def _row(label: str, us: float, nbytes: int, ceiling: float, default_us: float | None, note: str = "") -> str:
    gbps = effective_bandwidth_gbps(nbytes, us * 1e-3)
    vs = f"{default_us / us:5.2f}x" if default_us else "   - "
    return f"  {label:<58} {us:9.1f} {gbps:7.0f} {pct_of_ceiling(gbps, ceiling):6.1f}% {vs} {note}"


def _yardsticks(op, x: torch.Tensor) -> list[Candidate]:
    """The registered YARDSTICKS backends of ``op`` as candidates (built lazily: a factory
    that raises SkipCase is reported as a skip by run_case)."""
    return [(f"[{name}]", op.backends[name].factory) for name in YARDSTICKS if name in op.backends]


def run_case(
    op_name, shape, dtype, candidates, dev, budget_s, ceiling, ops=None
) -> tuple[str, float, str, float] | None:
    """Print the table of one case; return (best candidate, its µs, best yardstick, its µs)."""
    op = get_op(op_name, ops)
    x = make_input(shape, dtype, str(dev))
    nbytes = op.bytes_moved(shape, dtype)
    print(
        f"\n{op_name} {'x'.join(map(str, shape))} {str(dtype).removeprefix('torch.')}"
        f"  ({nbytes / 1e6:.1f} MB moved; ideal at {ceiling:.0f} GB/s: {nbytes / ceiling / 1e3:.2f} µs)"
    )
    print(f"  {'config':<58} {'µs':>9} {'GB/s':>7} {'%ceil':>7} {'vs def':>6}")
    dst = torch.empty_like(x)
    copy_us, _ = _time_us(lambda: dst.copy_(x), dev, budget_s)
    print(_row("copy_ at this size (reference)", copy_us, nbytes, ceiling, None))
    default_us = None
    best: dict[bool, tuple[str, float]] = {}
    yard = [(label, factory, True) for label, factory in _yardsticks(op, x)]
    mine = [(label, (lambda x, call=call: lambda: call(x)), False) for label, call in candidates(x)]
    for label, factory, is_yard in mine + yard:
        try:
            fn = factory(x)
            gate = check(op, fn, x)
            if not gate.passed:
                print(f"  {label:<58} WRONG: {gate.reason} (rel err {gate.max_rel_error:.2e})")
                continue
            us, noise = _time_us(fn, dev, budget_s)
        except SkipCase as exc:
            print(f"  {label:<58} skipped: {str(exc).splitlines()[0][:100]}")
            continue
        except Exception as exc:  # compile error, launch failure: report, go on
            print(f"  {label:<58} FAILED: {type(exc).__name__}: {str(exc).splitlines()[0][:100]}")
            continue
        if default_us is None and label.startswith("default"):
            default_us = us
        if is_yard and label == "[torch]":
            pass  # the built-in is a yardstick for speedups, not a peer to beat
        elif is_yard not in best or us < best[is_yard][1]:
            best[is_yard] = (label, us)
        print(_row(label, us, nbytes, ceiling, default_us, f"noise {noise:.1%}" if noise > 0.05 else ""))
    if False not in best:
        return None
    peer = best.get(True, ("-", float("nan")))
    return best[False][0], best[False][1], peer[0], peer[1]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``fusebench tune triton``."""
    parser.add_argument("--op", choices=("softmax", "gelu", "all"), default="softmax",
                        help="which op's cases (default softmax)")  # fmt: skip
    parser.add_argument("--only", default="", help="run only cases whose label contains this")
    parser.add_argument(
        "--budget",
        type=float,
        default=0.03,
        help="seconds of timed repeats per config (default 0.03; >= 20 repeats)",
    )


def run(args: argparse.Namespace) -> int:
    """Run ``fusebench tune triton`` with the parsed options; returns the exit status."""
    if not torch.cuda.is_available():
        raise UsageError("needs a CUDA device")
    if args.budget <= 0:
        raise UsageError(f"--budget must be > 0, got {args.budget}")
    dev = torch.device("cuda", torch.cuda.current_device())
    props = torch.cuda.get_device_properties(dev)
    import triton

    ceiling = measure_copy_ceiling(dev).gbps
    print(
        f"{props.name}, {props.multi_processor_count} SMs, torch {torch.__version__}, "
        f"triton {triton.__version__}; copy ceiling {ceiling:.0f} GB/s (1 GiB copy_); hot device "
        "time, median; vs def = default µs / config µs; [name] = yardstick backend"
    )
    ops = configured(args.config)
    cases = (_softmax_cases(ops) if args.op in ("softmax", "all") else []) + (
        GELU_CASES if args.op in ("gelu", "all") else []
    )
    start = time.perf_counter()
    summary = []
    for op_name, shape, dtype, candidates in cases:
        label = f"{op_name} {'x'.join(map(str, shape))} {str(dtype).removeprefix('torch.')}"
        if args.only in label:
            nbytes = get_op(op_name, ops).bytes_moved(shape, dtype)
            best = run_case(op_name, shape, dtype, candidates, dev, args.budget, ceiling, ops)
            torch.cuda.empty_cache()  # the case's tensors are gone: let the next one have HBM
            summary.append((label, nbytes, best))
    if not summary:
        raise UsageError(f"--only {args.only!r} matches no case")
    print(f"\nbest per case (% of the copy ceiling {ceiling:.0f} GB/s)")
    for label, nbytes, best in summary:
        if best is None:
            print(f"  {label:<28} no candidate ran")
            continue
        name, us, peer, peer_us = best
        pct = pct_of_ceiling(effective_bandwidth_gbps(nbytes, us * 1e-3), ceiling)
        peer_pct = pct_of_ceiling(effective_bandwidth_gbps(nbytes, peer_us * 1e-3), ceiling)
        print(f"  {label:<28} {pct:5.1f}%  {us:9.1f} µs  {name:<58} best peer {peer} {peer_pct:.1f}%")
    print(f"\n{len(summary)} cases in {time.perf_counter() - start:.0f} s")
    return 0

