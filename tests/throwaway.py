"""A throwaway git repository of this checkout's code, for the tests of the commands that measure
revisions side by side (bisect, ab): its commits are base, a note, GELU's torch backend 2 ms
slower, another note."""

import shutil
import subprocess

from fusebench.paths import PROJECT_ROOT

#: The edit that makes GELU's torch backend sleep 2 ms per call.
SLOW = ('    return lambda: F.gelu(x, approximate="tanh")',
        '    return lambda: (__import__("time").sleep(0.002), F.gelu(x, approximate="tanh"))[1]')


def git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com",
                           *args], check=True, capture_output=True, text=True).stdout.strip()


def commit(repo, message):
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def slow_down(repo) -> None:
    """Make GELU's torch backend 2 ms slower in ``repo``'s working tree."""
    gelu = repo / "kernels" / "gelu" / "__init__.py"
    assert SLOW[0] in gelu.read_text()
    gelu.write_text(gelu.read_text().replace(*SLOW))


def make(tmp_path):
    """The repository in ``tmp_path / "repo"`` and its four commits' shas, oldest first."""
    repo = tmp_path / "repo"
    for folder in ("fusebench", "kernels"):
        shutil.copytree(PROJECT_ROOT / folder, repo / folder, symlinks=True,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("fusebench.yaml", "asv.conf.json"):
        shutil.copy(PROJECT_ROOT / name, repo / name)
    git(tmp_path, "init", "-q", "-b", "main", str(repo))
    shas = [commit(repo, "base")]
    (repo / "notes.txt").write_text("one\n")
    shas.append(commit(repo, "a note"))
    slow_down(repo)
    shas.append(commit(repo, "gelu: torch backend sleeps 2 ms"))
    (repo / "notes.txt").write_text("two\n")
    shas.append(commit(repo, "another note"))
    return repo, shas
