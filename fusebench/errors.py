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


#: A terminal's escape sequences whole: CSI (colours, cursor moves, ``\\x1b[2J``), OSC (titles,
#: hyperlinks, ended by BEL or ST) and the two-character ones.
TERMINAL_ESCAPE = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)?|[@-Z\\-_])")


def terminal(text: object) -> str:
    """``text`` safe to print on a terminal, as one line: escape sequences and every other control
    or format character dropped (BEL, backspace, a bidirectional override), a line break or tab
    a space. For every string from another host, a session file or git that a command prints
    (``fusebench ab --from``'s ``stopped``: ``\\x1b[2J`` cleared the screen)."""
    return "".join(" " if ch.isspace() else ch for ch in TERMINAL_ESCAPE.sub("", str(text))
                   if ch.isprintable() or ch.isspace())


#: What a markdown cell escapes with a backslash: the punctuation that opens a link or image
#: (``[``), a code span, emphasis or strikethrough, an autolink (``http:``, ``a@b``) or a column;
#: ``www.``'s dot too (an autolink without a scheme). HTML's ``< > &`` become entities.
_MARKDOWN = frozenset("\\`*_[]|~:@")
_HTML = {"<": "&lt;", ">": "&gt;", "&": "&amp;"}
_WWW = re.compile(r"(?i)(www)\.")


def markdown_cell(text: object) -> str:
    """``text`` safe in a cell of a markdown table (a PR comment): :func:`terminal`, then escaped
    so that it renders as the text it is: no link, image, HTML, code span, emphasis or extra
    column."""
    cell = "".join(_HTML.get(ch) or ("\\" + ch if ch in _MARKDOWN else ch) for ch in terminal(text))
    return _WWW.sub(r"\1\\.", cell)


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
