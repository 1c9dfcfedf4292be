"""The ``fusebench`` command: one subcommand per user action, each with ``--help``.

    fusebench <command> [options]          (or python -m fusebench <command>, from a checkout)

Each command is a module of this package with ``add_arguments(parser)`` and ``run(args) -> int``;
its docstring's first line is its one-line help, the rest its ``--help`` text. Bad input (an
unknown command or option, a bad value, a case file that is not valid) is one line on stderr and
exit status 2, never a traceback (``fusebench.cli.run_main``).
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import sys
from pathlib import Path

from fusebench.cli import run_main
from fusebench.errors import UsageError

#: Command name -> module of this package, in the order ``fusebench --help`` lists them.
COMMANDS: dict[str, str] = {
    "bench": "bench",
    "list": "listing",
    "compare": "compare",
    "ab": "ab",
    "bisect": "bisect",
    "publish": "publish",
    "preview": "preview",
    "plots": "plots",
    "table": "table",
    "collect": "collect",
    "store": "store",
    "nsys": "nsys",
    "ncu": "ncu",
    "trace": "trace",
    "profile": "profile",
    "pitfalls": "pitfalls",
    "mlp": "mlp",
    "tune": "tune",
}


class Parser(argparse.ArgumentParser):
    """argparse, with a usage error as one line (``fusebench bench: error: ...``) and exit 2."""

    def error(self, message: str):
        raise UsageError(message)


def _module(name: str):
    """Import the module of command ``name``.

    Raises:
        UsageError: a dependency of the command is missing from this Python (``make venv``).
    """
    try:
        return importlib.import_module(f"fusebench.commands.{COMMANDS[name]}")
    except ModuleNotFoundError as exc:
        raise _missing(name, exc) from None


def _missing(name: str, exc: ModuleNotFoundError) -> UsageError:
    """The one line saying command ``name`` needs a package this Python lacks (``exc``'s; an
    error of fusebench's own is re-raised). A command imports torch where it measures, not at
    import (its ``--help`` needs none), so this is met on import or on running alike."""
    if (exc.name or "").split(".")[0] == "fusebench":
        raise exc
    return UsageError(f"{name} needs {exc.name}, which {sys.executable} does not have: "
                      "make venv creates .venv from requirements.lock, then run "
                      f".venv/bin/python -m fusebench {name} (the Makefile uses .venv)")


def _doc(name: str) -> str:
    """The docstring of command ``name``'s module, read from its source without importing it
    (``fusebench --help`` must not import torch: fast, and it works in any Python)."""
    spec = importlib.util.find_spec(f"fusebench.commands.{COMMANDS[name]}")
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    return plain(ast.get_docstring(tree) or "")


def plain(text: str) -> str:
    """``text`` as a terminal shows it: reST's double backquotes around literals become single
    ones (the docstrings are written for the API docs, the help for a terminal)."""
    return text.replace("``", "`")


def parser(command: str | None = None) -> Parser:
    """The ``fusebench`` parser: every subcommand with its one-line help; the options of
    ``command`` only (its module is imported; the others' are not)."""
    ap = Parser(prog="fusebench", description=plain(__doc__.splitlines()[0]),
                epilog="`fusebench <command> --help` says what a command does and its options.")
    from fusebench import __version__

    ap.add_argument("--version", action="version", version=f"fusebench {__version__}")
    sub = ap.add_subparsers(dest="command", metavar="<command>", parser_class=Parser)
    for name in COMMANDS:
        doc = _doc(name).strip()
        first, _, rest = doc.partition("\n")
        p = sub.add_parser(name, help=first.strip(), description=doc,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        if name == command:
            module = _module(name)
            module.add_arguments(p)
            p.set_defaults(run=module.run)
    return ap


def _refuse_another_checkout(argv: list[str]) -> None:
    """Refuse to run in a checkout other than the one this fusebench is (and stores into).

    Raises:
        UsageError: the working folder is in another fusebench checkout.
    """
    import shlex

    from fusebench.paths import PROJECT_ROOT, other_checkout

    other = other_checkout()
    if other is not None:
        again = shlex.join([sys.executable, "-m", "fusebench", *argv])
        raise UsageError(f"this fusebench is {PROJECT_ROOT}'s and stores there, but the working folder "
                         f"is in the checkout {other}: run that one's own: "
                         f"cd {shlex.quote(str(other))} && {again}")


def main(argv: list[str] | None = None) -> None:
    """Parse ``argv`` (default ``sys.argv[1:]``), run the command, exit with its status."""
    argv = sys.argv[1:] if argv is None else argv
    name = next((a for a in argv if not a.startswith("-")), None)
    prog = name if name in COMMANDS else "fusebench"

    def go() -> int:
        args = parser(prog if prog in COMMANDS else None).parse_args(argv)
        if args.command is None:
            parser().print_help()
            return 2
        _refuse_another_checkout(argv)
        try:
            return args.run(args)
        except ModuleNotFoundError as exc:
            raise _missing(args.command, exc) from None

    run_main(go, prog)
