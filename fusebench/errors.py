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
