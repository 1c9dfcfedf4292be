"""Tests that need an NVIDIA GPU (marked ``gpu``; skipped in CI, run on the H200)."""

import pytest
import torch

from fusebench import correctness, launches, sweep
from kernels import get_op

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("variant, shape", [
    ("warp_per_row", (300, 1000)), ("block_per_row", (64, 5000)), ("online", (16, 70001)),
    ("split_row", (3, 300000)), ("online", (8, 1000)), ("block_per_row", (5, 33)),
    # 16-byte sub-warp groups, several rows per group, a partial last block.
    ("warp_per_row", (1001, 128)), ("warp_per_row", (77, 8)), ("warp_per_row", (333, 256)),
    ("warp_per_row", (50, 100)), ("split_row", (1, 1 << 20)), ("split_row", (2, 70000)),
    ("online_l2", (1000, 4096)), ("online_l2", (3, 65536)), ("online_l2", (400, 1001)),
])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_every_cuda_softmax_variant_passes_the_gate(variant, shape, dtype):
    from kernels import cuda_ext

    assert cuda_ext.unavailable_reason() is None
    x = torch.randn(shape, device="cuda", dtype=dtype)
    r = correctness.check(get_op("softmax"), lambda: cuda_ext.softmax_variant(x, variant), x)
    assert r.passed, r.reason


@pytest.mark.parametrize("op, backend, expected", [
    ("gelu", "eager", 9), ("gelu", "torch", 1), ("gelu", "triton", 1), ("gelu", "cuda", 1),
    ("softmax", "eager", 5), ("softmax", "torch", 1), ("softmax", "compile", 1),
])
def test_launches_per_call(op, backend, expected):
    o = get_op(op)
    x = torch.randn(4096, 512, device="cuda")
    fn = o.backends[backend].factory(x)
    fn()
    assert launches.launches_per_call(fn, torch.device("cuda")) == expected


def test_a_gpu_case_has_every_figure():
    op = get_op("gelu")
    dev = torch.device("cuda")
    from fusebench import timing

    rec = sweep.run_case(op, "triton", (1 << 24,), "float32", dev, 4000.0, timing.l2_flush_buffer(dev))
    assert rec.status == "ok", rec.reason
    assert rec.clock == "cuda-events" and rec.launches == 1
    assert 0 < rec.device_time_ms <= rec.device_time_cold_ms * 1.5
    assert rec.wall_time_ms >= rec.device_time_ms * 0.5
    assert rec.clocks.get("sm_clock_mhz", 0) > 0


def test_tf32_matmul_really_runs_in_tf32_and_float32_does_not():
    dev = torch.device("cuda")
    op = get_op("matmul")
    fp32 = sweep.run_case(op, "torch", (1024, 1024), "float32", dev, 4000.0, None, 500.0)
    tf32 = sweep.run_case(op, "torch", (1024, 1024), "tf32", dev, 4000.0, None, 500.0)
    assert fp32.status == tf32.status == "ok", (fp32.reason, tf32.reason)
    assert fp32.max_rel_error < 1e-5 < 1e-4 < tf32.max_rel_error  # TF32's 10-bit mantissa shows
    assert tf32.tflops > 2 * fp32.tflops  # tensor cores
    assert fp32.launches >= 1 and 0 < tf32.pct_of_peak


def test_matrix_peak_is_a_tensor_core_figure():
    from fusebench import metrics

    peak = metrics.measure_matrix_peak(torch.device("cuda"))
    assert peak.dtype == "bfloat16" and peak.n == 8192 and peak.tflops > 100


def test_profile_counts_the_eager_gelu_kernels():
    from fusebench import profiling

    eager, fused = profiling.profile_op(get_op("gelu"), torch.device("cuda"), (1 << 20,), "float32",
                                        ["eager", "torch"], calls=4)
    assert eager.gpu_ops_per_call == 9 and fused.gpu_ops_per_call == 1
    assert 0 < fused.gpu_ms_per_call < eager.gpu_ms_per_call
    assert "Self CUDA" in eager.table or "Self Device" in eager.table or "CUDA total" in eager.table


def test_pitfalls_on_the_gpu_show_both_mistakes():
    from fusebench import pitfalls

    res = pitfalls.measure(torch.device("cuda"), n=2048, rounds=2)
    assert res.understatement > 5 and res.events_ms == pytest.approx(res.synced_ms, rel=0.5)
