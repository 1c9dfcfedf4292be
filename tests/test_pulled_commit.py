"""Issue 56: what a pulled commit can do to the filesystem. Each attack is committed in a clone
("upstream") and pulled into another ("mine"), whose own code then runs (``python -m fusebench``
from it): a committed journal is refused, never followed; a committed symlink (a staging folder,
a machine folder, ``plots/<machine>``, ``.asv``) is refused, never written or deleted through."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from throwaway import git

from fusebench.errors import UsageError
from fusebench.gate import bisect_git
from fusebench.paths import PROJECT_ROOT
from fusebench.storage import transaction

BASE8, HEAD8 = "178ab4e8", "0395b139"
RESULT = f"results/h200/{HEAD8}-existing-py3.12.json"
RECORD = f"records/h200/{HEAD8}.json.xz"
#: A CPU run of this host: ignored by git, kept nowhere else.
CPU_RESULT = f"results/cpu-x86_64/{HEAD8}-existing-py3.12.json"
CPU_RECORD = f"records/cpu-x86_64/{HEAD8}.json.xz"


@pytest.fixture
def clones(tmp_path) -> tuple[Path, Path]:
    """(upstream, mine): upstream a clone of this repository with this checkout's code
    (``fusebench/`` and the Makefile, as they are now) committed on top, mine a clone of upstream,
    and ``outside``, a folder beside them that nothing may touch."""
    upstream, mine = tmp_path / "upstream", tmp_path / "mine"
    git(tmp_path, "clone", "-q", str(PROJECT_ROOT), str(upstream))
    git(upstream, "checkout", "-q", "-B", "main")  # a branch to pull, wherever this checkout's HEAD is
    shutil.rmtree(upstream / "fusebench")
    shutil.copytree(PROJECT_ROOT / "fusebench", upstream / "fusebench",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copyfile(PROJECT_ROOT / "Makefile", upstream / "Makefile")
    git(upstream, "add", "-A")
    git(upstream, "commit", "-q", "--allow-empty", "-m", "the code under test")
    git(tmp_path, "clone", "-q", str(upstream), str(mine))
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "precious.txt").write_text("precious")
    return upstream, mine


def pull(upstream: Path, mine: Path, message: str) -> None:
    """Commit everything in upstream (ignored files too: ``git add -f``), pull it into mine."""
    git(upstream, "add", "-A", "-f")
    git(upstream, "commit", "-q", "-m", message)
    git(mine, "pull", "-q", "--ff-only")


def link(upstream: Path, path: str, target: Path) -> None:
    """Make ``path`` of upstream a symbolic link to ``target`` (what was there removed)."""
    where = upstream / path
    if where.is_dir() and not where.is_symlink():
        shutil.rmtree(where)
    where.parent.mkdir(parents=True, exist_ok=True)
    where.symlink_to(target)


def fusebench(mine: Path, *argv) -> subprocess.CompletedProcess:
    """``python -m fusebench ARGV`` of mine's own code, in mine."""
    env = dict(os.environ, PYTHONPATH=str(mine))
    return subprocess.run([sys.executable, "-m", "fusebench", *map(str, argv)], cwd=mine, env=env,
                          capture_output=True, text=True, timeout=600)


def tree(folder: Path) -> dict:
    """Every file under ``folder`` (links as links) and its bytes."""
    return {str(p.relative_to(folder)): (os.readlink(p) if p.is_symlink() else p.read_bytes())
            for p in sorted(folder.rglob("*")) if p.is_symlink() or p.is_file()}


def test_the_code_under_test_is_mine(clones):
    upstream, mine = clones
    code = "from fusebench.paths import PROJECT_ROOT; print(PROJECT_ROOT)"
    out = subprocess.run([sys.executable, "-c", code], cwd=mine, env=dict(os.environ, PYTHONPATH=str(mine)),
                         capture_output=True, text=True)
    assert out.stdout.strip() == str(mine.resolve())


def _source(tmp_path: Path) -> Path:
    """A folder of another host: results/ and records/ of commit 463f960f on h200."""
    source = tmp_path / "fleet"
    for path in ("results/h200/machine.json", "results/h200/463f960f-existing-py3.12.json",
                 "records/h200/463f960f.json.xz", "results/benchmarks.json"):
        (source / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(PROJECT_ROOT / path, source / path)
    return source


# -- item 1: a committed journal is refused, never followed ----------------------------------------

def test_a_committed_journal_is_refused_and_nothing_is_moved_or_deleted(clones, tmp_path):
    """Item 1: compare followed a pulled journal: it overwrote a result with a doctored one,
    deleted a tracked record and this host's ignored CPU result and record, and judged 214
    regressions (exit 1)."""
    upstream, mine = clones
    for path in (CPU_RESULT, CPU_RECORD):
        (mine / path).parent.mkdir(parents=True, exist_ok=True)
        (mine / path).write_text("this host's own run")
    staging = upstream / "results" / transaction.STAGING
    staging.mkdir()
    doctored = json.loads((upstream / RESULT).read_text())
    for values in doctored["results"].values():
        if isinstance(values[0], list):
            values[0] = [v * 10 if isinstance(v, float) else v for v in values[0]]
    (staging / "1-1.part").write_text(json.dumps(doctored))
    journal = {"moves": [[f"results/{transaction.STAGING}/1-1.part", RESULT]],
               "deletes": [RECORD, CPU_RESULT, CPU_RECORD]}  # what the journal of issue 56 names
    (staging / transaction.JOURNAL).write_text(json.dumps(journal))
    pull(upstream, mine, "a journal")
    before = tree(mine / "results") | tree(mine / "records")
    for argv in (["compare", f"--base={BASE8}", f"--head={HEAD8}", "--machine", "h200"],
                 ["collect", _source(tmp_path)], ["store", mine / RECORD]):
        out = fusebench(mine, *argv)
        err = out.stderr.splitlines()
        assert out.returncode == 2 and len(err) == 1, (argv, out.stderr)
        assert "journal.json: refused, not followed: tracked by git" in err[0], err
        assert f"remove {mine / 'results' / transaction.STAGING}/" in err[0]
        assert tree(mine / "results") | tree(mine / "records") == before
    assert (mine / CPU_RESULT).read_text() == "this host's own run"
    assert git(mine, "status", "--porcelain") == ""


def test_a_journal_not_written_in_its_staging_folder_is_refused(tmp_path, capsys):
    """Item 1: a journal a copy or an archive brought (not tracked by git) names paths a writer
    of this folder never staged: refused; one this host's own store wrote is finished."""
    results, records = tmp_path / "results", tmp_path / "records"
    (results / "h200").mkdir(parents=True)
    (results / "h200" / "machine.json").write_text("old")

    def killed_store() -> dict:
        txn = transaction.Transaction(results, (records,))
        txn.add_bytes(results / "h200" / "machine.json", b"new")
        journal = txn.journal()
        atomic_journal = results / transaction.STAGING / transaction.JOURNAL
        atomic_journal.write_text(json.dumps(journal))
        return journal

    journal = killed_store()
    staging = results / transaction.STAGING
    staging.rename(tmp_path / "copied")  # the same files, in a folder made after they were written
    staging.mkdir()
    for entry in (tmp_path / "copied").iterdir():
        entry.rename(staging / entry.name)
    with pytest.raises(UsageError, match="refused, not followed: not written in this staging folder"):
        transaction.read_journal(results, (records,))
    assert (results / "h200" / "machine.json").read_text() == "old"
    shutil.rmtree(staging)
    journal = killed_store()
    assert journal["folder"] == os.lstat(staging).st_ino
    assert transaction.roll_forward(results, (records,)) == 1
    assert (results / "h200" / "machine.json").read_text() == "new"


# -- item 2: a committed symlink among the stored folders is refused before anything is written ------

@pytest.mark.parametrize("linked", [f"records/{transaction.STAGING}", "records/h200", "results/h200"])
def test_collect_refuses_a_committed_symlink_and_the_next_commands_run(clones, tmp_path, linked):
    """Item 2: with ``records/.fusebench-staging -> /outside`` collect wrote the record there
    (``<pid>-<n>.part``), and every later compare and collect exited 2 on the journal it left (a
    symlinked machine folder wedged it the same way)."""
    upstream, mine = clones
    outside = tmp_path / "outside"
    if linked != f"records/{transaction.STAGING}":
        shutil.copytree(upstream / linked, outside, dirs_exist_ok=True)
    link(upstream, linked, outside)
    pull(upstream, mine, "a link")
    for path in ("results/h200/463f960f-existing-py3.12.json", "records/h200/463f960f.json.xz"):
        (mine / path).unlink(missing_ok=True)  # what collect would add (through the link: outside)
    before = tree(outside)
    out = fusebench(mine, "collect", _source(tmp_path))
    err = out.stderr.splitlines()
    assert out.returncode == 2 and len(err) == 1, out.stderr
    assert f"{mine / linked} is a symbolic link" in err[0] and "refused, nothing done" in err[0], err
    assert tree(outside) == before
    assert not (mine / "results" / transaction.STAGING).exists()
    again = fusebench(mine, "collect", _source(tmp_path))
    assert again.returncode == 2 and again.stderr == out.stderr  # the same line, no stuck journal
    if linked == f"records/{transaction.STAGING}":
        judged = fusebench(mine, "compare", f"--base={BASE8}", f"--head={HEAD8}", "--machine", "h200")
        assert judged.returncode in (0, 1) and "journal" not in judged.stderr, judged.stderr


# -- item 3: plots never write through a committed plots/<machine> link ----------------------------

def test_plots_refuse_a_committed_machine_folder_link(clones, tmp_path):
    """Item 3: with ``plots/h200 -> /outside`` committed, fusebench plots wrote its 10 PNGs
    there, replacing what was there."""
    upstream, mine = clones
    outside = tmp_path / "outside"
    (outside / "gelu-bandwidth.png").write_text("precious")
    link(upstream, "plots/h200", outside)
    pull(upstream, mine, "a link")
    before = tree(outside)
    out = fusebench(mine, "plots", "--machines", "h200")
    err = out.stderr.splitlines()
    assert out.returncode == 2 and len(err) == 1, out.stderr
    assert err[0].startswith(f"plots: error: {mine / 'plots' / 'h200'} is a symbolic link"), err
    assert tree(outside) == before


def test_a_committed_plot_that_is_a_link_is_replaced_not_written_through(clones, tmp_path):
    upstream, mine = clones
    outside = tmp_path / "outside"
    (upstream / "plots" / "h200" / "gelu-bandwidth.png").unlink()
    (upstream / "plots" / "h200" / "gelu-bandwidth.png").symlink_to(outside / "precious.txt")
    pull(upstream, mine, "a link")
    out = fusebench(mine, "plots", "--machines", "h200")
    assert out.returncode == 0, out.stderr
    png = mine / "plots" / "h200" / "gelu-bandwidth.png"
    assert not png.is_symlink() and png.read_bytes().startswith(b"\x89PNG")
    assert (outside / "precious.txt").read_text() == "precious"


# -- item 4: make clean removes only real folders inside the checkout ------------------------------

def test_make_clean_never_deletes_through_a_committed_link(clones, tmp_path):
    """Item 4: with ``.asv -> /outside`` committed, make clean deleted the files outside."""
    upstream, mine = clones
    outside = tmp_path / "outside"
    for name in ("quick-results", "sweeps", "ab"):
        (outside / name).mkdir()
        (outside / name / "kept.txt").write_text("kept")
    link(upstream, ".asv", outside)
    link(upstream, "bisect", outside)
    pull(upstream, mine, "links")
    (mine / ".pytest_cache").mkdir()
    before = tree(outside)
    out = subprocess.run(["make", "-s", "clean", f"SYSTEM_PYTHON={sys.executable}"], cwd=mine,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert tree(outside) == before
    assert f"clean: {mine}/.asv is a symbolic link: left as it is" in out.stdout.splitlines()
    assert not (mine / ".pytest_cache").exists()


# -- item 5: a cache path that is not fusebench's own worktree is refused, never removed -----------

@pytest.mark.parametrize("what", ["clone", "file"])
def test_a_foreign_folder_at_a_worktree_path_is_refused_and_left(tmp_path, what):
    """Item 5: a clone at an ab cache worktree path (with an untracked file) was removed and made
    again; a regular file there was NotADirectoryError, exit 1."""
    repo = tmp_path / "repo"
    git(tmp_path, "init", "-q", "-b", "main", str(repo))
    (repo / "a.txt").write_text("a")
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "a")
    sha = git(repo, "rev-parse", "HEAD")
    root = tmp_path / "cache" / "worktrees"
    path = root / bisect_git.repo_key(repo) / sha
    path.parent.mkdir(parents=True)
    if what == "clone":
        git(tmp_path, "clone", "-q", str(repo), str(path))
        (path / "work.txt").write_text("a day's work")
    else:
        path.write_text("a file")
    before = tree(path.parent)
    with pytest.raises(UsageError, match=f"{path} is there and is not a worktree fusebench made of"):
        bisect_git.worktree(repo, root, sha)
    assert tree(path.parent) == before


def test_real_folder_refuses_a_link_above_inside_the_checkout(tmp_path):
    from fusebench.paths import real_folder

    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert real_folder(tmp_path / "real" / "a" / "b", tmp_path) == tmp_path / "real" / "a" / "b"
    with pytest.raises(UsageError, match=f"{tmp_path / 'link'} is a symbolic link"):
        real_folder(tmp_path / "link" / "a", tmp_path)
    assert real_folder(tmp_path / "link") == tmp_path / "link"  # outside the checkout: the user's choice


# -- item 14: table settles the journal first, as every reader does --------------------------------

def test_table_finishes_an_interrupted_store_before_reading(clones):
    """Item 14: table read a record while a journal was about to replace it."""
    _, mine = clones
    staging, records_staging = mine / "results" / transaction.STAGING, mine / "records" / transaction.STAGING
    staging.mkdir()
    records_staging.mkdir()
    shutil.copyfile(mine / RECORD, records_staging / "1-1.part")
    journal = {"moves": [[f"records/{transaction.STAGING}/1-1.part", RECORD]], "deletes": [],
               "folder": os.lstat(staging).st_ino}  # this host's own killed store
    (staging / transaction.JOURNAL).write_text(json.dumps(journal))
    out = fusebench(mine, "table", mine / RECORD)
    assert out.returncode == 0, out.stderr
    assert out.stderr.splitlines() == [f"table: finished storing 1 file(s) an interrupted run had committed "
                                       f"in {mine / 'results'}/"]
    assert not staging.exists() and not records_staging.exists()


def test_publish_refuses_a_committed_html_link(clones, tmp_path):
    """A committed ``html -> /outside`` had publish replace the outside folder with the site."""
    upstream, mine = clones
    outside = tmp_path / "outside"
    link(upstream, "html", outside)
    pull(upstream, mine, "a link")
    before = tree(outside)
    out = fusebench(mine, "publish", "--cdn")
    assert out.returncode == 2 and out.stderr.splitlines() == [
        f"publish: error: {mine / 'html'} is a symbolic link (fusebench writes and deletes only in real "
        f"folders; a commit can carry a link): refused, nothing done to {mine / 'html'}: remove the link and "
        "run again"], out.stderr
    assert tree(outside) == before
