"""Issue 28, items 4-8: no fault loses or mismatches a stored result. Stored files are written
atomically, a run's result and record are committed together under the results folder's lock,
an unwritable results/ is found before measuring, publish swaps a finished site in,
scratch folders go on every exit path, and make bench takes a checkout path with a space."""

import errno
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from committed import committed_folder

from fusebench import atomic, tmpdirs
from fusebench.asv import store
from fusebench.paths import PROJECT_ROOT
from fusebench.record import Sweep
from fusebench.site import site
from fusebench.storage import runrecord, transaction

COMMIT = "b34537daa35e35ef4d13d50f6e068f35a1ddeda0"
RESULT = f"{COMMIT[:8]}-existing-py3.12.json"


def hashes(*folders: Path) -> dict:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest()
            for f in folders if f.exists() for p in sorted(f.rglob("*")) if p.is_file()}


@pytest.fixture
def stored(tmp_path) -> Path:
    """results/ and records/ holding the committed H200 result and record of one commit."""
    results = tmp_path / "results"
    (results / "h200").mkdir(parents=True)
    (tmp_path / "records" / "h200").mkdir(parents=True)
    for name in ("machine.json", RESULT):
        shutil.copyfile(PROJECT_ROOT / "results" / "h200" / name, results / "h200" / name)
    shutil.copyfile(PROJECT_ROOT / "records" / "h200" / f"{COMMIT[:8]}.json.xz",
                    tmp_path / "records" / "h200" / f"{COMMIT[:8]}.json.xz")
    return results


def _sweep() -> Sweep:
    return Sweep.load(PROJECT_ROOT / "records" / "h200" / f"{COMMIT[:8]}.json.xz")


def _rerun() -> tuple[Sweep, list]:
    """What a re-run of two cases of the commit would store: other figures; and its ops."""
    from fusebench.ops import OPS

    sweep = _sweep()
    sweep.records = sweep.records[:2]
    sweep.records[0].device_time_ms = 123.0
    return sweep, [OPS[name] for name in sorted({r.op for r in sweep.records})]


def _store_run(sweep: Sweep, ops: list, stored: Path) -> int:
    from fusebench.commands import bench

    return bench.store_run(sweep, "h200", COMMIT, stored, ops)


def test_a_full_disk_while_storing_leaves_the_stored_result_as_it_was(tmp_path, stored, monkeypatch):
    """Item 4: the result file was copied over in place; a run failing half-way left 20,480
    bytes of invalid JSON where 11.5 KB of valid JSON had been."""
    records = runrecord.records_dir(stored)
    before = hashes(stored, records)

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(transaction.os, "fsync", full)
    with pytest.raises(OSError, match="No space left"), transaction.locked(stored, "bench", (records,)):
        _store_run(*_rerun(), stored)
    assert hashes(stored, records) == before
    assert not [p for p in stored.rglob("*") if p.name.endswith(".part")]


@pytest.mark.parametrize("killed_in", ["record", "journal"])
def test_a_kill_between_result_and_record_stores_neither(tmp_path, stored, monkeypatch, killed_in):
    """Item 5: a kill between storing the asv result and saving the run record left the result of
    one run beside the record of another."""
    from fusebench.commands import bench

    def killed(*args, **kwargs):
        raise KeyboardInterrupt

    if killed_in == "record":
        monkeypatch.setattr(bench.runrecord, "stage", killed)
    else:
        monkeypatch.setattr(transaction, "write_atomic", killed)
    records = runrecord.records_dir(stored)
    before = hashes(stored, records)
    with pytest.raises(KeyboardInterrupt), transaction.locked(stored, "bench", (records,)):
        _store_run(*_rerun(), stored)
    assert hashes(stored, records) == before
    assert not list(stored.parent.rglob(".fusebench-staging"))


def test_result_and_record_committed_together_are_finished_by_the_next_writer(tmp_path, stored, monkeypatch):
    records = runrecord.records_dir(stored)
    committed = PROJECT_ROOT / "results" / "h200" / RESULT
    with transaction.locked(stored, "bench", (records,)):
        with monkeypatch.context() as m, pytest.raises(KeyboardInterrupt):
            m.setattr(transaction, "roll_forward", lambda *a: (_ for _ in ()).throw(KeyboardInterrupt))
            _store_run(*_rerun(), stored)
    # killed after the commit point: neither file is in place yet ...
    assert (stored / "h200" / RESULT).read_bytes() == committed.read_bytes()
    # ... and the next writer stores both
    with transaction.locked(stored, "bench", (records,)):
        pass
    data = json.loads((stored / "h200" / RESULT).read_text())
    assert 0.123 in data["results"]["suite.Softmax.track_device_time"][0]
    assert {r.key for r in Sweep.load(records / "h200" / f"{COMMIT[:8]}.json.xz").records} == {
        r.key for r in _sweep().records}  # merged with the cases the run did not measure
    assert not list(stored.parent.rglob(".fusebench-staging"))


def test_storing_a_run_leaves_every_other_commits_files_as_they_were(tmp_path):
    """make bench writes only its own commit's result and record (and the machine's entry and
    benchmarks.json): each committed H200 file of another commit keeps its bytes."""
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=PROJECT_ROOT, capture_output=True,
                          text=True, check=True).stdout.strip()
    results, records = tmp_path / "results", tmp_path / "records"
    shutil.copytree(PROJECT_ROOT / "results" / "h200", results / "h200")
    shutil.copytree(PROJECT_ROOT / "records" / "h200", records / "h200")
    for own in [*(results / "h200").glob(f"{head[:8]}-*"), records / "h200" / f"{head[:8]}.json.xz"]:
        own.unlink(missing_ok=True)  # a checkout whose HEAD's run is stored: store it afresh
    before = hashes(results, records)
    sweep, ops = _rerun()
    sweep.environment = dict(sweep.environment, git_commit=head)
    with transaction.locked(results, "bench", (records,)):
        from fusebench.commands import bench

        assert bench.store_run(sweep, "h200", head, results, ops) == 0
    after = hashes(results, records)
    mine = {str(results / "h200" / f"{head[:8]}-existing-py3.12.json"),
            str(records / "h200" / f"{head[:8]}.json.xz"), str(results / "benchmarks.json")}
    assert set(after) - set(before) == mine
    machine = str(results / "h200" / "machine.json")
    assert {p: h for p, h in after.items() if p not in mine | {machine}} == {
        p: h for p, h in before.items() if p != machine}
    stored = json.loads((results / "h200" / f"{head[:8]}-existing-py3.12.json").read_text())
    assert stored["commit_hash"] == head


def _bench(tmp_path: Path, results: Path, home: Path, timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fusebench", "bench", "--quick", "--ops", "gelu",
                           "--backends", "torch", "--dtypes", "float32", "--results", str(results),
                           "--no-publish"],
                          cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, HOME=str(home)))


@pytest.mark.slow
def test_a_second_bench_of_one_results_folder_is_refused_before_measuring(tmp_path, stored):
    """Item 5: two make bench of one commit both exited 0, storing one run's result beside the
    other's record."""
    records = runrecord.records_dir(stored)
    before = hashes(stored, records)
    with transaction.locked(stored, "bench", (records,)):
        out = _bench(tmp_path, stored, tmp_path)
    assert out.returncode == 2, out.stderr
    assert out.stderr.splitlines()[-1] == (
        f"bench: error: {stored}/ is in use by another fusebench run (make bench or make collect into it); "
        "bench refused: run it again once that one has finished")
    assert "sweep saved" not in out.stderr and "phases" not in out.stderr  # nothing measured
    assert hashes(stored, records) == before


@pytest.mark.slow
def test_an_unwritable_results_folder_is_refused_before_measuring(tmp_path):
    """Item 6: a read-only results/ was found only after measuring (the run lost)."""
    results = Path("/sys/fusebench-test") / "results"  # creating anything here fails, for root too
    out = _bench(tmp_path, results, tmp_path)
    assert out.returncode == 2, out.stderr
    assert out.stderr.splitlines()[-1].startswith(f"bench: error: cannot store the results in {results}: ")
    assert out.stderr.splitlines()[-1].endswith(
        "; nothing measured (make it writable, or give another folder)")
    assert "Traceback" not in out.stderr and "sweep saved" not in out.stderr and "phases" not in out.stderr


def test_a_killed_publish_leaves_the_site_as_it_was(tmp_path, monkeypatch):
    """Item 7: a killed make publish left html/ wiped down to 14 static files."""
    html = tmp_path / "html"
    html.mkdir()
    (html / "index.html").write_text("the site as it was")

    def killed(results_dir, html_dir, python=sys.executable):
        (Path(html_dir) / "index.html").write_text("half")
        raise KeyboardInterrupt

    monkeypatch.setattr(store, "publish", killed)
    with pytest.raises(KeyboardInterrupt):
        site.publish(committed_folder("results"), html, [])
    assert hashes(html) == {str(html / "index.html"): hashlib.sha256(b"the site as it was").hexdigest()}
    assert [p.name for p in tmp_path.iterdir()] == ["html"]  # no staging folder left
    assert not [p for p in Path("/tmp").glob(f"fusebench-publish-{os.getpid()}-*")]


@pytest.mark.parametrize("mount", [False, True])
def test_swap_in_replaces_the_whole_folder(tmp_path, mount, monkeypatch):
    target = tmp_path / "html"
    target.mkdir()
    (target / "old.html").write_text("old")
    (target / "index.html").write_text("old index")
    monkeypatch.setattr(transaction.os.path, "ismount", lambda p: mount and Path(p) == target)
    new = transaction.staging_folder(target)
    assert (new.parent == target) == mount
    (new / "index.html").write_text("new index")
    (new / "graphs").mkdir()
    (new / "graphs" / "a.json").write_text("{}")
    transaction.swap_in(new, target)
    assert target.stat().st_mode & 0o777 == 0o777 & ~_umask()  # not mkdtemp's 0700: a web server reads it
    assert sorted(p.relative_to(target).as_posix() for p in target.rglob("*")) == [
        "graphs", "graphs/a.json", "index.html"]
    assert (target / "index.html").read_text() == "new index"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["html"]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_a_scratch_folder_is_removed_on_sigterm_and_after_a_sigkill():
    """Item 7: killed runs left staging folders in /tmp."""
    code = ("from fusebench.cli import run_main\nfrom fusebench import tmpdirs\nimport time\n"
            "def main():\n    with tmpdirs.scratch('asv') as p:\n        print(p, flush=True)\n"
            "        time.sleep(60)\nrun_main(main, 'x')\n")
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=PROJECT_ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    folder = Path(proc.stdout.readline().strip())
    assert folder.is_dir()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 130
    assert not folder.exists()

    proc = subprocess.Popen([sys.executable, "-c", code], cwd=PROJECT_ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    folder = Path(proc.stdout.readline().strip())
    proc.kill()
    proc.wait(timeout=30)
    assert folder.is_dir()  # SIGKILL runs nothing: the next scratch folder removes it
    with tmpdirs.scratch("asv"):
        assert not folder.exists()


@pytest.mark.slow
def test_make_bench_takes_a_checkout_path_with_a_space(tmp_path):
    """Item 8: the Makefile's results argument split a checkout path holding a space."""
    checkout = tmp_path / "my checkout"
    checkout.mkdir()
    shutil.copyfile(PROJECT_ROOT / "Makefile", checkout / "Makefile")
    shutil.copytree(PROJECT_ROOT / "scripts", checkout / "scripts")

    def make_n(*args: str) -> str:
        out = subprocess.run(["make", "-n", "--no-print-directory", "bench",
                              f"SYSTEM_PYTHON={sys.executable}", *args], cwd=checkout, capture_output=True,
                             text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return out.stdout.splitlines()[-1].rstrip()

    assert make_n("LOCAL=1") == f"{sys.executable} -m fusebench bench"
    assert make_n("LOCAL=1", f"RESULTS={tmp_path}/other results") == (
        f"{sys.executable} -m fusebench bench --results '{tmp_path}/other results'")
    run = make_n("ENGINE_OK=1", "CONTAINER=docker", "IMAGE_TAG=t")
    assert run.startswith(f"mkdir -p '{checkout}/results' '{checkout}/html' && docker run ")
    assert f"--volume '{checkout}':/workspace --volume '{checkout}/results':/workspace/results" in run


def test_a_stale_staging_folder_of_a_dead_process_is_removed(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f"fusebench-asv-{dead.pid}-abc123"
    live = tmp_path / f"fusebench-asv-{os.getpid()}-abc123"
    for folder in (stale, live):
        folder.mkdir()
    assert tmpdirs.remove_stale(tmp_path) == [stale]
    assert live.is_dir() and not stale.exists()


def test_stored_files_are_written_atomically_with_normal_modes(tmp_path):
    old = os.umask(0o022)
    try:
        path = tmp_path / "a" / "machine.json"
        atomic.write_atomic(path, "{}")
        txn = transaction.Transaction(tmp_path)
        txn.add_bytes(tmp_path / "b" / "result.json", "{}")
        txn.commit()
    finally:
        os.umask(old)
    assert path.read_text() == "{}" and path.stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "b" / "result.json").stat().st_mode & 0o777 == 0o644
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["a", "b", "machine.json", "result.json"]
    assert time.time() >= path.stat().st_mtime
