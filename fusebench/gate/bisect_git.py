"""git for ``fusebench bisect`` and ``ab``: the first-parent line from GOOD to BAD, one worktree per
commit, and a commit of the checkout's uncommitted changes (``ab``'s head "with changes").

The worktrees live in a cache folder, one per repository and commit
(``<cache>/worktrees/<repo>/<sha>``, :func:`repo_key`), reused by later bisections of that
repository; two clones never share one (a worktree belongs to the repository that made it: its
git data is written there). ``git worktree prune`` forgets those whose folder was deleted.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from fusebench import git
from fusebench.errors import UsageError, terminal
from fusebench.gate.bisect import Commit, ProbeFailed
from fusebench.paths import real_folder


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return git.run(repo, *args)


def _last_line(out: subprocess.CompletedProcess) -> str:
    """The last non-blank line git wrote to stderr (its reason), else its exit status."""
    lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
    return lines[-1] if lines else str(out.returncode)


def resolve(repo: Path, rev: str) -> str:
    """The full sha of ``rev``.

    Raises:
        UsageError: git knows no such commit in ``repo``.
    """
    sha = git.resolve(repo, rev)
    if sha is None:
        why = ("a revision never starts with '-'" if rev.startswith("-")
               else f"git rev-parse found no such commit in {repo}")
        raise UsageError(f"unknown revision {rev!r} ({why})")
    return sha


def subject(repo: Path, sha: str) -> str:
    """The subject line of commit ``sha``, printable characters only (another author's text)."""
    return terminal(_git(repo, "log", "-1", "--format=%s", sha).stdout.strip())


def first_parent_line(repo: Path, good: str, bad: str) -> list[Commit]:
    """GOOD, then every commit of BAD's first-parent line after it, oldest first (BAD last).

    Raises:
        UsageError: an unknown revision, GOOD equal to BAD, or GOOD not on BAD's first-parent line
            (``git rev-list --first-parent BAD`` never reaches it).
    """
    g, b = resolve(repo, good), resolve(repo, bad)
    if g == b:
        raise UsageError(f"GOOD and BAD are the same commit ({g[:8]})")
    out = _git(repo, "log", "--first-parent", "--reverse", "--format=%H %P%x00%s", f"{g}..{b}")
    if out.returncode != 0:
        lines = out.stderr.strip().splitlines()
        raise UsageError(f"git log failed: {lines[0] if lines else out.returncode}")
    rows = [line.split("\x00", 1) for line in out.stdout.splitlines() if line]
    if not rows or rows[0][0].split()[1:2] != [g]:
        raise UsageError(f"GOOD {g[:8]} ({good}) is not on the first-parent line of BAD {b[:8]} ({bad}): "
                         f"git rev-list --first-parent {b[:8]} does not reach it")
    subject = _git(repo, "log", "-1", "--format=%s", g).stdout.strip()
    return [Commit(g, terminal(subject))] + [Commit(r[0].split()[0], terminal(r[1])) for r in rows]


def _common_dir(tree: Path) -> Path | None:
    """The resolved git folder shared by a repository and its worktrees (None: not git's)."""
    common = git.answer(tree, "rev-parse", "--git-common-dir")
    return (Path(tree) / common.strip()).resolve() if common and common.strip() else None


def repo_key(repo: Path) -> str:
    """The folder name of ``repo``'s worktrees in a shared cache: its folder's name and 8 hex
    digits of its git folder's resolved path (``main-1a2b3c4d``)."""
    where = _common_dir(repo) or Path(repo).resolve()
    name = "".join(c if c.isalnum() or c in "-_." else "-" for c in Path(repo).resolve().name)[:40] or "repo"
    return f"{name}-{hashlib.sha256(str(where).encode()).hexdigest()[:8]}"


def _worktrees(repo: Path) -> set[Path]:
    """The resolved folders of ``repo``'s worktrees, as its git lists them."""
    out = git.answer(repo, "worktree", "list", "--porcelain") or ""
    return {Path(line.removeprefix("worktree ")).resolve() for line in out.splitlines()
            if line.startswith("worktree ")}


def worktree(repo: Path, root: Path, sha: str) -> Path:
    """The worktree of commit ``sha`` of ``repo`` under ``root`` (``root/<repo_key>/<sha>``),
    made when missing. One there that ``repo``'s git lists as its worktree and that is at
    ``sha`` and clean is used as it is; one of its worktrees that is not (edited, broken) is
    removed and made again. Anything else there (a clone, a user's folder, a file) is not ours:
    it is refused and left as it is, never removed.

    Raises:
        ProbeFailed: git could not make it.
        UsageError: something else than a worktree of ``repo`` is there, or a folder on the way
            is a symbolic link.
    """
    path = root / repo_key(repo) / sha
    real_folder(path, root.parent)  # inside the checkout (.asv/cache): up to its top
    if os.path.lexists(path):
        if not path.is_dir() or path.resolve() not in _worktrees(repo):
            raise UsageError(f"{path} is there and is not a worktree fusebench made of {repo} "
                             f"({'a folder' if path.is_dir() else 'a file'}): refused, left as it is; "
                             "move it away or give another --cache")
        head = _git(path, "rev-parse", "HEAD")
        status = _git(path, "status", "--porcelain", "--untracked-files=no")
        if head.returncode == 0 and head.stdout.strip() == sha and status.returncode == 0 \
                and not status.stdout.strip() and _common_dir(path) == _common_dir(repo):
            return path
        # our own, broken or edited: made again
        if _git(repo, "worktree", "remove", "--force", str(path)).returncode != 0:
            shutil.rmtree(path)
    _git(repo, "worktree", "prune")
    path.parent.mkdir(parents=True, exist_ok=True)
    out = _git(repo, "worktree", "add", "--detach", "--force", str(path), sha)
    if out.returncode != 0:
        raise ProbeFailed(f"git worktree add failed: {_last_line(out)}")
    return path


def snapshot(repo: Path, head: str, roots: Sequence[str]) -> str:
    """A commit of the checkout's files under ``roots`` as they are now, on top of ``head``.

    Its tree is ``head``'s with the working tree's version of every file under ``roots`` (a
    folder ends with ``/``): modified, deleted and untracked files that git does not ignore; the
    other files as ``head`` has them. Made with a temporary index and ``commit-tree``: the user's
    index, branches and files are left as they were, and nothing points at the commit but the
    worktree made of it. Author, committer and dates are fixed, so the same changes give the
    same commit (a second A/B of them reuses its worktree and builds).

    Raises:
        ProbeFailed: git could not make it.
    """
    with tempfile.TemporaryDirectory(prefix="fusebench-snapshot-") as tmp:
        when = _git(repo, "log", "-1", "--format=%ct", head).stdout.strip()
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index"), "GIT_AUTHOR_NAME": "fusebench ab",
               "GIT_AUTHOR_EMAIL": "ab@fusebench.invalid", "GIT_COMMITTER_NAME": "fusebench ab",
               "GIT_COMMITTER_EMAIL": "ab@fusebench.invalid", "GIT_AUTHOR_DATE": f"{when} +0000",
               "GIT_COMMITTER_DATE": f"{when} +0000"}

        def step(*args: str) -> str:
            out = git.run(repo, *args, env=env)
            if out.returncode != 0:
                raise ProbeFailed(f"git {args[0]} failed: {_last_line(out)}")
            return out.stdout.strip()

        step("read-tree", head)
        present = [r for r in roots if (repo / r).exists() or step("ls-files", "--", r)]
        if present:  # a pathspec that matches nothing is an error for git add
            step("add", "--all", "--", *present)
        tree = step("write-tree")
        return step("commit-tree", tree, "-p", head, "-m",
                    f"fusebench ab: the checkout's uncommitted changes on top of {head[:8]}")
