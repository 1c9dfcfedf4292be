"""Merging the results folders of many hosts into one: ``make collect FROM=<dir>...``.

A fleet (``deploy/``: a Kubernetes Indexed Job, a Slurm array) leaves one results folder per
host, each as ``make bench`` writes it: ``<machine>/machine.json``, the asv result files
``<machine>/<sha8>-<env>.json``, ``benchmarks.json``, and beside it the run records folder
(``records/<machine>/<sha8>.json.xz``, :func:`fusebench.storage.runrecord.records_dir`). This module
copies them into one destination (``results/`` and ``records/``) by these rules:

- **never overwrite**: a file the destination does not have is copied; one it has with the same
  bytes (or the same figures: the same JSON) is skipped; a stored file is never replaced.
- **conflict**: the same commit and asv machine with different figures: a result file of the
  same name whose values differ, a result file of another asv environment of the same commit and
  machine that gives another value to a case both measured, or a run record of the same name
  that differs. Also a ``machine.json`` whose ``gpu`` differs (another GPU model under the same
  machine name). Each conflict is one line naming both files.
- **untrusted**: every input file is checked before anything is written
  (:mod:`fusebench.storage.untrusted`: regular files only, no symlinks, size and nesting caps,
  names and fields to safe patterns, commit ids agreeing with file names, machine names with
  folders); one that fails is refused, one line naming it.
- **atomic**: everything is read and compared before anything is written. One conflict, or one
  refused input file, refuses the whole collect: nothing is written, so a collect can be re-run
  once the conflicting folder is left out or fixed. The copies are then stored as one
  transaction under the results folder's lock (:mod:`fusebench.storage.transaction`): a killed
  collect leaves the destination as it was, or as it will be once the next writer finishes it.
- **streaming**: a file is read, checked and let go; only its path, size and hash are kept, and
  figures are compared only for a commit met twice on one machine (memory does not grow with
  the number of files).
- ``machine.json`` of the same machine from two hosts differing in other fields (driver, CUDA,
  torch, os, ram, image digest): a warning; the destination's (else the first folder's) is kept.
  Nothing is lost: every result file carries its own run's fields (asv's ``params``), which is
  what the site and the gate read; ``machine.json`` only lists the machine.
- ``benchmarks.json``: the union of the definitions by benchmark name. A name defined differently
  (another suite version, code or parameters: hosts that ran other commits) keeps the
  destination's definition (else the first folder's) with a warning: ``asv publish`` draws a
  stored result only when its benchmark version matches the definition kept.
- different asv machines (``h200``, ``cpu-x86_64``, ``a100-sxm4-80gb``) sit side by side.
- **records of older hosts**: a record of plain JSON, ``<sha8>.json`` (a host running an older
  commit), is checked the same and stored compressed, ``<sha8>.json.xz``, its file time kept; a
  stored plain record and a compressed one of the same commit and machine are one record,
  compared by content.
- **shares**: a result file or run record of the same name whose cases are disjoint from the one
  there (array tasks that split one machine's grid by ops, ``deploy/slurm``) is merged into it
  (:mod:`fusebench.storage.shares`): cases are added, none replaced.
- a task's folder holding ``UNFINISHED`` (``deploy/slurm/fusebench.sbatch``: a task failed,
  was cancelled or still runs) refuses the collect, naming the task.

Sources: a results folder, or a folder holding ``results/`` (and ``records/``), such as one pod's
or one array task's output folder (:func:`source_folders`).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

from fusebench.errors import UsageError
from fusebench.record import SUFFIX, encode
from fusebench.storage import results, runrecord, shares, transaction, untrusted
from fusebench.storage.untrusted import Refused

#: ``machine.json`` fields whose difference is a conflict, not a warning: another GPU model
#: stored under the same machine name would mix two GPUs' figures in one history.
IDENTITY_FIELDS = ("machine", "gpu")
#: The file a fleet task keeps in its folder until it has finished without error (its one line
#: says which task and why).
UNFINISHED = "UNFINISHED"


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
        unreadable: one line each, an input file refused (:mod:`untrusted`) or a stored file that
            could not be read; refuses too.
        warnings: one line each (machine.json fields, benchmark definitions); do not refuse.
        benchmarks: the merged ``benchmarks.json`` to write, or None when it is unchanged.
        added_benchmarks: benchmark names the destination's ``benchmarks.json`` gains.
        checked: source file -> its :class:`untrusted.Checked` (size and hash checked again at
            the copy).
        merges: destination file -> the merged shares to store there (parsed JSON).
        merged_from: destination file -> the files merged into it, the one there first.
    """

    copies: list[tuple[Path, Path]] = field(default_factory=list)
    same: list[Path] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    benchmarks: dict | None = None
    added_benchmarks: list[str] = field(default_factory=list)
    checked: dict[Path, untrusted.Checked] = field(default_factory=dict)
    merges: dict[Path, object] = field(default_factory=dict)
    merged_from: dict[Path, list[Path]] = field(default_factory=dict)

    @property
    def refused(self) -> bool:
        """True when nothing may be written (a conflict or an unreadable file)."""
        return bool(self.conflicts or self.unreadable)


def _is_dir(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink()


def source_folders(path: Path) -> Source:
    """The results and records folders of ``path``: itself when it is a results folder (holds
    ``<machine>/machine.json`` or ``benchmarks.json``), else its ``results/`` sub-folder.

    Raises:
        UsageError: ``path`` is not a folder, is a symlink, or holds neither; or it (or, for a
            results folder, the folder above it) holds :data:`UNFINISHED`.
    """
    if path.is_symlink():
        raise UsageError(f"{path}: a symlink; give the folder itself (folders from another host "
                         "must be real folders)")
    if not path.is_dir():
        raise UsageError(f"{path}: no such folder")
    for marker in (path / UNFINISHED, path.parent / UNFINISHED):
        if os.path.lexists(marker):
            why = "(not a plain file)"
            if marker.is_file() and not marker.is_symlink():
                with marker.open("rb") as f:
                    why = (f.read(300).decode(errors="replace").strip().splitlines() or ["(empty)"])[0]
            raise UsageError(f"{path}: {why!s} ({marker} is there); nothing collected: leave the "
                             "folder out, or run that task again into a new folder")
    if any(path.glob("*/machine.json")) or (path / "benchmarks.json").exists():
        return Source(path, runrecord.records_dir(path))
    if (path / "results").is_dir() or (path / "results").is_symlink():
        return Source(path / "results", path / "records")
    raise UsageError(f"{path}: not a results folder (no <machine>/machine.json, no benchmarks.json, "
                     "no results/ in it)")


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


def _digest(path: Path, kind: str) -> str:
    """SHA-256 of a stored file (read without following a symlink); raises Refused."""
    return hashlib.sha256(untrusted.read_bytes(path, untrusted.MAX_BYTES[kind])).hexdigest()


def _json(path: Path, kind: str) -> object:
    """A stored or source file parsed (size and depth capped, a record decompressed within its
    cap); raises Refused."""
    if kind == "record":
        return untrusted.read_record(path)[1]
    return untrusted.parse(path, untrusted.read_bytes(path, untrusted.MAX_BYTES[kind]))


def _is_record_file(name: str) -> bool:
    return name.endswith(".json") or name.endswith(SUFFIX)


def _compressed(source: Path, checked: untrusted.Checked | None) -> tuple[bytes, tuple[int, int]]:
    """The plain-JSON record ``source`` (a host running an older commit) as a stored record
    (``fusebench.record.encode``), and its file's access and modification times (the runs page
    orders records by them). Its bytes must still be those checked.

    Raises:
        UsageError: the source changed since it was checked, or cannot be read.
    """
    try:
        raw = untrusted.read_bytes(source, untrusted.MAX_BYTES["record"])
        st = os.stat(source, follow_symlinks=False)
    except (Refused, OSError) as exc:
        raise UsageError(f"cannot read {source}: {exc}") from None
    if checked is not None and hashlib.sha256(raw).hexdigest() != checked.digest:
        raise UsageError(f"{source}: changed while collecting (its bytes differ from those checked)")
    return encode(json.loads(raw)), (st.st_atime_ns, st.st_mtime_ns)


class _Planner:
    """Builds a :class:`Plan`: the destination's file names first, then each source file in
    order, checked (:mod:`untrusted`) and compared by hash with what is there or planned; figures
    are read only for a commit stored twice on one machine (:meth:`_compare_commits`)."""

    def __init__(self, dest: Path):
        self.dest = dest
        self.dest_records = runrecord.records_dir(dest)
        self.plan = Plan()
        # destination path -> the file that will be there (itself, or the source planned into it)
        self.planned: dict[Path, Path] = {}
        # (machine, sha8) -> result files of that commit, stored or planned (compared at the end)
        self.commits: dict[tuple[str, str], list[Path]] = {}
        self.new: set[Path] = set()
        self.bench: dict | None = None
        self.bench_origin: dict[str, Path] = {}
        self.bench_changed = False
        # machine -> the GPU model of its folder (the destination's machine.json, else the first
        # source's): a result or record of another model is refused (untrusted.same_gpu)
        self.gpus: dict[str, str] = {}
        self.refused_results: set[tuple[str, str]] = set()  # (machine, sha8), named already
        self._load_dest()

    def _refuse(self, exc: Refused) -> None:
        self.plan.unreadable.append(str(exc))

    # -- the destination -------------------------------------------------------------------------

    def _load_dest(self) -> None:
        for p in sorted(self.dest.glob("*/*.json")) if self.dest.is_dir() else []:
            self.planned[p] = p
            if p.name != "machine.json":
                self.commits.setdefault((p.parent.name, p.name[:8]), []).append(p)
            elif (gpu := untrusted.folder_gpu(p.parent)) is not None:
                self.gpus[p.parent.name] = gpu
        # a stored record under the name a source's is stored as: the compressed one, else the plain
        for machine, p in runrecord.all_records(self.dest_records) if self.dest_records.is_dir() else []:
            self.planned[runrecord.record_path(self.dest_records, machine, runrecord.sha8(p))] = p
        path = self.dest / "benchmarks.json"
        if path.exists() or path.is_symlink():
            try:
                self.bench = _json(path, "benchmarks")
                if not isinstance(self.bench, dict):
                    raise Refused(path, "not a JSON object")
            except Refused as exc:
                self.bench = None
                self._refuse(exc)
            else:
                self.bench_origin = {k: path for k in self.bench if k != "version"}

    # -- one source ------------------------------------------------------------------------------

    def add(self, src: Source) -> None:
        try:
            top = untrusted.entries(src.results)
        except Refused as exc:
            self._refuse(exc)
            return
        bench = None
        for entry in top:
            path = Path(entry.path)
            if entry.name == "benchmarks.json":
                bench = path
            elif entry.is_dir(follow_symlinks=False):
                self._machine_folder(path)
        if src.records.exists() or src.records.is_symlink():
            self._records(src.records)
        if bench is not None:
            self._benchmarks(bench)

    def _check(self, path: Path, kind: str, machine: str | None,
               gpu: str | None = None) -> untrusted.Checked | None:
        """``path`` checked (:func:`untrusted.check`), of the GPU model ``gpu`` of its machine
        folder where that is known; None (and named) when refused."""
        try:
            checked = untrusted.check(path, kind, machine)
            untrusted.same_gpu(checked, gpu)
        except Refused as exc:
            self._refuse(exc)
            return None
        self.plan.checked[path] = checked
        return checked

    def _machine_folder(self, folder: Path) -> None:
        machine = folder.name
        try:
            files = [e for e in untrusted.entries(folder) if e.name.endswith(".json")]
        except Refused as exc:
            self._refuse(exc)
            return
        if not files:
            return
        if untrusted.MACHINE.fullmatch(machine) is None:
            self._refuse(Refused(folder, "not a machine name (letters, digits, '.', '_', '-')"))
            return
        names = [e.name for e in files]
        if "machine.json" not in names:
            self._refuse(Refused(folder / "machine.json", f"missing (asv leaves out the {len(files)} "
                                                          "result file(s) beside it)"))
            return
        info = self._check(folder / "machine.json", "machine", machine)
        if info:
            self._machine_json(folder / "machine.json", machine)
            self.gpus.setdefault(machine, info.gpu)
        for e in files:
            if e.name != "machine.json":
                self._result(Path(e.path), machine, info.gpu if info else None)

    def _records(self, folder: Path) -> None:
        try:
            machines = [e for e in untrusted.entries(folder) if e.is_dir(follow_symlinks=False)]
        except Refused as exc:
            self._refuse(exc)
            return
        for m in machines:
            try:
                files = [e for e in untrusted.entries(Path(m.path)) if _is_record_file(e.name)]
            except Refused as exc:
                self._refuse(exc)
                continue
            if files and untrusted.MACHINE.fullmatch(m.name) is None:
                self._refuse(Refused(Path(m.path), "not a machine name (letters, digits, '.', '_', '-')"))
                continue
            for e in files:
                self._record(Path(e.path), m.name)

    def _copy(self, source: Path, target: Path) -> None:
        self.plan.copies.append((source, target))
        self.planned[target] = source
        self.new.add(source)

    def _there_same(self, source: Path, target: Path, kind: str) -> Path | None:
        """Plan ``source`` -> ``target`` when nothing is there, or note it the same byte for byte:
        then None; else the file already there (or planned), for the caller to compare."""
        there = self.planned.get(target)
        if there is None:
            self._copy(source, target)
            return None
        theirs = self.plan.checked.get(there)
        try:
            digest = theirs.digest if theirs is not None else _digest(there, kind)
        except Refused as exc:
            self._refuse(exc)
            return None
        if digest == self.plan.checked[source].digest:
            self.plan.same.append(target)
            return None
        return there

    def _result(self, path: Path, machine: str, gpu: str | None) -> None:
        checked = self._check(path, "result", machine, gpu)
        if checked is None:
            self.refused_results.add((machine, path.name[:8]))
            return
        target = self.dest / machine / path.name
        new = target not in self.planned
        there = self._there_same(path, target, "result")
        if there is not None:
            self._same_name(path, there, target, machine, checked.commit)
        elif new:
            self.commits.setdefault((machine, path.name[:8]), []).append(path)

    def _run(self, path: Path) -> results.Run | None:
        try:
            return results.read_file(path)
        except UsageError as exc:
            self.plan.unreadable.append(str(exc))
            return None

    def _same_name(self, path: Path, there: Path, target: Path, machine: str, commit: str) -> None:
        """A result file whose name is already there with other bytes: the same figures, or a
        conflict."""
        mine, other = self._run(path), self._run(there)
        if mine is None or other is None:
            return
        a, b = _figures(mine), _figures(other)
        if a == b:
            self.plan.same.append(target)
            return
        diff = _differing(a, b)
        if not diff and a.keys() <= b.keys():  # a share already merged there
            self.plan.same.append(target)
            return
        why = None if diff else self._share(path, target, there, "result", shares.merge_results)
        if not diff and why is None:
            self.commits.setdefault((machine, path.name[:8]), []).append(path)
            self.new.add(path)
            return
        what = (f"{len(diff)} case(s) differ, e.g. {_case(diff[0], a, b)}" if diff else
                f"different cases measured ({len(a)} vs {len(b)}), not shares of one run: {why}")
        self.plan.conflicts.append(f"{path} and {there}: commit {commit[:8]} on machine {machine} with "
                                   f"different figures ({what})")

    def _compare_commits(self) -> None:
        """Result files of one commit and machine under different environment names (stored or
        planned, at least one new): a case both measured must have one value. Figures are read
        only here, one commit at a time."""
        for (machine, _), files in sorted(self.commits.items()):
            if len(files) < 2 or not any(f in self.new for f in files):
                continue
            runs = [(f, r) for f in files if (r := self._run(f)) is not None]
            for i, (path, run) in enumerate(runs):
                if path not in self.new:
                    continue
                for other_path, other in runs[:i] + [x for x in runs[i + 1:] if x[0] not in self.new]:
                    if other.commit != run.commit:
                        continue
                    mine, theirs = _figures(run), _figures(other)
                    diff = _differing(mine, theirs)
                    if diff:
                        self.plan.conflicts.append(
                            f"{path} and {other_path}: commit {run.commit[:8]} on machine {machine} with "
                            f"different figures ({len(diff)} case(s) differ, e.g. "
                            f"{_case(diff[0], mine, theirs)})")
                        break

    def _record(self, path: Path, machine: str) -> None:
        if self._check(path, "record", machine, self.gpus.get(machine)) is None:
            return
        target = runrecord.record_path(self.dest_records, machine, runrecord.sha8(path))
        there = self._there_same(path, target, "record")
        if there is None:
            return
        try:
            mine, theirs = _json(path, "record"), _json(there, "record")
        except Refused as exc:
            self._refuse(exc)
            return
        if mine == theirs or shares.holds_records(theirs, mine):  # or a share already merged there
            self.plan.same.append(target)
        elif why := self._share(path, target, there, "record", shares.merge_records):
            self.plan.conflicts.append(f"{path} and {there}: run records of commit {runrecord.sha8(path)} on "
                                       f"machine {machine} differ (two runs of one commit and machine: "
                                       f"{why})")

    def _share(self, source: Path, target: Path, there: Path, kind: str, merge) -> str | None:
        """Plan ``source`` merged into ``target`` (where ``there`` is, or is planned) when the two
        are shares of one run (``merge``: a function of :mod:`fusebench.storage.shares`): None;
        else why they are not, for the caller's conflict."""
        try:
            base = self.plan.merges[target] if target in self.plan.merges else _json(there, kind)
            merged, why = merge(base, _json(source, kind))
        except Refused as exc:
            self._refuse(exc)
            return None
        if merged is None:
            return why
        self.plan.merges[target] = merged
        self.plan.copies = [(s, t) for s, t in self.plan.copies if t != target]
        self.plan.merged_from.setdefault(target, [there]).append(source)
        return None

    def _machine_json(self, path: Path, machine: str) -> None:
        target = self.dest / machine / "machine.json"
        there = self._there_same(path, target, "machine")
        if there is None:
            return
        try:
            mine, theirs = _json(path, "machine"), _json(there, "machine")
            if not isinstance(theirs, dict):
                raise Refused(there, "not a JSON object")
        except Refused as exc:
            self._refuse(exc)
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
        if self._check(path, "benchmarks", None) is None:
            return
        try:
            data = _json(path, "benchmarks")
        except Refused as exc:
            self._refuse(exc)
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

    def _records_have_results(self) -> None:
        """Each record to be stored sits beside a result file of its commit in its machine's folder
        (stored or collected): a record alone is a run no reader can pair."""
        targets = self.plan.copies + [(f[-1], t) for t, f in self.plan.merged_from.items()]
        for source, target in targets:
            sha8, machine = runrecord.sha8(target), target.parent.name
            if target.is_relative_to(self.dest_records) and not self.commits.get((machine, sha8)) \
                    and (machine, sha8) not in self.refused_results:
                self._refuse(Refused(source, f"a run record with no result file of commit {sha8} in "
                                             f"{self.dest / machine}/, stored or collected (a record sits "
                                             "beside its run's results)"))

    def finish(self) -> Plan:
        self._compare_commits()
        self._records_have_results()
        seen, unique = set(), []
        for line in self.plan.unreadable:  # a file named twice (checked, then compared): once
            if line not in seen:
                seen.add(line)
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
            :func:`fusebench.storage.runrecord.records_dir` of it.

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


def locked(dest: Path):
    """The lock of ``dest`` (and its records folder) for a collect: ``with collect.locked(dest):``
    around :func:`plan` and :func:`apply` (:func:`fusebench.storage.transaction.locked`)."""
    return transaction.locked(dest, "collect", (runrecord.records_dir(dest),))


def apply(p: Plan, dest: Path) -> list[Path]:
    """Write plan ``p`` into ``dest`` as one transaction: its copies (never over an existing
    file) and the merged ``benchmarks.json`` (it holds definitions, not figures). Call with the
    lock held (:func:`locked`).

    Returns the files written.

    Raises:
        UsageError: the plan is refused (conflicts or unreadable files), or a source file changed
            since it was checked; nothing is written.
    """
    if p.refused:
        raise UsageError("refused: " + (p.conflicts + p.unreadable)[0])
    records = runrecord.records_dir(dest)
    written = []
    with transaction.Transaction(dest, (records,)) as txn:
        for source, target in p.copies:
            if os.path.lexists(target):
                raise UsageError(f"{target} appeared while collecting; nothing written")
            checked = p.checked.get(source)
            if target.is_relative_to(records) and not source.name.endswith(SUFFIX):
                data, times = _compressed(source, checked)
                txn.add_bytes(target, data, times)
            else:
                txn.add_copy(target, source, checked.size if checked else None,
                             checked.digest if checked else None)
            written.append(target)
        for target, data in p.merges.items():  # shares: a superset of what is there, replaced whole
            stored = encode(data) if target.is_relative_to(records) else json.dumps(data, indent=1)
            txn.add_bytes(target, stored)
            written.append(target)
        for target in [t for t in written if t.is_relative_to(records)]:  # the plain form it replaces
            if os.path.lexists(plain := target.with_name(runrecord.sha8(target) + ".json")):
                txn.delete(plain)
        if p.benchmarks is not None:
            path = dest / "benchmarks.json"
            txn.add_bytes(path, json.dumps(p.benchmarks, indent=4, sort_keys=True))
            written.append(path)
        txn.commit()
    return written
