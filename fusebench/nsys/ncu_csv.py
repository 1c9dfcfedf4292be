"""Read the raw page of an Nsight Compute report (``ncu -i R --csv --page raw --print-units base``)
and sum its kernels per NVTX range.

The page: a header row (``ID``, ``Process ID``, ..., the NVTX column ``thread
Domain:Push/Pop_Range:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg``, ``Kernel Name``, ...,
one column per metric), a units row (``byte``, ``ns``, ``%``), then one row per profiled kernel.
Numbers carry thousands separators (``"2,444.80"``). The NVTX cell of a kernel launched inside
a push/pop range reads ``<tid>  "<domain>:<name>:none:none:RGB:0xff1f77b4:REGISTERED:<message>" ``;
nested ranges add one quoted part each, outermost first; a kernel outside every range (the
blocking kernel queued before each case's range) has an empty cell. A kernel belongs to the
innermost range of the domain ``fusebench`` that names a case.

:func:`trimmed` writes the same page with only the columns read here, the NVTX cell cut to
``fusebench:<range>``: small enough to keep beside a summary (``nsys/examples/``, the tests),
and read back by the same :func:`read`.
"""

from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass, field

from fusebench.nsys.ncu_tool import DRAM_METRICS, METRICS
from fusebench.nsys.nvtx_ranges import DOMAIN, RangeName, parse_range

#: The NVTX column is the one whose heading holds this.
NVTX_COLUMN = "Push/Pop_Range"
ID_COLUMN = "ID"

#: Base units of the metrics read, per unit ncu may print.
SCALE = {"byte": 1.0, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "ns": 1.0, "nsecond": 1.0, "usecond": 1e3,
         "us": 1e3, "msecond": 1e6, "ms": 1e6, "second": 1e9, "s": 1e9, "%": 1.0}

#: A raw page larger than this is not one this project wrote (a full grid is about 1 MB).
MAX_BYTES = 256 * 1024 * 1024


class CountersError(Exception):
    """The raw page is missing, or not the page of a capture; the message says which and why."""


@dataclass(frozen=True)
class Kernel:
    """One profiled kernel: its range (None outside every case's range) and its metrics, base units."""

    id: int
    range: RangeName | None
    metrics: dict[str, float] = field(hash=False)


@dataclass
class RangeCounters:
    """What the counters saw for one range name, summed over its kernels.

    Attributes:
        name: the case the range names.
        kernels: kernels profiled inside the range (every call's).
        time_ns: their summed ``gpu__time_duration`` (each kernel alone: ncu serializes them).
        dram_read, dram_write: DRAM bytes read and written.
        throughput_ns: the sum of each kernel's DRAM throughput (% of peak) times its time.
        l2_hit_bytes: the sum of each kernel's L2 sector hit rate (%) times its L2 bytes.
        l2_bytes: the L2's bytes (``lts__t_bytes``).
    """

    name: RangeName
    kernels: int = 0
    time_ns: float = 0.0
    dram_read: float = 0.0
    dram_write: float = 0.0
    throughput_ns: float = 0.0
    l2_hit_bytes: float = 0.0
    l2_bytes: float = 0.0

    @property
    def dram_bytes(self) -> float:
        return self.dram_read + self.dram_write

    @property
    def dram_pct(self) -> float | None:
        """DRAM throughput, % of peak, averaged over the kernels weighted by their time."""
        return self.throughput_ns / self.time_ns if self.time_ns else None

    @property
    def l2_hit_pct(self) -> float | None:
        """L2 sector hit rate, %, averaged over the kernels weighted by their L2 traffic."""
        return self.l2_hit_bytes / self.l2_bytes if self.l2_bytes else None

    def per_call(self, calls: int | None) -> dict:
        """The counters per call of a range of ``calls`` calls: ``kernels``, ``dram_bytes``, ``read``,
        ``write``, ``l2_bytes``, ``time_ns`` (divided), ``dram_pct``, ``l2_hit_pct`` (as they are)."""
        n = max(int(calls or 1), 1)
        return {"kernels": self.kernels / n, "dram_bytes": self.dram_bytes / n, "read": self.dram_read / n,
                "write": self.dram_write / n, "l2_bytes": self.l2_bytes / n, "time_ns": self.time_ns / n,
                "dram_pct": self.dram_pct, "l2_hit_pct": self.l2_hit_pct}

    def add(self, k: Kernel) -> None:
        m = k.metrics
        t = m["gpu__time_duration.sum"]
        self.kernels += 1
        self.time_ns += t
        self.dram_read += m["dram__bytes_read.sum"]
        self.dram_write += m["dram__bytes_write.sum"]
        self.throughput_ns += m["dram__throughput.avg.pct_of_peak_sustained_elapsed"] * t
        self.l2_hit_bytes += m.get("lts__t_sector_hit_rate.pct", 0.0) * m.get("lts__t_bytes.sum", 0.0)
        self.l2_bytes += m.get("lts__t_bytes.sum", 0.0)


def range_of(cell: str, domain: str = DOMAIN) -> RangeName | None:
    """The innermost range of ``domain`` naming a case in an NVTX cell, or None.

    Reads ncu's quoted parts (``"fusebench:<name>:...:<message>"``: the name, else the message)
    and the trimmed form ``fusebench:<name>``.
    """
    parts = re.findall(r'"([^"]*)"', cell) or [cell.strip()]
    for part in reversed(parts):
        fields = part.split(":")
        if len(fields) < 2 or fields[0] != domain:
            continue
        for text in (fields[1], fields[-1]):
            name = parse_range(f"{domain}:{text}", domain)
            if name is not None:
                return name
    return None


def _number(text: str, what: str) -> float:
    text = text.strip().replace(",", "")
    try:
        value = float(text)
    except ValueError:
        raise CountersError(f"{what}: {text[:40]!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise CountersError(f"{what}: {text[:40]!r} is not a finite number of at least 0")
    return value


def _rows(text: str) -> list[list[str]]:
    rows = list(csv.reader(io.StringIO(text)))
    start = next((i for i, r in enumerate(rows) if r and r[0] == ID_COLUMN), None)
    if start is None:
        raise CountersError(f"no header row starting with {ID_COLUMN!r} (not ncu's raw page as CSV)")
    return rows[start:]


def read(text: str) -> list[Kernel]:
    """The kernels of a raw page (ncu's, or :func:`trimmed`'s), in report order, with the metrics
    of :data:`METRICS` the page has (the L2's may be absent).

    Raises:
        CountersError: no header, a metric of :data:`DRAM_METRICS` or the NVTX column missing, a unit
            not known, or a value that is not a number.
    """
    if len(text) > MAX_BYTES:
        raise CountersError(f"larger than {MAX_BYTES >> 20} MB: not the raw page of a capture")
    rows = _rows(text)
    header = rows[0]
    missing = [m for m in DRAM_METRICS if m not in header]
    if missing:
        raise CountersError(f"no column {', '.join(missing)} (the capture did not collect it)")
    nvtx = next((i for i, h in enumerate(header) if NVTX_COLUMN in h), None)
    if nvtx is None:
        raise CountersError("no NVTX column (the capture ran without --nvtx)")
    if len(rows) < 2:
        raise CountersError("no units row")
    units = rows[1]
    where = {m: header.index(m) for m in METRICS if m in header}
    scale = {}
    for m, i in where.items():
        unit = units[i] if i < len(units) else ""
        if unit not in SCALE:
            raise CountersError(f"{m}: unit {unit[:20]!r} not known")
        scale[m] = SCALE[unit]
    out = []
    for n, row in enumerate(rows[2:], 3):
        if not any(row):
            continue
        if len(row) < len(header):
            raise CountersError(f"row {n}: {len(row)} cells, the header has {len(header)}")
        metrics = {m: _number(row[i], f"row {n} {m}") * scale[m] for m, i in where.items()}
        out.append(Kernel(int(_number(row[0], f"row {n} ID")), range_of(row[nvtx]), metrics))
    return out


def by_range(kernels: list[Kernel]) -> tuple[dict[RangeName, RangeCounters], int]:
    """The kernels summed per range, and how many ran outside every case's range."""
    sums: dict[RangeName, RangeCounters] = {}
    outside = 0
    for k in kernels:
        if k.range is None:
            outside += 1
            continue
        sums.setdefault(k.range, RangeCounters(k.range)).add(k)
    return sums, outside


def trimmed(text: str) -> str:
    """The raw page with only the columns :func:`read` reads, the NVTX cell cut to
    ``fusebench:<range>`` (empty outside every range); read back by :func:`read`.

    Raises:
        CountersError: as :func:`read`.
    """
    kernels = read(text)
    rows = _rows(text)
    header, units = rows[0], rows[1]
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    kept = [m for m in METRICS if m in header]
    scale = [SCALE[units[header.index(m)]] for m in kept]
    w.writerow([ID_COLUMN, "NVTX Push/Pop_Range", *kept])
    w.writerow(["", "", *(units[header.index(m)] for m in kept)])
    for k in kernels:
        w.writerow([k.id, f"{DOMAIN}:{k.range}" if k.range else "",
                    *(_plain(k.metrics[m] / s) for m, s in zip(kept, scale))])
    return buf.getvalue()


def _plain(value: float) -> str:
    return str(int(value)) if value == int(value) else f"{value:.10g}"
