"""The per-range summary of a capture: nsys's figures beside the harness's own, as Markdown and CSV.

Inputs: the driver's side file ``<stem>.json`` (the plan, each case's status, calls per range,
bytes moved, and the harness's device time measured outside the capture window) and the nsys
statistics (:mod:`fusebench.nsys.stats_csv`). Per case:

* kernels per call = kernel instances in the range / calls (eager GELU: 9, a fused backend: 1);
  GPU ops per call also count copies and memsets;
* GPU time per call from the range projection (first kernel start to last kernel end, divided by
  the calls; the gaps between kernels count) and from the kernel sums (gaps excluded);
* effective bandwidth = bytes moved / projected GPU time per call (GB/s, 1 GB = 1e9 B);
* the harness's device time (CUDA events, median, hot) and the ratio nsys / harness.

Cases of :data:`CHECK_FROM_US` or more must agree within :data:`AGREEMENT`: the range projection
against the harness, since both span first kernel start to last kernel end, gaps included; where
they do not, the note says so. The kernel sum excludes the gaps between a multi-kernel backend's
launches (eager GELU's 9), so its ratio is shown and a gap of more than AGREEMENT is noted, but it
is not held to agreement. Shorter cases are shown but not held to it (launch gaps and
the events' 0.5 µs resolution weigh too much there).
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from fusebench.measure import metrics
from fusebench.nsys.nvtx_ranges import parse_range
from fusebench.nsys.stats_csv import RangeStats

#: Side-file format written by the driver and read here.
SIDE_FORMAT = "fusebench-nsys/1"

#: Cases at least this long (µs, harness device time) must agree with nsys within AGREEMENT.
CHECK_FROM_US = 100.0
AGREEMENT = 0.05


@dataclass
class CaseRow:
    """The case a summary's row is of and whether it ran: the first columns of this summary and of
    ``make ncu``'s (:mod:`fusebench.nsys.ncu_summary`)."""

    range: str
    backend: str
    shape: str
    dtype: str
    status: str
    calls: int | None = None


def start_row(case: dict, row_type: type):
    """A ``row_type`` row (a :class:`CaseRow` with ``note`` and ``harness_us``) for a side file's
    case: a case that did not run noted with its reason, one that ran with the harness's time."""
    row = row_type(case["range"], case["backend"], case["shape"], case["dtype"], case["status"],
                   calls=case.get("calls"))
    if case["status"] != "ok":
        row.note = f"{case['status']}: {case.get('reason', '')}"
    elif case.get("device_time_ms") is not None:
        row.harness_us = case["device_time_ms"] * 1e3
    return row


@dataclass
class Row(CaseRow):
    """One case of the summary. Times in µs per call, bandwidth in GB/s, ratios dimensionless."""

    kernels_per_call: float | None = None
    gpu_ops_per_call: float | None = None
    proj_us: float | None = None
    kernel_us: float | None = None
    bandwidth_gbps: float | None = None
    harness_us: float | None = None
    proj_ratio: float | None = None
    kernel_ratio: float | None = None
    agrees: bool | None = None
    note: str = ""


def rows(side: dict, stats: dict) -> list[Row]:
    """Join the driver's side file and nsys's statistics into one row per planned case, in plan order.

    Args:
        side: the parsed ``<stem>.json`` (format :data:`SIDE_FORMAT`).
        stats: :func:`fusebench.nsys.stats_csv.load` output.

    Raises:
        ValueError: ``side`` is not a side file of this format.
    """
    if side.get("format") != SIDE_FORMAT:
        raise ValueError(f"not a {SIDE_FORMAT} side file (format {side.get('format')!r})")
    out = []
    for case in side["cases"]:
        row = start_row(case, Row)
        out.append(row)
        if case["status"] != "ok":
            continue
        s: RangeStats | None = stats.get(parse_range(case["range"]))
        if s is None:
            row.status = "missing"
            row.note = ("range not in the nsys report (capture window missed? nsys before 2024.3 "
                        "drops the ranges of nvtx >= 0.2.12)")
            continue
        per_call = row.calls * max(s.instances or 1, 1)
        if s.kernels is not None:
            row.kernels_per_call = s.kernels / per_call
            row.kernel_us = s.kernel_ns / per_call / 1e3
        if s.gpu_ops is not None:
            row.gpu_ops_per_call = s.gpu_ops / per_call
        if s.proj_ns is not None:
            row.proj_us = s.proj_ns / per_call / 1e3
            row.bandwidth_gbps = metrics.effective_bandwidth_gbps(case["bytes_moved"], row.proj_us * 1e-3)
        _compare(row)
    return out


def _compare(row: Row) -> None:
    if not row.harness_us:
        return
    if row.proj_us is not None:
        row.proj_ratio = row.proj_us / row.harness_us
    if row.kernel_us is not None:
        row.kernel_ratio = row.kernel_us / row.harness_us
    if row.harness_us < CHECK_FROM_US:
        return
    if row.proj_ratio is not None:
        row.agrees = abs(row.proj_ratio - 1) <= AGREEMENT
        if not row.agrees:
            row.note = (f"nsys and harness disagree by more than {100 * AGREEMENT:.0f} %: "
                        f"range {100 * (row.proj_ratio - 1):+.1f} %")
    if row.kernel_ratio is not None and abs(row.kernel_ratio - 1) > AGREEMENT:
        why = "overlapping kernels counted twice" if row.kernel_ratio > 1 else "launch gaps excluded"
        gaps = f"kernels {100 * (row.kernel_ratio - 1):+.1f} %: {why}"
        row.note = f"{row.note}; {gaps}" if row.note else gaps


def disagreements(table: list[Row]) -> list[Row]:
    """Rows of cases of :data:`CHECK_FROM_US` or more where nsys and the harness disagree."""
    return [r for r in table if r.agrees is False]


def _fmt(value, digits: int = 1) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        if value != value:
            return "–"
        return f"{value:.{digits}f}"
    return str(value)


def markdown(side: dict, table: list[Row], stem: str) -> str:
    """The summary as Markdown: a heading, how to read it, one table row per case, a verdict."""
    env = side.get("environment", {})
    where = env.get("gpu") or "the CPU"
    commit = (env.get("git_commit") or "")[:7] or "no commit"
    lines = [
        f"# nsys: {side['op']} on {where} ({commit})",
        "",
        f"Capture `{stem}.nsys-rep`, {side.get('calls')} calls per NVTX range (domain `fusebench`). "
        "GPU time per call from the range projection (`nvtx_gpu_proj_sum`: first kernel start to "
        "last kernel end) and from the kernel sums (`nvtx_kern_sum`), against the harness's device "
        "time (CUDA events, median, measured outside the capture window). GB/s: bytes moved / "
        f"range time. Cases of {CHECK_FROM_US:.0f} µs or more must agree within "
        f"{100 * AGREEMENT:.0f} %.",
        "",
        "| case | kernels/call | GPU ops/call | range µs/call | kernels µs/call | GB/s "
        "| harness µs | range/harness | kernels/harness | note |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in table:
        lines.append(
            f"| `{r.range}` | {_fmt(r.kernels_per_call, 0 if _whole(r.kernels_per_call) else 2)} "
            f"| {_fmt(r.gpu_ops_per_call, 0 if _whole(r.gpu_ops_per_call) else 2)} "
            f"| {_fmt(r.proj_us)} | {_fmt(r.kernel_us)} | {_fmt(r.bandwidth_gbps, 0)} "
            f"| {_fmt(r.harness_us)} | {_fmt(r.proj_ratio, 3)} | {_fmt(r.kernel_ratio, 3)} "
            f"| {r.note.replace('|', '/')} |")
    checked = [r for r in table if r.agrees is not None]
    bad = disagreements(table)
    lines.append("")
    if bad:
        lines.append(f"**{len(bad)} of {len(checked)} case(s) of {CHECK_FROM_US:.0f} µs or more "
                     f"disagree with the harness by more than {100 * AGREEMENT:.0f} %** (see notes).")
    else:
        lines.append(f"All {len(checked)} case(s) of {CHECK_FROM_US:.0f} µs or more agree with the "
                     f"harness within {100 * AGREEMENT:.0f} %.")
    return "\n".join(lines) + "\n"


def _whole(value: float | None) -> bool:
    return value is not None and value == value and abs(value - round(value)) < 1e-9


def to_csv(table: list, row_type: type = Row) -> str:
    """The summary as CSV, one row per case, columns named as the fields of ``row_type`` (a
    dataclass: :class:`Row`, or ``ncu_summary.Row``)."""
    buf = io.StringIO()
    names = [f.name for f in fields(row_type)]
    writer = csv.DictWriter(buf, fieldnames=names, lineterminator="\n")
    writer.writeheader()
    for r in table:
        writer.writerow({k: ("" if v is None else v) for k, v in asdict(r).items()})
    return buf.getvalue()


def load_side(path: str | Path) -> dict:
    """Read a side file written by the driver.

    Raises:
        FileNotFoundError: no such file (the driver did not run, or ran elsewhere).
        ValueError: not a side file of :data:`SIDE_FORMAT`.
    """
    side = json.loads(Path(path).read_text())
    if side.get("format") != SIDE_FORMAT:
        raise ValueError(f"{path}: not a {SIDE_FORMAT} side file")
    return side
