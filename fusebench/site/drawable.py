"""Which stored results the published site will draw, and which it will not.

asv draws a result only when its commit is on the first-parent line of a branch in
``asv.conf.json`` (``main``): a commit that came in as a merge's second parent, or one missing
from the repository (a result copied from another clone, a rewritten history), is stored but on
no graph, and ``asv publish`` says nothing about it. :func:`undrawn` names each such file, why,
and what to do (``make publish`` prints them; ``STRICT=1`` makes them an error).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from fusebench import git
from fusebench.paths import PROJECT_ROOT


@dataclass(frozen=True)
class Undrawn:
    """A stored result file the site will not draw.

    Attributes:
        path: the result file.
        commit: its commit (full sha as stored; ``?`` when unreadable).
        reason: why asv will not draw it.
        fix: what to do about it.
    """

    path: Path
    commit: str
    reason: str
    fix: str


def first_parent_line(branch: str = "main", root: Path = PROJECT_ROOT) -> set[str] | None:
    """Full shas of ``git rev-list --first-parent <branch>``; None when git cannot say."""
    line = git.first_parent(root, branch)
    return None if line is None else set(line)


def commit_exists(commit: str, root: Path = PROJECT_ROOT) -> bool:
    """True when ``commit`` is a commit of the repository at ``root``."""
    return git.answer(root, "cat-file", "-e", f"{commit}^{{commit}}") is not None


def undrawn(results_dir: Path, branch: str = "main", root: Path = PROJECT_ROOT) -> list[Undrawn]:
    """Every result file under ``results_dir/<machine>/`` whose commit asv will not draw.

    Raises:
        RuntimeError: git cannot list ``branch`` (not a checkout, no such branch).
    """
    line = first_parent_line(branch, root)
    if line is None:
        raise RuntimeError(f"git rev-list --first-parent {branch} failed in {root}")
    out = []
    for path in sorted(results_dir.glob("*/*.json")):
        if path.name == "machine.json":
            continue
        try:
            commit = json.loads(path.read_text())["commit_hash"]
        except (OSError, ValueError, KeyError, TypeError, RecursionError):
            continue  # named by the readers (fusebench.storage.results.Reader), not drawn either
        if not isinstance(commit, str):
            continue
        if commit in line:
            continue
        if not commit_exists(commit, root):
            out.append(Undrawn(path, commit, "its commit is not in this repository",
                               "fetch the commit, or remove the file if its history was rewritten"))
        else:
            out.append(Undrawn(path, commit, f"its commit is off {branch}'s first-parent line "
                               "(a merged branch's commit)",
                               f"measure the merge commit on {branch} instead (make bench there), and "
                               "remove this file; keep main linear (rebase, no merges)"))
    return out


def report(items: list[Undrawn], results_dir: Path) -> list[str]:
    """One line per undrawn result, then a count; empty list when everything is drawn."""
    def name(path: Path) -> Path:
        return path.relative_to(results_dir) if path.is_relative_to(results_dir) else path

    lines = [f"publish: not drawn: {name(p.path)} (commit {p.commit[:8]}): {p.reason}; {p.fix}"
             for p in items]
    if items:
        lines.append(f"publish: {len(items)} stored result(s) will not be drawn on the site")
    return lines
