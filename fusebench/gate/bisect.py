"""Which commit made a case slower: the search and each probe's verdict, over a pluggable measurer.

``fusebench bisect GOOD BAD --case op/backend/shape/dtype`` (``fusebench.commands.bisect``) hands
this module the first-parent line from GOOD to BAD and a measurer (``fusebench.gate.bisect_probe``
measures each commit with its own code in a child process; the tests use a stand-in). Nothing
here runs git or touches a device.

**Commits.** ``commits[0]`` is GOOD, ``commits[n]`` is BAD; the first BAD commit is one of
``commits[1..n]``. The search probes the middle of the range still open, so a step anywhere is
found in ceil(log2 n) probes when every probe is decisive.

**Rounds.** GOOD and BAD are measured first, in interleaved rounds, until the gate calls every
named case a regression from GOOD to BAD (else there is nothing to bisect). Each probe is then
measured in a block of interleaved rounds beside fresh rounds of GOOD and BAD (the order of the
three rotates from round to round, so that a drift of the machine lands on all of them), and
judged on that block alone.

**Verdict of a probe, per case**, with the gate's rule (:func:`gate`, the one call of
``fusebench.gate.compare.judge``) applied three times on the block's rounds:

* **like BAD**: GOOD -> probe is a regression, and probe -> BAD is ``same`` or ``improvement``;
* **like GOOD**: probe -> BAD is a regression, and GOOD -> probe is ``same`` or ``improvement``;
* **ambiguous**: anything else (GOOD -> BAD not a regression in this block, a partial step,
  a figure within noise, contaminated, a different kernel chosen by the compiler).

A probe is GOOD or BAD when every case says so, else ambiguous. An ambiguous probe is measured in
more rounds (``rounds`` at a time, up to ``max_rounds``), then reported as ambiguous and never
guessed; a commit whose measurer fails (no build, a case failing) is **skipped** and named. The
search then probes the open commit nearest the middle; when none is left, the answer is the
smallest range the first BAD commit lies in.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import Callable, Mapping, Protocol, Sequence

from fusebench import metrictable
from fusebench.gate import compare, paired
from fusebench.record import clean_rounds, short_batch

GOOD, BAD, AMBIGUOUS, SKIPPED = "good", "bad", "ambiguous", "skipped"
#: The statuses of the gate that count as "no change" (or a change the other way) in a verdict.
_NOT_WORSE = (compare.SAME, compare.IMPROVEMENT)
#: Orders of (GOOD, BAD) and of (GOOD, BAD, probe) in successive rounds: each side in each
#: position equally often.
ORDERS = {2: ((0, 1), (1, 0)), 3: ((0, 1, 2), (2, 1, 0), (1, 2, 0), (0, 2, 1), (2, 0, 1), (1, 0, 2))}


class ProbeFailed(Exception):
    """A commit could not be measured (no build, a case failing): the message says why, one line."""


class BisectError(Exception):
    """GOOD or BAD could not be measured, or gave no figure of the metric: the search cannot start."""


@dataclass(frozen=True)
class Commit:
    """One commit of the first-parent line."""

    sha: str
    subject: str = ""

    @property
    def short(self) -> str:
        return self.sha[:8]


@dataclass(frozen=True)
class CaseInfo:
    """What a measurer learnt of one case when it built it (launches per call, the kernels, the
    hot and graph batch sizes; ``kernels``: each launch with its geometry, and a compiled case's
    autotuned launch configurations)."""

    launches: int | None = None
    kernel_id: str | None = None
    kernel_by_timing: bool = False
    hot_calls: int | None = None
    graph_calls: int | None = None
    kernels: tuple[str, ...] = ()


class Measurer(Protocol):
    """Measures commits, each with its own code; the search holds GOOD and BAD open throughout
    and at most one probe beside them."""

    def start(self, commit: Commit, cases: Sequence[str]) -> Mapping[str, CaseInfo]:
        """Build ``cases`` at ``commit`` (``op/backend/shape/dtype``). Raises ProbeFailed."""

    def round(self, commit: Commit) -> Mapping[str, dict]:
        """One round of every case: per case the sweep's round figures (``device_time_ms``,
        ``wall_time_ms``, ... in ms; ``contamination``: list of reasons). Raises ProbeFailed."""

    def stop(self, commit: Commit) -> None:
        """Release what :meth:`start` built (never raises)."""


@dataclass
class Side:
    """One commit's rounds of one case in one block."""

    info: CaseInfo
    rounds: list[dict] = field(default_factory=list)


@dataclass(frozen=True)
class Judged:
    """The gate's judgement of one case from ``base`` to ``head`` (see ``compare.judge``)."""

    status: str
    slowdown: float
    limit: float
    p_value: float | None
    note: str = ""


def _values(side: Side, field_name: str) -> tuple[tuple[float, ...], tuple[str, ...]]:
    rounds, contamination = clean_rounds(side.rounds)
    return tuple(r[field_name] for r in rounds if r.get(field_name) is not None), tuple(contamination)


@dataclass(frozen=True)
class Rule:
    """What the gate is asked: the metric, its factor and significance, and the case's history
    limit (``history(case, per-launch ms)``, e.g. ``fusebench.gate.noise.History.limit``'s
    answer; None: the rounds rule alone)."""

    metric: metrictable.Metric
    factor: float = metrictable.DEFAULT_FACTOR
    alpha: float = compare.ALPHA
    history: Callable[[str, float | None], object] | None = None


def _median(side: Side, field_name: str) -> float | None:
    values, _ = _values(side, field_name)
    return statistics.median(values) if values else None


def _case(side: Side, metric: metrictable.Metric) -> compare.Case:
    """The gate's view of one side: values in the metric's unit (as ``compare.case_of``)."""
    values, contamination = _values(side, metric.field)
    batch = {"device_time_ms": side.info.hot_calls, "device_time_graph_ms": side.info.graph_calls}
    if values and (short := short_batch(metric.field, batch.get(metric.field), statistics.median(values))):
        contamination = (*contamination, short)  # as compare.case_of: not timed the method's way
    values = [v * metric.scale for v in values]
    med = statistics.median(values) if values else 0.0
    noise = (max(values) - min(values)) / med if len(values) > 1 and med > 0 else 0.0
    hot = _median(side, "device_time_ms")
    per_launch = hot / side.info.launches if hot and side.info.launches else None
    return compare.Case(values, False, noise, per_launch, contamination, side.info.kernel_id,
                        side.info.kernel_by_timing, _median(side, "device_time_graph_ms"), side.info.launches)


def gate(rule: Rule, case: str, base: Side, head: Side) -> Judged:
    """The gate's rule from ``base`` to ``head``: the one place that calls ``compare.judge``.

    A case contaminated on either side (a busy host, a throttled board) is judged on its pairs
    when its rounds were timed in turn (round i of each side one after the other, as
    :func:`_rounds` does): a regression or an improvement whose paired interval and every pair
    lie beyond the host's margin is kept, marked ``host busy; paired`` (``compare.busy_but_beyond``)."""
    b, h = _case(base, rule.metric), _case(head, rule.metric)
    history = rule.history(case, b.per_launch_ms) if rule.history else None
    status, slowdown, limit, p, note = compare.judge(rule.metric, b, h, rule.factor, rule.alpha, history)
    if status == compare.CONTAMINATED and rule.metric.field.endswith("_ms"):
        fld = rule.metric.field
        pairs = [(x[fld], y[fld]) for x, y in zip(base.rounds, head.rounds) if x.get(fld) and y.get(fld)]
        if len(pairs) >= 2:
            ratio, low, high, *_ = paired.interval(pairs, rule.alpha)
            status, busy = compare.busy_but_beyond(compare.REGRESSION if ratio > 1 else compare.IMPROVEMENT,
                                                   low, high, [y / x for x, y in pairs], rule.metric,
                                                   b.contamination + h.contamination)
            note = busy if status != compare.CONTAMINATED else note
    return Judged(status, slowdown, limit, p, note)


def median_of(side: Side, metric: metrictable.Metric) -> float:
    """The median of the metric over the side's rounds used by the gate (NaN when none)."""
    values, _ = _values(side, metric.field)
    return statistics.median(values) if values else math.nan


@dataclass(frozen=True)
class CaseVerdict:
    """One case of one probe: the medians (ms), the three judgements of its block, and the
    per-round figures (ms) of each side the medians come from."""

    case: str
    verdict: str
    why: str
    good_ms: float
    probe_ms: float
    bad_ms: float
    reference: Judged
    from_good: Judged
    to_bad: Judged
    good_rounds: tuple[float, ...] = ()
    probe_rounds: tuple[float, ...] = ()
    bad_rounds: tuple[float, ...] = ()


def case_verdict(rule: Rule, case: str, good: Side, bad: Side, probe: Side) -> CaseVerdict:
    """Like GOOD, like BAD or ambiguous (the module doc's rule) for one case of one block."""
    reference = gate(rule, case, good, bad)
    from_good = gate(rule, case, good, probe)
    to_bad = gate(rule, case, probe, bad)
    if reference.status != compare.REGRESSION:
        verdict, why = AMBIGUOUS, f"GOOD -> BAD is {reference.status} in these rounds"
    elif from_good.status == compare.REGRESSION and to_bad.status in _NOT_WORSE:
        verdict, why = BAD, ""
    elif to_bad.status == compare.REGRESSION and from_good.status in _NOT_WORSE:
        verdict, why = GOOD, ""
    else:
        verdict, why = AMBIGUOUS, f"GOOD -> probe {from_good.status}, probe -> BAD {to_bad.status}"
    metric = rule.metric
    return CaseVerdict(case, verdict, why, median_of(good, metric), median_of(probe, metric),
                       median_of(bad, metric), reference, from_good, to_bad, _values(good, metric.field)[0],
                       _values(probe, metric.field)[0], _values(bad, metric.field)[0])


def probe_verdict(cases: Sequence[CaseVerdict]) -> str:
    """GOOD or BAD when every case says so, else ambiguous."""
    verdicts = {c.verdict for c in cases}
    return verdicts.pop() if len(verdicts) == 1 and verdicts <= {GOOD, BAD} else AMBIGUOUS


class Search:
    """The open range of a bisection over ``commits[0..n]`` (0 GOOD, n BAD) and its next probe."""

    def __init__(self, n: int):
        if n < 1:
            raise ValueError(f"need at least one commit after GOOD, got {n}")
        self.n, self.lo, self.hi = n, 0, n
        self.verdicts: dict[int, str] = {}

    def next(self) -> int | None:
        """The open commit nearest the middle of (lo, hi), the lower on a tie; None when every
        commit strictly between the last GOOD and the first BAD was probed."""
        open_ = [i for i in range(self.lo + 1, self.hi) if i not in self.verdicts]
        mid = (self.lo + self.hi) / 2
        return min(open_, key=lambda i: (abs(i - mid), i)) if open_ else None

    def record(self, index: int, verdict: str) -> None:
        """Take a probe's verdict (GOOD and BAD narrow the range; the others mark it unusable).

        Raises:
            ValueError: ``index`` outside the open range, or an unknown verdict.
        """
        if not self.lo < index < self.hi:
            raise ValueError(f"commit {index} is outside the open range ({self.lo}, {self.hi})")
        if verdict not in (GOOD, BAD, AMBIGUOUS, SKIPPED):
            raise ValueError(f"unknown verdict {verdict!r}")
        self.verdicts[index] = verdict
        if verdict == GOOD:
            self.lo = index
        elif verdict == BAD:
            self.hi = index

    @property
    def first_bad(self) -> int | None:
        """The first BAD commit's index when the range is down to one commit."""
        return self.hi if self.hi - self.lo == 1 else None

    def unresolved(self) -> list[int]:
        """The commits in the open range that were probed without a GOOD or BAD answer."""
        return [i for i in range(self.lo + 1, self.hi) if i in self.verdicts]


@dataclass
class Probe:
    """One probed commit: its verdict, why, the rounds it took and the seconds spent on it."""

    index: int
    sha: str
    subject: str
    verdict: str
    why: str = ""
    rounds: int = 0
    start_s: float = 0.0
    rounds_s: float = 0.0
    cases: list[CaseVerdict] = field(default_factory=list)


@dataclass
class Outcome:
    """A bisection's answer. ``status``: ``found`` (``first_bad`` named), ``range`` (the first BAD
    commit is one of ``candidates``; the probes among them were ambiguous or skipped) or ``no
    regression`` (the gate did not call GOOD -> BAD a regression on every case). ``reference``:
    GOOD -> BAD per case (verdict ``bad`` when a regression), from ``reference_rounds`` rounds."""

    status: str
    good: Commit
    bad: Commit
    commits: int
    metric: str
    factor: float
    alpha: float
    reference: list[CaseVerdict]
    reference_rounds: int
    probes: list[Probe]
    first_bad: Commit | None
    candidates: list[Commit]
    seconds: float
    phases: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict:
        """As plain data (``--format json`` and the stored session record)."""
        return asdict(self)


class _SideFailed(Exception):
    """A side of a block failed in a round: ``side`` is its index (0 GOOD, 1 BAD, 2 probe)."""

    def __init__(self, side: int, message: str):
        super().__init__(message)
        self.side = side


def _rounds(measurer: Measurer, sides: Sequence[tuple[Commit, dict[str, Side]]], count: int,
            first: int) -> None:
    """``count`` interleaved rounds of every side (in :data:`ORDERS`' rotation), appended to each
    side's ``Side.rounds``; ``first`` is the block's index of the first of them.

    Raises:
        _SideFailed: the measurer failed on a side, or gave no figures of a case.
    """
    for r in range(first, first + count):
        orders = ORDERS[len(sides)]
        for i in orders[r % len(orders)]:
            commit, per_case = sides[i]
            try:
                figures = measurer.round(commit)
            except ProbeFailed as exc:
                raise _SideFailed(i, str(exc)) from None
            for case, side in per_case.items():
                if case not in figures:
                    raise _SideFailed(i, f"{case}: no figures in round {r + 1}")
                side.rounds.append(dict(figures[case]))


def _reference_block(measurer, good, bad, good_info, bad_info, cases, rule, rounds, max_rounds, log):
    g = {c: Side(good_info[c]) for c in cases}
    b = {c: Side(bad_info[c]) for c in cases}
    done = 0
    while True:
        try:
            _rounds(measurer, ((good, g), (bad, b)), rounds, done)
        except _SideFailed as exc:
            name, commit = ("GOOD", good) if exc.side == 0 else ("BAD", bad)
            raise BisectError(f"{name} {commit.short} could not be measured: {exc}") from None
        done += rounds
        metric = rule.metric
        for c in cases:
            if not _values(g[c], metric.field)[0] or not _values(b[c], metric.field)[0]:
                raise BisectError(f"{c}: no {metric.label} was measured (on the CPU only wall "
                                  "time is: --metric wall_time)")
        judged = [gate(rule, c, g[c], b[c]) for c in cases]
        verdicts = [CaseVerdict(c, BAD if j.status == compare.REGRESSION else AMBIGUOUS,
                                "" if j.status == compare.REGRESSION else f"GOOD -> BAD is {j.status}",
                                median_of(g[c], metric), math.nan, median_of(b[c], metric), j, j, j,
                                _values(g[c], metric.field)[0], (), _values(b[c], metric.field)[0])
                    for c, j in zip(cases, judged)]
        if all(v.verdict == BAD for v in verdicts) or done + rounds > max_rounds:
            return verdicts, done
        log(f"GOOD -> BAD not yet a regression on every case after {done} rounds: {rounds} more")


def run(commits: Sequence[Commit], cases: Sequence[str], measurer: Measurer, *,
        metric: metrictable.Metric, factor: float = metrictable.DEFAULT_FACTOR,
        alpha: float = compare.ALPHA, history: Callable[[str, float | None], object] | None = None,
        rounds: int = 3, max_rounds: int = 12,
        log: Callable[[str], None] = lambda line: None,
        on_probe: Callable[[Probe], None] = lambda probe: None,
        clock: Callable[[], float] = time.monotonic) -> Outcome:
    """Bisect ``commits`` (GOOD first, BAD last) on ``cases`` (see the module doc).

    Args:
        commits: the first-parent line, oldest first, at least two.
        cases: ``op/backend/shape/dtype`` names.
        measurer: see :class:`Measurer`.
        metric, factor, alpha, history: the gate's rule (:class:`Rule`); the metric a gated device
            time, or wall time on the CPU.
        rounds: rounds per block, and the step by which an ambiguous block grows.
        max_rounds: the cap of a block's rounds.
        log: gets one line per step (progress).
        on_probe: gets each probe once judged (the command stores it).

    Raises:
        BisectError: GOOD or BAD could not be measured.
        ValueError: fewer than two commits, no case, rounds < 1 or max_rounds < rounds.
    """
    if len(commits) < 2:
        raise ValueError("need GOOD and BAD")
    if not cases:
        raise ValueError("need at least one case")
    if rounds < 1 or max_rounds < rounds:
        raise ValueError(f"need 1 <= rounds <= max_rounds, got {rounds} and {max_rounds}")
    start = clock()
    rule = Rule(metric, factor, alpha, history)
    good, bad = commits[0], commits[-1]
    phases: dict[str, float] = {}
    infos = {}
    probes: list[Probe] = []
    try:
        for name, commit in (("GOOD", good), ("BAD", bad)):
            t = clock()
            try:
                infos[name] = measurer.start(commit, cases)
            except ProbeFailed as exc:
                raise BisectError(f"{name} {commit.short} could not be measured: {exc}") from None
            phases[f"start {name}"] = clock() - t
            log(f"{name} {commit.short} built in {phases[f'start {name}']:.0f} s")
        t = clock()
        reference, ref_rounds = _reference_block(measurer, good, bad, infos["GOOD"], infos["BAD"], cases,
                                                 rule, rounds, max_rounds, log)
        phases["reference"] = clock() - t
        search = Search(len(commits) - 1)
        if not all(v.verdict == BAD for v in reference):
            status = "no regression"
        else:
            log(f"GOOD -> BAD: a regression on every case ({ref_rounds} rounds)")
            while (index := search.next()) is not None:
                probe = _probe(measurer, commits[index], index, cases, good, bad, infos, rule, rounds,
                               max_rounds, log, clock)
                search.record(index, probe.verdict)
                probes.append(probe)
                on_probe(probe)
            status = "found" if search.first_bad is not None else "range"
    finally:
        measurer.stop(good)
        measurer.stop(bad)
    found = commits[search.first_bad] if status == "found" else None
    candidates = list(commits[search.lo + 1:search.hi + 1]) if status != "no regression" else []
    return Outcome(status, good, bad, len(commits) - 1, metric.name, factor, alpha, reference, ref_rounds,
                   probes, found, candidates, round(clock() - start, 1),
                   {k: round(v, 1) for k, v in phases.items()})


def _probe(measurer, commit, index, cases, good, bad, infos, rule, rounds, max_rounds, log, clock) -> Probe:
    """Measure one commit in a block of rounds beside GOOD and BAD, growing while ambiguous."""
    probe = Probe(index, commit.sha, commit.subject, SKIPPED)
    t = clock()
    try:
        info = measurer.start(commit, cases)
    except ProbeFailed as exc:
        probe.why, probe.start_s = str(exc), clock() - t
        log(f"probe {commit.short}: skipped: {exc}")
        measurer.stop(commit)
        return probe
    probe.start_s = clock() - t
    g = {c: Side(infos["GOOD"][c]) for c in cases}
    b = {c: Side(infos["BAD"][c]) for c in cases}
    p = {c: Side(info[c]) for c in cases}
    t = clock()
    try:
        while True:
            try:
                _rounds(measurer, ((good, g), (bad, b), (commit, p)), rounds, probe.rounds)
            except _SideFailed as exc:
                if exc.side < 2:
                    name, ref = ("GOOD", good) if exc.side == 0 else ("BAD", bad)
                    raise BisectError(f"{name} {ref.short} could not be measured: {exc}") from None
                probe.verdict, probe.why = SKIPPED, str(exc)
                log(f"probe {commit.short}: skipped: {exc}")
                break
            probe.rounds += rounds
            probe.cases = [case_verdict(rule, c, g[c], b[c], p[c]) for c in cases]
            probe.verdict = probe_verdict(probe.cases)
            probe.why = "; ".join(f"{c.case}: {c.why}" for c in probe.cases if c.why)
            if probe.verdict != AMBIGUOUS or probe.rounds + rounds > max_rounds:
                break
            log(f"probe {commit.short}: ambiguous after {probe.rounds} rounds ({probe.why}): {rounds} more")
    finally:
        measurer.stop(commit)
    probe.rounds_s = clock() - t
    if probe.verdict != SKIPPED:
        log(f"probe {commit.short}: {probe.verdict} after {probe.rounds} rounds"
            + (f" ({probe.why})" if probe.why else ""))
    return probe
