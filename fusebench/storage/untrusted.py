"""Files from another host, checked before anything is written: asv result files, run records,
``machine.json`` and ``benchmarks.json`` (``docs/untrusted-input.md`` says why and where).

Every file is opened without following a symlink and must be a regular file under its size cap;
its JSON must nest no deeper than :data:`MAX_DEPTH` and hold no integer of more than
:data:`MAX_INT_DIGITS` digits; then its schema (:func:`check`) holds names and fields to safe
patterns: identifiers for benchmark, parameter and field names, 40 hex digits for a commit
(agreeing with the file's name), the machine name agreeing with its folder, and plain text (no
markup characters) for every string the published site shows; and every number to its
:class:`Bound` (:func:`number_problem`, the one check of a number: a figure, a count, a date),
so that what collect accepts every reader can read. A result or record names the GPU model of
its machine folder (:func:`same_gpu`). A file that fails is one :class:`Refused` line naming it.
"""

from __future__ import annotations

import errno
import functools
import hashlib
import json
import math
import os
import re
import stat
from dataclasses import MISSING, dataclass, fields
from pathlib import Path

from fusebench.record import MAX_ROUNDS, SHAPE

#: Largest accepted file of each kind, in bytes (the committed H200 files: results 111 KB,
#: records 130 KB, benchmarks.json 53 KB, machine.json 400 B). A record's JSON, once
#: decompressed, is capped too (``fusebench.record.MAX_JSON``, the same 64 MB).
MAX_BYTES = {"result": 16 << 20, "record": 64 << 20, "machine": 64 << 10, "benchmarks": 16 << 20}
#: Deepest nesting of lists and objects accepted (asv's and our files nest 5 deep).
MAX_DEPTH = 16
#: The most digits an integer of a file from another host may have (2^63 has 19: no count,
#: size, seed or date a run writes has more).
MAX_INT_DIGITS = 19

#: An asv machine name: a folder name, a URL part and a selector on the site.
MACHINE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
#: A git commit id as asv stores it.
COMMIT = re.compile(r"[0-9a-f]{40}")
#: An identifier: a field, parameter or class name.
IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,99}")
#: A benchmark name (``suite.Gelu.track_bandwidth``): asv's page writes it into HTML as it is.
BENCHMARK = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*){1,4}")
#: An asv parameter value as stored (a repr: ``'eager'``, ``'16384x16384'``, ``1024``, ``None``).
PARAM = re.compile(r"'[A-Za-z0-9_.+x-]{0,100}'|-?[0-9][0-9.e+-]{0,30}|None|True|False")
#: An asv environment name, the tail of a result file's name.
ENV_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,200}")
#: Plain text the site may show (machine fields, units, versions): no markup characters
#: (``< > & " ' `` and backquote), no control characters.
PLAIN = re.compile(r"[A-Za-z0-9 ._,:;()+\-/@#=%\[\]~*!?|^{}$]{0,300}")
#: An asv result file's name: ``<sha8>-<environment>.json``.
RESULT_NAME = re.compile(r"([0-9a-f]{8})-(.+)\.json")
#: A run record's name: ``<sha8>.json.xz`` (``fusebench.record.SUFFIX``), or ``<sha8>.json`` as
#: hosts running an older commit still write it.
RECORD_NAME = re.compile(r"([0-9a-f]{8})\.json(\.xz)?")


class Refused(Exception):
    """A file from another host that is not accepted; ``str()`` is one line naming it."""

    def __init__(self, path: Path, why: str):
        super().__init__(f"{path}: {why}")
        self.path = path
        self.why = why


@dataclass(frozen=True)
class Checked:
    """A file that passed: its kind, machine (None for ``benchmarks.json``), commit (results and
    records), size and SHA-256 (to notice a change between the check and the copy), and the GPU
    model it says it ran on (:func:`gpu_of`; None for ``benchmarks.json`` and a record that names
    none)."""

    path: Path
    kind: str
    machine: str | None
    commit: str | None
    size: int
    digest: str
    gpu: str | None = None


def gpu_of(kind: str, data: dict) -> str | None:
    """The GPU model a checked file of ``kind`` says: a machine folder's is its ``machine.json``'s
    ``gpu`` and a result's its ``params.gpu`` (each ``"none"`` without one: asv's entry of a
    CPU run, ``fusebench.asv.store.machine_info``); a record's its ``environment.gpu`` (None when
    it names none). A machine folder holds one GPU model's figures: a result or record whose
    model differs from its folder's ``machine.json`` is refused (:func:`same_gpu`)."""
    if kind == "machine":
        return str(data.get("gpu") or "none")
    if kind == "result":
        return str(data["params"].get("gpu") or "none")
    if kind == "record":
        gpu = data["environment"].get("gpu")
        return None if gpu is None else str(gpu)
    return None


def same_gpu(checked: Checked, expected: str | None) -> None:
    """A checked result or record ran on its machine folder's GPU model ``expected`` (None: the
    folder's ``machine.json`` is not there to say; a record that names no GPU says nothing).

    Raises:
        Refused: they differ (an A100's figures in ``results/h200/`` would join the H200's graphs).
    """
    if expected is not None and checked.gpu is not None and checked.gpu != expected:
        raise Refused(checked.path, f"ran on GPU {_cut(checked.gpu)} but its machine folder "
                                    f"{checked.machine}/ holds {_cut(expected)} (its machine.json); one "
                                    "folder, one GPU model")


def folder_gpu(folder: Path) -> str | None:
    """The GPU model of the stored machine folder ``folder``: its ``machine.json``'s (:func:`gpu_of`);
    None when it has none that passes :func:`check` (then its own check names it)."""
    try:
        return check(folder / "machine.json", "machine", folder.name).gpu
    except Refused:
        return None


def _cut(value: object, limit: int = 60) -> str:
    text = str(value).replace("\n", " ")
    return repr(text[:limit] + ("..." if len(text) > limit else ""))


#: The largest figure a run can produce, per asv unit (a call of an hour; 1 PB/s; ...). A larger
#: one is impossible, and asv's step detection grew past 13 GB in 90 s on 1e308 (issue 42).
MAX_FIGURE = {"seconds": 3600.0, "GB/s": 1e6, "%": 1e5, "TFLOP/s": 1e6, "mJ": 1e9}


@dataclass(frozen=True)
class Bound:
    """What a number field of a file from another host may hold: a number (an int where
    ``integer``) from ``low`` to ``high`` (``low`` itself unless ``above``), null where
    ``optional``, NaN and infinity where ``nan`` (a correctness error that could not be computed)."""

    low: float
    high: float
    integer: bool = False
    above: bool = False
    optional: bool = True
    nan: bool = False
    #: What a value above ``high`` would be, said after it.
    beyond: str = "more than any run writes"


def number_problem(value: object, bound: Bound) -> str | None:
    """Why ``value`` (parsed JSON) is not a number ``bound`` allows, None when it is. The one
    check of a number from another host: its type first, an int compared as an int (exactly,
    never converted: ``math.isfinite(10**400)`` raises OverflowError), a float's finiteness,
    then its range."""
    if value is None:
        return None if bound.optional else "is null"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "is not an integer" if bound.integer else "is not a finite number"
    if type(value) is float:
        if bound.integer:
            return "is not an integer"
        if not math.isfinite(value):
            return None if bound.nan else "is not a finite number"
    if value < bound.low or (bound.above and value == bound.low):
        return ("is not positive" if bound.above else "is negative") if bound.low == 0 else \
            f"is below {bound.low:g}"
    if value > bound.high:
        return f"is larger than {bound.high:g}, {bound.beyond}"
    return None


def figure_problem(value: object, metric, asv: bool = False) -> str | None:
    """Why ``value``, a figure of ``metric`` (``fusebench.metrictable.Metric``) in its record's
    unit (ms for times; with ``asv``, in asv's: seconds), is impossible: not a finite number,
    negative, zero (only an IQR may be: a spread), or beyond :data:`MAX_FIGURE`
    (:func:`number_problem`). None when it is a figure a run can produce."""
    if value is None:
        return "is not a finite number"
    return number_problem(value, _figure_bound(metric, asv))


@functools.cache
def _figure_bound(metric, asv: bool) -> Bound:
    spread = metric.field.endswith("_iqr_ms")
    return Bound(0.0, MAX_FIGURE.get(metric.unit, 1e9) / (1.0 if asv else metric.scale), above=not spread,
                 beyond="more than any run can measure")


#: What a number anywhere else in a file from another host may be when no field rule says more:
#: finite, and no larger than the largest figure of any unit (an int bounded by its digits).
ANY_NUMBER = Bound(-1e15, 1e15)
#: A date or start time in ms since the epoch (asv's ``date``, ``started_at``): from 1970 to 2200.
DATE_MS = Bound(0, 7258118400000, integer=True, beyond="a date after 2200 (ms since 1970)")
#: Counts of calls and repeats a run may time, and of seconds a run may take.
_COUNT = Bound(1, 1e9, integer=True)
_SECONDS = Bound(0, 1e7)

#: The number fields of a run record (``fusebench.record.Sweep``) and their bounds.
SWEEP_NUMBERS = {
    "ceiling_gbps": Bound(0, MAX_FIGURE["GB/s"], above=True, optional=False),
    "peak_tflops": Bound(0, MAX_FIGURE["TFLOP/s"], above=True),
    "rounds": Bound(1, MAX_ROUNDS, integer=True, optional=False),
}
#: Each value of the Sweep's lists and mappings of numbers.
SWEEP_EACH = {
    "ceilings_gbps": SWEEP_NUMBERS["ceiling_gbps"],
    "phases": Bound(0, 1e7, optional=False),
    "methods": Bound(1, 1000, integer=True, optional=False),
}
#: ``Sweep.timing``: the stopping rule (``fusebench.measure.stopping.StopRule``).
TIMING_NUMBERS = {"max_noise": Bound(0, 1), "max_s": Bound(0, 3600), "min_samples": _COUNT}
#: The number fields of a case (``fusebench.record.Record``) other than its metrics' figures.
RECORD_NUMBERS = {
    "seed": Bound(0, 2**64 - 1, integer=True, optional=False),
    "bytes_moved": Bound(0, 2**53, integer=True, optional=False),
    "max_rel_error": Bound(0, math.inf, nan=True),
    "tolerance": Bound(0, 1e6),
    "graph_calls": _COUNT, "repeats": _COUNT, "hot_calls": _COUNT,
    "noise": Bound(0, 1e6), "noise_within": Bound(0, 1e6),
    "bandwidth_cold_gbps": Bound(0, MAX_FIGURE["GB/s"], above=True),
    "launches": Bound(0, 1e9, integer=True), "compile_s": _SECONDS,
    "flops": Bound(0, 2**63, integer=True), "gpu_index": Bound(0, 1023, integer=True),
    "energy_pj_per_byte": Bound(0, 1e15), "energy_w": Bound(0, 1e5),
}
#: Each of a case's ``dropped_rounds`` (0-based round numbers).
DROPPED_ROUND = Bound(0, MAX_ROUNDS - 1, integer=True, optional=False)
#: A round's number fields other than its timings (``fusebench.measure.sweep``), and those of its
#: energy reading.
ROUND_NUMBERS = {"repeats": _COUNT, "cold_repeats": _COUNT}
ENERGY_NUMBERS = {"mj": Bound(-1e12, 1e12), "calls": _COUNT, "s": _SECONDS}  # a reading may be no figure
#: Each count of a round's ``samples`` (per timed mode).
SAMPLES = Bound(0, 1e9, integer=True, optional=False)


def _number(value: object, bound: Bound, path: Path, what: str) -> None:
    if (why := number_problem(value, bound)) is not None:
        raise Refused(path, f"{what} {_cut(value)} {why}")


def _numbers(data: dict, bounds: dict, path: Path, what: str) -> None:
    """Each field of ``bounds`` that ``data`` holds within its bound (a missing one is the
    schema's concern: :func:`_keys`)."""
    for key, bound in bounds.items():
        if key in data:
            _number(data[key], bound, path, f"{what}.{key}" if what else key)


def _each_number(values: object, bound: Bound, path: Path, what: str) -> None:
    items = values.items() if isinstance(values, dict) else enumerate(values) \
        if isinstance(values, list) else ()
    for key, value in items:
        _number(value, bound, path, f"{what}[{key!r}]" if isinstance(key, str) else f"{what}[{key}]")


def check_sweep_numbers(path: Path, data: dict) -> None:
    """The number fields of a run record that passed :func:`check_record`, other than its
    metrics' figures (:func:`check_record_figures`): each within its :class:`Bound`
    (:data:`SWEEP_NUMBERS`, :data:`RECORD_NUMBERS`, ...): a copy ceiling of NaN, -5 or 0, a
    peak of infinity, 0 repeats, -1 bytes or 10**4000 rounds is refused."""
    _numbers(data, SWEEP_NUMBERS, path, "")
    for key, bound in SWEEP_EACH.items():
        _each_number(data.get(key, []), bound, path, key)
    _numbers(_object(data.get("timing", {}), path, "timing"), TIMING_NUMBERS, path, "timing")
    for i, rec in enumerate(data["records"]):
        what = f"records[{i}]"
        _numbers(rec, RECORD_NUMBERS, path, what)
        _each_number(rec.get("dropped_rounds", []), DROPPED_ROUND, path, f"{what}.dropped_rounds")
        for j, rnd in enumerate(rec.get("rounds", [])):
            if isinstance(rnd, dict):
                _numbers(rnd, ROUND_NUMBERS, path, f"{what}.rounds[{j}]")
                if isinstance(rnd.get("energy"), dict):
                    _numbers(rnd["energy"], ENERGY_NUMBERS, path, f"{what}.rounds[{j}].energy")
                if isinstance(rnd.get("samples"), dict):
                    _each_number(rnd["samples"], SAMPLES, path, f"{what}.rounds[{j}].samples")


def read_bytes(path: Path, max_bytes: int) -> bytes:
    """The bytes of ``path``, a regular file no larger than ``max_bytes``, opened without following
    a symlink (and without blocking on a FIFO).

    Raises:
        Refused: a symlink, not a regular file, too large, or unreadable.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise Refused(path, "a symlink; files from another host must be regular files") from None
        raise Refused(path, f"cannot open: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Refused(path, "not a regular file")
        if st.st_size > max_bytes:
            raise Refused(path, f"{st.st_size} bytes, larger than the {max_bytes >> 20} MB accepted"
                          if max_bytes >= 1 << 20 else f"{st.st_size} bytes, larger than the "
                          f"{max_bytes >> 10} KB accepted")
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            total += len(chunk)
            if total > max_bytes:
                raise Refused(path, f"grew past the {max_bytes} bytes accepted while read")
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError as exc:
        raise Refused(path, f"cannot read: {exc.strerror}") from None
    finally:
        os.close(fd)


def record_json(path: Path, raw: bytes) -> bytes:
    """The JSON bytes of the run record ``path`` whose file holds ``raw``: decompressed when its
    name ends ``.xz``, never more than ``fusebench.record.MAX_JSON`` bytes
    (``fusebench.record.decode``).

    Raises:
        Refused: a compressed bomb, a truncated or corrupt stream, or bytes after it.
    """
    from fusebench.record import decode

    try:
        return decode(raw, path.name)
    except ValueError as exc:
        raise Refused(path, str(exc)) from None


def read_record(path: Path) -> tuple[bytes, object]:
    """The bytes of the run record file ``path`` (:func:`read_bytes`) and its JSON parsed
    (:func:`record_json`, :func:`parse`), schema not yet checked.

    Raises:
        Refused: as :func:`read_bytes`, :func:`record_json` and :func:`parse`.
    """
    raw = read_bytes(path, MAX_BYTES["record"])
    return raw, parse(path, record_json(path, raw))


def depth(value: object) -> int:
    """How deep lists and objects nest in ``value`` (a scalar: 0), without recursion."""
    deepest, todo = 0, [(value, 1)]
    while todo:
        item, level = todo.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, level)
        if level > MAX_DEPTH:
            return level
        todo.extend((c, level + 1) for c in children if isinstance(c, (dict, list)))
    return deepest


_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKET = bytes(range(256)).translate(None, b"[]{}")
_AS_PARENS = bytes.maketrans(b"[]{}", b"()()")


def text_depth(data: bytes) -> int:
    """:func:`depth` of the value of ``data``, valid JSON text, read off its brackets outside
    strings (C-speed passes over the bytes instead of a Python walk of every value: a record of
    1.4 MB in 16 ms instead of 50); more than :data:`MAX_DEPTH` stops at ``MAX_DEPTH + 1``. Of
    text whose brackets do not pair, the depth of its pairs."""
    brackets = _JSON_STRING.sub(b"", data).translate(_AS_PARENS, _NOT_BRACKET)
    level = 0
    while brackets and level <= MAX_DEPTH:  # each pass removes the innermost pairs: one level
        shorter = brackets.replace(b"()", b"")
        if len(shorter) == len(brackets):  # unbalanced: not JSON, which the parser then says
            break
        brackets, level = shorter, level + 1
    return level


class _LongInteger(ValueError):
    """An integer literal longer than :data:`MAX_INT_DIGITS` digits (:func:`parse`)."""


def _bounded_int(text: str) -> int:
    """``json.loads``' ``parse_int``: an integer of at most :data:`MAX_INT_DIGITS` digits."""
    if len(text) - text.startswith("-") > MAX_INT_DIGITS:
        raise _LongInteger(f"an integer of {len(text) - text.startswith('-')} digits (no field holds "
                           f"more than {MAX_INT_DIGITS}: 10**400 overflows every float conversion)")
    return int(text)


def parse(path: Path, data: bytes) -> object:
    """``data`` (the bytes of ``path``) as JSON nested at most :data:`MAX_DEPTH` deep, each of its
    integers of at most :data:`MAX_INT_DIGITS` digits (refused before Python builds it, so no
    reader ever converts 10**400 to a float). The nesting is measured on the bytes before they
    are parsed: 100,000 nested brackets never reach the parser's recursion.

    Raises:
        Refused: not UTF-8 JSON, nested too deep, or an integer too long.
    """
    if text_depth(data) > MAX_DEPTH:
        raise Refused(path, f"JSON nested deeper than {MAX_DEPTH} levels")
    try:
        return json.loads(data, parse_int=_bounded_int)
    except RecursionError:
        raise Refused(path, f"JSON nested deeper than {MAX_DEPTH} levels") from None
    except _LongInteger as exc:
        raise Refused(path, str(exc)) from None
    except ValueError as exc:
        raise Refused(path, f"not valid JSON: {str(exc).splitlines()[0][:100]}") from None


def _need(ok: bool, path: Path, why: str) -> None:
    if not ok:
        raise Refused(path, why)


def _match(pattern: re.Pattern, value: object, path: Path, what: str) -> str:
    if not (isinstance(value, str) and pattern.fullmatch(value) is not None):
        raise Refused(path, f"{what} {_cut(value)} is not {_DESCRIBE[pattern]}")
    return value


_DESCRIBE = {MACHINE: "a machine name (letters, digits, '.', '_', '-')", COMMIT: "40 hex digits",
             IDENT: "an identifier", BENCHMARK: "a benchmark name (identifiers joined by '.')",
             PARAM: "a parameter value", ENV_NAME: "an environment name",
             PLAIN: "plain text (no markup characters such as < > & \" ', at most 300 characters)"}


def _object(value: object, path: Path, what: str) -> dict:
    _need(isinstance(value, dict), path, f"{what} is not a JSON object")
    return value


def _plain_fields(value: object, path: Path, what: str, allow_numbers: bool = False) -> None:
    for key, item in _object(value, path, what).items():
        _match(IDENT, key, path, f"{what} key")
        if allow_numbers and isinstance(item, (int, float)) and not isinstance(item, bool):
            continue
        _match(PLAIN, item, path, f"{what}.{key}")


def check_machine(path: Path, data: object, machine: str) -> None:
    """``<machine>/machine.json``: ``version`` 1, ``machine`` equal to its folder's name (else asv
    silently leaves the folder out), every other field plain text (each is a selector and a
    tooltip on the site)."""
    data = _object(data, path, "machine.json")
    _need(data.get("version") == 1, path, "machine.json version is not 1")
    _need(data.get("machine") == machine, path, f"machine {_cut(data.get('machine'))} differs from its "
          f"folder {machine}/ (asv would leave the folder out)")
    _plain_fields({k: v for k, v in data.items() if k != "version"}, path, "machine.json")


#: The keys of an asv 0.6 result file (``asv.results.Results.save``).
RESULT_KEYS = {"commit_hash", "env_name", "date", "params", "python", "requirements", "env_vars",
               "result_columns", "results", "durations", "version"}
_DURATION = re.compile(r"<build>|<setup_cache [A-Za-z0-9_.:]{1,200}>")


def _params(value: object, path: Path, what: str) -> None:
    _need(isinstance(value, list) and all(isinstance(axis, list) for axis in value), path,
          f"{what} is not a list of lists")
    for axis in value:
        for p in axis:
            _match(PARAM, p, path, f"{what} value")


def check_result(path: Path, data: object, machine: str) -> str:
    """An asv result file ``<machine>/<sha8>-<env>.json`` (format 2). Returns its commit.

    Its commit is 40 hex digits whose first 8 are the file name's, the environment is the rest of
    the name, ``params.machine`` is the folder's, benchmark names and parameter values match
    :data:`BENCHMARK` and :data:`PARAM`, and every string of ``params`` is plain text.
    """
    data = _object(data, path, "result file")
    _need(data.get("version") == 2, path, "not an asv result file of format 2")
    extra = sorted(set(data) - RESULT_KEYS)
    _need(not extra, path, f"unknown key {_cut(extra[0]) if extra else ''} in an asv result file")
    named = RESULT_NAME.fullmatch(path.name)
    _need(named is not None, path, "not named <sha8>-<environment>.json")
    commit = _match(COMMIT, data.get("commit_hash"), path, "commit_hash")
    _need(commit[:8] == named.group(1), path, f"commit_hash {commit[:12]} disagrees with the file name")
    env = _match(ENV_NAME, data.get("env_name"), path, "env_name")
    _need(env == named.group(2), path, f"env_name {_cut(env)} disagrees with the file name")
    _number(data.get("date"), DATE_MS, path, "date")
    _plain_fields(data.get("params"), path, "params")
    _need(data["params"].get("machine") == machine, path,
          f"params.machine {_cut(data['params'].get('machine'))} differs from its folder {machine}/")
    if "python" in data:
        _match(PLAIN, data["python"], path, "python")
    for key in ("requirements", "env_vars"):
        _plain_fields(data.get(key, {}), path, key)
    columns = data.get("result_columns")
    _need(isinstance(columns, list), path, "result_columns is not a list")
    for c in columns:
        _match(IDENT, c, path, "result column")
    for name, row in _object(data.get("results"), path, "results").items():
        _match(BENCHMARK, name, path, "benchmark name")
        _need(isinstance(row, list) and len(row) <= len(columns), path, f"results of {name} are not a row")
        cells = dict(zip(columns, row))
        if cells.get("params") is not None:
            _params(cells["params"], path, f"params of {name}")
        if cells.get("version") is not None:
            _match(PLAIN, cells["version"], path, f"version of {name}")
        _cells(path, name, cells)
    for key, value in _object(data.get("durations", {}), path, "durations").items():
        _need(isinstance(key, str) and (_DURATION.fullmatch(key) or BENCHMARK.fullmatch(key)), path,
              f"durations key {_cut(key)} is not a benchmark name")
        _number(value, Bound(0, 1e7, optional=False), path, f"durations of {_cut(key)}")
    return commit


#: asv's columns of a result row other than ``result``, ``params`` and ``version``, and what each
#: value (one per parameter combination where the benchmark has parameters) may be: asv's
#: publish reads them as numbers (``asv.results``, ``asv._stats.get_weight``).
_CELL_BOUNDS = {"started_at": DATE_MS, "duration": Bound(0, 1e7),
                **{c: Bound(-1e15, 1e15, nan=True) for c in ("stats_ci_99_a", "stats_ci_99_b", "stats_q_25",
                                                              "stats_q_75")},
                "stats_number": Bound(0, 1e12), "stats_repeat": Bound(0, 1e12)}


def _cells(path: Path, name: str, cells: dict) -> None:
    """The cells of one result row: a parametrized benchmark's ``result`` is a list of one value
    per combination of its ``params`` (asv's publish indexes it so), its statistics numbers or
    null, its samples lists of numbers or null, its profile text or null."""
    params = cells.get("params") or []
    combos = math.prod(len(axis) for axis in params) if params else None
    result = cells.get("result")
    if combos is not None and result is not None:
        _need(isinstance(result, list) and len(result) == combos, path, f"results of {name}: "
              f"{len(result) if isinstance(result, list) else 'not a list of'} values for {combos} "
              "parameter combinations")
    for column, bound in _CELL_BOUNDS.items():
        value = cells.get(column)
        if isinstance(value, list) and column not in ("started_at",):
            _each_number(value, bound, path, f"{column} of {name}")
        else:
            _number(value, bound, path, f"{column} of {name}")
    samples = cells.get("samples")
    if samples is not None:
        _need(isinstance(samples, list), path, f"samples of {name} is not a list")
        for s in samples:
            _need(s is None or isinstance(s, list), path, f"samples of {name} is not a list of lists")
            _each_number(s or [], Bound(-1e15, 1e15, optional=False), path, f"samples of {name}")
    _need(cells.get("profile") is None or isinstance(cells["profile"], str), path,
          f"profile of {name} is not text")


#: The keys asv 0.6 writes for a benchmark in ``benchmarks.json``, and the check of each value.
_NUMBER = "number"
BENCHMARK_KEYS = {
    "code": "code", "name": "name", "param_names": "idents", "params": "params", "pretty_name": "plain",
    "pretty_source": "code", "setup_cache_key": "plain", "timeout": _NUMBER, "type": "type",
    "unit": "plain", "version": "plain", "number": _NUMBER, "repeat": "any", "min_run_count": _NUMBER,
    "rounds": _NUMBER, "sample_time": _NUMBER, "warmup_time": _NUMBER, "processes": _NUMBER,
}
_TYPES = {"time", "track", "mem", "peakmem"}
#: Source code shown on the site (asv shows it as text, highlighted): bounded, not patterned.
MAX_CODE = 1 << 16


def check_benchmarks(path: Path, data: object) -> None:
    """``benchmarks.json``: ``version`` and, for each benchmark, a name matching :data:`BENCHMARK`
    (asv's page writes names into HTML as they are), the known asv fields only, parameter names
    identifiers, parameter values :data:`PARAM`, unit and version plain text."""
    data = _object(data, path, "benchmarks.json")
    _need(isinstance(data.get("version"), int), path, "benchmarks.json has no integer version")
    for name, bm in data.items():
        if name != "version":
            check_benchmark(path, name, bm)


#: The fields asv 0.6 writes for every benchmark, which its publish reads without a default.
BENCHMARK_REQUIRED = ("name", "type", "version", "params", "param_names")


def check_benchmark(path: Path, name: object, bm: object) -> None:
    """One benchmark ``name`` -> ``bm`` of ``benchmarks.json`` (see :func:`check_benchmarks`),
    with asv's own rule (``asv.commands.publish.check_benchmark_params``): as many parameter names
    as parameter axes."""
    _match(BENCHMARK, name, path, "benchmark name")
    bm = _object(bm, path, f"benchmark {name}")
    missing = [k for k in BENCHMARK_REQUIRED if k not in bm]
    _need(not missing, path, f"benchmark {name}: missing {', '.join(missing)}")
    names, axes = (len(v) if isinstance(v, list) else "no list of" for v in (bm["param_names"], bm["params"]))
    _need(isinstance(names, int) and names == axes, path, f"benchmark {name}: {names} parameter name(s) for "
          f"{axes} parameter axes (asv's publish stops on it)")
    for key, value in bm.items():
        kind = BENCHMARK_KEYS.get(key)
        _need(kind is not None, path, f"benchmark {name}: unknown field {_cut(key)}")
        what = f"benchmark {name}: {key}"
        if kind == "name":
            _need(value == name, path, f"{what} {_cut(value)} differs from its key")
        elif kind == "idents":
            _need(isinstance(value, list), path, f"{what} is not a list")
            for v in value:
                _match(IDENT, v, path, what)
        elif kind == "params":
            _params(value, path, what)
        elif kind == "plain":
            _match(PLAIN, value, path, what)
        elif kind == "code":
            _need(isinstance(value, str) and len(value) <= MAX_CODE, path, f"{what} is not text "
                  f"of at most {MAX_CODE} characters")
        elif kind == _NUMBER:
            _number(value, ANY_NUMBER, path, what)
        elif kind == "type":
            _need(value in _TYPES, path,
                  f"{what} {_cut(value)} is not one of {', '.join(sorted(_TYPES))}")


_RECORD_TEXT = {"op": IDENT, "backend": IDENT, "dtype": IDENT}
_SHAPE = SHAPE


def check_record(path: Path, data: object, machine: str | None, named: bool = True) -> str:
    """A run record ``records/<machine>/<sha8>.json.xz`` (``fusebench.record.Sweep``, its
    format version). Returns its commit.

    Its keys are the Sweep's (those without a default present) with their types,
    ``environment.git_commit`` is 40 hex digits whose first 8 name the file (unless not ``named``:
    a record exported elsewhere, ``bench --json``), and each case's keys are a ``Record``'s with op,
    backend, dtype and shape matching their patterns.
    """
    from fusebench.record import ENERGY_SCOPES, FORMAT_VERSION, Record, Sweep

    data = _object(data, path, "run record")
    _need(data.get("format_version") == FORMAT_VERSION, path,
          f"not a fusebench run record of format {FORMAT_VERSION}")
    _keys(data, Sweep, path, "run record")
    _types(data, Sweep, path, "run record")
    name = RECORD_NAME.fullmatch(path.name)
    _need(name is not None or not named, path, "not named <sha8>.json.xz (or <sha8>.json)")
    env = _object(data["environment"], path, "environment")
    commit = _match(COMMIT, env.get("git_commit"), path, "environment.git_commit")
    _need(name is None or commit[:8] == name.group(1), path,
          f"git_commit {commit[:12]} disagrees with the file name")
    _need(isinstance(data["grid"], str) and IDENT.fullmatch(data["grid"].replace("-", "_")) is not None,
          path, f"grid {_cut(data['grid'])} is not a grid name")
    _need(data.get("energy_scope", "all") in ENERGY_SCOPES, path,
          f"energy_scope {_cut(data.get('energy_scope'))} is not one of {', '.join(ENERGY_SCOPES)}")
    _need(isinstance(data["records"], list), path, "records is not a list")
    for i, rec in enumerate(data["records"]):
        rec = _object(rec, path, f"records[{i}]")
        _keys(rec, Record, path, f"records[{i}]")
        _types(rec, Record, path, f"records[{i}]")
        for key, pattern in _RECORD_TEXT.items():
            _match(pattern, rec[key], path, f"records[{i}].{key}")
        _match(_SHAPE, rec["shape"], path, f"records[{i}].shape")
    return commit


_DESCRIBE[_SHAPE] = "a shape (numbers joined by 'x')"

#: A Python version as a record's environment gives it (``3.12.3``).
PYTHON = re.compile(r"([0-9]{1,3})\.([0-9]{1,3})(\.[0-9]{1,4})?")
#: A case's status in a run record.
STATUSES = ("ok", "failed", "skipped")


def check_record_figures(path: Path, data: dict) -> None:
    """What the gate and asv's files read, in a run record that passed :func:`check_record`:
    each case's ``status`` one of :data:`STATUSES`, each metric's field
    (``fusebench.metrictable``) and each round's timing (``fusebench.record.ROUND_FIELDS``) null
    or a figure a run can produce (:func:`figure_problem`), no case twice. The machine fields are
    checked on the entry made of them (:func:`check_machine`); ``environment.python`` names the
    asv environment, so it must be a version."""
    from fusebench.metrictable import METRICS
    from fusebench.record import ROUND_FIELDS

    by_field = {m.field: m for m in METRICS}
    python = data["environment"].get("python")
    _need(python is None or (isinstance(python, str) and PYTHON.fullmatch(python) is not None), path,
          f"environment.python {_cut(python)} is not a Python version")
    seen = set()
    def fast(m):  # (field, metric, the largest figure, whether 0 is one): a plain figure passes here
        return m.field, m, MAX_FIGURE.get(m.unit, 1e9) / m.scale, m.field.endswith("_iqr_ms")

    metrics = [fast(m) for m in METRICS]
    timings = [fast(by_field[name]) for name in ROUND_FIELDS]
    for i, rec in enumerate(data["records"]):  # messages built only on a refusal: 10^6 figures a collect
        if rec.get("status", "ok") not in STATUSES:
            raise Refused(path, f"records[{i}].status {_cut(rec.get('status'))} is not one of "
                                f"{', '.join(STATUSES)}")
        for name, m, top, zero in metrics:
            value = rec.get(name)
            if value is None or (type(value) is float and (0.0 < value <= top or (zero and value == 0.0))):
                continue
            if (why := figure_problem(value, m)) is not None:
                tail = " or null" if why == "is not a finite number" else " (null when not measured)"
                raise Refused(path, f"records[{i}].{name} {_cut(value)} {why}{tail}")
        rounds = rec.get("rounds", [])
        _need(isinstance(rounds, list), path, f"records[{i}].rounds is not a list")
        for j, rnd in enumerate(rounds):
            if not isinstance(rnd, dict):
                raise Refused(path, f"records[{i}].rounds[{j}] is not a JSON object")
            for name, m, top, zero in timings:
                value = rnd.get(name)
                if value is None or (type(value) is float
                                     and (0.0 < value <= top or (zero and value == 0.0))):
                    continue
                if (why := figure_problem(value, m)) is not None:
                    raise Refused(path, f"records[{i}].rounds[{j}].{name} {_cut(value)} {why}")
        key = (rec["op"], rec["backend"], rec["shape"], rec["dtype"])
        if key in seen:
            raise Refused(path, f"records[{i}]: case {'/'.join(key)} is in the record twice")
        seen.add(key)
    check_sweep_numbers(path, data)


def check_result_figures(path: Path, data: dict) -> None:
    """Each value of an asv result file that passed :func:`check_result`: null (the case
    failed), NaN (skipped) or a figure a run can produce (:func:`figure_problem`, in asv's unit)
    for a metric of ``fusebench.metrictable``; a finite number (:data:`ANY_NUMBER`) for another
    benchmark."""
    from fusebench.metrictable import BY_NAME

    column = data["result_columns"].index("result") if "result" in data["result_columns"] else None
    if column is None:
        return
    for name, row in data["results"].items():
        if column >= len(row):
            continue
        values = row[column] if isinstance(row[column], list) else [row[column]]
        metric = BY_NAME.get(name.rsplit(".", 1)[-1])
        for value in values:
            if value is None or (isinstance(value, float) and math.isnan(value)):
                continue
            why = number_problem(value, ANY_NUMBER) if metric is None else \
                figure_problem(value, metric, asv=True)
            _need(why is None, path, f"a value of {name} {_cut(value)} {why} (null when failed, NaN "
                                     "when skipped)")


@functools.cache
def _is(kind: str):
    """A test of whether a value (parsed JSON) is of the dataclass annotation ``kind``
    (``"int | None"``, ``"list[float]"``, ``"dict[str, int]"``: the annotations of ``Record`` and
    ``Sweep``), built once per annotation (a collect checks millions of fields). An int is a
    float; a bool is neither."""
    if " | " in kind:
        tests = [_is(k) for k in kind.split(" | ")]
        return lambda v: any(t(v) for t in tests)
    if kind == "None":
        return lambda v: v is None
    if kind == "int":
        return lambda v: type(v) is int
    if kind == "float":
        return lambda v: type(v) is float or type(v) is int
    if kind in ("str", "bool", "dict"):
        py = {"str": str, "bool": bool, "dict": dict}[kind]
        return lambda v: isinstance(v, py)
    if kind == "list[Record]":  # each checked as a Record by check_record
        return lambda v: isinstance(v, list)
    if kind.startswith("list[") and kind.endswith("]"):
        inner = _is(kind[5:-1])
        return lambda v: isinstance(v, list) and all(inner(x) for x in v)
    if kind.startswith("dict[str, ") and kind.endswith("]"):
        inner = _is(kind[10:-1])
        return lambda v: isinstance(v, dict) and all(inner(x) for x in v.values())
    raise ValueError(f"no check for the annotation {kind!r}")


@functools.cache
def _typed_fields(cls) -> dict:
    """``{field: (annotation, its test)}`` of the dataclass ``cls``, less a metric's figure (left
    to :func:`check_record_figures`, which says what a figure must be)."""
    from fusebench.metrictable import METRICS

    figures = {m.field for m in METRICS}
    return {f.name: (f.type, _is(f.type)) for f in fields(cls) if f.name not in figures}


def _types(data: dict, cls, path: Path, what: str) -> None:
    """Each of ``data``'s values is of its ``cls`` field's annotation (a string where ``rounds``
    must be a number crashed the gate, the tables and publish with a traceback: issue 42)."""
    typed = _typed_fields(cls)
    for key, value in data.items():
        if key in typed and not typed[key][1](value):
            raise Refused(path, f"{what}.{key} {_cut(value)} is not of type {typed[key][0]}")


@functools.cache
def _field_names(cls) -> tuple[frozenset, tuple]:
    """The field names of the dataclass ``cls``, and those without a default."""
    return (frozenset(f.name for f in fields(cls)),
            tuple(f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING))


def _keys(data: dict, cls, path: Path, what: str) -> None:
    """``data``'s keys are fields of the dataclass ``cls``, every field without a default present."""
    names, required = _field_names(cls)
    if not names.issuperset(data):
        raise Refused(path, f"{what}: unknown field {_cut(sorted(set(data) - names)[0])}")
    missing = [n for n in required if n not in data]
    _need(not missing, path, f"{what}: missing {', '.join(missing)}")


def check(path: Path, kind: str, machine: str | None = None) -> Checked:
    """Read and check one file of ``kind`` (``result``, ``record``, ``machine``, ``benchmarks``)
    stored under ``machine``'s folder.

    Raises:
        Refused: the file fails (one line naming it and why).
    """
    if kind == "record":
        data, value = read_record(path)
    else:
        data = read_bytes(path, MAX_BYTES[kind])
        value = parse(path, data)
    commit = None
    if kind == "result":
        commit = check_result(path, value, machine)
        check_result_figures(path, value)
    elif kind == "record":
        commit = check_record(path, value, machine)
        check_record_figures(path, value)
    elif kind == "machine":
        check_machine(path, value, machine)
    else:
        check_benchmarks(path, value)
    return Checked(path, kind, machine, commit, len(data), hashlib.sha256(data).hexdigest(),
                   gpu_of(kind, value))


def entries(folder: Path) -> list[os.DirEntry]:
    """The entries of ``folder``, sorted by name, which must be a real folder (not a symlink).

    Raises:
        Refused: ``folder`` is a symlink or not a folder, or an entry is a symlink or neither a
            regular file nor a folder.
    """
    try:
        st = os.lstat(folder)
    except OSError as exc:
        raise Refused(folder, f"cannot read: {exc.strerror}") from None
    if stat.S_ISLNK(st.st_mode):
        raise Refused(folder, "a symlink; folders from another host must be real folders")
    if not stat.S_ISDIR(st.st_mode):
        raise Refused(folder, "not a folder")
    with os.scandir(folder) as it:
        found = sorted(it, key=lambda e: e.name)
    for e in found:
        if e.is_symlink():
            raise Refused(Path(e.path), "a symlink; files and folders from another host must be real")
        if not (e.is_file(follow_symlinks=False) or e.is_dir(follow_symlinks=False)):
            raise Refused(Path(e.path), "not a regular file or folder")
    return found


def checked_copy(results_dir: Path, into: Path) -> list[Refused]:
    """Copy into ``into`` the files of ``results_dir`` that ``asv publish`` reads and that pass
    their checks: ``benchmarks.json`` (less each benchmark that fails), and per machine folder its
    ``machine.json`` and result files (a folder whose ``machine.json`` fails is left out whole, as
    asv would). Returns what was refused, each left out; the published site then holds no string
    that failed.

    Stored files came from other hosts too (``collect``, ``git pull``): the site is built from
    this copy, never from ``results_dir`` itself.
    """
    refused: list[Refused] = []
    into.mkdir(parents=True, exist_ok=True)

    def keep(path: Path, kind: str, machine: str | None, target: Path, gpu: str | None = None) -> str | None:
        """Copy ``path`` to ``target`` when it passes; its GPU model (:func:`gpu_of`), else None."""
        try:
            data = read_bytes(path, MAX_BYTES[kind])
            value = parse(path, data)
            if kind == "result":
                check_result(path, value, machine)
                check_result_figures(path, value)
            else:
                check_machine(path, value, machine)
            said = Checked(path, kind, machine, None, len(data), "", gpu_of(kind, value))
            same_gpu(said, gpu)
        except Refused as exc:
            refused.append(exc)
            return None
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        return said.gpu

    try:
        top = entries(results_dir)
    except Refused as exc:
        return [exc]
    for entry in top:
        path = Path(entry.path)
        if entry.name == "benchmarks.json":
            _keep_benchmarks(path, into / entry.name, refused)
        elif entry.is_dir(follow_symlinks=False):
            try:
                files = [e for e in entries(path) if e.name.endswith(".json")]
            except Refused as exc:
                refused.append(exc)
                continue
            if not files or not (path / "machine.json").is_file():
                continue
            if MACHINE.fullmatch(entry.name) is None:
                refused.append(Refused(path, "not a machine name (letters, digits, '.', '_', '-')"))
                continue
            gpu = keep(path / "machine.json", "machine", entry.name, into / entry.name / "machine.json")
            if gpu is None:
                continue
            for e in files:
                if e.name != "machine.json":
                    keep(Path(e.path), "result", entry.name, into / entry.name / e.name, gpu)
    return refused


def _keep_benchmarks(path: Path, target: Path, refused: list[Refused]) -> None:
    """Copy ``benchmarks.json`` without the benchmarks that fail :func:`check_benchmark` (each
    named in ``refused``); nothing when the file itself fails."""
    try:
        data = _object(parse(path, read_bytes(path, MAX_BYTES["benchmarks"])), path, "benchmarks.json")
        _need(isinstance(data.get("version"), int), path, "benchmarks.json has no integer version")
    except Refused as exc:
        refused.append(exc)
        return
    kept = {"version": data["version"]}
    for name, bm in data.items():
        if name == "version":
            continue
        try:
            check_benchmark(path, name, bm)
        except Refused as exc:
            refused.append(exc)
            continue
        kept[name] = bm
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(kept))
