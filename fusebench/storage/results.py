"""Reading stored asv results (``results/<machine>/<sha8>-<env>.json``) back, for the regression
gate, the plots and the site.

A file that cannot be read is never taken for "not measured": :class:`Reader` names it
(:class:`Unreadable`), reads the rest, and its callers exit non-zero.

Files are read with asv's own loader (``asv.results.Results.load``), so its format details
(``result_columns``, trailing columns dropped when empty) stay asv's business. Each value is a
float, ``None`` when the case *failed* (the benchmark raised: a case that failed the correctness
gate is stored that way on purpose) or NaN when it was *skipped* (``NotImplementedError``: not on
this machine, not in the run's grid, a metric not measured on this device).
"""

from __future__ import annotations

import ast
import functools
import itertools
import json
import math
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from fusebench.errors import UsageError

#: A case's asv parameters as plain strings, in ``param_names`` order: (backend, shape, dtype).
Params = tuple[str, ...]


@dataclass
class Run:
    """The stored results of one commit on one machine.

    Attributes:
        machine: asv machine name (``h200``).
        commit: full git sha the results were stored for.
        date: commit date, ms since the epoch (asv's ``date``).
        fields: the machine's environment fields at run time (gpu, driver, cuda, torch, ...).
        values: ``{benchmark name: {params: value}}``; value float, None (failed) or NaN (skipped).
        files: the result files read.
    """

    machine: str
    commit: str
    date: int
    fields: dict = field(default_factory=dict)
    values: dict[str, dict[Params, float | None]] = field(default_factory=dict)
    files: list[Path] = field(default_factory=list)

    def value(self, benchmark: str, params: Params) -> float | None:
        """The value of one case; NaN when absent (never measured counts as skipped)."""
        return self.values.get(benchmark, {}).get(params, math.nan)


def is_failed(value: float | None) -> bool:
    """True for asv's failed value (None)."""
    return value is None


def is_measured(value: float | None) -> bool:
    """True for a finite number (not failed, not skipped)."""
    return value is not None and math.isfinite(value)


def _plain(param: str) -> str:
    """asv stores parameters as ``repr`` strings: ``"'eager'"`` -> ``"eager"``."""
    try:
        return str(ast.literal_eval(param))
    except (ValueError, SyntaxError):
        return param


@dataclass(frozen=True)
class Unreadable:
    """A stored file that exists but could not be read (truncated, not JSON, not asv's format).

    Attributes:
        path: the file.
        reason: why, one line (the loader's message, the path left out).
    """

    path: Path
    reason: str

    def __str__(self) -> str:
        return f"cannot read {self.path}: {self.reason}"


def _reason(exc: BaseException, path: Path) -> str:
    """The first line of ``exc``'s message without the path (the caller names it once)."""
    text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    for mention in (f" in file '{path}'", f" in file {path}", f" in {path}", f"{path}: ", str(path)):
        text = text.replace(mention, "")
    return text.strip(" :.") or type(exc).__name__


def _load(path: Path, checked: bool = True) -> Run:
    """One asv result file as a :class:`Run`, checked first as collect checks it
    (``untrusted.check``: its schema, names and figures; stored files come by ``git pull`` too);
    a refusal or any failure of asv's loader propagates. ``checked=False``: asv's loader only."""
    from asv.results import Results

    from fusebench.storage import untrusted

    if checked and path.parent.is_symlink():  # a machine folder linked elsewhere: as a symlinked file
        raise ValueError(f"in {path.parent}/, a symlink; stored folders must be real")
    try:
        if checked:
            untrusted.same_gpu(untrusted.check(path, "result", path.parent.name), _folder_gpu(path.parent))
    except untrusted.Refused as exc:
        raise ValueError(exc.why) from None
    res = Results.load(str(path))
    values: dict[str, dict[Params, float | None]] = {}
    for name in res.get_all_result_keys():
        params = res.get_result_params(name) or []
        flat = res.get_result_value(name, params)
        # each axis made plain once, not each combination's values (3,000 files: 60 M literal_evals)
        combos = list(itertools.product(*[[_plain(p) for p in axis] for axis in params])) if params else [()]
        if not isinstance(flat, list):
            flat = [flat]
        values[name] = dict(zip(combos, flat))
    fields = {k: v for k, v in res.params.items()}
    return Run(machine=fields.get("machine", path.parent.name), commit=res.commit_hash,
               date=res.date or 0, fields=fields, values=values, files=[path])


def _folder_gpu(folder: Path) -> str | None:
    """The GPU model of a stored machine folder (``untrusted.folder_gpu``: its ``machine.json``'s),
    read once per version of that file (a reader loads thousands of result files of one folder)."""
    try:
        st = os.stat(folder / "machine.json", follow_symlinks=False)
    except OSError:
        return None
    return _gpu_of_folder(str(folder), st.st_ino, st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=64)
def _gpu_of_folder(folder: str, *stamp: int) -> str | None:
    from fusebench.storage import untrusted

    return untrusted.folder_gpu(Path(folder))


def read_file(path: Path) -> Run:
    """One asv result file as a :class:`Run`.

    Raises:
        UsageError: the file is not an asv result file (one line naming it).
    """
    try:
        return _load(path)
    except Exception as exc:  # asv's UserError, OSError, JSON and format errors alike
        raise UsageError(f"cannot read asv result file {path}: {_reason(exc, path)}") from None


def result_files(results_dir: Path, machine: str) -> list[Path]:
    """The result files of ``machine`` (``machine.json`` excluded), sorted by name."""
    return sorted(p for p in (results_dir / machine).glob("*.json") if p.name != "machine.json")


def machines(results_dir: Path) -> list[str]:
    """Machines with stored results: sub-folders of ``results_dir`` holding a ``machine.json``."""
    return sorted(p.parent.name for p in results_dir.glob("*/machine.json"))


def merge(runs: list[Run]) -> Run:
    """Several result files of one commit (several asv environments) as one run; later files win."""
    out = Run(runs[0].machine, runs[0].commit, runs[0].date, dict(runs[0].fields))
    for run in runs:
        for name, vals in run.values.items():
            out.values.setdefault(name, {}).update(vals)
        out.files += run.files
    return out


def _commit_date(path: Path) -> tuple[str, int]:
    """A result file's ``commit_hash`` and ``date`` read lightly (capped, no schema check: the
    loader names a bad file); a date outside ``untrusted.DATE_MS`` (10**30 overflowed the date
    shown) is a ValueError."""
    from fusebench.storage import untrusted

    try:
        data = untrusted.parse(path, untrusted.read_bytes(path, untrusted.MAX_BYTES["result"]))
    except untrusted.Refused as exc:  # 100,000 nested brackets: a RecursionError of json.loads
        raise ValueError(exc.why) from None
    date = data.get("date") or 0
    if untrusted.number_problem(date, untrusted.DATE_MS) is not None:
        raise ValueError(f"date {date!r:.40}")
    return str(data["commit_hash"]), date


def stored_commits(results_dir: Path, machine: str) -> list[tuple[str, int]]:
    """``[(full sha, commit date in ms)]`` of ``machine``'s stored results, newest commit first
    (each file's ``commit_hash`` and ``date``, read as JSON; a file without them is left out: the
    readers name it)."""
    found: dict[str, int] = {}
    for path in result_files(results_dir, machine):
        try:
            commit, date = _commit_date(path)
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
        found[commit] = max(date, found.get(commit, 0))
    return sorted(found.items(), key=lambda cd: (-cd[1], cd[0]))


def compare_hint(results_dir: Path, machine: str, shown: int = 4) -> str:
    """What ``make compare`` can be given on ``machine``, as a command that runs: the newest stored
    commits by commit date, and ``make compare MACHINE=<m> BASE=<second newest> HEAD=<newest>``;
    for a machine with none stored, ``make bench`` and the same command for a machine that has
    two. ``results_dir`` other than the checkout's ``results/`` is passed as ``--results``."""
    from datetime import datetime, timezone

    from fusebench.paths import PROJECT_ROOT

    def command(m: str, commits: list[tuple[str, int]]) -> str:
        base, head = commits[1][0][:8], commits[0][0][:8]
        if Path(results_dir).resolve() == (PROJECT_ROOT / "results").resolve():
            return f"make compare MACHINE={m} BASE={base} HEAD={head}"
        return f"fusebench compare --machine {m} --results {results_dir} --base {base} --head {head}"

    def day(ms: int) -> str:
        return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%d %H:%M") if ms else "no date"

    commits = stored_commits(results_dir, machine)
    if len(commits) >= 2:
        newest = ", ".join(f"{c[:8]} ({day(d)})" for c, d in commits[:shown])
        return f"the newest commits stored for {machine}: {newest}; e.g. {command(machine, commits)}"
    what = f"one commit ({commits[0][0][:8]})" if commits else "no results"
    others = [(m, c) for m in machines(results_dir) if m != machine
              and len(c := stored_commits(results_dir, m)) >= 2]
    text = f"{machine} has {what} stored (make bench stores this machine's)"
    if others:
        m, c = others[0]
        text += f"; another machine's newest two: {command(m, c)}"
    return text


def print_compare_hint(machine: str = "", results_dir: Path | None = None) -> None:
    """``make compare`` without ``BASE``: say so and print :func:`compare_hint` for ``machine``
    (default: this host's) on stderr."""
    import sys

    from fusebench.paths import PROJECT_ROOT

    if not machine:
        from fusebench.machine import this_machine  # torch-free: make compare runs without torch

        machine = this_machine()
    print(f"compare: give BASE=<git rev>; {compare_hint(results_dir or PROJECT_ROOT / 'results', machine)}",
          file=sys.stderr)


#: A file :meth:`Reader.read` read without keeping its run.
_DROPPED = object()


class Reader:
    """Reads the stored results of ``results_dir``, noting each file it could not read.

    Every reader of stored results (plots, publish, the regression gate) goes through one: a file
    that cannot be read is named in :attr:`unreadable` and left out, and the rest is read, never
    taken for "this machine never measured it". The caller prints :meth:`lines` and exits non-zero.

    An interrupted store of ``results_dir`` is finished first, or refused (one line, naming
    ``who`` reads: ``transaction.settle``).

    Attributes:
        results_dir: the asv results folder (``results/``).
        unreadable: the files that could not be read so far, in the order met, each once.
    """

    def __init__(self, results_dir: Path, who: str = "read", checked: bool = True):
        from fusebench.storage import runrecord, transaction

        self.checked = checked  # each file checked as collect checks it (False: asv's loader only)

        # an interrupted store is finished (or refused) first: never a result of one run read
        # beside the record of another (issue 42)
        transaction.settle(results_dir, (runrecord.records_dir(results_dir),), who)
        self.results_dir = results_dir
        self.unreadable: list[Unreadable] = []
        self._runs: dict[Path, object] = {}  # a Run, None (unreadable) or _DROPPED (read, not kept)
        self._index: dict[str, list] = {}  # machine -> [(commit, (date, files))], newest first

    @property
    def files_read(self) -> int:
        """Result files looked at so far, readable or not."""
        return len(self._runs)

    def _note(self, path: Path, reason: str) -> None:
        if all(u.path != path for u in self.unreadable):
            self.unreadable.append(Unreadable(path, reason))

    def read(self, path: Path, keep: bool = True) -> Run | None:
        """The run of one result file, or None if it is unreadable. Kept once read, unless not
        ``keep``: a pass over thousands of files (3,000 results held as runs took GBs) reads
        each again when it is needed, one at a time; an unreadable file is noted either way."""
        if self._runs.get(path, _DROPPED) is _DROPPED:
            try:
                run = _load(path, self.checked)
            except Exception as exc:  # asv's UserError, OSError, JSON and format errors alike
                self._runs[path] = None
                self._note(path, _reason(exc, path))
                return None
            self._runs[path] = run if keep else _DROPPED
            return run
        return self._runs[path]

    def newest_first(self, machine: str):
        """The readable runs of ``machine``, one per commit (its files merged), newest commit date
        first, read one commit at a time as the caller goes on (none kept): the dates come from a
        light scan of the files (:func:`stored_commits`' reading, once per machine)."""
        if machine not in self._index:
            by_commit: dict[str, tuple[int, list[Path]]] = {}
            for path in result_files(self.results_dir, machine):
                try:
                    commit, date = _commit_date(path)
                except (OSError, ValueError, KeyError, TypeError, AttributeError):
                    self.read(path, keep=False)  # named as unreadable by the loader's words
                    continue
                old = by_commit.get(commit, (0, []))
                by_commit[commit] = (max(date, old[0]), old[1] + [path])
            self._index[machine] = sorted(by_commit.items(), key=lambda cd: (-cd[1][0], cd[0]))
        for commit, (_, paths) in self._index[machine]:
            runs = [r for r in (self.read(p, keep=False) for p in sorted(paths)) if r is not None]
            runs = [r for r in runs if r.commit == commit]
            if runs:
                yield merge(runs)

    def runs(self, machine: str, pattern: str = "*.json") -> list[Run]:
        """The readable runs of ``machine`` (one per result file matching ``pattern``), by file name."""
        files = sorted(p for p in (self.results_dir / machine).glob(pattern) if p.name != "machine.json")
        return [r for r in (self.read(p) for p in files) if r is not None]

    def read_all(self, machine: str) -> None:
        """Read every result file of ``machine`` once, keeping none (unreadable files noted)."""
        for path in result_files(self.results_dir, machine):
            self.read(path, keep=False)

    def check(self) -> list[Unreadable]:
        """Read every file ``asv publish`` reads: ``benchmarks.json``, each machine folder's
        ``machine.json`` (asv skips a folder whose file is missing or broken) and every result file.

        Returns :attr:`unreadable` (also the files found before).
        """
        from fusebench.storage import untrusted

        bench = self.results_dir / "benchmarks.json"
        if bench.exists():
            try:
                untrusted.parse(bench, untrusted.read_bytes(bench, untrusted.MAX_BYTES["benchmarks"]))
            except untrusted.Refused as exc:
                self._note(bench, exc.why)
        for folder in sorted(p for p in self.results_dir.iterdir() if p.is_dir()) \
                if self.results_dir.is_dir() else []:
            files = sorted(p for p in folder.glob("*.json") if p.name != "machine.json")
            if not files:
                continue
            info = folder / "machine.json"
            try:
                name = untrusted.parse(info, untrusted.read_bytes(info, untrusted.MAX_BYTES["machine"]))
                if not isinstance(name, dict) or not isinstance(name.get("machine"), str):
                    raise untrusted.Refused(info, "no machine name")
            except untrusted.Refused as exc:
                reason = "missing" if not info.exists() else exc.why
                self._note(info, f"{reason} (asv leaves out the {len(files)} result file(s) beside it)")
            for f in files:
                if f not in self._runs:  # each file once; noted, not kept: 3,000 files hold none
                    self.read(f, keep=False)
        return self.unreadable

    def lines(self, prog: str) -> list[str]:
        """One line per unreadable file, ``<prog>: error: cannot read <path>: <why>; left out``."""
        return [f"{prog}: error: {u}; left out" for u in self.unreadable]

    def latest(self, machine: str, prefix: str = "") -> Run | None:
        """The readable results of ``machine``'s most recent commit (by commit date) that measured
        a benchmark whose name starts with ``prefix`` (``"suite.Gelu."``: the newest run of that
        op; a run of other ops only, such as ``make bench OP=matmul``, is passed over); None when
        no readable file has one (unreadable files are then in :attr:`unreadable`)."""
        runs = [r for r in self.runs(machine)
                if any(name.startswith(prefix) and any(is_measured(v) for v in vals.values())
                       for name, vals in r.values.items())]
        if not runs:
            return None
        newest = max(runs, key=lambda r: r.date)
        return merge([r for r in runs if r.commit == newest.commit])

    def commit(self, machine: str, commit: str) -> Run:
        """The readable stored results of the full sha ``commit`` on ``machine``.

        Raises:
            UsageError: no results folder for the machine, or no readable result file of that
                commit (the message names the unreadable ones, if any).
        """
        if not (self.results_dir / machine).is_dir():
            have = ", ".join(machines(self.results_dir)) or "none"
            raise UsageError(f"no results for machine {machine!r} in {self.results_dir}/ (machines: {have}); "
                             + compare_hint(self.results_dir, machine))
        runs = [r for r in self.runs(machine, f"{commit[:8]}-*.json") if r.commit == commit]
        if not runs:
            bad = [str(u) for u in self.unreadable if u.path.name.startswith(commit[:8])]
            if bad:
                raise UsageError(f"no readable results for commit {commit[:8]} on machine {machine!r}: "
                                 + "; ".join(bad))
            raise UsageError(f"no results for commit {commit[:8]} on machine {machine!r} in "
                             f"{self.results_dir}/{machine}/; {compare_hint(self.results_dir, machine)}")
        return merge(sorted(runs, key=lambda r: r.files[0].name))


def _strict(reader: Reader) -> None:
    if reader.unreadable:
        raise UsageError(str(reader.unreadable[0]))


def load_commit(results_dir: Path, machine: str, commit: str) -> Run:
    """The stored results of the full sha ``commit`` on ``machine`` (see :meth:`Reader.commit`).

    Raises:
        UsageError: no results folder for the machine, no result file of that commit, or one of
            its files is unreadable.
    """
    reader = Reader(results_dir)
    run = reader.commit(machine, commit)
    _strict(reader)
    return run


def load_latest(results_dir: Path, machine: str, prefix: str = "") -> Run:
    """The stored results of ``machine``'s most recent commit with ``prefix`` (see
    :meth:`Reader.latest`).

    Raises:
        UsageError: the machine has no such result, or one of its result files is unreadable.
    """
    reader = Reader(results_dir)
    run = reader.latest(machine, prefix)
    _strict(reader)
    if run is None:
        raise UsageError(f"no results for machine {machine!r} in {results_dir}/"
                         + (f" with {prefix}*" if prefix else ""))
    return run


def units(results_dir: Path) -> dict[str, str]:
    """``{benchmark name: unit}`` from asv's ``results/benchmarks.json`` (written by ``store.stage``).

    Raises:
        UsageError: the file is missing or unreadable.
    """
    path = results_dir / "benchmarks.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot read {path} (asv writes it on every run): {exc}") from None
    return {name: b.get("unit", "") for name, b in data.items() if isinstance(b, dict)}


def report_unreadable(reader, prog: str, count: bool = False) -> int:
    """Print one line per stored file ``reader`` (``fusebench.storage.results.Reader``) could not read.

    Args:
        count: end with a count line even when every file was read (``make publish``).

    Returns 2 when some file was unreadable (the exit status of a reader that left bad input out;
    never 1, which means a regression or a collect conflict), else 0.
    """
    for line in reader.lines(prog):
        print(line, file=sys.stderr)
    bad = len(reader.unreadable)
    if bad:
        print(f"{prog}: {bad} stored file(s) could not be read (named above) and were left out",
              file=sys.stderr)
    elif count:
        print(f"{prog}: every stored file was read ({reader.files_read} result files)", file=sys.stderr)
    return 2 if bad else 0
