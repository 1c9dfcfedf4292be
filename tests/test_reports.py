"""The lecture's reports on the CPU at tiny sizes: pitfalls, profile, MLP scaling, their storage
and their command lines (bad input: one line, exit 2)."""

import json
import math
import subprocess
import sys

import pytest
import torch

from fusebench.lecture import mlp, pitfalls, reports, torch_profile
from fusebench.ops import OPS, get_op
from fusebench.paths import PROJECT_ROOT

VALID_OPS = ", ".join(OPS)  # the registry's order

CPU = torch.device("cpu")


def in_process(name, *args, monkeypatch, capsys):
    """Run ``fusebench <name>`` with ``args`` in this process (no torch import to wait for):
    returns ``(exit status, stdout, stderr)``."""
    from fusebench import commands

    with pytest.raises(SystemExit) as exc:
        commands.main([name, *args])
    captured = capsys.readouterr()
    return exc.value.code, captured.out, captured.err


def script(name, *args, tmp_path=None):
    env = {"FUSEBENCH_MACHINE": "testbox", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path or PROJECT_ROOT)}
    return subprocess.run([sys.executable, "-m", "fusebench", name, *args], cwd=PROJECT_ROOT,
                          capture_output=True,
                          text=True, timeout=300, env=env)


# --- pitfalls -------------------------------------------------------------------------------------

def test_pitfalls_on_the_cpu_measure_the_first_call_and_explain_the_sync():
    res = pitfalls.measure(get_op("matmul"), CPU, n=48, launches=2, rounds=1, warm_budget_s=0.0)
    assert res.device == "cpu" and res.n == 48 and res.warm_repeats == 5
    assert res.first_call_ratio == res.first_call_ms / res.warm_median_ms
    assert res.first_call_ms > 0 and res.warm_median_ms > 0
    assert res.nosync_ms is res.events_ms is res.understatement is None
    assert res.note == pitfalls.CPU_NOTE
    text = pitfalls.render(res, "CPU here")
    assert f"overstates the steady-state time {res.first_call_ratio:.1f}x" in text
    assert "no asynchronous queue" in text and "CUDA events" not in text


def test_pitfalls_rendering_of_gpu_figures():
    res = pitfalls.PitfallsResult("cuda", 4096, "float32", 10, 5, first_call_ms=250.0, warm_median_ms=2.5,
                                  warm_iqr_ms=0.01, warm_repeats=50, first_call_ratio=100.0,
                                  nosync_ms=0.01, synced_ms=2.52, events_ms=2.5, understatement=250.0)
    text = pitfalls.render(res, "NVIDIA H200")
    assert "overstates the steady-state time 100.0x" in text
    assert "understates the time 250x" in text
    # 2 * 4096^3 flops in 2.5 ms = 55 TFLOP/s; the unsynchronized clock implies 13744 TFLOP/s.
    assert "| CUDA events | 2.5000 | 55.0 |" in text
    assert "| host clock, no synchronize (wrong) | 0.0100 | 13743.9 |" in text


def test_pitfalls_refuse_bad_sizes():
    with pytest.raises(ValueError, match=">= 1"):
        pitfalls.measure(get_op("matmul"), CPU, n=0)


@pytest.mark.gpu
def test_pitfalls_on_the_gpu_show_both_mistakes():
    res = pitfalls.measure(get_op("matmul"), torch.device("cuda"), n=2048, rounds=2)
    assert res.understatement > 5 and res.events_ms == pytest.approx(res.synced_ms, rel=0.5)


@pytest.mark.slow
def test_pitfalls_script_stores_the_report(tmp_path):
    out = script("pitfalls", "--n", "32", "--rounds", "1", "--reports", str(tmp_path), tmp_path=tmp_path)
    assert out.returncode == 0, out.stderr
    (json_file,) = (tmp_path / "testbox").glob("pitfalls-*.json")
    data = json.loads(json_file.read_text())
    assert data["report"] == "pitfalls" and data["environment"]["device"] == "cpu"
    assert data["environment"]["git_commit"][:12] in json_file.name
    r = data["results"]
    assert r["n"] == 32 and math.isclose(r["first_call_ratio"], r["first_call_ms"] / r["warm_median_ms"])
    assert json_file.with_suffix(".md").read_text() == out.stdout
    assert not list(tmp_path.rglob("*.tmp"))


@pytest.mark.parametrize("args, message", [
    (["--dtype", "float16"],
     "pitfalls: error: unknown dtype 'float16'; valid dtypes: float32, tf32, bfloat16"),
    (["--dtype", "tf32"], "pitfalls: error: dtype tf32 cannot run here: tf32 is a tensor-core mode"),
])
def test_pitfalls_bad_input(args, message, monkeypatch, capsys):
    code, out, err = in_process("pitfalls", "--no-save", *args, monkeypatch=monkeypatch, capsys=capsys)
    assert code == 2 and err.startswith(message)
    assert len(err.strip().splitlines()) == 1 and out == ""


# --- profile --------------------------------------------------------------------------------------

def test_profile_shows_the_eager_primitives_against_one_fused_op():
    gelu = get_op("gelu")
    profiles = torch_profile.profile_op(gelu, CPU, (4096,), "float32", ["eager", "torch", "cuda"], calls=3)
    eager, fused, cuda = profiles
    counts = {r["name"]: r["count"] for r in eager.rows}
    # 6 multiplies, 2 adds, 1 tanh per call (the 9 launches of eager GELU on a GPU).
    assert counts["aten::mul"] == 6 * 3 and counts["aten::add"] == 2 * 3 and counts["aten::tanh"] == 3
    assert {r["name"]: r["count"] for r in fused.rows}["aten::gelu"] == 3
    assert eager.status == fused.status == "ok" and eager.cpu_ms_per_call > 0
    assert eager.gpu_ops_per_call is None  # nothing runs on a GPU here
    assert cuda.status == "skipped" and "CUDA GPU" in cuda.reason
    assert "aten::tanh" in eager.table and "# of Calls" in eager.table
    text = torch_profile.render(gelu, (4096,), "float32", profiles, "CPU here", cuda=False)
    assert "| cuda | skipped: needs a CUDA GPU |" in text and "## eager" in text and "## cuda" not in text


def test_profile_defaults_and_failures():
    assert torch_profile.default_shape(get_op("gelu"), CPU) == (1 << 20,)
    assert torch_profile.default_shape(get_op("matmul"), CPU) == (512, 512)
    from fusebench.registry import Op

    toy = Op("toy", reference=lambda x: x.double() * 2, grids={"cpu": [(8,)]})
    toy.backend("eager")(lambda x: (lambda: x * 3))
    (bad,) = torch_profile.profile_op(toy, CPU, (8,), "float32", ["eager"])
    assert bad.status == "failed" and bad.reason.startswith("correctness gate: relative error")


@pytest.mark.gpu
def test_profile_counts_the_eager_gelu_kernels():
    eager, fused = torch_profile.profile_op(get_op("gelu"), torch.device("cuda"), (1 << 20,), "float32",
                                        ["eager", "torch"], calls=4)
    assert eager.gpu_ops_per_call == 9 and fused.gpu_ops_per_call == 1
    assert 0 < fused.gpu_ms_per_call < eager.gpu_ms_per_call
    assert "Self CUDA" in eager.table or "Self Device" in eager.table or "CUDA total" in eager.table


@pytest.mark.slow
def test_profile_script_stores_the_report(tmp_path):
    out = script("profile", "--op", "matmul", "--shape", "64x64", "--calls", "2",
                 "--reports", str(tmp_path), tmp_path=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "aten::mm" in out.stdout and "| torch |" in out.stdout
    (json_file,) = (tmp_path / "testbox").glob("profile-matmul-*.json")
    data = json.loads(json_file.read_text())
    assert data["params"] == {"op": "matmul", "shape": "64x64", "dtype": "float32"}
    assert [r["backend"] for r in data["results"]] == ["torch"]


@pytest.mark.parametrize("args, message", [
    (["--op", "gleu"], f"profile: error: unknown op 'gleu'; valid ops: {VALID_OPS}"),
    (["--op", "gelu", "--backends", "cudnn"], "profile: error: unknown backend 'cudnn'; valid backends:"),
    (["--op", "gelu", "--dtype", "tf32"], "profile: error: unknown dtype 'tf32' for gelu; valid dtypes: "
                                          "float32, bfloat16, float16"),
    (["--op", "matmul", "--shape", "4x8"], "profile: error: matmul takes a square n x n input"),
    (["--op", "gelu", "--shape", "12xx"], "profile: error: bad shape '12xx'"),
])
def test_profile_bad_input(args, message, monkeypatch, capsys):
    code, out, err = in_process("profile", "--no-save", *args, monkeypatch=monkeypatch, capsys=capsys)
    assert code == 2 and err.startswith(message), err
    assert len(err.strip().splitlines()) == 1 and out == ""


@pytest.mark.slow
def test_profile_bad_op_from_make_is_one_line_and_exit_2():
    out = subprocess.run(["make", "-s", f"PYTHON={sys.executable}", "DEPS=", "profile", "OP=gleu"],
                         cwd=PROJECT_ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert out.stderr.splitlines()[0] == f"profile: error: unknown op 'gleu'; valid ops: {VALID_OPS}"


# --- MLP --------------------------------------------------------------------------------------------

def test_linear_fit():
    fit = mlp.linear_fit([1, 2, 4, 8], [3.0, 5.0, 9.0, 17.0])  # 1 + 2x
    assert math.isclose(fit.slope_ms, 2.0) and math.isclose(fit.intercept_ms, 1.0) and fit.r2 == 1.0
    assert mlp.linear_fit([1, 2, 3], [1.0, 3.0, 2.0]).r2 == pytest.approx(0.25)
    with pytest.raises(ValueError, match="two distinct"):
        mlp.linear_fit([2, 2], [1.0, 2.0])


def test_a_fixed_cost_below_zero_within_its_interval_is_not_marked():
    """A trial's CPU `make mlp` flagged a -0.038 ms intercept of a fit with R² 0.9994: a nearly
    proportional cost crosses zero a little below it; only beyond its 95 % interval is it marked."""
    from scipy import stats

    xs, ys = [1, 2, 4, 8], [1.97, 4.02, 7.98, 16.03]
    fit = mlp.linear_fit(xs, ys)
    ref = stats.linregress(xs, ys)
    assert fit.intercept_ms == pytest.approx(ref.intercept) and fit.intercept_ms < 0
    assert fit.intercept_ci_ms == pytest.approx(stats.t.ppf(0.975, 2) * ref.intercept_stderr)
    near = mlp.AxisResult("steps", xs, ys, [0.0] * 4, fit)
    assert mlp.impossible(near) == []
    assert (f"intercept {fit.intercept_ms:.4g} ± {fit.intercept_ci_ms:.2g} (95 %) ms"
            in mlp.render(mlp.MLPConfig(dim=8, layers=1, batch=4, steps=1), [near], "float32", "here"))
    # a line -1 + 2x through four exact points: below zero beyond an interval of zero width
    exact = mlp.AxisResult("steps", xs, [1.0, 3.0, 7.0, 15.0], [0.0] * 4,
                           mlp.linear_fit(xs, [1.0, 3.0, 7.0, 15.0]))
    assert mlp.impossible(exact) == ["a negative fixed cost (-1 ms, beyond its 95 % interval of ±0 ms)"]
    # two points leave no residual: any negative intercept is marked
    two = mlp.AxisResult("steps", [1, 2], [1.0, 3.0], [0.0] * 2, mlp.linear_fit([1, 2], [1.0, 3.0]))
    assert math.isnan(two.fit.intercept_ci_ms) and mlp.impossible(two) == ["a negative fixed cost (-1 ms)"]


def test_figures_that_cannot_be_true_are_marked_in_the_report():
    """A new user's CPU run showed batch 256 in 0.27x batch 32's time and a fit of -0.24 ms per
    sample with no mark (the host was busy)."""
    base = mlp.MLPConfig(dim=8, layers=1, batch=32, steps=1)
    values, times = [32, 64, 256], [73.0, 80.0, 19.7]
    disturbed = mlp.AxisResult("batch", values, times, [1.0] * 3, mlp.linear_fit(values, times))
    fine = mlp.AxisResult("steps", [1, 2], [1.0, 2.0], [0.0, 0.0], mlp.linear_fit([1, 2], [1.0, 2.0]))
    assert mlp.impossible(fine) == []
    assert mlp.impossible(disturbed)[0] == "batch 256 took 19.700 ms, less than 32's 73.000 ms"
    assert mlp.impossible(disturbed)[1].startswith("a negative time per unit")
    text = mlp.render(base, [fine, disturbed], "float32", "CPU here")
    assert "| 256 | 19.700 | 0.27 ! | 8.00 |" in text and text.count("Not physically possible") == 1


def test_a_configuration_whose_repeats_disagree_is_marked_contaminated():
    """Issue 54, item 8: `make mlp` on a busy host reported 0.83 ms and 124 ms for the base
    configuration (timed in two sweeps), R² 0.995, and no contamination word."""
    base = mlp.MLPConfig(dim=128, layers=2, batch=64, steps=2)

    def axis(name, values, times, iqr):
        return mlp.AxisResult(name, values, times, iqr, mlp.linear_fit(values, times))

    steps = axis("steps", [1, 2, 4, 8], [0.42, 0.83, 1.66, 3.3], [0.01] * 4)
    layers = axis("layers", [1, 2, 4, 8], [62.0, 124.0, 247.0, 497.0], [1.0, 1.0, 200.0, 2.0])
    assert steps.fit.r2 > 0.99 and layers.fit.r2 > 0.99
    wide = mlp.disagreements(base, [steps, layers])
    assert wide == ["the base configuration took 0.830 ms in the steps sweep, 124.000 ms in the layers sweep",
                    "layers 4: runs spread 200.000 ms (IQR) around 247.000 ms"]
    text = mlp.render(base, [steps, layers], "float32", "CPU here")
    assert "| 4 | 247.000 | 3.98 noisy | 4.00 |" in text
    assert text.count("**! Contaminated**: repeats of one configuration disagree (the base configuration "
                      "took 0.830 ms") == 1
    assert mlp.as_data(base, [steps, layers], "float32")["contaminated"] == wide
    agree = axis("layers", [1, 2, 4, 8], [0.42, 0.84, 1.7, 3.3], [0.01] * 4)
    assert mlp.disagreements(base, [steps, agree]) == [] and "Contaminated" not in mlp.render(
        base, [steps, agree], "float32", "CPU here")


def test_the_training_step_trains():
    run = mlp.make_run(mlp.MLPConfig(dim=16, layers=2, batch=8, steps=1), CPU)
    first = run().item()
    for _ in range(50):
        last = run().item()
    assert last < first


def test_mlp_sweep_at_tiny_sizes_and_its_report(tmp_path):
    base = mlp.MLPConfig(dim=8, layers=1, batch=4, steps=1)
    base_out, results = mlp.run_all(CPU, base=base, axes={"steps": [1, 3], "layers": [1, 2]},
                                    budget_s=0.0, max_repeats=3)
    assert base_out == base and [r.axis for r in results] == ["steps", "layers"]
    steps = results[0]
    assert steps.values == [1, 3] and len(steps.time_ms) == 2 and all(t > 0 for t in steps.time_ms)
    assert math.isclose(steps.fit.slope_ms, (steps.time_ms[1] - steps.time_ms[0]) / 2)
    text = mlp.render(base, results, "float32", "CPU here")
    assert "| 3 | " in text and "ms per step" in text and "ms per layer" in text
    with pytest.raises(ValueError, match="unknown axis"):
        mlp.sweep_axis(base, "width", [1, 2], CPU)
    json_path, md_path = reports.save("mlp", mlp.as_data(base, results, "float32"), text,
                                      {"git_commit": "abcdef0123456789"}, root=tmp_path, machine="box")
    assert json_path == tmp_path / "box" / "mlp-abcdef012345.json" and md_path.suffix == ".md"
    data = json.loads(json_path.read_text())
    assert data["params"]["base"] == {"dim": 8, "layers": 1, "batch": 4, "steps": 1}
    assert data["results"][0]["fit"]["r2"] == steps.fit.r2


def test_mlp_bad_input(monkeypatch, capsys):
    code, out, err = in_process("mlp", "--no-save", "--dtype", "fp8", monkeypatch=monkeypatch, capsys=capsys)
    assert code == 2 and out == ""
    assert err.strip() == "mlp: error: unknown dtype 'fp8'; valid dtypes: float32, tf32, bfloat16"


def test_report_paths_without_a_commit(tmp_path):
    assert reports.report_paths("pitfalls", "h200", None, tmp_path) == (
        tmp_path / "h200" / "pitfalls-nocommit.json", tmp_path / "h200" / "pitfalls-nocommit.md")
    env = {"git_commit": "abcdef0123456789", "git_dirty": True, "torch": "2.11"}
    assert reports.where(env) == "CPU (?, ? cores), torch 2.11, commit abcdef012345 (dirty)"
