"""``fusebench store RECORD``: asv's results written again from committed run records, each
record checked as untrusted input first; bad input is one line, exit 2, nothing written."""

import hashlib
import json
import lzma
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from committed import committed_folder

from fusebench.commands import main
from fusebench.paths import PROJECT_ROOT
from fusebench.record import decode, encode
from fusebench.storage import transaction

SHA8 = "0a5fc94f"  # GELU and softmax, with energy per call in its record


@pytest.fixture
def checkout(tmp_path) -> Path:
    """records/ and results/ holding the committed H200 record, result and machine of one commit."""
    (tmp_path / "records" / "h200").mkdir(parents=True)
    (tmp_path / "results" / "h200").mkdir(parents=True)
    shutil.copyfile(PROJECT_ROOT / "records" / "h200" / f"{SHA8}.json.xz",
                    tmp_path / "records" / "h200" / f"{SHA8}.json.xz")
    for name in ("machine.json", f"{SHA8}-existing-py3.12.json"):
        shutil.copyfile(PROJECT_ROOT / "results" / "h200" / name, tmp_path / "results" / "h200" / name)
    shutil.copyfile(PROJECT_ROOT / "results" / "benchmarks.json", tmp_path / "results" / "benchmarks.json")
    return tmp_path


def _run(capsys, *argv) -> tuple[int, list[str]]:
    with pytest.raises(SystemExit) as end:
        main(["store", *map(str, argv)])
    return end.value.code, capsys.readouterr().err.splitlines()


def _hashes(folder: Path) -> dict:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_committed_record_rebuilds_its_result_with_the_metrics_added_since(checkout, capsys):
    result = checkout / "results" / "h200" / f"{SHA8}-existing-py3.12.json"
    before = json.loads(result.read_text())
    # the result as asv stored it on the H200, before the metric table had track_energy
    before["results"] = {k: v for k, v in before["results"].items() if not k.endswith(".track_energy")}
    result.write_text(json.dumps(before))
    code, err = _run(capsys, checkout / "records" / "h200" / f"{SHA8}.json.xz")
    assert code == 0, err
    assert err == [f"store: {checkout}/records/h200/{SHA8}.json.xz -> {result} (gelu, softmax)"]
    after = json.loads(result.read_text())
    col = after["result_columns"].index("result")
    for name, row in before["results"].items():  # every stored value as it was
        assert json.dumps(after["results"][name][col]) == json.dumps(row[col]), name
    assert after["params"] == before["params"] and after["date"] == before["date"]
    energy = after["results"]["suite.Gelu.track_energy"][col]
    assert "suite.Gelu.track_energy" not in before["results"]
    assert sum(v is not None and not math.isnan(v) for v in energy) == 120  # GELU's timed cases
    machine = checkout / "results" / "h200" / "machine.json"
    assert machine.read_bytes() == (PROJECT_ROOT / "results" / "h200" / "machine.json").read_bytes()
    assert "suite.Gelu.track_energy" in json.loads((checkout / "results" / "benchmarks.json").read_text())


def _edit(checkout: Path, change) -> Path:
    path = checkout / "records" / "h200" / f"{SHA8}.json.xz"
    data = json.loads(decode(path.read_bytes(), path.name))
    change(data)
    path.write_bytes(encode(data))
    return path


@pytest.mark.parametrize("change, why", [
    (lambda d: d["environment"].update(gpu="<script>alert(1)</script>"),
     "machine.json.gpu '<script>alert(1)</script>' is not plain text"),
    (lambda d: d["records"][0].update(device_time_ms="0.01"), "records[0].device_time_ms '0.01' is not a "
     "finite number or null"),
    (lambda d: d["records"][0].update(status="great"), "records[0].status 'great' is not one of ok, failed"),
    (lambda d: d["records"].append(dict(d["records"][0])),
     "records[408]: case gelu/eager/1024/float32 is in the record twice"),
    (lambda d: d["records"][0].update(backend="eager<b>"),
     "records[0].backend 'eager<b>' is not an identifier"),
    (lambda d: d["environment"].update(git_commit="0" * 40),
     "git_commit 000000000000 disagrees with the file"),
    (lambda d: d["environment"].update(python="3.12; rm"), "environment.python '3.12; rm' is not a Python "
     "version"),
    (lambda d: d.update(energy_scope="some"), "energy_scope 'some' is not one of headline, all"),
])
def test_a_bad_record_is_refused_in_one_line_and_nothing_is_written(checkout, capsys, change, why):
    path = _edit(checkout, change)
    before = _hashes(checkout / "results")
    code, err = _run(capsys, path)
    assert code == 2 and len(err) == 1 and why in err[0], err
    assert err[0].startswith("store: error: ")
    assert _hashes(checkout / "results") == before


def test_nan_in_a_record_is_refused(checkout, capsys):
    path = checkout / "records" / "h200" / f"{SHA8}.json.xz"
    text = decode(path.read_bytes(), path.name).decode()
    path.write_bytes(lzma.compress(text.replace('"device_time_ms":0.017856000499291855',
                                                '"device_time_ms":NaN', 1).encode()))
    code, err = _run(capsys, path)
    assert code == 2 and err == [f"store: error: refused: {path}: records[0].device_time_ms 'nan' is not a "
                                 "finite number or null"]


def test_a_symlink_a_missing_file_and_a_file_outside_records_are_one_line(checkout, capsys, tmp_path):
    record = checkout / "records" / "h200" / f"{SHA8}.json.xz"
    link = checkout / "records" / "h200" / "1f091eb7.json.xz"
    link.symlink_to(record)
    code, err = _run(capsys, link)
    assert code == 2 and err == [f"store: error: refused: {link}: a symlink; files from another host must "
                                 "be regular files"]
    missing = checkout / "records" / "h200" / "ffffffff.json.xz"
    code, err = _run(capsys, missing)
    assert code == 2 and err == [f"store: error: {missing}: no such file; give a run record, "
                                 "records/<machine>/<sha8>.json.xz"]
    elsewhere = tmp_path / "loose" / "h200" / f"{SHA8}.json.xz"
    elsewhere.parent.mkdir(parents=True)
    shutil.copyfile(record, elsewhere)
    code, err = _run(capsys, elsewhere)
    assert code == 2 and err == [f"store: error: {elsewhere}: not in a records folder "
                                 "(records/<machine>/<sha8>.json.xz); give --results DIR"]
    code, err = _run(capsys, elsewhere, "--results", checkout / "other-results")
    assert code == 0 and (checkout / "other-results" / "h200" / f"{SHA8}-existing-py3.12.json").is_file()


EXPECTED = "give a run record, records/<machine>/<sha8>.json.xz"


def test_a_missing_file_outside_records_says_it_is_missing_first(checkout, capsys, tmp_path):
    """``store /nonexistent.json.xz`` said to give --results DIR, then 'cannot open' once given."""
    missing = tmp_path / "nonexistent.json.xz"
    for more in ([], ["--results", checkout / "other-results"]):
        code, err = _run(capsys, missing, *more)
        assert code == 2 and err == [f"store: error: {missing}: no such file; {EXPECTED}"]
    assert not (checkout / "other-results").exists()


def test_a_file_that_is_no_run_record_or_in_no_machines_folder_says_so(checkout, capsys, tmp_path):
    """``store README.md --results DIR`` said 'refused: .: not a machine name'."""
    results = checkout / "other-results"
    readme = tmp_path / "README.md"
    readme.write_text("# fusebench\n")
    for more in ([], ["--results", results]):  # not first 'give --results DIR' outside records/
        code, err = _run(capsys, readme, *more)
        assert code == 2 and err == [f"store: error: refused: {readme}: not a run record (not valid JSON: "
                                     f"Expecting value: line 1 column 1 (char 0)); {EXPECTED}"]
    other = checkout / "results" / "benchmarks.json"
    code, err = _run(capsys, other, "--results", results)
    assert code == 2 and err == [f"store: error: refused: {other}: not a run record (JSON without a "
                                 f"record's format_version, environment and records); {EXPECTED}"]
    loose = tmp_path / "my records" / f"{SHA8}.json.xz"
    loose.parent.mkdir()
    shutil.copyfile(checkout / "records" / "h200" / f"{SHA8}.json.xz", loose)
    code, err = _run(capsys, loose, "--results", results)
    assert code == 2 and err == [f"store: error: refused: {loose}: not in a machine's folder ('my records' "
                                 "is not a machine name: letters, digits, '.', '_', '-'); " + EXPECTED]
    assert not results.exists()


def test_a_results_folder_in_use_is_refused(checkout, capsys):
    results = checkout / "results"
    before = _hashes(results)
    with transaction.locked(results, "bench"):
        code, err = _run(capsys, checkout / "records" / "h200" / f"{SHA8}.json.xz")
    assert code == 2 and err == [
        f"store: error: {results}/ is in use by another fusebench run (make bench or make collect into it); "
        "store refused: run it again once that one has finished"]
    assert _hashes(results) == before


def test_the_command_runs_as_printed_from_the_shell(checkout):
    out = subprocess.run([sys.executable, "-m", "fusebench", "store", f"records/h200/{SHA8}.json.xz"],
                         cwd=checkout, capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, PYTHONPATH=str(PROJECT_ROOT)))
    assert out.returncode == 0, out.stderr
    assert out.stderr.strip().endswith(
        f"-> {checkout}/results/h200/{SHA8}-existing-py3.12.json (gelu, softmax)")


@pytest.mark.slow
def test_asv_publish_builds_the_site_from_the_written_files(tmp_path, capsys):
    """Results written from two committed records alone (no asv run, an empty results folder):
    ``asv publish`` draws both commits, the metric added since included."""
    from fusebench.asv import store

    records = tmp_path / "records" / "h200"
    records.mkdir(parents=True)
    for sha8 in ("0395b139", SHA8):
        shutil.copyfile(PROJECT_ROOT / "records" / "h200" / f"{sha8}.json.xz", records / f"{sha8}.json.xz")
    code, err = _run(capsys, records / "0395b139.json.xz", records / f"{SHA8}.json.xz")
    assert code == 0, err
    assert store.publish(tmp_path / "results", tmp_path / "html") == 0
    drawn = {}
    for metric in ("track_device_time", "track_energy"):
        (graph,) = (tmp_path / "html" / "graphs" / "branch-main").rglob(f"suite.Gelu.{metric}.json")
        drawn[metric] = [sum(v is not None for v in values) for _, values in json.loads(graph.read_text())]
    # a point per commit with GELU's 120 timed cases; energy only in the newer record
    assert drawn == {"track_device_time": [120, 120], "track_energy": [120]}


def test_suite_writes_the_committed_benchmarks_json_alone(checkout, capsys, tmp_path):
    """``store --suite`` (docs/extending.md, after adding an op or a backend): the suite's
    benchmarks.json from the case file, nothing else; on this tree it is the committed file."""
    results = checkout / "results"
    (results / "benchmarks.json").write_text("{}")
    before = {k: v for k, v in _hashes(results).items() if not k.endswith("benchmarks.json")}
    code, err = _run(capsys, "--suite", "--results", results)
    assert code == 0, err
    assert err == [f"store: {results / 'benchmarks.json'} (4 op(s): gelu, softmax, rmsnorm, matmul)"]
    committed = (PROJECT_ROOT / "results" / "benchmarks.json").read_bytes()
    assert (results / "benchmarks.json").read_bytes() == committed
    assert {k: v for k, v in _hashes(results).items() if not k.endswith("benchmarks.json")} == before
    # a new folder is made; bad input is one line
    code, err = _run(capsys, "--suite", "--results", tmp_path / "new")
    assert code == 0 and (tmp_path / "new" / "benchmarks.json").is_file(), err
    (tmp_path / "file").write_text("")
    assert _run(capsys, "--suite", "--results", tmp_path / "file" / "results") == (
        2, [f"store: error: cannot use {tmp_path / 'file' / 'results'}/: Not a directory"])
    (tmp_path / "link").symlink_to(results)
    assert _run(capsys, "--suite", "--results", tmp_path / "link") == (
        2, [f"store: error: {tmp_path / 'link'}: not a folder (a symbolic link or a file): give another "
            "--results"])
    assert _run(capsys, "--suite", checkout / "records" / "h200" / f"{SHA8}.json.xz") == (
        2, ["store: error: --suite writes benchmarks.json alone: give it no RECORD"])
    assert _run(capsys) == (
        2, ["store: error: give a run record, records/<machine>/<sha8>.json.xz (or --suite: benchmarks.json "
            "alone)"])


def test_every_committed_result_is_what_a_store_of_its_record_writes(tmp_path, capsys):
    """docs/method.md: the committed asv files are written from their records; a store of every
    committed record leaves each of them, and benchmarks.json, byte for byte as committed (two
    files written by an older suite were not, until a trial stored them)."""
    shutil.copytree(committed_folder("results"), tmp_path / "results")
    shutil.copytree(committed_folder("records"), tmp_path / "records")
    before = _hashes(tmp_path / "results")
    records = sorted((tmp_path / "records" / "h200").glob("*.json.xz"))
    assert len(records) >= 20
    code, err = _run(capsys, *records)
    assert code == 0 and len(err) == len(records), err
    assert _hashes(tmp_path / "results") == before
