"""Dependencies point one way: no import circle among fusebench's modules, the ops included (imports
inside functions count: they hide a circle, they do not break it), nothing below the command line
imports it, reading the case file imports neither the sweep nor the gate, and reading a run record
imports neither the sweep nor torch."""

import ast
import functools
import subprocess
import sys
from pathlib import Path

from fusebench.paths import PROJECT_ROOT

#: The command line: these may import anything; nothing else may import them.
CLI = ("fusebench.cli", "fusebench.commands", "fusebench.__main__")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PROJECT_ROOT).with_suffix("").parts)
    if parts[0] == "kernels":  # imported as fusebench.kernels (fusebench/__init__.py)
        parts.insert(0, "fusebench")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache
def modules() -> dict[str, Path]:
    return {_module_name(p): p for folder in ("fusebench", "kernels")
            for p in (PROJECT_ROOT / folder).rglob("*.py")}


def _target(name: str) -> str | None:
    """The project module an imported name belongs to (``fusebench.record.Sweep`` -> its module)."""
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
    # fusebench.site.site imports the plots inside publish(): the graph must see that edge
    assert "fusebench.report.plots" in imports()["fusebench.site.site"]
    assert "fusebench.kernels.rmsnorm" in modules()
    assert "fusebench.registry" in imports()["fusebench.kernels.rmsnorm"]


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
    below = [m for m in reached
             if m.startswith(("fusebench.storage", "fusebench.asv", "fusebench.gate", "fusebench.report",
                              "fusebench.site", "fusebench.measure", "fusebench.ops",
                              "fusebench.kernels"))]
    assert not below, below


#: The run record's data model, and the only project modules it may import.
RECORD, RECORD_MAY_IMPORT = "fusebench.record", {"fusebench.metrictable", "fusebench.atomic"}
#: Modules that read records and never measure: none may import the sweep, even inside a function.
READERS = ("fusebench.gate.noise", "fusebench.gate.compare", "fusebench.report.summary",
           "fusebench.storage.runrecord", "fusebench.storage.results", "fusebench.report.resultsdoc",
           "fusebench.storage.collect", "fusebench.storage.untrusted", "fusebench.storage.shares",
           "fusebench.report.marks", "fusebench.gate.bisect")
SWEEP = "fusebench.measure.sweep"


def test_the_record_is_a_leaf_of_the_standard_library_and_the_metric_table():
    assert _reachable(RECORD) == RECORD_MAY_IMPORT
    for name in (RECORD, *RECORD_MAY_IMPORT):
        tops = set()
        for node in ast.walk(ast.parse(modules()[name].read_text())):
            if isinstance(node, ast.Import):
                tops.update(a.name.partition(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                tops.add(node.module.partition(".")[0])
        assert tops - {"fusebench"} <= sys.stdlib_module_names, (name, tops)


def test_the_modules_that_read_records_do_not_import_the_sweep():
    assert {m: SWEEP in _reachable(m) for m in READERS} == {m: False for m in READERS}


def _loaded_after(modules: tuple[str, ...], *names: str) -> list[bool]:
    """Whether each of ``names`` is loaded once ``modules`` are imported in a fresh interpreter."""
    code = f"import sys\nfor m in {modules!r}: __import__(m)\nprint(*(n in sys.modules for n in {names!r}))"
    out = subprocess.run([sys.executable, "-c", code], cwd=PROJECT_ROOT, capture_output=True, text=True,
                         check=True).stdout
    return [w == "True" for w in out.split()]


def test_reading_records_at_run_time_loads_no_sweep():
    """The plots and the site read records too; their one path to the sweep is inside a function
    of the asv suite (``asvsuite.load_records``: asv's setup_cache measures when no record is given)."""
    readers = (*READERS, "fusebench.report.plots", "fusebench.site.site", "fusebench.commands.table")
    assert _loaded_after(readers, SWEEP) == [False]


def test_the_gate_the_record_store_and_the_merge_load_no_torch():
    readers = ("fusebench.gate.compare", "fusebench.gate.noise", "fusebench.storage.runrecord",
               "fusebench.storage.collect", "fusebench.storage.untrusted", "fusebench.site.site", RECORD)
    assert _loaded_after(readers, "torch", SWEEP) == [False, False]


#: The rooms of the harness's history side, lowest first (issue 43): each imports only itself and
#: the rooms before it, at module level or inside a function.
ROOMS = ("storage", "asv", "gate", "report", "site")


def _room(module: str) -> int | None:
    parts = module.split(".")
    return ROOMS.index(parts[1]) if len(parts) > 1 and parts[1] in ROOMS else None


def test_the_rooms_import_one_way():
    up = sorted(f"{m} imports {d}" for m, deps in imports().items() if _room(m) is not None
                for d in deps if _room(d) is not None and _room(d) > _room(m))
    assert not up, "\n".join(up)
    assert _room("fusebench.site.verdicts") > _room("fusebench.gate.compare")  # the test sees rooms


def test_each_room_says_what_it_owns_and_holds_one_concept():
    for room in ROOMS:
        doc = ast.get_docstring(ast.parse((PROJECT_ROOT / "fusebench" / room / "__init__.py").read_text()))
        names = [p.stem for p in (PROJECT_ROOT / "fusebench" / room).glob("*.py") if p.stem != "__init__"]
        assert doc and all(f"``{n}``" in doc for n in names), (room, names)
    assert not (PROJECT_ROOT / "fusebench" / "history").exists()  # the six-concept room is gone
