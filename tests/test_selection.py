"""A selection that selects nothing is refused; a run that measured nothing stores nothing (issue 13, 5)."""

import os
import subprocess
import sys

import pytest
import torch

from fusebench.errors import UsageError
from fusebench.measure.selection import choose, require_measured
from fusebench.ops import OPS
from fusebench.paths import PROJECT_ROOT
from fusebench.record import Record
from fusebench.registry import BACKENDS, PRECISIONS

VALID_OPS = ", ".join(OPS)  # the registry's order
VALID_BACKENDS = ", ".join(BACKENDS)


@pytest.mark.parametrize("ops, backends, dtypes, message", [
    ("gelu", None, "tf32", "dtype 'tf32' does not apply to gelu; valid dtypes: float32, bfloat16, float16"),
    ("gelu,softmax", None, "float32,tf32",
     "dtype 'tf32' does not apply to any of gelu, softmax; valid dtypes: float32, bfloat16, float16"),
    ("matmul", "eager", None, "backend 'eager' does not apply to matmul; valid backends: torch"),
    ("matmul", "torch,cuda", None, "backend 'cuda' does not apply to matmul; valid backends: torch"),
    (",", None, None, f"no op named in ','; valid ops: {VALID_OPS}"),
    ("gelu", " , ", None, f"no backend named in ' , '; valid backends: {VALID_BACKENDS}"),
])
def test_a_name_that_applies_to_no_chosen_op_is_refused(ops, backends, dtypes, message):
    with pytest.raises(UsageError) as err:
        choose(OPS, ops, backends, dtypes)
    assert str(err.value) == message


def test_a_name_that_applies_to_one_chosen_op_is_kept():
    ops, backends, dtypes = choose(OPS, "gelu,matmul", "torch,eager", "tf32")
    assert [op.name for op in ops] == ["gelu", "matmul"]
    assert (backends, dtypes) == (["torch", "eager"], ["tf32"])


def test_the_default_selection_is_everything():
    ops, backends, dtypes = choose(OPS, None, None, "")
    assert ops == list(OPS.values())
    assert (backends, dtypes) == (list(BACKENDS), list(PRECISIONS))
    # matmul has no eager backend: by default that is a skipped case, not a refused selection
    assert choose(OPS, "matmul", None, None)[1] == list(BACKENDS)


def record(status, reason=""):
    return Record("gelu", "cuda", "1024", "float32", status=status, reason=reason)


def test_a_sweep_with_a_measured_case_passes():
    require_measured([record("skipped", "needs a CUDA GPU"), record("ok")])


@pytest.mark.parametrize("records, message", [
    ([], "nothing measured: the selection has no case on this machine's grid; nothing stored"),
    ([record("skipped", "needs a CUDA GPU")] * 3 + [record("failed", "timing: RuntimeError")],
     "nothing measured: 3 case(s) skipped, 1 failed (most common reason, 3 case(s): needs a CUDA GPU); "
     "nothing stored"),
])
def test_a_sweep_that_measured_nothing_is_refused(records, message):
    with pytest.raises(UsageError) as err:
        require_measured(records)
    assert str(err.value) == message


def bench(*args, tmp_path):
    env = {**os.environ, "HOME": str(tmp_path)}
    env.pop("TRITON_INTERPRET", None)
    return subprocess.run([sys.executable, "-m", "fusebench", "bench", *args], cwd=PROJECT_ROOT,
                          capture_output=True,
                          text=True, timeout=300, env=env)


@pytest.mark.slow
def test_bench_refuses_a_dtype_of_no_chosen_op_before_measuring(tmp_path):
    """make bench QUICK=1 OP=gelu DTYPES=tf32: refused with the valid dtypes, nothing stored."""
    results = tmp_path / "results"
    out = bench("--quick", "--ops", "gelu", "--dtypes", "tf32", "--results", str(results), tmp_path=tmp_path)
    assert out.returncode == 2
    assert out.stderr.strip() == ("bench: error: dtype 'tf32' does not apply to gelu; "
                                  "valid dtypes: float32, bfloat16, float16")
    assert not results.exists()


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available(), reason="the cuda backend measures on a GPU")
def test_bench_that_measures_nothing_stores_nothing(tmp_path):
    """make bench QUICK=1 OP=gelu BACKENDS=cuda on the CPU: every case skipped, exit 2, nothing stored."""
    results = tmp_path / "results"
    out = bench("--quick", "--ops", "gelu", "--backends", "cuda", "--results", str(results), "--no-publish",
                tmp_path=tmp_path)
    assert out.returncode == 2, out.stderr[-2000:]
    n = len(OPS["gelu"].grids["cpu-quick"]) * len(OPS["gelu"].dtypes)  # one case per shape and dtype
    assert out.stderr.strip().splitlines()[-1] == (
        f"bench: error: nothing measured: {n} case(s) skipped, 0 failed (most common reason, {n} case(s): "
        "needs a CUDA GPU); nothing stored")
    assert not results.exists()
