"""The one way fusebench writes a file it keeps: a temporary file of a unique name beside the
destination, fsynced, then renamed over it, then the folder fsynced. A reader, a second writer and
a crash see the old file or the new one, never a part; a failed write leaves the old file and no
temporary behind.

A leaf (the standard library only), so that the run record, the store, the reports and the
commands all write through it. Several files that must change together go through
:class:`fusebench.storage.transaction.Transaction`, which stages its files with the same rules.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path


def fsync_dir(folder: Path) -> None:
    """Flush ``folder``'s entries (a rename in it) to disk; a filesystem that cannot is let be."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _mode() -> int:
    """The mode a plain ``open()`` would give a new file: 0666 less the umask."""
    return 0o666 & ~_umask()


def write_atomic(path: Path, data: bytes | str) -> None:
    """Write ``data`` to ``path`` (creating its folder): a temporary file of a unique name in the
    same folder, given the mode a plain ``open()`` would, fsynced, renamed over ``path``."""
    if isinstance(data, str):
        data = data.encode()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    tmp = Path(name)
    try:
        with os.fdopen(fd, "wb") as out:
            os.fchmod(out.fileno(), _mode())
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def json_ready(value):
    """``value`` as JSON can hold it: NaN and infinities as null, tuples as lists."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    return value


def write_json(path: Path, data, indent: int | None = 1) -> None:
    """``data`` as JSON into ``path`` (:func:`json_ready`, then :func:`write_atomic`)."""
    write_atomic(path, json.dumps(json_ready(data), indent=indent))
