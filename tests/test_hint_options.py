"""Every ``fusebench <command> --option`` that a document, a docstring or a message names is an
option of that command (or of one of its subcommands): a hint that names an option the parser
refuses does not run as printed."""

import importlib
import re
from pathlib import Path

from fusebench.commands import COMMANDS, Parser

ROOT = Path(__file__).resolve().parents[1]
#: ``fusebench <command>`` and the rest of its line, up to the end of a code span.
HINT = re.compile(r"fusebench (" + "|".join(COMMANDS) + r")\b([^`\n]*)")
FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")


def _options(parser) -> set[str]:
    out = set()
    for action in parser._actions:
        out |= set(action.option_strings)
        if hasattr(action, "_name_parser_map"):  # subcommands: theirs too
            for sub in action.choices.values():
                out |= _options(sub)
    return out


def options() -> dict[str, set[str]]:
    out = {}
    for name, module in COMMANDS.items():
        parser = Parser(prog=f"fusebench {name}")
        importlib.import_module(f"fusebench.commands.{module}").add_arguments(parser)
        out[name] = _options(parser)
    return out


def texts() -> list[Path]:
    return [ROOT / "README.md", ROOT / "Makefile", *sorted((ROOT / "docs").rglob("*.md")),
            *sorted((ROOT / "records").glob("*.md")), *sorted((ROOT / "fusebench").rglob("*.py")),
            *sorted((ROOT / "scripts").glob("*.py"))]


def unknown(text: str, known: dict[str, set[str]]) -> list[str]:
    """``command --flag`` for each flag a hint in ``text`` gives that its command lacks."""
    return [f"{m.group(1)} {flag}" for line in text.splitlines() for m in HINT.finditer(line)
            for flag in FLAG.findall(m.group(2)) if flag not in known[m.group(1)]]


def test_the_check_finds_an_unknown_option_and_passes_a_known_one():
    known = options()
    assert unknown("see `fusebench compare --machine h200 --calibrate` and ``fusebench table --doc``",
                   known) == ["compare --calibrate"]
    assert unknown("    fusebench nsys capture --op gelu [--backends ..]", known) == []
    assert unknown("`fusebench compare` then `--calibrate` elsewhere", known) == []


def test_every_option_a_hint_names_exists():
    known = options()
    bad = [f"{path.relative_to(ROOT)}: {hit}" for path in texts()
           for hit in unknown(path.read_text(encoding="utf-8", errors="replace"), known)]
    assert bad == []
