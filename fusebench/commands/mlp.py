"""MLP training-step time over steps, layers and batch size (linear growth).

    fusebench mlp [--dtype float32|tf32|bfloat16] [--reports DIR] [--no-save]

Prints the report (markdown) and stores it with its environment in
``reports/<machine>/mlp-<commit>.json`` and ``.md``. The sizes are fixed per device (a few
seconds on a GPU or the CPU): see ``fusebench/lecture/mlp.py``. Exit status: 0, or 2 on bad input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from fusebench.errors import SkipCase, UsageError
from fusebench.lecture import reports

DTYPES = ("float32", "tf32", "bfloat16")


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The options of ``fusebench mlp``."""
    ap.add_argument("--dtype", default="float32", help=f"one of: {', '.join(DTYPES)}")
    ap.add_argument("--reports", type=Path, default=reports.REPORTS_DIR, help="where reports are stored")
    ap.add_argument("--no-save", action="store_true", help="print only")


def run(args: argparse.Namespace) -> int:
    """Run ``fusebench mlp`` with the parsed options; returns the exit status."""
    from fusebench.lecture import mlp  # torch: here, not at import (--help needs none)
    from fusebench.measure import environment

    if args.dtype not in DTYPES:
        raise UsageError(f"unknown dtype {args.dtype!r}; valid dtypes: {', '.join(DTYPES)}")

    dev = environment.device()
    env = environment.capture(dev)
    try:
        base, results = mlp.run_all(dev, args.dtype)
    except SkipCase as exc:
        raise UsageError(f"dtype {args.dtype} cannot run here: {exc}") from exc
    env["clocks_after"] = environment.clocks(dev)
    text = mlp.render(base, results, args.dtype, reports.where(env))
    print(text)
    if not args.no_save:
        name = "mlp" if args.dtype == "float32" else f"mlp-{args.dtype}"
        paths = reports.save(name, mlp.as_data(base, results, args.dtype), text, env, root=args.reports)
        print(f"mlp: stored {' and '.join(str(p) for p in paths)}", file=sys.stderr)
    return 0

