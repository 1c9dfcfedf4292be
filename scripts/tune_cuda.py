#!/usr/bin/env python3
"""Time every applicable forced cuda softmax variant (and auto, and triton) on the default grid.

    python scripts/tune_cuda.py [--dtypes float32,bfloat16,float16] [--budget 0.05] [--no-gelu]

For each default softmax shape x dtype: every ``kernels.cuda_ext.VARIANTS`` entry that can take
the shape (warp_per_row: cols <= 1024; block_per_row: cols <= 32768; split_row: rows <= 65535;
coop: ceil(cols / 8192) <= SMs), for cols > 32768 also coop with each chunk of
``cuda_ext.COOP_CHUNKS`` (``coop:2048`` ... ``coop:32768``, via ``cuda_ext.softmax_coop``; a
chunk whose blocks cannot all be co-resident for the shape shows ``n/a``), plus the ``triton``
backend as the yardstick. Each callable passes the correctness gate first
(a failure prints FAIL and is not timed), is warmed up, and timed hot with
``fusebench.timing.hot_device_time`` (batches of calls between CUDA events, behind a blocking
kernel; repeats from ``repeats_for(estimate, budget)``). Prints one line per case: median
device time in µs per variant, the fastest variant (``best``), the one auto picks, and auto's
time relative to triton (negative is faster). Then the same for gelu (cuda vs triton vs torch
at 2^22..2^26) unless ``--no-gelu``. Needs a CUDA GPU and nvcc; about 30-60 s on an H200 (build
excluded). Exit status: 0, 1 when a gate failed, 2 on bad input."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from fusebench import correctness, metrics, timing  # noqa: E402
from fusebench.cli import pick, run_main  # noqa: E402
from fusebench.errors import UsageError  # noqa: E402
from fusebench.inputs import make_input  # noqa: E402
from fusebench.registry import DTYPES, shape_label  # noqa: E402
from kernels import get_op  # noqa: E402

GELU_SIZES = [(1 << 22,), (1 << 24,), (1 << 26,)]


def coop_names() -> list[str]:
    """The tuned configurations: ``coop:<chunk>`` and ``cluster:<chunk>`` for each of their chunks."""
    from kernels import cuda_ext

    return (
        [f"coop:{c}" for c in cuda_ext.COOP_CHUNKS]
        + [f"cluster:{c}" for c in cuda_ext.CLUSTER_CHUNKS]
        + [f"split:{c}{p}" for c in (1024, 2048, 4096, 8192, 16384) for p in ("", ":nopdl")]
        + [f"warp:{v}" for v in (1, 2, 8)]
    )


def applicable(name: str, rows: int, cols: int, sm_count: int | None = None, itemsize: int = 4) -> bool:
    """Whether the forced cuda softmax variant ``name`` (a ``VARIANTS`` name or ``coop:<chunk>``)
    accepts, or is tuned on, a (rows, cols) problem of ``itemsize``-byte elements on a GPU of
    ``sm_count`` SMs (None: unknown).

    ``coop`` (default chunk) surely fits when ceil(cols / 8192) <= sm_count (every chunk's block
    fits once per SM); ``coop:<chunk>`` is tuned for cols > 32768 only, and may still be refused
    at run time when its ceil(cols / chunk) blocks cannot all be resident (``coop_refusal``).
    """
    from kernels import cuda_ext

    if name == "warp_per_row":
        return cols <= cuda_ext.WARP_PER_ROW_MAX_COLS
    if name == "block_per_row":
        return cols <= cuda_ext.BLOCK_PER_ROW_MAX_COLS
    if name == "split_row":
        return rows <= 65535
    if name == "coop":
        return sm_count is None or -(-cols // cuda_ext.COOP_DEFAULT_CHUNK) <= sm_count
    if name.startswith("coop:"):
        return cols > cuda_ext.BLOCK_PER_ROW_MAX_COLS
    if name == "cluster":
        return -(-cols // cuda_ext.CLUSTER_DEFAULT_CHUNK[itemsize]) <= 16
    if name.startswith("cluster:"):
        chunk = int(name.split(":", 1)[1])
        return cols > 4096 and -(-cols // chunk) <= 16 and chunk <= cuda_ext.CLUSTER_CHUNK_MAX[itemsize]
    if name.startswith("split:"):
        return rows <= 65535 and cols > 32768
    if name.startswith("warp:"):
        return cols <= 256
    return True


def variant_fn(name: str, x: torch.Tensor):
    """The callable timing forced variant ``name`` (a ``VARIANTS`` name or ``coop:<chunk>``) on x."""
    from kernels import cuda_ext

    if name.startswith("coop:"):
        chunk = int(name.split(":", 1)[1])
        return lambda: cuda_ext.softmax_coop(x, chunk)
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


def coop_refusal(fn) -> str | None:
    """The error of a coop call whose blocks cannot all be co-resident (None when it runs)."""
    try:
        fn()
    except (RuntimeError, ValueError) as exc:
        if "co-resident" in str(exc):
            return str(exc).splitlines()[0]
        raise
    return None


def time_us(op, fn, x, dev: torch.device, budget_s: float) -> float | None:
    """Median hot device time of ``fn`` in µs, or None when it fails the gate."""
    gate = correctness.check(op, fn, x)
    if not gate.passed:
        print(f"    FAIL {gate.reason}")
        return None
    est = timing.warm_up(fn, dev)
    return timing.hot_device_time(fn, timing.repeats_for(est, budget_s)).median_ms * 1e3


def fmt(us: float | None) -> str:
    return "FAIL" if us is None else f"{us:.1f}"


def softmax_table(dtypes: list[str], dev: torch.device, budget_s: float, shapes: list[str] | None = None,
                  compact: bool = False) -> bool:
    from kernels import cuda_ext

    op = get_op("softmax")
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    code_to_name = {v: k for k, v in cuda_ext.VARIANTS.items()}
    names = [*cuda_ext.VARIANTS, *coop_names()]
    print(f"softmax: device time, µs (hot; {sms} SMs); best = fastest cuda variant, "
          "auto = what softmax picks, vs triton = auto / triton - 1")
    print(f"{'shape':>12} {'dtype':>8} " + " ".join(f"{n:>13}" for n in [*names, "triton"])
          + f" {'best':>13} {'auto picks':>13} {'vs triton':>9}")
    ok = True
    for shape in op.grids["default"]:
        rows, cols = shape
        if shapes and shape_label(shape) not in shapes:
            continue
        for dname in dtypes:
            x = make_input(shape, DTYPES[dname], "cuda")
            res: dict[str, float | None] = {}
            refused: set[str] = set()
            for name in names:
                if not applicable(name, rows, cols, sms, x.element_size()):
                    continue
                fn = variant_fn(name, x)
                if name.startswith("coop") and coop_refusal(fn) is not None:
                    refused.add(name)
                    continue
                res[name] = time_us(op, fn, x, dev, budget_s)
            res["triton"] = time_us(op, op.backends["triton"].factory(x), x, dev, budget_s)
            ok &= all(v is not None for v in res.values())
            timed = {n: v for n, v in res.items() if v is not None and n not in ("auto", "triton")}
            best = min(timed, key=timed.get) if timed else "-"
            picked = code_to_name[cuda_ext.pick_variant(rows, cols, x.element_size(), sms)]
            auto, tri = res.get("auto"), res.get("triton")
            rel = f"{auto / tri - 1:+.1%}" if auto and tri else "-"
            cells = [fmt(res[n]) if n in res else "n/a" if n in refused else "-"
                     for n in [*names, "triton"]]
            if compact:  # one line per case: the timed callables, fastest first
                ranked = sorted((v, n) for n, v in res.items() if v is not None)
                print(f"{shape_label(shape)} {dname}: auto={picked} {rel} | "
                      + " ".join(f"{n}={v:.1f}" for v, n in ranked))
                continue
            print(f"{shape_label(shape):>12} {dname:>8} " + " ".join(f"{c:>13}" for c in cells)
                  + f" {best:>13} {picked:>13} {rel:>9}")
    return ok


def gelu_table(dtypes: list[str], dev: torch.device, budget_s: float) -> bool:
    from kernels import cuda_ext

    op = get_op("gelu")
    ceiling = metrics.measure_copy_ceiling(dev)
    # cuda as the suite runs it, then forced plain and programmatic dependent launches.
    columns = {
        "cuda": lambda x: op.backends["cuda"].factory(x),
        "cuda pdl=0": lambda x: (lambda: cuda_ext.gelu(x, pdl=False)),
        "cuda pdl=1": lambda x: (lambda: cuda_ext.gelu(x, pdl=True)),
        "triton": lambda x: op.backends["triton"].factory(x),
        "torch": lambda x: op.backends["torch"].factory(x),
    }
    print(f"\ngelu: GB/s (% of the {ceiling.gbps:.0f} GB/s copy ceiling measured now), hot")
    print(f"{'numel':>10} {'dtype':>8} " + " ".join(f"{b:>14}" for b in columns))
    ok = True
    for shape in GELU_SIZES:
        for dname in dtypes:
            x = make_input(shape, DTYPES[dname], "cuda")
            nbytes = op.bytes_moved(shape, x.dtype)
            cells = []
            for make in columns.values():
                us = time_us(op, make(x), x, dev, budget_s)
                ok &= us is not None
                if us is None:
                    cells.append("FAIL")
                    continue
                gbps = metrics.effective_bandwidth_gbps(nbytes, us * 1e-3)
                cells.append(f"{gbps:.0f} {metrics.pct_of_ceiling(gbps, ceiling.gbps):.0f}%")
            print(f"{shape_label(shape):>10} {dname:>8} " + " ".join(f"{c:>14}" for c in cells))
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(prog="tune_cuda", description=__doc__.splitlines()[0])
    ap.add_argument("--dtypes", help=f"comma-separated, of: {', '.join(DTYPES)}")
    ap.add_argument("--budget", type=float, default=0.05, help="seconds of timing per callable")
    ap.add_argument("--no-gelu", action="store_true", help="skip the gelu table")
    ap.add_argument("--shapes", help="comma-separated softmax shapes (e.g. 65536x128); default all")
    ap.add_argument("--compact", action="store_true", help="one line per case, fastest first")
    args = ap.parse_args()
    dtypes = pick("dtype", args.dtypes, DTYPES)
    if not args.budget > 0:
        raise UsageError(f"--budget must be > 0, got {args.budget}")
    if not torch.cuda.is_available():
        raise UsageError("needs a CUDA GPU")
    from kernels import cuda_ext

    if (reason := cuda_ext.unavailable_reason()) is not None:
        raise UsageError(f"cuda extension unavailable: {reason}")
    dev = torch.device("cuda")
    shapes = args.shapes.split(",") if args.shapes else None
    ok = softmax_table(dtypes, dev, args.budget, shapes, args.compact)
    if not args.no_gelu:
        ok &= gelu_table(dtypes, dev, args.budget)
    return 0 if ok else 1


if __name__ == "__main__":
    run_main(main, "tune_cuda")
