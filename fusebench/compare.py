"""The regression gate: compare the stored asv results of two commits on one machine.

``asv compare`` prints a table but always exits 0, and asv ``track_*`` results carry no
statistics, so the gate is done here:

* **direction** comes from the metric's unit: ``seconds`` lower is better; ``GB/s`` and ``%``
  higher is better; metrics in another unit are shown but never gate.
* **slowdown** of a case = after / before for lower-is-better metrics, before / after for
  higher-is-better ones (2.0 means twice as slow, 0.5 twice as fast).
* **noise** = the spread the sweep measured: the interquartile range over the median of the time
  the metric comes from (``track_device_time_iqr`` / ``track_device_time`` for the hot device
  time, bandwidth and % of ceiling; the cold and wall times have their own; on the CPU bandwidth
  comes from the wall time), the larger of the two commits' values. Results stored before these
  ``*_iqr`` metrics existed have no noise (0).
* a case **regressed** when slowdown > factor × (1 + noise); **improved** when slowdown <
  1 / (factor × (1 + noise)); slower than the factor but not beyond the noise is reported as
  *within noise* and does not fail the gate.
* a case **newly fails** when it failed (asv stores None) at the head commit and did not at the
  base commit (measured, skipped or not in that run).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fusebench.asvsuite import NOISE_SOURCE, NOISE_SUFFIX
from fusebench.results import Params, Run, is_failed, is_measured

#: Units whose smaller values are better, and those whose larger values are.
LOWER_IS_BETTER = {"seconds"}
HIGHER_IS_BETTER = {"GB/s", "TFLOP/s", "%"}

REGRESSION, NEW_FAILURE, IMPROVEMENT, WITHIN_NOISE, FIXED, SAME = (
    "regression", "new failure", "improvement", "within noise", "fixed", "same")
#: Marks in the table's first column (asv compare's ``+`` slower / ``-`` faster / ``~`` noise).
MARK = {REGRESSION: "+", NEW_FAILURE: "!", IMPROVEMENT: "-", WITHIN_NOISE: "~", FIXED: "*", SAME: " "}
#: Statuses that fail the gate.
FAILING = (REGRESSION, NEW_FAILURE)


@dataclass(frozen=True)
class Row:
    """One case of one metric compared.

    Attributes:
        benchmark: asv benchmark name (``suite.Gelu.track_device_time``).
        params: (backend, shape, dtype).
        unit: the metric's unit.
        before, after: values at the base and head commits (None failed, NaN skipped/absent).
        slowdown: > 1 worse, < 1 better (see the module doc); NaN when not both measured.
        noise: relative noise allowed (0.03 = 3 %).
        status: one of ``regression``, ``new failure``, ``improvement``, ``within noise``,
            ``fixed`` (failed before, measured now) or ``same``.
    """

    benchmark: str
    params: Params
    unit: str
    before: float | None
    after: float | None
    slowdown: float
    noise: float
    status: str


def direction(unit: str) -> int:
    """-1 when lower values are better (``seconds``), +1 when higher are (``GB/s``, ``%``), else 0."""
    return -1 if unit in LOWER_IS_BETTER else 1 if unit in HIGHER_IS_BETTER else 0


def slowdown(before: float, after: float, unit: str) -> float:
    """How many times worse ``after`` is than ``before`` for a metric in ``unit`` (1.0 = equal).

    Raises:
        ValueError: ``unit`` has no known direction.
    """
    sign = direction(unit)
    if sign == 0:
        raise ValueError(f"no direction known for unit {unit!r}")
    worse, better = (after, before) if sign < 0 else (before, after)
    if better == 0:
        return 1.0 if worse == 0 else math.inf
    return worse / better


def relative_noise(run: Run, benchmark: str, params: Params) -> float:
    """The metric's spread at this run: IQR / median of the time it is derived from; 0 if unknown."""
    module, cls, metric = benchmark.rsplit(".", 2)
    for source in NOISE_SOURCE.get(metric, ()):
        median = run.value(f"{module}.{cls}.{source}", params)
        iqr = run.value(f"{module}.{cls}.{source}{NOISE_SUFFIX}", params)
        if is_measured(median) and is_measured(iqr) and median > 0:
            return iqr / median
    return 0.0


def classify(before: float | None, after: float | None, unit: str, factor: float,
             noise: float) -> tuple[str, float]:
    """Status and slowdown of one case (see the module doc for the rule)."""
    if is_failed(after):
        return (SAME if is_failed(before) else NEW_FAILURE), math.nan
    if not (is_measured(before) and is_measured(after)):
        return (FIXED if is_failed(before) and is_measured(after) else SAME), math.nan
    ratio = slowdown(before, after, unit)
    limit = factor * (1.0 + noise)
    if ratio > limit:
        return REGRESSION, ratio
    if ratio > factor:
        return WITHIN_NOISE, ratio
    if ratio < 1.0 / limit:
        return IMPROVEMENT, ratio
    return SAME, ratio


def compare(base: Run, head: Run, units: dict[str, str], factor: float = 1.05) -> list[Row]:
    """Every case of every gated metric in ``base`` or ``head``, classified.

    Args:
        base, head: the two commits' results on one machine.
        units: ``{benchmark: unit}`` (``fusebench.results.units``); metrics whose unit has no
            direction and the ``*_iqr`` noise metrics are left out.
        factor: allowed slowdown before noise (1.05 = 5 %); must be >= 1.

    Raises:
        ValueError: ``factor`` < 1.
    """
    if not factor >= 1.0:
        raise ValueError(f"factor must be >= 1, got {factor}")
    rows = []
    for benchmark in sorted(set(base.values) | set(head.values)):
        unit = units.get(benchmark, "")
        if benchmark.endswith(NOISE_SUFFIX) or direction(unit) == 0:
            continue
        keys = set(base.values.get(benchmark, {})) | set(head.values.get(benchmark, {}))
        for params in sorted(keys):
            before, after = base.value(benchmark, params), head.value(benchmark, params)
            noise = max(relative_noise(base, benchmark, params), relative_noise(head, benchmark, params))
            status, ratio = classify(before, after, unit, factor, noise)
            rows.append(Row(benchmark, params, unit, before, after, ratio, noise, status))
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


def table(rows: list[Row], show_all: bool = False) -> str:
    """The comparison as text, worst first: rows that are not ``same`` (all with ``show_all``)."""
    order = {s: i for i, s in enumerate((NEW_FAILURE, REGRESSION, WITHIN_NOISE, FIXED, IMPROVEMENT, SAME))}
    shown = [r for r in rows if show_all or r.status != SAME]
    shown.sort(key=lambda r: (order[r.status], -(r.slowdown if math.isfinite(r.slowdown) else 0.0)))
    header = ("", "before", "after", "slowdown", "noise", "benchmark (backend, shape, dtype)")
    lines = [header]
    for r in shown:
        ratio = f"{r.slowdown:.2f}x" if math.isfinite(r.slowdown) else ""
        noise = f"{100 * r.noise:.1f}%" if r.noise else ""
        lines.append((MARK[r.status], human(r.before, r.unit), human(r.after, r.unit), ratio, noise,
                      f"{r.benchmark} ({', '.join(r.params)})"))
    if not shown:
        return "no case changed by more than the factor"
    widths = [max(len(line[i]) for line in lines) for i in range(len(header) - 1)]
    return "\n".join("  ".join([c.rjust(w) for c, w in zip(line[:-1], widths)] + [line[-1]]).rstrip()
                     for line in lines)


def summary(rows: list[Row]) -> str:
    """Counts by status: ``2 regression, 1 new failure, 0 improvement, ...``."""
    counts = {s: 0 for s in MARK}
    for r in rows:
        counts[r.status] += 1
    return ", ".join(f"{n} {s}" for s, n in counts.items())
