"""The end-of-run summary: per op and dtype, shape × backend: GB/s and % of the copy ceiling (memory-bound
ops) or ms, TFLOP/s and % of the matrix peak (compute-bound ops), and the speedup over eager; and the
texts of its figures (significant digits, the noise flag in words)."""

from __future__ import annotations

import math
from collections import defaultdict

from fusebench.registry import BACKENDS
from fusebench.sweep import Record, Sweep

#: Above this relative spread (IQR / median, 10 %) a case's figure is called noisy in words: a
#: regression gate of 5 % (``make compare``'s default factor) cannot see a change through it.
NOISY = 0.10
#: Characters :func:`noise_text` always returns (``"noisy (±9999%)"``).
NOISE_WIDTH = 14


def sig(x: float, digits: int = 3) -> str:
    """``x`` with ``digits`` significant digits and no exponent: 0.0123, 4.10, 12.3; values of
    ``10**(digits-1)`` and more as integers (3986). Never rounds a positive value to ``0``."""
    if x == 0 or not math.isfinite(x):
        return f"{x:g}"
    if abs(x) >= 10 ** (digits - 1):
        return f"{x:.0f}"
    decimals = digits - 1 - math.floor(math.log10(abs(x)))
    return f"{x:.{decimals}f}"


def pct_text(pct: float) -> str:
    """A percentage: ``"61%"`` from 10 on, ``"4.2%"`` below, ``"0.041%"`` below 1 (two
    significant digits), so a small share never reads as ``0%``."""
    if abs(pct) >= 10:
        return f"{pct:.0f}%"
    if abs(pct) >= 1:
        return f"{pct:.1f}%"
    return f"{sig(pct, 2)}%"


def speedup_text(x: float) -> str:
    """A speedup: ``"8.2x"``, ``"10.0x"``; below 1 two significant digits (``"0.041x"``)."""
    return f"{x:.1f}x" if x >= 1 else f"{sig(x, 2)}x"


def noise_text(noise: float | None) -> str:
    """A case's noise for the progress line, always :data:`NOISE_WIDTH` characters (left-aligned).

    Args:
        noise: relative spread, IQR / median (0.004 for 0.4 %); None or NaN when not measured.

    Returns ``"±0.4%"`` up to :data:`NOISY`; beyond it the word: ``"noisy (±288%)"``;
    ``"noisy (>9999%)"`` past 9999 %; ``"noise n/a"`` without a figure.
    """
    if noise is None or not math.isfinite(noise):
        text = "noise n/a"
    else:
        pct = 100 * noise
        figure = f"±{pct:.1f}%" if pct < 9.95 else f"±{pct:.0f}%"
        if noise <= NOISY:
            text = figure
        else:
            text = f"noisy ({figure})" if pct < 9999.5 else "noisy (>9999%)"
    return text.ljust(NOISE_WIDTH)


def _time(rec: Record) -> float | None:
    return rec.device_time_ms if rec.device_time_ms is not None else rec.wall_time_ms


def cell(rec: Record | None, eager: Record | None) -> str:
    """``"3986 94% 8.1x"``: GB/s, % of the copy ceiling, speedup over ``eager`` (same case).

    For a compute-bound op, ``"0.315 ms 436 TF 61%"``: time, TFLOP/s, % of the matrix peak
    (time first: at small sizes it is the flat launch-overhead plateau). Figures keep three
    significant digits (:func:`sig`, :func:`pct_text`): a small value is ``4.10 0.097%``, never
    ``0 0%``.
    """
    if rec is None:
        return "-"
    if rec.status != "ok":
        return rec.status
    if rec.roofline == "compute":
        text = f"{sig(_time(rec))} ms {sig(rec.tflops)} TF"
        if rec.pct_of_peak is not None:
            text += f" {pct_text(rec.pct_of_peak)}"
    else:
        text = f"{sig(rec.bandwidth_gbps)} {pct_text(rec.pct_of_ceiling)}"
    if eager is not None and eager.status == "ok":
        text += f" {speedup_text(_time(eager) / _time(rec))}"
    return text


def summary(result: Sweep) -> str:
    """Markdown tables, one per (op, dtype): rows are shapes, columns the backends that ran."""
    groups: dict[tuple[str, str], dict] = defaultdict(dict)
    for r in result.records:
        groups[(r.op, r.dtype)][(r.shape, r.backend)] = r
    clock = "device time" if result.environment.get("device") == "cuda" else "host time"
    env = result.environment
    where = ", ".join(w for w in (env.get("gpu") or "CPU", env.get("where")) if w)
    out = [f"Effective bandwidth GB/s, % of the copy ceiling ({result.ceiling_gbps:.0f} GB/s), "
           f"speedup over eager; {clock}, {where}."]
    if result.peak_tflops:
        out[0] += (f" Compute-bound ops: time, TFLOP/s, % of the matrix peak "
                   f"({result.peak_tflops:.3g} TFLOP/s).")
    for (op, dtype), cases in groups.items():
        shapes = list(dict.fromkeys(s for s, _ in cases))
        cols = [b for b in BACKENDS if any(cases.get((s, b)) and cases[(s, b)].status != "skipped"
                                           for s in shapes)]
        if not cols:
            continue
        out += ["", f"{op} {dtype}", "", "| shape | " + " | ".join(cols) + " |",
                "|---|" + "---|" * len(cols)]
        for s in shapes:
            row = [cell(cases.get((s, b)), cases.get((s, "eager"))) for b in cols]
            out.append(f"| {s} | " + " | ".join(row) + " |")
    from fusebench import runrecord

    run = runrecord.summary_lines(result)
    out += ["", f"The run: {run[0]}"] + [f"- {line}" for line in run[1:]]
    out += [f"- warning: {w}" for w in result.warnings[:20]]
    failed = [r for r in result.records if r.status == "failed"]
    if failed:
        out += ["", f"{len(failed)} case(s) failed:"]
        out += [f"- {r.op}/{r.backend}/{r.shape}/{r.dtype}: {r.reason}" for r in failed]
    return "\n".join(out)
