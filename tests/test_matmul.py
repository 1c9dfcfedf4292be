"""The compute-bound side of the registry: matmul's declared work, its precision-dependent gate,
the tf32 dtype-axis value, and TFLOP/s / % of peak through the sweep, the report and asv."""

import math
from dataclasses import replace

import pytest
import torch
from fusebench.kernels.matmul import tolerance

from fusebench.asv import asvsuite
from fusebench.errors import SkipCase
from fusebench.measure import correctness, metrics, sweep
from fusebench.ops import get_op
from fusebench.record import Record, Sweep
from fusebench.registry import DTYPES, PRECISIONS, Op, _tf32_matmul
from fusebench.report import summary

MATMUL, GELU = get_op("matmul"), get_op("gelu")
CPU = torch.device("cpu")


def _tf32_round(x: torch.Tensor) -> torch.Tensor:
    """``x`` (float32) rounded to TF32's 10-bit mantissa, as tensor cores read it."""
    bits = x.contiguous().view(torch.int32)
    return ((bits + (1 << 12)) & ~((1 << 13) - 1)).view(torch.float32)


def test_flops_are_declared_from_the_shape():
    assert MATMUL.flops((64, 64)) == 2 * 64 ** 3
    assert MATMUL.flops((8192, 8192)) == 2 * 8192 ** 3 == 1_099_511_627_776
    assert MATMUL.bytes_moved((1024, 1024), torch.bfloat16) == 2 * 1024 * 1024 * 2  # read x, write C
    assert MATMUL.roofline == "compute" and GELU.roofline == "memory" and GELU.flops is None
    with pytest.raises(ValueError, match="square"):
        MATMUL.flops((4, 8))


def test_op_declarations_are_checked():
    with pytest.raises(ValueError, match="must declare flops"):
        Op("toy", reference=lambda x: x, grids={}, roofline="compute")
    with pytest.raises(ValueError, match="roofline 'cache'"):
        Op("toy", reference=lambda x: x, grids={}, roofline="cache")
    with pytest.raises(ValueError, match="unknown dtypes \\['fp8'\\]"):
        Op("toy", reference=lambda x: x, grids={}, dtypes=("float32", "fp8"))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("n", [1, 7, 33, 100])
def test_torch_backend_passes_the_gate(dtype, n):
    x = torch.randn(n, n, generator=torch.Generator().manual_seed(n)).to(DTYPES[dtype])
    r = correctness.check(MATMUL, MATMUL.backends["torch"].factory(x), x, dtype)
    assert r.passed, r.reason
    assert r.tolerance == tolerance((n, n), dtype)


def test_tolerance_grows_with_sqrt_n_and_is_looser_for_tf32_and_bfloat16():
    for p in ("float32", "tf32", "bfloat16"):
        t64, t8192 = tolerance((64, 64), p), tolerance((8192, 8192), p)
        assert t8192 > t64
        assert math.isclose(t8192 - t64, (math.sqrt(8192) - 8) * (t64 - tolerance((1, 1), p)) / 7)
    for n in (64, 8192):
        assert tolerance((n, n), "float32") < tolerance((n, n), "tf32") < tolerance((n, n), "bfloat16")
    # The elementwise ops keep the per-dtype table.
    assert correctness.tolerance(GELU, (1024,), "float32") == correctness.TOLERANCE[torch.float32]


def test_float32_gate_catches_a_matmul_silently_run_in_tf32():
    n = 256
    x = torch.randn(n, n, generator=torch.Generator().manual_seed(3))
    xt = _tf32_round(x)
    as_if_tf32 = lambda: xt @ xt  # noqa: E731
    strict = correctness.check(MATMUL, as_if_tf32, x, "float32")
    assert not strict.passed and "relative error" in strict.reason
    assert 1e-4 < strict.max_rel_error < 1e-3  # TF32's error: about 2^-11
    assert correctness.check(MATMUL, as_if_tf32, x, "tf32").passed


def test_a_wrong_matmul_fails_even_in_bfloat16():
    x = torch.randn(128, 128, generator=torch.Generator().manual_seed(4)).bfloat16()
    r = correctness.check(MATMUL, lambda: x @ x.t(), x, "bfloat16")
    assert not r.passed and r.max_rel_error > 0.5


def test_tf32_is_a_dtype_axis_value_of_float32_storage():
    tf32 = PRECISIONS["tf32"]
    assert tf32.dtype is torch.float32 and tf32.tf32
    assert list(PRECISIONS) == ["float32", "bfloat16", "float16", "tf32"]
    assert MATMUL.dtypes == ("float32", "tf32", "bfloat16")
    with pytest.raises(SkipCase, match="tensor-core mode of NVIDIA GPUs"):
        tf32.bind(MATMUL.backends["torch"].factory, torch.ones(4, 4))


def test_tf32_mode_is_on_in_the_factory_and_each_call_and_restored_after(monkeypatch):
    m = torch.backends.cuda.matmul
    attr = "fp32_precision" if hasattr(m, "fp32_precision") else "allow_tf32"
    before = getattr(m, attr)
    seen = []

    def factory(x):
        seen.append(getattr(m, attr))
        return lambda: seen.append(getattr(m, attr)) or x

    monkeypatch.setattr(type(PRECISIONS["tf32"]), "check_device", lambda self, device: None)
    fn = PRECISIONS["tf32"].bind(factory, torch.ones(2, 2))
    assert getattr(m, attr) == before
    fn()
    assert getattr(m, attr) == before
    on = "tf32" if attr == "fp32_precision" else True
    assert seen == [on, on]
    with _tf32_matmul():
        assert getattr(m, attr) == on
    assert getattr(m, attr) == before
    # A plain dtype adds nothing to the timed call.
    plain = lambda: None  # noqa: E731
    assert PRECISIONS["float32"].bind(lambda x: plain, torch.ones(1)) is plain


def test_cases_follow_each_ops_dtype_axis():
    todo = sweep.cases([GELU, MATMUL], "quick", ["torch"], ["float16", "tf32", "float32"])
    assert [(c[0].name, c[3]) for c in todo] == [
        ("gelu", "float16"), ("gelu", "float32"), ("gelu", "float16"), ("gelu", "float32"),
        ("matmul", "tf32"), ("matmul", "float32"), ("matmul", "tf32"), ("matmul", "float32")]


def test_a_cpu_matmul_case_has_tflops_and_pct_of_peak():
    rec = sweep.run_case(MATMUL, "torch", (64, 64), "float32", CPU, 10.0, None, peak_tflops=0.5)
    assert rec.status == "ok", rec.reason
    assert rec.roofline == "compute" and rec.flops == 2 * 64 ** 3
    assert rec.tflops == metrics.tflops(rec.flops, rec.wall_time_ms) > 0
    assert rec.pct_of_peak == 100 * rec.tflops / 0.5
    assert rec.cache_flag is False  # caches are a memory-bound op's concern
    line = sweep.progress_line(1, 2, rec)
    assert "TFLOP/s" in line and "% of peak" in line and "GB/s" not in line
    # above the run's peak: the line says so, as the tables mark it with ^
    above = "(above the measured matrix peak: the peak was understated or the matmul ran from cache)"
    assert (above in line) == (rec.pct_of_peak > 100)
    assert above in sweep.progress_line(1, 2, replace(rec, pct_of_peak=104.7))
    assert above not in sweep.progress_line(1, 2, replace(rec, pct_of_peak=99.0))


def test_tf32_and_missing_backends_are_skipped_on_the_cpu():
    rec = sweep.run_case(MATMUL, "torch", (64, 64), "tf32", CPU, 10.0, None, 0.5)
    assert rec.status == "skipped" and "tensor-core" in rec.reason
    rec = sweep.run_case(MATMUL, "triton", (64, 64), "float32", CPU, 10.0, None, 0.5)
    assert rec.status == "skipped" and rec.reason == "matmul has no triton backend"


def test_matrix_peak_on_the_cpu():
    peak = metrics.measure_matrix_peak(CPU, n=64, dtypes=(torch.float32,))
    assert peak.n == 64 and peak.dtype == "float32" and peak.timing.clock == "host"
    assert peak.tflops == metrics.tflops(2 * 64 ** 3, peak.timing.median_ms)
    assert metrics.tflops(2e12, 1000.0) == 2.0 and metrics.pct_of_peak(1.0, 4.0) == 25.0


@pytest.mark.gpu
def test_tf32_matmul_really_runs_in_tf32_and_float32_does_not():
    dev = torch.device("cuda")
    op = get_op("matmul")
    fp32 = sweep.run_case(op, "torch", (1024, 1024), "float32", dev, 4000.0, None, 500.0)
    tf32 = sweep.run_case(op, "torch", (1024, 1024), "tf32", dev, 4000.0, None, 500.0)
    assert fp32.status == tf32.status == "ok", (fp32.reason, tf32.reason)
    assert fp32.max_rel_error < 1e-5 < 1e-4 < tf32.max_rel_error  # TF32's 10-bit mantissa shows
    assert tf32.tflops > 2 * fp32.tflops  # tensor cores
    assert fp32.launches >= 1 and 0 < tf32.pct_of_peak


@pytest.mark.gpu
def test_matrix_peak_is_a_tensor_core_figure():
    peak = metrics.measure_matrix_peak(torch.device("cuda"))
    assert peak.dtype == "bfloat16" and peak.n == 8192 and peak.tflops > 100


def test_report_cell_for_a_compute_bound_case():
    rec = Record("matmul", "torch", "8192x8192", "bfloat16", roofline="compute",
                 device_time_ms=2.0, flops=2 * 8192 ** 3, tflops=549.755813888, pct_of_peak=98.6)
    assert summary.cell(rec, None) == "2.00 ms 550 TF 99%"
    table = summary.summary(Sweep({"device": "cuda", "gpu": "NVIDIA H200"}, 4000.0, "default",
                                 [rec], peak_tflops=557.5))
    assert "matrix peak (558 TFLOP/s)" in table and "| 8192x8192 | 2.00 ms 550 TF 99% |" in table


def test_asv_classes_add_compute_metrics_only_where_flops_are_declared():
    mm, gelu = asvsuite.suite_class(MATMUL), asvsuite.suite_class(GELU)
    assert mm.__name__ == "Matmul" and mm.params[2] == ["float32", "tf32", "bfloat16"]
    assert mm.params[1][0] == "64x64" and mm.params[1][-1] == "8192x8192"
    assert hasattr(mm, "track_tflops") and hasattr(mm, "track_pct_of_peak")
    # GELU's parameters and metric names are kept (asv keeps history by them); the graph device
    # time and its IQR, and energy per call, were added.
    assert gelu.params[2] == ["float32", "bfloat16", "float16"]
    assert not hasattr(gelu, "track_tflops")
    assert sorted(m for m in dir(gelu) if m.startswith("track_")) == [
        "track_bandwidth", "track_device_time", "track_device_time_cold", "track_device_time_cold_iqr",
        "track_device_time_graph", "track_device_time_graph_iqr", "track_device_time_iqr",
        "track_energy", "track_pct_of_ceiling", "track_wall_time", "track_wall_time_iqr"]
    assert set(dir(mm)) - set(dir(gelu)) >= {"track_tflops", "track_pct_of_peak"}
    bench = mm()
    bench.setup({"records": {("matmul", "torch", "64x64", "float32"): {
        "status": "ok", "tflops": 0.25, "pct_of_peak": 50.0}}}, "torch", "64x64", "float32")
    assert bench.track_tflops(None, "torch", "64x64", "float32") == 0.25
    assert bench.track_pct_of_peak(None, "torch", "64x64", "float32") == 50.0
