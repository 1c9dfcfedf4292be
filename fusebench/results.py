"""Reading stored asv results (``results/<machine>/<sha8>-<env>.json``) back, for the regression
gate and the plots.

Files are read with asv's own loader (``asv.results.Results.load``), so its format details
(``result_columns``, trailing columns dropped when empty) stay asv's business. Each value is a
float, ``None`` when the case *failed* (the benchmark raised: a case that failed the correctness
gate is stored that way on purpose) or NaN when it was *skipped* (``NotImplementedError``: not on
this machine, not in the run's grid, a metric not measured on this device).
"""

from __future__ import annotations

import ast
import itertools
import json
import math
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


def read_file(path: Path) -> Run:
    """One asv result file as a :class:`Run`.

    Raises:
        UsageError: the file is not an asv result file (one line naming it).
    """
    from asv.results import Results
    from asv.util import UserError

    try:
        res = Results.load(str(path))
    except (UserError, OSError, ValueError, KeyError) as exc:
        raise UsageError(f"cannot read asv result file {path}: {exc}") from None
    values: dict[str, dict[Params, float | None]] = {}
    for name in res.get_all_result_keys():
        params = res.get_result_params(name) or []
        flat = res.get_result_value(name, params)
        combos = list(itertools.product(*params)) if params else [()]
        if not isinstance(flat, list):
            flat = [flat]
        values[name] = {tuple(_plain(p) for p in combo): v for combo, v in zip(combos, flat)}
    fields = {k: v for k, v in res.params.items()}
    return Run(machine=fields.get("machine", path.parent.name), commit=res.commit_hash,
               date=res.date or 0, fields=fields, values=values, files=[path])


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


def load_commit(results_dir: Path, machine: str, commit: str) -> Run:
    """The stored results of the full sha ``commit`` on ``machine``.

    Raises:
        UsageError: no results folder for the machine, or no result file of that commit.
    """
    if not (results_dir / machine).is_dir():
        have = ", ".join(machines(results_dir)) or "none"
        raise UsageError(f"no results for machine {machine!r} in {results_dir}/ (machines: {have})")
    runs = [read_file(p) for p in (results_dir / machine).glob(f"{commit[:8]}-*.json")]
    runs = [r for r in runs if r.commit == commit]
    if not runs:
        stored = sorted({p.name[:8] for p in result_files(results_dir, machine)})
        raise UsageError(f"no results for commit {commit[:8]} on machine {machine!r} in "
                         f"{results_dir}/{machine}/ (commits stored: {', '.join(stored) or 'none'})")
    return merge(sorted(runs, key=lambda r: r.files[0].name))


def load_latest(results_dir: Path, machine: str, prefix: str = "") -> Run:
    """The stored results of ``machine``'s most recent commit (by commit date) that measured a
    benchmark whose name starts with ``prefix`` (``"suite.Gelu."``: the newest run of that op;
    a run of other ops only, such as ``make bench OP=matmul``, is passed over).

    Raises:
        UsageError: the machine has no such result.
    """
    files = result_files(results_dir, machine)
    runs = [r for r in (read_file(p) for p in files)
            if any(name.startswith(prefix) and any(is_measured(v) for v in vals.values())
                   for name, vals in r.values.items())]
    if not runs:
        raise UsageError(f"no results for machine {machine!r} in {results_dir}/"
                         + (f" with {prefix}*" if prefix else ""))
    newest = max(runs, key=lambda r: r.date)
    return merge([r for r in runs if r.commit == newest.commit])


def units(results_dir: Path) -> dict[str, str]:
    """``{benchmark name: unit}`` from asv's ``results/benchmarks.json`` (written by ``asv run``).

    Raises:
        UsageError: the file is missing or unreadable.
    """
    path = results_dir / "benchmarks.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot read {path} (asv writes it on every run): {exc}") from None
    return {name: b.get("unit", "") for name, b in data.items() if isinstance(b, dict)}
