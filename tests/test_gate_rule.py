"""The regression gate's rule on synthetic rounds, and the gate end to end on synthetic records."""

import math
import re

import pytest
from asvfiles import main_commits, write_result
from hypothesis import given, settings
from hypothesis import strategies as st

from fusebench import commands, metrictable
from fusebench.gate import compare, noise
from fusebench.gate.compare import Case
from fusebench.measure import sweep
from fusebench.paths import PROJECT_ROOT
from fusebench.record import Record, Sweep, clean_rounds
from fusebench.storage import runrecord

HOT = metrictable.BY_NAME["track_device_time"]


def rounds(t: float, jitter: list[float]) -> tuple[float, ...]:
    return tuple(t * (1 + e) for e in jitter)


def case(values, per_launch_ms=0.1, **kw) -> Case:
    vals = tuple(values)
    med = sorted(vals)[len(vals) // 2]
    return Case(vals, noise=(max(vals) - min(vals)) / med, per_launch_ms=per_launch_ms, **kw)


def status(base: Case, head: Case, factor=metrictable.DEFAULT_FACTOR) -> str:
    return compare.judge(HOT, base, head, factor)[0]


def test_mann_whitney_exact_values():
    assert compare.mann_whitney_greater((1, 2, 3), (4, 5, 6)) == pytest.approx(1 / 20)
    assert compare.mann_whitney_greater((4, 5, 6), (1, 2, 3)) == pytest.approx(1.0)
    assert compare.mann_whitney_greater((1, 2, 3, 4), (5, 6, 7, 8)) == pytest.approx(1 / 70)
    # U = 8 of 9 pairs: orderings with U >= 8 are 2 of 20
    assert compare.mann_whitney_greater((1, 2, 5), (3, 6, 7)) == pytest.approx(2 / 20)
    assert compare.min_p(3, 3) == pytest.approx(0.05) and compare.min_p(2, 3) == pytest.approx(0.1)
    with pytest.raises(ValueError):
        compare.mann_whitney_greater((), (1.0,))


def test_ties_count_against_significance():
    """Cold figures read on CUDA events in steps of about 0.5 us tie often: base (3.072, 3.072,
    3.584) against head (3.584, 4.096, 4.096) is 2 splits of 20 at least as extreme (p = 0.1),
    not 1 of 20 (the distribution without ties): not separated at alpha 0.05."""
    assert compare.mann_whitney_greater((3.072, 3.072, 3.584), (3.584, 4.096, 4.096)) == pytest.approx(0.1)
    assert compare.mann_whitney_greater((1.0, 1.0, 1.0), (1.0, 1.0, 1.0)) == pytest.approx(1.0)
    base = case((3.072, 3.072, 3.584), per_launch_ms=0.003)
    head = case((3.584, 4.096, 4.096), per_launch_ms=0.003)
    verdict, _, limit, p, _ = compare.judge(HOT, base, head, 1.04)
    assert p == pytest.approx(0.1) and verdict != compare.REGRESSION


def _brute_force_p(base, head):
    """P(rank sum of head >= observed) over every split of the pooled values (midranks)."""
    from itertools import combinations

    pooled = list(base) + list(head)
    order = sorted(pooled)
    rank = {v: (order.index(v) + len(order) - order[::-1].index(v) + 1) / 2 for v in pooled}
    observed = sum(rank[v] for v in head)
    splits = list(combinations(range(len(pooled)), len(head)))
    return sum(sum(rank[pooled[i]] for i in idx) >= observed - 1e-9 for idx in splits) / len(splits)


tied = st.lists(st.sampled_from((3.072, 3.584, 4.096, 4.608)), min_size=2, max_size=6)


@settings(max_examples=400, deadline=None)
@given(base=tied, head=tied)
def test_the_rank_test_with_ties_is_scipy_s_exact_permutation_test(base, head):
    """Random tie-heavy rounds: the p-value equals scipy's exact permutation Mann-Whitney test
    (every split enumerated: at most C(12, 6) = 924 < n_resamples) and a brute-force count."""
    from scipy import stats

    p = compare.mann_whitney_greater(tuple(base), tuple(head))
    assert p == pytest.approx(_brute_force_p(base, head), abs=1e-12)
    expected = stats.mannwhitneyu(head, base, alternative="greater",
                                  method=stats.PermutationMethod(n_resamples=10**5)).pvalue
    assert p == pytest.approx(expected, abs=1e-9)


jitter = st.lists(st.floats(-0.015, 0.015), min_size=3, max_size=3)


@settings(max_examples=300, deadline=None)
@given(t=st.floats(0.02, 50.0), b=jitter, h=jitter)
def test_aa_like_noise_never_flags(t, b, h):
    """Rounds within ±1.5 % of one figure (the A/A data's spread above 20 µs per launch) never
    make a regression or an improvement."""
    assert status(case(rounds(t, b)), case(rounds(t, h))) in (compare.SAME, compare.WITHIN_NOISE)


@settings(max_examples=300, deadline=None)
@given(t=st.floats(0.001, 0.0049), b=st.lists(st.floats(-0.08, 0.08), min_size=3, max_size=3),
       h=st.lists(st.floats(-0.08, 0.08), min_size=3, max_size=3))
def test_history_of_a_drifting_case_keeps_its_aa_noise_unflagged(t, b, h):
    """A case whose A/A pairs drift by 5 % (sigma 0.05: limit e^0.2 = 1.22) is never flagged for
    an 8 % move of every round."""
    lim = noise.Limit(math.exp(noise.K * 0.05), 0.05, 6, "6 A/A pairs")
    base, head = case(rounds(t, b), per_launch_ms=t), case(rounds(t, h), per_launch_ms=t)
    assert compare.judge(HOT, base, head, 1.04, history=lim)[0] in (compare.SAME, compare.WITHIN_NOISE)


@settings(max_examples=200, deadline=None)
@given(t=st.floats(0.02, 50.0), b=st.lists(st.floats(-0.003, 0.003), min_size=3, max_size=3),
       h=st.lists(st.floats(-0.003, 0.003), min_size=3, max_size=3), shift=st.floats(1.05, 1.5))
def test_a_five_percent_shift_with_low_noise_flags(t, b, h, shift):
    assert status(case(rounds(t, b)), case(rounds(t * shift, h))) == compare.REGRESSION
    assert status(case(rounds(t * shift, h)), case(rounds(t, b))) == compare.IMPROVEMENT


def test_overlapping_rounds_are_not_a_regression():
    """10 % slower in the median, but one head round is as fast as a base round: not separated."""
    base, head = case((1.0, 1.01, 1.12)), case((1.0, 1.10, 1.11))
    st_, ratio, limit, p, _ = compare.judge(HOT, base, head, 1.04)
    assert ratio == pytest.approx(1.10 / 1.01) and p > compare.ALPHA and st_ == compare.WITHIN_NOISE


def test_noise_between_rounds_widens_the_limit():
    base, head = case((1.0, 1.05, 1.10)), case((1.20, 1.21, 1.22))  # spread 0.1 / 1.05
    st_, ratio, limit, *_ = compare.judge(HOT, base, head, 1.04)
    assert limit == pytest.approx(1 + 2 * 0.1 / 1.05) and ratio == pytest.approx(1.21 / 1.05)
    assert st_ == compare.WITHIN_NOISE


def test_the_history_limit_widens_the_limit_and_says_so():
    base, head = case((0.002, 0.002, 0.002), per_launch_ms=0.002), case((0.0023,) * 3, per_launch_ms=0.002)
    lim = noise.Limit(1.20, math.log(1.2) / noise.K, 4, "4 A/A pairs")
    st_, ratio, limit, _, note = compare.judge(HOT, base, head, 1.04, history=lim)
    assert limit == 1.20 and st_ == compare.WITHIN_NOISE and "history: 4 A/A pairs" in note
    assert compare.judge(HOT, base, case((0.0025,) * 3), 1.04, history=lim)[0] == compare.REGRESSION
    # a quiet history leaves the factor in charge, and a case without one says so
    quiet = noise.Limit(1.01, 0.0025, 6, "6 A/A pairs")
    assert compare.judge(HOT, base, head, 1.04, history=quiet)[:3] == (compare.REGRESSION, 1.15, 1.04)
    none = noise.Limit(None, None, 0, "no history")
    assert "no history: rounds only" in compare.judge(HOT, base, head, 1.04, history=none)[4]


def test_stream_figures_of_the_launch_path_do_not_gate_and_say_why():
    cold = metrictable.BY_NAME["track_device_time_cold"]
    # hot 18 us per call where the graph replays it in 9.5 us: the stream waited for the host
    base = case((18e-6, 18.1e-6, 18.2e-6), graph_ms=0.0095)
    head = case((30e-6, 30e-6, 30e-6), graph_ms=0.0095)
    st_, *_, note = compare.judge(HOT, base, head, 1.04)
    assert st_ == compare.LAUNCH_PATH and "hot 18.1 us vs graph 9.5 us" in note
    assert compare.LAUNCH_PATH not in compare.FAILING
    # the same hot figure at 1.1x its graph time measures the kernel: judged
    base, head = case((10e-6,) * 3, graph_ms=0.0095), case((12e-6,) * 3, graph_ms=0.0095)
    assert compare.judge(HOT, base, head, 1.04)[0] == compare.REGRESSION
    # a cold single launch of 3 us is the launch path; 50 us is the kernel
    assert compare.judge(cold, case((3e-6,) * 3, graph_ms=0.001), case((4e-6,) * 3, graph_ms=0.001),
                         1.04)[0] == compare.LAUNCH_PATH
    assert compare.judge(cold, case((50e-6,) * 3, graph_ms=0.04), case((60e-6,) * 3, graph_ms=0.04),
                         1.04)[0] == compare.REGRESSION
    # nine launches in 21.5 us cold (eager GELU 1024: 2.4 us each) are the launch path; nine in
    # 95 us (10.6 us each) are the kernels
    st_, *_, note = compare.judge(cold, case((21.5e-6,) * 3, graph_ms=0.0103, launches=9),
                                  case((30e-6,) * 3, graph_ms=0.0103, launches=9), 1.04)
    assert st_ == compare.LAUNCH_PATH and "9 launches between an event pair (2.39 us each)" in note
    assert compare.judge(cold, case((95e-6,) * 3, graph_ms=0.08, launches=9),
                         case((120e-6,) * 3, graph_ms=0.08, launches=9), 1.04)[0] == compare.REGRESSION
    # without a graph figure on both sides, the stream figure keeps gating
    assert compare.judge(HOT, case((18e-6,) * 3, graph_ms=0.0095), case((30e-6,) * 3), 1.04)[0] == \
        compare.REGRESSION


def test_a_contaminated_case_is_never_a_regression():
    base = case((1.0, 1.0, 1.0))
    head = case((2.0, 2.0, 2.0), contamination=("another process on the GPU: pid 7 (500 MiB)",))
    st_, *_, note = compare.judge(HOT, base, head, 1.04)
    assert st_ == compare.CONTAMINATED and "pid 7" in note
    assert status(head, base) == compare.CONTAMINATED  # contaminated base: the same
    assert compare.CONTAMINATED not in compare.FAILING


def test_a_limit_beyond_the_host_s_margin_is_blind_and_mostly_blind_is_inconclusive():
    """Issue 54, item 6: a case-metric held to a limit beyond what a host does on its own (1.5x for a
    GPU's device time) saw nothing: "blind", not "same"; mostly blind with no regression is
    inconclusive, never "ok"."""
    wide = case((1.0, 1.5, 0.7))  # spread 80 %: limit 2.6x
    st_, _, limit, _, note = compare.judge(HOT, case((1.0, 1.01, 0.99)), wide, 1.04)
    assert st_ == compare.BLIND and limit > compare.HOST_MARGIN_GPU
    assert f"blind: limit {limit:.2f}x, beyond the host's margin of 1.5x" in note
    assert status(case((1.0, 1.01, 0.99)), case((1.0, 1.02, 0.99))) == compare.SAME  # a narrow limit
    wall = metrictable.BY_NAME["track_wall_time"]  # a host's clock: margin 2x
    assert compare.judge(wall, case((1.0, 1.01, 0.99)), case((1.0, 1.3, 0.9)), 1.04)[0] == compare.SAME
    assert compare.judge(wall, case((1.0, 1.01, 0.99)), wide, 1.04)[0] == compare.BLIND

    def row(st, limit=1.1):
        return compare.Row("suite.Gelu.track_device_time", ("torch", "1024", "float32"), "seconds", 1e-3,
                           1e-3, 1.0, 0.0, st, limit)

    two_blind = [row(compare.BLIND, 2.6), row(compare.BLIND, 3.1), row(compare.SAME),
                 row(compare.CONTAMINATED), row(compare.NOT_BOTH)]
    assert compare.inconclusive(two_blind) and not compare.nothing_judged(two_blind)
    assert compare.inconclusive_text(two_blind, "make ab").startswith(
        "inconclusive: 2 of 3 case-metrics judged are blind (limit 2.60x-3.10x, beyond the host's margin)")
    assert not compare.inconclusive(two_blind + [row(compare.SAME)])  # half is not most
    assert not compare.inconclusive(two_blind + [row(compare.REGRESSION)])  # a regression fails
    assert compare.markdown(two_blind, rerun="make ab").endswith("with more pairs: `make ab`")


def test_a_different_kernel_chosen_by_timing_is_reported_apart():
    base = case((1.0, 1.0, 1.0), kernel_id="aaa", kernel_by_timing=True)
    head = case((1.15, 1.15, 1.15), kernel_id="bbb", kernel_by_timing=True)
    st_, *_, note = compare.judge(HOT, base, head, 1.04)
    assert st_ == compare.DIFFERENT_KERNEL and "kernel aaa -> bbb" in note
    assert compare.DIFFERENT_KERNEL not in compare.FAILING
    # a kernel changed by the code (not chosen by timing) is judged: a regression
    assert status(case((1.0,) * 3, kernel_id="aaa"), case((1.15,) * 3, kernel_id="bbb")) == compare.REGRESSION


def test_failures():
    ok, failed, absent = case((1.0, 1.0, 1.0)), Case(failed=True), Case()
    assert status(ok, failed) == compare.NEW_FAILURE and status(absent, failed) == compare.NEW_FAILURE
    assert status(failed, failed) == compare.SAME and status(failed, ok) == compare.FIXED
    assert status(ok, absent) == compare.NOT_BOTH and status(absent, ok) == compare.NOT_BOTH


def test_only_gated_metrics_are_device_times_and_asv_conf_follows_the_table():
    import json

    assert {m.name for m in metrictable.GATED} == {"track_device_time", "track_device_time_cold",
                                                   "track_device_time_graph"}
    conf = json.loads((PROJECT_ROOT / "asv.conf.json").read_text())
    settings_ = metrictable.asv_regression_settings()
    assert conf["regressions_first_commits"] == settings_["regressions_first_commits"]
    assert conf["regressions_thresholds"] == settings_["regressions_thresholds"]
    (off,), (on,) = settings_["regressions_first_commits"], settings_["regressions_thresholds"]
    for m in metrictable.METRICS:  # asv matches "<name>(<params>)" with re.match
        entry = f"suite.Gelu.{m.name}('eager', '1024', 'float32')"
        assert bool(re.match(off, entry)) == (not m.gates), m.name
        assert bool(re.match(on, entry)) == m.gates, m.name


def test_finish_takes_medians_over_rounds_and_the_spread_between_them():
    rec = Record("gelu", "torch", "1024", "float32", bytes_moved=8_000_000)
    for t in (1.0, 1.1, 0.9):
        rec.rounds.append({"device_time_ms": t, "device_time_iqr_ms": 0.01 * t, "device_time_cold_ms": 2 * t,
                           "device_time_cold_iqr_ms": 0.0, "wall_time_ms": 3 * t, "wall_time_iqr_ms": 0.0,
                           "repeats": 20, "clock": "cuda-events"})
    sweep.finish(rec, ceiling_gbps=10.0, peak_tflops=None)
    assert rec.device_time_ms == 1.0 and rec.device_time_cold_ms == 2.0 and rec.wall_time_ms == 3.0
    assert rec.noise == pytest.approx(0.2) and rec.noise_within == pytest.approx(0.01)
    assert rec.bandwidth_gbps == pytest.approx(8.0) and rec.pct_of_ceiling == pytest.approx(80.0)


def test_round_orders_are_interleaved_and_reproducible():
    assert sweep.round_order(5, 0) == [0, 1, 2, 3, 4]
    assert sweep.round_order(5, 1) == [4, 3, 2, 1, 0]
    third = sweep.round_order(50, 2)
    assert sorted(third) == list(range(50)) and third not in (list(range(50)), list(range(50))[::-1])
    assert third == sweep.round_order(50, 2)


# --- the gate end to end: asv results plus run records of two real commits ----------------------

AXES = [["eager", "torch", "compile"], ["1048576"], ["float32"]]
T = "suite.Gelu.track_device_time"


def record(commit: str, figures: dict, **extra) -> Sweep:
    recs = []
    for backend, values in figures.items():
        rec = Record("gelu", backend, "1048576", "float32", launches=1, **extra.get(backend, {}))
        rec.rounds = [{"device_time_ms": v, "device_time_iqr_ms": 0.0, "wall_time_ms": v} for v in values]
        rec.device_time_ms = sorted(values)[1]
        recs.append(rec)
    return Sweep({"device": "cuda", "git_commit": commit}, 4000.0, "default", recs, rounds=3)


@pytest.fixture
def gate(tmp_path, capsys, monkeypatch):
    def run(base, head):
        argv = (["compare", "--base", base, "--head", head, "--machine", "box",
                                          "--results", str(tmp_path / "results")])
        with pytest.raises(SystemExit) as stop:
            commands.main(argv)
        out = capsys.readouterr()
        return stop.value.code, out.out, out.err

    return run


def test_the_gate_reads_every_round_from_the_records(tmp_path, gate):
    base, head = main_commits(2)
    results_dir = tmp_path / "results"
    figures_b = {"eager": (0.100, 0.101, 0.1005), "torch": (0.050, 0.0502, 0.0501), "compile": (0.04,) * 3}
    figures_h = {"eager": (0.1003, 0.1008, 0.0999), "torch": (0.0530, 0.0531, 0.0529),
                 "compile": (0.046,) * 3}
    for commit, figures in ((base, figures_b), (head, figures_h)):
        write_result(results_dir, "box", commit,
                     {T: {(b, "1048576", "float32"): sorted(v)[1] * 1e-3 for b, v in figures.items()}}, AXES)
    kernel = {"compile": {"kernel_id": "k1", "kernel_by_timing": True}}
    runrecord.save(record(base, figures_b, **kernel), tmp_path / "records", "box", base)
    runrecord.save(record(head, figures_h, compile={"kernel_id": "k2", "kernel_by_timing": True}),
                   tmp_path / "records", "box", head)
    code, out, err = gate(base, head)
    assert code == 1, out + err
    lines = {ln.split("(")[-1].split(")")[0]: ln for ln in out.splitlines()[1:]}
    assert lines["torch, 1048576, float32"].lstrip().startswith("+")  # 6 %, every round slower
    assert "0.05" in lines["torch, 1048576, float32"]  # p of 3 rounds against 3
    assert lines["compile, 1048576, float32"].lstrip().startswith("k")
    assert "kernel k1 -> k2" in lines["compile, 1048576, float32"]
    assert "eager, 1048576, float32" not in lines
    assert "3 rounds/3 rounds" in err and "1 regression" in err and "1 different kernel" in err
    assert math.isfinite(float(lines["torch, 1048576, float32"].split()[3].rstrip("x")))


def test_a_throttled_round_is_left_out_while_most_rounds_are_clean():
    hot = ["throttled: sw_power_cap"]
    rounds = [{"device_time_ms": 1.0, "contamination": []}, {"device_time_ms": 1.01, "contamination": []},
              {"device_time_ms": 1.5, "contamination": hot}]
    kept, reasons = clean_rounds(rounds)
    assert [r["device_time_ms"] for r in kept] == [1.0, 1.01] and reasons == []
    rounds[1]["contamination"] = ["another process on the GPU: pid 3 (10 MiB)"]
    kept, reasons = clean_rounds(rounds)
    assert len(kept) == 3 and reasons == ["another process on the GPU: pid 3 (10 MiB)", hot[0]]
    rec = Record("gelu", "torch", "1024", "float32", bytes_moved=1000)
    rec.rounds = [{**r, "device_time_iqr_ms": 0.0, "repeats": 20, "clock": "cuda-events"} for r in rounds]
    rec.rounds[1]["contamination"] = []
    sweep.finish(rec, 10.0, None)
    assert rec.device_time_ms == pytest.approx(1.005) and rec.dropped_rounds == [2] and not rec.contaminated


def test_rounds_in_the_same_order_are_paired_so_the_order_effect_cancels():
    """Round 1 (grid order) 6 % faster than rounds 2 and 3 in both runs, as Triton softmax
    4096x4096 is on every H200: unpaired, the spread holds the case to 1.11x and a 5 % slowdown of
    every round is within noise; paired round against round, it is caught, and no move is not."""
    base = (18.2e-6, 19.4e-6, 19.4e-6)
    order = (0, 1, 2)
    slower = tuple(v * 1.05 for v in base)
    st_, ratio, limit, *_ = compare.judge(HOT, case(base), case(slower), 1.04)
    assert st_ == compare.WITHIN_NOISE and limit == pytest.approx(1 + 2 * 1.2 / 19.4)
    st_, ratio, limit, *_ = compare.judge(HOT, case(base, rounds=order), case(slower, rounds=order), 1.04)
    assert st_ == compare.REGRESSION and ratio == pytest.approx(1.05) and limit == 1.04
    same = (18.3e-6, 19.3e-6, 19.5e-6)
    assert compare.judge(HOT, case(base, rounds=order), case(same, rounds=order), 1.04)[0] == compare.SAME
    # a round left out on one side (contaminated) breaks the pairing: the rounds rule as before
    assert compare.judge(HOT, case(base, rounds=order), case(slower[1:], rounds=(1, 2)),
                         1.04)[0] == compare.WITHIN_NOISE
    # paired, the rounds must still agree: one round faster than its counterpart is not separated
    mixed = (base[0] * 0.99, base[1] * 1.12, base[2] * 1.12)
    assert compare.judge(HOT, case(base, rounds=order), case(mixed, rounds=order), 1.04)[0] == \
        compare.WITHIN_NOISE


def test_a_limit_set_by_the_rounds_says_so():
    """The limit printed must trace to something shown: when 1 + 2 x spread sets it, the note
    names the spread (paired when both runs kept every round in order)."""
    base = case((1.0, 1.1, 1.0), rounds=(0, 1, 2))
    head = case((1.0, 1.0, 1.0), rounds=(0, 1, 2))
    _, _, limit, _, note = compare.judge(HOT, base, head, 1.04)
    ratios = (1.0, 1 / 1.1, 1.0)
    assert limit == pytest.approx(1 + 2 * (1 - 1 / 1.1))
    assert note == f"rounds: paired spread {100 * (max(ratios) - min(ratios)):.1f} %"
    _, _, limit, _, note = compare.judge(HOT, case((1.0, 1.0, 1.0)), case((1.0, 1.0, 1.0)), 1.04)
    assert limit == 1.04 and note == ""
