"""torch's own log output: a ``torch.compile`` refusal is one line, not 25; no profiler chatter.

When Dynamo traces a function with fake tensors and an operator refuses its input (``amax`` over an
empty row: "reducing over zero-size dimension"), torch logs the whole internal traceback at ERROR
level on the ``torch._subclasses.fake_tensor`` logger (``log.exception`` in
``FakeTensorMode._dispatch_impl``), then raises. ``fusebench.backends.compiled`` already turns that
exception into a one-line skip with its reason, so the logged traceback only repeats it, ~25
lines before the skip. :func:`quiet_compile` silences those loggers around the compile, and
leaves them alone when the user asked for torch's logs (``TORCH_LOGS`` set).

Kineto, the library under ``torch.profiler``, prints two ``USDT:... profiler_start`` /
``profiler_stop`` lines on stderr for every profiling session (its ``USDT`` log level, above
``ERROR``); ``make profile`` and launch counting open one per backend. :func:`quiet_profiler`
sets Kineto's ``KINETO_LOG_LEVEL`` above every level, unless the user set it.
"""

from __future__ import annotations

import logging
import os
from contextlib import contextmanager
from typing import Iterator

#: The loggers that print a traceback for an exception that is then raised to the caller.
REPEATED_TRACEBACKS = ("torch._subclasses.fake_tensor",)


@contextmanager
def quiet_compile(loggers: tuple[str, ...] = REPEATED_TRACEBACKS) -> Iterator[None]:
    """Raise ``loggers`` above CRITICAL inside the ``with`` block, then restore their levels.

    Nothing changes when ``TORCH_LOGS`` is set (the user is debugging torch). Exceptions pass
    through unchanged: only the log lines that repeat them are dropped.
    """
    if os.environ.get("TORCH_LOGS"):
        yield
        return
    saved = {name: logging.getLogger(name).level for name in loggers}
    try:
        for name in loggers:
            logging.getLogger(name).setLevel(logging.CRITICAL + 1)
        yield
    finally:
        for name, level in saved.items():
            logging.getLogger(name).setLevel(level)


#: Kineto's log levels (libkineto ``Logger.h``): VERBOSE 0, INFO 1, WARNING 2, STAGE 3, ERROR 4,
#: USDT 5; a minimum of 6 prints none (checked: 5 still prints the USDT lines).
KINETO_QUIET = "6"


def quiet_profiler() -> None:
    """Silence Kineto's stderr lines for this process (``KINETO_LOG_LEVEL``, kept if set).

    Kineto reads the variable once, at the first profiling session of the process: call this
    before opening one (``torch.profiler.profile``); later calls change nothing.
    """
    os.environ.setdefault("KINETO_LOG_LEVEL", KINETO_QUIET)
