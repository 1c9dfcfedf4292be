"""A real ``asv run`` of the suite in ``benchmarks/`` over a sweep file, as a user (or fusebench
before it wrote asv's files itself) runs it: the reference the in-process writer is checked
against (``tests/test_asv_store.py``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from fusebench.asv import asvsuite, store
from fusebench.paths import PROJECT_ROOT


def asv_run(sweep_file: Path, machine: str, commit: str, info: dict, into: Path, case_file: Path,
            python: str = sys.executable) -> subprocess.CompletedProcess:
    """``asv run --set-commit-hash commit`` of the whole suite of the cases of ``case_file``,
    reading its figures from ``sweep_file`` (``FUSEBENCH_SWEEP``), its machine ``info`` from a
    machine file in ``into/home`` and its results into ``into/results``, the environment named by
    the Python version (``fusebench/asv/asv_env.py``, loaded as an asv plugin)."""
    from fusebench import config
    from fusebench.asv import asv_env

    home = into / "home"
    home.mkdir(parents=True, exist_ok=True)
    (home / ".asv-machine.json").write_text(json.dumps({"version": 1, machine: info}))
    conf = json.loads(store.ASV_CONF.read_text())
    conf.update(repo=str(PROJECT_ROOT), benchmark_dir=str(store.BENCHMARK_DIR),
                results_dir=str(into / "results"), env_dir=str(into / "env"), html_dir=str(into / "html"),
                plugins=[asv_env.PLUGIN])
    conf_file = into / "asv.conf.json"
    conf_file.write_text(json.dumps(conf))
    env = dict(os.environ, HOME=str(home), **{asvsuite.SWEEP_ENV: str(sweep_file.resolve()),
                                               config.CONFIG_ENV: str(case_file.resolve())})
    # asv drops PYTHONPATH in benchmark processes, not ASV_PYTHONPATH
    env["ASV_PYTHONPATH"] = os.pathsep.join(p for p in (str(PROJECT_ROOT), env.get("PYTHONPATH")) if p)
    gitconfig = Path(os.path.expanduser("~/.gitconfig"))
    if gitconfig.exists():
        env.setdefault("GIT_CONFIG_GLOBAL", str(gitconfig))
    return subprocess.run([python, "-m", "asv", "run", "--config", str(conf_file), "--machine", machine,
                           "--set-commit-hash", commit, "-E", f"{asv_env.TOOL_NAME}:{python}",
                           "--launch-method", "forkserver"],
                          cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=1800)
