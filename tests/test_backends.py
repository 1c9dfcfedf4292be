"""Every registered backend of every op passes the correctness gate on awkward inputs (CPU here:
Triton under its interpreter, the cuda backend skipped with its reason; everything on a GPU)."""

import pytest
import torch

from fusebench.errors import SkipCase
from fusebench.measure import correctness
from fusebench.ops import OPS

# Memory-bound ops (elementwise, row-wise) take any shape; compute-bound ones (matmul: square
# matrices) have their own shape tests in tests/test_matmul.py.
# torch.compile's first build of an op takes seconds on the CPU: those cases are make test-slow's.
CASES = [pytest.param(op, b, id=f"{op.name}-{b}", marks=[pytest.mark.slow] if b == "compile" else [])
         for op in OPS.values() if op.roofline == "memory" for b in op.backends]

# Shapes that force awkward paths: odd lengths, rows that are not powers of two, 3-D, one row.
SHAPES = [(7,), (3, 100), (2, 5, 33), (1, 1000)]


def _build(op, backend, x):
    try:
        return op.backends[backend].factory(x)
    except SkipCase as exc:
        pytest.skip(str(exc))


@pytest.mark.parametrize("op, backend", CASES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_gate_passes_on_awkward_shapes(op, backend, dtype, device):
    if backend == "compile" and dtype != torch.float32:
        pytest.skip("compile on the CPU is slow: float32 covers its code path here")
    for shape in SHAPES:
        x = torch.randn(shape, dtype=dtype, generator=torch.Generator().manual_seed(1)).to(device)
        result = correctness.check(op, _build(op, backend, x), x)
        assert result.passed, f"{shape}: {result.reason}"
        assert result.max_rel_error <= result.tolerance


@pytest.mark.parametrize("op, backend", CASES)
def test_non_contiguous_input(op, backend, device):
    base = torch.randn(40, 24, generator=torch.Generator().manual_seed(2)).to(device)
    x = base.t()  # (24, 40), last dimension strided
    assert not x.is_contiguous()
    result = correctness.check(op, _build(op, backend, x), x)
    assert result.passed, result.reason


@pytest.mark.parametrize("op, backend", CASES)
@pytest.mark.parametrize("shape", [(0,), (0, 16), (4, 0)], ids=str)
def test_empty_input_gives_empty_output_like_the_builtin(op, backend, shape, device):
    if backend == "compile":
        pytest.skip("torch.compile specializes on size 0/1; empty input is not a compiled case")
    x = torch.empty(shape, device=device)
    fn = _build(op, backend, x)
    if (op.name, backend) == ("softmax", "eager") and shape[-1] == 0:
        # Documented refusal: op-by-op softmax takes amax over the row, which has no elements.
        with pytest.raises(IndexError, match="non-zero size"):
            fn()
        return
    y = fn()
    assert y.shape == x.shape and y.dtype == x.dtype


@pytest.mark.parametrize("op", OPS.values(), ids=lambda o: o.name)
def test_cuda_backend_is_skipped_with_a_reason_on_the_cpu(op):
    if "cuda" not in op.backends:
        pytest.skip("no cuda backend registered")
    with pytest.raises(SkipCase, match=r"\w"):
        op.backends["cuda"].factory(torch.ones(4))


def test_first_line_drops_a_librarys_terminal_colours():
    from fusebench.errors import first_line

    exc = RuntimeError("\x1b[91m\x1b[1merror\x1b[0m[CUDA_LAUNCH_INVALID_CONFIG]: launch failed\nmore")
    assert first_line(exc) == "RuntimeError: error[CUDA_LAUNCH_INVALID_CONFIG]: launch failed"
