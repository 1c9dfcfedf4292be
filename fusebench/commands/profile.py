"""``make profile OP=gelu``: a torch.profiler table per backend of one op (the first look before nsys).

    python scripts/profile_op.py --op gelu [--backends eager,torch] [--shape 4194304] [--dtype float32]
                              [--calls 5] [--reports DIR] [--no-save]

Prints, per backend, which operators and kernels ran, how many times and how long (sorted by
GPU time on a GPU, CPU time on the CPU), and stores the report with its environment in
``reports/<machine>/profile-<op>-<commit>.json`` and ``.md``. Exit status: 0; 1 when a backend
failed; 2 on bad input (unknown op, backend, dtype or shape: one line naming the valid ones).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fusebench import environment, profiling, reports  # noqa: E402
from fusebench.cli import pick, positive_int, run_main  # noqa: E402
from fusebench.errors import UsageError  # noqa: E402
from fusebench.registry import BACKENDS, parse_shape  # noqa: E402
from kernels import OPS, get_op  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(prog="profile", description=__doc__.splitlines()[0])
    ap.add_argument("--op", default="gelu", help=f"one of: {', '.join(OPS)}")
    ap.add_argument("--backends", help=f"comma-separated, of: {', '.join(BACKENDS)} (default: the op's)")
    ap.add_argument("--shape", help="e.g. 16384x16384 (default: the op's largest quick-grid shape on a "
                                    "GPU, cpu-grid shape on the CPU)")
    ap.add_argument("--dtype", help="default: the op's first dtype")
    ap.add_argument("--calls", type=positive_int, default=5, help="profiled calls per backend")
    ap.add_argument("--reports", type=Path, default=reports.REPORTS_DIR, help="where reports are stored")
    ap.add_argument("--no-save", action="store_true", help="print only")
    args = ap.parse_args()

    op = get_op(args.op)
    names = [b for b in pick("backend", args.backends, BACKENDS) if args.backends or b in op.backends]
    dtype = args.dtype or op.dtypes[0]
    if dtype not in op.dtypes:
        raise UsageError(f"unknown dtype {dtype!r} for {op.name}; valid dtypes: {', '.join(op.dtypes)}")
    dev = environment.device()
    shape = parse_shape(args.shape) if args.shape else profiling.default_shape(op, dev)
    if op.flops is not None:
        try:
            op.flops(shape)
        except ValueError as exc:
            raise UsageError(str(exc)) from exc

    env = environment.capture(dev)
    profiles = profiling.profile_op(op, dev, shape, dtype, names, args.calls)
    text = profiling.render(op, shape, dtype, profiles, reports.where(env), dev.type == "cuda")
    print(text)
    if not args.no_save:
        paths = reports.save(f"profile-{op.name}", profiling.as_data(op, shape, dtype, profiles), text, env,
                             root=args.reports)
        print(f"profile: stored {' and '.join(str(p) for p in paths)}", file=sys.stderr)
    failed = [p.backend for p in profiles if p.status == "failed"]
    if failed:
        print(f"profile: {', '.join(failed)} failed (reason in the table)", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    run_main(main, "profile")
