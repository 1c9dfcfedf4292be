"""Before measuring: can this run store what it measures?

A run that measures for minutes and then meets a read-only ``results/`` or ``records/`` or a
full disk loses everything it measured. :func:`check`
tries each folder the run will write into (a real file created and removed, not permission bits:
root ignores those, a read-only mount does not) and the free space, and refuses in one line
before anything is measured.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from fusebench.errors import UsageError

#: Bytes a run stores per case, at most (the H200 records: 2.6 KB per case, asv results 0.5 KB);
#: with the staging copy, twice that is needed while storing.
BYTES_PER_CASE = 8 << 10
#: Free space kept on top of the run's own files.
MARGIN = 16 << 20


def _existing(folder: Path) -> Path:
    """``folder``, or its nearest existing parent (where it would be created)."""
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return folder


def writable(folder: Path) -> str | None:
    """None when a file can be created in ``folder`` (or in the parent it would be created in),
    else why not (one phrase)."""
    where = _existing(folder)
    probe = where / f".fusebench-probe-{os.getpid()}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        return f"{exc.strerror or exc} in {where}"
    return None


def check(folders: dict[str, Path], cases: int) -> None:
    """Refuse a run that could not store its results.

    Args:
        folders: what each folder holds (``{"results": ..., "run records": ...}``) -> the folder.
        cases: the run's cases (the space it needs: :data:`BYTES_PER_CASE` each, twice).

    Raises:
        UsageError: a folder is not writable or the disk of the results lacks the space (one line
            naming it; nothing was measured).
    """
    for what, folder in folders.items():
        why = writable(folder)
        if why is not None:
            raise UsageError(f"cannot store the {what} in {folder}: {why}; nothing measured (make it "
                             "writable, or give another folder)")
    need = 2 * cases * BYTES_PER_CASE + MARGIN
    for what, folder in folders.items():
        free = shutil.disk_usage(_existing(folder)).free
        if free < need:
            raise UsageError(f"{free >> 20} MB free for the {what} in {folder}, the run needs about "
                             f"{need >> 20} MB; nothing measured")


def memory(cases, have_bytes: int, where: str,
           way_out: str = "leave it out with SHAPES= or the case file") -> None:
    """Refuse, before measuring, a run with a case whose shape ``where``'s memory (``have_bytes``:
    the GPU's, or the host's RAM on the CPU) cannot hold: ``config.BYTES_PER_ELEMENT`` per
    element (a 65536x65536 shape, 2^32 elements, needs 103 GB). ``cases``: ``sweep.cases``;
    ``way_out``: what the line ends with (how to leave the shape out).

    Raises:
        UsageError: one line naming the largest such shape and both figures.
    """
    import math

    from fusebench.axes import shape_label
    from fusebench.config import BYTES_PER_ELEMENT

    if not cases or have_bytes <= 0:
        return
    op, _, shape, _ = max(cases, key=lambda c: math.prod(c[2]))
    need = math.prod(shape) * BYTES_PER_ELEMENT
    if need > have_bytes:
        raise UsageError(f"{op.name} shape {shape_label(shape)}: {math.prod(shape):.3g} elements need about "
                         f"{need / 1e9:.0f} GB ({BYTES_PER_ELEMENT} B each: input, output and the float64 "
                         f"reference), more than the {have_bytes / 1e9:.0f} GB of {where}; nothing measured "
                         f"({way_out})")
