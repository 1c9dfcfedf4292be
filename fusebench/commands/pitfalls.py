"""``make pitfalls``: the two classic GPU timing mistakes, measured side by side on one matmul.

    python scripts/pitfalls.py [--n N] [--dtype float32|tf32|bfloat16] [--launches 10] [--rounds 5]
                               [--reports DIR] [--no-save]

Prints the report (markdown) and stores it with its environment in
``reports/<machine>/pitfalls-<commit>.json`` and ``.md``. On the CPU the first-call pitfall is
measured and the synchronization pitfall explained (it does not exist there). Exit status: 0, or
2 on bad input. See ``fusebench/pitfalls.py`` for the method.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fusebench import environment, pitfalls, reports  # noqa: E402
from fusebench.cli import positive_int, run_main  # noqa: E402
from fusebench.errors import SkipCase, UsageError  # noqa: E402
from kernels import get_op  # noqa: E402


def main() -> int:
    dtypes = get_op("matmul").dtypes
    ap = argparse.ArgumentParser(prog="pitfalls", description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=positive_int, help="matrix size (default 4096 on a GPU, 1024 on the CPU)")
    ap.add_argument("--dtype", default="float32", help=f"one of: {', '.join(dtypes)}")
    ap.add_argument("--launches", type=positive_int, default=10, help="back-to-back launches timed")
    ap.add_argument("--rounds", type=positive_int, default=5, help="rounds per clock (median)")
    ap.add_argument("--reports", type=Path, default=reports.REPORTS_DIR, help="where reports are stored")
    ap.add_argument("--no-save", action="store_true", help="print only")
    args = ap.parse_args()
    if args.dtype not in dtypes:
        raise UsageError(f"unknown dtype {args.dtype!r}; valid dtypes: {', '.join(dtypes)}")

    dev = environment.device()
    env = environment.capture(dev)
    try:  # first thing in the process: the first call must really be the first
        res = pitfalls.measure(dev, args.n, args.dtype, args.launches, args.rounds)
    except SkipCase as exc:
        raise UsageError(f"dtype {args.dtype} cannot run here: {exc}") from exc
    env["clocks_after"] = environment.clocks(dev)
    text = pitfalls.render(res, reports.where(env))
    print(text)
    if not args.no_save:
        paths = reports.save("pitfalls", pitfalls.as_data(res), text, env, root=args.reports)
        print(f"pitfalls: stored {' and '.join(str(p) for p in paths)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    run_main(main, "pitfalls")
