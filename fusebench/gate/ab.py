"""Paired A/B of two revisions on one GPU in one session: the rounds, the stopping rule, the verdict.

``fusebench ab`` (``fusebench.commands.ab``) hands this module the cases and a measurer holding one
child process per side, each running its own revision's code (``fusebench.gate.ab_probe``; the
tests use a stand-in). Nothing here runs git or touches a device.

**Rounds.** A round of a case times it on both sides back to back (warm-up, hot, cold, graph and
wall time: the sweep's ``time_round``), base first when ``round + case index`` is even, head first
otherwise: for one case the sides run A B, B A, A B, ... (A B B A A B ...), so that whatever the
board does over seconds or minutes lands on both sides alike, and the two figures of a pair are
taken a fraction of a second apart. Each pass goes over the cases still open.

**Processes.** A process can hold a state of its own for its whole life: in an A/A of one commit
on an H200 (docs/ab/README.md), the base's process timed `triton` softmax 4096x65536 float16 at
286 µs in every round and the head's at 320 µs, and GELU 2^22 float32 hot 3-6 % apart in three
backends, same kernels. Rounds in one pair of processes then agree with each other and the
pairs call a difference of processes a change of code. So every PROCESS_ROUNDS rounds both
children are replaced by fresh ones that build only the cases still open (from the caches the
first ones filled; still about a build per round, measured as the phase ``fresh processes``): the
process becomes part of each pair's noise, and a state of one process cannot decide a verdict.

**The rule**, per case and judged metric, on the pairs of its rounds (a pair with a contaminated
round on either side is left out while most pairs are clean): ``d_i = ln(head_i / base_i)``, and
the two orders of a pair form a crossover design (A B, B A): ``d_i = delta + pi · s_i + e_i``
with ``s_i = +1`` when the base went first and ``-1`` otherwise, fitted by least squares. ``pi``
is the period effect: the side timed first in a pair can read several per cent slower than the
second where a case lasts a few µs, whichever code it runs; alternation cancels it from
``delta`` but not from the spread of ``d``, which the fit removes. The ratio is ``exp(delta)``
and its two-sided ``1 - alpha`` confidence interval ``exp(delta ± t(n-2) · se(delta))``
(Student's t on log times, whose ratios a board's drift multiplies alike on both sides; with
pairs in one order only, or fewer than 4, the plain paired test, ``t(n-1) · sd(d) / sqrt(n)``).
Then:

* **regression**: the whole interval above FACTOR (a slowdown of more than 2 %, surely);
* **improvement**: the whole interval below 1 / FACTOR;
* **within noise**: the ratio beyond FACTOR either way, the interval not;
* **same**: otherwise;
* **blind**: same or within noise, with a limit beyond the host's margin (``compare.host_margin``:
  1.5x for device time, 2x for wall time): these pairs could not see a change a host could make on
  its own. A session with no regression whose case-metrics judged are mostly blind is
  **inconclusive** (exit 2), never "ok";
* **contaminated** pairs (most of them timed on a throttled or shared board, or a busy host): a
  regression or an improvement whose whole interval, and every pair's ratio, lies beyond the
  host's margin (at least ``compare.BUSY_PAIRS`` pairs) is kept and marked ``host busy; paired``
  (both sides took the load in turn, a pair a fraction of a second apart: a spike of load lands on
  one side of one pair, never on every pair the same way); any other verdict is **contaminated**,
  never a regression;
* **different kernel**, **launch path**, **new failure**, **fixed**, **not on both sides**: as
  in ``fusebench compare`` (``fusebench.gate.compare``): a compiler's pick at first use that
  differs between the sides, a stream figure that measures the host, a case that builds on one
  side only. Each round carries the kernel id of
  the process that timed it: where the sides timed one kernel in some rounds and not in others
  (a fresh process's autotuner picked anew), only the rounds with one kernel are judged
  (:func:`same_kernel`).

FACTOR is a margin of practical significance: a whole interval above 1.02 is taken as a change of
the code, not of the two processes (``docs/ab/README.md`` says what it rests on). The case's
**minimum detectable effect** (its ``limit``) is the smallest ratio these pairs would call a
regression: ``FACTOR · exp(t · sd / sqrt(n))``.

**Stopping** (nvbench's model: repeat until the noise is under a target, within a time limit):
a case gets at least MIN_PAIRS rounds, then stops once every judged metric is decided
(regression, improvement, different kernel, launch path, not on both sides) or has a limit at
or under TARGET; at MAX_PAIRS, or when the run's time cap is spent, it is judged on what it has.
TARGET 1.03 leaves a true 5 % slowdown several standard errors above the limit.
"""

from __future__ import annotations

import math
import statistics
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Callable, Mapping, Protocol, Sequence

from fusebench import metrictable
from fusebench.errors import terminal
from fusebench.gate import compare
from fusebench.gate.bisect import CaseInfo, Commit, ProbeFailed
from fusebench.gate.paired import crossover, interval, p_one_sided  # noqa: F401  (crossover: the tests')
from fusebench.record import SHAPE
from fusebench.storage import untrusted

#: The margin: a regression is a ratio surely above it (see the module doc).
FACTOR = 1.02
#: A case stops once each of its metrics can see this slowdown (its limit at or under it).
TARGET = 1.03
#: Two-sided level of the confidence interval of a ratio.
ALPHA = 0.05
#: Rounds every case gets before it may stop, and the most it gets.
MIN_PAIRS = 4
MAX_PAIRS = 16
#: Seconds the rounds of a run may take before every open case is judged on what it has.
TIME_CAP_S = 600.0
#: Rounds a pair of child processes measures before both are replaced (0: one process per side
#: for the whole session; see the module doc).
PROCESS_ROUNDS = 1

BASE, HEAD = "base", "head"
#: The statuses after which more rounds of a metric teach nothing.
DECIDED = (compare.REGRESSION, compare.IMPROVEMENT, compare.DIFFERENT_KERNEL, compare.LAUNCH_PATH,
           compare.NOT_BOTH)
#: The times judged on a GPU (the gate's) and, where the rounds have no device time, on the CPU.
WALL = metrictable.BY_NAME["track_wall_time"]
#: The margin of wall time, the CPU's only time: it holds the host's whole state (other
#: processes, threads waking, frequency), and two processes of one commit on a shared 2-core host
#: differed by up to 1.37x in some cases: only a large, sure change of it is called one.
WALL_FACTOR = 1.5
#: A wall-time case stops once it can see this (its limit at or under it).
WALL_TARGET = 1.6


def first_side(round_index: int, case_index: int) -> str:
    """Which side a round of a case times first: base when ``round + case`` is even."""
    return BASE if (round_index + case_index) % 2 == 0 else HEAD


class Measurer(Protocol):
    """Two children, one per side, each measuring with its own revision's code."""

    def start(self, side: str, commit: Commit) -> tuple[Mapping[str, CaseInfo], Mapping[str, str]]:
        """Build the side's cases: what was built (``op/backend/shape/dtype`` -> its info) and
        what was not (case -> ``skipped: why`` or ``failed: why``). Raises ProbeFailed when the
        side cannot be measured at all."""

    def time(self, side: str, case: str) -> dict:
        """One round of one case on one side: the sweep's round figures (ms), ``contamination``
        a list of reasons. Raises ProbeFailed."""

    def stop(self, side: str) -> None:
        """Release the side's child (never raises)."""

    def renew(self, cases: Sequence[str]) -> tuple[dict[str, Mapping[str, CaseInfo]], dict[str, str]]:
        """Replace both sides' children by fresh processes that build only ``cases``: what each
        side's fresh process built (side -> case -> its info: a compiled case's kernel is the
        new process's own pick) and the cases either side did not build again (case -> ``side:
        why``). Raises ProbeFailed when a side cannot be started again."""


class ABError(Exception):
    """A side could not be measured at all: one line."""


@dataclass
class CaseRounds:
    """Every round of one case on both sides, in order; ``first[i]`` the side round i began with."""

    case: str
    base_info: CaseInfo
    head_info: CaseInfo
    base: list[dict] = field(default_factory=list)
    head: list[dict] = field(default_factory=list)
    first: list[str] = field(default_factory=list)
    stopped: str = ""
    failed: str = ""


@dataclass(frozen=True)
class Paired:
    """The verdict on one case-metric from its pairs (see the module doc)."""

    status: str
    ratio: float
    low: float
    high: float
    limit: float
    p_value: float | None
    pairs: int
    spread: float
    base_ms: float
    head_ms: float
    note: str = ""


def _pairs(rounds: CaseRounds, fld: str) -> tuple[list[tuple[float, float]], list[str]]:
    """The (base, head) figures of ``fld`` round by round, clean pairs only while most are clean;
    else every pair and the contamination reasons (as ``record.clean_rounds``)."""
    both = [(b, h) for b, h in zip(rounds.base, rounds.head) if b.get(fld) and h.get(fld)]
    clean = [(b, h) for b, h in both if not b.get("contamination") and not h.get("contamination")]
    if 2 * len(clean) > len(both):
        return [(b[fld], h[fld]) for b, h in clean], []
    reasons = [c for b, h in both for c in (*b.get("contamination", ()), *h.get("contamination", ()))]
    return [(b[fld], h[fld]) for b, h in both], list(dict.fromkeys(reasons))


def _pair_rounds(rounds: CaseRounds, fld: str) -> list[int]:
    """The round indices of the pairs :func:`_pairs` returns (same rule, same order)."""
    both = [i for i, (b, h) in enumerate(zip(rounds.base, rounds.head)) if b.get(fld) and h.get(fld)]
    clean = [i for i in both if not rounds.base[i].get("contamination")
             and not rounds.head[i].get("contamination")]
    return clean if 2 * len(clean) > len(both) else both


def same_kernel(rounds: CaseRounds) -> tuple[CaseRounds, bool, str]:
    """The rounds a verdict compares code on: ``(rounds, kernel changed, note)``.

    Each round carries the kernel id of the process that timed it (a compiled case's id includes
    its autotuner's pick, which a fresh process can make anew). Where both sides timed the same
    kernel in some rounds and not in others, the pick is a coin of the processes, not the code:
    only the rounds with the same kernel on both sides are kept (at least 2), and the note says
    so. Rounds without ids (a session stored before them) fall back to the first processes' ids.
    """
    kb = [r.get("kernel_id") for r in rounds.base]
    kh = [r.get("kernel_id") for r in rounds.head]
    if not kb or not all(kb) or not all(kh):
        b, h = rounds.base_info.kernel_id, rounds.head_info.kernel_id
        return rounds, bool(b and h and b != h), f"kernel {b} -> {h}" if b and h and b != h else ""
    same = [i for i, (b, h) in enumerate(zip(kb, kh)) if b == h]
    if len(same) == len(kb):
        return rounds, False, ""
    changed = f"kernel {'/'.join(dict.fromkeys(kb))} -> {'/'.join(dict.fromkeys(kh))}"
    if len(same) < 2:
        return rounds, True, changed
    in_order = len(rounds.first) >= len(rounds.base)
    kept = CaseRounds(rounds.case, rounds.base_info, rounds.head_info, [rounds.base[i] for i in same],
                      [rounds.head[i] for i in same], [rounds.first[i] for i in same] if in_order else [],
                      rounds.stopped, rounds.failed)
    return kept, False, (f"{changed} in {len(kb) - len(same)} of {len(kb)} rounds (the processes' "
                         f"picks): judged on the {len(same)} rounds with one kernel on both sides")


def _median(side: list[dict], fld: str) -> float | None:
    values = [r[fld] for r in side if r.get(fld)]
    return statistics.median(values) if values else None


def judge(metric: metrictable.Metric, rounds: CaseRounds, factor: float = FACTOR,
          alpha: float = ALPHA) -> Paired:
    """One case-metric's verdict from its paired rounds (the module doc's rule)."""
    nan = math.nan
    if metric is WALL:
        factor = max(factor, WALL_FACTOR)
    if rounds.failed:
        status = compare.NEW_FAILURE if rounds.failed.startswith(HEAD) else compare.FIXED
        return Paired(status, nan, nan, nan, nan, None, 0, nan, nan, nan, rounds.failed)
    rounds, kernel_changed, kernel_note = same_kernel(rounds)
    pairs, contamination = _pairs(rounds, metric.field)
    if len(pairs) < 2:
        return Paired(compare.NOT_BOTH, nan, nan, nan, nan, None, len(pairs), nan, nan, nan,
                      f"{metric.label} not measured on both sides")
    signs = ([1.0 if rounds.first[i] == BASE else -1.0 for i in _pair_rounds(rounds, metric.field)]
             if len(rounds.first) >= len(rounds.base) else [])
    n = len(pairs)
    ratio, low, high, mean, se, df = interval(pairs, alpha, signs)
    limit = factor * high / ratio  # factor · exp(t · se)
    if low > factor:
        status = compare.REGRESSION
    elif high < 1.0 / factor:
        status = compare.IMPROVEMENT
    elif ratio > factor or ratio < 1.0 / factor:
        status = compare.WITHIN_NOISE
    else:
        status = compare.SAME
    notes = [f"{n} pairs, interval {low:.3f}-{high:.3f}x"]
    b_info, h_info = rounds.base_info, rounds.head_info
    if kernel_note:
        notes.append(kernel_note)
    if status != compare.SAME:
        if contamination:  # a busy host, shared by both sides in turn: judged when every pair is beyond it
            status, why = compare.busy_but_beyond(status, low, high, [h / b for b, h in pairs], metric,
                                                  contamination)
            notes.insert(0 if status != compare.CONTAMINATED else len(notes), why)
        elif kernel_changed and (b_info.kernel_by_timing or h_info.kernel_by_timing):
            status = compare.DIFFERENT_KERNEL
    status, why_blind = compare.blind_verdict(status, limit, metric)
    notes += [why_blind] if why_blind else []
    base_values = tuple(b * metric.scale for b, _ in pairs)
    head_values = tuple(h * metric.scale for _, h in pairs)
    graph = "device_time_graph_ms"
    b_case = compare.Case(base_values, graph_ms=_median(rounds.base, graph), launches=b_info.launches)
    h_case = compare.Case(head_values, graph_ms=_median(rounds.head, graph), launches=h_info.launches)
    if why := compare.launch_path(metric, b_case, h_case):
        status = compare.LAUNCH_PATH
        notes.insert(0, why)
    spread = statistics.stdev(h / b for b, h in pairs)
    return Paired(status, ratio, low, high, limit, p_one_sided(mean, se, df), n, spread,
                  statistics.median(b for b, _ in pairs), statistics.median(h for _, h in pairs),
                  "; ".join(notes))


def metrics_of(all_rounds: Sequence[CaseRounds]) -> tuple[metrictable.Metric, ...]:
    """The times judged: the gate's device times where any round has one, else wall time (a host
    without a GPU measures nothing else)."""
    fields = {k for c in all_rounds for r in c.base + c.head for k, v in r.items() if v}
    gated = tuple(m for m in metrictable.GATED if m.field.endswith("_ms") and m.field in fields)
    return gated or (WALL,)


def done(rounds: CaseRounds, metrics: Sequence[metrictable.Metric], factor: float, alpha: float,
         target: float, min_pairs: int) -> bool:
    """The stopping rule: MIN_PAIRS rounds, then every metric decided or seeing ``target``
    (:data:`WALL_TARGET` for wall time, whose margin is wider)."""
    if len(rounds.base) < min_pairs:
        return False
    for m in metrics:
        v = judge(m, rounds, factor, alpha)
        if v.status not in DECIDED and not v.limit <= (WALL_TARGET if m is WALL else target):
            return False
    return True


@dataclass
class Outcome:
    """A paired A/B session: both sides, every case's rounds (also those not built on one side:
    ``failed``), the settings of the rule, where the time went."""

    base: Commit
    head: Commit
    head_dirty: bool
    factor: float
    alpha: float
    target: float
    min_pairs: int
    max_pairs: int
    cases: list[CaseRounds]
    not_built: dict[str, dict[str, str]]
    seconds: float
    phases: dict[str, float] = field(default_factory=dict)
    capped: bool = False
    #: Rounds per pair of processes (0: one process per side for the whole session).
    process_rounds: int = 0

    def to_dict(self) -> dict:
        return asdict(self)


def why_not_built(failures: Mapping[str, str], most: int = 3) -> str:
    """The reasons cases were not built, counted, most common first, each cut at its first ``;``
    (the install hint after it is in the run's own lines), e.g. ``24 skipped: triton needs a GPU``;
    past ``most`` reasons, ``and N more``."""
    counts = Counter(reason.split(";", 1)[0].strip() for reason in failures.values())
    parts = [f"{n} {reason}" for reason, n in counts.most_common(most)]
    rest = sum(n for _, n in counts.most_common()[most:])
    return "; ".join(parts) + (f"; and {rest} more" if rest else "")


def run(cases: Sequence[str] | None, measurer: Measurer, base: Commit, head: Commit, *,
        head_dirty: bool = False, factor: float = FACTOR, alpha: float = ALPHA, target: float = TARGET,
        min_pairs: int = MIN_PAIRS, max_pairs: int = MAX_PAIRS, time_cap_s: float = TIME_CAP_S,
        process_rounds: int = PROCESS_ROUNDS, log: Callable[[str], None] = lambda line: None,
        on_round: Callable[[Outcome], None] = lambda partial: None,
        clock: Callable[[], float] = time.monotonic) -> Outcome:
    """Measure both sides in interleaved rounds until every case stops (the module doc).

    Args:
        cases: the cases to judge, in order; None: every case either side built.
        measurer: see :class:`Measurer`; started here, stopped before returning.
        min_pairs, max_pairs: the rounds of a case, at least and at most.
        time_cap_s: seconds for the rounds (fresh processes' builds included); then every open
            case is judged on what it has.
        process_rounds: rounds per pair of processes (0: the first pair measures every round).
        on_round: gets the session so far after each pass over the open cases (the command stores
            it, so that a run stopped on the way keeps every round it made).

    Raises:
        ABError: a side could not be started, or failed in a round.
        ValueError: min_pairs < 2 or max_pairs < min_pairs, or process_rounds < 0.
    """
    if min_pairs < 2 or max_pairs < min_pairs:
        raise ValueError(f"need 2 <= min_pairs <= max_pairs, got {min_pairs} and {max_pairs}")
    if process_rounds < 0:
        raise ValueError(f"need process_rounds >= 0, got {process_rounds}")
    start = clock()
    phases: dict[str, float] = {}
    infos: dict[str, Mapping[str, CaseInfo]] = {}
    not_built: dict[str, dict[str, str]] = {}
    try:
        for side, commit in ((BASE, base), (HEAD, head)):
            t = clock()
            try:
                infos[side], failures = measurer.start(side, commit)
            except ProbeFailed as exc:
                raise ABError(f"{side} {commit.short} could not be measured: {exc}") from None
            not_built[side] = dict(failures)
            phases[f"build {side}"] = round(clock() - t, 1)
            log(f"{side} {commit.short}: {len(infos[side])} case(s) built in {phases[f'build {side}']:.0f} s"
                + (f", {len(failures)} not built ({why_not_built(dict(failures))})" if failures else ""))
        names = list(cases) if cases is not None else list(dict.fromkeys(
            [*infos[BASE], *infos[HEAD], *not_built[BASE], *not_built[HEAD]]))
        all_rounds, open_ = [], []
        for c in names:
            b, h = infos[BASE].get(c), infos[HEAD].get(c)
            r = CaseRounds(c, b or CaseInfo(), h or CaseInfo())
            if b and not h and c in not_built[HEAD] and not_built[HEAD][c].startswith("failed"):
                r.failed = f"{HEAD}: {not_built[HEAD][c]}"
            elif h and not b and c in not_built[BASE] and not_built[BASE][c].startswith("failed"):
                r.failed = f"{BASE}: {not_built[BASE][c]}"
            all_rounds.append(r)
            if b and h:
                open_.append(r)
        metrics = metrics_of([])  # device times until the first round says otherwise
        current = {side: dict(infos[side]) for side in (BASE, HEAD)}  # the live processes' builds
        t = clock()
        capped = False
        r_index = 0
        renewals = 0.0
        while open_:
            if r_index and process_rounds and r_index % process_rounds == 0:
                renew_at = clock()
                try:
                    fresh, missing = measurer.renew([rounds.case for rounds in open_])
                except ProbeFailed as exc:
                    raise ABError(f"fresh processes for round {r_index + 1} could not be started: {exc}") \
                        from None
                renewals += clock() - renew_at
                for side, built in fresh.items():
                    current[side] = {**current[side], **built}
                for rounds in open_:
                    if rounds.case in missing:
                        rounds.stopped = f"not built again in a fresh process ({missing[rounds.case]})"
                open_ = [rounds for rounds in open_ if rounds.case not in missing]
                if not open_:
                    break
            for rounds in open_:
                first = first_side(r_index, names.index(rounds.case))
                order = (BASE, HEAD) if first == BASE else (HEAD, BASE)
                for side in order:
                    try:
                        fig = measurer.time(side, rounds.case)
                    except ProbeFailed as exc:
                        raise ABError(f"{side} failed in round {r_index + 1} of {rounds.case}: {exc}") \
                            from None
                    fig = dict(fig)
                    if kid := getattr(current[side].get(rounds.case), "kernel_id", None):
                        fig["kernel_id"] = kid  # what this process timed (its autotuner's pick)
                    (rounds.base if side == BASE else rounds.head).append(fig)
                rounds.first.append(order[0])
            r_index += 1
            if r_index == 1:
                metrics = metrics_of(open_)
            still = []
            for rounds in open_:
                if done(rounds, metrics, factor, alpha, target, min_pairs):
                    rounds.stopped = "decided"
                elif len(rounds.base) >= max_pairs:
                    rounds.stopped = f"at the cap of {max_pairs} rounds"
                else:
                    still.append(rounds)
            open_ = still
            if open_ and clock() - t > time_cap_s and r_index >= min_pairs:
                capped = True
                for rounds in open_:
                    rounds.stopped = f"at the time cap ({time_cap_s:.0f} s)"
                log(f"time cap of {time_cap_s:.0f} s reached after {r_index} rounds: {len(open_)} case(s) "
                    "judged on what they have")
                break
            if open_:
                log(f"after {r_index} rounds: {len(open_)} case(s) still open")
                on_round(Outcome(base, head, head_dirty, factor, alpha, target, min_pairs, max_pairs,
                                 all_rounds, not_built, round(clock() - start, 1), dict(phases), False,
                                 process_rounds))
        phases["rounds"] = round(clock() - t, 1)
        if renewals:
            phases["fresh processes"] = round(renewals, 1)
    finally:
        measurer.stop(BASE)
        measurer.stop(HEAD)
    return Outcome(base, head, head_dirty, factor, alpha, target, min_pairs, max_pairs, all_rounds,
                   not_built, round(clock() - start, 1), phases, capped, process_rounds)


def benchmark(op: str, metric: metrictable.Metric) -> str:
    """asv's name of an op's metric (``suite.Gelu.track_device_time``; ``asvsuite.benchmark_name``,
    which imports the registry, hence torch)."""
    return f"suite.{op.capitalize()}.{metric.name}"


def rows(out: Outcome) -> list[compare.Row]:
    """Every case-metric of a session as the gate's rows (``compare.table``, ``markdown``,
    ``as_json`` print them): before and after are the medians of the pairs, noise the spread of
    the ratios, limit the minimum detectable effect, p the paired t-test's."""
    metrics = metrics_of(out.cases)
    result = []
    for rounds in out.cases:
        op, backend, shape, dtype = rounds.case.split("/")
        for m in metrics:
            v = judge(m, rounds, out.factor, out.alpha)
            stopped = rounds.stopped if rounds.stopped not in ("", "decided") else ""
            note = v.note + (f"; stopped {stopped}" if stopped else "")
            if v.status == compare.NOT_BOTH:
                why = [f"{side}: {out.not_built.get(side, {}).get(rounds.case)}" for side in (BASE, HEAD)
                       if out.not_built.get(side, {}).get(rounds.case)]
                note = "; ".join(why) or v.note
            before = None if v.status == compare.FIXED else v.base_ms * m.scale
            after = None if v.status == compare.NEW_FAILURE else v.head_ms * m.scale
            result.append(compare.Row(benchmark(op, m), (backend, shape, dtype), m.unit, before, after,
                                      v.ratio, v.spread if math.isfinite(v.spread) else 0.0, v.status,
                                      v.limit, v.p_value, note))
    return compare.with_graph_notes(result)


P_LEGEND = ("slowdown: the paired ratio (geometric mean of head/base round by round), not after/before; "
            "p: paired t-test on the log ratios, one-sided in the ratio's direction (that head is slower "
            "when it is above 1, faster when below); limit: the smallest "
            "slowdown these pairs would call a regression (the minimum detectable effect)")


def from_dict(data) -> Outcome:
    """A stored session (``ab.json``), checked as untrusted input: every figure a finite positive
    number, every name of the expected form.

    Raises:
        ValueError: one line saying what is wrong.
    """
    try:
        return _from_dict(data)
    except (AttributeError, TypeError, KeyError) as exc:  # a field of another type than ours
        raise ValueError(f"a field of the wrong type ({type(exc).__name__}: {exc})") from None


def _from_dict(data) -> Outcome:
    def need(cond, what):
        if not cond:
            raise ValueError(what)

    need(isinstance(data, dict), "not a JSON object")
    for k in ("base", "head", "cases", "not_built"):
        need(k in data, f"no {k!r}")

    def commit(c, name):
        need(isinstance(c, dict) and isinstance(c.get("sha"), str) and isinstance(c.get("subject", ""), str),
             f"{name}: not a commit")
        need(all(ch in "0123456789abcdef" for ch in c["sha"]) and 7 <= len(c["sha"]) <= 64,
             f"{name}: bad sha")
        return Commit(c["sha"], terminal(c.get("subject", "")))

    def number(v, name, low=0.0, high=1e15):  # untrusted's one check: an int compared as an int
        need(untrusted.number_problem(v, untrusted.Bound(low, high, above=True, optional=False)) is None,
             f"{name}: not a finite number above {low:g}, at most {high:g}")
        return float(v)

    def info(d, name):
        need(isinstance(d, dict), f"{name}: not an object")
        launches, kid = d.get("launches"), d.get("kernel_id")
        need(launches is None or (type(launches) is int and launches >= 0), f"{name}: bad launches")
        need(kid is None or (isinstance(kid, str) and kid.isalnum() and len(kid) <= 64),
             f"{name}: bad kernel id")
        calls = [d.get("hot_calls"), d.get("graph_calls")]
        need(all(c is None or (type(c) is int and c >= 1) for c in calls), f"{name}: bad batch size")
        return CaseInfo(launches, kid, bool(d.get("kernel_by_timing")), *calls)

    def figures(r, name):
        need(isinstance(r, dict), f"{name}: not an object")
        out = {}
        for k in ("device_time_ms", "device_time_cold_ms", "device_time_graph_ms", "wall_time_ms"):
            if r.get(k) is not None:
                out[k] = number(r[k], f"{name}.{k}")
        c = r.get("contamination", [])
        need(isinstance(c, list) and all(isinstance(x, str) for x in c), f"{name}: bad contamination")
        out["contamination"] = c
        kid = r.get("kernel_id")
        need(kid is None or (isinstance(kid, str) and kid.isalnum() and len(kid) <= 64),
             f"{name}: bad kernel id")
        if kid:
            out["kernel_id"] = kid
        return out

    import re

    case_re = re.compile(rf"[a-z][a-z0-9_]*/[a-z][a-z0-9_]*/{SHAPE.pattern}/[a-z0-9]+")  # a record's shape
    cases = []
    need(isinstance(data["cases"], list), "cases: not a list")
    for i, c in enumerate(data["cases"]):
        need(isinstance(c, dict) and isinstance(c.get("case"), str) and case_re.fullmatch(c["case"]),
             f"cases[{i}]: bad case name")
        r = CaseRounds(c["case"], info(c.get("base_info", {}), f"{c['case']} base_info"),
                       info(c.get("head_info", {}), f"{c['case']} head_info"))
        for side in (BASE, HEAD):
            need(isinstance(c.get(side, []), list), f"{c['case']} {side}: not a list")
            getattr(r, side).extend(figures(x, f"{c['case']} {side}[{j}]")
                                    for j, x in enumerate(c.get(side, [])))
        need(len(r.base) == len(r.head), f"{c['case']}: not as many base rounds as head rounds")
        r.stopped, r.failed = str(c.get("stopped", ""))[:200], str(c.get("failed", ""))[:500]
        r.first = [s for s in c.get("first", []) if s in (BASE, HEAD)]
        cases.append(r)
    need(isinstance(data["not_built"], dict), "not_built: not an object")
    not_built = {s: {str(k): str(v)[:500] for k, v in (data["not_built"].get(s) or {}).items()}
                 for s in (BASE, HEAD)}
    phases = data.get("phases") or {}
    need(isinstance(phases, dict), "phases: not an object")
    settings = {k: number(data.get(k, default), k) for k, default in
                (("factor", FACTOR), ("alpha", ALPHA), ("target", TARGET))}
    need(settings["factor"] >= 1 and settings["alpha"] < 1, "factor below 1 or alpha not below 1")
    return Outcome(commit(data["base"], "base"), commit(data["head"], "head"), bool(data.get("head_dirty")),
                   settings["factor"], settings["alpha"], settings["target"],
                   int(number(data.get("min_pairs", MIN_PAIRS), "min_pairs", high=1e6)),
                   int(number(data.get("max_pairs", MAX_PAIRS), "max_pairs", high=1e6)), cases, not_built,
                   number(data.get("seconds", 1.0), "seconds", -1.0, high=1e9),
                   {str(k): number(v, f"phases.{k}", -1.0, high=1e9) for k, v in phases.items()},
                   bool(data.get("capped")),
                   int(number(data.get("process_rounds", 0), "process_rounds", -1.0, high=1e6)))
