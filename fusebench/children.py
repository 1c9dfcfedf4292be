"""Child processes that end with their parent.

A publish runs ``asv publish`` and forks plot workers (about 300 MB each); killed, even with
SIGKILL, it left them sleeping forever (issue 42). Each child asks the kernel for a signal when
its parent dies (Linux ``prctl(PR_SET_PDEATHSIG)``), armed in the child right after the fork:
``subprocess.Popen(..., preexec_fn=ending_with_parent())`` or a pool's ``initializer``.
"""

from __future__ import annotations

import os
import signal
from typing import Callable

_PR_SET_PDEATHSIG = 1


def _prctl():
    """libc's ``prctl``, looked up in the parent (a child after a fork of a threaded process may
    not take the loader's locks); None where there is none."""
    import ctypes

    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def ending_with_parent(sig: int = signal.SIGTERM) -> Callable[[], None]:
    """A function for a new child to run first: ``sig`` is sent to it when this process (its
    parent) dies; a parent already gone ends it at once. A no-op where the system has no
    ``prctl`` (not Linux)."""
    prctl, parent = _prctl(), os.getpid()

    def arm() -> None:
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
        if os.getppid() != parent:  # died between the fork and the prctl
            os._exit(1)

    return arm
