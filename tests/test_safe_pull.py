"""Issue 42: safe to pull, safe to publish. A journal reached by clone or pull is never obeyed
outside its folder; strings from git reach the site escaped; impossible timings and figures of
another GPU model are never judged; no reader or writer sees a mixed result/record pair."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from committed import committed_folder

from fusebench import atomic
from fusebench.commands import main
from fusebench.paths import PROJECT_ROOT
from fusebench.record import decode, encode
from fusebench.storage import runrecord, transaction

SHA8 = "0a5fc94f"  # a committed H200 run: record, result and machine
RESULT = f"{SHA8}-existing-py3.12.json"


@pytest.fixture
def checkout(tmp_path) -> Path:
    """results/ and records/ holding the committed H200 record, result and machine of one commit,
    and a victim folder beside them that no journal may touch."""
    (tmp_path / "records" / "h200").mkdir(parents=True)
    (tmp_path / "results" / "h200").mkdir(parents=True)
    shutil.copyfile(PROJECT_ROOT / "records" / "h200" / f"{SHA8}.json.xz",
                    tmp_path / "records" / "h200" / f"{SHA8}.json.xz")
    for name in ("machine.json", RESULT):
        shutil.copyfile(PROJECT_ROOT / "results" / "h200" / name, tmp_path / "results" / "h200" / name)
    shutil.copyfile(PROJECT_ROOT / "results" / "benchmarks.json", tmp_path / "results" / "benchmarks.json")
    (tmp_path / "victim").mkdir()
    (tmp_path / "victim" / "precious.txt").write_text("precious")
    (tmp_path / "victim" / "other.json").write_text("other")
    return tmp_path


def stored_record(sha8: str) -> dict:
    """The JSON of a committed H200 record, decompressed."""
    path = PROJECT_ROOT / "records" / "h200" / f"{sha8}.json.xz"
    return json.loads(decode(path.read_bytes(), path.name))


def _files(folder: Path) -> dict:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and not p.is_symlink() and ".fusebench-staging" not in p.parts}


def _run(capsys, *argv) -> tuple[int, list[str]]:
    with pytest.raises(SystemExit) as end:
        main(list(map(str, argv)))
    return end.value.code, capsys.readouterr().err.splitlines()


# -- item 1: a committed or pulled journal is never obeyed outside its folder ----------------------

def test_the_staging_folders_are_ignored_by_git():
    for path in ("results/.fusebench-staging/journal.json", "records/.fusebench-staging/1-1.part",
                 ".asv/quick-results/.fusebench-staging/journal.json"):
        out = subprocess.run(["git", "check-ignore", "-q", path], cwd=PROJECT_ROOT)
        assert out.returncode == 0, path


def _attack(checkout: Path, how: str) -> None:
    staging = checkout / "results" / transaction.STAGING
    staging.mkdir()
    (staging / "1-1.part").write_text("attacker's text")
    journal = {"moves": [], "deletes": [], "folder": os.lstat(staging).st_ino}  # as if this host's own
    if how == "delete outside":
        journal["deletes"] = ["../victim/precious.txt"]
    elif how == "delete through dots":
        journal["deletes"] = ["results/h200/../../victim/precious.txt"]
    elif how == "delete absolute":
        journal["deletes"] = [str(checkout / "victim" / "precious.txt")]
    elif how == "move onto outside":
        journal["moves"] = [["results/.fusebench-staging/1-1.part", "victim/other.json"]]
    elif how == "move an outside file in":
        journal["moves"] = [["victim/precious.txt", f"results/h200/{RESULT}"]]
    elif how == "move a stored file away":
        journal["moves"] = [[f"results/h200/{RESULT}", "results/h200/x.json"]]
    elif how == "through a symlinked folder":
        os.symlink(checkout / "victim", checkout / "results" / "evil")
        journal["deletes"] = ["results/evil/other.json"]
    elif how == "a staging folder that is a symlink":
        shutil.rmtree(staging)
        os.symlink(checkout / "victim", staging)
        return
    elif how == "a journal that is a symlink":
        (checkout / "victim" / "j.json").write_text(json.dumps(
            {"moves": [], "deletes": ["../victim/precious.txt"]}))
        os.symlink(checkout / "victim" / "j.json", staging / transaction.JOURNAL)
        return
    elif how == "not a journal":
        journal = {"moves": [["a"]], "deletes": [], "run": "rm -rf /"}
    (staging / transaction.JOURNAL).write_text(json.dumps(journal))


ATTACKS = ["delete outside", "delete through dots", "delete absolute", "move onto outside",
           "move an outside file in", "move a stored file away", "through a symlinked folder",
           "a staging folder that is a symlink", "a journal that is a symlink", "not a journal"]


@pytest.mark.parametrize("how", ATTACKS)
def test_a_pulled_journal_is_refused_in_one_line_and_touches_nothing(checkout, capsys, how):
    """Item 1: ``"deletes": ["../victim_dir/precious.txt"]`` deleted that file, and a planned move
    overwrote a file in another folder; the only output was "finished storing 1 file(s)"."""
    _attack(checkout, how)
    before = _files(checkout)
    code, err = _run(capsys, "store", checkout / "records" / "h200" / f"{SHA8}.json.xz")
    assert code == 2
    assert len(err) == 1 and err[0].startswith("store: error: ") and "refused" in err[0], err
    assert "remove" in err[0] and ".fusebench-staging" in err[0]
    assert _files(checkout) == before
    assert (checkout / "victim" / "precious.txt").read_text() == "precious"
    assert (checkout / "victim" / "other.json").read_text() == "other"


def test_a_journal_is_refused_by_collect_too(checkout, capsys, tmp_path):
    _attack(checkout, "delete outside")
    code, err = _run(capsys, "collect", "--into", checkout / "results", checkout / "results")
    assert code == 2 and len(err) == 1 and "refused" in err[0], err
    assert (checkout / "victim" / "precious.txt").read_text() == "precious"


def test_a_journal_of_this_hosts_own_store_is_still_finished(checkout):
    results, records = checkout / "results", checkout / "records"
    txn = transaction.Transaction(results, (records,))
    txn.add_bytes(results / "h200" / "machine.json", b'{"new": 1}')
    txn.add_bytes(records / "h200" / "deadbeef.json", b"{}")
    txn.delete(results / "benchmarks.json")
    txn.committed = True  # killed after the commit point, before the renames
    atomic.write_atomic(results / transaction.STAGING / transaction.JOURNAL, json.dumps(txn.journal()))
    with transaction.locked(results, "store", (records,)):
        pass
    assert (results / "h200" / "machine.json").read_bytes() == b'{"new": 1}'
    assert (records / "h200" / "deadbeef.json").read_bytes() == b"{}"
    assert not (results / "benchmarks.json").exists()
    assert not (results / transaction.STAGING).exists()


# -- item 2: every string from git that reaches the site is escaped or refused ---------------------

def test_a_git_tag_with_markup_is_left_out_of_the_sites_index(tmp_path):
    """Item 2 (the browser test: tests/test_site_browser.py): asv's page writes each tag name of
    ``index.json`` into HTML as it is."""
    from fusebench.site import site_fixes

    tags = {"<img/src=x/onerror=alert(1)>": 3, "v1.0": 5, "release/2026-11": 7, "a&b": 8, "x\"y": 9}
    (tmp_path / "index.json").write_text(json.dumps({"tags": tags, "benchmarks": {}}))
    left_out = site_fixes.drop_unsafe_tags(tmp_path)
    assert left_out == [repr("<img/src=x/onerror=alert(1)>"), repr("a&b"), repr("x\"y")]
    assert json.loads((tmp_path / "index.json").read_text())["tags"] == {"v1.0": 5, "release/2026-11": 7}


# -- item 3: a timing is a finite positive number, where files enter and where the gate reads -----

HEAD8 = "463f960f"
#: (where, value): an impossible hot device time in a record's round or in asv's file (where NaN
#: is asv's "skipped", a case left out, not a figure).
IMPOSSIBLE = [pytest.param(where, value, id=f"{where}-{name}")
              for where in ("record", "result")
              for name, value in (("nan", float("nan")), ("inf", float("inf")), ("negative", -1.0),
                                  ("zero", 0.0), ("1e308", 1e308))
              if not (where == "result" and name == "nan")]


def _folder(tmp_path: Path, where: str, value: float) -> Path:
    """A results folder (and its records folder) of commit 463f960f on h200 whose first case's
    hot device time is ``value``: in the record's first round (``record``) or in asv's file
    (``result``)."""
    results = tmp_path / "other" / "results"
    (results / "h200").mkdir(parents=True)
    (tmp_path / "other" / "records" / "h200").mkdir(parents=True)
    shutil.copyfile(PROJECT_ROOT / "results" / "h200" / "machine.json", results / "h200" / "machine.json")
    result = json.loads((PROJECT_ROOT / "results" / "h200" / f"{HEAD8}-existing-py3.12.json").read_text())
    record = stored_record(HEAD8)
    if where == "record":
        record["records"][0]["rounds"][0]["device_time_ms"] = value
    else:
        result["results"]["suite.Gelu.track_device_time"][0][0] = value
    (results / "h200" / f"{HEAD8}-existing-py3.12.json").write_text(json.dumps(result))
    (tmp_path / "other" / "records" / "h200" / f"{HEAD8}.json.xz").write_bytes(encode(record))
    return results


@pytest.mark.parametrize("where, value", IMPOSSIBLE)
def test_an_impossible_timing_is_refused_by_collect(tmp_path, capsys, where, value):
    """Item 3: collect accepted NaN, Infinity, negative, zero and 1e308 timings."""
    source = _folder(tmp_path, where, value)
    into = tmp_path / "results"
    code, err = _run(capsys, "collect", "--into", into, source)
    assert code == 2, err
    bad = source / "h200" / f"{HEAD8}-existing-py3.12.json" if where == "result" else \
        runrecord.records_dir(source) / "h200" / f"{HEAD8}.json.xz"
    assert [line for line in err if "error" in line] == [line for line in err if str(bad) in line], err
    assert any(str(bad) in line and ("device_time" in line) for line in err), err
    assert not (into / "h200").exists()


@pytest.mark.parametrize("where, value", IMPOSSIBLE)
def test_an_impossible_timing_is_refused_where_the_gate_reads(tmp_path, capsys, where, value):
    """Item 3: compare judged them: NaN -> "916 same -> ok", -1 -> "246 improvement", Infinity or
    1e308 -> 850 regressions, 0 -> ``error: ZeroDivisionError`` with no file named."""
    head = _folder(tmp_path, where, value)
    code, err = _run(capsys, "compare", "--machine", "h200", "--base", HEAD8, "--head", HEAD8,
                     "--head-results", head)
    bad = head / "h200" / f"{HEAD8}-existing-py3.12.json" if where == "result" else \
        runrecord.records_dir(head) / "h200" / f"{HEAD8}.json.xz"
    assert code == 2, err
    assert len(err) == 1, err
    assert err[0].startswith("compare: error: ") and str(bad) in err[0] and "device_time" in err[0], err
    assert ("not a finite number" if value != value or value == float("inf") else
            "not positive" if value <= 0 else "larger than") in err[0]


# -- item 4: a comparison of two GPU models is refused ---------------------------------------------

@pytest.mark.parametrize("where", ["both", "result", "record"])
def test_a_comparison_of_two_gpu_models_is_refused_in_one_line(tmp_path, capsys, where):
    """Item 4: ``HEAD_RESULTS=<a folder whose gpu fields say NVIDIA H100, figures x1.5>`` gave
    "867 regression -> FAIL"."""
    head = tmp_path / "other" / "results"
    (head / "h200").mkdir(parents=True)
    (tmp_path / "other" / "records" / "h200").mkdir(parents=True)
    name = f"{HEAD8}-existing-py3.12.json"
    result = json.loads((PROJECT_ROOT / "results" / "h200" / name).read_text())
    record = stored_record(HEAD8)
    machine = json.loads((PROJECT_ROOT / "results" / "h200" / "machine.json").read_text())
    if where in ("both", "result"):
        result["params"]["gpu"] = machine["gpu"] = "NVIDIA H100 80GB HBM3"
    if where in ("both", "record"):
        record["environment"]["gpu"] = "NVIDIA H100 80GB HBM3"
    for row in result["results"].values():
        row[0] = [v * 1.5 if isinstance(v, float) else v for v in row[0]]
    (head / "h200" / name).write_text(json.dumps(result))
    (head / "h200" / "machine.json").write_text(json.dumps(machine))
    (tmp_path / "other" / "records" / "h200" / f"{HEAD8}.json.xz").write_bytes(encode(record))
    code, err = _run(capsys, "compare", "--machine", "h200", "--base", HEAD8, "--head", HEAD8,
                     "--head-results", head)
    assert code == 2 and len(err) == 1, err
    if where == "both":
        assert err[0] == (f"compare: error: the sides ran on different GPU models: base {HEAD8} on "
                          f"'NVIDIA H200' ({PROJECT_ROOT / 'results' / 'h200'}), head {HEAD8} on "
                          f"'NVIDIA H100 80GB HBM3' ({head / 'h200'}); the gate compares one GPU model "
                          "with itself")
    else:
        assert err[0].startswith("compare: error: the head side's result says GPU "), err
        assert "'NVIDIA H100 80GB HBM3'" in err[0] and "'NVIDIA H200'" in err[0]


def test_two_runs_of_one_gpu_model_are_still_compared(tmp_path, capsys):
    head = _folder(tmp_path, "record", 0.018)
    code, err = _run(capsys, "compare", "--machine", "h200", "--base", HEAD8, "--head", HEAD8,
                     "--head-results", head)
    assert code in (0, 1) and err[-1].startswith(f"compare: h200 {HEAD8} -> {HEAD8}"), err


# -- item 5: no reader or writer sees a result of one run beside the record of another ------------

STORED = "b34537daa35e35ef4d13d50f6e068f35a1ddeda0"  # a committed H200 run with result and record

#: The child: a re-run of two cases of STORED stored into argv[1] (results/, records/ beside it)
#: as make bench stores it, SIGKILLed just before the transaction's argv[2]-th rename (the
#: journal's is the first; 0: never); it prints how many renames it made.
_KILLED_STORE = """
import os, signal, sys
from pathlib import Path
from fusebench import atomic
from fusebench.commands import bench
from fusebench.storage import runrecord, transaction
from fusebench.ops import OPS
from fusebench.paths import PROJECT_ROOT
from fusebench.record import Sweep

results, kill_at, count = Path(sys.argv[1]), int(sys.argv[2]), [0]

class Os:
    def __getattr__(self, name):
        return getattr(os, name)
    def replace(self, a, b):
        count[0] += 1
        if count[0] == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        os.replace(a, b)

transaction.os = atomic.os = Os()  # the journal is written by fusebench.atomic
sweep = Sweep.load(PROJECT_ROOT / "records" / "h200" / "%s.json.xz")
sweep.records = sweep.records[:2]
sweep.records[0].device_time_ms = 123.0
ops = [OPS[name] for name in sorted({r.op for r in sweep.records})]
records = runrecord.records_dir(results)
with transaction.locked(results, "bench", (records,)):
    bench.store_run(sweep, "h200", "%s", results, ops)
print("renames", count[0], file=sys.stderr)
""" % (STORED[:8], STORED)


def _stored_run(tmp_path: Path) -> Path:
    results = tmp_path / "results"
    (results / "h200").mkdir(parents=True)
    (tmp_path / "records" / "h200").mkdir(parents=True)
    for name in ("machine.json", f"{STORED[:8]}-existing-py3.12.json"):
        shutil.copyfile(PROJECT_ROOT / "results" / "h200" / name, results / "h200" / name)
    shutil.copyfile(PROJECT_ROOT / "results" / "benchmarks.json", results / "benchmarks.json")
    shutil.copyfile(PROJECT_ROOT / "records" / "h200" / f"{STORED[:8]}.json.xz",
                    tmp_path / "records" / "h200" / f"{STORED[:8]}.json.xz")
    return results


def _which_run(results: Path) -> tuple[str, str]:
    """("new", "new") when the stored result, and the record, hold the re-run's 123 ms case."""
    from fusebench.storage.results import read_file

    run = read_file(results / "h200" / f"{STORED[:8]}-existing-py3.12.json")
    path = runrecord.records_dir(results) / "h200" / f"{STORED[:8]}.json.xz"
    record = json.loads(decode(path.read_bytes(), path.name))
    new_result = 0.123 in run.values["suite.Softmax.track_device_time"].values()
    new_record = any(r["device_time_ms"] == 123.0 for r in record["records"])
    return ("new" if new_result else "old"), ("new" if new_record else "old")


@pytest.mark.slow  # a store killed at each of its renames: six processes importing torch
def test_a_store_killed_at_each_rename_is_finished_or_refused_by_readers_and_writers(tmp_path, capsys):
    """Item 5: with a kill between the renames of one store, compare ran on a new result beside an
    old record, and ``fusebench store RECORD``, reading the record before taking the lock, rolled
    the journal forward and then rewrote the result from the old record, for good."""
    env = dict(os.environ, PYTHONPATH=str(PROJECT_ROOT))
    kill_at, renames = 1, None
    while renames is None or kill_at <= renames:
        where = tmp_path / str(kill_at)
        results = _stored_run(where)
        out = subprocess.run([sys.executable, "-c", _KILLED_STORE, str(results), str(kill_at)], env=env,
                             capture_output=True, text=True, timeout=300)
        if out.returncode == 0:  # no kill: how many renames a store makes
            renames = int(out.stderr.split("renames ")[-1])
            assert renames >= 5 and _which_run(results) == ("new", "new")
            break
        assert out.returncode == -9, out.stderr
        committed = (results / transaction.STAGING / transaction.JOURNAL).exists()
        assert committed == (kill_at > 1)
        for who in ("compare", "store"):  # a reader, then (on a copy) the next writer
            folder = where / who
            shutil.copytree(where, folder, symlinks=True, ignore=shutil.ignore_patterns("compare", "store"))
            if committed:  # the copy as the killed store's own folder (a copied journal is refused)
                copied = folder / "results" / transaction.STAGING
                journal = json.loads((copied / transaction.JOURNAL).read_text())
                journal["folder"] = os.lstat(copied).st_ino
                (copied / transaction.JOURNAL).write_text(json.dumps(journal))
            if who == "compare":
                code, err = _run(capsys, "compare", "--machine", "h200", "--base", STORED, "--head", STORED,
                                 "--results", folder / "results")
            else:
                code, err = _run(capsys, "store", folder / "records" / "h200" / f"{STORED[:8]}.json.xz")
            assert code == 0, (kill_at, who, err)
            assert any("finished storing" in line for line in err) == committed, err
            expected = ("new", "new") if committed else ("old", "old")
            assert _which_run(folder / "results") == expected, (kill_at, who)
            # a killed writer's uncommitted staging is left to the next writer (the files are as they were)
            assert (folder / "results" / transaction.STAGING).exists() == (not committed and who == "compare")
        kill_at += 1
    assert renames is not None and kill_at > 5


def test_a_reader_refuses_while_a_writer_holding_the_lock_has_a_journal(tmp_path, capsys, monkeypatch):
    results = _stored_run(tmp_path)
    staging = results / transaction.STAGING
    staging.mkdir()
    (staging / transaction.JOURNAL).write_text(json.dumps({"moves": [], "deletes": [],
                                                           "folder": os.lstat(staging).st_ino}))
    monkeypatch.setattr(transaction, "SETTLE_WAIT_S", 0.2)
    fd = os.open(results, os.O_RDONLY | os.O_DIRECTORY)
    try:
        import fcntl

        fcntl.flock(fd, fcntl.LOCK_EX)  # a writer in its renames
        code, err = _run(capsys, "compare", "--machine", "h200", "--base", STORED, "--head", STORED,
                         "--results", results)
    finally:
        os.close(fd)
    assert code == 2 and err == [f"compare: error: {results}/ is being stored into by another fusebench "
                                 "run; compare refused: run it again once that one has finished"]


# -- item 6: one schema per stored file kind, used by collect and every reader ---------------------

def _poison(record: dict, result: dict, how: str) -> None:
    rec = record["records"][0]
    if how == "rounds":
        record["rounds"] = "three"
    elif how == "ceilings":
        record["ceilings_gbps"] = "x"
    elif how == "phases":
        record["phases"] = {"measure": "long"}
    elif how == "status":
        rec["status"] = "pwned"
    elif how == "wall time":
        rec["wall_time_ms"] = "fast"
    elif how == "string value":
        result["results"]["suite.Gelu.track_device_time"][0][0] = "fast"
    elif how == "object value":
        result["results"]["suite.Gelu.track_device_time"][0][0] = {"a": 1}


WRONG_TYPES = ["rounds", "ceilings", "phases", "status", "wall time", "string value", "object value"]


def _typed_folder(tmp_path: Path, how: str) -> tuple[Path, Path]:
    """A results folder of 463f960f on h200 with one wrong type; and the file that holds it."""
    results = _folder(tmp_path, "record", 0.018)
    result_path = results / "h200" / f"{HEAD8}-existing-py3.12.json"
    record_path = runrecord.records_dir(results) / "h200" / f"{HEAD8}.json.xz"
    record = json.loads(decode(record_path.read_bytes(), record_path.name))
    result = json.loads(result_path.read_text())
    _poison(record, result, how)
    record_path.write_bytes(encode(record))
    result_path.write_text(json.dumps(result))
    return results, result_path if how.endswith("value") else record_path


@pytest.mark.parametrize("how", WRONG_TYPES)
def test_a_wrong_type_is_refused_by_collect_naming_the_file(tmp_path, capsys, how):
    """Item 6: ``rounds: "three"``, ``ceilings_gbps: "x"``, string phases, ``status: "pwned"``,
    ``wall_time_ms: "fast"`` and results with string or object values passed collect."""
    source, bad = _typed_folder(tmp_path, how)
    code, err = _run(capsys, "collect", "--into", tmp_path / "results", source)
    assert code == 2 and [line for line in err if "error" in line] == [
        line for line in err if line.startswith(f"collect: error: {bad}: ")], err
    assert any(str(bad) in line for line in err)


@pytest.mark.parametrize("how", WRONG_TYPES)
def test_a_wrong_type_in_a_stored_file_is_one_line_for_compare_and_table(tmp_path, capsys, how):
    """Item 6: then compare crashed (``AttributeError: 'str' object has no attribute 'get'``), and
    table, plots and publish with a traceback, without naming the file."""
    results, bad = _typed_folder(tmp_path, how)
    code, err = _run(capsys, "compare", "--machine", "h200", "--base", HEAD8, "--head", HEAD8,
                     "--head-results", results)
    assert code == 2 and len(err) == 1 and err[0].startswith("compare: error: ") and str(bad) in err[0], err
    if not how.endswith("value"):
        code, err = _run(capsys, "table", bad)
        assert code == 2 and len(err) == 1
        assert err[0].startswith(f"table: error: cannot read run record {bad}: ")


def test_a_wrong_type_in_a_stored_result_is_named_by_plots(tmp_path, capsys):
    results, bad = _typed_folder(tmp_path, "string value")
    code, err = _run(capsys, "plots", "--results", results, "--out", tmp_path / "plots")
    assert code != 0 and any(line.startswith(f"plots: error: cannot read {bad}: ") for line in err), err
    assert not any("Traceback" in line for line in err)


# -- item 8: a record that cannot be read is reported, not silently dropped ------------------------

def _history(tmp_path: Path) -> tuple[Path, Path]:
    """results/ and records/ with every committed h200 file; the newest record truncated."""
    shutil.copytree(PROJECT_ROOT / "results" / "h200", tmp_path / "results" / "h200")
    shutil.copyfile(PROJECT_ROOT / "results" / "benchmarks.json", tmp_path / "results" / "benchmarks.json")
    shutil.copytree(committed_folder("records") / "h200", tmp_path / "records" / "h200")
    bad = tmp_path / "records" / "h200" / "0395b139.json.xz"
    bad.write_bytes(bad.read_bytes()[:5000])
    return tmp_path / "results", bad


def test_a_truncated_record_of_the_history_is_named_by_compare(tmp_path, capsys):
    """Item 8: a truncated record was dropped from the A/A history without a word (38 -> 36 pairs,
    a limit moving 1.292 -> 1.301)."""
    results, bad = _history(tmp_path)
    code, err = _run(capsys, "compare", "--machine", "h200", "--base", "0a5fc94f", "--head", HEAD8,
                     "--results", results)
    assert code == 2
    errors = [line for line in err if "error" in line]
    assert len(errors) == 1, err
    assert errors[0].startswith(f"compare: error: cannot read run record {bad}: truncated: its xz stream "
                                "ends before its end marker")
    assert errors[0].endswith("; left out of the A/A history the limits are learned from")


def test_a_truncated_record_on_the_runs_page_is_named_by_publish(tmp_path):
    """Item 8: publish said "every stored file was read" while its Runs page said "unreadable
    record"."""
    from fusebench.site import site
    from fusebench.storage import results as results_mod

    results, bad = _history(tmp_path)
    reader = results_mod.Reader(results)
    site.write_runs_page(tmp_path / "html", runrecord.records_dir(results), reader)
    assert [u.path for u in reader.unreadable] == [bad]
    assert reader.lines("publish")[0].startswith(f"publish: error: cannot read {bad}: truncated")
    assert "unreadable record" in (tmp_path / "html" / "runs" / "index.html").read_text()


# -- item 7: a symlink inside the stored tree is refused by publish --------------------------------

@pytest.mark.parametrize("link", ["file", "folder"])
def test_a_symlinked_record_is_not_shown_on_the_runs_page(tmp_path, link):
    """Item 7: a record linked to an outside file (``deadbeef.json`` in h200/) was followed by publish: the
    outside file's text appeared on the Runs page."""
    from fusebench.site import site
    from fusebench.storage import results as results_mod

    results, _ = _history(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    record = stored_record(HEAD8)
    record["environment"]["git_commit"] = "deadbeef" + "0" * 32
    record["environment"]["cpu"] = "SECRET-TEXT-OF-ANOTHER-FILE"
    (outside / "deadbeef.json").write_text(json.dumps(record))
    records = runrecord.records_dir(results)
    if link == "file":
        os.symlink(outside / "deadbeef.json", records / "h200" / "deadbeef.json")
        linked = records / "h200" / "deadbeef.json"
    else:
        os.symlink(outside, records / "h100")
        linked = records / "h100" / "deadbeef.json"
    reader = results_mod.Reader(results)
    page = site.write_runs_page(tmp_path / "html", records, reader).read_text()
    assert "SECRET-TEXT" not in page
    assert linked in [u.path for u in reader.unreadable]
    assert any(line.startswith(f"publish: error: cannot read {linked}: ") and "symlink" in line
               for line in reader.lines("publish"))


# -- item 9: a killed publish's children end with it -----------------------------------------------

#: The parent: ``asv publish`` (a stand-in that sleeps) run as publish runs it, or the plot
#: workers forked as publish forks them (drawing replaced by a sleep); it prints its children's
#: pids once they run, then is SIGKILLed by the test.
def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                status = (entry / "status").read_text()
            except OSError:
                continue
            if f"\nPPid:\t{pid}\n" in status:
                found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "status").read_text().split("\nState:\t")[1][0]
    except (OSError, IndexError):
        return False
    return state not in "ZX"


# -- item 10: bounds on rounds and shape size, a NUL byte in the case file named -------------------

def _case_file(tmp_path: Path, change) -> Path:
    import yaml

    data = yaml.safe_load((PROJECT_ROOT / "fusebench.yaml").read_text())
    change(data)
    path = tmp_path / "cases.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_a_shape_the_device_cannot_hold_is_refused_before_measuring(tmp_path, capsys):
    """Item 10: a 65536x65536 shape (2^32 elements) was accepted; on this host (or any GPU under
    103 GB) it can only fail after minutes."""
    from fusebench.ops import OPS
    from fusebench.storage import preflight

    def big(data):
        for grid in ("default", "cpu"):
            data["ops"]["gelu"]["grids"][grid].append("65536x65536")

    path = _case_file(tmp_path, big)
    code, err = _run(capsys, "bench", "--config", path, "--ops", "gelu", "--dry-run")
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith("bench: error: gelu shape 65536x65536: 4.29e+09 elements need about 103 GB "
                             "(24 B each: input, output and the float64 reference), more than the "), err
    assert err[0].endswith("; nothing measured (leave it out with SHAPES= or the case file)")
    cases = [(OPS["gelu"], "torch", (65536, 65536), "float32"), (OPS["gelu"], "torch", (1024,), "float32")]
    preflight.memory(cases, 141 << 30, "NVIDIA H200")  # an H200 holds it
    with pytest.raises(Exception, match="more than the 80 GB of NVIDIA H100"):
        preflight.memory(cases, 80 * 10**9, "NVIDIA H100")


def test_rounds_beyond_what_a_run_can_do_are_refused_at_once(tmp_path, capsys):
    """Item 10: ``rounds: 100000000000`` was accepted."""
    path = _case_file(tmp_path, lambda d: d["settings"].update(rounds=100000000000))
    code, err = _run(capsys, "list", "--config", path)
    assert code == 2 and err == [f"list: error: {path}: settings.rounds: bad value 100000000000; valid: an "
                                 "integer from 1 to 100 (a round of the default grid takes minutes)"]
    with pytest.raises(SystemExit) as end:
        main(["bench", "--rounds", "100000000000", "--dry-run"])
    assert end.value.code == 2
    assert ("argument --rounds: give a whole number from 1 to 100, not '100000000000'"
            in capsys.readouterr().err)


def test_a_nul_byte_in_the_case_file_is_one_line_naming_it(tmp_path, capsys):
    """Item 10: a NUL byte in the case file was exit 1 with no file named."""
    path = tmp_path / "cases.yaml"
    path.write_bytes((PROJECT_ROOT / "fusebench.yaml").read_bytes().replace(b"ops:", b"ops:\x00", 1))
    code, err = _run(capsys, "list", "--config", path)
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith(f"list: error: {path}: not valid YAML (character ")
    assert err[0].endswith("): character #x0000 is not allowed in YAML (a NUL or other control byte)")


# -- item 11: docs/untrusted-input.md says what preflight checks -----------------------------------

def test_the_document_names_the_folders_preflight_checks(tmp_path, monkeypatch):
    """Item 11: the document said preflight checks a writable HOME (and .asv/); it does not (a
    read-only HOME costs only the offline site)."""
    import contextlib
    import re

    from fusebench.commands import bench
    from fusebench.storage import preflight

    seen: dict = {}
    monkeypatch.setattr(preflight, "check", lambda folders, cases: seen.update(folders))
    with contextlib.ExitStack() as held:
        bench.ready(held, set(), tmp_path / "results", 10)
    text = (PROJECT_ROOT / "docs" / "untrusted-input.md").read_text()
    bullet = text.split("- **Preflight**")[1].split("\n- **")[0]
    claimed = re.search(r"creates and\s+removes a file in the (.+?) folders", bullet).group(1)
    assert claimed.replace("\n  ", " ").split(" and ") == list(seen) == ["results", "run records"]
    assert "`HOME` is not checked" in bullet and "A read-only `HOME` costs only the offline site" in bullet


_TERMED_PUBLISH = """
import signal, sys
from pathlib import Path
from fusebench.site import site

def interrupt(*args):
    raise KeyboardInterrupt  # as fusebench.cli.run_main turns SIGTERM into one

signal.signal(signal.SIGTERM, interrupt)
tmp = Path(sys.argv[1])
sleeper = tmp / "python"
sleeper.write_text("#!/bin/sh\\nexec sleep 120\\n")
sleeper.chmod(0o755)
(tmp / "html").mkdir()
results = Path(sys.argv[2])
site._build(results, results, tmp / "html", [], False, str(sleeper), tmp / "site")
"""


def test_a_terminated_publish_stops_asv_at_once(tmp_path):
    """Item 9: a publish ended by SIGTERM waited for ``asv publish`` to finish (minutes at scale)
    before it exited."""
    import signal
    import time

    env = dict(os.environ, PYTHONPATH=str(PROJECT_ROOT))
    parent = subprocess.Popen([sys.executable, "-c", _TERMED_PUBLISH, str(tmp_path),
                               str(committed_folder("results"))], env=env)
    try:
        deadline = time.monotonic() + 120
        while not (kids := [k for k in _children(parent.pid) if _alive(k)]):
            assert parent.poll() is None and time.monotonic() < deadline, "asv publish never started"
            time.sleep(0.2)
        parent.send_signal(signal.SIGTERM)
        parent.wait(timeout=90)  # not the 120 s of the stand-in (a loaded 2-core host took over 30 s)
    finally:
        if parent.poll() is None:
            parent.kill()
    left = [k for k in kids if _alive(k)]
    for k in left:
        os.kill(k, signal.SIGKILL)
    assert left == []
