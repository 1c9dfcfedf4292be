"""Every backend's share of the copy ceiling side by side, per shape and dtype, from a run record.

    fusebench table [RECORD] [--op softmax]

RECORD: a run record, ``records/<machine>/<sha8>.json`` (default: the newest one under ``records/``).
Prints, per memory-bound op of the record (or ``--op``), the Markdown table that ``make bench`` prints
at the end of its summary and the site's Runs tab shows (``fusebench.history.summary.ceiling_table``): the
README's table of the reference backends is pasted from it. Exit status 0; 2 on bad input (no record,
an unreadable one, an op the record has no timed case of).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from fusebench.errors import UsageError
from fusebench.history import runrecord, summary
from fusebench.measure.sweep import Sweep
from fusebench.paths import PROJECT_ROOT


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The options of ``fusebench table``."""
    ap.add_argument("record", nargs="?", type=Path, help="a run record (default: the newest in records/)")
    ap.add_argument("--op", help="one op (default: every memory-bound op of the record)")


def run(args: argparse.Namespace) -> int:
    """Print the tables; returns 0."""
    path = args.record
    if path is None:
        stored = runrecord.all_records(PROJECT_ROOT / "records")
        if not stored:
            raise UsageError("no run record under records/: make bench stores one per run")
        path = max((p for _, p in stored), key=lambda p: p.stat().st_mtime)
    try:
        sweep = Sweep.load(path)
    except (OSError, ValueError, TypeError, KeyError) as exc:
        raise UsageError(f"cannot read run record {path}: {exc}") from None
    ops = [args.op] if args.op else list(dict.fromkeys(r.op for r in sweep.records))
    tables = [t for op in ops if (t := summary.ceiling_table(sweep, op)) is not None]
    if not tables:
        raise UsageError(f"{path}: no timed case of a memory-bound op {', '.join(ops)}")
    print("\n\n".join("\n".join([t.title, "", *t.markdown()]) for t in tables))
    return 0

