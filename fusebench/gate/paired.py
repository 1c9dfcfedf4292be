"""The interval of a ratio from paired figures (``gate.ab``'s rule, ``gate.bisect``'s busy host).

Two figures of a pair are taken one right after the other, so what the board or the host does over
seconds or minutes lands on both: the log of their ratio carries the change of the code and the
noise of one pair, not the drift of the session. :func:`interval` gives the ratio and its
two-sided confidence interval from such pairs (Student's t on log ratios, with the period effect
of :func:`crossover` removed where the pairs were timed in both orders).
"""

from __future__ import annotations

import math
import statistics
from typing import Sequence


def t_quantile(alpha: float, df: int) -> float:
    """The two-sided ``1 - alpha`` quantile of Student's t with ``df`` degrees of freedom."""
    from scipy import stats  # the parent's only use of scipy: imported when judging

    return float(stats.t.ppf(1.0 - alpha / 2.0, df))


def p_one_sided(mean: float, se: float, df: int) -> float:
    """One-sided p of the paired t-test in the direction of ``mean``."""
    from scipy import stats

    if se == 0.0:
        return 0.0 if mean != 0.0 else 1.0
    return float(stats.t.sf(abs(mean) / se, df))


def crossover(d: Sequence[float], signs: Sequence[float]) -> tuple[float, float, int]:
    """The effect of the change in log ratios ``d`` of pairs timed in the orders ``signs`` (+1 base
    first, -1 head first): ``(delta, its standard error, degrees of freedom)`` of the least-squares
    fit ``d = delta + pi · sign`` (``gate.ab``'s module doc); the plain paired mean and
    ``sd / sqrt(n)``, n - 1 degrees of freedom, where ``signs`` does not match ``d``, has one order
    only, or n < 4."""
    n = len(d)
    mean = statistics.fmean(d)
    plain = (mean, statistics.stdev(d) / math.sqrt(n), n - 1)
    if n < 4 or len(signs) != n:
        return plain
    s_mean = statistics.fmean(signs)
    sxx = sum((s - s_mean) ** 2 for s in signs)
    if sxx == 0.0:
        return plain
    pi = sum((s - s_mean) * (x - mean) for s, x in zip(signs, d)) / sxx
    delta = mean - pi * s_mean
    rss = sum((x - delta - pi * s) ** 2 for s, x in zip(signs, d))
    return delta, math.sqrt(rss / (n - 2) * (1.0 / n + s_mean ** 2 / sxx)), n - 2


def interval(pairs: Sequence[tuple[float, float]], alpha: float,
             signs: Sequence[float] = ()) -> tuple[float, float, float, float, float, int]:
    """``(ratio, low, high, log mean, its standard error, degrees of freedom)`` of head/base from
    ``pairs`` of (base, head) figures (at least 2, all positive): the ratio ``exp(mean)`` of the
    log ratios and its two-sided ``1 - alpha`` interval ``exp(mean ± t · se)``."""
    d = [math.log(h / b) for b, h in pairs]
    mean, se, df = crossover(d, signs)
    t = t_quantile(alpha, df)
    return math.exp(mean), math.exp(mean - t * se), math.exp(mean + t * se), mean, se, df
