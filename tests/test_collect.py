"""``make collect``: results folders of several hosts merged into one, on real result files (the
committed H200 results and records, and a real quick run on this machine), conflicts refused
with nothing written."""

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from committed import committed_folder

from fusebench.errors import UsageError
from fusebench.paths import PROJECT_ROOT
from fusebench.record import decode, encode
from fusebench.storage import collect, results, runrecord


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory) -> Path:
    """A real quick run of this machine (the CPU here) into ``<tmp>/host-cpu/results`` and its
    records: what one host of a fleet leaves."""
    tmp = tmp_path_factory.mktemp("host-cpu")
    out = subprocess.run(
        [sys.executable, "-m", "fusebench", "bench", "--quick", "--ops", "gelu", "--dtypes", "float32",
         "--backends", "eager,torch", "--results", str(tmp / "results"), "--no-publish"],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=600, env={**os.environ, "HOME": str(tmp)})
    assert out.returncode == 0, out.stderr[-2000:]
    return tmp


@pytest.fixture
def h200(tmp_path) -> Path:
    """The committed H200 results and records, copied as another host's output folder (the other
    committed GPU machines left out: one host's folder holds one machine here)."""
    host = tmp_path / "host-h200"
    others = [p.name for p in committed_folder("results").iterdir() if p.is_dir() and p.name != "h200"]
    shutil.copytree(committed_folder("results"), host / "results", ignore=shutil.ignore_patterns(*others))
    shutil.copytree(committed_folder("records"), host / "records",
                    ignore=shutil.ignore_patterns("*.md", *others))
    return host


def _cpu_copy(cpu_run: Path, into: Path) -> Path:
    shutil.copytree(cpu_run, into, ignore=shutil.ignore_patterns("*.log"))
    return into


def _result_file(host: Path) -> Path:
    (path,) = results.result_files(host / "results", results.machines(host / "results")[0])
    return path


def _snapshot(folder: Path) -> dict:
    return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _collect(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fusebench", "collect", *map(str, args)], cwd=PROJECT_ROOT,
                          capture_output=True, text=True, timeout=300)


def _change_one_value(path: Path, factor: float = 1.5) -> str:
    """Scale the first measured value of a result file; returns the benchmark changed."""
    data = json.loads(path.read_text())
    for name, row in data["results"].items():
        for i, v in enumerate(row[0]):
            if isinstance(v, float) and math.isfinite(v):
                row[0][i] = v * factor
                path.write_text(json.dumps(data))
                return name
    raise AssertionError(f"no measured value in {path}")


@pytest.mark.slow
def test_collect_merges_the_h200_and_a_cpu_host_side_by_side(tmp_path, h200, cpu_run):
    dest = tmp_path / "merged" / "results"
    out = _collect(h200, cpu_run, "--into", dest)
    assert out.returncode == 0, out.stderr
    cpu_machine = results.machines(cpu_run / "results")[0]
    assert results.machines(dest) == sorted(["h200", cpu_machine])
    # every file of both hosts is there, byte for byte
    for host in (h200 / "results", cpu_run / "results"):
        for src in host.glob("*/*.json"):
            assert (dest / src.relative_to(host)).read_bytes() == src.read_bytes()
    records = runrecord.records_dir(dest)
    for host in (h200 / "records", cpu_run / "records"):
        for src in host.glob("*/*.json.xz"):
            assert (records / src.relative_to(host)).read_bytes() == src.read_bytes()
    n_h200 = len(results.result_files(h200 / "results", "h200"))
    n_records = sum(len(list((host / "records").glob("*/*.json.xz"))) for host in (h200, cpu_run))
    assert f"copied {n_h200 + 1} result file(s), {n_records} run record(s), 2 machine.json" in out.stderr
    # the merged folder reads as both hosts' stored results, figures unchanged
    reader = results.Reader(dest)
    assert reader.check() == []
    cpu = _result_file(cpu_run)
    commit = json.loads(cpu.read_text())["commit_hash"]
    merged = reader.commit(cpu_machine, commit)
    assert merged.values == results.read_file(cpu).values
    assert runrecord.load(records, cpu_machine, commit) is not None
    # benchmarks.json: the union of both hosts' definitions (the same suite: the same names)
    bench = json.loads((dest / "benchmarks.json").read_text())
    names = set(json.loads((h200 / "results" / "benchmarks.json").read_text())) | set(
        json.loads((cpu_run / "results" / "benchmarks.json").read_text()))
    assert set(bench) == names


@pytest.mark.slow
def test_collecting_again_writes_nothing(tmp_path, h200, cpu_run):
    dest = tmp_path / "results"
    assert _collect(h200, cpu_run, "--into", dest).returncode == 0
    before = {p: p.stat().st_mtime_ns for p in dest.parent.rglob("*") if p.is_file()}
    out = _collect(cpu_run, h200, "--into", dest)
    assert out.returncode == 0, out.stderr
    assert "copied 0 result file(s), 0 run record(s), 0 machine.json" in out.stderr
    assert {p: p.stat().st_mtime_ns for p in dest.parent.rglob("*") if p.is_file()} == before


@pytest.mark.slow
def test_a_planted_conflict_is_refused_and_nothing_is_written(tmp_path, h200, cpu_run):
    dest = tmp_path / "results"
    assert _collect(cpu_run, "--into", dest).returncode == 0
    other = _cpu_copy(cpu_run, tmp_path / "host-cpu-2")
    changed = _change_one_value(_result_file(other))
    before = _snapshot(dest.parent)
    out = _collect(h200, other, "--into", dest)  # h200 alone would be new: not written either
    assert out.returncode == 1
    lines = out.stderr.strip().splitlines()
    conflict = [ln for ln in lines if ln.startswith("collect: conflict:")]
    assert len(conflict) == 1, out.stderr
    assert str(_result_file(other)) in conflict[0] and str(dest / _result_file(other).relative_to(
        other / "results")) in conflict[0]
    assert "with different figures (1 case(s) differ" in conflict[0] and changed in conflict[0]
    assert lines[-1] == f"collect: refused (1 conflict(s), 0 unreadable file(s)); nothing written to {dest}/"
    assert _snapshot(dest.parent) == before
    assert "Traceback" not in out.stderr


@pytest.mark.slow
def test_another_environment_of_the_same_commit_with_other_figures_is_a_conflict(tmp_path, cpu_run):
    dest = tmp_path / "results"
    assert _collect(cpu_run, "--into", dest).returncode == 0
    other = _cpu_copy(cpu_run, tmp_path / "host-b")
    path = _result_file(other)
    data = json.loads(path.read_text())
    data["env_name"] = "existing-py3.99"
    moved = path.with_name(f"{path.name[:8]}-existing-py3.99.json")
    moved.write_text(json.dumps(data))
    path.unlink()
    (other / "records").rename(other / "no-records")  # only the result files meet
    # the same figures under another environment: stored side by side
    assert collect.plan([other], dest).conflicts == []
    _change_one_value(moved, 2.0)
    plan = collect.plan([other], dest)
    assert len(plan.conflicts) == 1 and str(moved) in plan.conflicts[0]
    assert str(dest / path.parent.name / path.name) in plan.conflicts[0]
    with pytest.raises(UsageError, match="refused"):
        collect.apply(plan, dest)


@pytest.mark.slow
def test_two_hosts_of_one_commit_and_machine_conflict_on_their_records(tmp_path, cpu_run):
    dest = tmp_path / "results"
    other = _cpu_copy(cpu_run, tmp_path / "host-b")
    (record,) = (other / "records").glob("*/*.json.xz")
    data = json.loads(decode(record.read_bytes(), record.name))
    data["environment"]["host"] = "another-host"
    record.write_bytes(encode(data))
    plan = collect.plan([cpu_run, other], dest)
    assert len(plan.conflicts) == 1 and "run records of commit" in plan.conflicts[0]
    assert str(record) in plan.conflicts[0]
    assert not dest.exists()


@pytest.mark.slow
def test_machine_json_other_driver_is_a_warning_other_gpu_a_conflict(tmp_path, cpu_run):
    dest = tmp_path / "results"
    assert _collect(cpu_run, "--into", dest).returncode == 0
    machine = results.machines(dest)[0]
    # another host of the same machine, another commit's result (no clash) and another driver
    other = _cpu_copy(cpu_run, tmp_path / "host-b")
    shutil.rmtree(other / "records")
    path = _result_file(other)
    data = json.loads(path.read_text())
    data["commit_hash"] = "f" * 40
    path.with_name("ffffffff-" + path.name.split("-", 1)[1]).write_text(json.dumps(data))
    path.unlink()
    info_path = other / "results" / machine / "machine.json"
    info = json.loads(info_path.read_text())
    kept = (dest / machine / "machine.json").read_bytes()
    info_path.write_text(json.dumps({**info, "driver": "999.1"}))
    out = _collect(other, "--into", dest)
    assert out.returncode == 0, out.stderr
    (warning,) = [ln for ln in out.stderr.splitlines() if ln.startswith("collect: warning:")]
    assert "driver: " in warning and "'999.1' in" in warning and str(info_path) in warning
    assert (dest / machine / "machine.json").read_bytes() == kept
    assert (dest / machine / f"ffffffff-{path.name.split('-', 1)[1]}").exists()

    info_path.write_text(json.dumps({**info, "gpu": "NVIDIA B200"}))
    moved = path.with_name("ffffffff-" + path.name.split("-", 1)[1])
    moved.write_text(json.dumps({**data, "params": {**data["params"], "gpu": "NVIDIA B200"}}))
    out = _collect(other, "--into", dest)
    assert out.returncode == 1
    assert "is another GPU model" in out.stderr and "gpu: " in out.stderr


@pytest.mark.slow
def test_differing_benchmark_definitions_keep_the_destinations_with_a_warning(tmp_path, h200, cpu_run):
    dest = tmp_path / "results"
    assert _collect(h200, "--into", dest).returncode == 0
    other = _cpu_copy(cpu_run, tmp_path / "host-b")
    bench_path = other / "results" / "benchmarks.json"
    bench = json.loads(bench_path.read_text())
    name = sorted(k for k in bench if k != "version")[0]
    bench[name]["version"] = "changed"
    bench["suite.New.track_x"] = {"name": "suite.New.track_x", "version": "1", "type": "track", "params": [],
                                  "param_names": []}
    bench_path.write_text(json.dumps(bench))
    plan = collect.plan([other], dest)
    stored = json.loads((dest / "benchmarks.json").read_text())
    assert plan.conflicts == [] and plan.added_benchmarks == sorted(set(bench) - set(stored))
    assert "suite.New.track_x" in plan.added_benchmarks
    (warning,) = [w for w in plan.warnings if "benchmark definition" in w]
    assert "results stored with version changed of them are not drawn" in warning
    kept = json.loads((dest / "benchmarks.json").read_text())[name]
    collect.apply(plan, dest)
    merged = json.loads((dest / "benchmarks.json").read_text())
    assert merged[name] == kept and "suite.New.track_x" in merged


@pytest.mark.slow
def test_an_unreadable_input_file_is_named_and_nothing_is_written(tmp_path, h200, cpu_run):
    other = _cpu_copy(cpu_run, tmp_path / "host-b")
    broken = _result_file(other)
    broken.write_text(broken.read_text()[:100])
    dest = tmp_path / "results"
    out = _collect(h200, other, "--into", dest)
    assert out.returncode == 2
    assert f"collect: error: {broken}: not valid JSON: " in out.stderr
    assert not dest.exists()


@pytest.mark.slow
@pytest.mark.parametrize("make_args, message", [
    ([], "collect: give FROM=<folder>...: other hosts' results folders, or folders holding results/ "
         "and records/; globs allowed"),
    (["FROM=/no/such/folder"], "collect: error: /no/such/folder: no such folder"),
])
def test_make_collect_bad_input_is_one_line_and_exit_2(make_args, message):
    out = subprocess.run(["make", "--no-print-directory", "collect", f"SYSTEM_PYTHON={sys.executable}",
                          *make_args], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert out.stderr.splitlines()[0] == message
    assert "Traceback" not in out.stderr


def test_not_a_results_folder_or_the_destination_itself_is_refused(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError, match="not a results folder"):
        collect.plan([tmp_path / "empty"], tmp_path / "results")
    with pytest.raises(UsageError, match="is the destination"):
        collect.plan([committed_folder("results")], committed_folder("results"))


@pytest.mark.slow
def test_a_broken_benchmarks_json_is_named_once(tmp_path, cpu_run):
    other = _cpu_copy(cpu_run, tmp_path / "host-b")
    (other / "results" / "benchmarks.json").write_text("{")
    plan = collect.plan([other], tmp_path / "results")
    assert [ln.split(": ", 1)[0] for ln in plan.unreadable] == [f"{other / 'results' / 'benchmarks.json'}"]
