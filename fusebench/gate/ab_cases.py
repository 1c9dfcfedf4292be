"""Which cases a paired A/B measures: the backends whose measured code differs between the sides.

A file counts when its code differs (``noise.code``: a change of comments or docstrings only is
none) and a measurement runs it:

* under an op's folder or a backend's own files (``noise.measured_paths``: ``kernels/gelu/
  triton.py`` is GELU's ``triton``; ``kernels/gelu/__init__.py`` every GELU backend; a CUDA
  source every ``cuda`` case, since one extension holds them all): those backends;
* any other file of an op's folder (``kernels/<op>/tuning.py``): every backend of that op;
* any other measured file (``provenance.MEASURED``: the harness, the asv suite, the lock, the
  image, the case file) outside :data:`NOT_RUN`: every backend of every op;
* :data:`NOT_RUN` (the gate, the site, the commands, reports: code a measurement never imports;
  a test holds that) and files outside ``MEASURED`` (docs, tests, results): nothing.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from pathlib import Path

from fusebench import git
from fusebench.errors import UsageError
from fusebench.gate import noise

#: Code of the harness that a measurement never runs: judging, publishing, reports, commands (a
#: child of ``fusebench ab`` runs the parent's own child program, not the commit's).
NOT_RUN = ("fusebench/storage/", "fusebench/asv/", "fusebench/gate/", "fusebench/report/", "fusebench/site/",
           "fusebench/commands/", "fusebench/lecture/", "fusebench/nsys/", "fusebench/cli.py",
           "fusebench/__main__.py", "fusebench/history/")  # history/: these rooms before issue 43
EVERY = "*"


#: The folders an op's own folder has lived in (noise.OP_PATHS has the layouts).
OP_FOLDERS = ("kernels", "fusebench/ops")


@dataclass(frozen=True)
class Choice:
    """The (op, backend) pairs to measure (``EVERY`` as a backend: all of the op's; None: every
    case), and why: each deciding file with what it selects."""

    pairs: tuple[tuple[str, str], ...] | None
    reasons: tuple[tuple[str, str], ...]


def _git(repo: Path, *args: str, data: bool = False):
    return git.run(repo, *args, data=data)


def _measured_roots() -> tuple[str, ...]:
    from fusebench.measure.provenance import MEASURED  # imports torch: only when measuring

    return MEASURED


def _measured(path: str) -> bool:
    return any(path.startswith(p) if p.endswith("/") else path == p for p in _measured_roots())


def _text_at(repo: Path, rev: str, path: str) -> str | None:
    out = _git(repo, "show", f"{rev}:{path}", data=True)
    if out.returncode != 0:
        return None
    return out.stdout.decode("utf-8", errors="replace")


def changed_files(repo: Path, base: str, head: str | None) -> list[str]:
    """The measured files whose code differs from ``base`` to ``head`` (None: the working tree,
    untracked files that git does not ignore included), comment-only changes left out.

    Returns:
        Paths relative to ``repo``, sorted.

    Raises:
        UsageError: git cannot run, or ``git diff`` fails (an unknown revision).
    """
    measured = _measured_roots()
    args = ["diff", "--name-only", "-z", base] + ([head] if head else []) + ["--", *measured]
    out = _git(repo, *args)
    if out.returncode != 0:
        raise UsageError(f"git diff failed: {(out.stderr.strip().splitlines() or ['?'])[0]}")
    paths = {p for p in out.stdout.split("\0") if p}
    if head is None:
        untracked = _git(repo, "ls-files", "-z", "--others", "--exclude-standard", "--", *measured)
        paths |= {p for p in untracked.stdout.split("\0") if p}
    changed = []
    for path in sorted(p for p in paths if _measured(p)):
        old = _text_at(repo, base, path)
        if head is None:
            f = repo / path
            readable = f.is_file() and not f.is_symlink()
            new = f.read_text(encoding="utf-8", errors="replace") if readable else None
        else:
            new = _text_at(repo, head, path)
        if old is None or new is None or noise.code(old, path) != noise.code(new, path):
            changed.append(path)
    return changed


def choose(changed: list[str], ops: dict[str, tuple[str, ...]]) -> Choice:
    """The pairs ``changed`` selects among ``ops`` (op -> its backends), and why (module doc)."""
    pairs: dict[tuple[str, str], None] = {}
    reasons = []
    every = False
    for path in changed:
        if path.startswith(NOT_RUN):
            reasons.append((path, "nothing (not run by a measurement)"))
            continue
        hit = [(op, b) for op, backends in ops.items() for b in backends
               if noise.touches({path}, noise.measured_paths(op, b))]
        if hit:
            pairs.update(dict.fromkeys(hit))
            by_op: dict[str, list[str]] = {}
            for op, b in hit:
                by_op.setdefault(op, []).append(b)
            named = [f"{op}/{','.join(bs) if len(bs) < len(ops[op]) else 'every backend'}"
                     for op, bs in by_op.items()]
            reasons.append((path, ", ".join(named)))
            continue
        op = next((o for o in ops
                   if any(fnmatch.fnmatch(path, f"{folder}/{o}/*") for folder in OP_FOLDERS)), None)
        if op:
            pairs[(op, EVERY)] = None
            reasons.append((path, f"{op}/every backend (a file of the op)"))
            continue
        reasons.append((path, "every case (shared harness, lock, image or case file)"))
        every = True
    return Choice(None if every else tuple(pairs), tuple(reasons))
