"""Storing a run with asv: its result files written from the run record, in this process, with
asv's own classes; and publishing.

The run record (``records/<machine>/<sha8>.json.xz``, a :class:`~fusebench.record.Sweep`) is
the source; :func:`stage` writes from it, through a transaction, the three files asv reads:

* ``<machine>/<sha8>-existing-py<X.Y>.json``: an ``asv.results.Results`` of the commit, loaded
  from the stored file when there is one (a run of some ops keeps the other ops' results, as
  ``asv run`` does), each benchmark of the run's ops replaced through ``Results.add_result`` and
  written by ``Results.save``;
* ``<machine>/machine.json``: an ``asv.machine.Machine`` of :func:`machine_info`;
* ``benchmarks.json``: an ``asv.benchmarks.Benchmarks`` of :func:`definitions`, the suite of
  ``benchmarks/suite.py`` described as asv's discovery describes it.

Each value is what the suite's ``track_*`` method returns for the record under ``asv run``
(``fusebench/asv/asvsuite.py``): the record's field times the metric's scale, NaN for a case
skipped, outside the run's grid or not measured on this device, None (asv's failure) for a
failed case. ``benchmarks/`` stays a real asv suite: ``asv run`` over a sweep file stores the
same values (a slow test compares the two).

The environment is named by the Python version (``existing-py3.12``, the name
``fusebench/asv/asv_env.py`` gives asv's ``existing`` environment), not by the interpreter's
path: one result file per commit and machine wherever the checkout lives. A file of the commit
stored under a path name by an earlier fusebench with the same Python version is carried into
that file and deleted with the same commit.
"""

from __future__ import annotations

import datetime
import inspect
import itertools
import json
import math
import platform
import subprocess
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path

from fusebench import metrictable, tmpdirs
from fusebench.asv import asvsuite
from fusebench.errors import UsageError
from fusebench.paths import PROJECT_ROOT
from fusebench.storage import transaction, untrusted

ASV_CONF = PROJECT_ROOT / "asv.conf.json"
#: The folder of the asv suite (``asv.conf.json``'s ``benchmark_dir``).
BENCHMARK_DIR = PROJECT_ROOT / "benchmarks"


#: Fields of the host that measured, kept out of asv's machine entry: every machine field is a key
#: of asv's series, and two hosts of one GPU model (16 or 32 CPUs, another RAM size or kernel build,
#: on the host or in the image) would split one case's history into several lines. They stay in
#: the run record's environment (``records/<machine>/<sha8>.json.xz``).
HOST_FIELDS = ("os", "cpu", "num_cpu", "ram", "where")


def machine_info(name: str, env: dict, host: dict | None = None) -> dict:
    """The asv machine entry for ``name`` from a captured environment (``environment.capture``):
    what defines the GPU and the stack (the series keys: ``machine``, ``arch``, ``gpu``,
    ``driver``, ``cuda``, ``torch``, ``triton``, and in the image its digests and lock hash),
    never :data:`HOST_FIELDS`.

    ``arch`` is the environment's own (records since it was captured), else ``host``'s (the
    machine's earlier stored entry), else this host's when ``host`` is None; with a ``host`` that
    lacks it, it is left out rather than taken from another host.
    """
    if host is None:
        from fusebench.measure.environment import ram_bytes

        host = {"os": f"{platform.system()} {platform.release()}", "arch": platform.machine(),
                "ram": ram_bytes()}
    fields = {key: env.get(key) or host.get(key) for key in ("os", "arch", "ram")}
    info = {"machine": name, "os": fields["os"], "arch": fields["arch"], "cpu": env.get("cpu", ""),
            "num_cpu": str(env.get("num_cpu", "")), "ram": fields["ram"], "gpu": env.get("gpu", "none"),
            "driver": env.get("driver", "none"), "cuda": env.get("cuda_runtime") or "none",
            "torch": env.get("torch", ""), "triton": env.get("triton") or "none"}
    info = {k: (str(v) if k in fields else v) for k, v in info.items() if not (k in fields and not v)}
    for key in ("image_digest", "base_digest", "lock_hash"):
        if env.get(key):
            info[key] = env[key]
    return {k: v for k, v in info.items() if k not in HOST_FIELDS}


def python_version(env: dict) -> str:
    """``"3.12"``: the ``major.minor`` Python of a record's environment (``"3.12.3"``), else this
    interpreter's.

    Raises:
        UsageError: the environment's ``python`` is not a version.
    """
    given = env.get("python")
    if given is None:
        return "%d.%d" % sys.version_info[:2]
    m = untrusted.PYTHON.fullmatch(str(given))
    if m is None:
        raise UsageError(f"environment.python {str(given)[:40]!r} is not a Python version")
    return f"{m.group(1)}.{m.group(2)}"


def env_name(version: str) -> str:
    """The asv environment name of Python ``version`` (``"3.12"``): ``"existing-py3.12"``; the
    same as ``fusebench.asv.asv_env.env_name``, asv's naming."""
    return f"existing-py{version}"


def result_name(commit: str, version: str) -> str:
    """The result file of ``commit`` with Python ``version``: ``<sha8>-existing-py3.12.json``."""
    return f"{commit[:8]}-{env_name(version)}.json"


def definitions(ops) -> list[dict]:
    """Every benchmark of the suite generated for ``ops`` (``asvsuite.suite_classes``), as asv's
    discovery lists it for ``benchmarks.json``: the ``asv_runner`` benchmark object of each
    ``track_*`` method (asv_runner's ``_get_benchmark``), its public plain fields
    (``asv_runner.discovery.list_benchmarks``). A test checks them against discovery of the real
    ``benchmarks/`` folder."""
    from asv_runner.benchmarks import benchmark_types

    module = types.ModuleType(f"{BENCHMARK_DIR.name}.{asvsuite.BENCHMARK_MODULE}")
    found = []
    for klass in asvsuite.suite_classes(ops):
        for attr, member in inspect.getmembers(klass):
            kind = next((t for t in benchmark_types if t.name_regex.match(attr)), None)
            if kind is None or not inspect.isfunction(member):
                continue
            instance = klass()
            method = getattr(instance, attr)
            bench = kind(f"{asvsuite.BENCHMARK_MODULE}.{klass.__name__}.{attr}", method,
                         [method, instance, module])
            found.append({k: v for k, v in bench.__dict__.items()
                          if isinstance(v, (str, int, float, list, dict, bool)) and not k.startswith("_")})
    return found


def values(klass: type, metric: metrictable.Metric, by_key: dict) -> list[float | None]:
    """The value of ``metric`` for each parameter combination of the asv class ``klass`` (asv's
    order), from the records ``by_key`` (``Sweep.by_key``): what the suite's ``track_*`` method
    gives under ``asv run`` (module doc)."""
    out: list[float | None] = []
    for backend, shape, dtype in itertools.product(*klass.params):
        rec = by_key.get((klass.op, backend, shape, dtype))
        if rec is None or rec.status == "skipped":
            out.append(math.nan)
        elif rec.status == "failed":
            out.append(None)
        else:
            value = getattr(rec, metric.field)
            out.append(math.nan if value is None else value * metric.scale)
    return out


def commit_date(commit: str) -> int | None:
    """The date asv gives ``commit``'s results (``asv.plugins.git.Git.get_date``: the author
    time, ms since the epoch); None when this checkout's history lacks the commit."""
    from asv import util
    from asv.plugins.git import Git

    try:
        return Git(str(PROJECT_ROOT), str(PROJECT_ROOT)).get_date(commit)
    except (util.ProcessError, IndexError, ValueError, OSError):
        return None


@dataclass
class Staged:
    """What :func:`stage` handed to the transaction: the files to be written, the stored
    path-named files to be deleted (carried into the stable name), and the ops of the record
    the suite does not have (not written)."""

    files: list[Path] = field(default_factory=list)
    carried: list[Path] = field(default_factory=list)
    unknown_ops: list[str] = field(default_factory=list)


def stage(record, machine: str, commit: str, results_dir: Path, txn: transaction.Transaction,
          suite_ops, ops: list[str] | None = None, host: dict | None = None) -> Staged:
    """Hand ``txn`` asv's files of ``record`` (a :class:`~fusebench.record.Sweep`) for
    ``machine`` and ``commit`` in ``results_dir``: the commit's result file, ``machine.json`` and
    ``benchmarks.json`` (module doc). Nothing is stored until ``txn`` commits.

    Args:
        suite_ops: every :class:`~fusebench.registry.Op` of the case file: the suite's classes.
        ops: the ops whose benchmarks are replaced (default: every op of ``record``); the stored
            file's other benchmarks are kept.
        host: the ``os``, ``arch`` and ``ram`` of the host that measured (see :func:`machine_info`).

    Raises:
        UsageError: a stored file of the commit cannot be read, or the commit has no date (not
            in this checkout's history and no stored file of it).
    """
    from asv.machine import Machine
    from asv.results import Results
    from asv.runner import BenchmarkResult

    suite_ops = tuple(suite_ops)
    version = python_version(record.environment)
    name = result_name(commit, version)
    info = machine_info(machine, record.environment, host)
    by_key = record.by_key()
    wanted = sorted({r.op for r in record.records}) if ops is None else list(ops)
    known = {op.name for op in suite_ops}
    staged = Staged(unknown_ops=[o for o in wanted if o not in known])
    stored = results_dir / machine
    defs = definitions(suite_ops)
    by_name = {d["name"]: d for d in defs}
    with tmpdirs.scratch("asvwrite") as tmp:
        (tmp / machine).mkdir()
        base = tmp if _carry(stored, tmp / machine, commit, version, staged) else results_dir
        try:
            old = None
            if (base / machine / name).is_file():  # checked first: it may have come by git pull
                untrusted.check(base / machine / name, "result", machine)
                old = Results.load(str(base / machine / name))
        except untrusted.Refused as exc:
            raise UsageError(f"cannot read the stored {stored / name} ({exc.why}); move it away and store "
                             "again") from None
        except Exception as exc:  # asv's UserError, or a file that is not asv's at all
            raise UsageError(f"cannot read the stored {stored / name} ({str(exc).splitlines()[0][:200]}); "
                             "move it away and store again") from None
        date = commit_date(commit) or (old.date if old is not None else None)
        if date is None:
            raise UsageError(f"commit {commit[:12]} is not in this checkout's git history (asv dates "
                             "results by their commit): fetch it, then store again")
        result = Results({**info, "python": version}, {}, commit, date, version, env_name(version), {})
        if old is not None:
            result.load_data(str(base))
        now = datetime.datetime.now(datetime.timezone.utc)
        op_by_name = {o.name: o for o in suite_ops}
        for klass in asvsuite.suite_classes(suite_ops):
            if klass.op not in wanted:
                continue
            for metric in metrictable.for_op(op_by_name[klass.op].flops is not None):
                bench = by_name[asvsuite.benchmark_name(klass.op, metric.name)]
                vals = values(klass, metric, by_key)
                if _unchanged(result, bench, vals):  # its stored run times stay: a rebuild is idempotent
                    continue
                n = len(vals)
                result.add_result(bench, BenchmarkResult(result=vals, samples=[None] * n, number=[None] * n,
                                                         errcode=0, stderr="", profile=None), started_at=now)
        result.save(str(tmp))
        machine_entry = Machine()
        machine_entry.__dict__.update(info)
        machine_entry.save(str(tmp))
        _save_suite(tmp, defs)
        for rel in (Path(machine) / name, Path(machine) / "machine.json", Path("benchmarks.json")):
            txn.add_bytes(results_dir / rel, (tmp / rel).read_bytes())
            staged.files.append(results_dir / rel)
    for f in staged.carried:
        txn.delete(f)
    return staged


def _save_suite(folder: Path, defs: list[dict]) -> None:
    """asv's ``benchmarks.json`` of the benchmarks ``defs`` (:func:`definitions`), into ``folder``."""
    from asv.benchmarks import Benchmarks
    from asv.config import Config

    conf = Config()
    conf.results_dir, conf.benchmark_dir = str(folder), str(BENCHMARK_DIR)
    Benchmarks(conf, defs).save()


def stage_suite(results_dir: Path, txn: transaction.Transaction, suite_ops) -> Path:
    """Hand ``txn`` the results folder's ``benchmarks.json`` for the suite of ``suite_ops`` alone
    (no result file): what every store writes, written after an op or a backend was added, before
    any run has measured it. Returns its path."""
    with tmpdirs.scratch("asvsuite") as tmp:
        _save_suite(tmp, definitions(tuple(suite_ops)))
        txn.add_bytes(results_dir / "benchmarks.json", (tmp / "benchmarks.json").read_bytes())
    return results_dir / "benchmarks.json"


def _unchanged(result, bench: dict, vals: list) -> bool:
    """Whether the asv ``result`` already holds ``vals`` for the benchmark ``bench`` (its version
    and parameters). A result stored before a backend was added to the axis holds the same values
    when every combination it lacks is NaN (the record has no case of it): it stays as stored, and
    asv reads it under the new parameters (``Results.get_result_value``)."""
    name = bench["name"]
    if name not in result.get_all_result_keys() or result.benchmark_version.get(name) != bench["version"]:
        return False
    stored_params = result.get_result_params(name)
    if stored_params == bench["params"]:
        return repr(result.get_result_value(name, bench["params"])) == repr(vals)
    if len(stored_params) != len(bench["params"]) or any(
            not set(old) <= set(new) for old, new in zip(stored_params, bench["params"])):
        return False
    stored = dict(zip(itertools.product(*stored_params), result.get_result_value(name, stored_params)))
    new = dict(zip(itertools.product(*bench["params"]), vals))
    return all(repr(stored[k]) == repr(v) if k in stored else isinstance(v, float) and math.isnan(v)
               for k, v in new.items())


def _carry(stored: Path, into: Path, commit: str, version: str, staged: Staged) -> bool:
    """When ``stored`` (a machine's folder) has no stable-named file of ``commit`` but a file of
    it stored under asv's path name (``existing-py_<path>``) whose interpreter is Python
    ``version`` when run now, or is not on this host (the record of the same commit and machine
    says which Python measured): that file, its ``env_name`` and ``python`` rewritten, copied into
    ``into`` under the stable name (noted in ``staged.carried``). Returns whether one was."""
    if (stored / result_name(commit, version)).exists():
        return False
    for f in sorted(stored.glob(f"{commit[:8]}-existing-py_*.json")):
        try:
            data = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        if not (isinstance(data, dict) and data.get("commit_hash") == commit
                and "/" in str(data.get("python", ""))):
            continue
        if _interpreter_version(str(data["python"])) not in (version, None):
            continue
        data["env_name"] = env_name(version)
        data["python"] = version
        data.setdefault("params", {})["python"] = version
        (into / result_name(commit, version)).write_text(json.dumps(data))
        staged.carried.append(f)
        return True
    return False


def _interpreter_version(python: str) -> str | None:
    """``"3.12"``: the version of the interpreter at ``python``; None when it cannot be run."""
    try:
        out = subprocess.run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                             capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def publish(results_dir: Path, html_dir: Path, python: str = sys.executable) -> int:
    """``asv publish`` of every stored result into ``html_dir`` (``fusebench.asv.asv_publish``:
    asv's step detection fed a few graphs at a time); returns asv's exit status."""
    with tmpdirs.scratch("asvconf") as tmp:
        conf = json.loads(ASV_CONF.read_text())
        conf.update(repo=str(PROJECT_ROOT), benchmark_dir=str(BENCHMARK_DIR),
                    results_dir=str(results_dir.resolve()), html_dir=str(html_dir.resolve()),
                    env_dir=str(Path(tmp) / "env"))
        path = Path(tmp) / "asv.conf.json"
        path.write_text(json.dumps(conf, indent=4))
        from fusebench.children import ending_with_parent

        # a group of its own: its SIGTERM (from stop_publishing, or this process's death) ends
        # asv's pool workers too (fusebench.asv.asv_publish)
        proc = subprocess.Popen([python, "-m", "fusebench.asv.asv_publish", "--config", str(path)],
                                cwd=PROJECT_ROOT, preexec_fn=ending_with_parent(), start_new_session=True)
        RUNNING.add(proc)
        try:
            return proc.wait()
        finally:
            RUNNING.discard(proc)


#: The ``asv publish`` processes running now (:func:`publish` runs in a worker thread; an
#: interrupted publish stops them, :func:`stop_publishing`, instead of waiting for them).
RUNNING: set = set()


def stop_publishing() -> None:
    """Terminate every ``asv publish`` of :data:`RUNNING` and wait for it (a Ctrl-C or SIGTERM
    of ``fusebench publish`` otherwise waited minutes for asv to finish)."""
    for proc in list(RUNNING):
        proc.terminate()
    for proc in list(RUNNING):
        proc.wait()
