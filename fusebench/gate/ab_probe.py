"""The measurer of ``fusebench ab``: one child process per side, each running its revision's code.

Each side's child is ``fusebench/commands/bisect_child.py`` (bisect's child: the same protocol,
with ``select`` and ``keep_going``), started in the revision's worktree (``<cache>/worktrees/<repo>/<sha>``,
bisect's); a head with uncommitted changes is the worktree of the commit ``bisect_git.snapshot``
made of them at the start, so that every fresh process of the session runs the same code, whatever
is edited meanwhile. Its CUDA extension is built in ``<cache>/ext/<sha>`` (the snapshot's sha for
such a head when the changes touch the extension's sources), never shared with
other code (per revision, not per key: an older revision's ``cuda_ext`` builds in the folder it is
given, without a key; ``fusebench.gate.bisect_probe``). Both children share one Inductor cache
made for the session: the base compiles first, and the head reuses the launch configuration the
base's autotuner picked for every generated kernel whose source is the same on both sides (a
changed kernel is autotuned anew; a different pick is then reported as "different kernel", never
as a regression). That sharing has failed once on an H200 (docs/ab/README.md), so :meth:`renew`
hands back what each fresh process built, and every round is judged with its process's kernel.

Every ``ab.PROCESS_ROUNDS`` rounds both children are replaced (:meth:`ABChildren.renew`): the two
fresh ones build the cases still open side by side, from the caches the first ones filled.

Only one child works at a time; the other waits for its next line, so NVML lists it as another
process on the GPU: that contamination is dropped when NVML saw no more than this one sibling
(``bisect_probe.without_siblings``).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Callable, Mapping

from fusebench.gate import bisect_git
from fusebench.gate.bisect import CaseInfo, Commit, ProbeFailed
from fusebench.gate.bisect_probe import (
    MACHINE,
    ROUND_TIMEOUT_S,
    START_TIMEOUT_S,
    _Child,
    _info,
    checked,
    without_siblings,
)


def request(root: Path, select: dict | None = None, cases: list[str] | None = None) -> str:
    """The child's one argument: its tree, what to measure there (``select``, or the ``cases`` by
    name: a fresh process for the cases still open), its own case file, keep going."""
    what = {"select": select} if cases is None else {"cases": list(cases)}
    return json.dumps({"root": str(root), **what, "config": str(root / "fusebench.yaml"),
                       "keep_going": True})


class ABChildren:
    """:class:`fusebench.gate.ab.Measurer` with a child per side.

    Args:
        child: the child program's text (``fusebench/commands/bisect_child.py``).
        repo: the git repository.
        cache: worktrees and extension builds (bisect's cache).
        session: this session's folder: the children's logs (``logs/<side>.log``) and the shared
            Inductor cache (``inductor/``).
        select: what each child measures of its own grid (``bisect_child.selected``).
        trees: per side, the folder to run in instead of the commit's worktree, with the key of
            its extension build (a head with uncommitted changes: the checkout).
    """

    def __init__(self, child: str, repo: Path, cache: Path, session: Path, select: dict,
                 trees: Mapping[str, tuple[Path, str]] | None = None, python: str = sys.executable,
                 log: Callable[[str], None] = lambda line: None,
                 start_timeout: float = START_TIMEOUT_S, round_timeout: float = ROUND_TIMEOUT_S):
        self.code, self.repo, self.cache, self.session, self.select = child, repo, cache, session, select
        self.trees, self.python, self.log = dict(trees or {}), python, log
        self.start_timeout, self.round_timeout = start_timeout, round_timeout
        self.children: dict[str, _Child] = {}
        self.commits: dict[str, Commit] = {}
        #: The asv machine name the base's child measured on (None until then, or unknown).
        self.machine: str | None = None

    def env(self, tree: Path, ext_key: str) -> dict:
        """The child's environment: its tree first on the path, its own extension folder, the
        session's Inductor cache."""
        env = dict(os.environ)
        ext = str(self.cache / "ext" / ext_key)
        kept = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        env.update(PYTHONPATH=os.pathsep.join([str(tree), *kept]), FUSEBENCH_EXT_DIR=ext,
                   TORCH_EXTENSIONS_DIR=ext, TORCHINDUCTOR_CACHE_DIR=str(self.session / "inductor"),
                   PYTHONDONTWRITEBYTECODE="1", PYTHONUNBUFFERED="1")
        return env

    def _spawn(self, side: str, commit: Commit, cases: list[str] | None = None) -> _Child:
        if side in self.trees:
            tree, ext_key = self.trees[side]
        else:
            tree = bisect_git.worktree(self.repo, self.cache / "worktrees", commit.sha)
            ext_key = commit.sha
        self.commits[side] = commit
        child = _Child([self.python, "-c", self.code, request(tree, self.select, cases)], tree,
                       self.env(tree, ext_key), self.session / "logs" / f"{side}.log")
        self.children[side] = child
        return child

    def _ready(self, child: _Child) -> tuple[dict[str, CaseInfo], dict[str, str]]:
        answer = child.ask(None, self.start_timeout)
        ready, not_built = answer.get("ready"), answer.get("not_built", {})
        if not isinstance(ready, dict) or not isinstance(not_built, dict):
            raise ProbeFailed(f"the child answered no list of cases (log: {child.log})")
        for case, why in not_built.items():
            if not isinstance(case, str) or not isinstance(why, str):
                raise ProbeFailed(f"the child named a case it did not build in a way that is not valid "
                                  f"(log: {child.log})")
        machine = answer.get("machine")
        if self.machine is None and isinstance(machine, str) and MACHINE.fullmatch(machine):
            self.machine = machine
        return {c: _info(c, info) for c, info in ready.items()}, {c: w[:500] for c, w in not_built.items()}

    def start(self, side: str, commit: Commit) -> tuple[dict[str, CaseInfo], dict[str, str]]:
        return self._ready(self._spawn(side, commit))

    def renew(self, cases: list[str]) -> tuple[dict[str, dict[str, CaseInfo]], dict[str, str]]:
        """Both children replaced by fresh ones building ``cases`` side by side (``ab.Measurer``)."""
        sides = list(self.commits)
        for side in sides:
            self.stop(side)
        children = {side: self._spawn(side, self.commits[side], cases) for side in sides}
        built: dict[str, dict[str, CaseInfo]] = {}
        missing: dict[str, str] = {}
        for side, child in children.items():
            built[side], not_built = self._ready(child)
            for case in cases:
                if case not in built[side]:
                    missing.setdefault(case, f"{side}: {not_built.get(case, 'not built')}")
        return built, missing

    def time(self, side: str, case: str) -> dict:
        child = self.children.get(side)
        if child is None:
            raise ProbeFailed("not started")
        figures = child.ask(json.dumps({"round": [case]}), self.round_timeout).get("round")
        if not isinstance(figures, dict) or case not in figures:
            raise ProbeFailed(f"the child answered no round of {case} (log: {child.log})")
        return without_siblings(checked(case, figures[case]), len(self.children) - 1)

    def stop(self, side: str) -> None:
        child = self.children.pop(side, None)
        if child is not None:
            child.close()
