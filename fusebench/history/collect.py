"""Merging the results folders of many hosts into one: ``make collect FROM=<dir>...``.

A fleet (``deploy/``: a Kubernetes Indexed Job, a Slurm array) leaves one results folder per
host, each as ``make bench`` writes it: ``<machine>/machine.json``, the asv result files
``<machine>/<sha8>-<env>.json``, ``benchmarks.json``, and beside it the run records folder
(``records/<machine>/<sha8>.json``, :func:`fusebench.history.runrecord.records_dir`). This module copies
them into one destination (``results/`` and ``records/``) by these rules:

- **never overwrite**: a file the destination does not have is copied; one it has with the same
  bytes (or the same figures: the same JSON) is skipped; a stored file is never replaced.
- **conflict**: the same commit and asv machine with different figures: a result file of the
  same name whose values differ, a result file of another asv environment of the same commit and
  machine that gives another value to a case both measured, or a run record of the same name
  that differs. Also a ``machine.json`` whose ``gpu`` differs (another GPU model under the same
  machine name). Each conflict is one line naming both files.
- **atomic**: everything is read and compared before anything is written. One conflict, or one
  input file that cannot be read, refuses the whole collect: nothing is written, so a collect can
  be re-run once the conflicting folder is left out or fixed.
- ``machine.json`` of the same machine from two hosts differing in other fields (driver, CUDA,
  torch, os, ram, image digest): a warning; the destination's (else the first folder's) is kept.
  Nothing is lost: every result file carries its own run's fields (asv's ``params``), which is
  what the site and the gate read; ``machine.json`` only lists the machine.
- ``benchmarks.json``: the union of the definitions by benchmark name. A name defined differently
  (another suite version, code or parameters: hosts that ran other commits) keeps the
  destination's definition (else the first folder's) with a warning: ``asv publish`` draws a
  stored result only when its benchmark version matches the definition kept.
- different asv machines (``h200``, ``cpu-x86_64``, ``a100-sxm4-80gb``) sit side by side.

Sources: a results folder, or a folder holding ``results/`` (and ``records/``), such as one pod's
or one array task's output folder (:func:`source_folders`).
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from fusebench.errors import UsageError
from fusebench.history import results, runrecord

#: ``machine.json`` fields whose difference is a conflict, not a warning: another GPU model
#: stored under the same machine name would mix two GPUs' figures in one history.
IDENTITY_FIELDS = ("machine", "gpu")


@dataclass(frozen=True)
class Source:
    """One host's output: its results folder and its records folder (which may not exist)."""

    results: Path
    records: Path


@dataclass
class Plan:
    """What a collect would do, computed before anything is written.

    Attributes:
        copies: ``(source file, destination file)`` to copy, destination absent.
        same: destination files already there with the same content (skipped).
        conflicts: one line each (names both files); any refuses the whole collect.
        unreadable: one line each, an input or stored file that could not be read; refuses too.
        warnings: one line each (machine.json fields, benchmark definitions); do not refuse.
        benchmarks: the merged ``benchmarks.json`` to write, or None when it is unchanged.
        added_benchmarks: benchmark names the destination's ``benchmarks.json`` gains.
    """

    copies: list[tuple[Path, Path]] = field(default_factory=list)
    same: list[Path] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    benchmarks: dict | None = None
    added_benchmarks: list[str] = field(default_factory=list)

    @property
    def refused(self) -> bool:
        """True when nothing may be written (a conflict or an unreadable file)."""
        return bool(self.conflicts or self.unreadable)


def source_folders(path: Path) -> Source:
    """The results and records folders of ``path``: itself when it is a results folder (holds
    ``<machine>/machine.json`` or ``benchmarks.json``), else its ``results/`` sub-folder.

    Raises:
        UsageError: ``path`` is not a folder, or holds neither.
    """
    if not path.is_dir():
        raise UsageError(f"{path}: no such folder")
    if any(path.glob("*/machine.json")) or (path / "benchmarks.json").is_file():
        return Source(path, runrecord.records_dir(path))
    if (path / "results").is_dir():
        return Source(path / "results", path / "records")
    raise UsageError(f"{path}: not a results folder (no <machine>/machine.json, no benchmarks.json, "
                     "no results/ in it)")


def _read_json(path: Path) -> object:
    """``path`` parsed; raises OSError or ValueError."""
    return json.loads(path.read_text())


def _figures(run: results.Run) -> dict[tuple, float | None]:
    """``{(benchmark, params): value}`` of the cases a run measured or failed (skipped left out)."""
    return {(name, params): v for name, vals in run.values.items() for params, v in vals.items()
            if v is None or not math.isnan(v)}


def _differing(a: dict, b: dict) -> list[tuple]:
    """Keys present in both whose values differ (None only equals None)."""
    return sorted((k for k in a.keys() & b.keys() if a[k] != b[k]), key=str)


def _case(key: tuple, a: dict, b: dict) -> str:
    name, params = key
    return f"{name} ({', '.join(params)}): {a[key]} vs {b[key]}"


class _Planner:
    """Builds a :class:`Plan`: the destination's files first, then each source in order, each
    file checked against everything already there or planned."""

    def __init__(self, dest: Path):
        self.dest = dest
        self.dest_records = runrecord.records_dir(dest)
        self.plan = Plan()
        self.reader = results.Reader(dest)
        self.readers: dict[Path, results.Reader] = {}
        # destination path -> the file that will be there (itself, or the source planned into it)
        self.planned: dict[Path, Path] = {}
        # (machine, commit) -> [(file, run)] stored or planned
        self.runs: dict[tuple[str, str], list[tuple[Path, results.Run]]] = {}
        self.bench: dict | None = None
        self.bench_origin: dict[str, Path] = {}
        self.bench_changed = False
        self._load_dest()

    # -- reading ---------------------------------------------------------------------------------

    def _run(self, path: Path, reader: results.Reader) -> results.Run | None:
        run = reader.read(path)
        if run is None:
            why = next((str(u) for u in reader.unreadable if u.path == path), f"cannot read {path}")
            self.plan.unreadable.append(why)
        return run

    def _load_dest(self) -> None:
        for folder in (self.dest, self.dest_records):
            for p in sorted(folder.glob("*/*.json")) if folder.is_dir() else []:
                self.planned[p] = p
        for machine in results.machines(self.dest) if self.dest.is_dir() else []:
            for p in results.result_files(self.dest, machine):
                run = self.reader.read(p)
                if run is not None:  # an unreadable stored file matters only when compared
                    self.runs.setdefault((machine, run.commit), []).append((p, run))
        path = self.dest / "benchmarks.json"
        if path.is_file():
            try:
                self.bench = _read_json(path)
            except (OSError, ValueError) as exc:
                self.plan.unreadable.append(f"cannot read {path}: {exc}")
            else:
                self.bench_origin = {k: path for k in self.bench if k != "version"}

    # -- one source ------------------------------------------------------------------------------

    def add(self, src: Source) -> None:
        reader = results.Reader(src.results)
        for bad in reader.check():  # names every unreadable file asv would read
            self.plan.unreadable.append(str(bad))
        for machine in results.machines(src.results):
            self._machine_json(src.results / machine / "machine.json", machine)
            for p in results.result_files(src.results, machine):
                self._result(p, machine, reader)
        if src.records.is_dir():
            for machine, p in runrecord.all_records(src.records):
                self._record(p, machine)
        path = src.results / "benchmarks.json"
        if path.is_file():
            self._benchmarks(path)

    def _copy(self, source: Path, target: Path) -> None:
        self.plan.copies.append((source, target))
        self.planned[target] = source

    def _copy_or_same(self, source: Path, target: Path) -> Path | None:
        """Plan ``source`` -> ``target`` when nothing is there, or note it the same byte for byte:
        then None; else the file already there (or planned), for the caller to compare."""
        there = self.planned.get(target)
        if there is None:
            self._copy(source, target)
            return None
        if there.read_bytes() == source.read_bytes():
            self.plan.same.append(target)
            return None
        return there

    def _result(self, path: Path, machine: str, reader: results.Reader) -> None:
        run = reader.read(path)
        if run is None:
            return  # named by reader.check()
        if run.machine != machine:
            self.plan.conflicts.append(f"{path} is a result of machine {run.machine!r} stored under "
                                       f"{machine}/")
            return
        target = self.dest / machine / path.name
        others = self.runs.setdefault((machine, run.commit), [])
        there = self.planned.get(target)
        if there is not None:
            if there.read_bytes() == path.read_bytes():
                self.plan.same.append(target)
                return
            other = next((r for f, r in others if f == there), None) or self._run(there, self.reader)
            if other is None:
                return
            mine, theirs = _figures(run), _figures(other)
            if mine == theirs:
                self.plan.same.append(target)
                return
            diff = _differing(mine, theirs)
            what = (f"{len(diff)} case(s) differ, e.g. {_case(diff[0], mine, theirs)}" if diff else
                    f"different cases measured ({len(mine)} vs {len(theirs)})")
            self.plan.conflicts.append(f"{path} and {there}: commit {run.commit[:8]} on machine "
                                       f"{machine} with different figures ({what})")
            return
        for other_path, other in others:
            mine, theirs = _figures(run), _figures(other)
            diff = _differing(mine, theirs)
            if diff:
                self.plan.conflicts.append(
                    f"{path} and {other_path}: commit {run.commit[:8]} on machine {machine} with "
                    f"different figures ({len(diff)} case(s) differ, e.g. {_case(diff[0], mine, theirs)})")
                return
        others.append((path, run))
        self._copy(path, target)

    def _record(self, path: Path, machine: str) -> None:
        try:
            data = _read_json(path)
        except (OSError, ValueError) as exc:
            self.plan.unreadable.append(f"cannot read run record {path}: {exc}")
            return
        target = self.dest_records / machine / path.name
        there = self._copy_or_same(path, target)
        if there is None:
            return
        try:
            theirs = _read_json(there)
        except (OSError, ValueError) as exc:
            self.plan.unreadable.append(f"cannot read run record {there} (to compare with {path}): {exc}")
            return
        if theirs == data:
            self.plan.same.append(target)
        else:
            self.plan.conflicts.append(f"{path} and {there}: run records of commit {path.stem} on "
                                       f"machine {machine} differ (two runs of one commit and machine)")

    def _machine_json(self, path: Path, machine: str) -> None:
        target = self.dest / machine / "machine.json"
        there = self._copy_or_same(path, target)
        if there is None:
            return
        try:
            mine, theirs = _read_json(path), _read_json(there)
        except (OSError, ValueError) as exc:
            self.plan.unreadable.append(f"cannot read {there} (to compare with {path}): {exc}")
            return
        keys = sorted(k for k in mine.keys() | theirs.keys() if mine.get(k) != theirs.get(k))
        if not keys:
            self.plan.same.append(target)
            return
        shown = "; ".join(f"{k}: {theirs.get(k)!r} kept, {mine.get(k)!r} in {path}" for k in keys)
        if any(k in IDENTITY_FIELDS for k in keys):
            self.plan.conflicts.append(f"{path} and {there}: machine {machine} is another GPU model "
                                       f"({shown})")
        else:
            self.plan.warnings.append(f"{there} kept for machine {machine}; {path} differs ({shown}); "
                                      "each result file keeps its own run's fields")

    def _benchmarks(self, path: Path) -> None:
        try:
            data = _read_json(path)
            if not isinstance(data, dict):
                raise ValueError("not a JSON object")
        except (OSError, ValueError) as exc:
            self.plan.unreadable.append(f"cannot read {path}: {exc}")
            return
        if self.bench is None:
            self.bench, self.bench_changed = dict(data), True
            self.bench_origin = {k: path for k in data if k != "version"}
            self.plan.added_benchmarks += sorted(self.bench_origin)
            return
        if data.get("version") != self.bench.get("version"):
            self.plan.conflicts.append(f"{path} and {self.bench_origin.get('version', path)}: "
                                       f"benchmarks.json format {data.get('version')} vs "
                                       f"{self.bench.get('version')}")
            return
        differ = []
        for name, definition in sorted(data.items()):
            if name == "version":
                continue
            if name not in self.bench:
                self.bench[name], self.bench_origin[name] = definition, path
                self.bench_changed = True
                self.plan.added_benchmarks.append(name)
            elif self.bench[name] != definition:
                differ.append(name)
        if differ:
            kept = self.bench_origin[differ[0]]
            def version(d: object) -> str:
                return str(d.get("version")) if isinstance(d, dict) else "?"

            versions = sorted({version(data[n]) for n in differ} - {version(self.bench[n]) for n in differ})
            self.plan.warnings.append(
                f"{len(differ)} benchmark definition(s) in {path} differ from {kept}'s, kept "
                f"(e.g. {differ[0]})" + (f"; results stored with version {', '.join(versions)} of "
                                         "them are not drawn by asv publish" if versions else ""))

    def finish(self) -> Plan:
        seen, unique = set(), []
        for line in self.plan.unreadable:  # a file named by asv's reader and by ours: once
            key = line.split(": ", 1)[0]
            if key not in seen:
                seen.add(key)
                unique.append(line)
        self.plan.unreadable = unique
        if self.bench_changed:
            self.plan.benchmarks = self.bench
        return self.plan


def plan(sources: list[Path], dest: Path) -> Plan:
    """What collecting ``sources`` into ``dest`` would do (see the module docstring); writes nothing.

    Args:
        sources: results folders, or folders holding ``results/`` (:func:`source_folders`).
        dest: the destination results folder (``results/``); its records folder is
            :func:`fusebench.history.runrecord.records_dir` of it.

    Raises:
        UsageError: a source is not a results folder, is the destination, or is given twice.
    """
    folders = [source_folders(p) for p in sources]
    seen: dict[Path, Path] = {}
    for given, f in zip(sources, folders):
        real = f.results.resolve()
        if real == dest.resolve():
            raise UsageError(f"{given}: is the destination {dest} itself")
        if real in seen:
            raise UsageError(f"{given}: the same folder as {seen[real]}")
        seen[real] = given
    planner = _Planner(dest)
    for f in folders:
        planner.add(f)
    return planner.finish()


def _write_new(source: Path, target: Path) -> None:
    """Copy ``source`` to ``target`` through a temporary file in the same folder, linked into
    place only if ``target`` does not exist (never overwritten, never half-written).

    Raises:
        FileExistsError: ``target`` appeared meanwhile.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(source.read_bytes())
        os.link(tmp, target)
    finally:
        os.unlink(tmp)
    os.utime(target, (source.stat().st_atime, source.stat().st_mtime))


def apply(p: Plan, dest: Path) -> list[Path]:
    """Write plan ``p`` into ``dest``: its copies (never over an existing file) and the merged
    ``benchmarks.json`` (replaced atomically: it holds definitions, not figures).

    Returns the files written.

    Raises:
        UsageError: the plan is refused (conflicts or unreadable files); nothing is written.
    """
    if p.refused:
        raise UsageError("refused: " + (p.conflicts + p.unreadable)[0])
    written = []
    for source, target in p.copies:
        _write_new(source, target)
        written.append(target)
    if p.benchmarks is not None:
        path = dest / "benchmarks.json"
        dest.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=dest, prefix=".benchmarks.json.", suffix=".tmp")
        with os.fdopen(fd, "w") as out:
            json.dump(p.benchmarks, out, indent=4, sort_keys=True)
        os.replace(tmp, path)
        written.append(path)
    return written
