"""``make plots``: bandwidth and speedup plots of every machine's latest stored results.

    python scripts/plots.py [--machines h200,...] [--results DIR] [--out DIR]

Writes ``<out>/<machine>/<op>-bandwidth.png`` and ``<op>-speedup.png`` (default ``plots/``);
what each shows is in ``fusebench/plots.py``. Exit status: 0; 1 when a stored result file
could not be read (each named in one line; the plots are drawn from the rest); 2 on bad input (a
machine with no results).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fusebench import plots, results  # noqa: E402
from fusebench.cli import pick, report_unreadable, run_main  # noqa: E402
from fusebench.environment import ROOT  # noqa: E402
from fusebench.errors import UsageError  # noqa: E402
from kernels import OPS  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(prog="plots", description=__doc__.splitlines()[0])
    ap.add_argument("--machines", help="comma-separated asv machines (default: every one with results)")
    ap.add_argument("--results", type=Path, default=ROOT / "results", help="asv results folder")
    ap.add_argument("--out", type=Path, default=ROOT / "plots", help="output folder")
    args = ap.parse_args()
    stored = results.machines(args.results)
    if not stored:
        raise UsageError(f"no machine has results in {args.results}/")
    machines = pick("machine", args.machines, stored)
    reader = results.Reader(args.results)
    written = plots.write_plots(args.results, args.out, list(OPS.values()), machines, reader=reader)
    for path in written:
        print(path.relative_to(args.out.parent) if path.is_relative_to(args.out.parent) else path)
    if not args.machines:
        reader.check()  # also the files no plot needed (older commits, a broken machine.json)
    return report_unreadable(reader, "plots")


if __name__ == "__main__":
    run_main(main, "plots")
