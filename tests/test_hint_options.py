"""Every ``fusebench <command> [<subcommand>] --option`` that a document, a docstring, a message or
a script names is an option of that command (of that subcommand, where one is named): a hint that
names an option the parser refuses does not run as printed."""

import argparse
import importlib
import re
from pathlib import Path

from fusebench.commands import COMMANDS, Parser

ROOT = Path(__file__).resolve().parents[1]
#: ``fusebench <command>`` and what follows it up to the end of its code span, line or shell
#: command (``;``, ``|``, ``&&``) or the next ``fusebench``.
HINT = re.compile(r"fusebench (" + "|".join(COMMANDS) + r")\b((?:(?!fusebench )[^`\n;|&])*)")
FLAG = re.compile(r"(?<![\w-])(--[A-Za-z][\w-]*)")


def _parsers(parser: argparse.ArgumentParser) -> dict[str | None, set[str]]:
    """``{None: the command's own options, subcommand: its options and the command's}``."""
    own = {s for a in parser._actions for s in a.option_strings}
    out: dict[str | None, set[str]] = {None: set(own)}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out[name] = own | {s for a in sub._actions for s in a.option_strings}
                out[None] |= out[name]  # a hint that names no subcommand: any of theirs
    return out


def options() -> dict[str, dict[str | None, set[str]]]:
    out = {}
    for name, module in COMMANDS.items():
        parser = Parser(prog=f"fusebench {name}")
        importlib.import_module(f"fusebench.commands.{module}").add_arguments(parser)
        out[name] = _parsers(parser)
    return out


def unwrap(text: str, markdown: bool) -> str:
    """Shell continuations joined; in Markdown, a code span broken over lines joined too."""
    text = re.sub(r"\\\n\s*", " ", text)
    if not markdown:
        return text
    out, in_span, fenced = [], False, False
    for line in text.split("\n"):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        out.append(line)
        if not fenced and line.count("`") % 2:
            in_span = not in_span
        out.append(" " if in_span and not fenced else "\n")
    return "".join(out)


def texts() -> list[Path]:
    return [ROOT / "README.md", ROOT / "Makefile", ROOT / "Dockerfile", ROOT / "fusebench.yaml",
            ROOT / "fusebench" / "fusebench.yaml", *sorted((ROOT / "docs").rglob("*.md")),
            *sorted((ROOT / "records").glob("*.md")), *sorted((ROOT / "deploy").rglob("*")),
            *sorted((ROOT / "fusebench").rglob("*.py")), *sorted((ROOT / "scripts").glob("*"))]


def unknown(text: str, known: dict, markdown: bool = False) -> list[str]:
    """``command [subcommand] --flag`` for each flag a hint in ``text`` gives that it lacks."""
    bad = []
    for m in HINT.finditer(unwrap(text, markdown)):
        command, rest = m.group(1), m.group(2)
        words = rest.split()
        sub = words[0] if words and words[0] in known[command] else None
        for flag in FLAG.findall(rest):
            if flag.split("=")[0] not in known[command][sub]:
                bad.append(" ".join(x for x in (command, sub, flag) if x))
    return bad


def test_the_check_finds_unknown_options_and_passes_known_ones():
    known = options()
    assert unknown("see `fusebench compare --machine h200 --calibrate` and ``fusebench table --doc``",
                   known) == ["compare --calibrate"]
    assert unknown("    fusebench nsys capture --op gelu [--backends ..]", known) == []
    assert unknown("`fusebench compare` then `--calibrate` elsewhere", known) == []
    assert unknown("fusebench table --doc h200; fusebench compare --base x --machine_x h", known) == [
        "compare --machine_x"]
    assert unknown("python -m fusebench compare --base a \\\n    --head-result x", known) == [
        "compare --head-result"]
    assert unknown("run `fusebench\ncompare --nope`", known, markdown=True) == ["compare --nope"]
    assert unknown("fusebench nsys plan --json x", known) == ["nsys plan --json"]


def test_every_option_a_hint_names_exists():
    known = options()
    bad = [f"{path.relative_to(ROOT)}: {hit}" for path in texts() if path.is_file()
           for hit in unknown(path.read_text(encoding="utf-8", errors="replace"), known,
                              markdown=path.suffix == ".md")]
    assert bad == []
