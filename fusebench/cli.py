"""Command-line plumbing: bad input is one line on stderr and a non-zero exit, never a traceback."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable

from fusebench.errors import UsageError


def run_main(main: Callable[[], int | None], prog: str) -> None:
    """Run ``main`` and exit: 0 on success, 2 on :class:`UsageError`, 130 on Ctrl-C, 1 otherwise.

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


def pick(kind: str, names: str | None, valid) -> list[str]:
    """Split a comma-separated selection and check each name against ``valid``.

    ``None`` or empty selects all of ``valid``.

    Raises:
        UsageError: an unknown name, or only commas (``","``); the message lists the valid ones.
    """
    valid = list(valid)
    if not names:
        return valid
    chosen = [n.strip() for n in names.split(",") if n.strip()]
    if not chosen:
        raise UsageError(f"no {kind} named in {names!r}; valid {kind}s: {', '.join(valid)}")
    for n in chosen:
        if n not in valid:
            raise UsageError(f"unknown {kind} {n!r}; valid {kind}s: {', '.join(valid)}")
    return chosen


def add_config(ap) -> None:
    """``--config FILE``: the case file a command reads its cases from (``fusebench.config``)."""
    ap.add_argument("--config", type=Path, metavar="FILE",
                    help="the case file (default: fusebench.yaml at the repository root, or "
                         "$FUSEBENCH_CONFIG)")


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1 (argparse turns the ValueError into a one-line usage error)."""
    value = int(text)
    if value < 1:
        raise ValueError(text)
    return value


def report_unreadable(reader, prog: str, count: bool = False) -> int:
    """Print one line per stored file ``reader`` (``fusebench.history.results.Reader``) could not read.

    Args:
        count: end with a count line even when every file was read (``make publish``).

    Returns 1 when some file was unreadable (the exit status of a reader that left data out), else 0.
    """
    for line in reader.lines(prog):
        print(line, file=sys.stderr)
    bad = len(reader.unreadable)
    if bad:
        print(f"{prog}: {bad} stored file(s) could not be read (named above) and were left out",
              file=sys.stderr)
    elif count:
        print(f"{prog}: every stored file was read ({reader.files_read} result files)", file=sys.stderr)
    return 1 if bad else 0
