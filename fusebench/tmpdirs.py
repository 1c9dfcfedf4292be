"""Scratch folders in ``/tmp`` removed on every exit path.

A :func:`scratch` folder is removed when its ``with`` block ends, by an exception, Ctrl-C or a
SIGTERM (``fusebench.cli.run_main`` turns SIGTERM and SIGHUP into an exception). A SIGKILL runs
no code: the folder's name carries the process id, and :func:`remove_stale` (called by each new
:func:`scratch`) removes the folders of processes that no longer exist.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

#: Every scratch folder's name: ``fusebench-<what>-<pid>-<random>``.
_NAME = re.compile(r"fusebench-[a-z]+-(\d+)-[A-Za-z0-9_]+")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale(where: Path | None = None) -> list[Path]:
    """Remove the scratch folders (of this user) left in ``where`` (default: the temporary
    folder) by processes that no longer exist. Returns those removed."""
    where = Path(where or tempfile.gettempdir())
    removed = []
    try:
        found = list(os.scandir(where))
    except OSError:
        return removed
    for entry in found:
        m = _NAME.fullmatch(entry.name)
        if not m or not entry.is_dir(follow_symlinks=False):
            continue
        try:
            if entry.stat(follow_symlinks=False).st_uid != os.getuid() or _alive(int(m.group(1))):
                continue
        except OSError:
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        removed.append(Path(entry.path))
    return removed


@contextmanager
def scratch(what: str, where: Path | None = None):
    """A new folder ``fusebench-<what>-<pid>-...`` in ``where`` (default: the temporary folder),
    removed when the block ends however it ends (stale ones of dead processes first)."""
    remove_stale(where)
    path = Path(tempfile.mkdtemp(prefix=f"fusebench-{what}-{os.getpid()}-", dir=where))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
