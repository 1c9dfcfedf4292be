"""Keeping results with asv: the asv machine, a staged ``asv run``, and publishing.

* the asv machine is one GPU model on one host (``h200``); its fields (GPU, driver, CUDA,
  torch, triton, image and base image digests, lock hash) are written into ``~/.asv-machine.json`` because
  ``asv machine --yes`` stores only the name, and each field becomes a selector in the site;
* ``asv run --set-commit-hash`` (the only way asv saves results with ``environment_type:
  existing``) runs into a staging folder first; only when it succeeds are its files copied into
  ``results/``, so a failed or interrupted run never overwrites or deletes stored results;
* the asv environment is named by the Python version (``existing-py3.12``,
  ``fusebench/history/asv_env.py``), not by the interpreter's path: one result file per commit and
  machine wherever the checkout lives. A file of the commit stored under a path name by an
  earlier run of the same Python version is carried into that file (see :func:`run_asv`).
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import site
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from fusebench import config, metrictable, tmpdirs
from fusebench.history import transaction
from fusebench.history.asvsuite import SWEEP_ENV
from fusebench.measure import environment
from fusebench.paths import PROJECT_ROOT

#: The asv environment type and plugin of ``fusebench/history/asv_env.py`` (not imported here: it
#: imports asv, which runs in its own process).
ENV_TYPE = "stable"
ENV_PLUGIN = ".fusebench.history.asv_env"

ASV_CONF = PROJECT_ROOT / "asv.conf.json"


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
    info["where"] = env.get("where") or environment.where(env)
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
    transaction.write_atomic(path, json.dumps(data, indent=4))
    return path


def staged_config(staging: Path, results_dir: Path) -> Path:
    """A copy of ``asv.conf.json`` with absolute paths, writing results under ``staging``."""
    conf = json.loads(ASV_CONF.read_text())
    conf.update(repo=str(PROJECT_ROOT), benchmark_dir=str(PROJECT_ROOT / conf["benchmark_dir"]),
                results_dir=str(staging / "results"), env_dir=str(staging / "env"),
                html_dir=str(staging / "html"))
    conf["plugins"] = [*conf.get("plugins", []), ENV_PLUGIN]
    path = staging / "asv.conf.json"
    path.write_text(json.dumps(conf, indent=4))
    return path


def bench_pattern(classes: list[str] | None = None, metrics: list[str] | None = None) -> str | None:
    """The ``asv run --bench`` regular expression selecting the ``track_*`` methods ``metrics`` of
    the asv classes ``classes`` (None: all of either); None when both are None (everything).

    asv matches it against ``suite.<Class>.<method>(<params>)`` for each parameter combination
    (asv docs, "asv run": ``--bench``), so a metric name is closed by ``(`` and
    ``track_device_time`` does not select ``track_device_time_cold``.
    """
    if not classes and not metrics:
        return None
    owners = rf"^suite\.({'|'.join(classes)})\." if classes else r"^suite\.[A-Za-z0-9_]+\."
    return owners + (rf"({'|'.join(metrics)})(\(|$)" if metrics else "")


def asv_command(config: Path, machine: str, commit: str, python: str,
                classes: list[str] | None = None, metrics: list[str] | None = None) -> list[str]:
    """The exact ``asv run`` command line (tests check it); its environment is ``python`` under
    the name ``existing-py<X.Y>`` (:data:`ENV_TYPE`, loaded by :func:`staged_config`).

    ``classes``: run only these asv classes (``["Gelu"]``); the stored results of the others
    are kept (see :func:`run_asv`). ``metrics``: only these ``track_*`` methods of them
    (:func:`bench_pattern`).
    """
    cmd = [python, "-m", "asv", "run", "--config", str(config), "--machine", machine,
           "--set-commit-hash", commit, "-E", f"{ENV_TYPE}:{python}", "--launch-method", "forkserver"]
    pattern = bench_pattern(classes, metrics)
    if pattern:
        cmd += ["--bench", pattern]
    return cmd


#: asv runs one benchmark process per ``track_*`` method and parameter combination, one after
#: another (an H200 grid: about 6,000, 3 minutes). :func:`run_asv` splits the metrics over this
#: many concurrent ``asv run`` processes, by default one per CPU core up to one per metric; this
#: environment variable sets another number (1: one process, as asv alone does).
ASV_JOBS_ENV = "FUSEBENCH_ASV_JOBS"


def metric_groups(jobs: int | None = None, metrics: list[str] | None = None) -> list[list[str]]:
    """The ``track_*`` method names ``metrics`` (None: every one of
    :data:`fusebench.metrictable.METRICS`), dealt round-robin into ``jobs`` groups (None:
    ``$FUSEBENCH_ASV_JOBS``, else the CPU count), one group per concurrent ``asv run``; never
    more groups than metrics, never an empty group.

    Raises:
        ValueError: ``$FUSEBENCH_ASV_JOBS`` is not a positive integer.
    """
    names = list(metrics) if metrics else [m.name for m in metrictable.METRICS]
    if jobs is None:
        raw = os.environ.get(ASV_JOBS_ENV)
        if raw is not None and not (raw.isdigit() and int(raw) > 0):
            raise ValueError(f"{ASV_JOBS_ENV}={raw!r}: expected a positive integer")
        jobs = int(raw) if raw else (os.cpu_count() or 1)
    jobs = max(1, min(jobs, len(names)))
    return [names[i::jobs] for i in range(jobs)]


#: Where ``asv run`` writes its own output (one log per machine and commit, replaced by the next
#: run of that commit): its tables repeat the summary's figures over the whole parameter grid,
#: thousands of n/a lines for a quick run, so the terminal only gets the log's path.
ASV_LOG_DIR = PROJECT_ROOT / ".asv" / "logs"
#: Lines of the log shown when the run fails.
ASV_LOG_TAIL = 30

#: ``asv run`` exits 2 when some benchmark failed (here: a case that failed the correctness
#: gate, stored as a failure on purpose); any other non-zero status means the run itself failed.
ASV_SOME_FAILED = 2


def run_asv(sweep_file: Path, machine: str, commit: str, results_dir: Path,
            python: str = sys.executable, classes: list[str] | None = None,
            jobs: int | None = None, metrics: list[str] | None = None,
            txn: transaction.Transaction | None = None, case_file: Path | None = None) -> int:
    """Run the asv suite over ``sweep_file`` and merge its results into ``results_dir``; the
    suite's parameters are the cases of ``case_file`` (None: ``fusebench.yaml``), the file the
    sweep was measured from.

    The metrics (``metrics``: the ``track_*`` methods the ``classes`` have; None: all) are split
    over concurrent ``asv run`` processes (:func:`metric_groups`; ``jobs``: how many, default
    :data:`ASV_JOBS_ENV` or the CPU count), each in its own staging folder, and each must store
    something (a group of metrics no class has fails the run);
    the groups' result files are then joined into one (:func:`join_result_files`). asv itself
    runs benchmarks one after another, one process each, which made storing an H200 grid take
    as long as measuring it.

    Each staging folder starts with the commit's stored result files of ``machine``: asv loads
    them and replaces only the benchmarks it runs, so a run of some ops (``classes``) keeps the
    other ops' stored results of the same commit. A stored file of the commit named after the
    interpreter's path (fusebench before ``existing-py<X.Y>``) of the same Python version is
    carried into the stable name (:func:`stage_stored`) and deleted once the run is stored.

    asv's own output goes to one log in ``ASV_LOG_DIR``, the groups' outputs one after another
    (the terminal gets the log's path, and its last ``ASV_LOG_TAIL`` lines when nothing was
    stored).

    The result files are stored through ``txn`` (:class:`fusebench.history.transaction.Transaction`:
    the caller commits them together with the run record), or, without one, in a transaction of
    their own committed here: a failed or killed run leaves every stored file as it was.

    Returns 0 when the results were stored (failed cases included, as asv failures), else asv's
    non-zero exit status (127 when ``python`` cannot be started); ``results_dir`` is then untouched.
    """
    version = python_version(python)
    if version is None:
        return 127
    try:
        groups = metric_groups(jobs, metrics)
    except ValueError as exc:
        print(f"asv: {exc}; nothing stored", file=sys.stderr)
        return 1
    env = dict(os.environ, **{SWEEP_ENV: str(sweep_file.resolve()),
                              config.CONFIG_ENV: str(Path(case_file or config.DEFAULT_PATH).resolve())})
    # asv drops PYTHONPATH in benchmark processes, not ASV_PYTHONPATH: the suite imports
    # fusebench and kernels from this checkout (installed or not), then what PYTHONPATH names.
    env["ASV_PYTHONPATH"] = os.pathsep.join(
        p for p in (str(PROJECT_ROOT), env.get("ASV_PYTHONPATH") or env.get("PYTHONPATH")) if p)
    ASV_LOG_DIR.mkdir(parents=True, exist_ok=True)
    log = ASV_LOG_DIR / f"asv-run-{machine}-{commit[:12]}.log"
    with tmpdirs.scratch("asv") as tmp:
        stagings = [tmp / f"group{i}" for i in range(len(groups))]
        carried: list[Path] = []
        for staging in stagings:
            (staging / "results" / machine).mkdir(parents=True, exist_ok=True)
            carried = stage_stored(results_dir / machine, staging / "results" / machine, commit, version)
        started = time.time()

        def one(i: int) -> int:
            config = staged_config(stagings[i], results_dir)
            with (stagings[i] / "asv.log").open("w") as out:
                return subprocess.run(asv_command(config, machine, commit, python, classes, groups[i]),
                                      env=own_machine_file(env, stagings[i]), cwd=PROJECT_ROOT, stdout=out,
                                      stderr=subprocess.STDOUT).returncode

        try:
            with ThreadPoolExecutor(max_workers=len(groups)) as pool:
                statuses = list(pool.map(one, range(len(groups))))
        except OSError:
            return 127
        log.write_text("".join(f"== asv run {i + 1}/{len(groups)}: {', '.join(g)}\n"
                               + (s / "asv.log").read_text(errors="replace")
                               for i, (g, s) in enumerate(zip(groups, stagings))))
        print(f"asv: exit {max(statuses)} ({len(groups)} concurrent runs), its output in {log}",
              file=sys.stderr)
        stored = [[p for p in (s / "results" / machine).glob("*.json")
                   if p.name != "machine.json" and p.stat().st_mtime > started] for s in stagings]
        bad = [i for i, (st, got) in enumerate(zip(statuses, stored))
               if st not in (0, ASV_SOME_FAILED) or not got]
        if bad:  # the output of the first run that failed, not of whichever ran last
            tail = (stagings[bad[0]] / "asv.log").read_text(errors="replace").splitlines()[-ASV_LOG_TAIL:]
            print("\n".join([f"asv: the run stored nothing; the end of asv run {bad[0] + 1}'s output:",
                              *tail]), file=sys.stderr)
            return next((st for st in statuses if st not in (0, ASV_SOME_FAILED)), 0) or 1
        try:
            for i in range(1, len(groups)):
                for f in stored[0]:
                    join_result_files(f, stagings[i] / "results" / machine / f.name,
                                      bench_pattern(classes, groups[i]))
        except (OSError, ValueError) as exc:
            print(f"asv: the concurrent runs' results could not be joined: {exc}", file=sys.stderr)
            return 1
        own = txn is None
        txn = txn or transaction.Transaction(results_dir)
        try:
            merge_results(stagings[0] / "results", results_dir, txn)
            for f in carried:  # now in the commit's file of this environment name
                txn.delete(f)
            if own:
                txn.commit()
        except BaseException:
            if own:
                txn.abort()
            raise
    for f in carried:
        print(f"asv: {f.name} carried into {result_name(commit, version)} (named by the Python "
              "version now, not its path)", file=sys.stderr)
    return 0


def own_machine_file(env: dict, home: Path) -> dict:
    """``env`` for one of several concurrent ``asv run``: ``HOME`` is ``home``, holding a copy of
    the user's ``~/.asv-machine.json``.

    Every ``asv run`` rewrites the machine file as it starts (``Machine.load`` saves it back,
    truncating it; asv 0.6.6 ``asv/machine.py``), so a second run starting then reads an empty
    file and stops ("Error parsing JSON in file .asv-machine.json"). The user's git
    configuration and Python user site, which asv and its benchmark processes would otherwise
    look up under the new ``HOME``, stay where they are (``GIT_CONFIG_GLOBAL``,
    ``PYTHONUSERBASE``).
    """
    home.mkdir(parents=True, exist_ok=True)
    machines = Path(os.path.expanduser("~/.asv-machine.json"))
    if machines.exists():
        shutil.copy2(machines, home / machines.name)
    own = dict(env, HOME=str(home))
    own.setdefault("PYTHONUSERBASE", site.getuserbase())
    gitconfig = Path(os.path.expanduser("~/.gitconfig"))
    if gitconfig.exists():
        own.setdefault("GIT_CONFIG_GLOBAL", str(gitconfig))
    return own


def join_result_files(into: Path, other: Path, pattern: str) -> None:
    """Copy into the asv result file ``into`` the benchmarks of ``other`` that ``other``'s run
    selected (``pattern``, :func:`bench_pattern`), and its setup durations.

    Both are results of one commit, machine and environment, written by ``asv run`` (format
    version 2: ``results`` maps a benchmark name to one row of ``result_columns``; asv's
    developer docs, "Benchmark suite layout and file formats"). ``into`` is rewritten.

    Raises:
        ValueError: a file is not asv's version 2 format, or the two have different columns.
        OSError: a file cannot be read or written.
    """
    a, b = json.loads(into.read_text()), json.loads(other.read_text())
    if a.get("version") != 2 or b.get("version") != 2 or a.get("result_columns") != b.get("result_columns"):
        raise ValueError(f"{other.name}: not an asv result file of format 2 with the same columns")
    selected = re.compile(pattern)
    a["results"].update({name: row for name, row in b["results"].items() if selected.match(f"{name}(")})
    a.setdefault("durations", {}).update(b.get("durations", {}))
    into.write_text(json.dumps(a))


def python_version(python: str) -> str | None:
    """``"3.12"``: the ``major.minor`` version of the interpreter ``python``; None when it cannot
    be run."""
    try:
        out = subprocess.run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                             capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def env_name(version: str) -> str:
    """The asv environment name of Python ``version`` (``"3.12"``): ``"existing-py3.12"``; the
    same as ``fusebench.history.asv_env.env_name``, asv's naming, without importing asv."""
    return f"existing-py{version}"


def result_name(commit: str, version: str) -> str:
    """The result file asv writes for ``commit`` with Python ``version``:
    ``<sha8>-existing-py3.12.json``."""
    return f"{commit[:8]}-{env_name(version)}.json"


def stage_stored(stored_dir: Path, staging_dir: Path, commit: str, version: str) -> list[Path]:
    """Copy the stored result files of ``commit`` from ``stored_dir`` (one machine's folder) into
    ``staging_dir``, where asv loads the file of its environment and replaces only the
    benchmarks it runs.

    A file stored by an earlier fusebench under asv's path name (``existing-py_<path>``: its
    ``python`` is a path) whose interpreter, run now, is Python ``version``, and no file of the
    stable name yet: copied under the stable name (:func:`result_name`), its ``env_name`` and
    ``python`` fields rewritten, so that the run adds to it. Other files are copied as they are.
    The stored files are not touched.

    Returns the stored path-named files carried over (the caller deletes them once the run's
    files are stored).
    """
    stable = stored_dir / result_name(commit, version)
    carried: list[Path] = []
    for f in sorted(stored_dir.glob(f"{commit[:8]}-*.json")):
        try:
            data = json.loads(f.read_text())
        except (OSError, ValueError):
            data = None
        legacy = (isinstance(data, dict) and "/" in str(data.get("python", ""))
                  and data.get("commit_hash") == commit)
        if legacy and not stable.exists() and not carried and python_version(data["python"]) == version:
            data["env_name"] = env_name(version)
            data["python"] = version
            data.setdefault("params", {})["python"] = version
            (staging_dir / stable.name).write_text(json.dumps(data))
            carried.append(f)
        else:
            shutil.copy2(f, staging_dir / f.name)
    return carried


def merge_results(src: Path, dst: Path, txn: transaction.Transaction | None = None) -> list[Path]:
    """Copy asv result files from ``src`` into ``dst``, replacing only files of the same name,
    through ``txn`` (stored at its commit), or each atomically now without one.

    Returns the files written (or to be written).
    """
    written = []
    for f in sorted(src.rglob("*.json")):
        target = dst / f.relative_to(src)
        if txn is not None:
            txn.add_copy(target, f)
        else:
            transaction.write_atomic(target, f.read_bytes())
        written.append(target)
    return written


def publish(results_dir: Path, html_dir: Path, python: str = sys.executable) -> int:
    """``asv publish`` of every stored result into ``html_dir``; returns asv's exit status."""
    with tmpdirs.scratch("asvconf") as tmp:
        conf = json.loads(ASV_CONF.read_text())
        conf.update(repo=str(PROJECT_ROOT), benchmark_dir=str(PROJECT_ROOT / conf["benchmark_dir"]),
                    results_dir=str(results_dir.resolve()), html_dir=str(html_dir.resolve()),
                    env_dir=str(Path(tmp) / "env"))
        path = Path(tmp) / "asv.conf.json"
        path.write_text(json.dumps(conf, indent=4))
        return subprocess.run([python, "-m", "asv", "publish", "--config", str(path)],
                              cwd=PROJECT_ROOT).returncode
