"""Keeping results with asv: the asv machine, a staged ``asv run``, and publishing.

* the asv machine is one GPU model on one host (``h200``); its fields (GPU, driver, CUDA,
  torch, triton, image and base image digests, lock hash) are written into ``~/.asv-machine.json`` because
  ``asv machine --yes`` stores only the name, and each field becomes a selector in the site;
* ``asv run --set-commit-hash`` (the only way asv saves results with ``environment_type:
  existing``) runs into a staging folder first; only when it succeeds are its files copied into
  ``results/``, so a failed or interrupted run never overwrites or deletes stored results.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fusebench.asvsuite import SWEEP_ENV
from fusebench.environment import ROOT

ASV_CONF = ROOT / "asv.conf.json"


def machine_info(name: str, env: dict) -> dict:
    """The asv machine entry for ``name`` from a captured environment (see ``environment.capture``)."""
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        ram = 0
    info = {
        "machine": name,
        "os": f"{platform.system()} {platform.release()}",
        "arch": platform.machine(),
        "cpu": env.get("cpu", ""),
        "num_cpu": str(env.get("num_cpu", "")),
        "ram": str(ram),
        "gpu": env.get("gpu", "none"),
        "driver": env.get("driver", "none"),
        "cuda": env.get("cuda_runtime") or "none",
        "torch": env.get("torch", ""),
        "triton": env.get("triton") or "none",
    }
    for key in ("image_digest", "base_digest", "lock_hash"):
        if env.get(key):
            info[key] = env[key]
    return info


def register_machine(info: dict, path: Path | None = None) -> Path:
    """Add or replace ``info["machine"]`` in asv's machine file, keeping other machines.

    Returns the file's path (``~/.asv-machine.json`` unless given).
    """
    path = path or Path(os.path.expanduser("~/.asv-machine.json"))
    data = json.loads(path.read_text()) if path.exists() else {}
    data.setdefault("version", 1)
    data[info["machine"]] = info
    path.write_text(json.dumps(data, indent=4))
    return path


def staged_config(staging: Path, results_dir: Path) -> Path:
    """A copy of ``asv.conf.json`` with absolute paths, writing results under ``staging``."""
    conf = json.loads(ASV_CONF.read_text())
    conf.update(repo=str(ROOT), benchmark_dir=str(ROOT / conf["benchmark_dir"]),
                results_dir=str(staging / "results"), env_dir=str(staging / "env"),
                html_dir=str(staging / "html"))
    path = staging / "asv.conf.json"
    path.write_text(json.dumps(conf, indent=4))
    return path


def asv_command(config: Path, machine: str, commit: str, python: str,
                classes: list[str] | None = None) -> list[str]:
    """The exact ``asv run`` command line (tests check it).

    ``classes``: run only these asv classes (``["Gelu"]``); the stored results of the others
    are kept (see :func:`run_asv`).
    """
    cmd = [python, "-m", "asv", "run", "--config", str(config), "--machine", machine,
           "--set-commit-hash", commit, "-E", f"existing:{python}", "--launch-method", "forkserver"]
    if classes:
        cmd += ["--bench", rf"^suite\.({'|'.join(classes)})\."]
    return cmd


#: Where ``asv run`` writes its own output (one log per machine and commit, replaced by the next
#: run of that commit): its tables repeat the summary's figures over the whole parameter grid,
#: thousands of n/a lines for a quick run, so the terminal only gets the log's path.
ASV_LOG_DIR = ROOT / ".asv" / "logs"
#: Lines of the log shown when the run fails.
ASV_LOG_TAIL = 30

#: ``asv run`` exits 2 when some benchmark failed (here: a case that failed the correctness
#: gate, stored as a failure on purpose); any other non-zero status means the run itself failed.
ASV_SOME_FAILED = 2


def run_asv(sweep_file: Path, machine: str, commit: str, results_dir: Path,
            python: str = sys.executable, classes: list[str] | None = None) -> int:
    """Run the asv suite over ``sweep_file`` and merge its results into ``results_dir``.

    The staging folder starts with the commit's stored result files of ``machine``: asv loads
    them and replaces only the benchmarks it runs, so a run of some ops (``classes``) keeps the
    other ops' stored results of the same commit.

    asv's own output goes to ``ASV_LOG_DIR`` (the terminal gets the log's path, and its last
    ``ASV_LOG_TAIL`` lines when nothing was stored).

    Returns 0 when the results were stored (failed cases included, as asv failures), else asv's
    non-zero exit status (127 when ``python`` cannot be started); ``results_dir`` is then untouched.
    """
    with tempfile.TemporaryDirectory(prefix="fusebench-asv-") as tmp:
        staging = Path(tmp)
        config = staged_config(staging, results_dir)
        for f in (results_dir / machine).glob(f"{commit[:8]}-*.json"):
            (staging / "results" / machine).mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, staging / "results" / machine / f.name)
        env = dict(os.environ, **{SWEEP_ENV: str(sweep_file.resolve())})
        if "PYTHONPATH" in env:  # asv drops PYTHONPATH in benchmark processes, not ASV_PYTHONPATH
            env.setdefault("ASV_PYTHONPATH", env["PYTHONPATH"])
        started = time.time()
        ASV_LOG_DIR.mkdir(parents=True, exist_ok=True)
        log = ASV_LOG_DIR / f"asv-run-{machine}-{commit[:12]}.log"
        try:
            with log.open("w") as out:
                status = subprocess.run(asv_command(config, machine, commit, python, classes),
                                        env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT).returncode
        except OSError:
            return 127
        print(f"asv: exit {status}, its output in {log}", file=sys.stderr)
        stored = [p for p in (staging / "results" / machine).glob("*.json")
                  if p.name != "machine.json" and p.stat().st_mtime > started]
        if status not in (0, ASV_SOME_FAILED) or not stored:
            tail = log.read_text(errors="replace").splitlines()[-ASV_LOG_TAIL:]
            print("\n".join(["asv: the run stored nothing; the end of its output:", *tail]), file=sys.stderr)
            return status or 1
        merge_results(staging / "results", results_dir)
    return 0


def merge_results(src: Path, dst: Path) -> list[Path]:
    """Copy asv result files from ``src`` into ``dst``, replacing only files of the same name.

    Returns the files written.
    """
    written = []
    for f in sorted(src.rglob("*.json")):
        target = dst / f.relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, target)
        written.append(target)
    return written


def publish(results_dir: Path, html_dir: Path, python: str = sys.executable) -> int:
    """``asv publish`` of every stored result into ``html_dir``; returns asv's exit status."""
    with tempfile.TemporaryDirectory(prefix="fusebench-publish-") as tmp:
        conf = json.loads(ASV_CONF.read_text())
        conf.update(repo=str(ROOT), benchmark_dir=str(ROOT / conf["benchmark_dir"]),
                    results_dir=str(results_dir.resolve()), html_dir=str(html_dir.resolve()),
                    env_dir=str(Path(tmp) / "env"))
        path = Path(tmp) / "asv.conf.json"
        path.write_text(json.dumps(conf, indent=4))
        return subprocess.run([python, "-m", "asv", "publish", "--config", str(path)],
                              cwd=ROOT).returncode
