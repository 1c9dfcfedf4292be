"""The ``fusebench`` command: one subcommand per user action, each with ``--help``.

    fusebench <command> [options]          (or python -m fusebench <command>, from a checkout)

Each command is a module of this package with ``add_arguments(parser)`` and ``run(args) -> int``;
its docstring's first line is its one-line help, the rest its ``--help`` text. Bad input (an
unknown command or option, a bad value, a case file that is not valid) is one line on stderr and
exit status 2, never a traceback (``fusebench.cli.run_main``).
"""

from __future__ import annotations

import argparse
import importlib
import sys

from fusebench.cli import run_main
from fusebench.errors import UsageError

#: Command name -> module of this package, in the order ``fusebench --help`` lists them.
COMMANDS: dict[str, str] = {
    "bench": "bench",
    "list": "listing",
    "compare": "compare",
    "publish": "publish",
    "preview": "preview",
    "plots": "plots",
    "table": "table",
    "collect": "collect",
    "nsys": "nsys",
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
    return importlib.import_module(f"fusebench.commands.{COMMANDS[name]}")


def parser() -> Parser:
    """The ``fusebench`` parser with every subcommand (imports each command's module)."""
    ap = Parser(prog="fusebench", description=__doc__.splitlines()[0],
                epilog="`fusebench <command> --help` says what a command does and its options.")
    from fusebench import __version__

    ap.add_argument("--version", action="version", version=f"fusebench {__version__}")
    sub = ap.add_subparsers(dest="command", metavar="<command>", parser_class=Parser)
    for name in COMMANDS:
        module = _module(name)
        doc = (module.__doc__ or "").strip()
        first, _, rest = doc.partition("\n")
        p = sub.add_parser(name, help=first.strip(), description=doc,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        module.add_arguments(p)
        p.set_defaults(run=module.run)
    return ap


def main(argv: list[str] | None = None) -> None:
    """Parse ``argv`` (default ``sys.argv[1:]``), run the command, exit with its status."""
    argv = sys.argv[1:] if argv is None else argv
    name = next((a for a in argv if not a.startswith("-")), None)
    prog = name if name in COMMANDS else "fusebench"

    def go() -> int:
        args = parser().parse_args(argv)
        if args.command is None:
            parser().print_help()
            return 2
        return args.run(args)

    run_main(go, prog)
