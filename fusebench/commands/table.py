"""Every backend's share of the copy ceiling side by side, per shape and dtype, from a run record.

    fusebench table [RECORD] [--op softmax]
    fusebench table --doc MACHINE [RECORD ...]
    fusebench table --readme

RECORD: a run record, ``records/<machine>/<sha8>.json.xz`` (default: the one of the newest commit on
HEAD's first-parent line under ``records/``).
Prints, per memory-bound op of the record (or ``--op``), the Markdown table that ``make bench`` prints
at the end of its summary and the site's Runs tab shows (``fusebench.report.summary.ceiling_table``).
``--doc`` writes ``docs/results/<machine>.md`` from the records (default: each op's newest;
``fusebench.report.resultsdoc``). ``--readme`` writes README.md's opening table: per GPU machine,
each op at its headline shape from its newest committed record, and the machine's GELU speedup
chart (commit a run's records, then run it). Exit status 0; 2 on bad input (no record, an
unreadable one, an op the record has no timed case of, a compute-bound op: matmul is in
``fusebench plots``' tflops chart).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from fusebench import git
from fusebench.errors import UsageError
from fusebench.machine import is_cpu as machine_is_cpu
from fusebench.paths import PROJECT_ROOT, real_folder
from fusebench.report import resultsdoc, summary
from fusebench.storage import runrecord


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The options of ``fusebench table``."""
    ap.add_argument("record", nargs="*", type=Path,
                    help="a run record (default: the newest commit's in records/; --doc: each op's newest)")
    ap.add_argument("--op", help="one op (default: every memory-bound op of the record)")
    ap.add_argument("--doc", metavar="MACHINE",
                    help="write docs/results/MACHINE.md from the machine's records instead of printing")
    ap.add_argument("--readme", action="store_true",
                    help="write README.md's table of every GPU's committed results instead of printing")


def run(args: argparse.Namespace) -> int:
    """Print the tables (or write the ``--doc`` page); returns 0."""
    from fusebench.storage import transaction

    # an interrupted store is finished (or refused) first, as every reader does: never a record
    # read while a journal is about to replace it
    transaction.settle(PROJECT_ROOT / "results", (PROJECT_ROOT / "records",), "table")
    if args.doc is not None:
        return _doc(args)
    if args.readme:
        return _readme(args)
    if len(args.record) > 1:
        raise UsageError("give one run record (several only with --doc MACHINE)")
    path = args.record[0] if args.record else None
    if path is None:
        stored = runrecord.all_records(PROJECT_ROOT / "records")
        if not stored:
            raise UsageError("no run record under records/: make bench stores one per run")
        # the newest commit on HEAD's first-parent line (a clone gives every file one time), then
        # the newest file among a commit's records (two GPUs) or off the line
        log = git.first_parent(PROJECT_ROOT, "HEAD") or []
        rank = {sha[:8]: i for i, sha in reversed(list(enumerate(log)))}
        path = min((p for _, p in stored),
                   key=lambda p: (rank.get(runrecord.sha8(p), len(log)), -p.stat().st_mtime))
    sweep = runrecord.read(path, named=False)  # checked as collect checks it: one line if refused
    ops = [args.op] if args.op else list(dict.fromkeys(r.op for r in sweep.records))
    if args.op:
        _check_op(path, sweep, args.op)
    tables = [t for op in ops if (t := summary.ceiling_table(sweep, op)) is not None]
    if not tables:
        raise UsageError(f"{path}: no timed case of a memory-bound op {', '.join(ops)}")
    print("\n\n".join("\n".join([t.title, "", *t.markdown()]) for t in tables))
    return 0


def _check_op(path: Path, sweep, op: str) -> None:
    """Refuse ``--op`` in one line where the table cannot show it: an op the record has no case of,
    or a compute-bound one (its figures are % of the matrix peak, not of the copy ceiling)."""
    have = list(dict.fromkeys(r.op for r in sweep.records))
    if op not in have:
        raise UsageError(f"{path}: no case of {op!r} (the record has {', '.join(have) or 'none'})")
    if any(r.op == op and r.roofline == "compute" for r in sweep.records):
        memory = [o for o in have if all(r.roofline == "memory" for r in sweep.records if r.op == o)]
        raise UsageError(f"{op} is compute-bound: the table shows memory-bound ops only, as % of the "
                         f"copy ceiling ({', '.join(memory) or 'none'} in this record); {op}'s TFLOP/s and "
                         f"% of the matrix peak are in make bench's summary and "
                         f"plots/<machine>/{op}-tflops.png (make plots)")


def _doc(args: argparse.Namespace) -> int:
    machine = args.doc
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", machine):
        raise UsageError(f"--doc {machine!r}: a machine name is letters, digits, '.', '_' or '-' (e.g. h200)")
    if args.op:
        raise UsageError("--op and --doc exclude each other: the page holds every op")
    paths = args.record or resultsdoc.newest_per_op(machine)
    target = resultsdoc.doc_path(machine)
    if target.is_symlink():
        raise UsageError(f"{target} is a symbolic link: refusing to write through it")
    real_folder(target.parent)
    resultsdoc.write(target, resultsdoc.render(machine, paths))
    shown = target.relative_to(PROJECT_ROOT) if target.is_relative_to(PROJECT_ROOT) else target
    # a CPU machine's page is ignored by git as its results are (.gitignore, README.md)
    kept = "; a CPU's host-clock figures: ignored by git, not kept" if machine_is_cpu(machine) else ""
    print(f"table: wrote {shown}{kept}")
    return 0


def _readme(args: argparse.Namespace) -> int:
    if args.record or args.op:
        raise UsageError("--readme takes no RECORD or --op: the table is every GPU's committed records")
    target = PROJECT_ROOT / "README.md"
    if target.is_symlink():
        raise UsageError(f"{target} is a symbolic link: refusing to write through it")
    text = target.read_text()
    resultsdoc.write(target, resultsdoc.with_readme_block(text, resultsdoc.readme_block()))
    print("table: wrote README.md's table from the committed run records")
    return 0
