"""Read the CSV files ``nsys stats --format csv -o <prefix>`` writes, one statistics row per range.

``nsys stats -r A,B --format csv -o PREFIX REP`` writes ``PREFIX_A.csv`` and ``PREFIX_B.csv``
(nothing for a report with no data). Reports used, with their columns (Nsight Systems
Post-Collection Analysis Guide, "Statistical Reports Shipped With Nsight Systems"):

* ``nvtx_gpu_proj_sum`` (NVTX GPU Projection Summary): ``Range, Style, Total Proj Time (ns),
  Total Range Time (ns), Range Instances, Proj Avg (ns), ..., Total GPU Ops, Avg GPU Ops, ...``.
  A range's *projection* runs from the start of the first GPU operation launched inside it to the
  end of the last one; GPU ops count kernels, copies and memsets.
* ``nvtx_kern_sum`` (NVTX Range Kernel Summary; ``nvtxkernsum`` before 2023): one row per range
  and kernel name: ``NVTX Range, Style, PID, TID, NVTX Inst, Kern Inst, Total Time (ns), ...,
  Kernel Name``.
* ``nvtx_pushpop_sum`` (``nvtxppsum`` before 2023), read only when no projection is there:
  ``Time (%), Total Time (ns), Instances, ..., Range`` (CPU time of the ranges only).

What differs between versions is handled here: old and new report names, a range spelled
``fusebench:<name>``, ``:<name>`` or ``<name>`` (:func:`fusebench.nsys.nvtx_ranges.parse_range`),
lines before the header, and the time unit in the column names (``--timeunit``).
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from pathlib import Path

from fusebench.nsys.nvtx_ranges import DOMAIN, RangeName, parse_range

#: Report names, newest first, by the role they play here.
REPORT_NAMES: dict[str, tuple[str, ...]] = {
    "projection": ("nvtx_gpu_proj_sum",),
    "kernels": ("nvtx_kern_sum", "nvtxkernsum"),
    "pushpop": ("nvtx_pushpop_sum", "nvtxppsum"),
}

#: Nanoseconds per unit of a column heading's ``(unit)``.
NS_PER_UNIT = {"ns": 1.0, "us": 1e3, "μs": 1e3, "µs": 1e3, "ms": 1e6, "s": 1e9}


class StatsError(Exception):
    """The nsys statistics are missing or unreadable; the message says which file and why."""


@dataclass
class RangeStats:
    """What nsys measured for one range name, summed over its instances (times in ns).

    Attributes:
        name: the case the range names.
        instances: range instances (``Range Instances``, ``NVTX Inst`` or ``Instances``).
        proj_ns: total projected GPU time (``nvtx_gpu_proj_sum``), None without that report.
        range_ns: total CPU time of the ranges (push to pop).
        gpu_ops: total GPU operations launched inside the ranges (kernels, copies, memsets).
        kernels: total kernel instances (``nvtx_kern_sum``), None without that report.
        kernel_ns: total kernel execution time (sum of kernel durations, gaps excluded).
        kernel_names: distinct kernel names seen inside the range.
    """

    name: RangeName
    instances: int | None = None
    proj_ns: float | None = None
    range_ns: float | None = None
    gpu_ops: int | None = None
    kernels: int | None = None
    kernel_ns: float | None = None
    kernel_names: int = 0


def find_csv(prefix: str | Path, role: str) -> Path | None:
    """The CSV ``nsys stats -o prefix`` wrote for ``role`` (a key of :data:`REPORT_NAMES`), or None.

    Tries ``<prefix>_<name>.csv`` for each of the role's report names, newest name first.
    """
    for name in REPORT_NAMES[role]:
        path = Path(f"{prefix}_{name}.csv")
        if path.is_file():
            return path
    return None


def column_key(heading: str) -> tuple[str, float | None]:
    """``"Total Proj Time (ns)"`` -> ``("total proj time", 1.0)``: lowercase name, ns per unit.

    The second item is None for a heading without a time unit (``"Kern Inst"``, ``"Time (%)"``).
    """
    heading = heading.strip().strip('"')
    m = re.fullmatch(r"(.*?)\s*\(([^()]*)\)", heading)
    if m and m[2].strip() in NS_PER_UNIT:
        return m[1].strip().lower(), NS_PER_UNIT[m[2].strip()]
    return heading.lower(), None


def read_table(path: str | Path) -> list[dict[str, str | float]]:
    """Rows of one nsys CSV report as dicts keyed by :func:`column_key` names.

    Lines before the header (a row with a ``Range`` or ``NVTX Range`` column) are skipped. Time
    columns become float nanoseconds; other cells stay strings.

    Raises:
        StatsError: no header row.
    """
    lines = Path(path).read_text(encoding="utf-8", errors="replace").splitlines()
    rows = list(csv.reader(lines))
    header = next((i for i, row in enumerate(rows)
                   if any(column_key(c)[0] in ("range", "nvtx range") for c in row)), None)
    if header is None:
        raise StatsError(f"{path}: no header row with a 'Range' column (not an nsys NVTX report?)")
    keys = [column_key(c) for c in rows[header]]
    out = []
    for row in rows[header + 1:]:
        if not any(c.strip() for c in row):
            continue
        rec: dict[str, str | float] = {}
        for (key, scale), cell in zip(keys, row):
            rec[key] = _number(cell) * scale if scale is not None else cell
        out.append(rec)
    return out


def load(prefix: str | Path, domain: str = DOMAIN) -> dict[RangeName, RangeStats]:
    """Statistics per range of ``domain`` from the CSVs beside ``prefix``.

    Rows of other domains and ranges not named ``op/backend/shape/dtype`` are ignored; several
    rows of one range (per thread, per style, per kernel) are summed.

    Raises:
        StatsError: neither a projection nor a push/pop summary is there, or a file is unreadable.
    """
    stats: dict[RangeName, RangeStats] = {}

    def entry(cell) -> RangeStats | None:
        name = parse_range(str(cell), domain)
        if name is None:
            return None
        return stats.setdefault(name, RangeStats(name))

    proj = find_csv(prefix, "projection")
    pushpop = find_csv(prefix, "pushpop")
    if proj is None and pushpop is None:
        raise StatsError(
            f"no {prefix}_{REPORT_NAMES['projection'][0]}.csv: nsys stats wrote no NVTX data (no range "
            f"captured? nsys before 2024.3 drops the ranges of nvtx >= 0.2.12)")
    if proj is not None:
        for row in read_table(proj):
            if (s := entry(row.get("range", ""))) is None:
                continue
            s.instances = (s.instances or 0) + _int(row, "range instances")
            s.proj_ns = (s.proj_ns or 0.0) + _float(row, "total proj time")
            s.range_ns = (s.range_ns or 0.0) + _float(row, "total range time")
            s.gpu_ops = (s.gpu_ops or 0) + _int(row, "total gpu ops")
    else:
        for row in read_table(pushpop):
            if (s := entry(row.get("range", ""))) is None:
                continue
            s.instances = (s.instances or 0) + _int(row, "instances")
            s.range_ns = (s.range_ns or 0.0) + _float(row, "total time")
    if (kern := find_csv(prefix, "kernels")) is not None:
        names: dict[RangeName, set[str]] = {}
        for row in read_table(kern):
            if (s := entry(row.get("nvtx range", row.get("range", "")))) is None:
                continue
            s.kernels = (s.kernels or 0) + _int(row, "kern inst")
            s.kernel_ns = (s.kernel_ns or 0.0) + _float(row, "total time")
            names.setdefault(s.name, set()).add(str(row.get("kernel name", "")))
            if s.instances is None:
                s.instances = _int(row, "nvtx inst")
        for name, kernel_names in names.items():
            stats[name].kernel_names = len(kernel_names)
    return stats


def _number(cell: str) -> float:
    cell = cell.strip().replace(",", "")
    try:
        return float(cell) if cell else float("nan")
    except ValueError:
        return float("nan")


def _float(row: dict, key: str) -> float:
    value = row.get(key)
    if isinstance(value, float):
        return value
    return _number(str(value)) if value is not None else float("nan")


def _int(row: dict, key: str) -> int:
    value = _float(row, key)
    return int(round(value)) if value == value else 0
