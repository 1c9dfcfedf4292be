"""The regression gate: compare two commits' stored results on one machine, round by round.

``asv compare`` prints a table but always exits 0, and asv stores one number per case, so the
gate is done here, from each run's record (``fusebench.history.runrecord``: every round's figures).

**What is judged**: the gated metrics of :mod:`fusebench.metrictable`, hot and cold device time.
Wall time, bandwidth and the percentages are shown elsewhere, never judged.

**The rule.** For one case of one metric, with per-round figures ``b`` (base) and ``h`` (head):

* ``slowdown`` = median(h) / median(b) (> 1 slower);
* ``limit`` = max(FACTOR, A/A allowance of the case, 1 + NOISE_K × noise), where ``noise`` is the
  larger of the two runs' spread between rounds ((max - min) / median); for a result with one
  value per case (stored before records), the batch's IQR / median instead;
* **regression**: slowdown > limit *and* the rounds are separated by a one-sided exact
  Mann-Whitney U test at ``ALPHA`` = 0.05 (with 3 rounds a side the smallest p is 1/20 = 0.05:
  every head round slower than every base round). Where the test cannot reach ``ALPHA`` (fewer
  rounds), the limit alone decides;
* **improvement**: the same, the other way; **within noise**: beyond FACTOR but not beyond the
  limit or not separated; **same**: within FACTOR;
* **contaminated**: a case that would be a regression, improvement or within noise, but one of
  the runs measured it throttled or beside another process: never a regression;
* **different kernel**: the same, but the backend picks its kernel by timing at first use
  (Inductor) and the two runs ran different kernels (``kernel_id``): the compiler's choice, not
  the code's; reported apart, never a regression;
* **new failure**: failed at head, not at base; **fixed**: the other way.

Regressions and new failures fail the gate (exit 1); nothing else does.

**The constants and the A/A data behind them.** Two full H200 runs of the same kernels,
c54e967 -> d0a40cb (one round each, two hosts; the Triton 16-bit GELU cases, whose code changed,
left out), hot device time, ratio of the slower to the faster run:

==========================  ====  ======  =====  =====
device time per launch      n     median  p99    max
==========================  ====  ======  =====  =====
under 5 µs                  47    1.047   1.107  1.123
5 to 20 µs                  56    1.017   1.097  1.103
20 to 100 µs                56    1.004   1.143  1.157
100 µs and over             104   1.001   1.010  1.090
==========================  ====  ======  =====  =====

(cold device time: under 5 µs max 1.166, 5 to 20 µs max 1.101.) Launch-bound cases, whose
kernels last a few µs each, move with the host and driver (launch latency, clocks ramping between
tiny kernels): per launch, under 5 µs they get :data:`LAUNCH_BOUND` 1.20 and under 20 µs 1.12,
above what the A/A pair showed. The largest moves above 20 µs were ``compile`` softmax
4096x4096 16-bit (1.14 and 1.16: Inductor's timing-based pick, now recorded and reported as
*different kernel*) and ``torch`` tf32 matmul (1.07 to 1.09: a power-capped tensor-core loop,
now *contaminated* when NVML says so). Every other case of 20 µs per launch or more stayed
within 1.022 in that pair and in fed51be -> c54e967 and 8828e7d -> fed51be (their unchanged
cases). The default FACTOR is therefore 1.04 (:data:`fusebench.metrictable.DEFAULT_FACTOR`):
about 2 points above the largest A/A move, and low enough that a true 5 % slowdown, measured
within ±1 %, exceeds it.
NOISE_K = 2: the range of 3 rounds is about 1.7 standard deviations of one round, and the
difference of two medians of 3 about 1.6, so 2 × range covers a 3-sigma move.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from functools import lru_cache

from fusebench import metrictable
from fusebench.history.results import Params, Run, is_failed, is_measured
from fusebench.measure.sweep import clean_rounds

#: Wider thresholds for launch-bound cases: (device time per launch below, ms; allowance).
LAUNCH_BOUND = ((0.002, 1.75), (0.005, 1.20), (0.020, 1.12))
#: The limit allows NOISE_K × the spread between rounds.
NOISE_K = 2.0
#: Significance of the one-sided Mann-Whitney U test over the rounds (the default of the case
#: file's ``settings.gate.alpha``).
ALPHA = 0.05

(REGRESSION, NEW_FAILURE, IMPROVEMENT, WITHIN_NOISE, FIXED, SAME, CONTAMINATED,
 DIFFERENT_KERNEL) = ("regression", "new failure", "improvement", "within noise", "fixed", "same",
                      "contaminated", "different kernel")
#: Marks in the table's first column (asv compare's ``+`` slower / ``-`` faster / ``~`` noise).
MARK = {REGRESSION: "+", NEW_FAILURE: "!", IMPROVEMENT: "-", WITHIN_NOISE: "~", FIXED: "*", SAME: " ",
        CONTAMINATED: "c", DIFFERENT_KERNEL: "k"}
#: Statuses that fail the gate.
FAILING = (REGRESSION, NEW_FAILURE)


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
    """

    values: tuple[float, ...] = ()
    failed: bool = False
    noise: float = 0.0
    per_launch_ms: float | None = None
    contamination: tuple[str, ...] = ()
    kernel_id: str | None = None
    kernel_by_timing: bool = False

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


def allowance(per_launch_ms: float | None) -> tuple[float, str]:
    """The A/A allowance of a case from its device time per launch (ms) and why: 1.0 for a case
    that is not launch-bound (FACTOR then decides), :data:`LAUNCH_BOUND` otherwise."""
    if per_launch_ms is None or not math.isfinite(per_launch_ms):
        return 1.0, ""
    for below, allowed in LAUNCH_BOUND:
        if per_launch_ms < below:
            return allowed, f"launch-bound ({1e3 * per_launch_ms:.1f} us per launch)"
    return 1.0, ""


@lru_cache(maxsize=None)
def _u_counts(n: int, m: int) -> tuple[int, ...]:
    """Number of orderings of n base and m head values giving each U (0..n*m), no ties."""
    if n == 0 or m == 0:
        return (1,)
    # The largest value is a head value (adds n to U) or a base value (adds nothing).
    with_head, with_base = _u_counts(n, m - 1), _u_counts(n - 1, m)
    out = [0] * (n * m + 1)
    for u, c in enumerate(with_head):
        out[u + n] += c
    for u, c in enumerate(with_base):
        out[u] += c
    return tuple(out)


def mann_whitney_greater(base: tuple[float, ...], head: tuple[float, ...]) -> float:
    """Exact one-sided p-value that ``head`` values tend to be larger than ``base`` values.

    U counts the (base, head) pairs with head > base (ties count 1/2); p = P(U >= observed)
    under the null of exchangeable values (Mann & Whitney 1947; no tie correction: ties are
    rare among timings). With 3 and 3 values the smallest p is 1/20.

    Raises:
        ValueError: either side empty.
    """
    if not base or not head:
        raise ValueError("the test needs at least one value on each side")
    u = sum(1.0 if h > b else 0.5 if h == b else 0.0 for b in base for h in head)
    counts = _u_counts(len(base), len(head))
    return sum(c for k, c in enumerate(counts) if k >= u - 1e-9) / sum(counts)


def min_p(n: int, m: int) -> float:
    """The smallest p the exact test can give with n and m values: 1 / C(n + m, n)."""
    return 1.0 / math.comb(n + m, n)


def judge(metric: metrictable.Metric, base: Case, head: Case, factor: float,
          alpha: float = ALPHA) -> tuple[str, float, float, float | None, str]:
    """Status, slowdown, limit, p-value and note of one case (see the module doc for the rule;
    ``alpha`` is the test's significance, :data:`ALPHA` by default)."""
    if head.failed:
        return (SAME if base.failed else NEW_FAILURE), math.nan, math.nan, None, ""
    if not (base.measured and head.measured):
        return (FIXED if base.failed and head.measured else SAME), math.nan, math.nan, None, ""
    before, after = base.median, head.median
    worse, better = (after, before) if metric.sign < 0 else (before, after)
    ratio = (1.0 if worse == 0 else math.inf) if better == 0 else worse / better
    known = [c.per_launch_ms for c in (base, head) if c.per_launch_ms is not None]
    aa, why = allowance(min(known) if known else None)  # the faster run's class: the wider limit
    noise = max(base.noise, head.noise)
    limit = max(factor, aa, 1.0 + NOISE_K * noise)
    notes = [why] if why else []
    p = None
    testable = min_p(len(base.values), len(head.values)) <= alpha
    if testable:
        slower = (base.values, head.values) if metric.sign < 0 else (head.values, base.values)
        p_slower = mann_whitney_greater(*slower)
        p_faster = mann_whitney_greater(*slower[::-1])
        p = p_slower if ratio >= 1 else p_faster
    separated = p is None or p <= alpha
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
    return status, ratio, limit, p, "; ".join(notes)


def _op_of(benchmark: str) -> str:
    return benchmark.split(".")[1].lower()


def case_of(run: Run, record, benchmark: str, params: Params) -> Case:
    """The gate's view of one case: from the run's record when it has one (every round), else
    from asv's stored value (one value; noise from the ``*_iqr`` metric when stored).

    ``record`` is a :class:`fusebench.measure.sweep.Sweep` or None.
    """
    metric = metrictable.metric(benchmark)
    value = run.value(benchmark, params)
    if is_failed(value):
        return Case(failed=True)
    rec = None
    if record is not None:
        rec = record.by_key().get((_op_of(benchmark), *params))
    if rec is not None and rec.status == "ok" and rec.rounds:
        rounds, contamination = clean_rounds(rec.rounds)
        values = tuple(r[metric.field] * metric.scale for r in rounds if r.get(metric.field) is not None)
        if values:
            med = statistics.median(values)
            noise = (max(values) - min(values)) / med if len(values) > 1 and med > 0 else 0.0
            if len(values) == 1:
                iqr_field = metric.field.replace("_ms", "_iqr_ms")
                iqr = rounds[0].get(iqr_field)
                noise = iqr * metric.scale / med if iqr is not None and med > 0 else 0.0
            return Case(values, False, noise, rec.time_per_launch_ms(), tuple(contamination),
                        rec.kernel_id, rec.kernel_by_timing)
    if not is_measured(value):
        return Case()
    noise = 0.0
    iqr = run.value(f"{benchmark}_iqr", params) if metric.field.endswith("_ms") else math.nan
    if is_measured(iqr) and value > 0:
        noise = iqr / value
    per_launch = run.value(benchmark.rsplit(".", 1)[0] + ".track_device_time", params)
    per_launch_ms = per_launch * 1e3 if is_measured(per_launch) else None
    return Case((value,), False, noise, per_launch_ms)


def compare(base: Run, head: Run, factor: float = metrictable.DEFAULT_FACTOR, base_record=None,
            head_record=None, alpha: float = ALPHA) -> list[Row]:
    """Every case of every gated metric in ``base`` or ``head``, judged.

    Args:
        base, head: the two commits' asv results on one machine.
        factor: allowed slowdown before noise (1.04 = 4 %); must be >= 1.
        base_record, head_record: the runs' records (``fusebench.history.runrecord.load``), or None.
        alpha: significance of the test separating the rounds (default :data:`ALPHA`).

    Raises:
        ValueError: ``factor`` < 1.
    """
    if not factor >= 1.0:
        raise ValueError(f"factor must be >= 1, got {factor}")
    rows = []
    gated = {m.name for m in metrictable.GATED}
    for benchmark in sorted(set(base.values) | set(head.values)):
        if benchmark.rsplit(".", 1)[-1] not in gated:
            continue
        metric = metrictable.metric(benchmark)
        keys = set(base.values.get(benchmark, {})) | set(head.values.get(benchmark, {}))
        for params in sorted(keys):
            b = case_of(base, base_record, benchmark, params)
            h = case_of(head, head_record, benchmark, params)
            status, ratio, limit, p, note = judge(metric, b, h, factor, alpha)
            before = None if b.failed else (b.median if b.values else math.nan)
            after = None if h.failed else (h.median if h.values else math.nan)
            rows.append(Row(benchmark, params, metric.unit, before, after, ratio,
                            max(b.noise, h.noise), status, limit, p, note))
    return rows


def failed_gate(rows: list[Row]) -> bool:
    """True when any row regressed or newly fails."""
    return any(r.status in FAILING for r in rows)


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


ORDER = (NEW_FAILURE, REGRESSION, CONTAMINATED, DIFFERENT_KERNEL, WITHIN_NOISE, FIXED, IMPROVEMENT, SAME)


def table(rows: list[Row], show_all: bool = False) -> str:
    """The comparison as text, worst first: rows that are not ``same`` (all with ``show_all``).

    Columns: mark, before, after, slowdown, noise, the limit the case was held to, p, the case,
    and a note (launch-bound, kernel change, contamination).
    """
    order = {s: i for i, s in enumerate(ORDER)}
    shown = [r for r in rows if show_all or r.status != SAME]
    shown.sort(key=lambda r: (order[r.status], -(r.slowdown if math.isfinite(r.slowdown) else 0.0)))
    header = ("", "before", "after", "slowdown", "noise", "limit", "p", "benchmark (backend, shape, dtype)")
    lines = [header]
    for r in shown:
        ratio = f"{r.slowdown:.2f}x" if math.isfinite(r.slowdown) else ""
        noise = f"{100 * r.noise:.1f}%" if r.noise else ""
        limit = f"{r.limit:.2f}x" if math.isfinite(r.limit) else ""
        p = f"{r.p_value:.2f}" if r.p_value is not None else ""
        case = f"{r.benchmark} ({', '.join(r.params)})" + (f"  [{r.note}]" if r.note else "")
        lines.append((MARK[r.status], human(r.before, r.unit), human(r.after, r.unit), ratio, noise,
                      limit, p, case))
    if not shown:
        return "no case changed by more than the factor"
    widths = [max(len(line[i]) for line in lines) for i in range(len(header) - 1)]
    return "\n".join("  ".join([c.rjust(w) for c, w in zip(line[:-1], widths)] + [line[-1]]).rstrip()
                     for line in lines)


def summary(rows: list[Row]) -> str:
    """Counts by status: ``2 regression, 1 new failure, 0 improvement, ...``."""
    counts = {s: 0 for s in ORDER}
    for r in rows:
        counts[r.status] += 1
    return ", ".join(f"{n} {s}" for s, n in counts.items())
