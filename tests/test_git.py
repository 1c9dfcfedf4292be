"""One module runs git (fusebench/git.py): every other module asks it, so that one rule holds for
revisions and one way for errors (issue 43, item 3)."""

import ast
import subprocess

import pytest

from fusebench import git
from fusebench.errors import UsageError
from fusebench.paths import PROJECT_ROOT


def _git_argv(path):
    """The lines of ``path`` where a list literal starts with "git" (an argv of git)."""
    tree = ast.parse(path.read_text())
    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.List) and node.elts
            and isinstance(node.elts[0], ast.Constant) and node.elts[0].value == "git"]


def test_only_fusebench_git_runs_git():
    files = [p for folder in ("fusebench", "kernels", "benchmarks")
             for p in (PROJECT_ROOT / folder).rglob("*.py")]
    hits = {str(p.relative_to(PROJECT_ROOT)): lines for p in files if (lines := _git_argv(p))}
    assert hits == {"fusebench/git.py": hits.get("fusebench/git.py")} and hits["fusebench/git.py"]


@pytest.fixture
def repo(tmp_path):
    def g(*args):
        argv = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t", *args]
        return subprocess.run(argv, check=True, capture_output=True, text=True).stdout.strip()
    g("init", "-q", "-b", "main")
    (tmp_path / "a").write_text("1\n")
    g("add", "a")
    g("commit", "-qm", "one")
    (tmp_path / "a").write_text("2\n")
    g("commit", "-qam", "two")
    return tmp_path, g


def test_resolve_and_the_first_parent_line(repo):
    root, g = repo
    one, two = g("rev-parse", "HEAD~1"), g("rev-parse", "HEAD")
    assert git.resolve(root, "HEAD") == two and git.resolve(root, "main~1") == one
    assert git.resolve(root, two[:8]) == two
    assert git.resolve(root, "nope") is None
    assert git.resolve(root, "--all") is None  # an option, never a revision
    assert git.first_parent(root, "main") == [two, one]
    assert git.first_parent(root, "main", oldest_first=True) == [one, two]
    assert git.first_parent(root, "nope") is None
    assert git.answer(root, "cat-file", "-e", "f" * 40) is None


def test_git_that_cannot_run_is_one_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no git on the PATH
    with pytest.raises(UsageError, match="^cannot run git: "):
        git.run(tmp_path, "status")
    assert git.answer(tmp_path, "status") is None and git.first_parent(tmp_path, "main") is None


def test_commit_times_by_full_sha_and_by_a_file_names_prefix(repo):
    root, g = repo
    two = g("rev-parse", "HEAD")
    full, short = git.commit_times(root), git.commit_times(root, prefix=8)
    assert len(full) == 2 and full[two] == int(g("log", "-1", "--format=%ct"))
    assert short == {sha[:8]: t for sha, t in full.items()}
    assert git.commit_times(root / "nope") == {}
