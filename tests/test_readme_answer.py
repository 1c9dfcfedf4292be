"""README.md opens with the answer (issue 54): a table per GPU of every backend at each op's
headline shape, generated from the committed run records by ``fusebench table --readme`` so that it
cannot go stale; and every command it prints runs as printed (item 4: ``fusebench table`` was
exit 127 after ``make``: no ``fusebench`` on PATH)."""

import os
import re
import shutil
import subprocess

import pytest

from fusebench.commands import main
from fusebench.errors import UsageError
from fusebench.paths import PROJECT_ROOT
from fusebench.report import resultsdoc

README = PROJECT_ROOT / "README.md"


def _block(text: str) -> str:
    lines = text.splitlines()
    return "\n".join(lines[lines.index(resultsdoc.README_BEGIN):lines.index(resultsdoc.README_END) + 1])


def test_the_readmes_table_is_what_the_committed_records_give():
    """Commit a GPU run's records, then `.venv/bin/fusebench table --readme` (README.md says so)."""
    assert _block(README.read_text()) == resultsdoc.readme_block(), \
        "README.md's table is not the committed records': run .venv/bin/fusebench table --readme"


def test_the_answer_comes_first_with_its_plot():
    text = README.read_text()
    assert text.index(resultsdoc.README_BEGIN) < text.index("## Two commands")
    block = _block(text)
    assert "**h200** (NVIDIA H200)" in block and "(copy ceiling 4250 GB/s)" in block
    # each memory-bound op at its headline shape (fusebench.yaml), eager's speedup 1.0x
    for row in ("| gelu 16384x16384 bfloat16 | 407 9.6% 1.0x |", "| softmax 8192x16384 bfloat16 |",
                "| rmsnorm 16384x4096 bfloat16 |"):
        assert row in block
    assert " float32 |" not in block and " float16 |" not in block  # one dtype: the rest in docs/results/
    assert "matmul" not in block  # compute-bound: no % of the copy ceiling
    assert "![gelu speedup over eager on h200](plots/h200/gelu-speedup.png)" in block


def _repo(tmp_path):
    """A git checkout holding the committed H200 record as two GPU machines' and a CPU's, one plot."""
    record = PROJECT_ROOT / "records" / "h200" / "178ab4e8.json.xz"
    for machine in ("h200", "h100-80gb-hbm3", "cpu-x86_64"):
        (tmp_path / "records" / machine).mkdir(parents=True)
        shutil.copyfile(record, tmp_path / "records" / machine / record.name)
    (tmp_path / "plots" / "h200").mkdir(parents=True)
    shutil.copyfile(PROJECT_ROOT / "plots" / "h200" / "gelu-speedup.png", tmp_path / "plots" / "h200" /
                    "gelu-speedup.png")
    (tmp_path / "records" / "h200" / "00000000.json.xz").write_bytes(b"")  # not tracked: not read
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "add", "records/*/178ab4e8.json.xz", "plots"], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm",
                    "records"], check=True)
    return tmp_path


def test_every_gpu_gets_its_table_and_a_cpu_none(tmp_path):
    block = resultsdoc.readme_block(_repo(tmp_path))
    heads = re.findall(r"^\*\*(\S+)\*\* ", block, re.M)
    assert heads == ["h100-80gb-hbm3", "h200"]  # a CPU's host-clock figures are not kept
    first, second = block.split("**h200**")
    assert first.count("| gelu 16384x16384 bfloat16 |") == second.count("| gelu 16384x16384 bfloat16 |") == 1
    assert "plots/h100-80gb-hbm3" not in block and "](plots/h200/gelu-speedup.png)" in second


def test_table_readme_writes_between_the_marks_and_refuses_bad_input(tmp_path, capsys):
    text = f"# x\n\nbefore\n{resultsdoc.README_BEGIN}\nold\n{resultsdoc.README_END}\nafter\n"
    assert resultsdoc.with_readme_block(text, "NEW") == "# x\n\nbefore\nNEW\nafter\n"
    with pytest.raises(UsageError, match="^README.md has no line '<!-- the answer: "):
        resultsdoc.with_readme_block("# x\n", "NEW")
    with pytest.raises(SystemExit) as end:
        main(["table", "--readme", "--op", "gelu"])
    assert (end.value.code, capsys.readouterr().err) == (
        2, "table: error: --readme takes no RECORD or --op: the table is every GPU's committed records\n")


#: How a command the README prints may start: make, the command make venv installs, or the module.
RUNS_AS_PRINTED = ("make", ".venv/bin/fusebench", "python3 -m fusebench", "python -m fusebench")


def test_every_command_the_readme_prints_runs_as_printed():
    """Issue 54, item 4: the README printed `fusebench table`; after `make` no `fusebench` is on
    PATH (exit 127). Each command in a code span or block starts as one of RUNS_AS_PRINTED."""
    text = README.read_text()
    spans = re.findall(r"`([^`\n]+)`", text) + re.findall(r"^    (\S.*)$", text, re.M)
    bare = [s for s in spans if re.match(r"fusebench\s", s)]
    assert bare == [], f"prints a bare fusebench command; start it with one of {RUNS_AS_PRINTED}"
    printed = [s for s in spans if re.match(r"(\S+/)?fusebench\s|python3? -m fusebench", s)]
    assert printed and all(s.startswith(RUNS_AS_PRINTED) for s in printed), printed
    assert ".venv/bin/fusebench table --readme" in text


def test_make_venv_says_where_the_command_is(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "REFERENCE")}
    venv = tmp_path / "v"
    out = subprocess.run(["make", "-n", "-B", f"VENV={venv}", "venv"], cwd=PROJECT_ROOT, capture_output=True,
                         text=True, env=env)
    assert out.returncode == 0, out.stderr
    said = f"venv: the fusebench command is {venv}/bin/fusebench (source {venv}/bin/activate puts it on PATH)"
    assert out.stdout.splitlines()[-1] == f'echo "{said}"'
