"""The asv side: discovery, a real asv run into a temporary results folder, and that a failed run
leaves stored results alone."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fusebench import metrictable
from fusebench.history import store
from fusebench.measure import sweep
from fusebench.paths import PROJECT_ROOT

COMMIT = subprocess.run(["git", "rev-parse", "HEAD"], cwd=PROJECT_ROOT, capture_output=True,
                        text=True).stdout.strip()


@pytest.fixture
def home(tmp_path, monkeypatch):
    """asv reads its machine file from $HOME: keep the user's untouched."""
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


def _sweep_file(tmp_path) -> Path:
    recs = [
        sweep.Record("gelu", "torch", "16384", "float32", wall_time_ms=0.01, bandwidth_gbps=13.1,
                     pct_of_ceiling=60.0, clock="host"),
        sweep.Record("gelu", "eager", "16384", "float32", status="failed", reason="correctness gate: NaN"),
        sweep.Record("gelu", "triton", "16384", "float32", status="skipped", reason="needs a CUDA GPU"),
    ]
    path = tmp_path / "sweep.json"
    sweep.Sweep({"device": "cpu"}, 21.8, "quick", recs).save(path)
    return path


@pytest.mark.slow
def test_asv_discovers_one_class_per_op():
    # asv drops PYTHONPATH in its benchmark processes, not ASV_PYTHONPATH: the caller names the
    # checkout there (fusebench.history.store.run_asv does), unless fusebench is installed (make venv).
    paths = [str(PROJECT_ROOT), os.environ.get("PYTHONPATH")]
    env = dict(os.environ, ASV_PYTHONPATH=os.pathsep.join(p for p in paths if p))
    out = subprocess.run([sys.executable, "-m", "asv", "check", "-E", f"existing:{sys.executable}"],
                         cwd=PROJECT_ROOT, capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "No problems found" in out.stdout


def test_the_asv_command_line():
    cmd = store.asv_command(Path("/s/asv.conf.json"), "h200", "abc123", "/usr/bin/python3")
    assert cmd == ["/usr/bin/python3", "-m", "asv", "run", "--config", "/s/asv.conf.json",
                   "--machine", "h200", "--set-commit-hash", "abc123", "-E",
                   "stable:/usr/bin/python3", "--launch-method", "forkserver"]


def test_machine_file_keeps_other_machines(home):
    path = store.register_machine({"machine": "h200", "gpu": "NVIDIA H200"})
    store.register_machine({"machine": "cpu-x86_64", "gpu": "none"})
    data = json.loads(path.read_text())
    assert path == home / ".asv-machine.json"
    assert data["h200"]["gpu"] == "NVIDIA H200" and data["cpu-x86_64"]["gpu"] == "none"


@pytest.mark.slow
def test_real_asv_run_stores_the_sweep(tmp_path, home):
    store.register_machine(store.machine_info("testbox", {"gpu": "none", "torch": "2.13.0"}))
    results = tmp_path / "results"
    assert store.run_asv(_sweep_file(tmp_path), "testbox", COMMIT, results) == 0
    (result_file,) = [p for p in (results / "testbox").glob("*.json") if p.name != "machine.json"]
    data = json.loads(result_file.read_text())
    assert data["commit_hash"] == COMMIT
    cols = data["result_columns"]
    bw = dict(zip(cols, data["results"]["suite.Gelu.track_bandwidth"]))
    params = bw["params"]
    idx = [i for i, combo in enumerate(_product(params))
           if combo == ("'torch'", "'16384'", "'float32'")][0]
    assert bw["result"][idx] == pytest.approx(13.1)
    machine = json.loads((results / "testbox" / "machine.json").read_text())
    assert machine["gpu"] == "none" and machine["torch"] == "2.13.0"


@pytest.mark.slow
def test_failed_asv_run_leaves_stored_results_alone(tmp_path, home):
    results = tmp_path / "results"
    stored = results / "testbox" / "old.json"
    stored.parent.mkdir(parents=True)
    stored.write_text("{}")
    status = store.run_asv(_sweep_file(tmp_path), "testbox", COMMIT, results,
                           python=str(tmp_path / "no-such-python"))
    assert status != 0
    assert [p.name for p in results.rglob("*")] == ["testbox", "old.json"]


def _product(params):
    import itertools

    return list(itertools.product(*params))


@pytest.mark.slow
def test_a_run_of_one_op_keeps_the_other_ops_stored_results(tmp_path, home):
    store.register_machine(store.machine_info("testbox", {"gpu": "none"}))
    results = tmp_path / "results"
    assert store.run_asv(_sweep_file(tmp_path), "testbox", COMMIT, results) == 0
    (path,) = [p for p in (results / "testbox").glob("*.json") if p.name != "machine.json"]
    before = json.loads(path.read_text())["results"]["suite.Gelu.track_bandwidth"]
    softmax_only = tmp_path / "softmax.json"
    sweep.Sweep({"device": "cpu"}, 21.8, "quick", [
        sweep.Record("softmax", "torch", "16384x1024", "float32", wall_time_ms=1.0, bandwidth_gbps=9.5,
                     pct_of_ceiling=40.0, clock="host")]).save(softmax_only)
    # one asv run per metric: each group selects something of Softmax (no compute-only metric)
    softmax_metrics = [m.name for m in metrictable.for_op(False)]
    assert store.run_asv(softmax_only, "testbox", COMMIT, results, classes=["Softmax"],
                         jobs=64, metrics=softmax_metrics) == 0
    after = json.loads(path.read_text())["results"]
    assert after["suite.Gelu.track_bandwidth"] == before  # not replaced by n/a
    assert 9.5 in after["suite.Softmax.track_bandwidth"][0]


def test_the_asv_command_line_for_some_ops():
    cmd = store.asv_command(Path("/s/c.json"), "h200", "abc", "py", ["Gelu", "Softmax"])
    assert cmd[-2:] == ["--bench", r"^suite\.(Gelu|Softmax)\."]


# --- the environment's name: the Python version, not the checkout's path --------------------------

VERSION = "%d.%d" % sys.version_info[:2]


def _python_in(folder: Path) -> str:
    """An interpreter at ``folder/.venv/bin/python`` (a script running this one): a checkout
    somewhere else."""
    path = folder / ".venv" / "bin" / "python"
    path.parent.mkdir(parents=True)
    path.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    path.chmod(0o755)
    return str(path)


def _stored(results: Path) -> list[Path]:
    return sorted(p for p in (results / "testbox").glob("*.json") if p.name != "machine.json")


@pytest.mark.slow
def test_two_checkouts_store_one_file_per_commit_named_by_python_version(tmp_path, home):
    store.register_machine(store.machine_info("testbox", {"gpu": "none"}))
    results = tmp_path / "results"
    for folder in ("clone-a", "elsewhere/clone-b"):
        python = _python_in(tmp_path / folder)
        assert store.run_asv(_sweep_file(tmp_path), "testbox", COMMIT, results, python=python) == 0
    (path,) = _stored(results)
    assert path.name == f"{COMMIT[:8]}-existing-py{VERSION}.json"
    data = json.loads(path.read_text())
    assert data["env_name"] == f"existing-py{VERSION}"
    assert data["python"] == data["params"]["python"] == VERSION
    assert str(tmp_path) not in path.read_text()


def test_the_name_is_asvs_own_for_the_plugin():
    from fusebench.history import asv_env

    assert asv_env.env_name(VERSION) == store.env_name(VERSION) == f"existing-py{VERSION}"
    assert (asv_env.TOOL_NAME, asv_env.PLUGIN) == (store.ENV_TYPE, store.ENV_PLUGIN)


@pytest.mark.slow
def test_a_file_stored_under_the_path_name_is_carried_into_the_stable_one(tmp_path, home):
    store.register_machine(store.machine_info("testbox", {"gpu": "none"}))
    results = tmp_path / "results"
    python = _python_in(tmp_path / "old-clone")
    assert store.run_asv(_sweep_file(tmp_path), "testbox", COMMIT, results, python=python) == 0
    (path,) = _stored(results)
    # What fusebench stored before: asv's existing environment named after the path.
    data = json.loads(path.read_text())
    legacy_name = "existing-py" + python.replace("/", "_")
    data.update(env_name=legacy_name, python=python)
    data["params"]["python"] = python
    legacy = path.with_name(f"{COMMIT[:8]}-{legacy_name}.json")
    legacy.write_text(json.dumps(data))
    path.unlink()
    gelu = data["results"]["suite.Gelu.track_bandwidth"]

    softmax_only = tmp_path / "softmax.json"
    sweep.Sweep({"device": "cpu"}, 21.8, "quick", [
        sweep.Record("softmax", "torch", "16384x1024", "float32", wall_time_ms=1.0, bandwidth_gbps=9.5,
                     pct_of_ceiling=40.0, clock="host")]).save(softmax_only)
    assert store.run_asv(softmax_only, "testbox", COMMIT, results, python=python,
                         classes=["Softmax"]) == 0
    (path,) = _stored(results)
    after = json.loads(path.read_text())
    assert path.name == f"{COMMIT[:8]}-existing-py{VERSION}.json" and after["python"] == VERSION
    assert after["results"]["suite.Gelu.track_bandwidth"] == gelu  # the old file's figures kept
    assert 9.5 in after["results"]["suite.Softmax.track_bandwidth"][0]


def test_a_path_named_file_of_another_python_is_kept_as_it_is(tmp_path):
    stored, staging = tmp_path / "stored", tmp_path / "staging"
    stored.mkdir()
    staging.mkdir()
    other = stored / f"{COMMIT[:8]}-existing-py_gone_python.json"
    other.write_text(json.dumps({"commit_hash": COMMIT, "python": "/gone/python", "env_name": "x"}))
    assert store.stage_stored(stored, staging, COMMIT, VERSION) == []
    assert [p.name for p in staging.iterdir()] == [other.name]
    assert other.exists()


# --- the metrics split over concurrent asv runs ----------------------------------------------------

def test_bench_pattern_selects_whole_metric_names_only():
    import re

    pattern = re.compile(store.bench_pattern(["Gelu"], ["track_device_time", "track_bandwidth"]))
    assert pattern.match("suite.Gelu.track_device_time(eager, 1024, float32)")
    assert pattern.match("suite.Gelu.track_bandwidth(torch, 1024, float32)")
    assert not pattern.match("suite.Gelu.track_device_time_cold(eager, 1024, float32)")
    assert not pattern.match("suite.Softmax.track_device_time(eager, 1024, float32)")
    every_class = re.compile(store.bench_pattern(None, ["track_wall_time"]))
    assert every_class.match("suite.Rmsnorm.track_wall_time(torch, 4096x1024, bfloat16)")
    assert not every_class.match("suite.Rmsnorm.track_wall_time_iqr(torch, 4096x1024, bfloat16)")
    assert store.bench_pattern(None, None) is None


def test_metric_groups_deal_every_metric_once(monkeypatch):
    from fusebench import metrictable

    names = sorted(m.name for m in metrictable.METRICS)
    for jobs in (1, 3, len(names), 64):
        groups = store.metric_groups(jobs)
        assert len(groups) == min(jobs, len(names)) and all(groups)
        assert sorted(n for g in groups for n in g) == names
    monkeypatch.setenv(store.ASV_JOBS_ENV, "4")
    assert len(store.metric_groups()) == 4
    monkeypatch.setenv(store.ASV_JOBS_ENV, "zero")
    with pytest.raises(ValueError, match="FUSEBENCH_ASV_JOBS='zero': expected a positive integer"):
        store.metric_groups()


@pytest.mark.slow
def test_concurrent_asv_runs_store_what_one_run_stores(tmp_path, home):
    store.register_machine(store.machine_info("testbox", {"gpu": "none"}))
    rows = []
    for jobs in (1, 3):
        results = tmp_path / f"results-{jobs}"
        assert store.run_asv(_sweep_file(tmp_path), "testbox", COMMIT, results, jobs=jobs) == 0
        (path,) = [p for p in (results / "testbox").glob("*.json") if p.name != "machine.json"]
        data = json.loads(path.read_text())
        col = data["result_columns"].index("result")
        rows.append({name: json.dumps(row[col]) for name, row in data["results"].items()})
    assert rows[0] == rows[1]
    assert len(rows[0]) >= 8 and "13.1" in rows[1]["suite.Gelu.track_bandwidth"]


def test_each_concurrent_asv_run_gets_its_own_machine_file(tmp_path, home):
    # asv rewrites ~/.asv-machine.json as it starts: concurrent runs must not share one
    store.register_machine({"machine": "h200", "gpu": "NVIDIA H200"})
    (home / ".gitconfig").write_text("[safe]\n\tdirectory = *\n")
    env = store.own_machine_file({"PATH": "/usr/bin"}, tmp_path / "group1")
    assert env["HOME"] == str(tmp_path / "group1")
    copied = json.loads((tmp_path / "group1" / ".asv-machine.json").read_text())
    assert copied["h200"]["gpu"] == "NVIDIA H200"
    assert env["GIT_CONFIG_GLOBAL"] == str(home / ".gitconfig") and env["PATH"] == "/usr/bin"
    assert env["PYTHONUSERBASE"]  # the user's site-packages stay importable
