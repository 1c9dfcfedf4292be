"""The measurer of ``fusebench bisect``: each commit in its own worktree, measured by its own code in
a child process (the program ``fusebench/commands/bisect_child.py``, handed over as its text) that
stays up while the search needs it.

A commit's child runs in ``<cache>/worktrees/<repo>/<sha>`` with ``fusebench`` and its ops imported
from there, its CUDA extension built in ``<cache>/ext/<sha>`` (``FUSEBENCH_EXT_DIR``: never the
extension of another commit; a commit whose ``cuda_ext`` keys its builds puts it one folder
deeper, ``<sha>/<key>``, but an older commit's code builds in the folder it is given, so the folder
stays per commit), and the worktree's own case file. Its stderr (build output,
warnings) goes to ``<logs>/<sha8>.log``.

GOOD's and BAD's children stay up beside each probe's, idle while another measures: NVML lists
them as other processes on the GPU, so a round's "another process" contamination is dropped
when NVML saw no more processes than these siblings (:func:`without_siblings`); a throttled
round, or a process of someone else, still contaminates it.
"""

from __future__ import annotations

import json
import math
import os
import queue
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Callable, Mapping, Sequence

from fusebench.gate import bisect_git
from fusebench.gate.bisect import CaseInfo, Commit, ProbeFailed

#: The figures of a round a child sends (ms), beside the contamination and the process counts.
FIELDS = ("device_time_ms", "device_time_cold_ms", "device_time_graph_ms", "wall_time_ms", "repeats")
#: The prefix of ``environment.contamination``'s reason for another process on the GPU.
OTHER_PROCESS = "another process on the GPU"
#: What a machine name a child reports may be (it names a folder of records).
MACHINE = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
#: Seconds a child may take to build its cases (CUDA extension and Triton compiles included).
START_TIMEOUT_S = 1800.0
#: Seconds one round of the named cases may take.
ROUND_TIMEOUT_S = 600.0


def checked(case: str, fig) -> dict:
    """One case's figures of a round as the child sent them, checked (the child runs the probed
    commit's code): times positive finite numbers or null, contamination a list of texts.

    Raises:
        ProbeFailed: anything else.
    """
    bad = ProbeFailed(f"{case}: the child sent figures that are not valid")
    if not isinstance(fig, dict):
        raise bad
    out = {}
    for k in FIELDS:
        v = fig.get(k)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))
                              or not math.isfinite(v) or v <= 0):
            raise bad
        out[k] = v
    contamination, others = fig.get("contamination", []), fig.get("others", [])
    if not isinstance(contamination, list) or not all(isinstance(c, str) for c in contamination):
        raise bad
    if not isinstance(others, list) or not all(type(n) is int for n in others):
        raise bad
    out.update(contamination=contamination, others=others)
    return out


def without_siblings(fig: dict, siblings: int) -> dict:
    """A round's figures with the "another process" contamination dropped when NVML saw at most
    ``siblings`` other processes (ours) in every reading; throttling is kept."""
    others = fig.get("others") or []
    if others and max(others) <= siblings:
        fig = dict(fig, contamination=[c for c in fig.get("contamination", ())
                                       if not c.startswith(OTHER_PROCESS)])
    return fig


class _Child:
    """One commit's child process and a thread reading its answers."""

    def __init__(self, argv: list[str], cwd: Path, env: dict, log: Path):
        log.parent.mkdir(parents=True, exist_ok=True)
        self.log = log
        with open(log, "a") as err:
            self.proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=err, text=True)
        self.answers: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.answers.put(line)
        self.answers.put(None)

    def ask(self, command: str | None, timeout: float) -> dict:
        """Send ``command`` (None: only wait) and return the next answer.

        Raises:
            ProbeFailed: the child answered an error, died, or took longer than ``timeout``.
        """
        if command is not None:
            try:
                self.proc.stdin.write(command + "\n")
                self.proc.stdin.flush()
            except (BrokenPipeError, OSError):
                pass  # it died: the reader says so
        try:
            line = self.answers.get(timeout=timeout)
        except queue.Empty:
            raise ProbeFailed(f"no answer in {timeout:.0f} s (log: {self.log})") from None
        if line is None:
            raise ProbeFailed(f"the child exited with status {self.proc.wait()}: {self._last_log_line()}")
        try:
            answer = json.loads(line)
        except ValueError:
            raise ProbeFailed(f"the child answered something else than JSON (log: {self.log})") from None
        if not isinstance(answer, dict):
            raise ProbeFailed(f"the child answered something else than an object (log: {self.log})")
        if "error" in answer:
            raise ProbeFailed(str(answer["error"]))
        return answer

    def _last_log_line(self) -> str:
        try:
            lines = [ln.strip() for ln in self.log.read_text(errors="replace").splitlines() if ln.strip()]
        except OSError:
            lines = []
        return f"{lines[-1]} (log: {self.log})" if lines else f"see {self.log}"

    def close(self) -> None:
        try:
            self.proc.stdin.write("quit\n")
            self.proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _info(case: str, ready) -> CaseInfo:
    """What the child said of a case it built, checked."""
    if not isinstance(ready, dict):
        raise ProbeFailed(f"{case}: the child sent a description that is not valid")
    launches, kernel_id = ready.get("launches"), ready.get("kernel_id")
    if launches is not None and (isinstance(launches, bool) or not isinstance(launches, int) or launches < 0):
        raise ProbeFailed(f"{case}: the child sent a launch count that is not valid")
    if kernel_id is not None and not isinstance(kernel_id, str):
        raise ProbeFailed(f"{case}: the child sent a kernel id that is not valid")
    batches = [ready.get("hot_calls"), ready.get("graph_calls")]  # None from a child before them
    if any(n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1) for n in batches):
        raise ProbeFailed(f"{case}: the child sent a batch size that is not valid")
    kernels = ready.get("kernels") or []
    if not isinstance(kernels, list) or len(kernels) > 64 or \
            not all(isinstance(k, str) and len(k) <= 400 and k.isprintable() for k in kernels):
        raise ProbeFailed(f"{case}: the child sent kernel names that are not valid")
    return CaseInfo(launches, kernel_id, bool(ready.get("kernel_by_timing")), *batches, tuple(kernels))


def request(worktree: Path, cases: Sequence[str]) -> str:
    """The child's one argument: its worktree, the cases, and the case file it reads, the
    commit's own ``fusebench.yaml`` (whatever case file the parent was given)."""
    return json.dumps({"root": str(worktree), "cases": list(cases),
                       "config": str(worktree / "fusebench.yaml")})


class ChildMeasurer:
    """:class:`fusebench.gate.bisect.Measurer` with a worktree and a child process per commit.

    Args:
        child: the child program's text (``fusebench/commands/bisect_child.py``).
        repo: the git repository the commits belong to.
        cache: where worktrees (``worktrees/<repo>/<sha>``) and extension builds (``ext/<sha>``) are kept.
        logs: where each child's stderr goes (``<sha8>.log``).
        python: the interpreter of the children (default: this one).
        log: gets one line per step (a worktree made, a child started).
    """

    def __init__(self, child: str, repo: Path, cache: Path, logs: Path, python: str = sys.executable,
                 log: Callable[[str], None] = lambda line: None,
                 start_timeout: float = START_TIMEOUT_S, round_timeout: float = ROUND_TIMEOUT_S):
        self.repo, self.cache, self.logs, self.python, self.log = repo, cache, logs, python, log
        self.start_timeout, self.round_timeout = start_timeout, round_timeout
        self.children: dict[str, _Child] = {}
        self.code = child
        #: The asv machine name the first child measured on (None until then, or unknown).
        self.machine: str | None = None

    def env(self, worktree: Path, sha: str) -> dict:
        """The child's environment: the worktree's code first on the path (the packages the path
        had stay after it), the commit's own extension folder."""
        env = dict(os.environ)
        ext = str(self.cache / "ext" / sha)
        kept = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        path = os.pathsep.join([str(worktree), *kept])
        env.update(PYTHONPATH=path, FUSEBENCH_EXT_DIR=ext, TORCH_EXTENSIONS_DIR=ext,
                   PYTHONDONTWRITEBYTECODE="1", PYTHONUNBUFFERED="1")
        return env

    def start(self, commit: Commit, cases: Sequence[str]) -> Mapping[str, CaseInfo]:
        tree = bisect_git.worktree(self.repo, self.cache / "worktrees", commit.sha)
        child = _Child([self.python, "-c", self.code, request(tree, cases)], tree, self.env(tree, commit.sha),
                       self.logs / f"{commit.short}.log")
        self.children[commit.sha] = child
        answer = child.ask(None, self.start_timeout)
        ready = answer.get("ready")
        if not isinstance(ready, dict) or set(ready) != set(cases):
            raise ProbeFailed(f"the child built other cases than asked (log: {child.log})")
        machine = answer.get("machine")
        if self.machine is None and isinstance(machine, str) and MACHINE.fullmatch(machine):
            self.machine = machine
        return {c: _info(c, ready[c]) for c in cases}

    def round(self, commit: Commit) -> Mapping[str, dict]:
        child = self.children.get(commit.sha)
        if child is None:
            raise ProbeFailed("not started")
        figures = child.ask("round", self.round_timeout).get("round")
        if not isinstance(figures, dict):
            raise ProbeFailed(f"the child answered no round (log: {child.log})")
        siblings = len(self.children) - 1
        return {case: without_siblings(checked(case, fig), siblings) for case, fig in figures.items()}

    def stop(self, commit: Commit) -> None:
        child = self.children.pop(commit.sha, None)
        if child is not None:
            child.close()
