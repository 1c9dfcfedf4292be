"""The two classic GPU timing mistakes, measured side by side on one matmul.

    fusebench pitfalls [--n N] [--dtype float32|tf32|bfloat16] [--launches 10] [--rounds 5]
                       [--reports DIR] [--no-save]

Prints the report (markdown) and stores it with its environment in
``reports/<machine>/pitfalls-<commit>.json`` and ``.md``. On the CPU the first-call pitfall is
measured and the synchronization pitfall explained (it does not exist there). Exit status: 0, or
2 on bad input. See ``fusebench/lecture/pitfalls.py`` for the method.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from fusebench.cli import add_config, positive_int
from fusebench.errors import SkipCase, UsageError
from fusebench.lecture import reports
from fusebench.ops import configured, get_op


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The options of ``fusebench pitfalls``."""
    ap.add_argument("--n", type=positive_int, help="matrix size (default 4096 on a GPU, 1024 on the CPU)")
    ap.add_argument("--dtype", default="float32",
                    help="one of matmul's dtypes in the case file (float32, tf32, bfloat16)")
    ap.add_argument("--launches", type=positive_int, default=10, help="back-to-back launches timed")
    ap.add_argument("--rounds", type=positive_int, default=5, help="rounds per clock (median)")
    ap.add_argument("--reports", type=Path, default=reports.REPORTS_DIR, help="where reports are stored")
    ap.add_argument("--no-save", action="store_true", help="print only")
    add_config(ap)


def run(args: argparse.Namespace) -> int:
    """Run ``fusebench pitfalls`` with the parsed options; returns the exit status."""
    from fusebench.lecture import pitfalls  # torch: here, not at import (--help needs none)
    from fusebench.measure import environment

    matmul = get_op("matmul", configured(args.config))
    dtypes = matmul.dtypes
    if args.dtype not in dtypes:
        raise UsageError(f"unknown dtype {args.dtype!r}; valid dtypes: {', '.join(dtypes)}")

    dev = environment.device()
    env = environment.capture(dev)
    try:  # first thing in the process: the first call must really be the first
        res = pitfalls.measure(matmul, dev, args.n, args.dtype, args.launches, args.rounds)
    except SkipCase as exc:
        raise UsageError(f"dtype {args.dtype} cannot run here: {exc}") from exc
    env["clocks_after"] = environment.clocks(dev)
    text = pitfalls.render(res, reports.where(env))
    print(text)
    if not args.no_save:
        paths = reports.save("pitfalls", pitfalls.as_data(res), text, env, root=args.reports)
        print(f"pitfalls: stored {' and '.join(str(p) for p in paths)}", file=sys.stderr)
    return 0

