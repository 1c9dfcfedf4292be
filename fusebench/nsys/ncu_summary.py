"""The per-case summary of an Nsight Compute capture: DRAM bytes measured against the bytes declared.

Inputs: the driver's side file (the plan, statuses, calls per range, each case's declared bytes
``bytes_moved`` and the harness's device time; :mod:`fusebench.nsys.capture_summary`) and the
counters summed per range (:mod:`fusebench.nsys.ncu_csv`). Per case, per call (a range's sum
divided by its calls):

* kernels per call;
* DRAM bytes read and written, and their sum over the declared bytes (*measured/declared*): 1
  for a kernel that reads its inputs and writes its outputs once; above 1 where intermediates
  travel through DRAM (eager's nine kernels); below 1 where the input is still in L2 from the
  call before (a case smaller than the L2 reads as less than declared);
* DRAM throughput, % of peak (the kernels' own figures averaged, weighted by their time), and
  the L2 sector hit rate (weighted by their L2 bytes);
* kernel time per call (each kernel profiled alone) and DRAM GB/s over it.

A case over :data:`OVER_DECLARED` times its declared bytes carries the mark ``over-bytes``
(:mod:`fusebench.report.marks`).
"""

from __future__ import annotations

from dataclasses import dataclass

from fusebench.nsys.capture_summary import SIDE_FORMAT, CaseRow, _fmt, start_row, to_csv
from fusebench.nsys.ncu_csv import RangeCounters
from fusebench.nsys.nvtx_ranges import RangeName, parse_range
from fusebench.report import marks

#: Above this many times its declared bytes a case is marked (``over-bytes``).
OVER_DECLARED = 1.10
#: Below this many times its declared bytes the note says the data came from L2.
UNDER_DECLARED = 0.95


@dataclass
class Row(CaseRow):
    """One case. Bytes in MB (1e6 B) per call, times in µs per call, rates in %, GB/s (1e9 B/s)."""

    kernels_per_call: float | None = None
    dram_read_mb: float | None = None
    dram_write_mb: float | None = None
    declared_mb: float | None = None
    measured_over_declared: float | None = None
    over_declared: bool = False
    dram_pct_of_peak: float | None = None
    l2_hit_pct: float | None = None
    kernel_us: float | None = None
    dram_gbps: float | None = None
    harness_us: float | None = None
    note: str = ""


def rows(side: dict, counters: dict[RangeName, RangeCounters]) -> list[Row]:
    """One row per planned case of ``side``, in plan order.

    Raises:
        ValueError: ``side`` is not a side file of :data:`SIDE_FORMAT`.
    """
    if side.get("format") != SIDE_FORMAT:
        raise ValueError(f"not a {SIDE_FORMAT} side file (format {side.get('format')!r})")
    l2 = (side.get("environment") or {}).get("l2_bytes")
    out = []
    for case in side["cases"]:
        row = start_row(case, Row)
        out.append(row)
        if case["status"] != "ok":
            continue
        c = counters.get(parse_range(case["range"]))
        if c is None or not c.kernels:
            row.status = "missing"
            row.note = "no kernel of this range in the ncu report"
            continue
        p = c.per_call(case.get("calls"))
        declared = case.get("bytes_moved") or 0
        row.kernels_per_call = p["kernels"]
        row.dram_read_mb, row.dram_write_mb = p["read"] / 1e6, p["write"] / 1e6
        row.dram_pct_of_peak, row.l2_hit_pct = p["dram_pct"], p["l2_hit_pct"]
        row.kernel_us = p["time_ns"] / 1e3
        if p["time_ns"]:
            row.dram_gbps = p["dram_bytes"] / p["time_ns"]
        if declared:
            row.declared_mb = declared / 1e6
            ratio = p["dram_bytes"] / declared
            row.measured_over_declared = ratio
            row.over_declared = ratio > OVER_DECLARED
            if ratio < UNDER_DECLARED:
                where = f" ({l2 / 2**20:.0f} MiB)" if l2 else ""
                row.note = f"less than declared: data left in L2{where} by the call before"
    return out


def _ratio_text(r: Row) -> str:
    text = _fmt(r.measured_over_declared, 3)
    return text + marks.symbols(["over-bytes"]) if r.over_declared else text


def _whole_or(value: float | None) -> str:
    return _fmt(value, 0 if value is not None and abs(value - round(value)) < 1e-9 else 2)


def by_size(table: list[Row]) -> list[str]:
    """Measured over declared per backend and dtype (rows) and shape (columns), as Markdown lines:
    where eager's intermediates stay in L2 and where they go to DRAM."""
    shapes = list(dict.fromkeys(r.shape for r in table))
    lines = ["| backend | dtype | " + " | ".join(f"`{s}`" for s in shapes) + " |",
             "| --- | --- | " + " | ".join("---:" for _ in shapes) + " |"]
    cell = {(r.backend, r.dtype, r.shape): r for r in table}
    for backend, dtype in dict.fromkeys((r.backend, r.dtype) for r in table):
        cells = [_ratio_text(cell[backend, dtype, s]) if (backend, dtype, s) in cell else "–" for s in shapes]
        lines.append(f"| {backend} | {dtype} | " + " | ".join(cells) + " |")
    return lines


def markdown(side: dict, table: list[Row], stem: str, outside: int = 0) -> str:
    """The summary as Markdown: a heading, how it was measured, one row per case, the by-size table."""
    env = side.get("environment", {})
    where = env.get("gpu") or "the CPU"
    commit = (env.get("git_commit") or "")[:7] or "no commit"
    lines = [
        f"# ncu: {side['op']} on {where} ({commit})",
        "",
        f"Nsight Compute report `{stem}.ncu-rep` (raw page: `{stem}_raw.csv`), {side.get('calls')} calls "
        "per NVTX range, application replay, caches not flushed (`--cache-control none`): the kernels "
        "of a call run as the program runs them. Per call = the range's sum / calls. measured/declared: "
        "DRAM bytes read + written over the bytes the op declares (`bytes_moved`). DRAM %: throughput "
        "as % of peak, weighted by kernel time; L2 hit: sector hit rate weighted by L2 bytes; kernel "
        "µs: each kernel timed alone by ncu. docs/profiling.md says what this can and cannot show.",
        "",
        "| case | kernels/call | DRAM read MB | DRAM write MB | declared MB | measured/declared "
        "| DRAM % of peak | L2 hit % | kernel µs/call | DRAM GB/s | note |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in table:
        lines.append(
            f"| `{r.range}` | {_whole_or(r.kernels_per_call)} | {_fmt(r.dram_read_mb, 2)} "
            f"| {_fmt(r.dram_write_mb, 2)} | {_fmt(r.declared_mb, 2)} | {_ratio_text(r)} "
            f"| {_fmt(r.dram_pct_of_peak)} | {_fmt(r.l2_hit_pct)} | {_fmt(r.kernel_us)} "
            f"| {_fmt(r.dram_gbps, 0)} | {r.note.replace('|', '/')} |")
    lines += ["", "Measured over declared DRAM bytes by size:", "", *by_size(table), ""]
    if legend := marks.legend(["over-bytes"] if any(r.over_declared for r in table) else [], speedups=False):
        lines += [legend, ""]
    if outside:
        lines.append(f"{outside} kernel(s) outside every case's range (the blocking kernel queued before "
                     "each range) are not counted.")
    return "\n".join(lines).rstrip("\n") + "\n"


def csv_text(table: list[Row]) -> str:
    """The summary as CSV, one row per case, columns named as :class:`Row`'s fields."""
    return to_csv(table, Row)
