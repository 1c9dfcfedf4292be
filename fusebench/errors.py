"""Errors that reach the user as one line (see ``fusebench.cli``), and an exception as that one line."""

import re


class UsageError(Exception):
    """Bad input from the user: unknown op, backend, shape or dtype. Exit status 2."""


class SkipCase(Exception):
    """A case this machine or backend cannot run; the message is the reason."""


#: Terminal colour codes (ECMA-48 SGR) that some libraries put in their errors (QuACK's CuTe DSL).
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")


def plain(text: str) -> str:
    """``text`` without terminal colour codes: a reason stored in a record or shown in a table."""
    return ANSI_ESCAPE.sub("", text)


def first_line(exc: BaseException) -> str:
    """The first non-empty line of an exception's message, prefixed by its type, colour codes
    removed."""
    text = plain(str(exc)).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def environment_error(exc: BaseException) -> str | None:
    """The one line for a fault of this host's environment, not of the input: a full disk or
    quota, a read-only filesystem, a permission denied, in ``exc`` or an exception it was
    raised from (asv chains them). It names the path and what to do; the command exits 2, never
    1, which means a regression or a collect conflict. None for any other exception."""
    import errno

    todo = {errno.ENOSPC: ("no space left on the device", "free some space there and run again"),
            errno.EDQUOT: ("over the disk quota", "free some space there and run again"),
            errno.EROFS: ("a read-only filesystem", "run where the checkout is writable, or give "
                          "another folder (--results, --html, --out)"),
            errno.EACCES: ("permission denied", "run as a user who may write there, or give another folder"),
            errno.EPERM: ("operation not permitted", "run as a user who may write there, or give another "
                          "folder")}
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno in todo:
            what, then = todo[exc.errno]
            where = exc.filename if exc.filename is not None else "a file"
            return f"{where}: {what} ({errno.errorcode[exc.errno]}); {then}"
        exc = exc.__cause__ or exc.__context__
    return None
