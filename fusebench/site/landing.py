"""The site's first page, ``html/index.html``: how much fusion buys on each GPU, at a glance.

asv's own page (its grid of about 40 axis-less sparklines) answered none of the questions a reader
opens the site with. This page answers them per GPU (asv machine), from the newest run record of a
commit on main's first-parent line (the commits asv draws):

* each op at its headline shape (``Op.headline``): every backend's effective bandwidth, % of the
  copy ceiling and speedup over eager, one row per dtype, the best in bold, doubtful figures
  marked (``fusebench.report.summary.headline_table``: the run's own cells and marks);
* that commit's verdict against the previous measured one, in the gate's words, with its counts
  (``fusebench.site.verdicts``: the Verdicts page's judgement, not a second one);
* links to its plots, its run record, its verdicts and asv's graphs of each op (``asv.html``);
* where two GPUs measured the same commit (or the nearest commits on main), the same cases side
  by side: the time on one over the time on the other, against their copy ceilings' ratio (a case
  as close to each ceiling shows the same ratio).

The tables are plain HTML: they read as they are without JavaScript, and from ``file://``; the
page's one script sends an address of asv's page from before it moved to ``asv.html``
(``index.html#<graph>``) on there. Every stored string is escaped (jinja2 autoescape,
``templates/landing.html``).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path

from fusebench.paths import PROJECT_ROOT

#: What the landing page's heading asks.
HEADING = "How much fusion buys, per GPU"
#: The asv graph each op's history links to, by roofline: its throughput.
GRAPH = {"memory": "track_bandwidth", "compute": "track_tflops"}


@dataclass(frozen=True)
class Newest:
    """A machine's newest measured commit on main that has a run record.

    Attributes:
        machine: the asv machine.
        commit: full sha; empty when no commit on main has a record.
        sweep: the record (``fusebench.record.Sweep``), None when unreadable or missing.
        error: why the record could not be read, else empty.
    """

    machine: str
    commit: str
    sweep: object | None
    error: str = ""


def recorded_line(results_dir: Path, machine: str, root: Path = PROJECT_ROOT) -> list[str]:
    """``machine``'s commits on main's first-parent line with stored results and a run record,
    oldest first (``verdicts.measured_line``)."""
    from fusebench.site import verdicts
    from fusebench.storage import runrecord

    records = runrecord.records_dir(results_dir)
    return [c for c in verdicts.measured_line(results_dir, machine, root)
            if runrecord.find(records, machine, c) is not None]


def newest(results_dir: Path, machine: str, line: list[str]) -> Newest:
    """The record of the newest commit of ``line`` (:func:`recorded_line`)."""
    from fusebench.errors import UsageError
    from fusebench.storage import runrecord

    if not line:
        return Newest(machine, "", None, "no run record of a commit on main")
    try:
        sweep = runrecord.load(runrecord.records_dir(results_dir), machine, line[-1])
    except UsageError as exc:
        return Newest(machine, line[-1], None, str(exc))
    return Newest(machine, line[-1], sweep)


def nearest_commits(line_a: list[str], line_b: list[str], order: list[str]) -> tuple[str, str, int] | None:
    """The commits of ``line_a`` and ``line_b`` nearest each other on ``order`` (main's first-parent
    line, oldest first): ``(commit a, commit b, commits apart)``, the newest such pair where several
    are as near; None when either has none on ``order``."""
    at = {c: i for i, c in enumerate(order)}
    pairs = [(abs(at[a] - at[b]), -min(at[a], at[b]), a, b)
             for a in line_a if a in at for b in line_b if b in at]
    if not pairs:
        return None
    apart, _, a, b = min(pairs)
    return a, b, apart


def ratio_table(a, b, op: str, shape: str, name_a: str, name_b: str):
    """The same cases of ``op`` at ``shape`` measured by two GPUs (run records ``a`` and ``b``) as
    a :class:`~fusebench.report.summary.CeilingTable`: per dtype and backend, the time per call on
    each (ms) and ``b``'s over ``a``'s; the title says the ratio of their copy ceilings (of their
    matrix peaks for a compute-bound op). A case doubtful on either side (``marks.doubts``) gets
    ``n/a`` with its marks, as a speedup would. None when no case of ``op`` at ``shape`` was timed
    on both."""
    from fusebench.axes import BACKENDS
    from fusebench.report import marks, summary

    def cases(sweep):
        return {(r.dtype, r.backend): r for r in sweep.records
                if r.op == op and r.shape == shape and r.status == "ok" and summary.time_ms(r)}

    on_a, on_b = cases(a), cases(b)
    both = [k for k in on_a if k in on_b]
    if not both:
        return None
    compute = on_a[both[0]].roofline == "compute"
    ceilings = (a.peak_tflops, b.peak_tflops) if compute else (a.ceiling_gbps, b.ceiling_gbps)
    unit, roof = ("TFLOP/s", "matrix peaks") if compute else ("GB/s", "copy ceilings")
    ref = (f"their {roof} {ceilings[0]:.0f} / {ceilings[1]:.0f} {unit} = "
           f"{summary.speedup_text(ceilings[0] / ceilings[1])}" if all(ceilings) else f"no {roof} to compare")
    cols = [bk for bk in BACKENDS if any(k[1] == bk for k in both)]
    seen: set[str] = set()
    rows = []
    for dtype in dict.fromkeys(d for d, _ in both):
        cells = []
        for backend in cols:
            ra, rb = on_a.get((dtype, backend)), on_b.get((dtype, backend))
            if ra is None or rb is None:
                cells.append(summary.Cell("-"))
                continue
            kinds = list(dict.fromkeys(marks.doubts(ra) + marks.doubts(rb)))
            seen.update(kinds)
            x = marks.speedup(summary.time_ms(rb), summary.time_ms(ra), rb, ra)
            times = f"{summary.sig(summary.time_ms(ra))} / {summary.sig(summary.time_ms(rb))} ms"
            cells.append(summary.Cell(f"{times} {summary.speedup_text(x)}" if x is not None
                                      else f"{times} n/a {marks.symbols(kinds)}"))
        rows.append((dtype, cells))
    title = (f"{op} {shape}: time per call on {name_a} / on {name_b} (ms), then {name_b}'s over "
             f"{name_a}'s; {ref}: a case as close to each roof shows the same ratio")
    return summary.CeilingTable(title, [f"{op} {shape}, dtype", *cols], rows, [], marks.legend(seen))


def _headline_shapes(ops) -> list[tuple[str, str]]:
    from fusebench.axes import shape_label

    return [(op.name, shape_label(op.headline)) for op in ops if op.headline is not None]


def _tables(tables) -> str:
    """Tables as escaped HTML (``site_pages.table_html``: it escapes every stored string itself)."""
    from markupsafe import Markup

    from fusebench.site.site_pages import table_html

    return Markup("".join(table_html(t) for t in tables))


def machine_section(results_dir: Path, found: Newest, ops, judged) -> dict:
    """One GPU's part of the page (``templates/landing.html``)."""
    from fusebench.asv.asvsuite import benchmark_name
    from fusebench.report import summary
    from fusebench.site import site_pages, verdicts

    m, sweep = found.machine, found.sweep
    tables = [t for op, shape in _headline_shapes(ops)
              if sweep is not None and (t := summary.headline_table(sweep, op, shape)) is not None]
    newest_verdict = next((v for v in judged if v.machine == m and v.head == found.commit), None)
    commit8 = found.commit[:8]
    verdict_link = f"verdicts/index.html#{m}" + (f"-{commit8}" if newest_verdict else "")
    measured = {r.op for r in sweep.records} if sweep is not None else set()
    graphs = {op.name: benchmark_name(op.name, GRAPH[op.roofline]) for op in ops}
    return {
        "name": m, "title": site_pages.gpu_title(results_dir, m), "cpu": site_pages.is_cpu(m),
        "commit8": commit8, "error": found.error,
        "run_link": f"runs/index.html#{m}-{commit8}",
        "verdict": verdicts.headline(newest_verdict) if newest_verdict else None,
        "verdict_link": verdict_link,
        "plots_link": f"plots/index.html#{m}",
        "graphs": [{"op": op.name, "link": verdicts.graph_link(graphs[op.name], (), m, "")}
                   for op in ops if op.name in measured],
        "tables": _tables(tables),
    }


def comparisons(results_dir: Path, lines: dict[str, list[str]], ops, root: Path = PROJECT_ROOT) -> list[dict]:
    """Each pair of GPU machines with a run record of commits on main, nearest commits first found
    (:func:`nearest_commits`): their headline cases side by side (:func:`ratio_table`)."""
    from fusebench import git
    from fusebench.errors import UsageError
    from fusebench.site import site_pages
    from fusebench.storage import runrecord

    order = git.first_parent(root, "main", oldest_first=True) or []
    records = runrecord.records_dir(results_dir)
    gpus = [m for m in site_pages.machine_order(lines) if not site_pages.is_cpu(m)]
    out = []
    for ma, mb in itertools.combinations(gpus, 2):
        near = nearest_commits(lines[ma], lines[mb], order)
        if near is None:
            continue
        ca, cb, apart = near
        try:
            a, b = runrecord.load(records, ma, ca), runrecord.load(records, mb, cb)
        except UsageError as exc:
            out.append({"a": ma, "b": mb, "error": str(exc), "tables": "", "commits": ""})
            continue
        commits = (f"commit {ca[:8]} measured on both" if ca == cb else
                   f"commit {ca[:8]} on {ma}, {cb[:8]} on {mb}: {apart} commit{'s' if apart != 1 else ''} "
                   "apart on main, the nearest both measured (the code may differ between them)")
        tables = [t for op, shape in _headline_shapes(ops) if (t := ratio_table(a, b, op, shape, ma, mb))]
        out.append({"a": ma, "b": mb, "error": "", "commits": commits, "tables": _tables(tables)})
    return out


def page(results_dir: Path, machines: list[str], ops, judged, root: Path = PROJECT_ROOT) -> str:
    """The landing page's HTML (``templates/landing.html``) for ``machines`` (GPU machines first),
    ``judged``: their verdicts (``verdicts.judge``)."""
    from fusebench.site import site_pages

    ops = list(ops)
    order = site_pages.machine_order(machines)
    lines = {m: recorded_line(results_dir, m, root) for m in order}
    sections = [machine_section(results_dir, newest(results_dir, m, lines[m]), ops, judged) for m in order]
    return site_pages.render("landing.html", "overview", "How much fusion buys", HEADING, root="",
                             machines=sections, pairs=comparisons(results_dir, lines, ops, root),
                             asv_page=site_pages.ASV_PAGE)


def write_page(html_dir: Path, results_dir: Path, machines: list[str], ops, judged,
               root: Path = PROJECT_ROOT, name: str = "index.html") -> Path:
    """Write :func:`page` to ``html_dir/name``; returns its path."""
    from fusebench.atomic import write_atomic

    path = html_dir / name
    write_atomic(path, page(results_dir, machines, ops, judged, root))
    return path
