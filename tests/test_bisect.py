"""The bisection's search and verdicts (fusebench.gate.bisect) with a stand-in measurer."""

import math
import random

import pytest

from fusebench import metrictable
from fusebench.gate import bisect, compare, noise
from fusebench.gate.bisect import AMBIGUOUS, BAD, GOOD, SKIPPED, CaseInfo, Commit, ProbeFailed

HOT = metrictable.BY_NAME["track_device_time"]
CASE = "gelu/triton/16777216/float32"


class StandIn:
    """Times per commit index (ms), with seeded relative jitter per round; commits that fail."""

    def __init__(self, times, jitter=0.002, seed=0, no_build=(), fails_in_round=(), cases=(CASE,)):
        self.times, self.jitter, self.rng = times, jitter, random.Random(seed)
        self.no_build, self.fails_in_round, self.cases = set(no_build), set(fails_in_round), cases
        self.open: set[int] = set()
        self.calls: list[tuple[str, int]] = []

    def start(self, commit, cases):
        i = int(commit.sha)
        self.calls.append(("start", i))
        if i in self.no_build:
            raise ProbeFailed("CUDA extension build failed: error: expected ';'")
        self.open.add(i)
        return {c: CaseInfo(launches=1) for c in cases}

    def round(self, commit):
        i = int(commit.sha)
        assert i in self.open, "a round of a commit that was not started"
        self.calls.append(("round", i))
        if i in self.fails_in_round:
            raise ProbeFailed(f"{CASE}: timing: RuntimeError: illegal memory access")
        t = self.times(i) if callable(self.times) else self.times[i]
        return {c: {"device_time_ms": t * (1 + self.rng.uniform(-self.jitter, self.jitter)),
                    "contamination": []} for c in self.cases}

    def stop(self, commit):
        self.calls.append(("stop", int(commit.sha)))
        self.open.discard(int(commit.sha))


def line(n):
    return [Commit(str(i), f"commit {i}") for i in range(n + 1)]


def step(at, size=1.06, base=0.5):
    return lambda i: base * (size if i >= at else 1.0)


def run(n, measurer, **kw):
    return bisect.run(line(n), [CASE], measurer, metric=HOT, **kw)


@pytest.mark.parametrize("n", range(1, 18))
def test_a_step_anywhere_is_found_in_ceil_log2_n_probes(n):
    for at in range(1, n + 1):
        out = run(n, StandIn(step(at), seed=at))
        assert out.status == "found" and out.first_bad == Commit(str(at), f"commit {at}"), (n, at)
        assert len(out.probes) <= math.ceil(math.log2(n)), (n, at)
        if n & (n - 1) == 0:  # a power of two: every position takes exactly log2 n probes
            assert len(out.probes) == int(math.log2(n))
        assert [p.verdict for p in out.probes] == [BAD if p.index >= at else GOOD for p in out.probes]
        assert all(p.rounds == 3 for p in out.probes)
        assert out.candidates == [out.first_bad]


def test_probe_figures_and_judgements():
    out = run(8, StandIn(step(5, 1.06, 0.5), jitter=0.001))
    assert [p.index for p in out.probes] == [4, 6, 5]
    p4 = out.probes[0].cases[0]
    assert p4.verdict == GOOD and p4.case == CASE
    assert p4.good_ms == pytest.approx(0.5, rel=2e-3) and p4.probe_ms == pytest.approx(0.5, rel=2e-3)
    assert p4.bad_ms == pytest.approx(0.53, rel=2e-3)
    assert p4.to_bad.status == compare.REGRESSION and p4.to_bad.slowdown == pytest.approx(1.06, rel=5e-3)
    assert p4.to_bad.limit == pytest.approx(1.04) and p4.to_bad.p_value == pytest.approx(0.05)
    assert p4.from_good.status == compare.SAME
    assert out.reference[0].reference.status == compare.REGRESSION and out.reference_rounds == 3


def test_rounds_are_interleaved_and_every_commit_released():
    m = StandIn(step(2))
    run(4, m)
    rounds = [i for kind, i in m.calls if kind == "round"]
    assert rounds[:6] == [0, 4, 4, 0, 0, 4]  # the reference block: GOOD and BAD alternate
    block = rounds[6:15]  # the first probe (commit 2): GOOD, BAD, probe in rotating orders
    assert block == [0, 4, 2, 2, 4, 0, 4, 2, 0]
    assert {i for kind, i in m.calls if kind == "start"} == {i for kind, i in m.calls if kind == "stop"}
    assert not m.open


def test_a_half_step_is_ambiguous_after_the_cap_never_guessed():
    # commit 2 is half-way (3 % of a 6 % step): neither like GOOD nor like BAD.
    times = {0: 0.5, 1: 0.5, 2: 0.515, 3: 0.53, 4: 0.53}
    out = run(4, StandIn(times, jitter=0.001), max_rounds=9)
    first = out.probes[0]
    assert first.index == 2 and first.verdict == AMBIGUOUS and first.rounds == 9
    assert "GOOD -> probe same, probe -> BAD same" in first.why
    assert out.status == "range"
    assert [c.sha for c in out.candidates] == ["2", "3"]
    assert {p.index: p.verdict for p in out.probes} == {2: AMBIGUOUS, 1: GOOD, 3: BAD}


@pytest.mark.parametrize("seed", range(40))
def test_noise_near_the_limit_gives_ambiguous_not_a_wrong_answer(seed):
    # A 5 % step with rounds spread over ±1.5 %: the limit (2 x spread) is about the step.
    at = 1 + seed % 7
    out = run(7, StandIn(step(at, 1.05), jitter=0.015, seed=seed), max_rounds=6)
    for p in out.probes:
        assert p.verdict in ((BAD if p.index >= at else GOOD), AMBIGUOUS), (seed, p)
    if out.status == "found":
        assert out.first_bad.sha == str(at)
    elif out.status == "range":
        assert str(at) in [c.sha for c in out.candidates]


def test_noise_near_the_limit_does_give_ambiguous_verdicts():
    verdicts = []
    for seed in range(40):
        at = 1 + seed % 7
        out = run(7, StandIn(step(at, 1.05), jitter=0.015, seed=seed), max_rounds=6)
        verdicts += [p.verdict for p in out.probes]
    assert AMBIGUOUS in verdicts and GOOD in verdicts and BAD in verdicts


def test_a_commit_that_does_not_build_is_skipped_and_named():
    out = run(8, StandIn(step(6), no_build={4}))
    skipped = [p for p in out.probes if p.verdict == SKIPPED]
    assert [p.index for p in skipped] == [4] and "CUDA extension build failed" in skipped[0].why
    assert out.status == "found" and out.first_bad.sha == "6"


def test_a_skipped_first_bad_commit_leaves_the_range_it_lies_in():
    out = run(8, StandIn(step(4), no_build={4}))
    assert out.status == "range" and [c.sha for c in out.candidates] == ["4", "5"]
    assert {p.index: p.verdict for p in out.probes}[4] == SKIPPED


def test_a_case_failing_in_a_round_skips_the_probe():
    out = run(4, StandIn(step(3), fails_in_round={2}))
    p2 = next(p for p in out.probes if p.index == 2)
    assert p2.verdict == SKIPPED and "illegal memory access" in p2.why
    assert out.status == "range" and [c.sha for c in out.candidates] == ["2", "3"]


def test_no_regression_between_good_and_bad_stops_before_probing():
    out = run(8, StandIn(lambda i: 0.5, jitter=0.001), max_rounds=6)
    assert out.status == "no regression" and out.probes == [] and out.reference_rounds == 6
    assert out.reference[0].verdict == AMBIGUOUS and "GOOD -> BAD is same" in out.reference[0].why


def test_good_or_bad_failing_is_an_error():
    with pytest.raises(bisect.BisectError, match="GOOD 0 could not be measured: CUDA extension"):
        run(4, StandIn(step(2), no_build={0}))
    with pytest.raises(bisect.BisectError, match="BAD 4 could not be measured"):
        run(4, StandIn(step(2), fails_in_round={4}))
    m = StandIn(step(2), no_build={4})
    with pytest.raises(bisect.BisectError, match="BAD 4 could not be measured"):
        run(4, m)
    assert not m.open  # GOOD's child was released


def test_a_metric_not_measured_is_an_error():
    class NoDeviceTime(StandIn):
        def round(self, commit):
            return {CASE: {"device_time_ms": None, "wall_time_ms": 1.0, "contamination": []}}

    with pytest.raises(bisect.BisectError, match="no hot device time was measured.*--metric wall_time"):
        run(4, NoDeviceTime(step(2)))


def test_several_cases_must_agree():
    other = "softmax/cuda/4096x4096/float32"

    class TwoCases(StandIn):
        def round(self, commit):
            i = int(commit.sha)
            t = 1 + self.rng.uniform(-0.001, 0.001)
            # CASE steps at 2, the other case at 3: commit 2 is BAD for one and GOOD for the other
            return {CASE: {"device_time_ms": t * (1.06 if i >= 2 else 1), "contamination": []},
                    other: {"device_time_ms": t * (1.06 if i >= 3 else 1), "contamination": []}}

    out = bisect.run(line(4), [CASE, other], TwoCases(None), metric=HOT, max_rounds=3)
    p2 = next(p for p in out.probes if p.index == 2)
    assert p2.verdict == AMBIGUOUS and [c.verdict for c in p2.cases] == [BAD, GOOD]


def test_contaminated_rounds_make_a_probe_ambiguous():
    class Throttled(StandIn):
        def round(self, commit):
            figs = super().round(commit)
            if commit.sha == "2":
                for f in figs.values():
                    f["contamination"] = ["throttled: sw_power_cap"]
            return figs

    out = run(4, Throttled(step(3)), max_rounds=3)
    p2 = next(p for p in out.probes if p.index == 2)
    assert p2.verdict == AMBIGUOUS and "contaminated" in p2.why


class Busy(StandIn):
    """A host loaded by other processes: every round contaminated, the load moving every figure by
    up to 1.9x over the session (both sides alike, a round of each one after the other)."""

    def round(self, commit):
        figs = super().round(commit)
        load = 1.0 + 0.45 * (1 + math.sin(len(self.calls) / 3.0))
        return {c: {"device_time_ms": f["device_time_ms"] * load, "contamination": ["host busy: load 6"]}
                for c, f in figs.items()}


def test_a_3x_step_on_a_busy_host_is_bisected_on_its_pairs():
    """Issue 54, item 6: `make bisect` refused a 2.994x step as contaminated ("nothing to bisect").
    GOOD -> BAD's paired interval and every pair lie beyond the host's margin: a regression, marked."""
    out = run(8, Busy(step(5, size=3.0), jitter=0.02), max_rounds=6)
    ref = out.reference[0].reference
    assert ref.status == compare.REGRESSION and ref.note.startswith("host busy; paired: every pair ")
    assert out.status in ("found", "range") and out.probes
    # a step within the margin on the same busy host stays contaminated: nothing to bisect
    out = run(8, Busy(step(5, size=1.3), jitter=0.02), max_rounds=6)
    assert out.status == "no regression" and "GOOD -> BAD is contaminated" in out.reference[0].why


def test_search_rejects_a_probe_outside_the_range():
    s = bisect.Search(8)
    s.record(4, BAD)
    with pytest.raises(ValueError, match="outside the open range"):
        s.record(6, GOOD)
    with pytest.raises(ValueError):
        bisect.Search(0)


def side(*values):
    return bisect.Side(CaseInfo(launches=1), [{"device_time_ms": v, "contamination": []} for v in values])


def test_the_adapter_is_the_gate_rule():
    good, bad = side(1.0, 1.01, 0.99), side(1.06, 1.07, 1.05)
    j = bisect.gate(bisect.Rule(HOT, 1.04, 0.05), CASE, good, bad)
    direct = compare.judge(HOT, compare.Case((1.0, 1.01, 0.99), noise=0.02, per_launch_ms=1.0),
                           compare.Case((1.06, 1.07, 1.05), noise=0.02 / 1.06, per_launch_ms=1.06), 1.04)
    assert (j.status, j.slowdown, j.limit, j.p_value) == pytest.approx(direct[:4])
    assert j.status == compare.REGRESSION and j.limit == pytest.approx(1.04)


def test_the_history_limit_is_asked_per_case_and_applied():
    asked = []

    def history(case, per_launch_ms):
        asked.append((case, per_launch_ms))
        return noise.Limit(1.08, 0.02, 5, "5 A/A pairs")

    rule = bisect.Rule(HOT, 1.04, 0.05, history)
    j = bisect.gate(rule, CASE, side(1.0, 1.01, 0.99), side(1.06, 1.07, 1.05))
    assert asked == [(CASE, pytest.approx(1.0))]
    assert j.status == compare.WITHIN_NOISE and j.limit == pytest.approx(1.08) and "5 A/A pairs" in j.note
    out = run(4, StandIn(step(2)), history=history, max_rounds=3)  # a 6 % step under an 8 % limit
    assert out.status == "no regression" and out.reference[0].reference.limit == pytest.approx(1.08)


def test_a_stream_figure_at_its_graph_time_is_judged_not_launch_path():
    """Values reach the gate in the metric's unit: a 130 us hot figure beside a 129 us graph
    figure measures the kernel (judged), where an 18 us one beside 9.5 us is the launch path."""
    def with_graph(hot, graph):
        rounds = [{"device_time_ms": hot, "device_time_graph_ms": graph, "contamination": []}] * 3
        return bisect.Side(CaseInfo(launches=1), rounds)

    rule = bisect.Rule(metrictable.BY_NAME["track_device_time"])
    judged = bisect.gate(rule, "gelu/torch/67108864/float32", with_graph(0.130, 0.129),
                         with_graph(0.137, 0.136))
    assert judged.status == compare.REGRESSION and "launch path" not in judged.note
    judged = bisect.gate(rule, "gelu/eager/1024/float32", with_graph(0.018, 0.0095),
                         with_graph(0.030, 0.0095))
    assert judged.status == compare.LAUNCH_PATH


def test_a_short_batch_is_contaminated_in_a_bisect_as_in_compare():
    """A probe whose hot batch was sized from a stalled estimate (6 calls for a 3.3 us call, the
    method asks for about 61) is judged as compare judges such a record: contaminated, not a
    regression."""
    rule = bisect.Rule(metrictable.BY_NAME["track_device_time"])

    def probe(hot_calls, *values):
        rounds = [{"device_time_ms": v, "contamination": []} for v in values]
        return bisect.Side(CaseInfo(launches=1, hot_calls=hot_calls), rounds)

    base = probe(61, 0.0033, 0.00331, 0.00329)
    judged = bisect.gate(rule, "gelu/torch/1024/bfloat16", base, probe(6, 0.0046, 0.0047, 0.0045))
    assert judged.status == compare.CONTAMINATED and "short batch: 6 calls per repeat" in judged.note
    judged = bisect.gate(rule, "gelu/torch/1024/bfloat16", base, probe(61, 0.0046, 0.0047, 0.0045))
    assert judged.status == compare.REGRESSION


def test_the_child_s_batch_sizes_are_checked():
    from fusebench.gate.bisect_probe import _info

    ready = {"launches": 1, "hot_calls": 61, "graph_calls": 62}
    assert _info(CASE, ready) == CaseInfo(1, None, False, 61, 62)
    assert _info(CASE, {"launches": 1}) == CaseInfo(1)  # a child of a commit before the batch sizes
    for bad in (0, -3, True, "61", 2.5):
        with pytest.raises(bisect.ProbeFailed, match="batch size"):
            _info(CASE, {"launches": 1, "hot_calls": bad})


def test_the_printed_p_names_the_side_it_tests():
    """compare.judge's p is one-sided in the slowdown's direction: a faster head within the factor
    reads ``p(faster) 0.000 ... same``, never a bare p that seems to contradict "same"."""
    from fusebench.commands.bisect import p_text

    assert p_text(0.000137, 0.989) == "p(faster) 0.000"
    assert p_text(0.05, 104.374) == "p(slower) 0.050"
    assert p_text(0.2, 1.0) == "p(slower) 0.200"
    assert p_text(None, 1.2) == "p n/a" and p_text(0.01, math.nan) == "p n/a"
    # the judge's p is the test in that direction: every head round faster gives the small p
    b = compare.Case(values=(1.0, 1.01, 1.02), rounds=(0, 1, 2))
    h = compare.Case(values=(0.97, 0.98, 0.99), rounds=(0, 1, 2))
    status, slowdown, _, p, _ = compare.judge(HOT, b, h, 1.04)
    assert status == compare.SAME and slowdown < 1 and p_text(p, slowdown) == "p(faster) 0.050"


def test_good_to_bad_blind_on_most_cases_is_inconclusive_not_nothing_to_bisect():
    """Issue 54, item 6: GOOD -> BAD held to a limit beyond the host's margin saw nothing: the
    command says inconclusive, names the limits and what to run, exit 2 (not "nothing to bisect")."""
    from pathlib import Path

    from fusebench.commands import bisect as command

    out = run(8, StandIn(lambda i: 0.5, jitter=0.6, seed=3), max_rounds=3)
    assert out.status == "no regression" and out.reference[0].reference.status == compare.BLIND
    assert command.blind_reference(out) == out.reference
    rerun = "python -m fusebench bisect 0 8 --case c"
    last = command.text(out, Path("records"), "cpu-x86_64", rerun).splitlines()[-2]
    assert last.startswith("inconclusive: GOOD -> BAD is blind on 1 of 1 case(s) after 3 rounds "
                           f"(limit {CASE} ")
    assert last.endswith(f"run it on a quieter host, or with more rounds: {rerun}")
    quiet = run(8, StandIn(lambda i: 0.5, jitter=0.001), max_rounds=3)
    assert command.blind_reference(quiet) == [] and "nothing to bisect" in command.text(quiet, Path("r"))
