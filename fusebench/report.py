"""The end-of-run summary: per op and dtype, shape × backend: GB/s and % of the copy ceiling (memory-bound
ops) or ms, TFLOP/s and % of the matrix peak (compute-bound ops), and the speedup over eager."""

from __future__ import annotations

from collections import defaultdict

from fusebench.registry import BACKENDS
from fusebench.sweep import Record, Sweep


def _time(rec: Record) -> float | None:
    return rec.device_time_ms if rec.device_time_ms is not None else rec.wall_time_ms


def cell(rec: Record | None, eager: Record | None) -> str:
    """``"3986 94% 8.1x"``: GB/s, % of the copy ceiling, speedup over ``eager`` (same case).

    For a compute-bound op, ``"0.315 ms 436.2 TF 61%"``: time, TFLOP/s, % of the matrix peak
    (time first: at small sizes it is the flat launch-overhead plateau).
    """
    if rec is None:
        return "-"
    if rec.status != "ok":
        return rec.status
    if rec.roofline == "compute":
        text = f"{_time(rec):.4g} ms {rec.tflops:.4g} TF"
        if rec.pct_of_peak is not None:
            text += f" {rec.pct_of_peak:.0f}%"
    else:
        text = f"{rec.bandwidth_gbps:.0f} {rec.pct_of_ceiling:.0f}%"
    if eager is not None and eager.status == "ok":
        text += f" {_time(eager) / _time(rec):.1f}x"
    return text


def summary(result: Sweep) -> str:
    """Markdown tables, one per (op, dtype): rows are shapes, columns the backends that ran."""
    groups: dict[tuple[str, str], dict] = defaultdict(dict)
    for r in result.records:
        groups[(r.op, r.dtype)][(r.shape, r.backend)] = r
    clock = "device time" if result.environment.get("device") == "cuda" else "host time"
    where = result.environment.get("gpu") or "CPU"
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
