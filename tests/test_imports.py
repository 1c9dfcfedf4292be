"""Dependencies point one way: no import circle among fusebench's modules, the ops included (imports
inside functions count: they hide a circle, they do not break it), nothing below the command line
imports it, and reading the case file imports neither the sweep nor the gate."""

import ast
import functools
from pathlib import Path

from fusebench.paths import PROJECT_ROOT

#: The command line: these may import anything; nothing else may import them.
CLI = ("fusebench.cli", "fusebench.commands", "fusebench.__main__")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PROJECT_ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache
def modules() -> dict[str, Path]:
    return {_module_name(p): p for p in (PROJECT_ROOT / "fusebench").rglob("*.py")}


def _target(name: str) -> str | None:
    """The project module an imported name belongs to (``fusebench.measure.sweep.Sweep`` -> its module)."""
    while name and name not in modules():
        name = name.rpartition(".")[0]
    return name or None


@functools.cache
def imports() -> dict[str, frozenset[str]]:
    """Every project module each module imports, at module level or inside a function."""
    graph = {}
    for name, path in modules().items():
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                deps.update(_target(a.name) for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                deps.update(_target(f"{node.module}.{a.name}") for a in node.names)
        graph[name] = frozenset(deps - {None, name})
    return graph


def _is_cli(name: str) -> bool:
    return any(name == c or name.startswith(c + ".") for c in CLI)


def _reachable(start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for dep in imports()[todo.pop()]:
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return seen


def test_the_graph_sees_function_level_imports():
    # fusebench.history.site imports the plots inside publish(): the graph must see that edge
    assert "fusebench.history.plots" in imports()["fusebench.history.site"]
    assert "fusebench.ops.rmsnorm" in modules() and "fusebench.registry" in imports()["fusebench.ops.rmsnorm"]


def test_no_import_circle():
    circles = sorted(sorted([m, *(d for d in _reachable(m) if m in _reachable(d))])
                     for m in modules() if m in _reachable(m))
    assert not circles, f"modules importing each other, directly or through others: {circles[0]}"


def test_nothing_below_the_command_line_imports_it():
    up = sorted(f"{m} imports {d}" for m, deps in imports().items() if not _is_cli(m)
                for d in deps if _is_cli(d))
    assert not up, "\n".join(up)


def test_reading_the_case_file_imports_neither_the_sweep_nor_the_gate():
    reached = _reachable("fusebench.config")
    below = [m for m in reached if m.startswith(("fusebench.history", "fusebench.measure", "fusebench.ops"))]
    assert not below, below
