"""Print the cases a run would measure: op, backend, shape, dtype, and why one is skipped (fusebench list).

    fusebench list [--ops ...] [--backends ...] [--dtypes ...] [--shapes ...] [--quick] [--config FILE]

The same selection as ``fusebench bench`` on this machine's grid (``default`` on a GPU, ``cpu``
on the CPU; ``--quick``: ``quick``, ``cpu-quick``), in run order, one case per line, with the
reason of a case the run will skip (no GPU, a library not installed); a backend an op does not
register is not listed. The count goes to stderr, the same line ``fusebench bench`` prints: every
case the run records, how many it will time, the skipped ones by reason. Exit status: 0, or 2 on
bad input.
"""

from __future__ import annotations

import argparse
import sys

from fusebench.axes import no_backend_reason, shape_label
from fusebench.commands.bench import add_selection, plan, plan_line, selected


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The options of ``fusebench list``: the selection of ``fusebench bench``."""
    add_selection(ap)


def run(args: argparse.Namespace) -> int:
    """Print the selected cases; returns 0."""
    ops, backends, dtypes, grid, _ = selected(args)
    planned = plan(ops, grid, backends, dtypes)
    rows = [(op.name, b, shape_label(s), d, f"skipped: {why}" if why else "")
            for op, b, s, d, why in planned if why != no_backend_reason(op.name, b)]
    head = ("op", "backend", "shape", "dtype", "")
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(head)]
    for row in [head, *rows]:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip())
    unlisted = len(planned) - len(rows)
    print(f"list: {plan_line(planned, grid)}", file=sys.stderr)  # the line bench prints too
    if unlisted:
        print(f"list: {len(rows)} listed above (not the {unlisted} of an op without such a backend)",
              file=sys.stderr)
    return 0
