"""asv's files written from a run record in this process (``fusebench.asv.store``): the values
the suite's ``track_*`` methods give, the definitions asv's discovery lists, the committed H200
results rebuilt from their records, a run of some ops keeping the others, the path-named files
of earlier versions carried over; and, slow, a real ``asv run`` of ``benchmarks/`` storing the
same thing."""

import itertools
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from fusebench import metrictable
from fusebench.asv import asvsuite, store
from fusebench.errors import UsageError
from fusebench.ops import OPS
from fusebench.paths import PROJECT_ROOT
from fusebench.record import Record, Sweep
from fusebench.storage import transaction

COMMIT = subprocess.run(["git", "rev-parse", "HEAD"], cwd=PROJECT_ROOT, capture_output=True,
                        text=True).stdout.strip()
VERSION = "%d.%d" % sys.version_info[:2]
CPU = {"device": "cpu", "python": sys.version.split()[0], "gpu": "none", "torch": "2.13.0", "cpu": "x86_64",
       "num_cpu": 2}
HOST = {"os": "Linux 6.0", "arch": "x86_64", "ram": "1000"}


def _sweep(env: dict | None = None) -> Sweep:
    """Every kind of case: timed (one metric not measured on this device), failed, skipped."""
    recs = [
        Record("gelu", "torch", "16384", "float32", wall_time_ms=0.01, bandwidth_gbps=13.1,
               pct_of_ceiling=60.0, clock="host"),
        Record("gelu", "eager", "16384", "float32", status="failed", reason="correctness gate: NaN"),
        Record("gelu", "triton", "16384", "float32", status="skipped", reason="needs a CUDA GPU"),
        Record("softmax", "torch", "16384x1024", "float32", wall_time_ms=1.0, bandwidth_gbps=9.5,
               pct_of_ceiling=40.0, device_time_ms=0.75, clock="host"),
    ]
    return Sweep(dict(CPU, **(env or {})), 21.8, "quick", recs)


def _store(record: Sweep, results: Path, machine: str = "testbox", commit: str = COMMIT,
           ops=None, host=HOST) -> store.Staged:
    with transaction.locked(results, "test"):
        txn = transaction.Transaction(results)
        try:
            staged = store.stage(record, machine, commit, results, txn, OPS.values(), ops=ops, host=host)
            txn.commit()
        finally:
            txn.abort()  # nothing once committed
    return staged


def _rows(path: Path) -> dict:
    data = json.loads(path.read_text())
    return {name: dict(zip(data["result_columns"], row)) for name, row in data["results"].items()}


def _combo(row: dict, combo: tuple) -> float | None:
    return row["result"][list(itertools.product(*row["params"])).index(tuple(repr(v) for v in combo))]


def _track(klass, metric: str, cache: dict, combo: tuple) -> float | None:
    """What asv_runner records for one combination: setup's NotImplementedError or the method's
    SkipNotImplemented is NaN, another exception a failure (None)."""
    bench = klass()
    try:
        bench.setup(cache, *combo)
        return getattr(bench, metric)(cache, *combo)
    except NotImplementedError:
        return math.nan
    except RuntimeError:
        return None


def test_values_are_what_the_suites_track_methods_return():
    record = _sweep()
    by_key = record.by_key()
    cache = {"records": {r.key: {f: getattr(r, f) for f in asvsuite.CACHED_FIELDS} for r in record.records}}
    for klass in asvsuite.suite_classes(OPS.values()):
        for metric in metrictable.for_op(OPS[klass.op].flops is not None):
            got = store.values(klass, metric, by_key)
            want = [_track(klass, metric.name, cache, c) for c in itertools.product(*klass.params)]
            assert [repr(v) for v in got] == [repr(v) for v in want], (klass.op, metric.name)
    gelu = asvsuite.suite_class(OPS["gelu"])
    wall = store.values(gelu, metrictable.BY_NAME["track_wall_time"], by_key)
    row = dict(zip(itertools.product(*gelu.params), wall))
    assert row[("torch", "16384", "float32")] == 0.01 * 1e-3
    assert row[("eager", "16384", "float32")] is None  # failed: asv's failure
    assert math.isnan(row[("triton", "16384", "float32")])  # skipped
    assert math.isnan(row[("torch", "1024", "float32")])  # not in the run's grid


def test_definitions_are_what_asvs_discovery_lists(tmp_path):
    from asv_runner.discovery import list_benchmarks

    out = tmp_path / "discovered.json"
    with out.open("w") as fp:
        list_benchmarks(str(store.BENCHMARK_DIR), fp)
    discovered = {b["name"]: b for b in json.loads(out.read_text())}
    mine = {b["name"]: json.loads(json.dumps(b)) for b in store.definitions(OPS.values())}
    assert mine == discovered
    assert len(mine) == sum(len(metrictable.for_op(op.flops is not None)) for op in OPS.values())


def test_a_record_is_stored_as_asvs_three_files(tmp_path):
    results = tmp_path / "results"
    staged = _store(_sweep(), results)
    name = f"{COMMIT[:8]}-existing-py{VERSION}.json"
    assert sorted(str(p.relative_to(results)) for p in staged.files) == [
        "benchmarks.json", f"testbox/{name}", "testbox/machine.json"]
    from asv.results import Results

    loaded = Results.load(str(results / "testbox" / name), machine_name="testbox")
    assert loaded.commit_hash == COMMIT and loaded.env_name == f"existing-py{VERSION}"
    bw = _rows(results / "testbox" / name)["suite.Gelu.track_bandwidth"]
    assert _combo(bw, ("torch", "16384", "float32")) == 13.1 and bw["version"] == asvsuite.SUITE_VERSION
    machine = json.loads((results / "testbox" / "machine.json").read_text())
    # the series keys only: the host's os, cpu, num_cpu, ram and where stay in the run record
    assert machine == {"machine": "testbox", "arch": HOST["arch"], "gpu": "none", "driver": "none",
                       "cuda": "none", "torch": "2.13.0", "triton": "none", "version": 1}
    params = json.loads((results / "testbox" / name).read_text())["params"]
    assert params == {**{k: v for k, v in machine.items() if k != "version"}, "python": VERSION}
    defined = json.loads((results / "benchmarks.json").read_text())
    assert defined["suite.Gelu.track_bandwidth"]["unit"] == "GB/s"
    assert not list(results.rglob(".fusebench-staging"))


RECORDS = sorted(p.name[:8] for p in (PROJECT_ROOT / "records" / "h200").glob("*.json.xz"))


@pytest.mark.parametrize("sha8", RECORDS)
def test_each_committed_record_rebuilds_its_committed_asv_result(tmp_path, sha8):
    """The committed results were stored by ``asv run`` processes reading the same figures: every
    value of every combination is the same; the parameters and benchmarks of backends and
    metrics added since are what a rebuild adds."""
    (committed,) = (PROJECT_ROOT / "results" / "h200").glob(f"{sha8}-*.json")
    old = json.loads(committed.read_text())
    record = Sweep.load(PROJECT_ROOT / "records" / "h200" / f"{sha8}.json.xz")
    commit = record.environment["git_commit"]
    _store(record, tmp_path / "results", "h200", commit, host=old["params"])
    new = json.loads((tmp_path / "results" / "h200" / f"{sha8}-existing-py3.12.json").read_text())
    assert new["date"] == old["date"] and new["commit_hash"] == old["commit_hash"]
    # fields of older fusebench versions are kept; ``where`` was added since
    assert {k: new["params"].get(k) for k in old["params"] if k != "python"} == {
        k: v for k, v in old["params"].items() if k != "python"} and new["params"]["python"] == "3.12"
    old_rows = _rows(committed)
    new_rows = _rows(tmp_path / "results" / "h200" / f"{sha8}-existing-py3.12.json")
    compared = 0
    for name, row in old_rows.items():
        assert new_rows[name]["version"] == row["version"] and new_rows[name].get("stats_q_25") is None
        at = {c: i for i, c in enumerate(itertools.product(*new_rows[name]["params"]))}
        for combo, value in zip(itertools.product(*row["params"]), row["result"]):
            assert repr(new_rows[name]["result"][at[combo]]) == repr(value), (name, combo)
            compared += value is not None and not math.isnan(value)
    assert compared > 100


def test_a_run_of_one_op_keeps_the_other_ops_stored_results(tmp_path):
    results = tmp_path / "results"
    _store(_sweep(), results)
    (path,) = [p for p in (results / "testbox").glob("*.json") if p.name != "machine.json"]
    before = _rows(path)
    again = Sweep(CPU, 21.8, "quick", [
        Record("softmax", "torch", "16384x1024", "float32", wall_time_ms=2.0, bandwidth_gbps=4.75,
               pct_of_ceiling=20.0, clock="host")])
    _store(again, results, ops=["softmax"])
    after = _rows(path)
    assert after["suite.Gelu.track_bandwidth"] == before["suite.Gelu.track_bandwidth"]  # not n/a
    assert _combo(after["suite.Softmax.track_bandwidth"], ("torch", "16384x1024", "float32")) == 4.75


def test_storing_the_same_record_again_changes_no_byte(tmp_path):
    results = tmp_path / "results"
    _store(_sweep(), results)
    first = {p: p.read_bytes() for p in results.rglob("*.json")}
    _store(_sweep(), results)
    assert {p: p.read_bytes() for p in results.rglob("*.json")} == first


def test_a_failed_write_leaves_the_stored_files_as_they_were(tmp_path, monkeypatch):
    import errno

    results = tmp_path / "results"
    _store(_sweep(), results)
    before = {p: p.read_bytes() for p in results.rglob("*") if p.is_file()}

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(transaction.os, "fsync", full)
    with pytest.raises(OSError, match="No space left"):
        _store(_sweep(), results)
    assert {p: p.read_bytes() for p in results.rglob("*") if p.is_file()} == before
    assert not list(results.rglob(".fusebench-staging"))


def test_an_unreadable_stored_result_is_one_line(tmp_path):
    results = tmp_path / "results"
    (results / "testbox").mkdir(parents=True)
    (results / "testbox" / f"{COMMIT[:8]}-existing-py{VERSION}.json").write_text("{not json")
    with pytest.raises(UsageError, match=r"cannot read the stored .* move it away and store again"):
        _store(_sweep(), results)


def test_a_commit_outside_the_history_without_a_stored_file_is_refused(tmp_path):
    with pytest.raises(UsageError, match="is not in this checkout's git history"):
        _store(_sweep(), tmp_path / "results", commit="f" * 40)


def test_the_name_is_asvs_own_for_the_plugin():
    from fusebench.asv import asv_env

    assert asv_env.env_name(VERSION) == store.env_name(VERSION) == f"existing-py{VERSION}"
    assert store.python_version({"python": "3.12.3"}) == "3.12"
    with pytest.raises(UsageError, match="is not a Python version"):
        store.python_version({"python": "3.12<b>"})


# --- files of earlier versions, named after the interpreter's path ---------------------------------

def _python_in(folder: Path) -> str:
    """An interpreter at ``folder/.venv/bin/python`` (a script running this one)."""
    path = folder / ".venv" / "bin" / "python"
    path.parent.mkdir(parents=True)
    path.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    path.chmod(0o755)
    return str(path)


def test_a_file_stored_under_the_path_name_is_carried_into_the_stable_one(tmp_path):
    results = tmp_path / "results"
    _store(_sweep(), results, ops=["gelu"])
    (path,) = [p for p in (results / "testbox").glob("*.json") if p.name != "machine.json"]
    python = _python_in(tmp_path / "old-clone")
    data = json.loads(path.read_text())
    legacy_name = "existing-py" + python.replace("/", "_")
    data.update(env_name=legacy_name, python=python)
    data["params"]["python"] = python
    legacy = path.with_name(f"{COMMIT[:8]}-{legacy_name}.json")
    legacy.write_text(json.dumps(data))
    path.unlink()
    gelu = _rows(legacy)["suite.Gelu.track_bandwidth"]

    staged = _store(_sweep(), results, ops=["softmax"])
    assert staged.carried == [legacy] and not legacy.exists()
    (path,) = [p for p in (results / "testbox").glob("*.json") if p.name != "machine.json"]
    assert path.name == f"{COMMIT[:8]}-existing-py{VERSION}.json"
    assert json.loads(path.read_text())["python"] == VERSION
    rows = _rows(path)
    assert rows["suite.Gelu.track_bandwidth"]["result"] == gelu["result"]  # the old file's figures kept
    assert _combo(rows["suite.Softmax.track_bandwidth"], ("torch", "16384x1024", "float32")) == 9.5


def test_a_path_named_file_of_another_python_is_kept_as_it_is(tmp_path):
    results = tmp_path / "results"
    python = tmp_path / "py27" / "python"
    python.parent.mkdir()
    python.write_text("#!/bin/sh\necho 2.7\n")
    python.chmod(0o755)
    other = results / "testbox" / f"{COMMIT[:8]}-existing-py{str(python).replace('/', '_')}.json"
    other.parent.mkdir(parents=True)
    other.write_text(json.dumps({"commit_hash": COMMIT, "python": str(python), "env_name": "x"}))
    assert _store(_sweep(), results).carried == []
    assert other.exists()


def test_a_path_named_file_of_an_interpreter_not_on_this_host_is_carried(tmp_path):
    """Results of earlier versions named /opt/torch/.venv/bin/python3, a path of the GPU host, and
    carried the host's fields (the committed ones were rewritten once, issue 41): such a file of
    another host is carried into the version-named file, the record of the commit saying which
    Python measured, and its host fields are left out of asv's series keys."""
    ours = PROJECT_ROOT / "results" / "h200" / "059c9961-existing-py3.12.json"
    record = Sweep.load(PROJECT_ROOT / "records" / "h200" / "059c9961.json.xz")
    results = tmp_path / "results"
    (results / "h200").mkdir(parents=True)
    path = "/opt/torch/.venv/bin/python3"
    old = json.loads(ours.read_text())
    old.update(env_name="existing-py_opt_torch_.venv_bin_python3", python=path,
               params={**old["params"], "python": path, "os": "Linux 6.18.44-fc-v657-gpu", "num_cpu": "16"})
    theirs = results / "h200" / "059c9961-existing-py_opt_torch_.venv_bin_python3.json"
    theirs.write_text(json.dumps(old))
    from fusebench.commands.store import stored_host

    commit = record.environment["git_commit"]
    staged = _store(record, results, "h200", commit, host=stored_host(results / "h200", commit))
    assert staged.carried == [theirs]
    assert sorted(p.name for p in (results / "h200").iterdir()) == ["059c9961-existing-py3.12.json",
                                                                   "machine.json"]
    new = json.loads((results / "h200" / "059c9961-existing-py3.12.json").read_text())
    assert new["params"] == json.loads(ours.read_text())["params"]  # the series keys alone, python 3.12
    assert set(old["results"]) <= set(new["results"])


# --- a real asv run of benchmarks/ ------------------------------------------------------------------

@pytest.mark.slow
def test_asv_discovers_one_class_per_op():
    import os

    # asv drops PYTHONPATH in its benchmark processes, not ASV_PYTHONPATH
    paths = [str(PROJECT_ROOT), os.environ.get("PYTHONPATH")]
    env = dict(os.environ, ASV_PYTHONPATH=os.pathsep.join(p for p in paths if p))
    out = subprocess.run([sys.executable, "-m", "asv", "check", "-E", f"existing:{sys.executable}"],
                         cwd=PROJECT_ROOT, capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "No problems found" in out.stdout


#: A case file of one shape and dtype per op: asv runs a process per benchmark and combination.
SMALL_CASES = """
ops:
  gelu:
    dtypes: [float32]
    headline: 16384
    grids: {default: [16384], cpu: [16384], quick: [16384], cpu-quick: [16384], nsys: [16384]}
  softmax:
    dtypes: [float32]
    headline: 16384x1024
    grids: {default: [16384x1024], cpu: [16384x1024], quick: [16384x1024], cpu-quick: [16384x1024],
            nsys: [16384x1024]}
  rmsnorm:
    dtypes: [float32]
    headline: 4096x1024
    grids: {default: [4096x1024], cpu: [4096x1024], quick: [4096x1024], cpu-quick: [4096x1024],
            nsys: [4096x1024]}
  matmul:
    dtypes: [float32]
    headline: 64x64
    grids: {default: [64x64], cpu: [64x64], quick: [64x64], cpu-quick: [64x64], nsys: [64x64]}
"""


@pytest.mark.slow
def test_a_real_asv_run_of_the_suite_stores_what_the_writer_stores(tmp_path):
    """``asv run`` of ``benchmarks/`` over the same sweep (one process per benchmark and parameter
    combination, the suite's ``setup_cache`` reading the sweep file) stores the same values,
    parameters, versions, stats, units and machine; only its own timings differ (``started_at``,
    ``duration`` and ``durations``: when and how long asv's processes ran)."""
    from asvrun import asv_run

    from fusebench.ops import configured

    cases = tmp_path / "cases.yaml"
    cases.write_text(SMALL_CASES)
    suite = configured(cases)
    record = _sweep()
    sweep_file = tmp_path / "sweep.json"
    record.save(sweep_file)
    info = store.machine_info("testbox", record.environment, HOST)
    out = asv_run(sweep_file, "testbox", COMMIT, info, tmp_path / "asv", cases)
    assert out.returncode in (0, 2), out.stdout[-3000:] + out.stderr[-3000:]  # 2: a benchmark failed
    with transaction.locked(tmp_path / "mine", "test"):
        txn = transaction.Transaction(tmp_path / "mine")
        store.stage(record, "testbox", COMMIT, tmp_path / "mine", txn, suite.values(), host=HOST)
        txn.commit()
    name = f"{COMMIT[:8]}-existing-py{VERSION}.json"
    theirs, mine = (json.loads((tmp_path / d / "testbox" / name).read_text())
                    for d in ("asv/results", "mine"))
    for key in set(theirs) | set(mine):
        if key not in ("results", "durations"):
            assert mine.get(key) == theirs.get(key), key
    a, b = _rows(tmp_path / "asv" / "results" / "testbox" / name), _rows(tmp_path / "mine" / "testbox" / name)
    # asv ran every class; the record has GELU and softmax: asv stored n/a for the others
    assert {n for n in a if not n.startswith(("suite.Gelu.", "suite.Softmax."))} <= {
        n for n in a if all(v is not None and math.isnan(v) for v in a[n]["result"])}
    a = {n: row for n, row in a.items() if n.startswith(("suite.Gelu.", "suite.Softmax."))}
    assert set(a) == set(b) and len(a) == 2 * len(metrictable.for_op(False))
    for bench in a:
        for col in set(a[bench]) | set(b[bench]):
            if col not in ("started_at", "duration"):
                assert json.dumps(b[bench].get(col)) == json.dumps(a[bench].get(col)), (bench, col)
    assert _combo(b["suite.Gelu.track_bandwidth"], ("torch", "16384", "float32")) == 13.1
    assert _combo(b["suite.Gelu.track_bandwidth"], ("eager", "16384", "float32")) is None
    for f in ("testbox/machine.json", "benchmarks.json"):
        mine, theirs = (json.loads((tmp_path / d / f).read_text()) for d in ("mine", "asv/results"))
        assert mine == theirs, f
