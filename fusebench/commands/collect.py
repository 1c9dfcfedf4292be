"""Merge the results folders of many hosts into ``results/`` (and ``records/``).

    fusebench collect FROM [FROM ...] [--into DIR] [--dry-run]

Each FROM is a results folder (``<machine>/machine.json``, result files, ``benchmarks.json``;
its run records in the sibling records folder) or a folder holding ``results/`` and
``records/`` (one pod's or one array task's output, ``deploy/``). Files the destination lacks
are copied, identical ones skipped, none overwritten; different asv machines sit side by side.
The rules (conflicts, ``machine.json``, ``benchmarks.json``) are in ``fusebench/storage/collect.py``.

Every input file is checked before anything is written (``fusebench/storage/untrusted.py``,
``docs/untrusted-input.md``) and everything is compared: a conflict (the same commit and machine
with different figures) or a refused input file (a symlink, too large, not the schema of its
kind) refuses the whole collect, one line per file, and nothing is written. The copies are
stored as one transaction under the results folder's lock. Exit status: 0 merged (or nothing
new), 1 refused for a conflict, 2 bad input (no such folder, not a results folder, a refused
file) or the results folder in use by another run.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from fusebench.paths import PROJECT_ROOT
from fusebench.storage import collect, runrecord


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The options of ``fusebench collect``."""
    ap.add_argument("sources", nargs="+", type=Path, metavar="FROM",
                    help="results folders of other hosts (or folders holding results/)")
    ap.add_argument("--into", type=Path, default=PROJECT_ROOT / "results",
                    help="destination results folder (default results/; records beside it)")
    ap.add_argument("--dry-run", action="store_true", help="say what would be copied, write nothing")


def run(args: argparse.Namespace) -> int:
    """Run ``fusebench collect`` with the parsed options; returns the exit status."""

    with collect.locked(args.into):
        return _run_locked(args)


def _run_locked(args: argparse.Namespace) -> int:
    plan = collect.plan(args.sources, args.into)
    for line in plan.warnings:
        print(f"collect: warning: {line}", file=sys.stderr)
    for line in plan.unreadable:
        print(f"collect: error: {line}", file=sys.stderr)
    for line in plan.conflicts:
        print(f"collect: conflict: {line}", file=sys.stderr)
    if plan.refused:
        print(f"collect: refused ({len(plan.conflicts)} conflict(s), {len(plan.unreadable)} unreadable "
              f"file(s)); nothing written to {args.into}/", file=sys.stderr)
        return 1 if not plan.unreadable else 2
    records = runrecord.records_dir(args.into)
    n_rec = sum(1 for _, t in plan.copies if t.is_relative_to(records))
    n_machine = sum(1 for _, t in plan.copies if t.name == "machine.json")
    what = (f"{len(plan.copies) - n_rec - n_machine} result file(s), {n_rec} run record(s), "
            f"{n_machine} machine.json"
            + (f", {len(plan.added_benchmarks)} benchmark definition(s)" if plan.added_benchmarks else "")
            + (f", {len(plan.merges)} file(s) merged from shares of a run" if plan.merges else ""))
    if args.dry_run:
        for source, target in plan.copies:
            print(f"would copy {source} -> {target}")
        for target, parts in plan.merged_from.items():
            print(f"would merge {' + '.join(map(str, parts))} -> {target}")
        print(f"collect: would copy {what}; {len(plan.same)} already there", file=sys.stderr)
        return 0
    collect.apply(plan, args.into)
    machines = sorted({t.parent.name for _, t in plan.copies} | {t.parent.name for t in plan.merges})
    print(f"collect: copied {what} into {args.into}/ and {records}/"
          + (f" (machines: {', '.join(machines)})" if machines else "")
          + f"; {len(plan.same)} file(s) already there, identical", file=sys.stderr)
    return 0

