"""Synthetic asv result files for tests, in the format of the committed ``results/h200/*.json``."""

from __future__ import annotations

import itertools
import json
import subprocess
from pathlib import Path

from fusebench.metrictable import METRICS
from fusebench.paths import PROJECT_ROOT

UNITS = {**{m.name: m.unit for m in METRICS}, "track_launches": "count"}


def main_commits(n: int) -> list[str]:
    """The last ``n`` commits of branch ``main`` (asv publishes only commits on it), oldest first."""
    out = subprocess.run(["git", "rev-list", "-n", str(n), "main"], cwd=PROJECT_ROOT, capture_output=True,
                         text=True, check=True).stdout.split()
    assert len(out) == n, "the test needs a git checkout with enough history on main"
    return out[::-1]


def write_result(results: Path, machine: str, commit: str, values: dict, axes: list[list[str]],
                 fields: dict | None = None, date: int = 1_700_000_000_000) -> Path:
    """Write ``results/<machine>/<sha8>-existing-py.json`` (and machine.json, benchmarks.json).

    ``values`` is ``{benchmark name: {(backend, shape, dtype): value}}``; a case left out is
    skipped (NaN), ``None`` is a failure. ``axes`` are the three parameter lists.
    """
    params = {"machine": machine, "gpu": "NVIDIA H200", "driver": "580.0", "cuda": "13.0",
              "torch": "2.11.0", "triton": "3.6.0", "python": "/usr/bin/python3", **(fields or {})}
    rows = {}
    for name, cases in values.items():
        flat = [cases.get(combo, float("nan")) for combo in itertools.product(*axes)]
        rows[name] = [flat, [[repr(v) for v in axis] for axis in axes], "1", date, 0.5]
    data = {"commit_hash": commit, "env_name": "existing-py", "date": date, "params": params,
            "python": "/usr/bin/python3", "requirements": {}, "env_vars": {},
            "result_columns": ["result", "params", "version", "started_at", "duration"],
            "results": rows, "durations": {}, "version": 2}
    folder = results / machine
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{commit[:8]}-existing-py.json"
    path.write_text(json.dumps(data))
    (folder / "machine.json").write_text(json.dumps({**{k: v for k, v in params.items() if k != "python"},
                                                     "version": 1}))
    bench = results / "benchmarks.json"
    known = json.loads(bench.read_text()) if bench.exists() else {"version": 2}
    for name in values:
        metric = name.rsplit(".", 1)[1]
        known[name] = {"name": name, "unit": UNITS[metric], "type": "track", "version": "1",
                       "param_names": ["backend", "shape", "dtype"],
                       "params": [[repr(v) for v in axis] for axis in axes], "code": "", "timeout": 60}
    bench.write_text(json.dumps(known))
    return path
