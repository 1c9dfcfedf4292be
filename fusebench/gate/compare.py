"""The regression gate: compare two commits' stored results on one machine, round by round.

``asv compare`` prints a table but always exits 0, and asv stores one number per case, so the
gate is done here, from each run's record (``fusebench.storage.runrecord``: every round's figures).

**What is judged**: the gated metrics of :mod:`fusebench.metrictable`: hot, cold and graph
device time. Wall time, bandwidth and the percentages are shown elsewhere, never judged.

**The rule.** For one case of one metric, with per-round figures ``b`` (base) and ``h`` (head):

* ``slowdown`` = median(h) / median(b) (> 1 slower);
* ``limit`` = max(FACTOR, history limit, 1 + NOISE_K × noise): the history limit is the case's
  between-run drift learned from the committed records (``fusebench.gate.noise``: K sigmas of
  its A/A pairs, shrunk toward its class); ``noise`` is the larger of the two runs' spread
  between rounds ((max - min) / median), or, when both runs kept every round (the same grid is
  timed in the same round orders on every machine), the spread of the ratios h_i / b_i round
  against round, so that what a round's order does to both runs cancels. A graph figure without
  history of its own borrows the case's hot-figure history where that times the same kernels at
  20 us per launch or more; otherwise, without history, the limit is the stated fallback of its
  time band (``noise.FALLBACK``) and the note says ``no history``. The limit is the case's
  minimum detectable effect: the smallest slowdown the gate can call a regression there;
* **regression**: slowdown > limit *and* the rounds are separated by a one-sided exact
  Mann-Whitney U test at ``ALPHA`` = 0.05, ties counted exactly (with 3 rounds a side the
  smallest p is 1/20 = 0.05: every head round slower than every base round, none tied), or,
  paired, every head round slower than its base round. Where the test cannot reach ``ALPHA``
  (fewer rounds), the limit alone decides;
* **improvement**: the same, the other way; **within noise**: beyond FACTOR but not beyond the
  limit or not separated; **same**: within FACTOR;
* **launch path** (not gated, shown): a stream figure that, in the base run, measures the launch
  path rather than the kernel: hot device time more than :data:`LAUNCH_PATH_RATIO` × the graph
  device time (the GPU waited for the host between kernels), or a cold figure under
  :data:`COLD_LAUNCH_MS` per launch (launches between an event pair whose fixed cost is a large
  share of it). Such a case gates on its graph device time; a case without a graph figure on both sides
  keeps gating on every metric;
* **contaminated**: a case that would be a regression, improvement or within noise, but one of
  the runs measured it throttled or beside another process, or timed it in a batch far shorter
  than its figure implies (``Record.short_batch``: sized from a stalled estimate): never a
  regression;
* **different kernel**: the same, but the backend picks its kernel by timing at first use
  (Inductor) and the two runs ran different kernels (``kernel_id``): the compiler's choice, not
  the code's; reported apart, never a regression;
* **different libraries**: the same, but the two runs loaded different reference libraries
  (liger, quack, flaggems measured in one run's process and not in the other's), which moves
  other backends' figures: not a like-for-like pair; reported apart, never a regression;
* **blind**: ``same`` or ``within noise``, but the limit is beyond the host's margin
  (:func:`host_margin`: 1.5x for a GPU's device time, 2x for wall time, a CPU host's only time):
  the case could not see a change smaller than anything the host does on its own, so it is not
  called the same. A comparison with no regression whose case-metrics judged are mostly blind is
  **inconclusive** (:func:`inconclusive`), never "ok";
* **new failure**: failed at head, not at base; **fixed**: the other way;
* **not on both sides**: measured in one run only or in neither (a run of other ops, a backend
  skipped there): nothing to judge; shown with ``--all``.

Regressions and new failures fail the gate (exit 1); nothing else does. NOISE_K = 2: the range
of 3 rounds is about 1.7 standard deviations of one round, and the difference of two medians of
3 about 1.6, so 2 × range covers a 3-sigma move. ``docs/gate.md`` has the data behind the
constants.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, replace

from fusebench import metrictable
from fusebench.errors import markdown_cell, terminal
from fusebench.gate import noise
from fusebench.record import clean_rounds
from fusebench.storage.results import Params, Run, is_failed, is_measured

#: A hot figure above this many times the graph figure measures the launch path.
LAUNCH_PATH_RATIO = 1.25
#: A cold figure under this (ms) per launch of the call is launches between an event pair: the
#: launch path.
COLD_LAUNCH_MS = 0.008
#: The slowdowns the gate's summary counts the case-metrics it can see at.
DETECTABLE = (1.05, 1.10, 1.20)
#: The limit allows NOISE_K × the spread between rounds.
NOISE_K = 2.0
#: Significance of the one-sided Mann-Whitney U test over the rounds (the default of the case
#: file's ``settings.gate.alpha``).
ALPHA = 0.05
#: The host's margin of a GPU's device time: the most that what a host does beside a measurement
#: (another process, a throttled or shared board, the launch path) has been seen to move a figure of
#: unchanged code: A/A drift of 8-12 % between boards, 11 % between two processes on one H200, the
#: widest history limit of the committed H200 records 1.54x (GELU 2^20 on the cuda backend). A
#: limit beyond it is blind (no step a host could not make on its own can be seen), and a paired
#: interval wholly beyond it, every pair too, is a change of the code even when the host was busy.
HOST_MARGIN_GPU = 1.5
#: The host's margin of wall time, a host without a GPU's only time: two processes of one commit on
#: a shared 2-core host differed by up to 1.37x in some cases (``gate.ab.WALL_FACTOR``); 2x leaves
#: room for a busier host.
HOST_MARGIN_WALL = 2.0

(REGRESSION, NEW_FAILURE, IMPROVEMENT, WITHIN_NOISE, FIXED, SAME, CONTAMINATED,
 DIFFERENT_KERNEL, LAUNCH_PATH, DIFFERENT_LIBRARIES, NOT_BOTH, BLIND) = (
    "regression", "new failure", "improvement", "within noise", "fixed", "same", "contaminated",
    "different kernel", "launch path", "different libraries", "not on both sides", "blind")
#: Marks in the table's first column (asv compare's ``+`` slower / ``-`` faster / ``~`` noise).
MARK = {REGRESSION: "+", NEW_FAILURE: "!", IMPROVEMENT: "-", WITHIN_NOISE: "~", FIXED: "*", SAME: " ",
        CONTAMINATED: "c", DIFFERENT_KERNEL: "k", LAUNCH_PATH: "l", DIFFERENT_LIBRARIES: "d", NOT_BOTH: ".",
        BLIND: "?"}
#: The note that starts a regression or improvement judged on the pairs of a busy host (``gate.ab``
#: and ``gate.bisect``: both sides timed in turn on it, every pair beyond its margin).
HOST_BUSY = "host busy; paired"
#: The figures timed on a stream (launch by launch): those that can measure the launch path
#: (:func:`launch_path`) and whose flagged rows carry the graph figure's verdict
#: (:func:`with_graph_notes`).
STREAM_FIELDS = ("device_time_ms", "device_time_cold_ms")
#: Statuses that fail the gate.
FAILING = (REGRESSION, NEW_FAILURE)
#: Statuses that are a verdict on a case-metric; the others say why it was not judged.
VERDICTS = (NEW_FAILURE, REGRESSION, WITHIN_NOISE, FIXED, IMPROVEMENT, SAME, BLIND)


def host_margin(metric: metrictable.Metric) -> float:
    """The host's margin of ``metric`` (:data:`HOST_MARGIN_GPU`, :data:`HOST_MARGIN_WALL` for wall
    time): a limit beyond it is blind; pairs wholly beyond it are judged on a busy host."""
    return HOST_MARGIN_WALL if metric.field == "wall_time_ms" else HOST_MARGIN_GPU


def blind_verdict(status: str, limit: float, metric: metrictable.Metric) -> tuple[str, str]:
    """``status`` and a note: ``same`` or ``within noise`` with a limit beyond the host's margin
    is :data:`BLIND` (the note says the limit and the margin); any other status is kept."""
    margin = host_margin(metric)
    if status in (SAME, WITHIN_NOISE) and limit > margin:
        return BLIND, f"blind: limit {limit:.2f}x, beyond the host's margin of {margin:g}x"
    return status, ""


#: The fewest pairs a busy host's case is judged on (:func:`busy_but_beyond`).
BUSY_PAIRS = 4


def busy_but_beyond(status: str, low: float, high: float, ratios: list[float], metric: metrictable.Metric,
                    reasons: list[str] | tuple[str, ...]) -> tuple[str, str]:
    """The verdict of a case-metric whose pairs were timed on a busy host (``reasons``: the
    contamination), both sides in turn: a regression (improvement) when the interval ``low``-``high``
    of the paired ratio lies wholly above (below) the host's margin and so does every pair's ratio
    (``ratios``, head/base, at least :data:`BUSY_PAIRS`); else :data:`CONTAMINATED`. A load shared
    by both sides moves a ratio only by what it does between the two figures of a pair: a spike
    shorter than a pair lands on one side and makes one pair an outlier (on a 2-core host under a
    load of 12, GELU 2^14 eager read 8 ms in some base rounds against 0.07 ms), never every pair
    beyond the margin in one direction. Returns ``(status, note)``."""
    margin = host_margin(metric)
    why = "; ".join(dict.fromkeys(reasons))
    if len(ratios) >= BUSY_PAIRS and (
            status == REGRESSION and low > margin and min(ratios) > margin
            or status == IMPROVEMENT and high < 1.0 / margin and max(ratios) < 1.0 / margin):
        return status, (f"{HOST_BUSY}: every pair {min(ratios):.3f}-{max(ratios):.3f}x and the interval "
                        f"{low:.3f}-{high:.3f}x beyond the host's margin of {margin:g}x, both sides timed "
                        f"in turn ({why})")
    return CONTAMINATED, why


@dataclass(frozen=True)
class Case:
    """One case of one metric in one run, as the gate sees it.

    Attributes:
        values: the per-round figures in the metric's unit (one value for a result stored
            without a record); empty when not measured.
        failed: the case failed in that run.
        noise: relative spread: between rounds with two or more, else the batch's IQR / median.
        per_launch_ms: hot device time / launches (None unknown: then the device time).
        contamination: why that run's figure is contaminated (empty: clean).
        kernel_id: identity of the kernels that ran (None unknown).
        kernel_by_timing: the backend picks its kernel by timing at first use.
        graph_ms: the case's graph device time in that run, ms (None: not captured or unknown).
        launches: kernels one call launches (None unknown).
        rounds: the round index of each value (empty: a stored value, no rounds). Two runs of
            one grid time their cases in the same round orders, so equal ``rounds`` pair values.
    """

    values: tuple[float, ...] = ()
    failed: bool = False
    noise: float = 0.0
    per_launch_ms: float | None = None
    contamination: tuple[str, ...] = ()
    kernel_id: str | None = None
    kernel_by_timing: bool = False
    graph_ms: float | None = None
    launches: int | None = None
    rounds: tuple[int, ...] = ()

    @property
    def measured(self) -> bool:
        return bool(self.values) and not self.failed

    @property
    def median(self) -> float:
        return statistics.median(self.values)


@dataclass(frozen=True)
class Row:
    """One case of one metric compared.

    Attributes:
        benchmark: asv benchmark name (``suite.Gelu.track_device_time``).
        params: (backend, shape, dtype).
        unit: the metric's unit.
        before, after: medians at the base and head commits (None failed, NaN absent).
        slowdown: > 1 worse, < 1 better; NaN when not both measured.
        noise: the relative noise used (larger of the two runs').
        limit: the slowdown allowed for this case (see the module doc).
        p_value: the one-sided Mann-Whitney p (None when the test could not reach ALPHA).
        status: one of the statuses above.
        note: why the limit is wide, which kernels, what contaminated it.
    """

    benchmark: str
    params: Params
    unit: str
    before: float | None
    after: float | None
    slowdown: float
    noise: float
    status: str
    limit: float = math.nan
    p_value: float | None = None
    note: str = ""


def launch_path(metric: metrictable.Metric, base: Case, head: Case) -> str:
    """Why ``metric``'s figures of a case measure the launch path rather than the kernel (empty:
    they measure the kernel, or no graph figure says otherwise): see the module doc. The base run
    decides (a head that became launch-bound is judged), with a graph figure on both sides."""
    if metric.field not in STREAM_FIELDS:
        return ""
    if not (base.measured and head.measured and base.graph_ms and head.graph_ms):
        return ""  # without a graph figure on both sides the stream figure keeps gating
    ms = base.median / metric.scale
    if metric.field == "device_time_ms" and ms > LAUNCH_PATH_RATIO * base.graph_ms:
        return f"launch path: hot {1e3 * ms:.3g} us vs graph {1e3 * base.graph_ms:.3g} us per call"
    launches = base.launches or 1
    if metric.field == "device_time_cold_ms" and ms < COLD_LAUNCH_MS * launches:
        if launches == 1:
            return f"launch path: cold {1e3 * ms:.3g} us, one launch between an event pair"
        return (f"launch path: cold {1e3 * ms:.3g} us, {launches} launches between an event pair "
                f"({1e3 * ms / launches:.3g} us each)")
    return ""


def _subset_sums(doubled: tuple[int, ...], size: int) -> list[int]:
    """How many subsets of ``size`` of ``doubled`` (twice each value's midrank: integers) sum to
    each total: the exact null distribution of a rank sum, ties included."""
    top = sum(sorted(doubled)[-size:]) if size else 0
    counts = [[0] * (top + 1) for _ in range(size + 1)]
    counts[0][0] = 1
    for r in doubled:
        for k in range(min(size, len(doubled)) - 1, -1, -1):
            row, up = counts[k], counts[k + 1]
            for total in range(top - r, -1, -1):
                if row[total]:
                    up[total + r] += row[total]
    return counts[size]


def mann_whitney_greater(base: tuple[float, ...], head: tuple[float, ...]) -> float:
    """Exact one-sided p-value that ``head`` values tend to be larger than ``base`` values.

    The statistic is the rank sum of ``head`` with midranks for tied values (equivalently U, a
    tie counting 1/2); p = P(sum >= observed) over every equally likely split of the pooled values
    into the two sides (the permutation distribution of these very values, ties and all). Timings
    read on CUDA events tie often (steps of about 0.5 us), so the distribution without ties would
    be too eager. With 3 and 3 distinct values the smallest p is 1/20.

    Raises:
        ValueError: either side empty.
    """
    if not base or not head:
        raise ValueError("the test needs at least one value on each side")
    pooled = sorted(list(base) + list(head))
    doubled_rank = {}
    i = 0
    while i < len(pooled):  # midrank of a run of ties, doubled: (first + last) with ranks from 1
        j = i
        while j + 1 < len(pooled) and pooled[j + 1] == pooled[i]:
            j += 1
        doubled_rank[pooled[i]] = i + j + 2
        i = j + 1
    observed = sum(doubled_rank[h] for h in head)
    counts = _subset_sums(tuple(doubled_rank[v] for v in pooled), len(head))
    return sum(counts[observed:]) / math.comb(len(pooled), len(head))


def min_p(n: int, m: int) -> float:
    """The smallest p the exact test can give with n and m values: 1 / C(n + m, n)."""
    return 1.0 / math.comb(n + m, n)


def judge(metric: metrictable.Metric, base: Case, head: Case, factor: float,
          alpha: float = ALPHA, history: "noise.Limit | None" = None
          ) -> tuple[str, float, float, float | None, str]:
    """Status, slowdown, limit, p-value and note of one case (see the module doc for the rule;
    ``alpha`` is the test's significance, :data:`ALPHA` by default; ``history`` the case's
    history limit, ``fusebench.gate.noise``, None or without a limit: the rounds rule alone)."""
    if head.failed:
        return (SAME if base.failed else NEW_FAILURE), math.nan, math.nan, None, ""
    if not (base.measured and head.measured):
        return (FIXED if base.failed and head.measured else NOT_BOTH), math.nan, math.nan, None, ""
    before, after = base.median, head.median
    worse, better = (after, before) if metric.sign < 0 else (before, after)
    ratio = (1.0 if worse == 0 else math.inf) if better == 0 else worse / better
    paired = len(base.values) > 1 and base.rounds == head.rounds == tuple(range(len(base.values))) \
        and len(head.values) == len(base.values) and all(base.values)
    if paired:  # round i against round i: what the rounds' order does to both runs cancels
        ratios = [h / b for b, h in zip(base.values, head.values)]
        noise = (max(ratios) - min(ratios)) / statistics.median(ratios)
    else:
        noise = max(base.noise, head.noise)
    by_rounds = 1.0 + NOISE_K * noise
    limit = max(factor, by_rounds)
    notes = []
    if history is not None and history.limit is not None:
        limit = max(limit, history.limit)
    if limit == by_rounds and limit > factor:  # the rounds set it: say whose spread
        notes.append(f"rounds: {'paired ' if paired else ''}spread {100 * noise:.1f} %")
    if history is not None and history.n == 0 and history.source == "no history":
        notes.append("no history: " + (f"fallback {history.limit:.2f}x" if history.limit else "rounds only"))
    elif history is not None and history.limit is not None and history.limit > factor:
        notes.append(f"history: {history.source}")
    p = None
    testable = min_p(len(base.values), len(head.values)) <= alpha
    if testable:
        slower = (base.values, head.values) if metric.sign < 0 else (head.values, base.values)
        p_slower = mann_whitney_greater(*slower)
        p_faster = mann_whitney_greater(*slower[::-1])
        p = p_slower if ratio >= 1 else p_faster
    separated = p is None or p <= alpha
    if paired and not separated:  # every round on the same side of its counterpart
        separated = all(r > 1 for r in ratios) if ratio >= 1 else all(r < 1 for r in ratios)
    if ratio > limit and separated:
        status = REGRESSION
    elif ratio < 1.0 / limit and separated:
        status = IMPROVEMENT
    elif ratio > factor or ratio < 1.0 / factor:
        status = WITHIN_NOISE
    else:
        status = SAME
    kernel_changed = base.kernel_id and head.kernel_id and base.kernel_id != head.kernel_id
    if kernel_changed:
        notes.append(f"kernel {base.kernel_id} -> {head.kernel_id}")
    if status != SAME:
        if base.contamination or head.contamination:
            status = CONTAMINATED
            notes.append("; ".join(dict.fromkeys(base.contamination + head.contamination)))
        elif kernel_changed and (base.kernel_by_timing or head.kernel_by_timing):
            status = DIFFERENT_KERNEL
    status, why_blind = blind_verdict(status, limit, metric)
    notes += [why_blind] if why_blind else []
    if why := launch_path(metric, base, head):
        status = LAUNCH_PATH
        notes.insert(0, why)
    return status, ratio, limit, p, "; ".join(notes)


def _op_of(benchmark: str) -> str:
    return benchmark.split(".")[1].lower()


_GRAPH = "device_time_graph_ms"


def case_of(run: Run, record, benchmark: str, params: Params, index: dict | None = None) -> Case:
    """The gate's view of one case: from the run's record when it has one (every round), else
    from asv's stored value (one value; noise from the ``*_iqr`` metric when stored).

    ``record`` is a :class:`fusebench.record.Sweep` or None; ``index`` its ``by_key()``
    when the caller has built it once (many cases of one record).
    """
    metric = metrictable.metric(benchmark)
    value = run.value(benchmark, params)
    if is_failed(value):
        return Case(failed=True)
    rec = None
    if record is not None:
        rec = (index if index is not None else record.by_key()).get((_op_of(benchmark), *params))
    if rec is not None and rec.status == "ok" and rec.rounds:
        rounds, contamination = clean_rounds(rec.rounds)
        used = [(i, r) for i, r in enumerate(rec.rounds)
                if any(r is c for c in rounds) and r.get(metric.field) is not None]
        values = tuple(r[metric.field] * metric.scale for _, r in used)
        graph = [r[_GRAPH] for r in rounds if r.get(_GRAPH) is not None]
        graph_ms = statistics.median(graph) if graph and not rec.graph_reason else None
        if values:
            med = statistics.median(values)
            noise = (max(values) - min(values)) / med if len(values) > 1 and med > 0 else 0.0
            if len(values) == 1:
                iqr_field = metric.field.replace("_ms", "_iqr_ms")
                iqr = rounds[0].get(iqr_field)
                noise = iqr * metric.scale / med if iqr is not None and med > 0 else 0.0
            if short := rec.short_batch(metric.field):  # not measured the way the method asks
                contamination = [*contamination, short]
            return Case(values, False, noise, rec.time_per_launch_ms(), tuple(contamination),
                        rec.kernel_id, rec.kernel_by_timing, graph_ms, rec.launches,
                        tuple(i for i, _ in used))
    if not is_measured(value):
        return Case()
    noise = 0.0
    iqr = run.value(f"{benchmark}_iqr", params) if metric.field.endswith("_ms") else math.nan
    if is_measured(iqr) and value > 0:
        noise = iqr / value
    prefix = benchmark.rsplit(".", 1)[0]
    per_launch = run.value(prefix + ".track_device_time", params)
    per_launch_ms = per_launch * 1e3 if is_measured(per_launch) else None
    graph = run.value(prefix + ".track_device_time_graph", params)
    return Case((value,), False, noise, per_launch_ms, graph_ms=graph * 1e3 if is_measured(graph) else None)


def compare(base: Run, head: Run, factor: float = metrictable.DEFAULT_FACTOR, base_record=None,
            head_record=None, alpha: float = ALPHA, history: "noise.History | None" = None) -> list[Row]:
    """Every case of every gated metric in ``base`` or ``head``, judged.

    Args:
        base, head: the two commits' asv results on one machine.
        factor: allowed slowdown before noise (1.04 = 4 %); must be >= 1.
        base_record, head_record: the runs' records (``fusebench.storage.runrecord.load``), or None.
        alpha: significance of the test separating the rounds (default :data:`ALPHA`).
        history: the machine's A/A history (``fusebench.gate.noise``); None: the rounds rule
            alone, without saying so per case.

    Raises:
        ValueError: ``factor`` < 1.
    """
    if not factor >= 1.0:
        raise ValueError(f"factor must be >= 1, got {factor}")
    rows = []
    gated = {m.name for m in metrictable.GATED}
    pair = (base.commit, head.commit) if getattr(base, "commit", None) else None
    base_index = base_record.by_key() if base_record is not None else None
    head_index = head_record.by_key() if head_record is not None else None
    libraries = ""
    if base_record is not None and head_record is not None \
            and noise.loaded(base_record) != noise.loaded(head_record):
        libraries = (f"the runs loaded different reference libraries (base: "
                     f"{', '.join(sorted(noise.loaded(base_record))) or 'none'}; head: "
                     f"{', '.join(sorted(noise.loaded(head_record))) or 'none'})")
    for benchmark in sorted(set(base.values) | set(head.values)):
        if benchmark.rsplit(".", 1)[-1] not in gated:
            continue
        metric = metrictable.metric(benchmark)
        keys = set(base.values.get(benchmark, {})) | set(head.values.get(benchmark, {}))
        for params in sorted(keys):
            b = case_of(base, base_record, benchmark, params, base_index)
            h = case_of(head, head_record, benchmark, params, head_index)
            lim = None
            if history is not None:
                ref = b if b.measured else h
                per_launch = ref.median / metric.scale / (ref.launches or 1) if ref.measured else None
                lim = history.limit(metric.field, (_op_of(benchmark), *params), per_launch, exclude=pair)
                if metric.field == _GRAPH and lim.n == 0:
                    lim = _hot_history(history, (_op_of(benchmark), *params), b if b.measured else h,
                                       pair) or lim
            status, ratio, limit, p, note = judge(metric, b, h, factor, alpha, lim)
            if libraries and status in (REGRESSION, IMPROVEMENT, WITHIN_NOISE) \
                    and params[0] not in noise.REFERENCE_BACKENDS:
                status, note = DIFFERENT_LIBRARIES, "; ".join(filter(None, (libraries, note)))
            before = None if b.failed else (b.median if b.values else math.nan)
            after = None if h.failed else (h.median if h.values else math.nan)
            rows.append(Row(benchmark, params, metric.unit, before, after, ratio,
                            max(b.noise, h.noise), status, limit, p, note))
    return with_graph_notes(rows)


def with_graph_notes(rows: list[Row]) -> list[Row]:
    """``rows`` with each regressed or improved stream figure's note ending in its case's graph
    figure's ratio and status (``graph 1.000x, same``): a change the graph figure does not share
    is in what the stream adds to the GPU work (the launches, a cold L2), not in that work alone."""
    def field(row: Row) -> str:
        m = metrictable.BY_NAME.get(row.benchmark.rsplit(".", 1)[-1])
        return m.field if m else ""

    graph = {(_op_of(row.benchmark), row.params): row for row in rows if field(row) == _GRAPH}
    out = []
    for row in rows:
        g = graph.get((_op_of(row.benchmark), row.params))
        if (row.status in (REGRESSION, IMPROVEMENT) and g is not None and math.isfinite(g.slowdown)
                and field(row) in STREAM_FIELDS):
            graph_note = f"graph {g.slowdown:.3f}x, {g.status}"
            row = replace(row, note="; ".join(filter(None, (row.note, graph_note))))
        out.append(row)
    return out


def _hot_history(history: "noise.History", key, case: Case, pair) -> "noise.Limit | None":
    """A graph figure without history of its own borrows the case's hot-figure history where the
    hot figure times the same kernels (not the launch path: hot <= LAUNCH_PATH_RATIO x graph) and
    is not launch-bound (20 us per launch or more; below, the band's fallback applies)."""
    if not (case.measured and case.per_launch_ms and case.graph_ms):
        return None
    hot_ms = case.per_launch_ms * (case.launches or 1)
    if hot_ms > LAUNCH_PATH_RATIO * case.graph_ms or case.per_launch_ms < noise.FALLBACK[-1][0]:
        return None  # the launch path, or launch-bound: the stream's history is the host's
    hot = history.limit("device_time_ms", key, case.per_launch_ms, exclude=pair)
    if hot.n == 0 or hot.limit is None:
        return None
    return noise.Limit(hot.limit, hot.sigma, 0, f"the hot figure's history ({hot.source})")


def detectable(rows: list[Row]) -> tuple[dict[float, int], int, list[Row]]:
    """What the gate could see in ``rows``: per slowdown of :data:`DETECTABLE`, how many judged
    case-metrics (measured on both sides, gated) had a limit at or under it; the number judged;
    and the judged rows whose limit is above the largest (it cannot see even that)."""
    judged = [r for r in rows if r.status != LAUNCH_PATH and math.isfinite(r.limit)]
    counts = {d: sum(r.limit <= d for r in judged) for d in DETECTABLE}
    return counts, len(judged), [r for r in judged if r.limit > DETECTABLE[-1]]


def detectable_text(rows: list[Row]) -> str:
    """The gate's closing lines: how many case-metrics it can judge at 5, 10 and 20 %, how many
    gate on their graph time only (launch path), and the ones it cannot judge at 20 %, named."""
    counts, n, blind = detectable(rows)
    if not n:
        return ("compare: no gated figure on both sides: the gate judges hot, cold and graph device "
                "time, which a run without a GPU does not measure (host times are shown, never judged)")
    path = sum(r.status == LAUNCH_PATH for r in rows)
    parts = ", ".join(f"{counts[d]} ({100 * counts[d] / n:.0f} %) at {100 * (d - 1):.0f} %"
                      for d in DETECTABLE)
    lines = [f"compare: of {n} gated case-metrics, the gate can see a slowdown of {parts}"
             + (f"; {path} stream figures measure the launch path and are not gated (graph time is)"
                if path else "")]
    if together := moved_together(rows):
        lines.append(f"compare: median head/base over the case-metrics judged: {together}")
    for r in sorted(blind, key=lambda r: -r.limit):
        lines.append(f"compare: cannot see 20 %: {r.benchmark} ({', '.join(r.params)}) limit "
                     f"{r.limit:.3f}x" + (f" [{r.note}]" if r.note else ""))
    return "\n".join(lines)


#: The timed figures whose median ratio :func:`moved_together` reports, by their short name.
TOGETHER = {"device_time_ms": "hot", "device_time_cold_ms": "cold", _GRAPH: "graph", "wall_time_ms": "wall"}


def moved_together(rows: list[Row]) -> str:
    """How every case moved at once, per timed figure: the median head/base over the rows judged
    or gated on their graph time (``hot 0.997x (117), cold 0.997x (117), graph 1.000x (117)``).
    A shift that every case shares, and a stream figure shares but its graph figure does not,
    comes from the processes or the board (where each side ran, the launch path), not from one
    kernel: it tells such a cause from the flagged rows it moves. Empty when nothing was judged."""
    by: dict[str, list[float]] = {}
    for r in rows:
        m = metrictable.BY_NAME.get(r.benchmark.rsplit(".", 1)[-1])
        if (m and m.field in TOGETHER and r.status in VERDICTS + (LAUNCH_PATH,)
                and math.isfinite(r.slowdown) and r.slowdown > 0):
            by.setdefault(TOGETHER[m.field], []).append(r.slowdown)
    return ", ".join(f"{name} {statistics.median(v):.3f}x ({len(v)})"
                     for name in TOGETHER.values() if (v := by.get(name)))


def nothing_judged(rows: list[Row]) -> bool:
    """True when no row got a verdict (:data:`VERDICTS`): every case-metric is not on both sides,
    contaminated, from other libraries or another kernel, or measures the launch path (or there
    is none). Such a comparison is not "ok", whatever it hides: the command says why, exits 2."""
    return not any(r.status in VERDICTS for r in rows)


def unjudged_text(rows: list[Row]) -> str:
    """Why the rows of :func:`nothing_judged` measured on both sides were not judged, counted by
    status, e.g. ``2 contaminated, 1 different kernel``; empty when none was on both sides."""
    counts = {s: sum(r.status == s for r in rows) for s in ORDER if s not in VERDICTS + (NOT_BOTH,)}
    return ", ".join(f"{n} {s}" for s, n in counts.items() if n)


def missing_text(rows: list[Row], base: str, head: str) -> str:
    """Why :func:`nothing_judged`: how many gated case-metrics each side stored (a failure counts)
    and of which ops, e.g. ``gated case-metrics (hot, cold and graph device time) stored: base
    <sha8> 0 and head <sha8> 0``, and, when neither stored any, that a run without a GPU measures
    wall time only. ``rows`` spans every combination of the suite's axes, most stored by neither
    side, so its length is not named."""
    def side(values: list[float | None]) -> tuple[int, str]:
        stored = [r for r, v in zip(rows, values) if v is None or math.isfinite(v)]
        return len(stored), ", ".join(sorted({_op_of(r.benchmark) for r in stored}))

    (nb, ops_b), (nh, ops_h) = side([r.before for r in rows]), side([r.after for r in rows])
    text = (f"gated case-metrics (hot, cold and graph device time) stored: base {base} "
            f"{nb}{f' ({ops_b})' if ops_b else ''} and head {head} {nh}{f' ({ops_h})' if ops_h else ''}")
    if not nb and not nh:
        return text + ": a run without a GPU measures wall time only, shown, never judged"
    return text + ", none of the same case on both sides"


def failed_gate(rows: list[Row]) -> bool:
    """True when any row regressed or newly fails."""
    return any(r.status in FAILING for r in rows)


def inconclusive(rows: list[Row]) -> bool:
    """True when nothing regressed or newly fails and most case-metrics judged are :data:`BLIND`:
    such a comparison cannot say "ok" (the command says why and what to run, exits 2)."""
    judged = [r for r in rows if r.status in VERDICTS]
    return not failed_gate(rows) and 2 * sum(r.status == BLIND for r in judged) > len(judged)


def inconclusive_text(rows: list[Row], rerun: str) -> str:
    """Why :func:`inconclusive`, and ``rerun`` (what to run: a command that runs as printed):
    ``inconclusive: 12 of 14 case-metrics judged are blind (limit 2.31x-5.90x, beyond the host's
    margin): a slowdown smaller than that could not be seen here; run it on a quieter host, or
    with more pairs: <rerun>``."""
    judged = [r for r in rows if r.status in VERDICTS]
    limits = sorted(r.limit for r in judged if r.status == BLIND)
    span = f"{limits[0]:.2f}x" + (f"-{limits[-1]:.2f}x" if limits[-1] > limits[0] else "")
    return (f"inconclusive: {len(limits)} of {len(judged)} case-metrics judged are blind (limit {span}, "
            "beyond the host's margin): a slowdown smaller than that could not be seen here; "
            f"run it on a quieter host, or with more pairs: {rerun}")


def human(value: float | None, unit: str) -> str:
    """A value for the table: ``1.23ms``, ``3456.7 GB/s``, ``91.2 %``, ``failed``, ``n/a``."""
    if value is None:
        return "failed"
    if not math.isfinite(value):
        return "n/a"
    if unit == "seconds":
        for scale, suffix in ((1.0, "s"), (1e-3, "ms"), (1e-6, "us"), (1e-9, "ns")):
            if abs(value) >= scale or suffix == "ns":
                return f"{value / scale:.3g}{suffix}"
    return f"{value:.4g} {unit}".rstrip()


#: The legend of the p column, under the text table and the markdown one.
P_LEGEND = ("p: one-sided Mann-Whitney over the rounds, in the slowdown's direction (that head is "
            "slower when it is above 1, faster when below); '-': too few rounds for the test, the limit "
            "alone decides")
#: What the table says when :func:`nothing_judged` (the closing lines say what is missing).
NOTHING_JUDGED = "nothing judged: no case has a gated figure on both sides"
#: What the table says when every case judged is the same (wall time's margin on a host without
#: a GPU is wider than the factor: the closing line gives both).
ALL_SAME = "no case changed by more than its margin (the factor the closing line gives)"

ORDER = (NEW_FAILURE, REGRESSION, CONTAMINATED, DIFFERENT_LIBRARIES, DIFFERENT_KERNEL, WITHIN_NOISE,
         BLIND, FIXED, IMPROVEMENT, NOT_BOTH, LAUNCH_PATH, SAME)


def table(rows: list[Row], show_all: bool = False, p_legend: str = P_LEGEND) -> str:
    """The comparison as text, worst first: rows that are not ``same`` (all with ``show_all``).

    Columns: mark, before, after, slowdown, noise, the limit the case was held to, p, the case,
    and a note (launch-bound, kernel change, contamination).
    """
    order = {s: i for i, s in enumerate(ORDER)}
    shown = [r for r in rows if show_all or r.status not in (SAME, LAUNCH_PATH, NOT_BOTH)]
    shown.sort(key=lambda r: (order[r.status], -(r.slowdown if math.isfinite(r.slowdown) else 0.0)))
    header = ("", "before", "after", "slowdown", "noise", "limit", "p", "benchmark (backend, shape, dtype)")
    lines = [header]
    for r in shown:
        ratio = f"{r.slowdown:.3f}x" if math.isfinite(r.slowdown) else ""
        noise = f"{100 * r.noise:.1f}%" if r.noise else ""
        limit = f"{r.limit:.3f}x" if math.isfinite(r.limit) else ""
        p = f"{r.p_value:.3f}" if r.p_value is not None else "-" if math.isfinite(r.slowdown) else ""
        case = terminal(f"{r.benchmark} ({', '.join(r.params)})" + (f"  [{r.note}]" if r.note else ""))
        lines.append((MARK[r.status], human(r.before, r.unit), human(r.after, r.unit), ratio, noise,
                      limit, p, case))
    if not shown:
        return NOTHING_JUDGED if nothing_judged(rows) else ALL_SAME
    lines.append(("", "", "", "", "", "", "", p_legend))
    shown_marks = dict.fromkeys((MARK[r.status], r.status) for r in shown if MARK[r.status].strip())
    legend = "first column: " + ", ".join(f"{m} {s}" for m, s in shown_marks)
    lines.append(("", "", "", "", "", "", "", legend))
    widths = [max(len(line[i]) for line in lines) for i in range(len(header) - 1)]
    return "\n".join("  ".join([c.rjust(w) for c, w in zip(line[:-1], widths)] + [line[-1]]).rstrip()
                     for line in lines)


def _finite(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


def as_json(rows: list[Row], **about) -> dict:
    """The comparison as a JSON-ready dict: ``about`` (machine, commits, factor, failed), the
    counts by status, what the gate could see, and every case-metric with its limit (NaN as null)."""
    counts, n, blind = detectable(rows)
    return {**about,
            "inconclusive": inconclusive(rows),
            "statuses": {s: sum(r.status == s for r in rows) for s in ORDER},
            "detectable": {"judged": n, **{f"{100 * (d - 1):.0f}%": counts[d] for d in DETECTABLE},
                           "blind_at_20%": [f"{r.benchmark} ({', '.join(r.params)})" for r in blind]},
            "rows": [{"benchmark": r.benchmark, "params": list(r.params), "unit": r.unit,
                      "before": _finite(r.before), "after": _finite(r.after),
                      "slowdown": _finite(r.slowdown), "noise": r.noise, "limit": _finite(r.limit),
                      "p": r.p_value, "status": r.status, "host_busy": HOST_BUSY in r.note,
                      "note": r.note} for r in rows]}


def status_text(row: Row) -> str:
    """The row's status as a reader is told it: ``regression (host busy; paired)`` for one judged
    on a busy host's pairs, else the status."""
    return f"{row.status} ({HOST_BUSY})" if HOST_BUSY in row.note else row.status


def markdown(rows: list[Row], show_all: bool = False, title: str = "", p_legend: str = P_LEGEND,
             rerun: str = "") -> str:
    """The comparison as a markdown table (a PR comment): the rows :func:`table` shows, worst first,
    under ``title``, then the counts and what the gate could see; when :func:`inconclusive`, why
    and ``rerun`` (what to run)."""
    order = {s: i for i, s in enumerate(ORDER)}
    shown = [r for r in rows if show_all or r.status not in (SAME, LAUNCH_PATH, NOT_BOTH)]
    shown.sort(key=lambda r: (order[r.status], -(r.slowdown if math.isfinite(r.slowdown) else 0.0)))
    out = [f"**{title}**" if title else "", ""]
    if shown:
        out += ["| | status | case | before | after | slowdown | limit | p | note |",
                "|---|---|---|---|---|---|---|---|---|"]
        for r in shown:
            # the case's names and the note may come from another host or a session file: escaped
            name = r.benchmark.split(".", 1)[-1].replace("`", "")
            params = markdown_cell(", ".join(r.params))
            cells = [MARK[r.status].strip() or " ", status_text(r), f"`{name}` ({params})",
                     human(r.before, r.unit), human(r.after, r.unit),
                     f"{r.slowdown:.3f}x" if math.isfinite(r.slowdown) else "",
                     f"{r.limit:.3f}x" if math.isfinite(r.limit) else "",
                     f"{r.p_value:.3f}" if r.p_value is not None else "-", markdown_cell(r.note)]
            out.append("| " + " | ".join(cells) + " |")
        out += ["", p_legend.replace("'-'", "`-`") + "."]
    elif nothing_judged(rows):
        out.append(NOTHING_JUDGED[0].upper() + NOTHING_JUDGED[1:] + ".")
    else:
        out.append(ALL_SAME[0].upper() + ALL_SAME[1:] + ".")
    out += ["", detectable_text(rows).replace("compare: ", "", 1).splitlines()[0]]
    if inconclusive(rows):
        why = inconclusive_text(rows, f"`{rerun}`" if rerun else "the same run")
        out += ["", f"**Inconclusive**:{why.removeprefix('inconclusive:')}"]
    return "\n".join(out).strip()


def summary(rows: list[Row]) -> str:
    """Counts by status: ``2 regression, 1 new failure, 0 improvement, ...``; a regression or an
    improvement judged on a busy host's pairs is counted again in brackets: ``12 regression (12
    host busy; paired)``."""
    counts = {s: 0 for s in ORDER}
    busy = {s: 0 for s in ORDER}
    for r in rows:
        counts[r.status] += 1
        busy[r.status] += HOST_BUSY in r.note
    return ", ".join(f"{n} {s}" + (f" ({busy[s]} {HOST_BUSY})" if busy[s] else "") for s, n in counts.items())
