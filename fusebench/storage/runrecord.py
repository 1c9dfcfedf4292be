"""The committed record of each run: every round's figures, per machine and commit.

asv stores one number per metric and case. Beside each asv result, ``make bench`` keeps the run's
full record, the :class:`fusebench.record.Sweep` as JSON: every round's figures, the NVML readings
around each (clocks, clock-event reasons, other processes), the copy ceiling of each round,
launches, the kernels that ran, max error, compile time, phase times. The regression gate reads
the rounds from it (``fusebench.gate.compare``); the summary and the site's Runs page show it.

Layout: ``records/<machine>/<sha8>.json.xz`` beside ``results/`` (a folder of its own: asv reads
every ``*.json`` under ``results/`` as a result file). A scratch results folder has its own
records folder (``.asv/quick-results`` -> ``.asv/quick-records``). The format is
``fusebench.record.FORMAT_VERSION``, stored as compact JSON in an xz stream
(``fusebench.record.SUFFIX``); ``records/README.md`` documents the fields and the choice.

A record of plain JSON, ``<sha8>.json`` (written by hosts running an older commit), is still read
everywhere, checked the same; every writer writes the compressed name and removes the plain one
of the same commit in the same step. Where both are there, the compressed one is the record.

A run of some ops keeps the other ops' records of the same commit (as asv keeps their results);
a failed run writes nothing: ``make bench`` stores the record and the asv result files in one
transaction (:func:`stage`, ``fusebench.storage.transaction``), so a record always sits beside
the results of its own run.
"""

from __future__ import annotations

import csv
import io
import json
import os
from dataclasses import asdict, fields
from pathlib import Path

from fusebench.errors import UsageError
from fusebench.record import SUFFIX, Record, Sweep, encode
from fusebench.storage import transaction

#: The CSV's columns: every field of a record but the per-round list (in the JSON), lists joined by
#: ``"; "``, the NVML clocks left out.
CSV_COLUMNS = tuple(f.name for f in fields(Record) if f.name not in ("rounds", "clocks"))


def records_dir(results_dir: Path) -> Path:
    """The records folder of a results folder: ``results`` -> ``records``,
    ``.asv/quick-results`` -> ``.asv/quick-records`` (``<name>-records`` otherwise)."""
    name = results_dir.name
    new = name.replace("results", "records") if "results" in name else f"{name}-records"
    return results_dir.with_name(new)


def record_path(folder: Path, machine: str, commit: str) -> Path:
    """``<folder>/<machine>/<sha8>.json.xz``: where a record is written."""
    return folder / machine / f"{commit[:8]}{SUFFIX}"


def plain_path(folder: Path, machine: str, commit: str) -> Path:
    """``<folder>/<machine>/<sha8>.json``: a record of plain JSON, read, never written."""
    return folder / machine / f"{commit[:8]}.json"


def find(folder: Path, machine: str, commit: str) -> Path | None:
    """The stored record of ``commit`` on ``machine``: the compressed file, else the plain one,
    else None. A symlink is returned too, for the reader to refuse."""
    for path in (record_path(folder, machine, commit), plain_path(folder, machine, commit)):
        if os.path.lexists(path):
            return path
    return None


def sha8(path: Path) -> str:
    """The commit prefix a record's file is named after (``<sha8>.json.xz`` -> ``<sha8>``)."""
    return path.name.split(".", 1)[0]


def record_files(folder: Path) -> list[Path]:
    """The records of one machine's folder, one per commit (the compressed file where both
    forms are there), sorted by name."""
    by_commit: dict[str, Path] = {}
    for path in sorted(folder.glob("*.json")) + sorted(folder.glob(f"*{SUFFIX}")):
        by_commit[sha8(path)] = path  # the compressed one, listed last, wins
    return sorted(by_commit.values())


def load(folder: Path, machine: str, commit: str) -> Sweep | None:
    """The record of ``commit`` on ``machine``, or None when none was stored (results older than
    records, or measured elsewhere).

    Raises:
        UsageError: the file exists but cannot be read (named in the message).
    """
    path = find(folder, machine, commit)
    if path is None:
        return None
    sweep = read(path)
    if sweep.environment.get("git_commit") not in (None, commit):
        raise UsageError(f"run record {path} is of commit {sweep.environment.get('git_commit')}, "
                         f"not {commit}")
    return sweep


def read(path: Path, named: bool = True) -> Sweep:
    """The run record at ``path``, checked first as collect checks a record from another host
    (``untrusted``: not a symlink nor in a symlinked folder, size, schema with each field's type,
    figures; stored records come by ``git pull`` too), decompressed within its cap
    (``fusebench.record.decode``). Every reader of a record goes through here; ``named``: its
    file name must be ``<sha8>.json.xz`` (or ``<sha8>.json``) of its commit (False for a record
    exported elsewhere, ``bench --json``).

    Raises:
        UsageError: the file is refused or unreadable (one line naming it and why).
    """
    from fusebench.storage import untrusted

    try:
        if path.parent.is_symlink():  # a machine folder linked elsewhere: as a symlinked file, refused
            raise untrusted.Refused(path, f"in {path.parent}/, a symlink; stored folders must be real")
        _, data = untrusted.read_record(path)
        untrusted.check_record(path, data, None, named=named)
        untrusted.check_record_figures(path, data)
        data["records"] = [Record(**r) for r in data["records"]]
        data.setdefault("methods", {})  # stored before methods were: version 1 of every metric
        return Sweep(**data)
    except untrusted.Refused as exc:
        raise UsageError(f"cannot read run record {exc.path}: {exc.why}") from None
    except (TypeError, ValueError) as exc:
        raise UsageError(f"cannot read run record {path}: {exc}") from None


def _merged(sweep: Sweep, folder: Path, machine: str, commit: str) -> Sweep:
    """``sweep`` with the records of cases it did not measure kept from the record already there
    (a run of some ops)."""
    old = load(folder, machine, commit)
    if old is not None:
        mine = {r.key for r in sweep.records}
        kept = [r for r in old.records if r.key not in mine]
        if kept:
            sweep.records = kept + sweep.records
            sweep.environment = dict(sweep.environment, merged_from_earlier_run=sorted(
                {r.op for r in kept}))
    return sweep


def save(sweep: Sweep, folder: Path, machine: str, commit: str) -> Path:
    """Store ``sweep`` as the record of ``commit`` on ``machine``, keeping the records of cases it
    did not measure from the record already there (a run of some ops). Written atomically, then
    the plain ``<sha8>.json`` of the commit removed (readers prefer the compressed file meanwhile).

    Returns the file's path.
    """
    path = record_path(folder, machine, commit)
    transaction.write_atomic(path, to_stored(_merged(sweep, folder, machine, commit)))
    plain_path(folder, machine, commit).unlink(missing_ok=True)
    return path


def stage(sweep: Sweep, folder: Path, machine: str, commit: str, txn: transaction.Transaction) -> Path:
    """:func:`save` through ``txn``: the record is stored (and the plain one of the commit
    removed) when ``txn`` commits, together with the asv result files of the same run. Returns
    the record's path."""
    path = record_path(folder, machine, commit)
    txn.add_bytes(path, to_stored(_merged(sweep, folder, machine, commit)))
    if os.path.lexists(plain := plain_path(folder, machine, commit)):
        txn.delete(plain)
    return path


def to_stored(sweep: Sweep) -> bytes:
    """``sweep`` as the bytes of a stored record, ``records/<machine>/<sha8>.json.xz``
    (``fusebench.record.encode``)."""
    return encode(asdict(sweep))


def to_json(sweep: Sweep) -> str:
    """``sweep`` as indented JSON, a record exported elsewhere (``bench --json``); the same
    fields as a stored record's."""
    return json.dumps(asdict(sweep), indent=1)


def to_csv(sweep: Sweep) -> str:
    """One row per case of ``sweep``, the columns of :data:`CSV_COLUMNS` (times in ms, bandwidth in
    GB/s, bytes, TFLOP/s, as in :class:`fusebench.record.Record`; empty where not measured)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for rec in sweep.records:
        row = []
        for name in CSV_COLUMNS:
            value = getattr(rec, name)
            if isinstance(value, list):
                value = "; ".join(map(str, value))
            row.append("" if value is None else value)
        writer.writerow(row)
    return out.getvalue()


def write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (a temporary file beside it, then a rename).

    Raises:
        UsageError: the file cannot be written (its folder missing or not writable).
    """
    try:
        transaction.write_atomic(path, text)
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None


def all_records(folder: Path) -> list[tuple[str, Path]]:
    """``[(machine, path)]`` of every stored record (:func:`record_files` of each machine's
    folder), sorted."""
    machines = {p.parent for pattern in ("*/*.json", f"*/*{SUFFIX}") for p in folder.glob(pattern)}
    return sorted((m.name, p) for m in machines for p in record_files(m))
