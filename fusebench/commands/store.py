"""Write the asv results of run records again, from the records (no GPU, no asv run).

    fusebench store RECORD [RECORD ...] [--results DIR] [--config FILE]
    fusebench store --suite [--results DIR] [--config FILE]

Each RECORD is a run record, ``records/<machine>/<sha8>.json.xz`` (or a plain ``<sha8>.json``):
asv's result file of its commit and machine, the machine's ``machine.json`` and
``benchmarks.json`` are written from it as ``make bench`` writes them
(``fusebench/asv/store.py``), into the results folder beside its records folder
(``records`` -> ``results``, ``.asv/quick-records`` -> ``.asv/quick-results``; ``--results``
names another). A metric added to ``fusebench/metrictable.py`` then appears in
the stored results of every run whose record has its field; the values of the others do not
change. The asv suite is the case file's (``--config``, default ``fusebench.yaml``); the
benchmarks of ops a record does not have are kept as they are stored.

``--suite`` writes the results folder's ``benchmarks.json`` alone (default folder ``results``),
from the case file: after an op or a backend was added (docs/extending.md), before any run has
measured it, so that the committed file is the one every later store writes.

Every record is checked as a file from another host before anything is written
(``fusebench/storage/untrusted.py``: a regular file, not a symlink, under its size cap, the
record's schema, its machine fields plain text, every figure a finite number or null). The
files are stored in one transaction under the results folder's lock: a refused record, or a
killed store, leaves the stored files as they were. What is wrong with a file is said first (no
such file, not a run record), then where it is (not in a machine's folder, not in a records
folder). Exit status: 0 stored, 2 bad input (no such file, a refused record, a results folder in
use).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from fusebench.cli import add_config
from fusebench.errors import UsageError
from fusebench.paths import PROJECT_ROOT


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The options of ``fusebench store``."""
    ap.add_argument("records", nargs="*", type=Path, metavar="RECORD",
                    help="run records, records/<machine>/<sha8>.json.xz")
    ap.add_argument("--suite", action="store_true", help="write only the results folder's "
                    "benchmarks.json, from the case file (after adding an op or a backend)")
    ap.add_argument("--results", type=Path, metavar="DIR", help="the results folder to write into "
                    "(default: the one beside the records folder, records -> results; with "
                    "--suite: results)")
    add_config(ap)


def results_for(record: Path) -> Path:
    """The results folder of a record ``<records folder>/<machine>/<sha8>.json.xz``: the folder whose
    records folder (``runrecord.records_dir``) holds it.

    Raises:
        UsageError: no such folder name (give ``--results``).
    """
    from fusebench.storage import runrecord

    folder = record.absolute().parent.parent
    if "records" in folder.name:
        results = folder.with_name(folder.name.replace("records", "results"))
        if runrecord.records_dir(results) == folder:
            return results
    raise UsageError(f"{record}: not in a records folder (records/<machine>/<sha8>.json.xz); give "
                     "--results DIR")


#: What ``fusebench store`` takes, as its refusals say it.
EXPECTED = "give a run record, records/<machine>/<sha8>.json.xz"


def checked(path: Path):
    """The run record at ``path``, checked as untrusted input (module doc), as a
    :class:`~fusebench.record.Sweep` with its machine (the folder's name).

    Raises:
        UsageError: the file is refused (one line naming it and why).
    """
    from fusebench.record import Record, Sweep
    from fusebench.storage import untrusted

    machine = path.absolute().parent.name
    try:
        # what is wrong with the file itself first (missing, not a run record), then where it is
        raw = untrusted.read_bytes(path, untrusted.MAX_BYTES["record"])
        try:
            data = untrusted.parse(path, untrusted.record_json(path, raw))
        except untrusted.Refused as exc:
            raise untrusted.Refused(path, f"not a run record ({exc.why}); {EXPECTED}") from None
        if not (isinstance(data, dict) and {"format_version", "environment", "records"} <= data.keys()):
            raise untrusted.Refused(path, "not a run record (JSON without a record's format_version, "
                                          f"environment and records); {EXPECTED}")
        untrusted.check_record(path, data, machine)
        if untrusted.MACHINE.fullmatch(machine) is None:
            raise untrusted.Refused(path, f"not in a machine's folder ({machine!r} is not a machine name: "
                                          f"letters, digits, '.', '_', '-'); {EXPECTED}")
        untrusted.check_record_figures(path, data)
    except untrusted.Refused as exc:
        raise UsageError(f"refused: {exc}") from None
    data["records"] = [Record(**r) for r in data["records"]]
    return Sweep(**data), machine


def stored_host(machine_dir: Path, commit: str) -> dict:
    """``os``, ``arch`` and ``ram`` of ``machine_dir``'s stored result of ``commit``, else of its
    ``machine.json`` ({} when neither says): the host a record without them measured on."""
    for path in [*sorted(machine_dir.glob(f"{commit[:8]}-*.json")), machine_dir / "machine.json"]:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        fields = data.get("params", data) if isinstance(data, dict) else {}
        host = {k: fields[k] for k in ("os", "arch", "ram") if isinstance(fields.get(k), str)}
        if host:
            return host
    return {}


def run(args: argparse.Namespace) -> int:
    """Run ``fusebench store`` with the parsed options; returns the exit status."""
    from fusebench.asv import store
    from fusebench.ops import for_reports
    from fusebench.storage import runrecord, transaction, untrusted

    if args.suite:
        if args.records:
            raise UsageError("--suite writes benchmarks.json alone: give it no RECORD")
        return _suite(args.results or PROJECT_ROOT / "results", args.config)
    if not args.records:
        raise UsageError(f"{EXPECTED} (or --suite: benchmarks.json alone)")
    todo: dict[Path, list[Path]] = {}
    for path in args.records:
        if not os.path.lexists(path):  # before where it would be stored (a symlink: refused later)
            raise UsageError(f"{path}: no such file; {EXPECTED}")
        try:
            results = args.results or results_for(path)
        except UsageError:
            checked(path)  # a file that is no run record says so before where it would go
            raise
        todo.setdefault(results, []).append(path)
    for results, paths in todo.items():
        with transaction.locked(results, "store", (runrecord.records_dir(results),)):
            # read under the lock, after an interrupted store is finished: never a record that a
            # killed run's journal is about to replace (issue 42)
            runs = [(path, *checked(path)) for path in paths]
            # the suite's classes: the case file's ops, described from these records and those
            # stored (fusebench.report.described: no torch), else imported
            suite = tuple(for_reports(args.config, results, [r for _, r, _ in runs], complete=False))
            with transaction.Transaction(results) as txn:
                lines = []
                for path, record, machine in runs:
                    commit = record.environment["git_commit"]
                    host = stored_host(results / machine, commit)
                    entry = store.machine_info(machine, record.environment, host)
                    try:  # the fields the site shows as selectors and tooltips: plain text
                        untrusted.check_machine(path, {**entry, "version": 1}, machine)
                    except untrusted.Refused as exc:
                        raise UsageError(f"refused: {exc}") from None
                    staged = store.stage(record, machine, commit, results, txn, suite, host=host)
                    lines += [f"store: warning: {path}: op {op} is not in the case file's suite; its "
                              "cases were not written" for op in staged.unknown_ops]
                    ops = sorted({r.op for r in record.records} - set(staged.unknown_ops))
                    lines.append(f"store: {path} -> {staged.files[0]} ({', '.join(ops) or 'no op'})"
                                 + "".join(f"; {f.name} carried into it and removed" for f in staged.carried))
                txn.commit()
        for line in lines:
            print(line, file=sys.stderr)
    return 0


def _suite(results: Path, config) -> int:
    """``fusebench store --suite``: ``benchmarks.json`` of the case file's suite into ``results``."""
    from fusebench.asv import store
    from fusebench.ops import for_reports
    from fusebench.storage import runrecord, transaction

    if results.is_symlink() or (results.exists() and not results.is_dir()):
        raise UsageError(f"{results}: not a folder (a symbolic link or a file): give another --results")
    with transaction.locked(results, "store", (runrecord.records_dir(results),)):
        # the suite's classes as a store makes them: described from the records, else imported
        suite = tuple(for_reports(config, results, complete=False))
        with transaction.Transaction(results) as txn:
            path = store.stage_suite(results, txn, suite)
            txn.commit()
    print(f"store: {path} ({len(suite)} op(s): {', '.join(op.name for op in suite)})", file=sys.stderr)
    return 0
