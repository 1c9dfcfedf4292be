"""When a mode's samples stop within a round: the stopping rule (nvbench's model).

nvbench stops a measurement once it has ``--min-samples``, its relative noise is under
``--max-noise`` and ``--min-time`` has passed, or when ``--timeout`` runs out. fusebench keeps the
shape of that rule for each timed mode (hot, cold, wall) of each case in each round:

* at least :attr:`StopRule.min_samples` samples, always;
* then stop as soon as the **relative standard error of the median** is at most
  :attr:`StopRule.max_noise`;
* and never more samples than fill :attr:`StopRule.max_s` seconds at the case's estimated time
  per sample: the cap, which is what every mode took before the rule (``ROUND_BUDGET_S``).

Why the median's standard error and not nvbench's stdrel (the samples' own spread): the figure of a
round is the median of its samples, and what the gate sees is how far that median moves between
rounds; the median's standard error is the part of that movement the samples themselves add. A
quiet case reaches a small error after a few dozen samples, a noisy one never does and runs to the
cap, as it did before. The error is estimated robustly, from the interquartile range (a stall of
the host or one slow sample does not stop or prolong a mode by itself): sigma = IQR / 1.349, and
the median's standard error is 1.2533 sigma / sqrt(n) for a normal stream, so
``median_error = 0.9291 * IQR / median / sqrt(n)``.

Why the cap counts samples, not host seconds: the cap is exactly the number of samples the mode
took before the rule (``repeats_for(estimate, max_s, min_samples, ...)``), so a case that never
settles is measured as it was and its noise cannot grow; a case that stops early has a median
error of at most ``max_noise``, which the defaults keep far below the spread between rounds the
gate sees (docs/method.md says the numbers).

Samples are taken in chunks: first ``min_samples``, then as many again as there are so far
(doubling), each chunk bounded by what the cap leaves; the rule is checked between chunks. Each
chunk costs a synchronization and a new blocking kernel, so doubling keeps their number to
about log2(cap / min_samples) + 1.

No torch here: the case file's reader (``fusebench.config``) builds a :class:`StopRule`.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass
from typing import Callable

#: Normal-distribution constants: sigma = IQR / 1.349; the median's standard error is
#: sqrt(pi / 2) = 1.2533 times the mean's.
IQR_PER_SIGMA = 1.349
MEDIAN_SE_FACTOR = math.sqrt(math.pi / 2)
#: The fewest samples the error is estimated from (an IQR of three samples says nothing).
MIN_ESTIMATE_SAMPLES = 5


@dataclass(frozen=True)
class StopRule:
    """The stopping rule of one mode in one round (the case file's ``settings.timing``).

    Attributes:
        max_noise: stop once the median's relative standard error is at most this (0.0005: 0.05 %).
        max_s: the cap: at most the samples that fill this many seconds at the estimated time per
            sample (what every mode took before the rule), and never fewer than ``min_samples``.
        min_samples: the fewest samples per mode and round.
    """

    max_noise: float = 0.0005
    max_s: float = 0.04
    min_samples: int = 10

    def as_dict(self) -> dict:
        """The rule as the run record keeps it (``Sweep.timing``)."""
        return asdict(self)


#: The rule of a run whose case file says nothing (``fusebench.yaml`` documents the same values).
DEFAULT = StopRule()


def median_error(samples: list[float]) -> float:
    """Relative standard error of the median of ``samples``, estimated from their IQR:
    0.9291 x IQR / median / sqrt(n); infinite with fewer than :data:`MIN_ESTIMATE_SAMPLES` or a
    median of 0 (never settled)."""
    n = len(samples)
    if n < MIN_ESTIMATE_SAMPLES:
        return math.inf
    med = statistics.median(samples)
    if med <= 0:
        return math.inf
    q1, _, q3 = statistics.quantiles(samples, n=4, method="inclusive")
    return MEDIAN_SE_FACTOR * (q3 - q1) / IQR_PER_SIGMA / med / math.sqrt(n)


def settled(samples: list[float], rule: StopRule) -> bool:
    """True when ``samples`` may stop under ``rule`` before the cap: at least ``min_samples`` and
    a median error of at most ``max_noise``."""
    return len(samples) >= rule.min_samples and median_error(samples) <= rule.max_noise


def sample_until(take: Callable[[int], list[float]], rule: StopRule, cap: int) -> list[float]:
    """Samples from ``take(n)`` (``n`` new samples per call) in doubling chunks until
    :func:`settled` or ``cap`` samples (at least ``rule.min_samples``).

    Args:
        take: takes ``n`` samples and returns them (one queued block of repeats on a GPU).
        rule: the stopping rule.
        cap: the most samples (the mode's count before the rule); raised to ``rule.min_samples``.
    """
    cap = max(cap, rule.min_samples, 1)
    samples: list[float] = []
    while len(samples) < cap:
        n = min(max(rule.min_samples, len(samples)), cap - len(samples))
        samples.extend(take(n))
        if settled(samples, rule):
            break
    return samples
