"""The case file is read where it is named and passed down as a path (asv's ``conf`` is the model):
no library module reads it from the environment. The one way in through the environment is asv's
benchmark process (``benchmarks/suite.py``), which asv starts with no argument of ours."""

import ast
import dataclasses
import re
from pathlib import Path

import pytest

from fusebench import config
from fusebench.measure import workers
from fusebench.paths import PROJECT_ROOT

#: Library modules that may name the variable, and why: where it is defined.
MAY_NAME_IT = {"fusebench/config.py": "defines it"}


def _library_modules() -> list[Path]:
    return sorted((PROJECT_ROOT / "fusebench").rglob("*.py"))


def _mentions(path: Path) -> list[int]:
    """Lines of ``path`` whose code names the case file's variable (``CONFIG_ENV`` or its value)."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text())):
        if (isinstance(node, ast.Constant) and node.value == config.CONFIG_ENV
                or isinstance(node, ast.Name) and node.id == "CONFIG_ENV"
                or isinstance(node, ast.Attribute) and node.attr == "CONFIG_ENV"):
            lines.append(node.lineno)
    return lines


def test_no_library_module_reads_the_case_file_from_the_environment():
    found = {str(p.relative_to(PROJECT_ROOT)): _mentions(p) for p in _library_modules()}
    assert "fusebench/config.py" in found  # the scan sees the package
    named = {m: lines for m, lines in found.items() if lines and m not in MAY_NAME_IT}
    assert not named, f"the case file's variable named outside {sorted(MAY_NAME_IT)}: {named}"


def test_the_scan_finds_a_read_through_the_constant_or_the_name(tmp_path):
    for text in ('import os\nos.environ.get("FUSEBENCH_CONFIG")\n',
                 "from fusebench import config\nimport os\nos.getenv(config.CONFIG_ENV)\n",
                 "from fusebench.config import CONFIG_ENV\nenv = {}\nenv[CONFIG_ENV]\n"):
        (tmp_path / "m.py").write_text(text)
        assert _mentions(tmp_path / "m.py") == [len(text.splitlines())]


def test_config_and_the_asv_entry_are_the_only_places_it_is_spelt():
    paths = [*_library_modules(), PROJECT_ROOT / "benchmarks" / "suite.py"]
    spelt = sorted(str(p.relative_to(PROJECT_ROOT)) for p in paths
                   if re.search(r"\bFUSEBENCH_CONFIG\b", p.read_text()))
    assert spelt == ["benchmarks/suite.py", "fusebench/config.py"]


def test_the_case_file_in_the_environment_changes_nothing_below_the_command_line(monkeypatch, tmp_path):
    """A FUSEBENCH_CONFIG left in a shell is not a case file anybody reads: the default is the
    default, and a path given is the path given."""
    from fusebench.ops import configured

    monkeypatch.setenv(config.CONFIG_ENV, str(tmp_path / "missing.yaml"))
    assert config.load().path == config.DEFAULT_PATH
    assert list(configured()) == list(config.load(config.DEFAULT_PATH).ops)
    with pytest.raises(config.ConfigError, match="other.yaml: cannot read the case file"):
        config.load(tmp_path / "other.yaml")


def test_the_workers_read_the_case_file_they_are_handed(tmp_path):
    """The GPU workers get the case file as a field of their job (pickled into each spawned
    process), not through the environment they inherit."""
    text = (PROJECT_ROOT / "fusebench.yaml").read_text()
    cpu_grid = "      cpu: [1024, 16384, 262144, 1048576]\n"
    assert text.count(cpu_grid) == 1, "fusebench.yaml's gelu cpu grid changed: update this test"
    cases = tmp_path / "cases.yaml"
    cases.write_text(text.replace(cpu_grid, "      cpu: [16384]\n"))
    job = workers.Job("fusebench.ops:configured", ("gelu",), ("torch",), ("float32",), "cpu", 1, "cpu",
                      case_file=str(cases))
    default = dataclasses.replace(job, case_file=None)
    assert [shape for _, _, shape, _ in default.cases()] == [(1024,), (16384,), (262144,), (1048576,)]
    assert [shape for _, _, shape, _ in job.cases()] == [(16384,)]
