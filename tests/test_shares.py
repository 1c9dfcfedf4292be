"""Shares of one run (``fusebench.storage.shares``) merged by ``collect``, and the folder of a fleet
task that did not finish refused by it. Synthetic folders (``tests/asvfiles.py`` and run records
built here): what two array tasks that split one machine's grid by ops leave. The same on a real
Slurm: ``make slurm-test`` (scripts/slurm_test.sh)."""

import json
import lzma
import subprocess
import sys
from pathlib import Path

import pytest
from asvfiles import write_result

from fusebench.errors import UsageError
from fusebench.paths import PROJECT_ROOT
from fusebench.record import Record, Sweep
from fusebench.storage import collect, results, runrecord, shares

COMMIT = "c3519fe813c0" + "0" * 28
MACHINE = "cpu-x86_64"
AXES = [["eager", "torch"], ["16384"], ["float32"]]


def _share(folder: Path, op: str, value: float, host: str = "node1") -> Path:
    """A task's output folder: the asv result and the run record of ``op`` only."""
    name = f"suite.{op.capitalize()}.track_wall_time"
    write_result(folder / "results", MACHINE, COMMIT, {name: {("eager", "16384", "float32"): value,
                                                            ("torch", "16384", "float32"): 2 * value}}, AXES)
    records = [Record(op, b, "16384", "float32", wall_time_ms=v, rounds=[{"wall_time_ms": v}] * 3)
               for b, v in (("eager", value), ("torch", 2 * value))]
    env = {"git_commit": COMMIT, "host": host, "sweep_seconds": 12.0}
    runrecord.save(Sweep(env, 30.0, "cpu-quick", records, rounds=3, ceilings_gbps=[29.0, 30.0, 31.0],
                         phases={"round 1": 1.0}), folder / "records", MACHINE, COMMIT)
    return folder


def _result(dest: Path) -> dict:
    (path,) = (dest / MACHINE).glob(f"{COMMIT[:8]}-*.json")
    return json.loads(path.read_text())


def _record(dest: Path) -> dict:
    return json.loads(lzma.decompress(runrecord.record_path(runrecord.records_dir(dest), MACHINE,
                                                            COMMIT).read_bytes()))


def test_two_tasks_of_disjoint_ops_merge_into_one_result_and_one_record(tmp_path):
    a, b = _share(tmp_path / "node1-0", "gelu", 0.5), _share(tmp_path / "node1-1", "softmax", 0.7, "node2")
    dest = tmp_path / "merged" / "results"
    plan = collect.plan([a, b], dest)
    assert plan.conflicts == [] and plan.unreadable == [] and len(plan.merges) == 2
    collect.apply(plan, dest)
    data = _result(dest)
    assert sorted(data["results"]) == ["suite.Gelu.track_wall_time", "suite.Softmax.track_wall_time"]
    run = results.Reader(dest).read(next((dest / MACHINE).glob("*-existing-py.json")))
    assert run.value("suite.Softmax.track_wall_time", ("torch", "16384", "float32")) == 1.4
    assert run.value("suite.Gelu.track_wall_time", ("eager", "16384", "float32")) == 0.5
    record = _record(dest)
    assert [(r["op"], r["backend"]) for r in record["records"]] == [
        ("gelu", "eager"), ("gelu", "torch"), ("softmax", "eager"), ("softmax", "torch")]
    assert [(s["host"], s["ops"], s["cases"]) for s in record["environment"]["shares"]] == [
        ("node1", ["gelu"], 2), ("node2", ["softmax"], 2)]
    assert record["ceilings_gbps"] == [29.0, 30.0, 31.0] * 2 and record["ceiling_gbps"] == 30.0
    assert Sweep.load(runrecord.record_path(runrecord.records_dir(dest), MACHINE, COMMIT)).rounds == 3
    # collected again: every file there already, nothing planned
    again = collect.plan([a, b], dest)
    assert again.conflicts == [] and again.copies == [] and again.merges == {}


def test_a_share_adds_to_a_stored_result_of_the_commit_without_changing_it(tmp_path):
    dest = tmp_path / "merged" / "results"
    collect.apply(collect.plan([_share(tmp_path / "a", "gelu", 0.5)], dest), dest)
    before = _result(dest)["results"]["suite.Gelu.track_wall_time"]
    collect.apply(collect.plan([_share(tmp_path / "b", "rmsnorm", 0.9)], dest), dest)
    data = _result(dest)
    assert data["results"]["suite.Gelu.track_wall_time"] == before
    assert "suite.Rmsnorm.track_wall_time" in data["results"]
    assert {r["op"] for r in _record(dest)["records"]} == {"gelu", "rmsnorm"}


def test_the_same_case_from_two_tasks_with_other_figures_is_a_conflict(tmp_path):
    a, b = _share(tmp_path / "a", "gelu", 0.5), _share(tmp_path / "b", "gelu", 0.6, host="node9")
    plan = collect.plan([a, b], tmp_path / "results")
    assert plan.refused and plan.merges == {} and len(plan.conflicts) == 2
    assert ("2 case(s) differ, e.g. suite.Gelu.track_wall_time (eager, 16384, float32): 0.6 vs 0.5"
            in plan.conflicts[0])
    assert ("run records of commit c3519fe8 on machine cpu-x86_64 differ (two runs of one commit and "
            "machine: 2 case(s) in both, e.g. gelu/eager/16384/float32)") in plan.conflicts[1]
    assert not (tmp_path / "results").exists()


def test_shares_refuse_what_is_not_one_run():
    a = {"version": 2, "commit_hash": "a" * 40, "env_name": "e", "results": {"x": [1]}}
    assert shares.merge_results(a, dict(a, results={"y": [2]}))[0]["results"] == {"x": [1], "y": [2]}
    assert shares.merge_results(a, dict(a, commit_hash="b" * 40, results={"y": [2]})) == (
        None, "different commit_hash")
    assert shares.merge_results(a, dict(a, results={"x": [2]}))[1] == "1 benchmark(s) in both, e.g. x"
    assert shares.merge_results(a, {"results": []})[0] is None
    rec = {"format_version": 2, "grid": "cpu-quick", "rounds": 3, "environment": {"git_commit": "a"},
           "records": [{"op": "gelu", "backend": "eager", "shape": "1", "dtype": "float32"}]}
    other = dict(rec, records=[dict(rec["records"][0], op="softmax")])
    assert shares.merge_records(rec, dict(other, rounds=5)) == (None, "different rounds")
    assert shares.merge_records(rec, dict(other, environment={"git_commit": "b"})) == (
        None, "different git_commit")
    assert shares.merge_records(rec, rec)[1] == "1 case(s) in both, e.g. gelu/eager/1/float32"
    assert len(shares.merge_records(rec, other)[0]["records"]) == 2


@pytest.mark.parametrize("given", ["task", "task/results"])
def test_the_folder_of_an_unfinished_task_is_refused_naming_it(tmp_path, given):
    task = _share(tmp_path / "task", "gelu", 0.5)
    (task / collect.UNFINISHED).write_text("task 7_1 on node3 was cancelled (SIGTERM: scancel or its "
                                           "time limit): see its Slurm output\n")
    with pytest.raises(UsageError, match=r"task 7_1 on node3 was cancelled .*nothing collected"):
        collect.plan([_share(tmp_path / "other", "softmax", 0.7), tmp_path / given], tmp_path / "results")
    assert not (tmp_path / "results").exists()


@pytest.mark.slow
def test_make_collect_into_and_the_refusal_as_one_line(tmp_path):
    task = _share(tmp_path / "task", "gelu", 0.5)
    (task / collect.UNFINISHED).write_text("task 7_0 on node3 failed (exit 2): see its Slurm output\n")
    out = subprocess.run(["make", "--no-print-directory", "-s", "collect", f"SYSTEM_PYTHON={sys.executable}",
                          f"FROM={tmp_path}/*", f"INTO={tmp_path / 'into'}"], cwd=PROJECT_ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stderr
    assert out.stderr.splitlines()[0].startswith(f"collect: error: {task}: task 7_0 on node3 failed (exit 2)")
    assert "Traceback" not in out.stderr and not list((tmp_path / "into").rglob("*.json"))
