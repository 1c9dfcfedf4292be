"""RMSNorm: its reference, traffic, eager/torch/compile backends and the Triton kernel.

The Triton kernel runs in the interpreter (``TRITON_INTERPRET=1``) on small CPU tensors when no
GPU is present; on a GPU every backend also passes the gate on the default grid's shapes (gpu).
"""

import os

import pytest
import torch
import torch.nn.functional as F

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

from fusebench.kernels import rmsnorm
from kernelcheck import DEVICE, DTYPES, randn

from fusebench.errors import SkipCase
from fusebench.measure import correctness
from fusebench.measure.inputs import make_input
from fusebench.ops import get_op

OP = get_op("rmsnorm")


def test_reference_is_the_papers_formula():
    x = randn((5, 300), torch.float64, scale=2.0)
    w = rmsnorm.weight_for(x)
    expect = F.rms_norm(x, (300,), w, rmsnorm.EPS)
    torch.testing.assert_close(OP.reference(x), expect, rtol=1e-12, atol=1e-12)
    # the weight is not all ones (a kernel that drops it must fail) and the same for every caller
    assert w.min() < 0.8 and w.max() > 1.2
    assert torch.equal(rmsnorm.weight_for(x.float()).double(), rmsnorm.weight_for(x.float()).double())


def test_traffic_counts_the_weight_once():
    assert OP.bytes_moved((16384, 4096), torch.bfloat16) == (2 * 16384 + 1) * 4096 * 2
    assert OP.bytes_moved((2048, 32768), torch.float32) == (2 * 2048 + 1) * 32768 * 4


def test_grids_keep_every_shape_in_default():
    default = set(OP.grids["default"])
    for name, shapes in OP.grids.items():
        assert set(shapes) <= default, name
    assert OP.headline in default


@pytest.mark.parametrize("backend", ["eager", "torch"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_unfused_and_builtin_pass_the_gate(backend, dtype):
    x = make_input((64, 1024), dtype, DEVICE)
    fn = OP.get_backend(backend).factory(x)
    result = correctness.check(OP, fn, x)
    assert result.passed, result.reason


def test_a_backend_that_drops_the_weight_fails_the_gate():
    x = make_input((64, 1024), torch.float32, DEVICE)
    no_weight = lambda: F.rms_norm(x, (1024,), None, rmsnorm.EPS)  # noqa: E731
    result = correctness.check(OP, no_weight, x)
    assert not result.passed and "relative error" in result.reason


@pytest.mark.slow
def test_compile_passes_the_gate_or_is_skipped_with_a_reason():
    x = make_input((64, 1024), torch.float32, DEVICE)
    try:
        fn = OP.get_backend("compile").factory(x)
    except SkipCase as skip:
        assert "torch.compile failed" in str(skip)
        return
    assert correctness.check(OP, fn, x).passed


triton = pytest.importorskip("triton")
from fusebench.kernels.rmsnorm import triton as tr  # noqa: E402


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 1), (3, 7), (9, 1000), (2, 3, 64), (4, 4099)])
def test_triton_matches_reference(shape, dtype):
    x = randn(shape, dtype, scale=2.0)
    y = tr.rmsnorm(x, rmsnorm.weight_for(x), rmsnorm.EPS)
    assert y.dtype == dtype and y.shape == x.shape and y.is_contiguous()
    tol = correctness.TOLERANCE[dtype]
    assert correctness.relative_error(y, OP.reference(x)) <= tol


@pytest.mark.parametrize("forced", [tr.RmsNormPlan(True, 64, 1, 4), tr.RmsNormPlan(False, 256, 4, 4)])
def test_triton_plans_agree(forced):
    x = randn((6, 200), torch.float32, scale=2.0)
    y = tr.rmsnorm(x, rmsnorm.weight_for(x), rmsnorm.EPS, _plan=forced)
    assert correctness.relative_error(y, OP.reference(x)) <= 1e-5


def test_triton_plan_rules():
    # many short rows: several rows per program, while every SM keeps MIN_PROGRAMS_PER_SM programs
    p = tr.plan(65536, 1024, 2, 132)
    assert not p.looped and p.block == 1024 and p.rows_per_program == 8
    assert tr.plan(600, 1024, 2, 132).rows_per_program == 1
    assert tr.plan(4, 40000, 4, 132).looped
    with pytest.raises(ValueError, match="bad arguments"):
        tr.plan(0, 1024, 4, 132)


def test_triton_refuses_a_mismatched_weight():
    x = randn((2, 16), torch.float32, scale=2.0)
    with pytest.raises(ValueError, match="does not match"):
        tr.rmsnorm(x, torch.ones(8, device=DEVICE), rmsnorm.EPS)


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["eager", "torch", "compile", "triton", "liger", "quack"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_every_backend_passes_the_gate_on_the_default_grid(backend, dtype):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    for shape in OP.grids["default"]:
        x = make_input(shape, dtype, "cuda")
        try:
            fn = OP.get_backend(backend).factory(x)
        except SkipCase as skip:  # a reference library not installed, or refusing the shape
            pytest.skip(f"{backend} {shape}: {skip}")
        result = correctness.check(OP, fn, x)
        assert result.passed, (shape, result.reason)
