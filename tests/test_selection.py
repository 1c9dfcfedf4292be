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


def test_the_reason_named_is_the_real_cause_not_an_op_without_such_a_backend():
    """Issue 54, item 7: DTYPES=tf32 on a CPU ended naming "matmul has no eager backend"."""
    tf32 = "tf32 is a tensor-core mode of NVIDIA GPUs (sm_80+); on the CPU it is float32"
    no_eager = "matmul has no eager backend"
    records = [Record("matmul", backend, "64x64", "tf32", status="skipped", reason=why)
               for backend, why in [("eager", no_eager)] * 7 + [("torch", tf32)] * 4]
    with pytest.raises(UsageError) as err:
        require_measured(records)
    assert str(err.value) == ("nothing measured: 11 case(s) skipped, 0 failed (most common reason, 4 "
                              f"case(s): {tf32}); nothing stored")


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


@pytest.mark.skipif(torch.cuda.is_available(), reason="the cuda backend measures on a GPU")
@pytest.mark.parametrize("args, skipped", [
    (("--backends", "cuda"), "36 skipped (18 cuda: needs a CUDA GPU; 18 cuda: the op has no such backend)"),
    # matmul's 4 cpu shapes: torch's 4 skipped for the dtype, every other backend of the axis for the op
    (("--dtypes", "tf32"), f"{4 * len(BACKENDS)} skipped (4 torch: tf32 is a tensor-core mode of NVIDIA "
                           f"GPUs (sm_80+); on the CPU it is float32; {4 * (len(BACKENDS) - 1)} of several "
                           "backends: the op has no such backend)"),
])
def test_bench_that_list_knows_measures_nothing_says_so_before_measuring(args, skipped, tmp_path):
    """Issue 54, item 7: make bench BACKENDS=cuda on the CPU printed 24 lines (a matrix peak measured,
    18 skip lines) before "nothing measured"; DTYPES=tf32 named "matmul has no eager backend". One
    line, before anything is measured (no peak, no build), the real cause first; exit 2."""
    results = tmp_path / "results"
    out = bench(*args, "--results", str(results), "--no-publish", tmp_path=tmp_path)
    assert out.returncode == 2, out.stderr[-2000:]
    n = skipped.split()[0]
    assert out.stderr == (f"bench: error: nothing to measure here: {n} case(s) of the cpu grid: 0 to build "
                          f"and time, {skipped}; nothing measured, nothing stored (make list with the same "
                          "variables shows each case and why)\n")
    assert not results.exists()
