"""The gate's per-case limits learned from the history of run records (fusebench.gate.noise),
on synthetic records."""

import math
import random

import pytest

from fusebench import metrictable
from fusebench.gate import compare, noise
from fusebench.gate.compare import Case
from fusebench.record import Record, Sweep

HOT = metrictable.BY_NAME["track_device_time"]
ENV = {"gpu": "NVIDIA H200", "driver": "580", "cuda_runtime": "13.0", "torch": "2.11", "triton": "3.6",
       "python": "3.12", "git_dirty": False}


def run(commit: str, cases: dict, env=None, methods=None) -> Sweep:
    """A record of ``commit`` with, per (backend, shape), three rounds of hot device time (ms)."""
    recs = []
    for (backend, shape), rounds in cases.items():
        r = Record("gelu", backend, shape, "float32", launches=1)
        r.rounds = [{"device_time_ms": t, "device_time_cold_ms": t, "contamination": []} for t in rounds]
        r.device_time_ms = sorted(rounds)[1]
        recs.append(r)
    s = Sweep(dict(ENV, git_commit=commit, **(env or {})), 1000.0, "default", recs, rounds=3)
    if methods is not None:
        s.methods = methods
    return s


def nothing_changed(a, b):
    return set()


def drifting_history(sigma: float, runs: int, seed: int = 1, t: float = 0.01):
    """``runs`` records of unchanged code whose whole-run figure drifts with ``sigma`` (log), rounds
    within ±0.2 % of it."""
    rng = random.Random(seed)
    out = []
    for i in range(runs):
        level = t * math.exp(rng.gauss(0, sigma))
        out.append(run(f"c{i:039d}", {("triton", "1024"): [level * (1 + rng.uniform(-0.002, 0.002))
                                                          for _ in range(3)]}))
    return out


def case_from(s: Sweep) -> Case:
    vals = tuple(r["device_time_ms"] * 1e-3 for r in s.records[0].rounds)
    med = sorted(vals)[1]
    return Case(vals, noise=(max(vals) - min(vals)) / med, per_launch_ms=med * 1e3)


KEY = ("gelu", "triton", "1024", "float32")


def test_aa_like_history_never_flags():
    """A case drifting 3 % (sigma) between runs: 40 runs, every one of the 780 pairs judged with the
    limit learned from the others is never a regression or an improvement."""
    runs = drifting_history(0.03, 40)
    hist = noise.History(runs, nothing_changed)
    flagged = 0
    for i in range(len(runs)):
        for j in range(i + 1, len(runs)):
            a, b = runs[i], runs[j]
            pair = (a.environment["git_commit"], b.environment["git_commit"])
            lim = hist.limit("device_time_ms", KEY, exclude=pair)
            assert lim.limit == pytest.approx(math.exp(noise.K * 0.03), rel=0.25)
            flagged += compare.judge(HOT, case_from(a), case_from(b), 1.04, history=lim)[0] in (
                compare.REGRESSION, compare.IMPROVEMENT)
    assert flagged == 0


def test_a_five_percent_shift_on_a_quiet_case_flags():
    runs = drifting_history(0.002, 6)
    hist = noise.History(runs, nothing_changed)
    lim = hist.limit("device_time_ms", KEY)
    assert lim.limit < 1.02 and lim.n == 15 and "15 A/A pairs" in lim.source
    base = case_from(runs[0])
    head = Case(tuple(v * 1.05 for v in base.values), noise=base.noise, per_launch_ms=base.per_launch_ms)
    status, ratio, limit, *_ = compare.judge(HOT, base, head, 1.04, history=lim)
    assert status == compare.REGRESSION and limit == 1.04 and ratio == pytest.approx(1.05)


def test_thin_history_falls_back_as_documented():
    # one record: no pair at all -> the stated fallback of the band, and the gate says so
    hist = noise.History(drifting_history(0.01, 1), nothing_changed)
    assert hist.limit("device_time_ms", KEY) == noise.Limit(None, None, 0, "no history")
    assert hist.limit("device_time_ms", KEY, per_launch_ms=0.001).limit == 1.20
    assert hist.limit("device_time_ms", KEY, per_launch_ms=0.004).limit == 1.15
    assert hist.limit("device_time_ms", KEY, per_launch_ms=0.010).limit == 1.10
    assert hist.limit("device_time_ms", KEY, per_launch_ms=0.050).limit is None
    base = case_from(drifting_history(0.0, 1)[0])
    head = Case(tuple(v * 1.08 for v in base.values), noise=base.noise, per_launch_ms=base.per_launch_ms)
    lim = hist.limit("device_time_ms", KEY, per_launch_ms=0.010)
    status, _, limit, _, note = compare.judge(HOT, base, head, 1.04, history=lim)
    assert status == compare.WITHIN_NOISE and limit == 1.10 and "no history: fallback 1.10x" in note
    # a case with no pair of its own takes its class's sigma once the class has MIN_CLASS samples
    runs = drifting_history(0.01, 5)  # 10 pairs of the class (band of 10 us per launch)
    hist = noise.History(runs, nothing_changed)
    other = hist.limit("device_time_ms", ("gelu", "triton", "2048", "float32"), per_launch_ms=0.01)
    assert other.n == 0 and other.source == "its class (10 samples)" and other.limit > 1.0
    # ... and below MIN_CLASS samples it has none
    hist = noise.History(drifting_history(0.01, 4), nothing_changed)  # 6 samples
    assert hist.limit("device_time_ms", ("gelu", "triton", "2048", "float32"), 0.01).source == "no history"
    # the judged pair is never its own history
    hist = noise.History(drifting_history(0.01, 2), nothing_changed)
    assert hist.limit("device_time_ms", KEY, exclude=(f"c{0:039d}", f"c{1:039d}")).source == "no history"


def test_pairs_are_only_runs_of_unchanged_code_in_one_environment_and_method():
    a = run("a" * 40, {("triton", "1024"): [0.01] * 3, ("torch", "1024"): [0.01] * 3})
    b = run("b" * 40, {("triton", "1024"): [0.011] * 3, ("torch", "1024"): [0.011] * 3})
    hist = noise.History([a, b], lambda x, y: {"kernels/triton_gelu.py"})
    assert ("device_time_ms", KEY) not in hist.samples  # triton's own file changed
    torch_key = ("device_time_ms", ("gelu", "torch", "1024", "float32"))
    assert hist.samples[torch_key][0].d == pytest.approx(math.log(0.01 / 0.011))
    assert noise.touches({"kernels/cuda/gelu.cu"}, noise.measured_paths("gelu", "cuda"))
    assert not noise.touches({"kernels/cuda/gelu.cu"}, noise.measured_paths("gelu", "torch"))
    assert noise.touches({"kernels/gelu.py"}, noise.measured_paths("gelu", "torch"))
    assert noise.touches({"kernels/x.py"}, noise.measured_paths("gelu", "some-new-backend"))
    # the op package: the same rules; every op's .cu is in the one extension, another op's folder is not
    gelu_paths = {b: noise.measured_paths("gelu", b) for b in ("torch", "triton", "cuda", "quack")}
    expected = {"gelu/triton.py": {"triton"}, "gelu/__init__.py": {"torch", "triton", "cuda", "quack"},
                "gelu/gelu.cu": {"cuda"}, "softmax/softmax.cu": {"cuda"}, "cuda/binding.cpp": {"cuda"},
                "cuda_ext.py": {"cuda"}, "reference_libs.py": {"quack"}, "softmax/triton.py": set(),
                "gelu/tuning.py": set()}
    for changed, hit in expected.items():
        for folder in ("fusebench/ops", "kernels"):  # the op packages, before and after the move back
            touched = {b for b, p in gelu_paths.items() if noise.touches({f"{folder}/{changed}"}, p)}
            assert touched == hit, (folder, changed)
    assert noise.touches({"fusebench/ops/x.py"}, noise.measured_paths("gelu", "some-new-backend"))
    assert set(noise.REFERENCE_BACKENDS) == {"liger", "quack", "flaggems"}
    # another torch, another method version of the metric, a dirty tree, an unknown diff: no pair
    for b2 in (run("c" * 40, {("torch", "1024"): [0.011] * 3}, env={"torch": "2.12"}),
               run("c" * 40, {("torch", "1024"): [0.011] * 3}, env={"git_dirty": True})):
        assert not noise.History([a, b2], nothing_changed).samples
    b3 = run("c" * 40, {("torch", "1024"): [0.011] * 3}, methods={"device_time_ms": 99})
    assert torch_key not in noise.History([a, b3], nothing_changed).samples
    # a record stored before records named their method versions (loaded with methods {}): no pair
    b4 = run("c" * 40, {("torch", "1024"): [0.011] * 3}, methods={})
    assert not noise.History([a, b4], nothing_changed).samples
    assert not noise.History([a, b], lambda x, y: None).samples


def test_detectable_counts_and_names_what_the_gate_cannot_see():
    hot = "suite.Gelu.track_device_time"
    rows = [compare.Row(hot, ("torch", str(i), "float32"), "seconds", 1.0, 1.0, 1.0, 0.0, compare.SAME, limit)
            for i, limit in enumerate((1.04, 1.04, 1.08, 1.15, 1.6))]
    rows.append(compare.Row(hot, ("eager", "1024", "float32"), "seconds", 1.0, 1.0, 1.0, 0.0,
                            compare.LAUNCH_PATH, 1.3, note="launch path: hot 18 us vs graph 9.5 us"))
    counts, n, blind = compare.detectable(rows)
    assert n == 5 and counts == {1.05: 2, 1.10: 3, 1.20: 4} and [r.params[1] for r in blind] == ["4"]
    text = compare.detectable_text(rows)
    assert "2 (40 %) at 5 %, 3 (60 %) at 10 %, 4 (80 %) at 20 %" in text
    assert "1 stream figures measure the launch path" in text
    assert "cannot see 20 %: suite.Gelu.track_device_time (torch, 4, float32) limit 1.600x" in text


def test_a_change_of_comments_only_is_no_change_of_code():
    py = 'def f(x):\n    """Doc."""\n    return x + 1  # add one\n'
    assert noise.code(py, "a.py") == noise.code('def f(x):\n    # why\n    return x + 1\n', "a.py")
    assert noise.code(py, "a.py") != noise.code('def f(x):\n    return x + 2\n', "a.py")
    cu = "__global__ void k(float* y) { /* one */ y[0] = 1.0f; // store\n}"
    assert noise.code(cu, "k.cu") == noise.code("__global__ void k(float* y) {\n  y[0] = 1.0f;\n}", "k.cu")
    assert noise.code(cu, "k.cu") != noise.code("__global__ void k(float* y) { y[0] = 2.0f; }", "k.cu")


def test_runs_with_different_reference_libraries_are_not_a_pair_nor_judged():
    a = run("a" * 40, {("torch", "1024"): [0.010] * 3, ("liger", "1024"): [0.02] * 3})
    b = run("b" * 40, {("torch", "1024"): [0.012] * 3})
    b.records.append(Record("gelu", "liger", "1024", "float32", status="skipped",
                            reason="not installed"))
    assert noise.loaded(a) == {"liger"} and noise.loaded(b) == frozenset()
    assert not noise.History([a, b], nothing_changed).samples
    ra, rb = ({("torch", "1024", "float32"): 1e-5}, {("torch", "1024", "float32"): 1.2e-5})
    from fusebench.storage.results import Run

    base = Run("box", "a" * 40, 0, values={"suite.Gelu.track_device_time": ra})
    head = Run("box", "b" * 40, 0, values={"suite.Gelu.track_device_time": rb})
    (row,) = compare.compare(base, head, 1.04, a, b)
    assert row.status == compare.DIFFERENT_LIBRARIES and "base: liger; head: none" in row.note
    assert compare.DIFFERENT_LIBRARIES not in compare.FAILING
    (row,) = compare.compare(base, head, 1.04, a, run("b" * 40, {("torch", "1024"): [0.012] * 3,
                                                                ("liger", "1024"): [0.02] * 3}))
    assert row.status == compare.REGRESSION


def test_a_graph_figure_without_history_borrows_the_hot_history_only_where_it_times_the_kernel():
    runs = drifting_history(0.01, 6, t=0.05)  # 50 us per launch, hot drifting 1 %
    hist = noise.History(runs, nothing_changed)
    kernel = Case((5e-5,) * 3, per_launch_ms=0.05, graph_ms=0.049, launches=1)
    lim = compare._hot_history(hist, KEY, kernel, None)
    assert lim.limit == pytest.approx(hist.limit("device_time_ms", KEY).limit)
    assert lim.n == 0 and lim.source.startswith("the hot figure's history (15 A/A pairs")
    # the stream waited for the host (hot 2x graph), or the case is launch-bound: no borrowing
    assert compare._hot_history(hist, KEY, Case((1e-4,) * 3, per_launch_ms=0.1, graph_ms=0.05), None) is None
    tiny = Case((1e-6,) * 3, per_launch_ms=0.001, graph_ms=0.001, launches=1)
    assert compare._hot_history(hist, KEY, tiny, None) is None


def test_every_measured_op_and_backend_names_files_that_exist():
    """A move of the ops must update the table, or no change would ever end an A/A pair. The table
    names every layout the history holds (``kernels/<op>.py``, then ``fusebench/ops/<op>/``, now
    ``kernels/<op>/``): the older ones are kept so that pairs of older runs still tell changed code
    from unchanged, and every path of the current one must exist."""
    import glob

    from fusebench import ops
    from fusebench.paths import PROJECT_ROOT

    def exists(p: str) -> bool:
        return bool(glob.glob(str(PROJECT_ROOT / p.rstrip("/"))))

    # the older paths match older commits only (a pulled checkout may keep their __pycache__ folders)
    assert not list((PROJECT_ROOT / "fusebench" / "ops").rglob("*.py"))
    for op in ops.configured().values():
        older = ("fusebench/ops/", f"kernels/{op.name}.py", f"kernels/triton_{op.name}.py")
        assert f"kernels/{op.name}/__init__.py" in noise.measured_paths(op.name, "torch")
        for backend in op.backends:
            current = [p for p in noise.measured_paths(op.name, backend) if not p.startswith(older)]
            assert current and all(exists(p) for p in current), (op.name, backend, current)


def test_a_few_drifting_cases_do_not_widen_their_quiet_neighbours():
    """The class sigma is robust (1.4826 x median |d|): in a band where 2 cases of 12 drift 20 %
    between runs and the others 0.3 %, a quiet case with no pair of its own is held near
    exp(4 x 0.3 %), while each drifting case keeps a limit wider than its own drift."""
    rng = random.Random(3)
    runs = []
    for i in range(4):
        cases = {}
        for c in range(12):
            sigma = 0.2 if c < 2 else 0.003
            level = 0.01 * math.exp(rng.gauss(0, sigma))
            cases[("triton", str(1024 + c))] = [level] * 3
        runs.append(run(f"c{i:039d}", cases))
    hist = noise.History(runs, nothing_changed)
    quiet = hist.limit("device_time_ms", ("gelu", "triton", "9999", "float32"), per_launch_ms=0.01)
    assert quiet.n == 0 and quiet.limit < 1.03
    for c in range(2):
        key = ("gelu", "triton", str(1024 + c), "float32")
        worst = max(abs(s.d) for s in hist.samples[("device_time_ms", key)])
        assert hist.limit("device_time_ms", key).limit > math.exp(worst)


def test_a_batch_sized_from_a_stalled_estimate_is_contaminated_and_no_history():
    """8f1a039's H200 run timed torch GELU 1024 bfloat16 in graphs of 8 calls (61 elsewhere): its
    one-call estimate had read 25 us for a 3.3 us call. Such a figure is not judged (contaminated,
    the reason named) and is not an A/A sample; a batch at its cap, or one its figure explains
    (a 1 us kernel with a 3.4 us estimate: 58 calls), is neither."""
    rec = Record("gelu", "torch", "1024", "bfloat16", hot_calls=8, graph_calls=8,
                 device_time_ms=0.0023, device_time_graph_ms=0.00156)
    assert rec.short_batch("device_time_graph_ms").startswith("short batch: 8 calls per repeat")
    assert rec.short_batch("device_time_ms") and not rec.short_batch("device_time_cold_ms")
    assert not Record("gelu", "triton", "1024", "float32", hot_calls=58, graph_calls=58,
                      device_time_ms=0.00103, device_time_graph_ms=0.0009).short_batch("device_time_ms")
    assert not Record("gelu", "eager", "1024", "float32", hot_calls=64,
                      device_time_ms=0.0001).short_batch("device_time_ms")  # at the cap
    one = Record("gelu", "compile", "16777216", "float16", hot_calls=1, device_time_ms=0.024)
    assert one.short_batch("device_time_ms")  # 1 call: the estimate was over 0.2 ms
    assert not Record("gelu", "compile", "16777216", "float16", hot_calls=1,
                      device_time_ms=0.19).short_batch("device_time_ms")

    def sweep(commit, calls, t):
        s = run(commit, {("torch", "1024"): [t] * 3})
        s.records[0].hot_calls = calls
        return s
    a, b = sweep("a" * 40, 61, 0.0021), sweep("b" * 40, 8, 0.0024)
    assert ("device_time_ms", ("gelu", "torch", "1024", "float32")) not in \
        noise.History([a, b], nothing_changed).samples
    base = case_from(a)
    head = compare.case_of(_FakeRun(b), b, "suite.Gelu.track_device_time", ("torch", "1024", "float32"))
    status, *_, note = compare.judge(HOT, base, head, 1.04)
    assert status == compare.CONTAMINATED and "short batch: 8 calls" in note


class _FakeRun:
    """The asv side of a run, for :func:`compare.case_of` (the record decides)."""

    def __init__(self, sweep):
        self.sweep = sweep

    def value(self, benchmark, params):
        return self.sweep.records[0].device_time_ms * 1e-3
