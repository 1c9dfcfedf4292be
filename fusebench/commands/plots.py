"""Bandwidth and speedup plots of every machine's latest stored results.

    fusebench plots [--machines h200,...] [--results DIR] [--out DIR]

Writes ``<out>/<machine>/<op>-bandwidth.png`` (``<op>-tflops.png`` for a compute-bound op),
``<op>-speedup.png`` and, where the run record has energy per call, ``<op>-energy.png`` (default
``plots/``); what each shows is in ``fusebench/report/plots.py``. A speedup chart not drawn (an op
with no ``eager`` baseline: matmul) is said in one line on stderr, with why. Exit status: 0; 1
when a stored result file could not be read (each named in one line; the plots are drawn from the
rest); 2 on bad input (a machine with no results).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from fusebench.cli import add_config, pick, report_unreadable
from fusebench.errors import UsageError
from fusebench.ops import for_reports
from fusebench.paths import PROJECT_ROOT
from fusebench.report import plots
from fusebench.storage import results


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The options of ``fusebench plots``."""
    ap.add_argument("--machines", help="comma-separated asv machines (default: every one with results)")
    ap.add_argument("--results", type=Path, default=PROJECT_ROOT / "results", help="asv results folder")
    ap.add_argument("--out", type=Path, default=PROJECT_ROOT / "plots", help="output folder")
    add_config(ap)


def run(args: argparse.Namespace) -> int:
    """Run ``fusebench plots`` with the parsed options; returns the exit status."""
    stored = results.machines(args.results)
    if not stored:
        raise UsageError(f"no machine has results in {args.results}/")
    machines = pick("machine", args.machines, stored)
    reader = results.Reader(args.results, "plots")
    ops = for_reports(args.config, args.results)  # from the case file and the records: no torch needed
    written = plots.write_plots(args.results, args.out, ops, machines, reader=reader)
    here = Path.cwd()
    for path in written:  # a path that opens from here: relative when under this folder
        absolute = path.absolute()
        print(absolute.relative_to(here) if absolute.is_relative_to(here) else absolute)
    for line in plots.speedups_not_drawn(reader, machines, ops, written):
        print(f"plots: {line}", file=sys.stderr)
    if not args.machines:
        reader.check()  # also the files no plot needed (older commits, a broken machine.json)
    return report_unreadable(reader, "plots")

