"""The checkout's committed files, for tests that read the repository's history (records, results,
plots): what git tracks, never what a run left beside it (``make bench`` on a CPU writes ignored
``records/cpu-<arch>/`` and ``results/cpu-<arch>/`` files into the same folders)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from fusebench.paths import PROJECT_ROOT


def committed(pattern: str, root: Path = PROJECT_ROOT) -> list[Path]:
    """The tracked files of ``root`` matching ``pattern`` (a glob relative to ``root`` in which
    ``*`` stops at ``/``, as ``Path.glob``'s), sorted; files deleted from the work tree are left out."""
    out = subprocess.run(["git", "ls-files", "-z", "--", f":(glob){pattern}"], cwd=root,
                         capture_output=True, text=True, check=True).stdout
    return sorted(p for p in (root / name for name in out.split("\0") if name) if p.is_file())
