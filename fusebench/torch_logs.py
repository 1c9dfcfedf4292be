"""torch's own log output while ``torch.compile`` compiles a case: a refusal is one line, not 25.

When Dynamo traces a function with fake tensors and an operator refuses its input (``amax`` over an
empty row: "reducing over zero-size dimension"), torch logs the whole internal traceback at ERROR
level on the ``torch._subclasses.fake_tensor`` logger (``log.exception`` in
``FakeTensorMode._dispatch_impl``), then raises. ``fusebench.backends.compiled`` already turns that
exception into a one-line skip with its reason, so the logged traceback only repeats it, ~25
lines before the skip. :func:`quiet_compile` silences those loggers around the compile, and
leaves them alone when the user asked for torch's logs (``TORCH_LOGS`` set).
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
