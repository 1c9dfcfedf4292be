"""The end-of-run summary: per op and dtype, shape × backend: GB/s and % of the copy ceiling (memory-bound
ops) or ms, TFLOP/s and % of the matrix peak (compute-bound ops), and the speedup over eager; and the
texts of its figures (significant digits, the noise flag in words)."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

from fusebench.axes import BACKENDS, no_backend_reason
from fusebench.errors import plain
from fusebench.record import Record, Sweep, clean_rounds, where
from fusebench.report import marks
from fusebench.report.marks import NOISE_WIDTH, noise_text, spread_text  # noqa: F401  (summary's texts)

#: Above this relative spread a figure is noisy (``fusebench.report.marks``).
NOISY = marks.NOISY



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


def time_ms(rec: Record) -> float | None:
    """A case's time per call (ms): hot device time, host time where none was measured (the CPU)."""
    return rec.device_time_ms if rec.device_time_ms is not None else rec.wall_time_ms


def cell(rec: Record | None, eager: Record | None, unstable_peak: bool = False) -> str:
    """``"3986 94% 8.1x"``: GB/s, % of the copy ceiling, speedup over ``eager`` (same case).

    For a compute-bound op, ``"0.315 ms 436 TF 61%"``: time, TFLOP/s, % of the matrix peak
    (time first: at small sizes it is the flat launch-overhead plateau). Figures keep three
    significant digits (:func:`sig`, :func:`pct_text`): a small value is ``4.10 0.097%``, never
    ``0 0%``. A doubtful figure carries its marks (``fusebench.report.marks``: ``~`` noisy, ``!``
    contaminated, ``^`` above the ceiling or peak) and no speedup, nor does any figure beside a
    doubtful ``eager``.
    """
    if rec is None:
        return "-"
    if rec.status != "ok":
        return rec.status
    if rec.roofline == "compute":
        text = f"{sig(time_ms(rec))} ms {sig(rec.tflops)} TF"
        if rec.pct_of_peak is not None:
            text += f" {pct_text(rec.pct_of_peak)}"
    else:
        text = f"{sig(rec.bandwidth_gbps)} {pct_text(rec.pct_of_ceiling)}"
    if kinds := marks.doubts(rec, unstable_peak):
        text += f" {marks.symbols(kinds)}"
    if eager is not None and eager.status == "ok":
        x = marks.speedup(time_ms(eager), time_ms(rec), eager, rec)
        if x is not None:
            text += f" {speedup_text(x)}"
    return text


def summary(result: Sweep) -> str:
    """Markdown tables, one per (op, dtype): rows are shapes, columns the backends that ran."""
    groups: dict[tuple[str, str], dict] = defaultdict(dict)
    for r in result.records:
        groups[(r.op, r.dtype)][(r.shape, r.backend)] = r
    unstable = marks.peak_unstable(result)
    env = result.environment
    clock = "device time" if env.get("device") == "cuda" else "host time"
    where = ", ".join(w for w in (env.get("gpu") or "CPU", env.get("where")) if w)
    out = [f"Effective bandwidth GB/s, % of the copy ceiling ({result.ceiling_gbps:.0f} GB/s), "
           f"speedup over eager; {clock}, {where}."]
    if env.get("device") != "cuda":
        out[0] += (" Host-clock figures of the CPU (perf_counter around each call), not GPU "
                   "figures: they say nothing about a GPU.")
    if result.peak_tflops:
        out[0] += (f" Compute-bound ops: time, TFLOP/s, % of the matrix peak "
                   f"({result.peak_tflops:.3g} TFLOP/s).")
    for (op, dtype), cases in groups.items():
        shapes = list(dict.fromkeys(s for s, _ in cases))
        cols = [b for b in BACKENDS if any(cases.get((s, b)) and cases[(s, b)].status != "skipped"
                                           for s in shapes)]
        if not cols:
            continue
        out += ["", f"{op} {dtype}", ""] + markdown_table(
            ["shape", *cols], [[s, *(cell(cases.get((s, b)), cases.get((s, "eager")), unstable)
                                     for b in cols)] for s in shapes])
    if line := marks.legend(k for r in result.records for k in marks.doubts(r, unstable)):
        out += ["", line]
    for op in dict.fromkeys(r.op for r in result.records):
        table = ceiling_table(result, op)
        if table is not None:
            out += ["", table.title, ""] + table.markdown()
    out += graph_lines(result)
    out += energy_lines(result)
    run = run_lines(result)
    out += ["", f"The run: {run[0]}"] + [f"- {line}" for line in run[1:]]
    out += [f"- warning: {w}" for w in result.warnings[:20]]
    failed = [r for r in result.records if r.status == "failed"]
    if failed:
        out += ["", f"{len(failed)} case(s) failed:"]
        out += [f"- {r.op}/{r.backend}/{r.shape}/{r.dtype}: {r.reason}" for r in failed]
    return "\n".join(out)


def graph_text(rec: Record | None) -> str:
    """``"18 / 10.3 us 43%"``: hot device time per call in the stream and in a CUDA graph (us),
    and the share of the stream's figure the graph removes (launch gaps: the host's part)."""
    if rec is None or rec.status != "ok" or rec.device_time_ms is None:
        return "-"
    if rec.device_time_graph_ms is None:
        return f"{sig(1e3 * rec.device_time_ms)} / - us"
    share = max(0.0, 1.0 - rec.device_time_graph_ms / rec.device_time_ms) if rec.device_time_ms > 0 else 0.0
    return f"{sig(1e3 * rec.device_time_ms)} / {sig(1e3 * rec.device_time_graph_ms)} us {100 * share:.0f}%"


def graph_lines(result: Sweep, op: str | None = None) -> list[str]:
    """Stream and graph side by side, one table per (op, dtype) (of ``op`` only, when given): how
    much of each backend's cost is launches (the graph removes them) and how much is the kernels;
    no lines without graph figures (the CPU, an older record)."""
    have = [r for r in result.records if r.device_time_graph_ms is not None and op in (None, r.op)]
    if not have:
        return []
    out = ["", "Stream / graph: hot device time per call in the stream and with the calls captured "
               "in one CUDA graph (us), and the share of the stream's time that was launch gaps."]
    for name, dtype in dict.fromkeys((r.op, r.dtype) for r in have):
        cases = {(r.shape, r.backend): r for r in result.records if (r.op, r.dtype) == (name, dtype)}
        shapes = list(dict.fromkeys(s for s, _ in cases))
        cols = [b for b in BACKENDS if any(cases.get((s, b)) is not None and cases[(s, b)].status == "ok"
                                           for s in shapes)]
        out += ["", f"{name} {dtype}: stream / graph", ""] + markdown_table(
            ["shape", *cols], [[s, *(graph_text(cases.get((s, b))) for b in cols)] for s in shapes])
    return out


#: What an energy table shows (the run's summary, the results page, the site's Runs tab).
ENERGY_INTRO = ("Energy per call (NVML total energy of the board over a window of back-to-back calls, "
                "idle power included; shown, never gated): mJ per call, pJ per byte moved.")


@dataclass(frozen=True)
class EnergyTable:
    """Energy per call of one (op, dtype): ``title``, ``header`` (``shape`` then the backends) and
    ``rows`` of texts (:func:`energy_text`), rows the shapes in run order; ``legend`` explains the
    marks in it (``fusebench.report.marks``), empty when none is marked."""

    title: str
    header: list[str]
    rows: list[list[str]]
    legend: str = ""


def energy_text(rec: Record | None, sweep: Sweep | None = None) -> str:
    """``"205 mJ 95.5 pJ/B"``: energy per call and per byte moved, with the mark ``#`` when its
    window averaged above the power limit of the board that measured it in the run ``sweep``
    (``marks.energy_doubts``); ``"-"`` without a reading."""
    if rec is None or rec.energy_mj_per_call is None:
        return "-"
    per_byte = f" {sig(rec.energy_pj_per_byte)} pJ/B" if rec.energy_pj_per_byte is not None else ""
    kinds = marks.energy_doubts(rec, sweep) if sweep is not None else []
    return f"{sig(rec.energy_mj_per_call)} mJ{per_byte}" + (f" {marks.symbols(kinds)}" if kinds else "")


def energy_tables(result: Sweep, op: str | None = None) -> list[EnergyTable]:
    """Energy per call of every case that has it (``fusebench.measure.energy``), one table per
    (op, dtype) (of ``op`` only, when given); none when no case has it (the CPU, no NVML, a
    record stored before energy was measured)."""
    have = [r for r in result.records if r.energy_mj_per_call is not None and op in (None, r.op)]
    out = []
    for name, dtype in dict.fromkeys((r.op, r.dtype) for r in have):
        cases = {(r.shape, r.backend): r for r in have if (r.op, r.dtype) == (name, dtype)}
        shapes = list(dict.fromkeys(s for s, _ in cases))
        cols = [b for b in BACKENDS if any((s, b) in cases for s in shapes)]
        kinds = [k for r in cases.values() for k in marks.energy_doubts(r, result)]
        out.append(EnergyTable(f"{name} {dtype}: energy per call", ["shape", *cols],
                               [[s, *(energy_text(cases.get((s, b)), result) for b in cols)] for s in shapes],
                               marks.legend(kinds, speedups=False)))
    return out


def energy_lines(result: Sweep, op: str | None = None) -> list[str]:
    """:func:`energy_tables` as Markdown lines under :data:`ENERGY_INTRO`; no lines without a
    table."""
    tables = energy_tables(result, op)
    if not tables:
        return []
    out = ["", ENERGY_INTRO]
    for t in tables:
        out += ["", t.title, ""] + markdown_table(t.header, t.rows) + (["", t.legend] if t.legend else [])
    return out


def markdown_table(header: list[str], rows: list[list[str]]) -> list[str]:
    """A Markdown table's lines: ``| a | b |``, ``|---|---|``, then one line per row."""
    return (["| " + " | ".join(header) + " |", "|---|" + "---|" * (len(header) - 1)]
            + ["| " + " | ".join(row) + " |" for row in rows])


@dataclass(frozen=True)
class Cell:
    """One cell of :class:`CeilingTable`: its text, whether it is the row's best figure, and the
    reason of a case that was not timed (``note``, numbered in the table's notes)."""

    text: str
    best: bool = False
    note: str | None = None


@dataclass
class CeilingTable:
    """An op's % of the copy ceiling per backend, one row per (shape, dtype): issue 15's table.

    Attributes:
        title: one line: op, ceiling (GB/s), device, commit.
        header: ``"<op> shape, dtype"``, then the backends in :data:`BACKENDS` order.
        rows: the row label, then one :class:`Cell` per backend.
        notes: the distinct reasons of the cases not timed, in order; a cell's mark ``(n)`` is
            ``notes[n - 1]``.
        legend: the line explaining the marks of doubtful figures (``fusebench.report.marks``),
            empty when none is marked.
    """

    title: str
    header: list[str]
    rows: list[tuple[str, list[Cell]]]
    notes: list[str]
    legend: str = ""

    def cell_text(self, c: Cell) -> str:
        """``"97"``, ``"**97**"`` (the row's best), ``"error (1)"``, ``"— (2)"``."""
        text = f"**{c.text}**" if c.best else c.text
        return f"{text} ({self.notes.index(c.note) + 1})" if c.note else text

    def markdown(self) -> list[str]:
        """The table as Markdown lines (:func:`markdown_table`), its notes numbered under it."""
        lines = markdown_table(self.header, [[label, *(self.cell_text(c) for c in cells)]
                                             for label, cells in self.rows])
        if self.notes:
            lines.append("")
            lines += [f"({i}) {note}" for i, note in enumerate(self.notes, 1)]
        if self.legend:
            lines += ["", self.legend]
        return lines


def row_best(figures: list[tuple[float, bool]]) -> int | None:
    """The figure (rounded, as shown) that a row of :func:`ceiling_table` shows in bold, from its
    timed figures ``(figure, marked)``: the highest unmarked one, when it is certain and tells
    something. None (no bold) when no figure is unmarked, when a marked figure rounds above it
    (noisy, contaminated or cache-resident: which backend is best is not known), or when every
    figure of the row rounds to it (one figure, or a tie of all). Unmarked figures that round to
    it are all bold."""
    clean = [round(f) for f, marked in figures if not marked]
    if not clean:
        return None
    best = max(clean)
    shown = [round(f) for f, _ in figures]
    if max(shown) > best or all(f == best for f in shown):
        return None
    return best


def ceiling_table(sweep: Sweep, op: str) -> CeilingTable | None:
    """% of the copy ceiling (hot device time) of every backend of ``op`` side by side, from a run's
    records (``make bench``'s sweep, or a stored run record: ``fusebench.storage.runrecord``).

    Rows are (shape, dtype) in run order, dtype first; columns the backends of :data:`BACKENDS` that
    the op has (a case skipped as ``"<op> has no <backend> backend"`` makes no column). A timed case
    shows its % rounded to a whole number, the row's best in bold (:func:`row_best`: the highest
    unmarked figure, none where a marked one is above it); a failed case ``error``, a skipped one
    ``—``, each with its reason as a numbered note; a doubtful figure carries its marks
    (``fusebench.report.marks``, explained in ``legend``) and is never bold. None when
    ``op`` has no record, is not memory-bound, or nothing of it was timed.
    """
    recs = [r for r in sweep.records if r.op == op]
    if not recs or any(r.roofline != "memory" for r in recs) or all(r.status != "ok" for r in recs):
        return None
    env = sweep.environment
    clock = "hot device time" if env.get("device") == "cuda" else "host time"
    title = (f"{op}: % of the copy ceiling ({sweep.ceiling_gbps:.0f} GB/s), {clock}, higher is better; "
             f"{env.get('gpu') or 'CPU'}, commit {str(env.get('git_commit'))[:12]}")
    return _backend_table(sweep, op, recs, title, [f"{op} shape, dtype"],
                          lambda r, eager, kinds: f"{r.pct_of_ceiling:.0f}{marks.symbols(kinds)}")


def headline_table(sweep: Sweep, op: str, shape: str) -> CeilingTable | None:
    """Every backend of ``op`` at one shape (its headline, ``Op.headline``), one row per dtype: the
    cells of the run's summary (:func:`cell`: GB/s, % of the copy ceiling and speedup over eager;
    time, TFLOP/s and % of the matrix peak for a compute-bound op), the row's best in bold by %
    of the ceiling (or of the peak) as :func:`ceiling_table` marks it, doubtful figures with their
    marks, a case not timed with its reason as a numbered note. None when the run timed nothing
    of ``op`` at ``shape``."""
    recs = [r for r in sweep.records if r.op == op and r.shape == shape]
    if not recs or all(r.status != "ok" for r in recs):
        return None
    unstable = marks.peak_unstable(sweep)
    env = sweep.environment
    clock = "hot device time" if env.get("device") == "cuda" else "host time"
    if all(r.roofline == "compute" for r in recs):
        what = (f"time, TFLOP/s, % of the matrix peak ({sweep.peak_tflops:.3g} TFLOP/s)" if sweep.peak_tflops
                else "time, TFLOP/s")
    else:
        what = (f"effective bandwidth GB/s, % of the copy ceiling ({sweep.ceiling_gbps:.0f} GB/s), "
                "speedup over eager")
    title = f"{op} {shape}: {what}; {clock}, best in bold"
    return _backend_table(sweep, op, recs, title, [f"{op} {shape}, dtype"],
                          lambda r, eager, kinds: cell(r, eager, unstable), unstable, by_dtype=True)


def _figure(r: Record) -> float | None:
    """What a row's best is judged by: % of the copy ceiling, or of the matrix peak."""
    return r.pct_of_peak if r.roofline == "compute" else r.pct_of_ceiling


def _backend_table(sweep: Sweep, op: str, recs: list[Record], title: str, header: list[str],
                   text, unstable: bool = False, by_dtype: bool = False) -> CeilingTable:
    """The table of :func:`ceiling_table` and :func:`headline_table`: ``recs`` (of ``op``) by
    (shape, dtype), a column per backend the op has; ``text(record, its eager, marks)`` the text of
    a timed cell; ``by_dtype``: rows labelled by dtype alone (one shape)."""
    cols = [b for b in BACKENDS if any(r.backend == b and r.reason != no_backend_reason(op, b) for r in recs)]
    by_key = {(r.shape, r.dtype, r.backend): r for r in recs}
    shapes, dtypes = dict.fromkeys(r.shape for r in recs), dict.fromkeys(r.dtype for r in recs)
    labels = [(d, s) for d in dtypes for s in shapes if any((s, d, b) in by_key for b in cols)]
    notes: list[str] = []
    seen: set[str] = set()
    rows = []
    for dtype, shape in labels:
        found = [by_key.get((shape, dtype, b)) for b in cols]
        best = row_best([(_figure(r), bool(marks.doubts(r, unstable))) for r in found
                         if r and r.status == "ok" and _figure(r) is not None])
        cells = []
        for r in found:
            if r is None:
                cells.append(Cell("-"))
            elif r.status == "ok" and _figure(r) is not None:
                kinds = marks.doubts(r, unstable)
                cells.append(Cell(text(r, by_key.get((shape, dtype, "eager")), kinds),
                                  best=not kinds and best is not None and round(_figure(r)) == best))
                seen.update(kinds)
            else:
                note = plain(r.reason or r.status)  # records stored before first_line removed colours
                if note not in notes:
                    notes.append(note)
                cells.append(Cell("error" if r.status == "failed" else "—", note=note))
        rows.append((dtype if by_dtype else f"{shape} {dtype}", cells))
    return CeilingTable(title, [*header, *cols], rows, notes, marks.legend(seen))


#: Rounds 2.. that agree within this (max - min over their median) while round 1 stands apart
#: make a noisy case's cause "round 1 alone" (:func:`noise_cause`).
ROUND1_AGREE = 0.03


def noise_cause(rec: Record) -> str:
    """Why ``rec``'s rounds spread, where the rounds say it: ``"round 1 alone"`` when round 1
    differs from the rest by more than twice :data:`ROUND1_AGREE` and the rest agree within
    :data:`ROUND1_AGREE` (the round-1 state of docs/gate.md: a GPU state, not the case's code);
    else ``""``."""
    rounds, _ = clean_rounds(rec.rounds) if rec.rounds else ([], [])
    if len(rounds) < 3 or rounds[0] is not rec.rounds[0]:
        return ""
    field = "device_time_ms" if rec.device_time_ms is not None else "wall_time_ms"
    values = [r.get(field) for r in rounds]
    if any(not isinstance(v, (int, float)) or v <= 0 for v in values):
        return ""
    rest = sorted(values[1:])
    mid = rest[len(rest) // 2]
    agree = (rest[-1] - rest[0]) / mid <= ROUND1_AGREE
    apart = abs(values[0] - mid) / mid > 2 * ROUND1_AGREE
    return "round 1 alone" if agree and apart else ""


def run_lines(sweep: Sweep) -> list[str]:
    """What a record says about its run, in a few lines: rounds, copy ceiling per round, phase
    times, contaminated and noisy cases, kernels chosen by timing, warnings."""
    env = sweep.environment
    ok = [r for r in sweep.records if r.status == "ok"]
    lines = [f"{len(sweep.records)} cases ({len(ok)} timed) on {env.get('gpu') or 'the CPU'}, "
             f"{sweep.grid} grid, {sweep.rounds} round{'s' if sweep.rounds != 1 else ''}; "
             f"commit {str(env.get('git_commit'))[:12]}"
             + (" (working tree modified)" if env.get("git_dirty") else "")
             + f"; {env.get('where') or where(env)}"]
    if sweep.ceilings_gbps:
        lines.append("copy ceiling per round: " + ", ".join(f"{c:.0f}" for c in sweep.ceilings_gbps)
                     + f" GB/s (median {sweep.ceiling_gbps:.0f})")
    if sweep.phases:
        lines.append("phases: " + ", ".join(f"{k} {v:.0f} s" for k, v in sweep.phases.items()))
    # by the rule of record.clean_rounds (records written before it counted any round)
    verdicts = [(r, clean_rounds(r.rounds)[1] if r.rounds else r.contamination) for r in ok]
    dirty = [(r, why) for r, why in verdicts if why]
    dropped = sum(1 for r in ok if r.rounds and len(clean_rounds(r.rounds)[0]) < len(r.rounds))
    by_reason: dict[str, list] = {}  # a shared host contaminates every case for one reason: said once
    for r, why in dirty:
        by_reason.setdefault(why[0], []).append(r)
    lines.append(f"contaminated cases: {len(dirty)}" + (": " + "; ".join(
        f"{', '.join(f'{r.op}/{r.backend}/{r.shape}/{r.dtype}' for r in recs[:5])}"
        + (f" and {len(recs) - 5} more" if len(recs) > 5 else "") + f" ({why})"
        for why, recs in by_reason.items()) if dirty else "")
        + (f"; {dropped} case(s) measured from their clean rounds only (a throttled or shared "
           "round left out)" if dropped else ""))
    noisy = [r for r in ok if r.noise is not None and r.noise > NOISY]
    causes = {id(r): noise_cause(r) for r in noisy}
    lines.append(f"cases noisier than {100 * NOISY:.0f} % between rounds: {len(noisy)}" + (": " + ", ".join(
        f"{r.op}/{r.backend}/{r.shape}/{r.dtype} {spread_text(r.noise)}"
        + (f" ({causes[id(r)]})" if causes[id(r)] else "") for r in noisy[:10])
        + (" ..." if len(noisy) > 10 else "") if noisy else "")
        + ("; round 1 alone: round 1 apart from the other rounds, which agree within "
           f"{100 * ROUND1_AGREE:.0f} %" + (": the round-1 state of a GPU (docs/gate.md), not the case's code"
                                           if env.get("gpu") else "")
           if any(causes.values()) else ""))
    watts = [r for r in ok if getattr(r, "energy_mj_per_call", None) is not None]
    if watts:
        scope = ("every case" if sweep.energy_scope == "all" else
                 "a top-up window at each op's headline and largest shapes")
        lines.append(f"energy per call measured for {len(watts)} of {len(ok)} cases (NVML total energy; "
                     f"shown, never gated; {scope})")
    by_timing = [r for r in ok if r.kernel_by_timing and r.kernel_id]
    if by_timing:
        lines.append(f"kernels chosen by timing (compiler autotuning): {len(by_timing)} cases, "
                     "their kernel ids are in the record")
    return lines
