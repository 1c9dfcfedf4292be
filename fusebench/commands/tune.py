"""Time each op's tuning space for one backend on a GPU (fusebench tune <backend>).

    fusebench tune triton|cuda [--ops NAMES] [--dtypes NAMES] [--shapes LABELS] [--only SUBSTRING]
                               [--variants PREFIXES] [--budget SECONDS] [--config FILE]

The configurations come from each op's tuning space (``kernels/<op>/tuning.py``, read through
``fusebench.tuning.spaces``): the default first, then the variants it can run. For each case
every candidate is checked against the op's float64 reference (the suite's correctness gate), then
timed hot the way the suite does (``fusebench.measure.timing``: warm-up, then batches of calls
between CUDA events behind a blocking kernel), and printed as: config, median µs, GB/s (the op's
declared bytes), % of the copy ceiling measured at the start of the run
(``fusebench.measure.metrics.measure_copy_ceiling``) and speedup over the default. A ``copy_`` of
the same bytes and the op's other fused backends (``torch``, the other hand-written one and the
reference libraries, where registered) are yardstick lines, ``[name]``. A candidate that fails to
compile, raises or is skipped is reported and left out; one that fails the gate is WRONG. At the
end: the best candidate of each case against the best yardstick. ``--variants`` keeps the
candidates (and yardsticks) whose label is one of its comma-separated prefixes or starts with one
followed by ``:`` or a space; the default is always timed. Needs a CUDA GPU. Exit status: 0, 1 when
a candidate failed the correctness gate, 2 on bad input or without a GPU.
"""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING, Callable

from fusebench.axes import BACKENDS, PLAIN_DTYPES, shape_label
from fusebench.cli import add_config, number, pick
from fusebench.errors import SkipCase, UsageError
from fusebench.names import items
from fusebench.ops import configured

if TYPE_CHECKING:
    import torch

    from fusebench.registry import Op
    from fusebench.tuning import Space

# torch and what measures are imported inside the functions that measure: `--help` needs neither.

#: Backends timed beside the candidates when the op registers them (never the one being tuned): the
#: built-in, the hand-written ones and the public reference kernels.
YARDSTICKS = ("torch", "triton", "cuda", "liger", "quack", "flaggems")
#: The built-in is a yardstick for speedups, not a peer to beat.
NOT_A_PEER = "torch"


def keep(label: str, prefixes: list[str] | None) -> bool:
    """Whether ``--variants`` keeps a candidate or yardstick label (every one when none was given)."""
    return prefixes is None or any(label == p or label.startswith((p + ":", p + " ")) for p in prefixes)


def _time_us(fn: Callable[[], object], dev: torch.device, budget_s: float) -> tuple[float, float]:
    """Hot device time of ``fn``: (median µs, noise = iqr / median)."""
    from fusebench.measure import timing

    t = timing.measure(fn, dev, budget_s)
    return t.median_ms * 1e3, t.noise


def _row(label: str, us: float, nbytes: int, ceiling: float, default_us: float | None, note: str = "") -> str:
    from fusebench.measure.metrics import effective_bandwidth_gbps, pct_of_ceiling

    gbps = effective_bandwidth_gbps(nbytes, us * 1e-3)
    vs = f"{default_us / us:5.2f}x" if default_us else "   - "
    return f"  {label:<58} {us:9.1f} {gbps:7.0f} {pct_of_ceiling(gbps, ceiling):6.1f}% {vs} {note}"


def run_case(op: Op, backend: str, space: Space, shape, dtype, dev: torch.device, budget_s: float,
             ceiling: float, prefixes: list[str] | None = None) -> tuple[tuple | None, int]:
    """Print the table of one case. Returns ((best candidate, its µs, best yardstick, its µs) or
    None when no candidate ran, the number of candidates that failed the gate)."""
    import torch

    from fusebench.measure.correctness import check
    from fusebench.measure.inputs import make_input

    x = make_input(shape, dtype, str(dev))
    nbytes = op.bytes_moved(shape, dtype)
    print(f"\n{op.name} {shape_label(shape)} {str(dtype).removeprefix('torch.')}"
          f"  ({nbytes / 1e6:.1f} MB moved; ideal at {ceiling:.0f} GB/s: {nbytes / ceiling / 1e3:.2f} µs)")
    print(f"  {'config':<58} {'µs':>9} {'GB/s':>7} {'%ceil':>7} {'vs def':>6}")
    dst = torch.empty_like(x)
    copy_us, _ = _time_us(lambda: dst.copy_(x), dev, budget_s)
    print(_row("copy_ at this size (reference)", copy_us, nbytes, ceiling, None))
    candidates = space.candidates(x)
    mine = [(c.label, c.make, False) for i, c in enumerate(candidates) if i == 0 or keep(c.label, prefixes)]
    yard = [(f"[{b}]", op.backends[b].factory, True) for b in YARDSTICKS
            if b != backend and b in op.backends and keep(b, prefixes)]
    default_us = None
    wrong = 0
    best: dict[bool, tuple[str, float]] = {}
    for i, (label, make, is_yard) in enumerate(mine + yard):
        try:
            fn = make(x)
            gate = check(op, fn, x)
            if not gate.passed:
                print(f"  {label:<58} WRONG: {gate.reason} (rel err {gate.max_rel_error:.2e})")
                wrong += 1
                continue
            us, noise = _time_us(fn, dev, budget_s)
        except SkipCase as exc:
            print(f"  {label:<58} skipped: {str(exc).splitlines()[0][:100]}")
            continue
        except Exception as exc:  # compile error, launch failure: report, go on
            print(f"  {label:<58} FAILED: {type(exc).__name__}: {str(exc).splitlines()[0][:100]}")
            continue
        if i == 0:
            default_us = us
        if label != f"[{NOT_A_PEER}]" and (is_yard not in best or us < best[is_yard][1]):
            best[is_yard] = (label, us)
        print(_row(label, us, nbytes, ceiling, default_us, f"noise {noise:.1%}" if noise > 0.05 else ""))
    if False not in best:
        return None, wrong
    peer = best.get(True, ("-", float("nan")))
    return (best[False][0], best[False][1], peer[0], peer[1]), wrong


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The options of ``fusebench tune``."""
    ap.add_argument("backend", choices=BACKENDS, metavar="<backend>",
                    help=f"one of {', '.join(BACKENDS)}: the ops with a tuning space for it are timed "
                         "(kernels/<op>/tuning.py; no space for it: one line, exit 2)")
    ap.add_argument("--ops", help="comma-separated ops (default: each with a tuning space for the backend)")
    ap.add_argument("--dtypes", help=f"comma-separated, of: {', '.join(PLAIN_DTYPES)} "
                                     "(default: the spaces' own)")
    ap.add_argument("--shapes", help="comma-separated shapes (e.g. 65536x128,16777216); default all")
    ap.add_argument("--only", default="", help="run only cases whose label (op shape dtype) contains this")
    ap.add_argument("--variants", help="comma-separated label prefixes to time (e.g. auto,tma,quack)")
    ap.add_argument("--budget", type=number(0, above=True),
                    help="seconds of timed repeats per config (default: the space's, 0.03 to 0.05)")
    add_config(ap)


def run(args: argparse.Namespace) -> int:
    """Run ``fusebench tune`` with the parsed options; returns the exit status."""
    import torch

    from fusebench.measure.metrics import effective_bandwidth_gbps, measure_copy_ceiling, pct_of_ceiling
    from fusebench.registry import DTYPES
    from fusebench.tuning import spaces

    if args.budget is not None and not args.budget > 0:
        raise UsageError(f"--budget must be > 0, got {args.budget}")
    ops = configured(args.config)
    tuned = spaces(args.backend, ops)
    if not tuned:
        raise UsageError(f"no op has a tuning space for {args.backend} (kernels/<op>/tuning.py)")
    names = pick("op", args.ops, tuned)
    dtypes = [DTYPES[d] for d in pick("dtype", args.dtypes, DTYPES)] if args.dtypes else None
    shapes = items("shape", args.shapes) if args.shapes else None
    prefixes = items("variant", args.variants) if args.variants else None
    cases = [(name, shape, dtype) for name in names for shape, dtype in tuned[name].cases(ops[name])
             if (dtypes is None or dtype in dtypes) and (shapes is None or shape_label(shape) in shapes)
             and args.only in f"{name} {shape_label(shape)} {str(dtype).removeprefix('torch.')}"]
    if not cases:
        raise UsageError("the options match no case (see --ops, --dtypes, --shapes, --only)")
    if not torch.cuda.is_available():
        raise UsageError("needs a CUDA GPU")
    dev = torch.device("cuda", torch.cuda.current_device())
    props = torch.cuda.get_device_properties(dev)
    ceiling = measure_copy_ceiling(dev).gbps
    print(f"{props.name}, {props.multi_processor_count} SMs, torch {torch.__version__}; copy ceiling "
          f"{ceiling:.0f} GB/s (1 GiB copy_); {args.backend}: hot device time, median; vs def = default µs / "
          "config µs; [name] = yardstick backend")
    start = time.perf_counter()
    summary, wrong = [], 0
    for name, shape, dtype in cases:
        space = tuned[name]
        budget = args.budget if args.budget is not None else space.budget_s
        best, bad = run_case(ops[name], args.backend, space, shape, dtype, dev, budget, ceiling, prefixes)
        torch.cuda.empty_cache()  # the case's tensors are gone: let the next one have HBM
        wrong += bad
        summary.append((f"{name} {shape_label(shape)} {str(dtype).removeprefix('torch.')}",
                        ops[name].bytes_moved(shape, dtype), best))
    print(f"\nbest per case (% of the copy ceiling {ceiling:.0f} GB/s)")
    for label, nbytes, best in summary:
        if best is None:
            print(f"  {label:<28} no candidate ran")
            continue
        cand, us, peer, peer_us = best
        pct = pct_of_ceiling(effective_bandwidth_gbps(nbytes, us * 1e-3), ceiling)
        peer_pct = pct_of_ceiling(effective_bandwidth_gbps(nbytes, peer_us * 1e-3), ceiling)
        print(f"  {label:<28} {pct:5.1f}%  {us:9.1f} µs  {cand:<58} best peer {peer} {peer_pct:.1f}%")
    print(f"\n{len(summary)} cases in {time.perf_counter() - start:.0f} s"
          + (f"; {wrong} candidate(s) failed the correctness gate" if wrong else ""))
    return 1 if wrong else 0
