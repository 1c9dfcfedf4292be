"""Time every applicable forced cuda softmax variant and config beside auto, triton and the references.

    fusebench tune cuda [--dtypes float32,bfloat16,float16] [--budget 0.05] [--no-gelu]
                          [--shapes 256x262144,1x1048576] [--variants auto,tma,quack]

For each default softmax shape x dtype: every ``fusebench.ops.cuda_ext.VARIANTS`` entry, and every tuned
configuration (``coop:<chunk>``, ``cluster:<chunk>``, ``split:<chunk>[:nopdl]``, ``warp:<vecs>``,
``tma:<chunk_kb>:<threads>:<pieces>[:bulk]``, ``tma_grid:<ctas_per_sm>:<threads>:<pieces>[:bulk]``)
that the extension accepts for the shape (``cuda_ext.refusal``: the one source of the variant
rules; tuned configurations are further limited to the shapes they are meant for), plus the
``triton`` backend and the reference backends ``liger``, ``quack`` and ``flaggems`` where the
registry has them (skipped silently otherwise; a reference that raises for the shape shows its
reason). ``--variants`` keeps the names starting with one of its comma-separated prefixes. Each
callable passes the correctness gate first (a failure prints FAIL and is not timed), is warmed
up and timed hot with ``fusebench.measure.timing.measure`` (repeats from the warm-up's estimate and the
budget; batches of calls between CUDA events, behind a blocking kernel). Per case it prints every
timed callable, fastest first, in µs and % of the copy ceiling (``fusebench.measure.metrics.
measure_copy_ceiling``, measured once at the start), then a summary table: auto, the best cuda
variant or config, triton and the references, and best cuda minus QuACK in points. Then gelu (cuda
vs triton vs torch at 2^22..2^26) unless ``--no-gelu``. Needs a CUDA GPU and nvcc. Exit status: 0,
1 when a gate failed, 2 on bad input."""

from __future__ import annotations

import argparse

import torch

from fusebench.cli import pick
from fusebench.errors import UsageError
from fusebench.measure import correctness, metrics, timing
from fusebench.measure.inputs import make_input
from fusebench.ops import configured, get_op
from fusebench.registry import DTYPES, shape_label

GELU_SIZES = [(1 << 22,), (1 << 24,), (1 << 26,)]


REFERENCES = ("liger", "quack", "flaggems")

# tma configurations timed: (chunk_kb, threads, pieces, bulk_store) and tma_grid (ctas_per_sm, ...).
TMA_CONFIGS = [(kb, t, p, 0) for kb in (16, 32, 64, 128) for t in (128, 256, 512) for p in (1, 4)] + [
    (kb, 256, 4, 1) for kb in (32, 64, 128)
]
TMA_GRID_CONFIGS = [(k, t, p, 0) for k in (1, 2) for t in (256, 512) for p in (1, 2)] + [(1, 512, 2, 1)]


def _knobs(cfg: tuple[int, int, int, int]) -> str:
    return ":".join(map(str, cfg[:3])) + (":bulk" if cfg[3] else "")


def coop_names() -> list[str]:
    """The tuned configurations: ``coop:<chunk>``, ``cluster:<chunk>``, ``split:<chunk>[:nopdl]``,
    ``warp:<vecs>``, ``tma:<chunk_kb>:<threads>:<pieces>[:bulk]`` and
    ``tma_grid:<ctas_per_sm>:<threads>:<pieces>[:bulk]``."""
    from fusebench.ops import cuda_ext

    return (
        [f"coop:{c}" for c in cuda_ext.COOP_CHUNKS]
        + [f"cluster:{c}" for c in cuda_ext.CLUSTER_CHUNKS]
        + [f"split:{c}{p}" for c in (1024, 2048, 4096, 8192, 16384) for p in ("", ":nopdl")]
        + [f"warp:{v}" for v in (1, 2, 8)]
        + [f"tma:{_knobs(c)}" for c in TMA_CONFIGS]
        + [f"tma_grid:{_knobs(c)}" for c in TMA_GRID_CONFIGS]
    )


def parse_tma(name: str) -> dict[str, int]:
    """Knobs of ``tma:<chunk_kb>:<threads>:<pieces>[:bulk]`` or ``tma_grid:<ctas_per_sm>:...``
    as keyword arguments of ``cuda_ext.refusal`` (ValueError for another form)."""
    parts = name.split(":")
    if parts[0] not in ("tma", "tma_grid") or len(parts) not in (4, 5) or parts[4:] not in ([], ["bulk"]):
        raise ValueError(f"not a tma configuration: {name!r}")
    first = "chunk_kb" if parts[0] == "tma" else "ctas_per_sm"
    return {first: int(parts[1]), "threads": int(parts[2]), "pieces": int(parts[3]),
            "bulk_store": int(len(parts) == 5)}


def tuned_scope(name: str, rows: int, cols: int, sm_count: int, itemsize: int) -> bool:
    """Whether a tuned configuration is timed on a (rows, cols) problem at all (where it is
    meant to matter; whether it can run is ``cuda_ext.refusal``'s to say): coop, cluster and split
    configurations on rows longer than 32768, warp configurations up to 256 columns, tma
    configurations from 4096 columns, tma_grid on fewer rows than SMs."""
    if name.startswith(("coop:", "split:")):
        return cols > 32768
    if name.startswith("cluster:"):
        return cols > 4096
    if name.startswith("warp:"):
        return cols <= 256
    if name.startswith("tma_grid:"):
        return rows < sm_count
    if name.startswith("tma:"):
        return cols >= 4096
    return True


def applicable(name: str, rows: int, cols: int, sm_count: int, itemsize: int = 4, cc_major: int = 9) -> bool:
    """Whether ``name`` (a ``VARIANTS`` name or a tuned configuration) is timed on a (rows, cols)
    problem of ``itemsize``-byte elements (16-byte aligned, as ``make_input`` allocates them) on a
    GPU of ``sm_count`` SMs and compute capability ``cc_major``: in ``tuned_scope`` and accepted
    by ``cuda_ext.refusal`` (needs the extension)."""
    from fusebench.ops import cuda_ext

    if not tuned_scope(name, rows, cols, sm_count, itemsize):
        return False
    base, _, rest = name.partition(":")
    kwargs: dict[str, int] = {}
    chunk = 0
    if base in ("tma", "tma_grid") and rest:
        kwargs = parse_tma(name)
    elif base in ("coop", "cluster") and rest:
        chunk = int(rest)
    elif base == "split":
        base = "split_row"
    elif base == "warp":
        base = "warp_per_row"
    return cuda_ext.refusal(rows, cols, itemsize, base, sm_count=sm_count, cc_major=cc_major,
                            chunk=chunk, **kwargs) is None


def variant_fn(name: str, x: torch.Tensor):
    """The callable timing forced variant or tuned configuration ``name`` on x."""
    from fusebench.ops import cuda_ext

    if name.startswith(("tma:", "tma_grid:")):
        k = parse_tma(name)
        fn = cuda_ext.softmax_tma if name.startswith("tma:") else cuda_ext.softmax_tma_grid
        return lambda: fn(x, *k.values())
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
    """The error of a coop call whose blocks cannot all be co-resident (None when it runs): a
    co-residency ``cuda_ext.refusal`` cannot know (more than one block per SM)."""
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
    return timing.measure(fn, dev, budget_s).median_ms * 1e3


def fmt(us: float | None) -> str:
    return "FAIL" if us is None else f"{us:.1f}"


def keep(name: str, prefixes: list[str] | None) -> bool:
    """Whether ``--variants`` keeps ``name`` (every name when none was given)."""
    return prefixes is None or any(name == p or name.startswith(p + ":") for p in prefixes)


def pct(op, shape, dtype, us: float | None, ceiling_gbps: float) -> float | None:
    """``us`` for ``shape`` as % of the copy ceiling (None when not timed)."""
    if us is None:
        return None
    return metrics.pct_of_ceiling(metrics.effective_bandwidth_gbps(op.bytes_moved(shape, dtype), us * 1e-3),
                                  ceiling_gbps)


def softmax_table(dtypes: list[str], dev: torch.device, budget_s: float, shapes: list[str] | None = None,
                  prefixes: list[str] | None = None, ops: dict | None = None) -> bool:
    from fusebench.ops import cuda_ext

    op = get_op("softmax", ops)
    props = torch.cuda.get_device_properties(dev)
    sms, cc = props.multi_processor_count, props.major
    ceiling = metrics.measure_copy_ceiling(dev)
    code_to_name = {v: k for k, v in cuda_ext.VARIANTS.items()}
    names = [n for n in [*cuda_ext.VARIANTS, *coop_names()] if keep(n, prefixes)]
    others = [b for b in ("triton", *REFERENCES) if b in op.backends and keep(b, prefixes)]
    print(f"softmax: hot device time, µs and % of the {ceiling.gbps:.0f} GB/s copy ceiling measured now "
          f"({sms} SMs); per case every timed callable, fastest first")
    ok = True
    summary = []
    for shape in op.grids["default"]:
        rows, cols = shape
        if shapes and shape_label(shape) not in shapes:
            continue
        for dname in dtypes:
            x = make_input(shape, DTYPES[dname], "cuda")
            res: dict[str, float | None] = {}
            skipped: dict[str, str] = {}
            for name in names:
                if not applicable(name, rows, cols, sms, x.element_size(), cc):
                    continue
                fn = variant_fn(name, x)
                if name.startswith("coop") and (why := coop_refusal(fn)) is not None:
                    skipped[name] = why
                    continue
                res[name] = time_us(op, fn, x, dev, budget_s)
            for b in others:
                try:
                    fn = op.backends[b].factory(x)
                    res[b] = time_us(op, fn, x, dev, budget_s)
                except Exception as exc:  # noqa: BLE001 - a backend refusing the shape is a skip
                    if b == "triton":
                        raise
                    skipped[b] = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            ok &= all(v is not None for v in res.values())
            pcts = {n: pct(op, shape, x.dtype, v, ceiling.gbps) for n, v in res.items()}
            picked = code_to_name[cuda_ext.pick_variant(rows, cols, x.element_size(), sms)]
            timed = {n: v for n, v in res.items() if v is not None and n not in ("auto", *others)}
            best = min(timed, key=timed.get) if timed else None
            ranked = sorted((v, n) for n, v in res.items() if v is not None)
            print(f"{shape_label(shape)} {dname}: auto picks {picked}; best cuda {best}")
            print("    " + "  ".join(f"{n}={v:.1f}us/{pcts[n]:.0f}%" for v, n in ranked))
            for n, why in skipped.items():
                print(f"    skip {n}: {why}")
            summary.append((shape_label(shape), dname, picked, pcts.get("auto"), best,
                            pcts.get(best) if best else None, {b: pcts.get(b) for b in others}))
    print(f"\nsummary, % of the copy ceiling ({ceiling.gbps:.0f} GB/s); best-quack in points")
    head = f"{'shape':>12} {'dtype':>8} {'auto picks':>10} {'auto':>5} {'best cuda':>24} {'best':>5} "
    print(head + " ".join(f"{b:>8}" for b in others) + f" {'best-quack':>10}")

    def cell(v: float | None) -> str:
        return "-" if v is None else f"{v:.0f}"

    for label, dname, picked, auto, best, best_pct, refs in summary:
        quack = refs.get("quack")
        gap = f"{best_pct - quack:+.1f}" if best_pct is not None and quack is not None else "-"
        print(f"{label:>12} {dname:>8} {picked:>10} {cell(auto):>5} {best or '-':>24} {cell(best_pct):>5} "
              + " ".join(f"{cell(refs[b]):>8}" for b in others) + f" {gap:>10}")
    return ok


def gelu_table(dtypes: list[str], dev: torch.device, budget_s: float, ops: dict | None = None) -> bool:
    from fusebench.ops import cuda_ext

    op = get_op("gelu", ops)
    ceiling = metrics.measure_copy_ceiling(dev)
    # cuda as the suite runs it, then forced plain and programmatic dependent launches.
    columns = {
        "cuda": lambda x: op.backends["cuda"].factory(x),
        "cuda pdl=0": lambda x: (lambda: cuda_ext.gelu(x, pdl=False)),
        "cuda pdl=1": lambda x: (lambda: cuda_ext.gelu(x, pdl=True)),
        "cuda t=256": lambda x: (lambda: cuda_ext.gelu(x, threads=256)),
        "cuda t=512": lambda x: (lambda: cuda_ext.gelu(x, threads=512)),
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


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The options of ``fusebench tune cuda``."""
    ap.add_argument("--dtypes", help=f"comma-separated, of: {', '.join(DTYPES)}")
    ap.add_argument("--budget", type=float, default=0.05, help="seconds of timing per callable")
    ap.add_argument("--no-gelu", action="store_true", help="skip the gelu table")
    ap.add_argument("--shapes", help="comma-separated softmax shapes (e.g. 65536x128); default all")
    ap.add_argument("--variants", help="comma-separated name prefixes to time (e.g. auto,tma,quack)")


def run(args: argparse.Namespace) -> int:
    """Run ``fusebench tune cuda`` with the parsed options; returns the exit status."""
    dtypes = pick("dtype", args.dtypes, DTYPES)
    if not args.budget > 0:
        raise UsageError(f"--budget must be > 0, got {args.budget}")
    if not torch.cuda.is_available():
        raise UsageError("needs a CUDA GPU")
    from fusebench.ops import cuda_ext

    if (reason := cuda_ext.unavailable_reason()) is not None:
        raise UsageError(f"cuda extension unavailable: {reason}")
    dev = torch.device("cuda")
    shapes = args.shapes.split(",") if args.shapes else None
    prefixes = args.variants.split(",") if args.variants else None
    ops = configured(args.config)
    ok = softmax_table(dtypes, dev, args.budget, shapes, prefixes, ops)
    if not args.no_gelu:
        ok &= gelu_table(dtypes, dev, args.budget, ops)
    return 0 if ok else 1

