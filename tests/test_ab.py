"""fusebench ab: the round order, the paired rule on synthetic rounds, the stopping rule, the
choice of cases from a diff, the stored session as untrusted input, the exit codes."""

import json
import math
import random
import shlex
import statistics
import subprocess
import sys
from types import SimpleNamespace

import pytest
import throwaway
import torch
from throwaway import git

from fusebench import commands, metrictable
from fusebench.backends import autotuned
from fusebench.commands import bisect_child
from fusebench.gate import ab, ab_cases, bisect_git, compare
from fusebench.gate.bisect import CaseInfo, Commit, ProbeFailed
from fusebench.paths import PROJECT_ROOT

HOT = metrictable.BY_NAME["track_device_time"]
COLD = metrictable.BY_NAME["track_device_time_cold"]
GRAPH = metrictable.BY_NAME["track_device_time_graph"]
A, B = Commit("a" * 40, "base"), Commit("b" * 40, "head")


class Fake:
    """Two sides of synthetic figures: ``ms[side][case]`` the true hot time, ``noise`` the relative
    noise of one round, ``drift(t)`` what the board does to every figure at call ``t``."""

    def __init__(self, ms, noise=0.002, drift=lambda t: 1.0, seed=0, infos=None, not_built=None,
                 contaminated=lambda side, case, t: False, process=lambda side, gen, case: 1.0,
                 period=0.0, pick=None):
        self.ms, self.noise, self.drift, self.rng = ms, noise, drift, random.Random(seed)
        self.infos, self.not_built, self.contaminated = infos or {}, not_built or {}, contaminated
        #: ``process(side, generation, case)``: a factor a process holds for its life; ``period``:
        #: how much slower the side timed first in a pair reads.
        self.process, self.period = process, period
        #: ``pick(side, generation, case)``: the kernel id a process's autotuner picks (None: the
        #: ``infos`` as given in every process).
        self.pick = pick
        self.calls, self.stopped, self.renewed = [], [], []
        self.generation = 0

    def built(self, side, cases):
        out = {c: self.infos.get((side, c), CaseInfo(1, "k", False, 100, 100)) for c in cases}
        if self.pick:
            out = {c: CaseInfo(1, self.pick(side, self.generation, c), True, 100, 100) for c in out}
        return out

    def start(self, side, commit):
        return self.built(side, self.ms[side]), self.not_built.get(side, {})

    def time(self, side, case):
        t = len(self.calls)
        self.calls.append((side, case))
        level = self.ms[side][case] * self.drift(t) * self.process(side, self.generation, case)
        if self.calls[-2:-1] != [(other(side), case)]:  # the first of its pair
            level *= 1.0 + self.period
        fig = {f: level * k * math.exp(self.rng.gauss(0, self.noise))
               for f, k in (("device_time_ms", 1.0), ("device_time_cold_ms", 1.3),
                            ("device_time_graph_ms", 0.95))}
        fig["contamination"] = ["throttled: power cap"] if self.contaminated(side, case, t) else []
        return fig

    def stop(self, side):
        self.stopped.append(side)

    def renew(self, cases):
        self.generation += 1
        self.renewed.append(list(cases))
        missing = {c: f"{side}: failed: gone" for side, gone in self.not_built.get("renew", {}).items()
                   for c in gone if c in cases}
        kept = [c for c in cases if c not in missing]
        return {side: self.built(side, kept) for side in (ab.BASE, ab.HEAD)}, missing


def other(side):
    return ab.HEAD if side == ab.BASE else ab.BASE


def both(ms: dict, head_factor: dict | None = None) -> dict:
    head_factor = head_factor or {}
    return {ab.BASE: dict(ms), ab.HEAD: {c: v * head_factor.get(c, 1.0) for c, v in ms.items()}}


def statuses(out):
    return [r.status for r in ab.rows(out)]


def test_the_sides_alternate_a_b_b_a_for_every_case():
    for k in range(4):
        seq = []
        for r in range(4):
            first = ab.first_side(r, k)
            seq += [first, ab.HEAD if first == ab.BASE else ab.BASE]
        pattern = "".join("A" if s == ab.BASE else "B" for s in seq)
        assert pattern == ("ABBAABBA" if k % 2 == 0 else "BAABBAAB")


def test_rounds_are_interleaved_case_by_case_and_both_children_released():
    m = Fake(both({"gelu/triton/1024/float32": 0.05, "gelu/torch/1024/float32": 0.05}))
    out = ab.run(None, m, A, B, min_pairs=2, max_pairs=2)
    assert m.calls[:4] == [(ab.BASE, "gelu/triton/1024/float32"), (ab.HEAD, "gelu/triton/1024/float32"),
                           (ab.HEAD, "gelu/torch/1024/float32"), (ab.BASE, "gelu/torch/1024/float32")]
    assert m.calls[4:6] == [(ab.HEAD, "gelu/triton/1024/float32"), (ab.BASE, "gelu/triton/1024/float32")]
    assert sorted(m.stopped) == [ab.BASE, ab.HEAD]
    assert [c.first for c in out.cases] == [[ab.BASE, ab.HEAD], [ab.HEAD, ab.BASE]]


CASES = {f"gelu/triton/{2 ** k}/float32": 0.002 * 2 ** (k - 10) for k in range(10, 27, 2)}


@pytest.mark.parametrize("seed", range(6))
def test_a_a_never_flags_even_when_the_board_drifts_10_percent(seed):
    """Same code both sides; the board moves every figure by up to 10 % over the session (both
    sides alike, a pair a fraction of a second apart): 0 regressions and 0 improvements, and
    every case can see 5 %."""
    drift = lambda t: 1.0 + 0.10 * math.sin(t / 7.0)  # noqa: E731
    out = ab.run(None, Fake(both(CASES), noise=0.003, drift=drift, seed=seed), A, B)
    rows = [r for r in ab.rows(out) if r.status != compare.LAUNCH_PATH]  # cold < 8 us: the host's
    assert len(rows) > 20 and {r.status for r in rows} <= {compare.SAME, compare.WITHIN_NOISE}
    assert all(r.limit <= 1.05 for r in rows)


def test_a_5_percent_slowdown_of_a_quiet_case_is_caught_and_the_rest_left_alone():
    slow = "gelu/triton/16777216/float32"
    out = ab.run(None, Fake(both(CASES, {slow: 1.05}), noise=0.003, seed=1), A, B)
    for r in ab.rows(out):
        case = f"gelu/{r.params[0]}/{r.params[1]}/{r.params[2]}"
        assert r.status == (compare.REGRESSION if case == slow else compare.SAME) \
            or r.status == compare.LAUNCH_PATH and case != slow, r
    judged = {r.benchmark: r for r in ab.rows(out) if r.params[1] == "16777216"}
    assert 1.04 < judged["suite.Gelu.track_device_time"].slowdown < 1.06


def test_a_5_percent_speedup_is_an_improvement():
    case = "softmax/cuda/4096x4096/float32"
    out = ab.run(None, Fake(both({case: 0.04}, {case: 1 / 1.05}), noise=0.003), A, B)
    assert set(statuses(out)) == {compare.IMPROVEMENT}


def test_a_stream_figures_verdict_names_its_graph_figures_beside_it():
    """Issue 43's before/after: the head's hot and cold figures read faster, its graph figures
    did not; each flagged stream figure's note gives the graph figure's ratio and verdict."""
    case = "softmax/cuda/4096x4096/float32"
    m = Fake(both({case: 0.04}, {case: 1 / 1.05}), noise=0.003)

    def time(side, case, _orig=m.time):  # the head's graph figure as fast as the base's
        fig = _orig(side, case)
        back = 1.05 if side == ab.HEAD else 1.0
        return dict(fig, device_time_graph_ms=fig["device_time_graph_ms"] * back)

    m.time = time
    rows = ab.rows(ab.run(None, m, A, B))
    by_field = {metrictable.BY_NAME[r.benchmark.split(".")[-1]].field: r for r in rows}
    graph = by_field["device_time_graph_ms"]
    assert graph.status == compare.SAME and 0.99 < graph.slowdown < 1.01
    for field in ("device_time_ms", "device_time_cold_ms"):
        row = by_field[field]
        assert row.status == compare.IMPROVEMENT
        assert row.note.endswith(f"; graph {graph.slowdown:.3f}x, same")
    assert "graph" not in graph.note
    # where nothing is flagged, nothing is added
    same = ab.rows(ab.run(None, Fake(both({case: 0.04}), noise=0.003), A, B))
    assert not any("; graph " in r.note for r in same)


def test_a_noisy_case_gets_more_rounds_and_a_quiet_one_stops_at_the_minimum():
    quiet, noisy = "gelu/torch/67108864/float32", "gelu/torch/1024/float32"
    m = Fake(both({quiet: 0.2, noisy: 0.003}))
    m.noise = 0.0
    rng = random.Random(3)

    def time(side, case, _orig=m.time):
        fig = _orig(side, case)
        if case == noisy:
            fig = {k: v * math.exp(rng.gauss(0, 0.03)) if k.endswith("_ms") else v for k, v in fig.items()}
        return fig

    m.time = time
    out = ab.run(None, m, A, B, min_pairs=4, max_pairs=12)
    rounds = {c.case: len(c.base) for c in out.cases}
    assert rounds[quiet] == 4 and rounds[noisy] == 12
    assert {c.case: c.stopped for c in out.cases} == {quiet: "decided", noisy: "at the cap of 12 rounds"}


SLOW_PROCESS = "softmax/triton/4096x65536/float16"


def slow_head_process(side, gen, case):
    """The A/A at e193586 on an H200: the head's process read 320 us where the base's read 286,
    in every round; here the first head process holds that state, later ones do not."""
    return 1.117 if case == SLOW_PROCESS and side == ab.HEAD and gen == 0 else 1.0


def test_a_state_one_process_holds_decides_nothing_when_processes_are_renewed():
    ms = both({SLOW_PROCESS: 0.286, "gelu/torch/67108864/float32": 0.2})
    kept = ab.run(None, Fake(ms, process=slow_head_process), A, B, process_rounds=0)
    assert {r.status for r in ab.rows(kept) if r.params[0] == "triton"} == {compare.REGRESSION}
    m = Fake(ms, process=slow_head_process)
    renewed = ab.run(None, m, A, B, process_rounds=1)
    assert {r.status for r in ab.rows(renewed)} <= {compare.SAME, compare.WITHIN_NOISE}
    assert renewed.process_rounds == 1 and "fresh processes" in renewed.phases
    # one renewal before each round after the first, of the cases still open only
    first = len(m.renewed[0])
    assert first == 2 and all(len(c) <= first for c in m.renewed)
    assert len(m.renewed) == max(len(c.base) for c in renewed.cases) - 1


def test_renewal_every_k_rounds_and_a_case_not_built_again_is_judged_on_what_it_has():
    case = "gelu/torch/67108864/float32"
    m = Fake(both({case: 0.2}), noise=0.05)
    out = ab.run(None, m, A, B, min_pairs=4, max_pairs=6, process_rounds=2)
    assert len(m.renewed) == (len(out.cases[0].base) - 1) // 2
    gone = Fake(both({case: 0.2}), noise=0.05, not_built={"renew": {ab.HEAD: [case]}})
    out = ab.run(None, gone, A, B, min_pairs=4, max_pairs=6)
    assert len(out.cases[0].base) == 1
    assert out.cases[0].stopped == "not built again in a fresh process (head: failed: gone)"
    with pytest.raises(ValueError, match="process_rounds"):
        ab.run(None, m, A, B, process_rounds=-1)


def test_the_crossover_fit_matches_least_squares_and_falls_back_to_the_paired_mean():
    import numpy as np

    rng = random.Random(5)
    for n in (4, 5, 9):
        d = [rng.gauss(0.01, 0.02) for _ in range(n)]
        signs = [1.0 if (i + rng.randrange(2)) % 2 else -1.0 for i in range(n)]
        if len(set(signs)) == 1:
            signs[0] = -signs[0]
        x = np.column_stack([np.ones(n), signs])
        coef, rss, *_ = np.linalg.lstsq(x, np.array(d), rcond=None)
        cov = float(rss[0]) / (n - 2) * np.linalg.inv(x.T @ x)
        delta, se, df = ab.crossover(d, signs)
        assert delta == pytest.approx(coef[0]) and se == pytest.approx(math.sqrt(cov[0, 0])) and df == n - 2
    d = [0.01, 0.02, 0.03, 0.05]
    plain = (statistics.fmean(d), statistics.stdev(d) / 2.0, 3)
    assert ab.crossover(d, [1.0] * 4) == pytest.approx(plain)  # one order only
    assert ab.crossover(d[:3], [1.0, -1.0, 1.0]) == pytest.approx((statistics.fmean(d[:3]),
                                                                 statistics.stdev(d[:3]) / math.sqrt(3), 2))
    assert ab.crossover(d, []) == pytest.approx(plain)


def test_a_period_effect_neither_flags_an_a_a_nor_hides_a_5_percent_slowdown():
    """A few-us case whose first-timed side reads 9 % slower (seen on an H200: GELU 2^10 hot
    1.99 us first, 1.83 us second, whichever side): the crossover fit takes it out of the spread."""
    case = "gelu/torch/262144/float32"
    aa = ab.run(None, Fake(both({case: 0.01}), noise=0.002, period=0.09), A, B)
    assert {r.status for r in ab.rows(aa)} == {compare.SAME}
    assert all(r.limit < 1.03 for r in ab.rows(aa))
    slow = ab.run(None, Fake(both({case: 0.01}, {case: 1.05}), noise=0.002, period=0.09), A, B)
    assert {r.status for r in ab.rows(slow)} == {compare.REGRESSION}


def test_the_time_cap_judges_open_cases_on_what_they_have():
    clock = iter(range(0, 10**6, 100))
    m = Fake(both({"gelu/torch/1024/float32": 0.003}), noise=0.05)
    out = ab.run(None, m, A, B, min_pairs=3, max_pairs=50, time_cap_s=250, clock=lambda: next(clock))
    assert out.capped and len(out.cases[0].base) == 3
    assert out.cases[0].stopped.startswith("at the time cap")


def test_ties_quantized_figures_identical_pairs_are_same_and_a_real_step_is_caught():
    """CUDA events read in steps of about 0.5 us: every pair tied is no change (limit = factor);
    every head round one step slower than its base round (3.072 -> 3.584 us) is a regression."""
    def fixed(b, h):
        return SimpleNamespace(start=lambda side, commit: ({"gelu/torch/1024/float32": CaseInfo(1)}, {}),
                               time=lambda side, case: {"device_time_ms": b if side == ab.BASE else h,
                                                        "contamination": []},
                               stop=lambda side: None, renew=lambda cases: ({}, {}))
    same = ab.run(None, fixed(0.003072, 0.003072), A, B)
    assert statuses(same) == [compare.SAME] and ab.rows(same)[0].limit == pytest.approx(ab.FACTOR)
    step = ab.run(None, fixed(0.003072, 0.003584), A, B)
    assert statuses(step) == [compare.REGRESSION]


def test_contaminated_pairs_are_left_out_while_most_are_clean():
    case = "gelu/torch/67108864/float32"
    one_bad = Fake(both({case: 0.2}), contaminated=lambda side, c, t: t == 1)
    out = ab.run(None, one_bad, A, B, min_pairs=4, max_pairs=4)
    assert set(statuses(out)) == {compare.SAME}
    assert all(r.note.startswith("3 pairs") for r in ab.rows(out))
    all_bad = Fake(both({case: 0.2}, {case: 1.2}), contaminated=lambda side, c, t: True)
    assert set(statuses(ab.run(None, all_bad, A, B))) == {compare.CONTAMINATED}


def test_a_slowdown_in_contaminated_rounds_only_is_nothing_judged_never_ok():
    """A new user's trial on a loaded 2-core host: eager slower, every round contaminated by the
    load; the verdict was "0 regression, 2 contaminated -> ok", exit 0. A slowdown within the
    host's margin (1.3x here, the margin 1.5x) is not judged: exit 2, saying why."""
    from fusebench.commands import ab as ab_command

    case = "gelu/eager/1048576/float32"
    out = ab.run(None, Fake(both({case: 0.2}, {case: 1.3}), contaminated=lambda side, c, t: True), A, B)
    assert set(statuses(out)) == {compare.CONTAMINATED}
    text, lines, code = ab_command.verdict(out, "text", "box", [])
    assert code == 2 and lines[-1].endswith("-> nothing judged"), lines
    assert lines[-2] == ("ab: no case-metric measured on both sides could be judged (3 contaminated: the "
                         "table above says why for each)")
    assert text.count("\n") >= 3 and " c " in text  # every row shown with its mark
    assert ab_command.verdict(out, "json", "box", [])[2] == 2
    # one clean case beside it is a verdict: exit 0 when it is the same
    clean = "gelu/torch/1048576/float32"
    out = ab.run(None, Fake(both({case: 0.2, clean: 0.2}, {case: 1.3}),
                            contaminated=lambda side, c, t: c == case), A, B)
    assert ab_command.verdict(out, "text", "box", [])[2] == 0


WALL = metrictable.BY_NAME["track_wall_time"]


class CpuHost(Fake):
    """A host without a GPU: wall time only (ms), every round contaminated when ``busy`` says so;
    ``load(t)`` multiplies the figure of call ``t`` (a host loaded 2-9 by other processes)."""

    def __init__(self, ms, busy=lambda t: True, load=lambda t: 1.0, **kw):
        super().__init__(ms, **kw)
        self.busy, self.load = busy, load

    def time(self, side, case):
        t = len(self.calls)
        self.calls.append((side, case))
        wall = self.ms[side][case] * self.load(t) * math.exp(self.rng.gauss(0, self.noise))
        return {"wall_time_ms": wall,
                "contamination": ["host busy: load 6.2 on 2 cores"] if self.busy(t) else []}


EAGER_CPU = {f"gelu/eager/{n}/{d}": 0.3 * n / 65536 for n in (65536, 262144, 1048576)
             for d in ("float32", "bfloat16", "float16", "float64")}


def loaded(t: int) -> float:
    """A host whose load swings the wall time by up to 1.9x over the session (other processes)."""
    return 1.0 + 0.45 * (1 + math.sin(t / 3.0))


def test_a_3x_slowdown_on_a_loaded_cpu_host_is_a_regression_marked_host_busy():
    """Issue 54, item 6: eager GELU made 3x slower, A/B on a loaded 2-core host: every pair 2.9-3.2x,
    every round contaminated; was "10 contaminated, 2 same -> ok", exit 0. The paired interval is
    and every pair wholly beyond the host's margin (2x for wall time): a regression, marked, exit 1."""
    from fusebench.commands import ab as ab_command

    out = ab.run(None, CpuHost(both(EAGER_CPU, {c: 3.0 for c in EAGER_CPU}), load=loaded, noise=0.03,
                               seed=1), A, B)
    rows = ab.rows(out)
    assert {r.status for r in rows} == {compare.REGRESSION}
    assert all(r.note.startswith("host busy; paired: every pair ") and "host's margin of 2x" in r.note
               for r in rows)
    assert all(2.7 < r.slowdown < 3.3 for r in rows)
    text, lines, code = ab_command.verdict(out, "text", "box", [])
    assert code == 1 and lines[-1].endswith("12 regression (12 host busy; paired), 0 contaminated, "
                                            "0 different libraries, 0 different kernel, 0 within noise, "
                                            "0 blind, 0 fixed, 0 improvement, 0 not on both sides, "
                                            "0 launch path, 0 same -> FAIL"), lines[-1]
    md = ab_command.verdict(out, "markdown", "box", [])[0]
    assert "| + | regression (host busy; paired) |" in md
    js = json.loads(ab_command.verdict(out, "json", "box", [])[0])
    assert js["failed"] and js["outcome"] == "FAIL" and all(r["host_busy"] for r in js["rows"])


def test_a_slowdown_within_the_host_s_margin_on_a_busy_host_stays_contaminated():
    out = ab.run(None, CpuHost(both(EAGER_CPU, {c: 1.6 for c in EAGER_CPU}), load=loaded, noise=0.03),
                 A, B)
    assert {r.status for r in ab.rows(out)} == {compare.CONTAMINATED}


def test_a_spike_on_one_side_of_a_few_pairs_is_contaminated_never_judged():
    """The rounds of GELU 2^14 float16 eager in the end-to-end trial of the 3x slowdown on the 2-core
    host under a load of 12: the base read 8-12 ms in the rounds it went first, against 0.05 ms;
    the crossover fit took those spikes for a period effect and its interval, 0.080-0.404x, lay
    wholly below 1 / 2: an "improvement" of a 3x slowdown. Not every pair is beyond the margin:
    contaminated."""
    busy = ["other processes share the CPU (load 12 on 2 cores, 2 thread(s) ours)"]
    r = ab.CaseRounds("gelu/eager/16384/float16", CaseInfo(1), CaseInfo(1))
    for first, b, h in ((ab.HEAD, 19.8145, 18.0987), (ab.BASE, 11.9399, 0.1787), (ab.HEAD, 0.0512, 0.1444),
                        (ab.BASE, 8.0346, 0.1419), (ab.HEAD, 0.0468, 0.1437)):
        r.base.append({"wall_time_ms": b, "contamination": busy})
        r.head.append({"wall_time_ms": h, "contamination": busy})
        r.first.append(first)
    v = ab.judge(WALL, r)
    assert v.status == compare.CONTAMINATED and v.high < 0.5  # the interval alone would have judged it


def test_an_a_a_on_a_loaded_cpu_host_has_no_regression():
    """Same code both sides on the loaded host, pairs of 10 % noise: 0 regressions, whatever else."""
    for seed in range(4):
        out = ab.run(None, CpuHost(both(EAGER_CPU), load=loaded, noise=0.10, seed=seed), A, B)
        rows = ab.rows(out)
        assert not compare.failed_gate(rows)
        assert {r.status for r in rows} <= {compare.SAME, compare.BLIND, compare.CONTAMINATED}


def blind_pairs(case: str, ratios: list[float]) -> ab.CaseRounds:
    """Wall-time rounds of one case whose head/base ratios are ``ratios``, clean, in both orders."""
    r = ab.CaseRounds(case, CaseInfo(1), CaseInfo(1))
    for i, x in enumerate(ratios):
        r.base.append({"wall_time_ms": 1.0, "contamination": []})
        r.head.append({"wall_time_ms": x, "contamination": []})
        r.first.append(ab.BASE if i % 2 == 0 else ab.HEAD)
    return r


def test_a_limit_beyond_the_host_s_margin_is_blind_not_same():
    """Issue 54: the two "same" of the trial had limits of 3.6x and 5.9x: they could see nothing."""
    wide = ab.judge(WALL, blind_pairs("gelu/eager/65536/float32", [0.5, 0.6, 2.1, 1.9]))
    assert wide.status == compare.BLIND and wide.limit > 2.0 and "beyond the host's margin of 2x" in wide.note
    narrow = ab.judge(WALL, blind_pairs("gelu/eager/65536/float32", [0.98, 1.03, 1.0, 1.01]))
    assert narrow.status == compare.SAME and narrow.limit < 1.6


def test_a_session_mostly_blind_is_inconclusive_exit_2_with_a_command_that_runs():
    from fusebench.commands import ab as ab_command

    cases = [blind_pairs(f"gelu/eager/{n}/float32", [0.5, 0.6, 2.1, 1.9]) for n in (65536, 262144)]
    cases.append(blind_pairs("gelu/torch/65536/float32", [0.98, 1.03, 1.0, 1.01]))
    out = ab.Outcome(A, B, False, ab.FACTOR, ab.ALPHA, ab.TARGET, 4, 16, cases, {}, 1.0)
    text, lines, code = ab_command.verdict(out, "text", "box", [])
    assert code == 2 and lines[-1].endswith("2 blind, 0 fixed, 0 improvement, 0 not on both sides, "
                                            "0 launch path, 1 same -> inconclusive"), lines[-1]
    why = next(line for line in lines if line.startswith("ab: inconclusive: "))
    assert "2 of 3 case-metrics judged are blind (limit " in why
    rerun = why.split("with more pairs: ", 1)[1]
    assert rerun == (f"{sys.executable} -m fusebench ab --base {'a' * 12} --head {'b' * 12} --all --ops gelu "
                     "--backends eager --dtypes float32 --shapes 262144,65536 --max-pairs 32 --time-cap 1200")
    args = commands.parser("ab").parse_args(shlex.split(rerun)[3:])  # the options parse as printed
    assert (args.base, args.backends, args.max_pairs, args.time_cap) == ("a" * 12, "eager", 32, 1200.0)
    assert " ? " in text and "first column: ? blind" in text
    md = ab_command.verdict(out, "markdown", "box", [])[0]
    assert "-> inconclusive**" in md and "**Inconclusive**: 2 of 3 case-metrics" in md and rerun in md
    js = json.loads(ab_command.verdict(out, "json", "box", [])[0])
    assert js["inconclusive"] and js["outcome"] == "inconclusive" and js["statuses"]["blind"] == 2
    assert js["rerun"] == rerun
    # one blind of three is not mostly blind: ok
    out.cases = cases[1:] + [blind_pairs("gelu/torch/262144/float32", [0.98, 1.03, 1.0, 1.01])]
    assert ab_command.verdict(out, "text", "box", [])[2] == 0


def test_a_different_pick_of_the_compiler_is_a_different_kernel_never_a_regression():
    case = "softmax/compile/4096x4096/bfloat16"
    infos = {(ab.BASE, case): CaseInfo(1, "aaaa", True, 100, 100),
             (ab.HEAD, case): CaseInfo(1, "bbbb", True, 100, 100)}
    out = ab.run(None, Fake(both({case: 0.0421}, {case: 1.158}), infos=infos), A, B)
    assert set(statuses(out)) == {compare.DIFFERENT_KERNEL}
    assert "kernel aaaa -> bbbb" in ab.rows(out)[0].note


SOFTMAX_COIN = "softmax/compile/1024x32768/float16"


def first_base_process_picks_16384(side, gen, case):
    """The whole-grid A/A at ee43681 on an H200: the base's first process autotuned R0_BLOCK
    16384 (85.5 us), every later process of both sides 2048 (69.7 us)."""
    return "r16384" if side == ab.BASE and gen == 0 else "r2048"


def test_a_pick_that_differs_between_processes_in_some_rounds_is_judged_on_the_rounds_that_agree():
    def slow(side, gen, case):
        return 85.5 / 69.7 if first_base_process_picks_16384(side, gen, case) == "r16384" else 1.0

    m = Fake(both({SOFTMAX_COIN: 0.0697}), process=slow, pick=first_base_process_picks_16384)
    out = ab.run(None, m, A, B, min_pairs=4, max_pairs=4)
    rounds = out.cases[0]
    assert [r["kernel_id"] for r in rounds.base] == ["r16384", "r2048", "r2048", "r2048"]
    assert [r["kernel_id"] for r in rounds.head] == ["r2048"] * 4
    rows = ab.rows(out)
    assert {r.status for r in rows} == {compare.SAME}
    assert all(r.note.startswith("3 pairs") and "kernel r16384/r2048 -> r2048 in 1 of 4 rounds" in r.note
               for r in rows), rows[0].note
    assert all(abs(r.slowdown - 1.0) < 0.01 for r in rows)
    # judged again from the stored session: the same rows
    again = ab.from_dict(json.loads(json.dumps(out.to_dict())))
    assert [(r.status, r.slowdown) for r in ab.rows(again)] == [(r.status, r.slowdown) for r in rows]
    # one process per side: the first picks decide every round, a different kernel, never a regression
    kept = ab.run(None, Fake(both({SOFTMAX_COIN: 0.0697}), process=slow, pick=first_base_process_picks_16384),
                  A, B, min_pairs=4, max_pairs=4, process_rounds=0)
    assert {r.status for r in ab.rows(kept)} == {compare.DIFFERENT_KERNEL}


def test_a_coin_in_every_process_never_flags_an_a_a_and_a_changed_kernel_still_shows():
    coin = random.Random(7)
    picks = {}

    def pick(side, gen, case):  # each fresh process autotunes anew: 2048 or 4096, 3 : 2
        return picks.setdefault((side, gen, case), "r4096" if coin.random() < 0.6 else "r2048")

    slow = lambda side, gen, case: 1.16 if pick(side, gen, case) == "r2048" else 1.0  # noqa: E731
    out = ab.run(None, Fake(both({SOFTMAX_COIN: 0.0413}), process=slow, pick=pick, seed=3), A, B,
                 max_pairs=12)
    assert {r.status for r in ab.rows(out)} <= {compare.SAME, compare.WITHIN_NOISE, compare.DIFFERENT_KERNEL}
    changed = ab.run(None, Fake(both({SOFTMAX_COIN: 0.0413}, {SOFTMAX_COIN: 1.10}),
                                pick=lambda side, gen, case: side), A, B)
    assert {r.status for r in ab.rows(changed)} == {compare.DIFFERENT_KERNEL}
    assert all("kernel base -> head" in r.note for r in ab.rows(changed))


def test_a_bad_kernel_id_in_a_stored_round_is_refused():
    out = ab.run(None, Fake(both({SOFTMAX_COIN: 0.0413}), pick=lambda side, gen, case: "k1"), A, B,
                 min_pairs=2, max_pairs=2)
    data = json.loads(json.dumps(out.to_dict()))
    data["cases"][0]["head"][1]["kernel_id"] = "../x"
    with pytest.raises(ValueError, match=r"head\[1\]: bad kernel id"):
        ab.from_dict(data)


def test_a_case_that_fails_to_build_at_head_is_a_new_failure_and_one_skipped_is_not_judged():
    ms = both({"gelu/cuda/1024/float32": 0.003, "gelu/triton/1024/float32": 0.003})
    del ms[ab.HEAD]["gelu/cuda/1024/float32"]
    del ms[ab.BASE]["gelu/triton/1024/float32"]
    del ms[ab.HEAD]["gelu/triton/1024/float32"]
    not_built = {ab.HEAD: {"gelu/cuda/1024/float32": "failed: correctness gate: max rel error 0.5",
                           "gelu/triton/1024/float32": "skipped: triton is not installed"},
                 ab.BASE: {"gelu/triton/1024/float32": "skipped: triton is not installed"}}
    out = ab.run(None, Fake(ms, not_built=not_built), A, B)
    by_case = {r.params[0]: r for r in ab.rows(out)}
    assert by_case["cuda"].status == compare.NEW_FAILURE and "max rel error" in by_case["cuda"].note
    assert by_case["triton"].status == compare.NOT_BOTH
    assert "triton is not installed" in by_case["triton"].note
    assert compare.failed_gate(ab.rows(out))


def test_a_stream_figure_of_the_launch_path_gates_on_its_graph_figure():
    case = "gelu/eager/1024/float32"
    m = Fake(both({case: 0.018}, {case: 1.10}))
    orig = m.time

    def time(side, c):  # hot 18 us in the stream, 10 us in a graph: the host's gaps
        fig = orig(side, c)
        fig["device_time_graph_ms"] = 0.010 * (1.0 if side == ab.BASE else 1.0)
        return fig

    m.time = time
    rows = {r.benchmark.rsplit(".", 1)[1]: r.status for r in ab.rows(ab.run(None, m, A, B))}
    assert rows["track_device_time"] == compare.LAUNCH_PATH
    assert rows["track_device_time_graph"] == compare.SAME


def test_a_side_that_cannot_start_is_one_error():
    class NoBuild(Fake):
        def start(self, side, commit):
            if side == ab.HEAD:
                raise ProbeFailed("ImportError: no module named kernels")
            return super().start(side, commit)

    m = NoBuild(both({"gelu/torch/1024/float32": 0.003}))
    with pytest.raises(ab.ABError, match="head bbbbbbbb could not be measured: ImportError"):
        ab.run(None, m, A, B)
    assert sorted(m.stopped) == [ab.BASE, ab.HEAD]


def test_the_session_judged_again_gives_the_same_rows_and_bad_figures_are_refused():
    out = ab.run(None, Fake(both(CASES, {"gelu/triton/1048576/float32": 1.06}), seed=2), A, B)
    data = json.loads(json.dumps(out.to_dict()))
    again = ab.from_dict(data)
    assert [(r.status, round(r.slowdown, 9)) for r in ab.rows(again)] == \
        [(r.status, round(r.slowdown, 9)) for r in ab.rows(out)]
    for bad, message in ((float("nan"), "not a finite number"), (-1.0, "not a finite number"), (0, "above 0"),
                         ("fast", "not a finite number")):
        broken = json.loads(json.dumps(data))
        broken["cases"][0]["head"][0]["device_time_ms"] = bad
        with pytest.raises(ValueError, match=message):
            ab.from_dict(broken)
    broken = json.loads(json.dumps(data))
    broken["cases"][0]["case"] = "<img src=x>/a/1/b"
    with pytest.raises(ValueError, match="bad case name"):
        ab.from_dict(broken)


def run_cli(*argv, cwd=PROJECT_ROOT):
    return subprocess.run([sys.executable, "-m", "fusebench", "ab", *argv], cwd=cwd, capture_output=True,
                          text=True)


@pytest.mark.slow
def test_exit_codes_from_stored_sessions(tmp_path):
    """1 on a regression, 0 on none, 2 when nothing was judged or the file is not a session; the
    markdown names the rule's p and limit."""
    def session(name, head_factor, ms=None):
        out = ab.run(None, Fake(both(ms or CASES, head_factor), seed=4), A, B)
        path = tmp_path / name / "ab.json"
        path.parent.mkdir()
        path.write_text(json.dumps(out.to_dict()))
        return path

    slow = session("slow", {"gelu/triton/67108864/float32": 1.05})
    r = run_cli("--from", str(slow), "--format", "markdown")
    assert r.returncode == 1, r.stderr
    assert "| + | regression | `Gelu.track_device_time` (triton, 67108864, float32)" in r.stdout
    assert "paired t-test" in r.stdout and "-> FAIL" in r.stderr
    assert ", factor 1.02): " in r.stderr  # device times only: no wall time's margin named
    same = session("same", {})
    assert run_cli("--from", str(same)).returncode == 0
    none = tmp_path / "none" / "ab.json"
    none.parent.mkdir()
    data = json.loads(same.read_text())
    data["cases"] = []
    none.write_text(json.dumps(data))
    r = run_cli("--from", str(none))
    assert r.returncode == 2 and "the selection holds no case either side built on this host" in r.stderr
    assert "table above" not in r.stderr  # no table is printed for no case
    bad = tmp_path / "bad.json"
    bad.write_text('{"base": 1}')
    r = run_cli("--from", str(bad))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "not a valid session" in r.stderr
    bad.write_text(json.dumps(dict(json.loads(same.read_text()), snapshot="\x1b[2J--all")))
    r = run_cli("--from", str(bad))
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "not a valid session: snapshot: not a commit sha" in r.stderr


OPS = {"gelu": ("eager", "torch", "compile", "triton", "cuda"),
       "softmax": ("eager", "torch", "compile", "triton", "cuda", "liger"),
       "rmsnorm": ("eager", "torch", "compile", "triton")}


@pytest.mark.parametrize("path, pairs", [
    ("kernels/gelu/triton.py", (("gelu", "triton"),)),
    ("kernels/gelu/__init__.py", tuple(("gelu", b) for b in OPS["gelu"])),
    ("kernels/gelu/gelu.cu", (("gelu", "cuda"), ("softmax", "cuda"))),
    ("kernels/reference_libs.py", (("softmax", "liger"),)),
    ("kernels/gelu/tuning.py", (("gelu", ab_cases.EVERY),)),
    ("fusebench/gate/compare.py", ()),
    ("fusebench/measure/timing.py", None),
    ("requirements.lock", None),
])
def test_the_cases_follow_the_changed_files(path, pairs):
    choice = ab_cases.choose([path], OPS)
    assert choice.pairs == pairs
    assert choice.reasons[0][0] == path


def test_changed_files_ignore_comments_and_see_uncommitted_and_untracked_files(tmp_path):
    repo = tmp_path / "r"
    (repo / "kernels" / "gelu").mkdir(parents=True)
    triton = repo / "kernels" / "gelu" / "triton.py"
    triton.write_text("def f(x):\n    return x + 1\n")
    (repo / "README.md").write_text("hi\n")
    git(tmp_path, "init", "-q", "-b", "main", str(repo))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "a")
    triton.write_text("def f(x):\n    # a comment\n    return x + 1  # and another\n")
    (repo / "README.md").write_text("changed\n")
    git(repo, "commit", "-qam", "comments")
    assert ab_cases.changed_files(repo, "HEAD~1", "HEAD") == []
    triton.write_text("def f(x):\n    return x + 2\n")
    (repo / "kernels" / "gelu" / "new.py").write_text("y = 1\n")
    assert ab_cases.changed_files(repo, "HEAD", None) == ["kernels/gelu/new.py",
                                                          "kernels/gelu/triton.py"]


def test_the_head_with_changes_is_a_commit_taken_once_and_later_edits_do_not_reach_it(tmp_path):
    """A/B of uncommitted changes: the head's fresh processes of later rounds run what the checkout
    held at the start (on an H200, a working tree rewritten mid-session had rounds 3-4 of the
    head time the old kernel). The user's index, HEAD and files are untouched; only files under
    the measured roots are taken; the same changes give the same commit."""
    repo = tmp_path / "r"
    (repo / "kernels" / "gelu").mkdir(parents=True)
    triton = repo / "kernels" / "gelu" / "triton.py"
    triton.write_text("def f(x):\n    return x + 1\n")
    (repo / "kernels" / "gelu" / "gone.py").write_text("z = 0\n")
    (repo / "README.md").write_text("hi\n")
    (repo / ".gitignore").write_text("*.pyc\n")
    git(tmp_path, "init", "-q", "-b", "main", str(repo))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "a")
    head = git(repo, "rev-parse", "HEAD")
    triton.write_text("def f(x):\n    return x + 2\n")
    (repo / "kernels" / "gelu" / "new.py").write_text("y = 1\n")
    (repo / "kernels" / "gelu" / "junk.pyc").write_bytes(b"ignored")
    (repo / "kernels" / "gelu" / "gone.py").unlink()
    (repo / "README.md").write_text("not measured\n")
    before = git(repo, "status", "--porcelain")
    snap = bisect_git.snapshot(repo, head, ("kernels/", "Dockerfile"))
    assert bisect_git.snapshot(repo, head, ("kernels/", "Dockerfile")) == snap
    assert git(repo, "rev-parse", f"{snap}^") == head
    assert git(repo, "ls-tree", "-r", "--name-only", snap).split() == [
        ".gitignore", "README.md", "kernels/gelu/new.py", "kernels/gelu/triton.py"]
    assert git(repo, "show", f"{snap}:README.md") == "hi"  # outside the roots: HEAD's
    assert git(repo, "status", "--porcelain") == before and git(repo, "diff", "--cached") == ""
    assert git(repo, "rev-parse", "HEAD") == head
    tree = bisect_git.worktree(repo, tmp_path / "cache" / "worktrees", snap)
    triton.write_text("def f(x):\n    return x + 3\n")  # edited while the rounds run
    assert (tree / "kernels" / "gelu" / "triton.py").read_text() == "def f(x):\n    return x + 2\n"
    assert bisect_git.worktree(repo, tmp_path / "cache" / "worktrees", snap) == tree
    assert ab_cases.changed_files(repo, head, snap) == ["kernels/gelu/gone.py", "kernels/gelu/new.py",
                                                        "kernels/gelu/triton.py"]


def test_what_a_measurement_imports_is_outside_not_run():
    """The child's imports (the ops, the sweep, timing, environment) load no module of the folders
    ab_cases.NOT_RUN calls unmeasured, so a change there cannot move a figure."""
    code = ("import sys; import fusebench; from fusebench import ops; ops.configured(None); "
            "from fusebench.measure import environment, sweep, timing, launches; import fusebench.backends; "
            "print('\\n'.join(m for m in sys.modules if m.startswith('fusebench')))")
    mods = subprocess.run([sys.executable, "-c", code], cwd=PROJECT_ROOT, capture_output=True, text=True,
                          check=True).stdout.split()
    paths = {m.replace(".", "/") for m in mods}
    assert "fusebench/measure/sweep" in paths
    offending = [m for m in paths if any((m + "/").startswith(p) or m + ".py" == p for p in ab_cases.NOT_RUN)]
    assert offending == []


def test_the_child_selects_the_commit_s_own_grid():
    op = SimpleNamespace(name="gelu", grids={"cpu": [(1024,), (4, 4)], "default": [(1 << 20,)]},
                         dtypes=("float32", "bfloat16"), backends={"eager": 1, "torch": 1, "triton": 1})
    sweep = SimpleNamespace(grid_name=lambda dev, quick: "cpu")
    sel = {"pairs": [["gelu", "triton"]], "dtypes": ["float32"], "shapes": None}
    assert bisect_child.selected(sel, {"gelu": op}, sweep, None) == ["gelu/triton/1024/float32",
                                                                      "gelu/triton/4x4/float32"]
    sel = {"pairs": [["gelu", "*"]], "dtypes": None, "shapes": ["4x4"]}
    assert len(bisect_child.selected(sel, {"gelu": op}, sweep, None)) == 6
    every = {"pairs": None, "dtypes": None, "shapes": None}
    assert bisect_child.selected(every, {"gelu": op}, sweep, None)[0] == "gelu/eager/1024/float32"


def test_the_autotuner_s_pick_is_named():
    """Inductor's CachingAutotuner keeps one launcher once it picked: its config is the kernel."""
    def tuner(name, *configs):
        return SimpleNamespace(inductor_meta={"kernel_name": name}, launchers=[
            SimpleNamespace(config=SimpleNamespace(kwargs=c, num_warps=16, num_stages=1)) for c in configs])

    module = SimpleNamespace(triton_per_fused_0=tuner("triton_per_fused__softmax_0",
                                                      {"XBLOCK": 1, "R0_BLOCK": 4096}),
                             undecided=tuner("triton_red_1", {"XBLOCK": 1}, {"XBLOCK": 2}), other=3)
    assert autotuned([module]) == (
        "triton_per_fused__softmax_0 R0_BLOCK=4096 XBLOCK=1 num_warps=16 num_stages=1",)
    other = SimpleNamespace(k=tuner("triton_per_fused__softmax_0", {"XBLOCK": 1, "R0_BLOCK": 2048}))
    assert autotuned([other]) != autotuned([module])


@pytest.fixture
def repo(tmp_path):
    """A repository of this checkout's code, at its second commit (a note after the base)."""
    repo, shas = throwaway.make(tmp_path)
    git(repo, "reset", "-q", "--hard", shas[1])
    return repo


@pytest.mark.slow
def test_ab_on_the_cpu_end_to_end(repo, tmp_path):
    """The real children on a throwaway repository: a note changes no measured code (nothing to
    measure, exit 0); GELU's torch backend made 2 ms slower in the working tree is the head "with
    changes", the change selects every GELU backend, and the narrowed case is a regression of
    wall time (the CPU's only time), exit 1, its rounds kept in the session."""
    common = ["--repo", str(repo), "--cache", str(tmp_path / "cache"), "--scratch", str(tmp_path / "ab")]
    r = run_cli("--base", "HEAD~1", "--head", "HEAD", *common)
    assert r.returncode == 0, r.stderr
    assert "0 file(s) of the harness or the kernels differ" in r.stderr and "nothing to measure" in r.stderr
    throwaway.slow_down(repo)
    r = run_cli("--base", "HEAD", "--backends", "torch", "--dtypes", "float32", "--shapes", "16384",
                "--min-pairs", "3", "--max-pairs", "3", "--format", "json", *common)
    assert "kernels/gelu/__init__.py -> gelu/every backend" in r.stderr, r.stderr
    assert "with the checkout's uncommitted changes as they are now, taken as commit " in r.stderr
    assert git(repo, "status", "--porcelain") == "M kernels/gelu/__init__.py"  # left as it was:
    assert git(repo, "diff", "--cached", "--name-only") == ""  # not staged
    out = json.loads(r.stdout)
    assert out["head_dirty"] is True and out["pairs"] == {"gelu/torch/16384/float32": 3}
    assert out["phases"]["fresh processes"] > 0  # rounds 2 and 3 each in a fresh pair of children
    (row,) = out["rows"]
    if row["status"] == "contaminated":
        pytest.skip(f"the rounds were contaminated on this CPU: {row['note']}")
    assert row["status"] == "regression" and row["slowdown"] > 10, row
    assert r.returncode == 1
    (session,) = (tmp_path / "ab").iterdir()
    assert session.name.endswith(session.name[-16:]) and "-dirty-" in session.name
    assert sorted(p.name for p in (session / "logs").iterdir()) == ["base.log", "head.log"]
    snap = json.loads((session / "ab.json").read_text())["snapshot"]
    shown = subprocess.run(f"git -C {repo} show {snap[:8]}".split(), capture_output=True, text=True)
    assert f"(git -C {repo} show {snap[:8]})" in r.stderr and shown.returncode == 0  # runs as printed
    assert f" with changes ({snap[:8]}) (1 case(s)" in r.stderr  # the verdict names what ran
    assert git(repo, "show", f"{snap}:kernels/gelu/__init__.py") == \
        (repo / "kernels" / "gelu" / "__init__.py").read_text().rstrip("\n")
    again = run_cli("--from", str(session / "ab.json"), "--format", "json")
    assert f" with changes ({snap[:8]}) " in again.stderr
    assert json.loads(again.stdout)["rows"][0]["status"] == "regression" and again.returncode == 1
    assert ", factor 1.02, wall time 1.5): " in again.stderr  # the CPU's margin, as judged


def test_the_session_so_far_is_handed_over_after_every_pass():
    """The command stores it each time: a run stopped on the way keeps every round it made."""
    seen = []
    m = Fake(both({"gelu/torch/1024/float32": 0.003}), noise=0.05)
    ab.run(None, m, A, B, min_pairs=2, max_pairs=5,
           on_round=lambda partial: seen.append(json.loads(json.dumps(partial.to_dict()))))
    assert [len(ab.from_dict(s).cases[0].base) for s in seen] == [1, 2, 3, 4]


OTHER_TYPES = [("not_built", []), ("phases", "x"), ("cases", [{"case": "a/b/1/c", "base": "x"}])]


@pytest.mark.parametrize("field, value", OTHER_TYPES)
def test_a_session_with_fields_of_other_types_is_one_value_error(field, value):
    out = ab.run(None, Fake(both({"gelu/torch/1024/float32": 0.003})), A, B)
    data = json.loads(json.dumps(out.to_dict()))
    data[field] = value
    with pytest.raises(ValueError):
        ab.from_dict(data)


def wall_only(base_ms, head_ms, jitter=0.02, seed=5):
    rng = random.Random(seed)
    return SimpleNamespace(
        start=lambda side, commit: ({"gelu/torch/16384/float32": CaseInfo()}, {}),
        time=lambda side, case: {"wall_time_ms": (base_ms if side == ab.BASE else head_ms)
                                 * math.exp(rng.gauss(0, jitter)), "contamination": []},
        stop=lambda side: None, renew=lambda cases: ({}, {}))


def test_on_a_host_without_a_gpu_wall_time_is_judged_with_the_wide_margin():
    """Wall time holds the whole host: a sure 1.3x between two processes is within noise there, a
    2 ms sleep (30x) a regression."""
    out = ab.run(None, wall_only(0.06, 0.078), A, B)
    (row,) = ab.rows(out)
    assert row.benchmark.endswith("track_wall_time") and row.status == compare.SAME
    assert row.limit >= ab.WALL_FACTOR and len(out.cases[0].base) < ab.MAX_PAIRS  # it stops, too
    (row,) = ab.rows(ab.run(None, wall_only(0.06, 2.06), A, B))
    assert row.status == compare.REGRESSION


@pytest.mark.slow
def test_an_unknown_shape_is_one_line_with_the_closest(tmp_path):
    r = run_cli("--base", "HEAD", "--all", "--shapes", "1638", "--scratch", str(tmp_path))
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert "unknown shape '1638' (did you mean 16384?)" in r.stderr
    assert not any(tmp_path.iterdir())  # refused before a session was made
    if not torch.cuda.is_available():  # a shape of the GPU grid: no case on this host, refused
        r = run_cli("--base", "HEAD", "--ops", "gelu", "--shapes", "16777216", "--scratch", str(tmp_path))
        assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
        assert "unknown shape '16777216'" in r.stderr and "this host measures the CPU grid" in r.stderr
        assert not any(tmp_path.iterdir())


def test_the_cases_not_built_are_counted_by_reason():
    """A new user on a CPU host read "36 not built" with no reason; the reasons are counted, cut
    before their install hint."""
    failures = {f"gelu/triton/{n}/float32": "skipped: triton needs a GPU" for n in range(3)}
    failures |= {f"gelu/flaggems/{n}/float32": "skipped: flag-gems 5.0.2 is not installed; install the "
                 "reference group: make venv REFERENCE=1" for n in range(2)}
    failures["gelu/cuda/1/float32"] = "failed: nvcc died"
    failures["gelu/cuda/2/float32"] = "skipped: cuda needs a GPU"
    assert ab.why_not_built(failures) == ("3 skipped: triton needs a GPU; 2 skipped: flag-gems 5.0.2 is "
                                          "not installed; 1 failed: nvcc died; and 1 more")
    assert ab.why_not_built({"a": "skipped: x"}) == "1 skipped: x"
