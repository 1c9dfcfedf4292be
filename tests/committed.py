"""The checkout's committed files, for tests that read the repository's history (records, results,
plots): what git tracks, never what a run left beside it (``make bench`` on a CPU writes ignored
``records/cpu-<arch>/`` and ``results/cpu-<arch>/`` files into the same folders)."""

from __future__ import annotations

import atexit
import functools
import shutil
import subprocess
import tempfile
from pathlib import Path

from fusebench.paths import PROJECT_ROOT


def committed(pattern: str, root: Path = PROJECT_ROOT) -> list[Path]:
    """The tracked files of ``root`` matching ``pattern`` (a glob relative to ``root`` in which
    ``*`` stops at ``/``, as ``Path.glob``'s), sorted; files deleted from the work tree are left out."""
    out = subprocess.run(["git", "ls-files", "-z", "--", f":(glob){pattern}"], cwd=root,
                         capture_output=True, text=True, check=True).stdout
    return sorted(p for p in (root / name for name in out.split("\0") if name) if p.is_file())



HISTORY = ("results", "records")


@functools.cache
def _history_copy() -> Path:
    root = Path(tempfile.mkdtemp(prefix="fusebench-committed-"))
    atexit.register(shutil.rmtree, root, True)
    for name in HISTORY:
        for path in committed(f"{name}/**"):
            dest = root / path.relative_to(PROJECT_ROOT)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, dest)
    return root


def committed_folder(name: str) -> Path:
    """``results`` or ``records`` as committed: a private copy of the tracked files (made once per
    test process, removed at exit, the two side by side as in the checkout), for tests to read or
    copy in place of the checkout's folder, where a run may have left ignored files."""
    if name not in HISTORY:
        raise ValueError(f"{name}: not one of {HISTORY}")
    return _history_copy() / name
