"""Command-line plumbing: bad input is one line on stderr and a non-zero exit, never a traceback."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Callable

from fusebench.errors import UsageError
from fusebench.names import pick  # noqa: F401  (the commands' import)
from fusebench.storage.results import report_unreadable  # noqa: F401  (the commands' import)


def run_main(main: Callable[[], int | None], prog: str) -> None:
    """Run ``main`` and exit with its status (1 only for a verdict: a regression, a collect
    conflict), 2 on :class:`UsageError`, a fault of the environment (a full disk, a read-only
    folder: one line naming the path and what to do, :func:`fusebench.errors.environment_error`)
    or any other error, 130 on Ctrl-C, 141 when the output's reader closed it early (``| head``).

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
        from fusebench.errors import environment_error, first_line

        # a full disk, a read-only folder: the line says where and what to do; anything else
        # unexpected: its first line. Exit 2 either way: 1 is a verdict (a regression, a conflict)
        line = environment_error(exc)
        print(f"{prog}: error: {line or first_line(exc)}", file=sys.stderr)
        sys.exit(2)
    sys.exit(code or 0)


def add_config(ap) -> None:
    """``--config FILE``: the case file a command reads its cases from (``fusebench.config``)."""
    ap.add_argument("--config", type=Path, metavar="FILE",
                    help="the case file (default: fusebench.yaml at the repository root)")


def command(*args: str) -> str:
    """``<this Python> -m fusebench ARGS``, each word quoted for a shell: how a message suggests a
    fusebench command, so that it runs as printed (this interpreter has fusebench and its
    dependencies; a bare ``fusebench`` may not be on PATH)."""
    import shlex

    return shlex.join([sys.executable, "-m", "fusebench", *map(str, args)])


# The argparse types of the commands' numeric options. Each refuses a bad value with argparse's
# ArgumentTypeError, so the usage error names the option and the valid range
# (`argument --rounds: give a whole number from 1 to 100, not '0'`), never the type's function
# (a ValueError read `invalid rounds_arg value: '0'`); tests/test_cli.py checks every option.


def whole_number(low: int, high: int | None = None) -> Callable[[str], int]:
    """argparse type: a whole number from ``low`` (to ``high``, when given)."""
    want = f"from {low} to {high}" if high is not None else f">= {low}"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"give a whole number {want}, not {text!r}")
        return value

    return parse


def number(low: float, high: float | None = None, above: bool = False) -> Callable[[str], float]:
    """argparse type: a finite number from ``low`` (to ``high``, when given); ``above``: greater
    than ``low``."""
    want = f"from {low:g} to {high:g}" if high is not None else f"{'>' if above else '>='} {low:g}"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and (value > low if above else value >= low)
                and (high is None or value <= high)):
            raise argparse.ArgumentTypeError(f"give a number {want}, not {text!r}")
        return value

    return parse


#: argparse type: a whole number >= 1.
positive_int = whole_number(1)


def duration(seconds: float) -> str:
    """Seconds as a run reports them: ``"45 s"``, ``"2 min 5 s"`` (rounded to the second first, so
    that 179.6 s is 3 min 0 s, never 2 min 60 s)."""
    minutes, s = divmod(int(round(seconds)), 60)
    return f"{minutes} min {s} s" if minutes else f"{s} s"
