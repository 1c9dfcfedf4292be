"""Every git command fusebench runs goes through this module: one way to run git, and one rule for
a revision given by a user (a name starting with ``-`` is refused: git would read it as an
option).

A leaf: it imports nothing of fusebench but its errors, so the gate, the site and the commands can
ask git without importing the measurement (or torch).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from fusebench.errors import UsageError

#: Seconds a git command may take: a local repository answers in well under a second.
TIMEOUT_S = 120


def run(repo: Path | str, *args: str, data: bool = False, input: str | bytes | None = None,
        timeout: float = TIMEOUT_S, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``git -C repo args``, its output captured (text, or bytes with ``data``); the caller reads
    ``returncode``. ``env``: variables set for this command only (``GIT_INDEX_FILE``, ...).

    Raises:
        UsageError: git cannot run here (not installed, or it took longer than ``timeout``).
    """
    try:
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=not data,
                              input=input, timeout=timeout, env={**os.environ, **env} if env else None)
    except (OSError, subprocess.SubprocessError) as exc:
        raise UsageError(f"cannot run git: {exc}") from None


def answer(repo: Path | str, *args: str) -> str | None:
    """The standard output of ``git -C repo args``, or None when git cannot run or fails."""
    try:
        out = run(repo, *args)
    except UsageError:
        return None
    return out.stdout if out.returncode == 0 else None


def resolve(repo: Path | str, rev: str) -> str | None:
    """The full sha of commit ``rev`` in ``repo``; None when there is no such commit (or ``rev``
    starts with ``-``).

    Raises:
        UsageError: git cannot run here.
    """
    if rev.startswith("-"):
        return None
    out = run(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    sha = out.stdout.strip()
    return sha if out.returncode == 0 and sha else None


def first_parent(repo: Path | str, branch: str, oldest_first: bool = False) -> list[str] | None:
    """Full shas of ``branch``'s first-parent line (newest first, or oldest first); None when git
    cannot say (no such branch, not a checkout, no git)."""
    out = answer(repo, "rev-list", "--first-parent", *(["--reverse"] if oldest_first else []), branch)
    return None if out is None else out.split()


def commit_times(repo: Path | str, prefix: int = 40) -> dict[str, int]:
    """The first ``prefix`` characters of each commit's sha (40: the whole sha; 8: a record's or a
    result's file name) -> its committer time (Unix seconds, the newest where commits share a
    prefix), for every commit reachable from a ref of ``repo``; empty when git cannot say (not a
    checkout, no git)."""
    times: dict[str, int] = {}
    for line in (answer(repo, "log", "--all", "--format=%H %ct") or "").splitlines():
        sha, _, when = line.partition(" ")
        if when.isdigit():
            times[sha[:prefix]] = max(int(when), times.get(sha[:prefix], 0))
    return times
