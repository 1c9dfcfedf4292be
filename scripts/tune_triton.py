#!/usr/bin/env python3
"""Time candidate launch configurations of the Triton GELU and softmax kernels on one GPU.

Usage: scripts/tune_triton.py [--only SUBSTRING] [--budget SECONDS]

For each case (op, shape, dtype) it checks every candidate against the op's float64 reference
(the suite's correctness gate), then times it hot the way the suite does (fusebench.timing:
warm-up, then batches of calls between CUDA events behind a blocking kernel), and prints one
table: config, median µs, GB/s (the op's declared bytes: one read + one write), % of
COPY_CEILING_GBPS, and speedup over the current default (first row). A ``copy_`` of the same
bytes is the reference line. A candidate that fails to compile, raises or fails the gate is
reported and skipped. Needs a CUDA device; takes about a minute on an H200 (most of it Triton
compilation)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from fusebench import timing
from fusebench.cli import run_main
from fusebench.correctness import check
from fusebench.errors import UsageError
from fusebench.inputs import make_input
from fusebench.metrics import effective_bandwidth_gbps, pct_of_ceiling
from kernels import get_op

#: Copy ceiling the % column is relative to (H200, GB/s, read + write; measured in the sweep).
COPY_CEILING_GBPS = 4250.0

Candidate = tuple[str, Callable[[torch.Tensor], torch.Tensor]]


def gelu_candidates(x: torch.Tensor) -> list[Candidate]:
    """Default first, then block/warps variants, cache hints, persistent grids."""
    from kernels import triton_gelu as tg

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
    }.get(p.kind, "")
    return f"{p.kind} block={p.block} warps={p.num_warps}{extra}"


def softmax_candidates(x: torch.Tensor) -> list[Candidate]:
    """Default first, then the other plan kinds; "coop" blocks of 2048 to 16384 elements."""
    import triton

    from kernels import triton_softmax as ts

    n_cols = x.shape[-1]
    n_rows = x.numel() // n_cols
    item = x.element_size()
    default = ts.plan(n_rows, n_cols, item, ts.sm_count(x.device), cooperative=x.device.type == "cuda")
    blk = 16384 // item  # 16 KB of input per loop step
    plans: list[tuple[str, ts.SoftmaxPlan | None]] = [(f"default: {_describe(default)}", None)]
    if n_cols <= ts.ROW_MAX_COLS:
        for w in (8, 16, 32):
            if w != default.num_warps and default.kind == "row":
                plans.append(
                    (f"row warps={w}", ts.SoftmaxPlan("row", default.block, w, default.rows_per_program))
                )
    for b, w in ((4096, 8), (8192, 16), (16384, 16), (2 * blk, 16)):
        if b <= n_cols:
            plans.append((f"online block={b} warps={w}", ts.SoftmaxPlan("online", b, w)))
    for b in (blk // 2, blk, 2 * blk):
        if b <= n_cols:
            chunk = b * triton.cdiv(triton.cdiv(n_cols, b), ts.SPLIT_MAX_CHUNKS)
            plans.append((f"split block={b}", ts.SoftmaxPlan("split", b, ts._warps(b), chunk=chunk)))
    if x.device.type == "cuda" and n_cols > ts.ROW_MAX_COLS // 2:
        for b in (2048, 4096, 8192, 16384):
            for pps in (2, 4, 8):
                if b < n_cols and triton.cdiv(n_cols, b) <= pps * ts.sm_count(x.device):
                    for hints in (False, True) if pps == 4 else (False,):
                        plans.append(
                            (
                                f"coop block={b} {pps}/SM{' l2-hints' if hints else ''}",
                                ts.SoftmaxPlan("coop", b, ts._warps(b), programs_per_sm=pps, l2_hints=hints),
                            )
                        )
    seen, out = set(), []
    for label, p in plans:  # drop duplicates of the default
        if p is not None and (p == default or p in seen):
            continue
        seen.add(p)
        out.append((label, lambda x, p=p: ts.softmax(x, _plan=p)))
    return out


CASES: list[tuple[str, tuple[int, ...], torch.dtype, Callable[[torch.Tensor], list[Candidate]]]] = [
    ("gelu", (1 << 22,), torch.float32, gelu_candidates),
    ("gelu", (1 << 22,), torch.bfloat16, gelu_candidates),
    ("gelu", (1 << 24,), torch.float32, gelu_candidates),
    ("gelu", (1 << 24,), torch.bfloat16, gelu_candidates),
    ("gelu", (1 << 26,), torch.float32, gelu_candidates),
    ("gelu", (1 << 26,), torch.bfloat16, gelu_candidates),
    ("softmax", (256, 262144), torch.float32, softmax_candidates),
    ("softmax", (256, 262144), torch.bfloat16, softmax_candidates),
    ("softmax", (4096, 65536), torch.float32, softmax_candidates),
    ("softmax", (4096, 65536), torch.bfloat16, softmax_candidates),
    ("softmax", (1, 1048576), torch.float32, softmax_candidates),
    ("softmax", (1, 1048576), torch.bfloat16, softmax_candidates),
    ("softmax", (1024, 32768), torch.float32, softmax_candidates),
    ("softmax", (1024, 32768), torch.bfloat16, softmax_candidates),
]


def _time_us(fn: Callable[[], object], dev: torch.device, budget_s: float) -> tuple[float, float]:
    """Hot device time of ``fn``: (median µs, noise = iqr / median)."""
    est = timing.warm_up(fn, dev)
    t = timing.hot_device_time(fn, timing.repeats_for(est, budget_s))
    return t.median_ms * 1e3, t.noise


def _row(label: str, us: float, nbytes: int, default_us: float | None, note: str = "") -> str:
    gbps = effective_bandwidth_gbps(nbytes, us * 1e-3)
    vs = f"{default_us / us:5.2f}x" if default_us else "   - "
    return f"  {label:<58} {us:9.1f} {gbps:7.0f} {pct_of_ceiling(gbps, COPY_CEILING_GBPS):6.1f}% {vs} {note}"


def run_case(op_name, shape, dtype, candidates, dev, budget_s) -> None:
    """Print the table of one case."""
    op = get_op(op_name)
    x = make_input(shape, dtype, str(dev))
    nbytes = op.bytes_moved(shape, dtype)
    print(
        f"\n{op_name} {'x'.join(map(str, shape))} {str(dtype).removeprefix('torch.')}"
        f"  ({nbytes / 1e6:.0f} MB moved; ideal at {COPY_CEILING_GBPS:.0f} GB/s: "
        f"{nbytes / COPY_CEILING_GBPS / 1e3:.1f} µs)"
    )
    print(f"  {'config':<58} {'µs':>9} {'GB/s':>7} {'%ceil':>7} {'vs def':>6}")
    dst = torch.empty_like(x)
    copy_us, _ = _time_us(lambda: dst.copy_(x), dev, budget_s)
    print(_row("copy_ at this size (reference)", copy_us, nbytes, None))
    default_us = None
    for label, call in candidates(x):
        fn = lambda call=call: call(x)  # noqa: E731
        try:
            gate = check(op, fn, x)
            if not gate.passed:
                print(f"  {label:<58} WRONG: {gate.reason} (rel err {gate.max_rel_error:.2e})")
                continue
            us, noise = _time_us(fn, dev, budget_s)
        except Exception as exc:  # compile error, launch failure: report, go on
            print(f"  {label:<58} FAILED: {type(exc).__name__}: {str(exc).splitlines()[0][:100]}")
            continue
        if default_us is None and label.startswith("default"):
            default_us = us
        print(_row(label, us, nbytes, default_us, f"noise {noise:.1%}" if noise > 0.05 else ""))


def main() -> int:
    parser = argparse.ArgumentParser(prog="tune_triton.py", description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="run only cases whose label contains this")
    parser.add_argument(
        "--budget",
        type=float,
        default=0.03,
        help="seconds of timed repeats per config (default 0.03; >= 20 repeats)",
    )
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise UsageError("needs a CUDA device")
    if args.budget <= 0:
        raise UsageError(f"--budget must be > 0, got {args.budget}")
    dev = torch.device("cuda", torch.cuda.current_device())
    props = torch.cuda.get_device_properties(dev)
    import triton

    print(
        f"{props.name}, {props.multi_processor_count} SMs, torch {torch.__version__}, "
        f"triton {triton.__version__}; hot device time, median; vs def = default µs / config µs"
    )
    start = time.perf_counter()
    ran = 0
    for op_name, shape, dtype, candidates in CASES:
        label = f"{op_name} {'x'.join(map(str, shape))} {str(dtype).removeprefix('torch.')}"
        if args.only in label:
            run_case(op_name, shape, dtype, candidates, dev, args.budget)
            torch.cuda.empty_cache()  # the case's tensors are gone: let the next one have HBM
            ran += 1
    if not ran:
        raise UsageError(f"--only {args.only!r} matches no case")
    print(f"\n{ran} cases in {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    run_main(main, "tune_triton.py")
