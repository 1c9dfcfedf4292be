"""Command-line plumbing: bad input is one line on stderr and a non-zero exit, never a traceback."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable

from fusebench.errors import UsageError
from fusebench.names import pick  # noqa: F401  (the commands' import)
from fusebench.storage.results import report_unreadable  # noqa: F401  (the commands' import)


def run_main(main: Callable[[], int | None], prog: str) -> None:
    """Run ``main`` and exit: 0 on success, 2 on :class:`UsageError`, 130 on Ctrl-C, 141 when the
    output's reader closed it early (``| head``), 1 otherwise.

    Errors print as ``<prog>: error: <one line>`` on stderr. SIGTERM and SIGHUP end the command
    as Ctrl-C does, so that scratch and staging folders are removed on the way out.
    """
    import signal

    def _terminated(signum, frame):
        raise KeyboardInterrupt(signal.Signals(signum).name)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _terminated)
    try:
        code = main()
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's exit
    except BrokenPipeError:
        # The reader stopped early (`| head`): quiet, with the status of a tool ended by SIGPIPE,
        # never 1, which compare reserves for a regression.
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(141)
    except UsageError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print(f"{prog}: interrupted; stored results were left as they were", file=sys.stderr)
        sys.exit(130)
    except Exception as exc:  # one line, not a traceback; FUSEBENCH_DEBUG=1 shows the trace
        import os

        if os.environ.get("FUSEBENCH_DEBUG"):
            raise
        from fusebench.errors import first_line

        print(f"{prog}: error: {first_line(exc)}", file=sys.stderr)
        sys.exit(1)
    sys.exit(code or 0)


def add_config(ap) -> None:
    """``--config FILE``: the case file a command reads its cases from (``fusebench.config``)."""
    ap.add_argument("--config", type=Path, metavar="FILE",
                    help="the case file (default: fusebench.yaml at the repository root)")


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1 (argparse turns the ValueError into a one-line usage error)."""
    value = int(text)
    if value < 1:
        raise ValueError(text)
    return value


def duration(seconds: float) -> str:
    """Seconds as a run reports them: ``"45 s"``, ``"2 min 5 s"`` (rounded to the second first, so
    that 179.6 s is 3 min 0 s, never 2 min 60 s)."""
    minutes, s = divmod(int(round(seconds)), 60)
    return f"{minutes} min {s} s" if minutes else f"{s} s"
