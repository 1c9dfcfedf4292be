"""The gate itself: it must fail broken backends, with the reason, and never raise."""

import torch

from fusebench.measure import correctness
from fusebench.ops import get_op

GELU, SOFTMAX = get_op("gelu"), get_op("softmax")


def test_a_correct_backend_passes_with_a_small_error():
    x = torch.randn(1000)
    r = correctness.check(GELU, lambda: GELU.backends["torch"].factory(x)(), x)
    assert r.passed and r.max_rel_error < 1e-6 and r.reason == ""


def test_unwritten_elements_are_caught_by_the_poison():
    x = torch.randn(64)
    out = torch.empty_like(x)

    def lazy():  # writes every element but the last into a reused buffer
        out[:-1] = torch.nn.functional.gelu(x[:-1], approximate="tanh")
        return out

    r = correctness.check(GELU, lazy, x)
    assert not r.passed and "NaN" in r.reason


def test_wrong_values_fail_with_the_error_and_tolerance():
    x = torch.randn(100)
    r = correctness.check(GELU, lambda: torch.nn.functional.gelu(x), x)  # exact erf GELU, not tanh
    assert not r.passed
    assert r.max_rel_error > r.tolerance == correctness.TOLERANCE[torch.float32]
    assert "relative error" in r.reason


def test_an_exception_becomes_the_reason():
    def broken():
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    r = correctness.check(GELU, broken, torch.randn(4))
    assert not r.passed and r.reason.startswith("RuntimeError: CUDA error: an illegal memory")


def test_wrong_shape_or_dtype_fails():
    x = torch.randn(8)
    assert "expected" in correctness.check(GELU, lambda: x.double(), x).reason
    assert "expected" in correctness.check(GELU, lambda: x[:4], x).reason


def test_nan_never_passes_even_when_the_reference_is_nan():
    x = torch.tensor([1.0, float("nan")])
    r = correctness.check(GELU, lambda: torch.nn.functional.gelu(x, approximate="tanh"), x)
    assert not r.passed


def test_softmax_invariant_rows_sum_to_one():
    x = torch.randn(4, 50)
    y = torch.softmax(x, -1)
    assert SOFTMAX.invariant(y, x) is None
    assert "sums to 1" in SOFTMAX.invariant(y * 1.01, x)
    assert "outside [0, 1]" in SOFTMAX.invariant(y - 0.5, x)


def test_relative_error_is_normwise():
    ref = torch.tensor([10.0, 1.0], dtype=torch.float64)
    assert correctness.relative_error(torch.tensor([10.0, 2.0]), ref) == 0.1
