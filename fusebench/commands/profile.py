"""A torch.profiler table per backend of one op (the first look before nsys).

    fusebench profile --op gelu [--backends eager,torch] [--shape 4194304] [--dtype float32]
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

from fusebench import config
from fusebench.axes import BACKENDS, parse_shape
from fusebench.cli import add_config, pick, positive_int
from fusebench.errors import UsageError
from fusebench.lecture import reports
from fusebench.names import did_you_mean
from fusebench.ops import configured, get_op


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The options of ``fusebench profile``."""
    ap.add_argument("--op", default="gelu", help=f"one of: {', '.join(config.load().ops)}")
    ap.add_argument("--backends", help=f"comma-separated, of: {', '.join(BACKENDS)} (default: the op's)")
    ap.add_argument("--shape", help="e.g. 16384x16384 (default: the op's largest quick-grid shape on a "
                                    "GPU, cpu-grid shape on the CPU)")
    ap.add_argument("--dtype", help="default: the op's first dtype")
    ap.add_argument("--calls", type=positive_int, default=5, help="profiled calls per backend")
    ap.add_argument("--reports", type=Path, default=reports.REPORTS_DIR, help="where reports are stored")
    ap.add_argument("--no-save", action="store_true", help="print only")
    add_config(ap)


def run(args: argparse.Namespace) -> int:
    """Run ``fusebench profile`` with the parsed options; returns the exit status."""
    from fusebench.lecture import torch_profile  # torch: here, not at import (--help needs none)
    from fusebench.measure import environment

    op = get_op(args.op, configured(args.config))
    names = [b for b in pick("backend", args.backends, BACKENDS) if args.backends or b in op.backends]
    dtype = args.dtype or op.dtypes[0]
    if dtype not in op.dtypes:
        raise UsageError(f"unknown dtype {dtype!r}{did_you_mean(dtype, op.dtypes)} for {op.name}; "
                         f"valid dtypes: {', '.join(op.dtypes)}")
    dev = environment.device()
    shape = parse_shape(args.shape) if args.shape else torch_profile.default_shape(op, dev)
    if op.flops is not None:
        try:
            op.flops(shape)
        except ValueError as exc:
            raise UsageError(str(exc)) from exc

    env = environment.capture(dev)
    profiles = torch_profile.profile_op(op, dev, shape, dtype, names, args.calls)
    text = torch_profile.render(op, shape, dtype, profiles, reports.where(env), dev.type == "cuda")
    print(text)
    if not args.no_save:
        paths = reports.save(f"profile-{op.name}", torch_profile.as_data(op, shape, dtype, profiles), text,
                             env,
                             root=args.reports)
        print(f"profile: stored {' and '.join(str(p) for p in paths)}", file=sys.stderr)
    failed = [p.backend for p in profiles if p.status == "failed"]
    if failed:
        print(f"profile: {', '.join(failed)} failed (reason in the table)", file=sys.stderr)
    return 1 if failed else 0

