"""Marks on a figure that cannot be taken at face value, wherever it is shown (the run's tables,
the plots, the site), and the rule that keeps such a figure out of speedups.

A timed case's figure is doubtful when it is

* **noisy**: its rounds differ by more than :data:`NOISY` of the figure (``Record.noise``): a 5 %
  gate cannot see a change through it;
* **contaminated**: measured throttled, or beside other work on the GPU or the CPU
  (``Record.contamination``);
* **cache-resident**: above the copy ceiling (% of ceiling > ``metrictable.CACHE_FLAG_PCT``): the data
  sat in a cache (L2), so the figure is right for what it measures but is not memory bandwidth;
* **above the peak**: above the run's matrix peak (% of peak > 100): the peak was understated (an
  unstable measurement) or the matmul ran from cache.

An energy figure is doubtful when its window's average power is above the board's power limit
(by more than :data:`OVER_POWER`): NVML's counter advances in 100 ms steps, so a 0.2 s window
read at arbitrary times can be off by up to half (docs/method.md); such a figure is marked, never
taken as physical.

A doubtful figure is printed with its mark and gets no speedup (a speedup needs two figures that
can both be believed). ``make compare`` leaves contaminated cases out by its own rule.
"""

from __future__ import annotations

import math

#: Above this relative spread between rounds (10 %) a figure is noisy: a regression gate of 5 %
#: cannot see a change through it.
NOISY = 0.10
#: Above this spread (100 %: rounds differ by more than the figure itself) the spread is not
#: printed as a number, only as ``noisy (>100%)``: the figure says nothing about the op.
NOISE_CAP = 1.0
#: Above this % of the matrix peak a compute-bound figure cannot be a matmul at the peak.
PEAK_PCT = 100.0

#: An energy reading whose window averaged more than this times the board's enforced power limit
#: is not physical: the board's power controller holds its average to the limit (sw_power_cap),
#: and 10 % is left for the controller's own lag within a 0.2 s window.
OVER_POWER = 1.10

#: Characters :func:`noise_text` always returns (``"noisy (±100%)"``).
NOISE_WIDTH = 14

#: Mark -> (symbol in tables, its meaning in the legend).
MARKS: dict[str, tuple[str, str]] = {
    "noisy": ("~", f"noisy: rounds differ by more than {100 * NOISY:.0f} %"),
    "contaminated": ("!", "contaminated: measured throttled or beside other work on the device"),
    "cache": ("^", "above the copy ceiling: cache-resident (L2), not memory bandwidth"),
    "peak": ("^", "above the measured matrix peak: the peak was understated or the matmul ran from cache"),
    "unstable-peak": ("?", "% of a matrix peak that did not repeat between tries: in doubt"),
    "over-power": ("#", "energy read above the board's power limit over its window (NVML's counter "
                        "steps every 100 ms): not a physical figure"),
    "over-bytes": ("+", "moved more than 1.1x its declared bytes through DRAM (Nsight Compute's "
                        "counters): intermediates or extra reads that left the L2"),
}


def _cache_flag_pct() -> float:
    from fusebench.metrictable import CACHE_FLAG_PCT  # torch-free: marks are read without torch

    return CACHE_FLAG_PCT


def is_noisy(noise: float | None) -> bool:
    """True when a spread (IQR or range over median) is above :data:`NOISY`, or not a number."""
    return noise is not None and (not math.isfinite(noise) or noise > NOISY)


def peak_unstable(sweep) -> bool:
    """True when the run's matrix peak did not repeat (``metrics.MatrixPeak.describe``'s warning
    in ``sweep.warnings``): every % of peak of that run is in doubt."""
    return any(w.startswith("matrix peak") and "UNSTABLE" in w for w in sweep.warnings)


def doubts(rec, unstable_peak: bool = False) -> list[str]:
    """The marks of one record (``fusebench.record.Record``), in :data:`MARKS` order; empty
    for a figure that can be believed, or for a case that was not timed. ``unstable_peak``: the
    run's matrix peak did not repeat (:func:`peak_unstable`)."""
    if rec is None or rec.status != "ok":
        return []
    out = []
    if is_noisy(rec.noise):
        out.append("noisy")
    if rec.contamination:
        out.append("contaminated")
    if rec.roofline == "memory" and (rec.pct_of_ceiling or 0) > _cache_flag_pct():
        out.append("cache")
    if rec.roofline == "compute" and (rec.pct_of_peak or 0) > PEAK_PCT:
        out.append("peak")
    if rec.roofline == "compute" and unstable_peak and rec.pct_of_peak is not None:
        out.append("unstable-peak")
    return out


def _number(value) -> float | None:
    """``value`` as a finite positive float, else None (a record from another host may hold
    anything its schema check lets through)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) and value > 0 else None


def power_limit_w(sweep, rec=None) -> float | None:
    """The enforced power limit (W) of the GPU that measured ``rec`` in the run ``sweep``: its
    entry in ``environment.gpus`` (a run over several GPUs), else the run's ``clocks``; None
    where the run did not record one (runs stored before it was read)."""
    env = sweep.environment if isinstance(sweep.environment, dict) else {}
    for gpu in env.get("gpus") or ():
        if isinstance(gpu, dict) and rec is not None and gpu.get("gpu_index") == rec.gpu_index:
            clocks = gpu.get("clocks")
            return _number(clocks.get("power_limit_w")) if isinstance(clocks, dict) else None
    clocks = env.get("clocks")
    return _number(clocks.get("power_limit_w")) if isinstance(clocks, dict) else None


def energy_doubts(rec, sweep) -> list[str]:
    """``["over-power"]`` when ``rec``'s energy window averaged above :data:`OVER_POWER` times the
    power limit of the board that measured it in the run ``sweep`` (:func:`power_limit_w`), else
    ``[]`` (no reading, no window power or no limit: nothing to judge)."""
    watts = _number(getattr(rec, "energy_w", None))
    limit = power_limit_w(sweep, rec) if rec is not None else None
    if rec is None or rec.energy_mj_per_call is None or watts is None or limit is None:
        return []
    return ["over-power"] if watts > OVER_POWER * limit else []


def symbols(kinds: list[str]) -> str:
    """The table marks of ``kinds`` (:func:`doubts`), e.g. ``"~!"``."""
    return "".join(MARKS[k][0] for k in kinds)


def legend(kinds, speedups: bool = True) -> str:
    """One line explaining the marks in ``kinds`` (any iterable of :data:`MARKS` keys), or ``""``;
    ``speedups``: say that a marked figure gets no speedup (a table of times or bandwidths)."""
    kinds = set(kinds)
    seen = [k for k in MARKS if k in kinds]
    if not seen:
        return ""
    return ("Marks: " + "; ".join(f"{MARKS[k][0]} {MARKS[k][1]}" for k in seen)
            + (". A marked figure gets no speedup." if speedups else "."))


def speedup(base_ms: float | None, ms: float | None, base_rec=None, rec=None) -> float | None:
    """``base_ms / ms`` when both times exist and neither record is doubtful (:func:`doubts`);
    None otherwise."""
    if not base_ms or not ms or base_ms <= 0 or ms <= 0:
        return None
    if doubts(base_rec) or doubts(rec):
        return None
    return base_ms / ms


def noise_text(noise: float | None) -> str:
    """A case's noise for the progress line, always :data:`NOISE_WIDTH` characters (left-aligned).

    Args:
        noise: relative spread, IQR / median (0.004 for 0.4 %); None or NaN when not measured.

    Returns ``"±0.4%"`` up to :data:`NOISY`; beyond it the word: ``"noisy (±45%)"``; past
    :data:`NOISE_CAP` (100 %) no figure, only the cap: ``"noisy (>100%)"`` (a spread larger
    than the figure says nothing about the op); ``"noise n/a"`` without a figure.
    """
    if noise is None or not math.isfinite(noise):
        text = "noise n/a"
    else:
        text = spread_text(noise) if noise <= NOISY else f"noisy ({spread_text(noise)})"
    return text.ljust(NOISE_WIDTH)


def spread_text(noise: float) -> str:
    """A relative spread as a figure: ``"±0.4%"``, ``"±45%"``; past :data:`NOISE_CAP` only the
    cap, ``">100%"``."""
    pct = 100 * noise
    if noise > NOISE_CAP:
        return f">{100 * NOISE_CAP:.0f}%"
    return f"±{pct:.1f}%" if pct < 9.95 else f"±{pct:.0f}%"
