"""Plots from the committed H200 results and from synthetic ones."""

import json
import os
import shlex
import subprocess
import sys

import pytest
from asvfiles import main_commits, write_result
from committed import committed_folder

from fusebench.ops import OPS
from fusebench.paths import PROJECT_ROOT
from fusebench.registry import shape_label
from fusebench.report import marks, plots
from fusebench.storage import results, runrecord

H200 = committed_folder("results")


@pytest.fixture(scope="module")
def h200():
    """The newest stored H200 run with softmax (it has GELU too; a newer run may have GELU only)."""
    return results.load_latest(H200, "h200", "suite.Softmax.")


def test_headline_shapes_are_in_the_default_grids():
    assert shape_label(OPS["gelu"].headline) == "16384x16384"
    assert shape_label(OPS["softmax"].headline) == "8192x16384"
    for op in OPS.values():
        assert tuple(op.headline) in [tuple(s) for s in op.grids["default"]]


def test_ceiling_is_derived_from_bandwidth_and_pct(h200):
    key = ("torch", "16384x16384", "float32")
    bw = h200.values["suite.Gelu.track_bandwidth"][key]
    pct = h200.values["suite.Gelu.track_pct_of_ceiling"][key]
    ceiling = plots.ceiling_gbps(h200, OPS["gelu"])
    assert ceiling == pytest.approx(bw / (pct / 100), rel=1e-6)
    assert 3000 < ceiling < 5000  # an H200's HBM3e copy bandwidth, GB/s
    # one per run: the stored commit was measured in two runs of some ops (softmax, then the
    # rest), each with its own copy ceiling, the same within the run-to-run spread
    assert plots.ceiling_gbps(h200, OPS["softmax"]) == pytest.approx(ceiling, rel=0.01)


def test_bandwidth_series_by_bytes_moved(h200):
    series = plots.bandwidth_series(h200, OPS["softmax"], "bfloat16")
    bw = h200.values["suite.Softmax.track_bandwidth"]
    measured = {b for (b, _, d), v in bw.items() if d == "bfloat16" and v is not None and v == v}
    assert {"eager", "torch", "compile", "triton", "cuda"} <= measured  # the latest run's backends
    assert set(series) == measured
    sizes = [p[0] for p in series["eager"]]
    assert sizes == sorted(sizes) and len(sizes) == len(OPS["softmax"].grids["default"])
    assert (2 * 8192 * 16384 * 2, h200.values["suite.Softmax.track_bandwidth"][
        ("eager", "8192x16384", "bfloat16")], "8192x16384") in series["eager"]


def test_speedup_over_eager_at_the_headline(h200):
    metric, table = plots.speedups(h200, OPS["softmax"])
    t = h200.values["suite.Softmax.track_device_time"]
    assert metric == "track_device_time"
    assert table["eager"]["float32"] == 1.0
    assert table["triton"]["float16"] == pytest.approx(t[("eager", "8192x16384", "float16")]
                                                       / t[("triton", "8192x16384", "float16")])
    assert table["triton"]["float16"] > 2  # fused beats eager's five passes over memory


@pytest.mark.slow
def test_write_plots_makes_pngs(tmp_path):
    written = plots.write_plots(H200, tmp_path, [OPS["gelu"]], ["h200"])
    assert sorted(p.relative_to(tmp_path).as_posix() for p in written) == [
        "h200/gelu-bandwidth.png", "h200/gelu-energy.png", "h200/gelu-speedup.png"]
    for p in written:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 10_000


def test_missing_cases_are_left_out(tmp_path):
    commit = main_commits(1)[0]
    axes = [["eager", "triton"], ["16384x16384"], ["float32"]]
    key_e, key_t = ("eager", "16384x16384", "float32"), ("triton", "16384x16384", "float32")
    write_result(tmp_path, "box", commit, {"suite.Gelu.track_device_time": {key_e: 2e-3, key_t: None},
                                           "suite.Gelu.track_bandwidth": {key_e: 1000.0}}, axes)
    run = results.load_latest(tmp_path, "box")
    metric, table = plots.speedups(run, OPS["gelu"])
    assert table["eager"]["float32"] == 1.0 and table["triton"]["float32"] is None  # failed: no bar
    assert table["cuda"]["bfloat16"] is None
    assert plots.ceiling_gbps(run, OPS["gelu"]) is None  # no % of ceiling stored
    assert list(plots.bandwidth_series(run, OPS["gelu"], "float32")) == ["eager"]
    assert plots.bandwidth_figure(run, OPS["softmax"]) is None  # nothing stored for softmax
    assert sorted(p.name for p in plots.write_plots(tmp_path, tmp_path / "out", [OPS["gelu"]])) == [
        "gelu-bandwidth.png", "gelu-speedup.png"]


def test_a_compute_bound_op_gets_a_tflops_figure_against_the_matrix_peak(tmp_path):
    commit = main_commits(1)[0]
    axes = [["torch"], ["64x64", "8192x8192"], ["float32", "tf32", "bfloat16"]]
    small, large = ("torch", "64x64", "bfloat16"), ("torch", "8192x8192", "bfloat16")
    write_result(tmp_path, "box", commit, {
        "suite.Matmul.track_tflops": {small: 0.1, large: 550.0},
        "suite.Matmul.track_pct_of_peak": {small: 0.1 / 5.5, large: 100.0}}, axes)
    run = results.load_latest(tmp_path, "box")
    mm = OPS["matmul"]
    assert plots.ceiling_gbps(run, mm) == pytest.approx(550.0)  # the matrix peak, TFLOP/s
    assert plots.bandwidth_series(run, mm, "bfloat16") == {
        "torch": [(2 * 64 ** 3, 0.1, "64x64"), (2 * 8192 ** 3, 550.0, "8192x8192")]}
    assert plots.speedups(run, mm)[1]["torch"]["bfloat16"] is None  # no eager matmul: no bar
    assert [p.name for p in plots.write_plots(tmp_path, tmp_path / "out", [mm])] == ["matmul-tflops.png"]


def test_a_cpus_small_peak_keeps_its_digits_on_the_plot(tmp_path):
    """Issue 29: the CPU's plot labelled its line 'matrix peak (0 TFLOP/s)'; a % of peak above 100
    is drawn as a hollow circle."""
    commit = main_commits(1)[0]
    axes = [["torch"], ["64x64", "256x256"], ["float32", "tf32", "bfloat16"]]
    small, big = ("torch", "64x64", "float32"), ("torch", "256x256", "float32")
    write_result(tmp_path, "cpu-x86_64", commit, {
        "suite.Matmul.track_tflops": {small: 0.0084, big: 0.11},
        "suite.Matmul.track_pct_of_peak": {small: 50.0, big: 665.9}}, axes)
    run = results.load_latest(tmp_path, "cpu-x86_64")
    fig = plots.bandwidth_figure(run, OPS["matmul"])
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "matrix peak (0.0167 TFLOP/s)" in labels  # the median of 0.0168 and 0.0165
    assert plots.ABOVE["tflops"] in labels
    # the tf32 and bfloat16 panels hold no figure: each says so (it was empty without a word)
    said = [[t.get_text() for t in ax.texts] for ax in fig.axes[:3]]
    assert said == [[], ["tf32: not measured on this machine"], ["bfloat16: not measured on this machine"]]
    from fusebench.record import Record, Sweep

    why = "tf32 is a tensor-core mode of NVIDIA GPUs (sm_80+); on the CPU it is float32"
    record = Sweep({}, 1.0, "cpu", [Record("matmul", "torch", "64x64", "tf32", status="skipped", reason=why)])
    said = plots.empty_panel_text(OPS["matmul"], "tf32", record)
    assert said == f"tf32: not measured on this machine\n({why})"


def test_an_empty_panel_gives_the_records_skip_reason_not_a_backend_the_op_lacks():
    """A CPU's matmul-tflops.png read "tf32: not measured on this machine (matmul has no eager
    backend)": every (op, backend) pair is a case of the record, and the first skipped one of the
    dtype was eager's, a backend matmul does not have. The panel gives the skip reason of the op's
    own backends, the one most of them share."""
    from fusebench.axes import no_backend_reason
    from fusebench.record import Record, Sweep

    why = "tf32 is a tensor-core mode of NVIDIA GPUs (sm_80+); on the CPU it is float32"

    def skipped(op, backend, shape, dtype, reason=None):
        return Record(op, backend, shape, dtype, status="skipped",
                      reason=reason or no_backend_reason(op, backend))

    recs = [skipped("matmul", b, shape, "tf32", why if b == "torch" else None)
            for shape in ("64x64", "128x128") for b in ("eager", "torch", "triton")]
    said = plots.empty_panel_text(OPS["matmul"], "tf32", Sweep({}, 1.0, "cpu", recs))
    assert said == f"tf32: not measured on this machine\n({why})"
    # only backends the op lacks: no reason to give
    lacking = [r for r in recs if r.backend != "torch"]
    said = plots.empty_panel_text(OPS["matmul"], "tf32", Sweep({}, 1.0, "cpu", lacking))
    assert said == "tf32: not measured on this machine"
    # gelu: two of its backends share a reason, one has its own: the shared one
    recs = [skipped("gelu", "triton", "1024", "float16", "one"),
            skipped("gelu", "cuda", "1024", "float16", "two"),
            skipped("gelu", "flaggems", "1024", "float16", "two")]
    said = plots.empty_panel_text(OPS["gelu"], "float16", Sweep({}, 1.0, "cpu", recs))
    assert said == "float16: not measured on this machine\n(two)"


@pytest.mark.slow
def test_make_plots_on_a_fresh_clone_rewrites_the_committed_plots_byte_for_byte(tmp_path):
    """Issue 29: ``make plots`` modified three committed plots (they were drawn from an older run).
    The plots are a function of the committed results; a run that stores results commits its plots."""
    written = plots.write_plots(H200, tmp_path, list(OPS.values()), ["h200"])
    committed = sorted(p.name for p in (PROJECT_ROOT / "plots" / "h200").glob("*.png"))
    assert sorted(p.name for p in written) == committed
    folder = PROJECT_ROOT / "plots" / "h200"
    stale = [p.name for p in written if p.read_bytes() != (folder / p.name).read_bytes()]
    assert not stale, f"plots/h200/{stale} differ from the committed results: make plots, then commit them"


def test_a_backend_the_newest_run_lacks_is_drawn_from_an_older_run():
    """The newest RMSNorm runs (95806cbf, 1f091eb7) measured no reference backend; liger and quack
    keep their lines from 5a030682, dashed, their commit in the legend."""
    reader = results.Reader(H200)
    runs = list(plots.newest_first(reader, "h200", OPS["rmsnorm"]))
    earlier = plots.older_backends(runs[0], runs[1:], OPS["rmsnorm"])
    assert [r.date for r in runs] == sorted((r.date for r in runs), reverse=True)
    assert {b: r.commit[:8] for b, r in earlier.items()} == {"liger": "5a030682", "quack": "5a030682"}
    fig = plots.bandwidth_figure(runs[0], OPS["rmsnorm"], runs[1:])
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "liger (5a030682)" in labels and "quack (5a030682)" in labels and "triton" in labels


def test_a_figure_above_the_roof_is_marked_and_gets_no_speedup(h200):
    """GELU 4194304 float32 on the H200 reads 137-140 % of the copy ceiling: hollow circles on the
    bandwidth plot; at the headline shape no speedup of a contaminated figure."""
    key = ("triton", "4194304", "float32")
    assert plots.doubts(h200, OPS["gelu"], key) == ["cache"]
    fig = plots.bandwidth_figure(h200, OPS["gelu"])
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert plots.ABOVE["bandwidth"] in labels
    assert plots.doubts(h200, OPS["gelu"], ("triton", "16384x16384", "float32")) == []


def test_a_backend_has_one_colour_in_every_panel_and_doubtful_points_are_crossed():
    """The legend is shared by the panels: a backend missing from one panel shifted the colours of
    the others there (flaggems cyan in float32, brown in bfloat16). Noisy or contaminated figures
    of the run's record are crossed."""
    reader = results.Reader(H200)
    runs = list(plots.newest_first(reader, "h200", OPS["gelu"]))
    record = runrecord.load(runrecord.records_dir(H200), "h200", runs[0].commit)
    fig = plots.bandwidth_figure(runs[0], OPS["gelu"], runs[1:], record)
    colours: dict[str, set] = {}
    for ax in fig.axes:
        for line in ax.get_lines():
            name = line.get_label().split(" (")[0]
            if name in plots.BACKENDS and line.get_marker() == "o" and line.get_linestyle() != "None":
                colours.setdefault(name, set()).add(line.get_color())
    assert colours and all(len(c) == 1 for c in colours.values()), colours
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    doubtful = [r for r in record.records
                if r.op == "gelu" and {"noisy", "contaminated"} & set(marks.doubts(r))]
    assert (plots.DOUBTFUL in labels) == bool(doubtful)


def test_energy_per_byte_is_plotted_from_the_newest_record_that_has_it(tmp_path):
    """Issue 29 item 12: the H200 run of 0a5fc94 measured energy per call for GELU and softmax;
    each panel's lines are the record's pJ per byte by bytes moved, labelled never gated. RMSNorm
    has energy from 0aaf0e8's run on, none in 1f091eb7's; matmul (compute-bound) and a CPU-like
    run draw none."""
    reader = results.Reader(H200)
    gelu = OPS["gelu"]
    commits = {r.commit[:8]: r.commit for r in plots.newest_first(reader, "h200", gelu)}
    record = runrecord.load(runrecord.records_dir(H200), "h200", commits["0a5fc94f"])
    fig = plots.energy_figure(record, gelu, "h200")
    assert plots.ENERGY_NOTE == "shown, never gated" and plots.ENERGY_NOTE in fig._suptitle.get_text()
    panels = [ax for ax in fig.axes if ax.get_title() in gelu.dtypes]
    assert [ax.get_title() for ax in panels] == list(gelu.dtypes)
    for ax in panels:
        by_case = {(r.backend, r.shape): r for r in record.records
                   if (r.op, r.dtype, r.status) == ("gelu", ax.get_title(), "ok")}
        lines = {line.get_label(): line for line in ax.get_lines()}
        assert sorted(lines) == sorted({b for b, _ in by_case})
        for backend, line in lines.items():
            cases = sorted((r for (b, _), r in by_case.items() if b == backend), key=lambda r: r.bytes_moved)
            assert list(line.get_xdata()) == [r.bytes_moved / 1e6 for r in cases]
            assert list(line.get_ydata()) == [r.energy_pj_per_byte for r in cases]
    # the figures of that run (docs/results/h200.md): cuda GELU 4194304 float32 99.6 pJ/B
    points = plots.energy_series(record, gelu, "float32")
    assert [round(y, 1) for _, y, s in points["cuda"] if s == "4194304"] == [99.6]
    assert [round(y) for _, y, s in points["eager"] if s == "16384x16384"] == [1431]
    for name, expected in (("rmsnorm", {"1f091eb7": False, "0aaf0e8d": True}),
                           ("matmul", {"1f091eb7": False, "0aaf0e8d": False})):  # compute-bound: none
        by_commit = {r.commit[:8]: r.commit for r in plots.newest_first(reader, "h200", OPS[name])}
        drawn = {c: plots.energy_figure(runrecord.load(runrecord.records_dir(H200), "h200", by_commit[c]),
                                        OPS[name], "h200") is not None for c in expected}
        assert drawn == expected, name
    for r in record.records:
        r.energy_mj_per_call = r.energy_pj_per_byte = None
    assert plots.energy_figure(record, gelu, "h200") is None


def test_the_speedup_plot_has_a_column_per_backend_the_op_registers():
    """Issue 41, item 6: the H200 GELU speedup plot had liger and quack columns marked n/a, though
    GELU has no such backends."""
    latest = results.Reader(committed_folder("results")).latest("h200")
    ticks = {name: [t.get_text() for t in plots.speedup_figure(latest, OPS[name]).axes[0].get_xticklabels()]
             for name in ("gelu", "softmax")}
    for name, got in ticks.items():
        assert got == [b for b in plots.BACKENDS if b in OPS[name].backends], (name, got)
    assert "liger" not in ticks["gelu"] and "quack" not in ticks["gelu"] and "flaggems" in ticks["gelu"]


def test_a_run_without_the_headline_charts_its_largest_shape(tmp_path):
    """A run of the CPU's grid measures none of the headlines: its speedup chart is drawn at its
    largest shape, and its title says which shape and that it is not the headline."""
    commit = main_commits(1)[0]
    axes = [["eager", "torch"], ["1024", "1048576", "262144"], ["float32"]]
    wall = {("eager", "1024", "float32"): 2e-5, ("torch", "1024", "float32"): 1e-5,
            ("eager", "262144", "float32"): 4e-4, ("torch", "262144", "float32"): 2e-4,
            ("eager", "1048576", "float32"): 3e-3, ("torch", "1048576", "float32"): 1e-3}
    write_result(tmp_path, "cpu-x86_64", commit, {"suite.Gelu.track_wall_time": wall}, axes)
    run = results.load_latest(tmp_path, "cpu-x86_64")
    assert plots.chart_shape(run, OPS["gelu"]) == "1048576"
    metric, table = plots.speedups(run, OPS["gelu"])
    assert metric == "track_wall_time" and table["torch"]["float32"] == pytest.approx(3.0)
    title = plots.speedup_figure(run, OPS["gelu"]).axes[0].get_title()
    assert title.startswith("gelu 1048576 on cpu-x86_64: speedup over eager")
    assert title.endswith("\nthe largest shape measured: not the headline 16384x16384")


def test_the_headline_stays_where_any_backend_measured_it(tmp_path):
    commit = main_commits(1)[0]
    axes = [["eager", "triton"], ["1048576", "16384x16384"], ["float32"]]
    write_result(tmp_path, "box", commit, {"suite.Gelu.track_device_time": {
        ("eager", "1048576", "float32"): 1e-5, ("triton", "1048576", "float32"): 5e-6,
        ("eager", "16384x16384", "float32"): None, ("triton", "16384x16384", "float32"): 3e-4}}, axes)
    run = results.load_latest(tmp_path, "box")
    assert plots.chart_shape(run, OPS["gelu"]) == "16384x16384"  # eager failed there
    assert plots.speedups(run, OPS["gelu"])[1]["triton"]["float32"] is None
    # no bar has a value: the chart is left out, with the reason `fusebench plots` prints
    assert plots.no_speedup_reason(run, OPS["gelu"]) == \
        "eager, the baseline of a speedup, was not measured at 16384x16384"
    assert plots.speedup_figure(run, OPS["gelu"]) is None


def test_the_headline_is_charted_where_the_run_measured_it(h200):
    assert plots.chart_shape(h200, OPS["softmax"]) == "8192x16384"
    title = plots.speedup_figure(h200, OPS["softmax"]).axes[0].get_title()
    assert title.startswith("softmax 8192x16384 on h200") and "\n" not in title


def test_a_backend_not_measured_reads_plain_na_beside_a_doubtful_baseline(tmp_path):
    """A new user's trial: skipped `triton` and `cuda` bars read `n/a~` because only the baseline
    (eager float16) was noisy; a bar not measured says only n/a."""
    commit = main_commits(1)[0]
    axes = [["eager", "torch"], ["16384x16384"], ["float32", "bfloat16"]]
    f32, bf16 = ("16384x16384", "float32"), ("16384x16384", "bfloat16")
    times = {("eager", *f32): 2e-3, ("torch", *f32): 1e-3, ("eager", *bf16): 1e-3, ("torch", *bf16): 5e-4}
    write_result(tmp_path, "box", commit, {
        "suite.Gelu.track_device_time": times,
        "suite.Gelu.track_pct_of_ceiling": {("eager", *f32): 180.0, ("torch", *f32): 90.0,
                                            ("eager", *bf16): 90.0, ("torch", *bf16): 90.0}}, axes)
    run = results.load_latest(tmp_path, "box")
    texts = [t.get_text() for t in plots.speedup_figure(run, OPS["gelu"]).axes[0].texts]
    cache = f"n/a{marks.symbols(['cache'])}"
    # float32 (eager above the copy ceiling): eager and torch marked, gelu's other backends (compile,
    # triton, cuda, flaggems) not measured; bfloat16: eager, torch, then the others not measured
    others = ["n/a"] * (len(OPS["gelu"].backends) - 2)
    assert texts[:2 * len(OPS["gelu"].backends)] == [cache, cache, *others, "1.0", "2.0", *others]


def test_a_speedup_chart_whose_baseline_is_noisy_is_drawn_with_its_marks(tmp_path):
    """A new user's CPU run drew no softmax-speedup.png and said nothing: eager was noisy at the
    largest shape in every dtype, so every bar was n/a and the chart was left out. It is drawn,
    each such bar ``n/a~`` as the bars of doubtful figures are everywhere, the marks explained."""
    from fusebench.record import Record, Sweep

    commit = main_commits(1)[0]
    axes = [["eager", "torch"], ["1024", "65536x128", "64x64"], ["float32"]]
    wall = {("eager", "1024", "float32"): 2e-5, ("torch", "1024", "float32"): 1e-5,
            ("eager", "65536x128", "float32"): 3e-3, ("torch", "65536x128", "float32"): 1e-3}
    tflops = {("torch", "64x64", "float32"): 0.1}
    write_result(tmp_path, "cpu-x86_64", commit, {"suite.Softmax.track_wall_time": wall,
                                                  "suite.Matmul.track_tflops": tflops}, axes)
    run = results.load_latest(tmp_path, "cpu-x86_64")
    record = Sweep({}, 1.0, "cpu", [Record("softmax", "eager", "65536x128", "float32", noise=0.4),
                                    Record("softmax", "torch", "65536x128", "float32", noise=0.01)])
    softmax = OPS["softmax"]
    assert plots.speedups(run, softmax, record)[1]["torch"]["float32"] is None  # no bar has a value
    assert plots.no_speedup_reason(run, softmax) is None
    ax = plots.speedup_figure(run, softmax, record).axes[0]
    noisy = f"n/a{marks.symbols(['noisy'])}"
    assert [t.get_text() for t in ax.texts][:3] == [noisy, noisy, "n/a"]  # eager, torch, compile
    assert ax.get_xlabel().startswith("Marks: ~ noisy")
    # every op with a measured case: its chart, or one line saying why not (matmul has no eager)
    reader = results.Reader(tmp_path)
    ops = [softmax, OPS["gelu"], OPS["matmul"]]
    written = plots.write_plots(tmp_path, tmp_path / "out", ops, reader=reader)
    assert sorted(p.name for p in written) == ["matmul-tflops.png", "softmax-speedup.png"]
    assert plots.speedups_not_drawn(reader, ["cpu-x86_64"], ops, written) == [
        "cpu-x86_64/matmul-speedup.png not drawn: matmul has no eager backend, the baseline of a speedup"]



def _make_n_plots(*args: str) -> str:
    out = subprocess.run(["make", "--no-print-directory", "-n", "plots", f"PYTHON={sys.executable}", "DEPS=",
                          *args], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120,
                         env={k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL")})
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_make_plots_passes_machine_and_an_unknown_one_is_one_line_naming_those_stored(tmp_path):
    """``make plots MACHINE=nosuch`` drew every machine, exit 0: MACHINE did not reach the command."""
    assert _make_n_plots() == f"{sys.executable} -m fusebench plots"
    line = _make_n_plots("MACHINE=nosuch")
    assert line == f"{sys.executable} -m fusebench plots --machines nosuch"
    stored = tmp_path / "results"
    for machine in ("h200", "cpu-x86_64"):
        (stored / machine).mkdir(parents=True)
        (stored / machine / "machine.json").write_text(json.dumps({"machine": machine, "version": 1}))
    out = subprocess.run([*shlex.split(line), "--results", str(stored), "--out", str(tmp_path / "plots")],
                         cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert out.stderr == "plots: error: unknown machine 'nosuch'; valid machines: cpu-x86_64, h200\n"
    assert not (tmp_path / "plots").exists()
