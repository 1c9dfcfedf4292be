"""The tuning-space interface (fusebench/tuning.py) and the op-agnostic fusebench tune, on the CPU."""

import ast
import re

import pytest
import torch

from fusebench import tuning
from fusebench.commands import tune
from fusebench.errors import SkipCase
from fusebench.ops import configured, get_op
from fusebench.paths import PROJECT_ROOT
from fusebench.registry import DTYPES


def test_the_spaces_are_read_from_each_op_folder():
    assert list(tuning.spaces("triton", configured())) == ["gelu", "softmax"]
    assert list(tuning.spaces("cuda", configured())) == ["gelu", "softmax"]
    assert tuning.spaces("eager", configured()) == {}  # no op tunes its unfused baseline
    softmax = tuning.spaces("triton", configured())["softmax"]
    op = get_op("softmax", configured())
    assert softmax.cases(op) == [(s, d) for d in DTYPES.values() for s in op.grids["default"]]
    gelu = tuning.spaces("cuda", configured())["gelu"]
    assert gelu.budget_s == 0.05 and len(gelu.cases(get_op("gelu", configured()))) == 3 * len(DTYPES)


def test_an_op_without_a_tuning_module_has_no_space(monkeypatch):
    # rmsnorm and matmul have none; an op that is one module (not a folder) has none either
    assert not {"rmsnorm", "matmul"} & set(tuning.spaces("triton", configured()))
    import fusebench.kernels.matmul as matmul

    monkeypatch.setattr(matmul, "__path__", [], raising=False)  # a folder with no tuning.py
    assert tuning.spaces("triton", {"matmul": get_op("matmul", configured())}) == {}


def test_triton_gelu_candidates_default_first_and_distinct():
    pytest.importorskip("triton")
    space = tuning.spaces("triton", configured())["gelu"]
    labels = [c.label for c in space.candidates(torch.empty(1 << 22, device="meta"))]
    assert labels[0] == "default" and len(set(labels)) == len(labels) > 20


def test_the_tune_command_names_no_op_and_no_private_kernel_api():
    """The command reads the spaces through fusebench.tuning only: no op's module, no name of an
    op, no underscore attribute of anything it imports."""
    source = (PROJECT_ROOT / "fusebench/commands/tune.py").read_text()
    tree = ast.parse(source)
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not [m for m in imported if m.startswith("fusebench.kernels")]
    code = ast.unparse(tree)  # docstrings and comments aside, the code
    assert not re.search(r"\b(gelu|softmax|rmsnorm|matmul)\b", ast.unparse(
        [n for n in tree.body if not isinstance(n, ast.Expr)]))
    assert not re.search(r"\.\_[a-z]", code)
    assert not (PROJECT_ROOT / "fusebench/commands/tune_cuda.py").exists()
    assert not (PROJECT_ROOT / "fusebench/commands/tune_triton.py").exists()


def _doubled(x):
    return lambda: x * 2


def _skipped(x):
    raise SkipCase("needs something this machine lacks")


def test_a_case_table_gates_times_and_reports_each_candidate(capsys):
    op = get_op("gelu", configured())
    space = tuning.Space(lambda op: [((4096,), torch.float32)], lambda x: [
        tuning.Candidate("default", op.backends["eager"].factory),
        tuning.Candidate("wrong x2", _doubled),
        tuning.Candidate("needs more", _skipped),
        tuning.Candidate("torch again", op.backends["torch"].factory),
    ])
    best, wrong = tune.run_case(op, "triton", space, (4096,), torch.float32, torch.device("cpu"), 0.002,
                                ceiling=10.0, prefixes=["torch", "wrong", "triton"])
    out = capsys.readouterr().out
    assert wrong == 1
    rows = {line.split()[0]: line for line in out.splitlines()[3:]}
    assert "WRONG:" in rows["wrong"] and "needs" not in rows  # --variants left "needs more" out
    assert "1.00x" in rows["default"]  # the default is the "vs def" baseline
    assert "[torch]" in rows and "[triton]" not in rows  # kept by --variants, but the backend tuned
    assert best[0] in ("default", "torch again") and best[2] == "-"  # torch is no peer to beat
    assert best[1] > 0


def test_the_command_refuses_what_matches_nothing_before_looking_for_a_gpu(capsys):
    from fusebench import commands

    with pytest.raises(SystemExit) as end:
        commands.main(["tune", "triton", "--only", "no such case"])
    assert end.value.code == 2
    assert capsys.readouterr().err.strip() == (
        "tune: error: the options match no case (see --ops, --dtypes, --shapes, --only)")
    with pytest.raises(SystemExit) as end:
        commands.main(["tune", "eager"])
    assert end.value.code == 2
    assert "no op has a tuning space for eager" in capsys.readouterr().err
