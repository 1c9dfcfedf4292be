"""Print the cases a run would measure: op, backend, shape, dtype (fusebench list).

    fusebench list [--ops ...] [--backends ...] [--dtypes ...] [--shapes ...] [--quick] [--config FILE]

The same selection as ``fusebench bench`` on this machine's grid (``default`` on a GPU, ``cpu``
on the CPU; ``--quick``: ``quick``, ``cpu-quick``), in run order, one case per line; a backend an
op does not register is not listed (bench records it as skipped). The count and the grid go to
stderr. Exit status: 0, or 2 on bad input.
"""

from __future__ import annotations

import argparse
import sys

from fusebench.commands.bench import add_selection, selected
from fusebench.measure import sweep
from fusebench.registry import shape_label


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The options of ``fusebench list``: the selection of ``fusebench bench``."""
    add_selection(ap)


def run(args: argparse.Namespace) -> int:
    """Print the selected cases; returns 0."""
    ops, backends, dtypes, grid, _ = selected(args)
    todo = [(op, b, s, d) for op, b, s, d in sweep.cases(ops, grid, backends, dtypes) if b in op.backends]
    rows = [(op.name, b, shape_label(s), d) for op, b, s, d in todo]
    head = ("op", "backend", "shape", "dtype")
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(head)]
    for row in [head, *rows]:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip())
    print(f"list: {len(rows)} case(s) of the {grid} grid", file=sys.stderr)
    return 0
