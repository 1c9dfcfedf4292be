"""The case file, ``fusebench.yaml``: per op its shapes per grid, dtypes, backends and headline
shape, and the run settings (rounds, the stopping rule of each round's timing, the gate's factor
and alpha).

The ops themselves (reference, declared work, backends) are Python modules in ``kernels/``; this
file says which of their cases a run measures, so adding a shape or a dtype edits only the YAML.
The file at the repository root is the default (packaged as ``fusebench/fusebench.yaml``, a link
to it, so that an installed fusebench has it too); ``--config PATH`` names another.

Every error is one line naming the file, the key (``ops.softmax.grids.default[3]``) and the valid
values: :class:`ConfigError`, a :class:`fusebench.errors.UsageError` (exit status 2).
"""

from __future__ import annotations

import dataclasses
import math
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from fusebench import metrictable, safeyaml
from fusebench.axes import BACKENDS, CASE_FILE, ELEMENT_SIZE, Shape, parse_shape, shape_label
from fusebench.errors import UsageError
from fusebench.names import did_you_mean
from fusebench.record import MAX_ROUNDS, SHAPE

if TYPE_CHECKING:  # the registry imports torch; reading a case file must not (fusebench.axes)
    from fusebench.registry import Op

#: The packaged default; in a checkout a link to ``fusebench.yaml`` at the repository root.
DEFAULT_PATH = CASE_FILE
#: The environment variable that hands the case file to asv's benchmark processes
#: (``benchmarks/suite.py``), which asv starts with no argument of ours; nothing else reads it:
#: the commands pass the case file down as a path.
CONFIG_ENV = "FUSEBENCH_CONFIG"
#: The grids every op declares (see :class:`fusebench.registry.Op`).
GRIDS = ("default", "cpu", "quick", "cpu-quick", "nsys")
#: Code defaults of the settings (the YAML documents the same values). Rounds and alpha are the
#: sweep's and the gate's own defaults (``sweep.DEFAULT_ROUNDS``, ``compare.ALPHA``; a test checks
#: they agree), written here so that reading the case file imports neither.
DEFAULT_ROUNDS = 3
DEFAULT_FACTOR = metrictable.DEFAULT_FACTOR
DEFAULT_ALPHA = 0.05
#: The stopping rule's defaults, ``settings.timing`` (``fusebench.measure.stopping.DEFAULT``'s; a
#: test checks they agree), written here for the same reason.
DEFAULT_MAX_NOISE, DEFAULT_MAX_S, DEFAULT_MIN_SAMPLES = 0.0005, 0.04, 10
#: The plain dtypes: an op's dtype axis when its entry names none.
DEFAULT_DTYPES = ("float32", "bfloat16", "float16")

#: The most elements a shape may have: 2^32 elements take 103 GB as a float32 input and output
#: plus the float64 reference (24 B per element), within an H200's 141 GB; checked on reading,
#: before any tensor is built.
MAX_ELEMENTS = 1 << 32
#: Bytes a case holds per element of its shape at most: a float32 input and output, and the
#: float64 input and reference of the correctness gate. A run refuses, before measuring, a shape
#: the device's memory cannot hold (``preflight.memory``).
BYTES_PER_ELEMENT = 24

_TOP_KEYS = ("settings", "ops")
_SETTINGS_KEYS = ("rounds", "timing", "gate")
_TIMING_KEYS = ("max_noise", "max_s", "min_samples")
#: The stopping rule's bounds: a target under 1e-5 (0.001 %) or a cap over 1 s per mode is a typo
#: (a round of the default grid would take hours); more than 10 000 samples likewise.
MAX_NOISE_RANGE = (1e-5, 0.1)
MAX_S_RANGE = (0.001, 1.0)
MAX_MIN_SAMPLES = 10_000
_GATE_KEYS = ("factor", "alpha")
_OP_KEYS = ("dtypes", "backends", "headline", "grids")


class ConfigError(UsageError):
    """The case file is missing, not YAML, or holds a value that is not valid (one line)."""


@dataclass(frozen=True)
class OpCases:
    """One op's entry: ``grids`` (grid name -> shapes), ``dtypes``, ``headline``, and ``backends``
    as written (None: every backend the op registers; checked by :meth:`Config.apply`)."""

    grids: dict[str, list[Shape]]
    dtypes: tuple[str, ...]
    backends: Any
    headline: Shape | None


@dataclass(frozen=True)
class Config:
    """A read and checked case file.

    Attributes:
        path: the file it was read from.
        rounds: interleaved rounds per case (>= 1).
        max_noise, max_s, min_samples: the stopping rule of each timed mode in each round
            (``settings.timing``: the fields of ``fusebench.measure.stopping.StopRule``).
        factor: the gate's allowed slowdown before noise (>= 1; 1.04 = 4 %).
        alpha: the gate's significance level, in (0, 1).
        ops: op name -> its entry as written, in the file's order (checked by :meth:`apply`).
    """

    path: Path
    rounds: int = DEFAULT_ROUNDS
    factor: float = DEFAULT_FACTOR
    alpha: float = DEFAULT_ALPHA
    ops: dict[str, Any] = field(default_factory=dict)
    max_noise: float = DEFAULT_MAX_NOISE
    max_s: float = DEFAULT_MAX_S
    min_samples: int = DEFAULT_MIN_SAMPLES

    def cases(self, name: str) -> OpCases:
        """Op ``name``'s entry, checked as far as it can be without the op (no torch): its grids,
        dtypes and headline, and its backends, when listed, among the backend names
        (:meth:`apply` checks them against the ones the op registers).

        Raises:
            ConfigError: a value is not valid (one line: file, key, valid values).
        """
        cases = _op_cases(self.path, name, self.ops[name])
        if cases.backends is None:
            return cases
        return dataclasses.replace(cases, backends=_names(self.path, f"ops.{name}.backends", cases.backends,
                                                          BACKENDS, "backend"))

    def apply(self, registered: Mapping[str, Op]) -> dict[str, Op]:
        """The ops of ``registered`` (name -> :class:`Op` as its module built it) that this file
        names, in the file's order, each with its grids, dtypes, headline and backends from here.

        Raises:
            ConfigError: an op of the file is not registered, or a registered op is not in the
                file (the key and the valid names); an op registers a backend that no op of the
                default case file lists (the backend axis), or this file lists one the op does
                not register: one line naming the file to edit.
        """
        for name in self.ops:
            if name not in registered:
                raise ConfigError(f"{_show(self.path)}: ops.{name}: no such op; valid ops: "
                                  f"{', '.join(registered)}")
        for name in registered:
            if name not in self.ops:
                raise ConfigError(f"{_show(self.path)}: ops: {name} is missing (every registered op "
                                  f"needs an entry); valid ops: {', '.join(registered)}")
        for name, op in registered.items():
            if unlisted := [b for b in op.backends if b not in BACKENDS]:
                raise ConfigError(f"{_show(DEFAULT_PATH)}: ops.{name}.backends: kernels/{name}/ registers "
                                  f"backend {_q(unlisted[0])}, which no op's backends list names: add it "
                                  f"to ops.{name}.backends in {_show(DEFAULT_PATH)}")
        out = {}
        for name, entry in self.ops.items():
            op = registered[name]
            cases = _op_cases(self.path, name, entry)
            backends = _check_op(self.path, op, cases)
            out[name] = dataclasses.replace(
                op, grids={g: list(s) for g, s in cases.grids.items()}, dtypes=cases.dtypes,
                headline=cases.headline, backends={b: op.backends[b] for b in backends})
        return out


def _show(path: Path) -> str:
    """``path`` as the user would write it: relative to the working directory when inside it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _q(value: Any) -> str:
    """A value as the user wrote it, cut to one short line (a long list is not printed whole)."""
    return safeyaml.quote(value) if isinstance(value, str) else safeyaml.quote(repr(value))[1:-1]


def _fail(path: Path, key: str, problem: str) -> ConfigError:
    return ConfigError(f"{_show(path)}: {key}: {problem}")


def _mapping(path: Path, key: str, value: Any, valid: tuple[str, ...]) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _fail(path, key, f"expected a mapping of {', '.join(valid)}, got {_q(value)}")
    for k in value:
        if k not in valid:
            raise _fail(path, f"{key}.{k}" if key else str(k), f"unknown key; valid keys: {', '.join(valid)}")
    return value


def _names(path: Path, key: str, value: Any, valid, kind: str) -> tuple[str, ...]:
    valid = list(valid)
    if not isinstance(value, list) or not value:
        raise _fail(path, key, f"expected a non-empty list of {kind}s; valid {kind}s: {', '.join(valid)}")
    for i, name in enumerate(value):
        if name not in valid:
            raise _fail(path, f"{key}[{i}]", f"unknown {kind} {_q(name)}{did_you_mean(str(name), valid)}; "
                                             f"valid {kind}s: {', '.join(valid)}")
    if len(set(value)) != len(value):
        raise _fail(path, key, f"a {kind} is listed twice: {_q(value)}")
    return tuple(value)


def _shape(path: Path, key: str, value: Any) -> Shape:
    """A shape as a record stores it (``fusebench.record.SHAPE``: at most 8 dimensions of at most
    12 digits, matched before any is converted), of at most :data:`MAX_ELEMENTS` elements."""
    if isinstance(value, bool) or not isinstance(value, (int, str)) or not SHAPE.fullmatch(str(value)):
        raise _fail(path, key, f"bad shape {_q(value)}; write at most 8 dimensions joined by 'x', e.g. "
                               "4096x4096 (a number for 1-D)")
    shape = parse_shape(str(value))
    if math.prod(shape) == 0:
        raise _fail(path, key, f"bad shape {_q(value)}: a dimension is 0")
    if math.prod(shape) > MAX_ELEMENTS:
        raise _fail(path, key, f"bad shape {_q(value)}: {math.prod(shape):.3g} elements, more than "
                               f"{MAX_ELEMENTS:.3g} (2^{MAX_ELEMENTS.bit_length() - 1}), the most a GPU "
                               "here holds with its float64 reference")
    return shape


def _number(path: Path, key: str, value: Any, low: float, high: float, text: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise _fail(path, key, f"bad value {_q(value)}; valid: {text}")
    return float(value)


def _op_cases(path: Path, name: str, entry: Any) -> OpCases:
    key = f"ops.{name}"
    entry = _mapping(path, key, entry, _OP_KEYS)
    dtypes = (_names(path, f"{key}.dtypes", entry["dtypes"], ELEMENT_SIZE, "dtype")
              if "dtypes" in entry else DEFAULT_DTYPES)
    raw_grids = _mapping(path, f"{key}.grids", entry.get("grids"), GRIDS)
    grids: dict[str, list[Shape]] = {}
    for grid in GRIDS:
        shapes = raw_grids.get(grid)
        if not isinstance(shapes, list) or not shapes:
            raise _fail(path, f"{key}.grids.{grid}", "expected a non-empty list of shapes (every op "
                                                     f"needs the grids {', '.join(GRIDS)})")
        grids[grid] = [_shape(path, f"{key}.grids.{grid}[{i}]", s) for i, s in enumerate(shapes)]
        labels = [shape_label(s) for s in grids[grid]]
        if len(set(labels)) != len(labels):
            raise _fail(path, f"{key}.grids.{grid}", f"a shape is listed twice: {', '.join(labels)}")
    default = [shape_label(s) for s in grids["default"]]
    for grid in GRIDS[1:]:
        for i, s in enumerate(grids[grid]):
            if shape_label(s) not in default:
                raise _fail(path, f"{key}.grids.{grid}[{i}]", f"shape {shape_label(s)} is not in the "
                            f"default grid (asv's parameters); valid shapes: {', '.join(default)}")
    headline = None
    if "headline" in entry:
        headline = _shape(path, f"{key}.headline", entry["headline"])
        if shape_label(headline) not in default:
            raise _fail(path, f"{key}.headline", f"shape {shape_label(headline)} is not in the default "
                                                 f"grid; valid shapes: {', '.join(default)}")
    return OpCases(grids, dtypes, entry.get("backends"), headline)


def _check_op(path: Path, op: Op, cases: OpCases) -> tuple[str, ...]:
    """What needs the registered op: its backend names (returned), and the shapes its declared
    work accepts."""
    key = f"ops.{op.name}"
    if cases.backends is None:
        backends = tuple(op.backends)
    else:
        backends = _names(path, f"{key}.backends", cases.backends, BACKENDS, "backend")
        for i, b in enumerate(backends):
            if b not in op.backends:
                raise _fail(path, f"{key}.backends[{i}]", f"kernels/{op.name}/ registers no backend {_q(b)} "
                            f"(add its factory, @OP.backend({_q(b)}), to kernels/{op.name}/__init__.py); "
                            f"valid backends: {', '.join(op.backends)}")
    if op.flops is not None:
        for grid, shapes in cases.grids.items():
            for i, s in enumerate(shapes):
                try:
                    op.flops(s)
                except ValueError as exc:
                    raise _fail(path, f"{key}.grids.{grid}[{i}]", str(exc)) from None
    return backends


def load(path: Path | str | None = None) -> Config:
    """Read the case file ``path`` (None: :data:`DEFAULT_PATH`; never the environment) and
    check its settings; the op entries are checked by :meth:`Config.apply`, against the ops the
    modules register (their names and backends are the modules', not this file's).

    Raises:
        ConfigError: the file cannot be read or parsed, or a key or value is not valid: one line
            with the file, the key and the valid values.
    """
    path = Path(DEFAULT_PATH if path is None else path)
    text = _text(path)
    try:
        data = safeyaml.load(text)
    except safeyaml.StrictYAMLError as exc:
        raise ConfigError(f"{_show(path)}: {exc}") from None
    data = _mapping(path, "", data, _TOP_KEYS)
    settings = _mapping(path, "settings", data.get("settings"), _SETTINGS_KEYS)
    gate = _mapping(path, "settings.gate", settings.get("gate"), _GATE_KEYS)
    max_noise, max_s, min_samples = _timing(path, _mapping(path, "settings.timing", settings.get("timing"),
                                                             _TIMING_KEYS))
    rounds = settings.get("rounds", DEFAULT_ROUNDS)
    if isinstance(rounds, bool) or not isinstance(rounds, int) or not 1 <= rounds <= MAX_ROUNDS:
        raise _fail(path, "settings.rounds", f"bad value {_q(rounds)}; valid: an integer from 1 to "
                                             f"{MAX_ROUNDS} (a round of the default grid takes minutes)")
    factor = _number(path, "settings.gate.factor", gate.get("factor", DEFAULT_FACTOR), 1.0, 100.0,
                     "a number from 1 to 100 (1.04 allows 4 %)")
    alpha = _number(path, "settings.gate.alpha", gate.get("alpha", DEFAULT_ALPHA), 1e-9, 0.5,
                    "a number above 0 and at most 0.5")
    ops = data.get("ops")
    if not isinstance(ops, dict) or not ops:
        raise _fail(path, "ops", "expected a mapping of op name to its cases")
    return Config(path, rounds, factor, alpha, {str(n): e for n, e in ops.items()}, max_noise=max_noise,
                  max_s=max_s, min_samples=min_samples)


def _text(path: Path) -> str:
    """The case file's text: a regular file (a FIFO or a device is refused unread, without
    blocking: ``/dev/zero`` was read to 2.5 GB), at most ``safeyaml.MAX_BYTES``, UTF-8 (a byte
    that is not is named by its line, column and key).

    Raises:
        ConfigError: one line naming the file.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise ConfigError(f"{_show(path)}: not a regular file; a case file is a YAML file")
            with os.fdopen(os.dup(fd), "rb") as f:
                data = f.read(safeyaml.MAX_BYTES + 1)
        finally:
            os.close(fd)
    except OSError as exc:
        raise ConfigError(f"{_show(path)}: cannot read the case file: {exc.strerror or exc}") from None
    if len(data) > safeyaml.MAX_BYTES:
        raise ConfigError(f"{_show(path)}: larger than {safeyaml.MAX_BYTES // 1024} KB; a case file is a "
                          "few KB")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - data.rfind(b"\n", 0, exc.start)
        key = _key_of(data.decode("utf-8", "replace"), "\ufffd")
        raise ConfigError(f"{_show(path)}: {key + ': ' if key else ''}byte 0x{data[exc.start]:02x} (line "
                          f"{line}, column {column}) is not UTF-8; a case file is UTF-8 text") from None


def _key_of(text: str, mark: str) -> str:
    """The key (``ops.gelu.grids.default[3]``) whose name or value first holds ``mark`` in the YAML
    ``text``; empty when the text does not parse or none does."""
    try:
        todo = [("", safeyaml.load(text))]
    except safeyaml.StrictYAMLError:
        return ""
    while todo:
        key, value = todo.pop(0)
        if isinstance(value, dict):
            for k, v in value.items():
                sub = f"{key}.{k}" if key else str(k)
                if mark in str(k):
                    return sub.replace(mark, "?")
                todo.append((sub, v))
        elif isinstance(value, list):
            todo.extend((f"{key}[{i}]", v) for i, v in enumerate(value))
        elif mark in str(value):
            return key
    return ""


def _timing(path: Path, entry: dict) -> tuple[float, float, int]:
    """``settings.timing``: its max_noise, max_s and min_samples, each left out at its default."""
    lo, hi = MAX_NOISE_RANGE
    max_noise = _number(path, "settings.timing.max_noise", entry.get("max_noise", DEFAULT_MAX_NOISE),
                        lo, hi, f"a number from {lo:g} to {hi:g} (0.0005: the median known within 0.05 %)")
    lo, hi = MAX_S_RANGE
    max_s = _number(path, "settings.timing.max_s", entry.get("max_s", DEFAULT_MAX_S), lo, hi,
                    f"a number of seconds from {lo:g} to {hi:g} (per mode, case and round)")
    n = entry.get("min_samples", DEFAULT_MIN_SAMPLES)
    if isinstance(n, bool) or not isinstance(n, int) or not 5 <= n <= MAX_MIN_SAMPLES:
        raise _fail(path, "settings.timing.min_samples", f"bad value {_q(n)}; valid: an integer from 5 to "
                                                          f"{MAX_MIN_SAMPLES}")
    return max_noise, max_s, n
