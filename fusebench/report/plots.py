"""Plots of stored asv results, per op and machine (matplotlib, Agg, PNG).

* ``<op>-bandwidth.png``: effective bandwidth (GB/s) against bytes moved (log x), one line per
  backend, one panel per dtype, the copy ceiling as a dashed line. The ceiling is not stored
  as a metric of its own; it is derived from the stored ones as bandwidth / (% of ceiling / 100)
  (the median over the run's cases: one copy ceiling is measured per run).
* ``<op>-tflops.png`` instead, for a compute-bound op (``Op.roofline``): TFLOP/s against the
  declared flops, the matrix peak as the dashed line (derived the same way from % of peak):
  the launch-overhead plateau at small sizes, the compute roof at large ones.
* ``<op>-speedup.png``: device time of ``eager`` / device time of each backend at the op's
  headline shape (``Op.headline``), one bar per dtype (wall time where no device time was
  measured, e.g. on the CPU); a run that did not measure the headline (the CPU's grid) at its
  largest measured shape, the title says so. Drawn wherever the baseline was measured there,
  even when every bar is ``n/a`` with its mark; an op without one (matmul has no ``eager``) gets
  none, and ``fusebench plots`` says so in one line (:func:`speedups_not_drawn`).
* ``<op>-energy.png``, for a memory-bound op whose newest run's record has energy per call
  (``fusebench.measure.energy``; a GPU with NVML's energy counter): pJ per byte moved against
  bytes moved (log-log), one line per backend, one panel per dtype; shown, never gated. Drawn
  from the run record, not the asv results (results stored before energy was measured lack it).

The results are those of each machine's most recent commit (``fusebench.storage.results.Reader.latest``);
a backend that commit did not measure is drawn dashed from the newest earlier commit that did,
that commit named in the legend. A result file that cannot be read is named, not taken for "not
measured". Doubtful figures (``fusebench.report.marks``) are marked: hollow circles above the
roof, ``n/a`` with the mark for a speedup. The plots are a function of the stored results (no
date or version in the PNG): committed plots are those ``make plots`` draws from the committed
results.
Nothing here touches a GPU; ``matplotlib.figure.Figure`` renders with Agg without pyplot.
"""

from __future__ import annotations

import io
import math
import multiprocessing
import statistics
import textwrap
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from fusebench import metrictable
from fusebench.asv.asvsuite import benchmark_name
from fusebench.axes import BACKENDS, no_backend_reason, parse_shape, shape_label
from fusebench.errors import UsageError
from fusebench.report import marks
from fusebench.storage import results, runrecord

if TYPE_CHECKING:  # the registry imports torch; drawing stored results must not
    from fusebench.registry import Op

#: Above this % of the copy ceiling a figure is cache-resident (``fusebench.metrictable``).
CACHE_FLAG_PCT = metrictable.CACHE_FLAG_PCT

#: The baseline every speedup is relative to.
BASELINE = "eager"


@dataclass(frozen=True)
class Throughput:
    """What the throughput figure of an op of one roofline kind plots (``THROUGHPUT[op.roofline]``)."""

    metric: str      # asv metric on the y axis
    pct_metric: str  # its % of the roof, from which the roof is derived
    ylabel: str
    roof: str        # name of the dashed line
    unit: str
    xlabel: str
    x_scale: float   # the x axis is work / x_scale
    kind: str        # file name: <op>-<kind>.png

    def work(self, op: Op, shape, dtype: str) -> float:
        """The declared work of one case: bytes moved (memory) or flops (compute)."""
        if self.kind == "tflops":
            return op.flops(shape)
        return op.bytes_moved(shape, dtype)  # a dtype-axis name: no torch needed


def _throughput(metric: str, pct_metric: str, roof: str, xlabel: str, x_scale: float,
                kind: str) -> Throughput:
    """A :class:`Throughput` whose label and unit come from the metric table."""
    m = metrictable.BY_NAME[metric]
    return Throughput(metric, pct_metric, f"{m.label} ({m.unit})", roof, m.unit, xlabel, x_scale, kind)


THROUGHPUT = {
    "memory": _throughput("track_bandwidth", "track_pct_of_ceiling", "copy ceiling",
                          "bytes moved (MB, read + write)", 1e6, "bandwidth"),
    "compute": _throughput("track_tflops", "track_pct_of_peak", "matrix peak", "work (GFLOP)", 1e9, "tflops"),
}


def ceiling_gbps(run: results.Run, op: Op) -> float | None:
    """The run's roof for ``op`` from its throughput and % of roof; None if not stored.

    The copy ceiling (GB/s) for a memory-bound op, the matrix peak (TFLOP/s) for a compute-bound one.
    """
    t = THROUGHPUT[op.roofline]
    bw = run.values.get(benchmark_name(op.name, t.metric), {})
    pct = run.values.get(benchmark_name(op.name, t.pct_metric), {})
    derived = [bw[k] / (pct[k] / 100.0) for k in bw
               if results.is_measured(bw[k]) and results.is_measured(pct.get(k)) and pct[k] > 0]
    return statistics.median(derived) if derived else None


def bandwidth_series(run: results.Run, op: Op, dtype: str) -> dict[str, list[tuple[int, float, str]]]:
    """``{backend: [(work, throughput, shape label), ...]}`` sorted by size, measured cases only.

    Work and throughput are bytes moved and GB/s for a memory-bound op, flops and TFLOP/s for a
    compute-bound one (:data:`THROUGHPUT`).
    """
    t = THROUGHPUT[op.roofline]
    values = run.values.get(benchmark_name(op.name, t.metric), {})
    out = {}
    for backend in BACKENDS:
        points = []
        for shape in op.grids["default"]:
            v = values.get((backend, shape_label(shape), dtype))
            if results.is_measured(v):
                points.append((t.work(op, shape, dtype), v, shape_label(shape)))
        if points:
            out[backend] = sorted(points)
    return out


def doubts(run: results.Run, op: Op, key: tuple[str, str, str], record=None) -> list[str]:
    """The marks (``fusebench.report.marks``) of one stored case ``(backend, shape, dtype)``:
    ``cache`` / ``peak`` from its stored % of the ceiling or peak; ``noisy`` and ``contaminated``
    from the run's record (``record``: a ``Sweep``), when there is one."""
    out = []
    if record is not None:
        rec = next((r for r in record.records if r.key == (op.name, *key)), None)
        out = [k for k in marks.doubts(rec) if k in ("noisy", "contaminated")]
    pct = run.values.get(benchmark_name(op.name, THROUGHPUT[op.roofline].pct_metric), {}).get(key)
    limit = marks.PEAK_PCT if op.roofline == "compute" else CACHE_FLAG_PCT
    if results.is_measured(pct) and pct > limit:
        out.append("peak" if op.roofline == "compute" else "cache")
    return out


def chart_shape(run: results.Run, op: Op) -> str | None:
    """The shape label the speedup chart of ``op`` shows for ``run``: its headline when the run
    measured any backend there, else the largest shape (by elements) where it measured the
    baseline (a run of another grid: the CPU's has none of the headlines), else None."""
    if op.headline is None:
        return None
    measured: set[str] = set()
    baseline: set[str] = set()
    for metric in ("track_device_time", "track_wall_time"):
        for (b, s, _), v in run.values.get(benchmark_name(op.name, metric), {}).items():
            if results.is_measured(v):
                measured.add(s)
                if b == BASELINE:
                    baseline.add(s)
    headline = shape_label(op.headline)
    if headline in measured:
        return headline
    return max(baseline, key=lambda label: (_elements(label), label), default=None)


def _elements(label: str) -> int:
    """The elements of a shape label; 0 for one that is not a shape (a stored file is read as it is)."""
    try:
        return math.prod(parse_shape(label))
    except UsageError:
        return 0


def speedups(run: results.Run, op: Op, record=None) -> tuple[str, dict[str, dict[str, float | None]]]:
    """Speedup over :data:`BASELINE` at :func:`chart_shape` (the headline where the run measured
    it): ``(metric, {backend: {dtype: x}})``.

    The metric is ``track_device_time``, or ``track_wall_time`` when no device time is stored at
    that shape. A value is None where the backend or the baseline has no measurement (failed,
    skipped or not run) or either figure is doubtful (:func:`doubts`, with the run's ``record``).
    """
    label = chart_shape(run, op) or ""
    for metric in ("track_device_time", "track_wall_time"):
        values = run.values.get(benchmark_name(op.name, metric), {})
        if any(results.is_measured(values.get((b, label, d))) for b in BACKENDS for d in op.dtypes):
            break
    out = {}
    for backend in BACKENDS:
        out[backend] = {}
        for dtype in op.dtypes:
            base, t = values.get((BASELINE, label, dtype)), values.get((backend, label, dtype))
            ok = results.is_measured(base) and results.is_measured(t) and t > 0
            if ok and (doubts(run, op, (BASELINE, label, dtype), record)
                       or doubts(run, op, (backend, label, dtype), record)):
                ok = False
            out[backend][dtype] = base / t if ok else None
    return metric, out


#: PNG text chunks: none that change from one matplotlib to the next (``Software`` names its
#: version), so a fresh clone's ``make plots`` rewrites the committed plots byte for byte.
PNG_METADATA = {"Software": None}

#: The legend entry of the hollow circles drawn around figures above the roof.
ABOVE = {"bandwidth": "○ above the copy ceiling: cache-resident (L2), not memory",
         "tflops": "○ above the matrix peak: peak understated or cache-resident"}


#: The legend entry of the crosses drawn on noisy or contaminated figures.
DOUBTFUL = "× noisy or contaminated (the run's record)"


def _short(commit: str) -> str:
    return commit[:8]


#: How many older commits a plot looks back through for a backend its newest run lacks: each is
#: a file read, and a backend never measured made 3,000 stored results be read per plot.
LOOKBACK = 50


def older_backends(run: results.Run, older, op: Op) -> dict[str, results.Run]:
    """``{backend: the newest of older runs that measured it}`` for each backend of ``op`` that
    ``run`` measured at no shape (a later run without the reference libraries keeps their
    earlier lines on the plot, marked with their commit), among the :data:`LOOKBACK` newest
    older runs."""
    metric = benchmark_name(op.name, THROUGHPUT[op.roofline].metric)

    def measured(r: results.Run, backend: str) -> bool:
        return any(k[0] == backend and results.is_measured(v) for k, v in r.values.get(metric, {}).items())

    missing = [b for b in BACKENDS if b in op.backends and not measured(run, b)]
    out = {}
    for n, r in enumerate(older if missing else ()):  # one pass, newest first, read as it goes
        if n >= LOOKBACK:
            break
        if r.commit == run.commit:
            continue
        for backend in [b for b in missing if measured(r, b)]:
            out[backend] = r
            missing.remove(backend)
        if not missing:
            break
    return {b: out[b] for b in BACKENDS if b in out}


def _shape_ticks(ax, series: dict[str, list[tuple[int, float, str]]], x_scale: float) -> None:
    """The shapes as ticks on the top axis of ``ax``, at their sizes; shapes of equal size share
    a tick: ``"16384x1024 | 4096x4096"``."""
    shapes: dict[int, list[str]] = {}
    for size, _, label in sorted({p for pts in series.values() for p in pts}):
        if label not in shapes.setdefault(size, []):
            shapes[size].append(label)
    top = ax.secondary_xaxis("top")
    top.set_xticks([s / x_scale for s in shapes], [" | ".join(v) for v in shapes.values()],
                   rotation=90, fontsize=6)
    top.minorticks_off()


def empty_panel_text(op: Op, dtype: str, record=None) -> str:
    """What an empty panel of ``op`` at ``dtype`` says: not measured on this machine, with the
    skip reason the run's ``record`` gives for that dtype where it has one: the one most of the
    op's own backends were skipped for (first in run order on a tie), never a backend the op does
    not have ("matmul has no eager backend" is no reason for a dtype)."""
    reasons = [r.reason for r in (record.records if record is not None else ())
               if r.op == op.name and r.dtype == dtype and r.status == "skipped" and r.reason
               and r.reason != no_backend_reason(op.name, r.backend)]
    reason = max(dict.fromkeys(reasons), key=reasons.count, default="")
    return f"{dtype}: not measured on this machine" + (f"\n({reason})" if reason else "")


def bandwidth_figure(run: results.Run, op: Op, older=(), record=None):
    """The throughput figure of ``op`` (a matplotlib Figure), or None when nothing is stored:
    GB/s by bytes moved for a memory-bound op, TFLOP/s by flops (log-log) for a compute-bound one.
    A backend ``run`` did not measure is drawn dashed from the newest of ``older`` (newest first)
    that did, its commit in the legend (:func:`older_backends`). Figures above the roof are
    circled; with ``run``'s record, noisy or contaminated ones are crossed (:data:`DOUBTFUL`)."""
    from matplotlib.figure import Figure

    t = THROUGHPUT[op.roofline]
    earlier = older_backends(run, older, op)
    series = {d: {**bandwidth_series(run, op, d),
                  **{b: pts for b, r in earlier.items() if (pts := bandwidth_series(r, op, d).get(b))}}
              for d in op.dtypes}
    if not any(series.values()):
        return None
    ceiling = ceiling_gbps(run, op)
    fig = Figure(figsize=(5 * len(op.dtypes), 4.4), layout="constrained")
    axes = fig.subplots(1, len(op.dtypes), sharey=True)
    for ax, dtype in zip(axes, op.dtypes):
        for backend, points in series[dtype].items():
            source = earlier.get(backend, run)
            label = backend if source is run else f"{backend} ({_short(source.commit)})"
            # one colour per backend in every panel (the legend is shared): by its place in BACKENDS
            line, = ax.plot([p[0] / t.x_scale for p in points], [p[1] for p in points], marker="o", ms=3.5,
                            label=label, ls="--" if source is not run else "-",
                            color=f"C{BACKENDS.index(backend) % 10}")
            marks_of = {p: doubts(source, op, (backend, p[2], dtype), record if source is run else None)
                        for p in points}
            above = [p for p in points if {"cache", "peak"} & set(marks_of[p])]
            if above:  # cache-resident (above the roof): hollow, larger, and in the legend
                ax.plot([p[0] / t.x_scale for p in above], [p[1] for p in above], ls="none", marker="o",
                        ms=8, mfc="none", mec=line.get_color(), mew=1.2, label=ABOVE[t.kind])
            shaky = [p for p in points if {"noisy", "contaminated"} & set(marks_of[p])]
            if shaky:  # noisy or contaminated (the run's record): crossed, and in the legend
                ax.plot([p[0] / t.x_scale for p in shaky], [p[1] for p in shaky], ls="none", marker="x",
                        ms=7, color=line.get_color(), mew=1.2, label=DOUBTFUL)
        if ceiling:
            ax.axhline(ceiling, color="black", ls="--", lw=1, label=f"{t.roof} ({sig(ceiling)} {t.unit})")
        if not series[dtype]:  # an empty panel says why, not nothing (tf32 on a CPU)
            ax.text(0.5, 0.5, empty_panel_text(op, dtype, record), transform=ax.transAxes, ha="center",
                    va="center", wrap=True, fontsize=8, color="0.35")
        ax.set_xscale("log")
        if t.kind == "tflops":
            ax.set_yscale("log")  # the plateau: TFLOP/s ~ n^3 while time is flat
        ax.set_title(dtype)
        ax.set_xlabel(t.xlabel)
        ax.grid(True, which="major", alpha=0.3)
        _shape_ticks(ax, series[dtype], t.x_scale)
    axes[0].set_ylabel(t.ylabel)
    legend = {}  # one entry per backend, whichever panel has it
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            legend.setdefault(label, handle)
    fig.legend(list(legend.values()), list(legend), fontsize=8, loc="outside lower center",
               ncol=min(len(legend), 6))
    what = t.ylabel.split(' (')[0]
    fig.suptitle(f"{op.name} on {run.machine}: {what} by size (commit {_short(run.commit)})")
    return fig


def no_speedup_reason(run: results.Run, op: Op) -> str | None:
    """Why ``run`` gives ``op`` no speedup chart, in a few words; None when it gives one: wherever
    the baseline was measured at :func:`chart_shape`, in any dtype, however doubtful its figures
    (their bars are then ``n/a`` with their marks)."""
    if BASELINE not in op.backends:
        return f"{op.name} has no {BASELINE} backend, the baseline of a speedup"
    if op.headline is None:
        return f"{op.name} has no headline shape"
    label = chart_shape(run, op)
    if label is None:
        return f"{BASELINE}, the baseline of a speedup, was measured at no shape"
    values = run.values.get(benchmark_name(op.name, speedups(run, op)[0]), {})
    if not any(results.is_measured(values.get((BASELINE, label, d))) for d in op.dtypes):
        return f"{BASELINE}, the baseline of a speedup, was not measured at {label}"
    return None


def speedup_figure(run: results.Run, op: Op, record=None):
    """The speedup bar chart of ``op`` (a matplotlib Figure), or None where
    :func:`no_speedup_reason` gives a reason: one column per backend the op registers
    (``Op.backends``). A bar whose figure or baseline is doubtful (:func:`doubts`), or not
    measured, is ``n/a`` with its mark: a chart of only such bars is drawn, not left out."""
    from matplotlib.figure import Figure

    if no_speedup_reason(run, op) is not None:
        return None
    label = chart_shape(run, op)
    metric, table = speedups(run, op, record)
    values = run.values.get(benchmark_name(op.name, metric), {})
    # the backends the op registers: a column of a backend it does not have would read "n/a"
    backends = [b for b in BACKENDS if b in op.backends]
    seen: set[str] = set()
    fig = Figure(figsize=(7.5, 4.2), layout="constrained")
    ax = fig.subplots()
    width = 0.8 / len(op.dtypes)
    for i, dtype in enumerate(op.dtypes):
        xs = [j + (i - (len(op.dtypes) - 1) / 2) * width for j in range(len(backends))]
        ys = [table[b][dtype] for b in backends]
        bars = ax.bar(xs, [y or 0.0 for y in ys], width, label=dtype)
        for bar, y, b in zip(bars, ys, backends):
            # a backend not measured there is plain n/a: the baseline's doubts are not its reason
            kinds = (doubts(run, op, (b, label, dtype), record)
                     + doubts(run, op, (BASELINE, label, dtype), record)
                     if results.is_measured(values.get((b, label, dtype))) else [])
            seen.update(kinds)
            text = f"{y:.1f}" if y is not None else f"n/a{marks.symbols(list(dict.fromkeys(kinds)))}"
            # a marked n/a stands upright: "n/a~!" side by side ran into one another
            ax.annotate(text, (bar.get_x() + bar.get_width() / 2, bar.get_height()), ha="center",
                        va="bottom", fontsize=7, xytext=(0, 2), textcoords="offset points",
                        rotation=90 if y is None and kinds else 0)
    ax.axhline(1.0, color="black", lw=0.8)
    ax.set_xticks(range(len(backends)), backends)
    what = "device time" if metric == "track_device_time" else "wall time"
    ax.set_ylabel(f"speedup over {BASELINE} ({what})")
    ax.legend(fontsize=8)
    ax.margins(y=0.12)
    headline = shape_label(op.headline)
    not_headline = "" if label == headline else f"\nthe largest shape measured: not the headline {headline}"
    ax.set_title(f"{op.name} {label} on {run.machine}: speedup over {BASELINE} (commit {_short(run.commit)})"
                 + not_headline, fontsize=10)
    if seen:
        ax.set_xlabel(textwrap.fill(marks.legend(seen), 125), fontsize=7)  # within the figure's width
    return fig


#: The energy plot's label: a figure the gate never looks at (``fusebench.metrictable``).
ENERGY_NOTE = "shown, never gated"


def energy_series(record, op: Op, dtype: str) -> dict[str, list[tuple[int, float, str]]]:
    """``{backend: [(bytes moved, pJ per byte, shape), ...]}`` sorted by size: the cases of
    ``op`` and ``dtype`` in ``record`` (a ``Sweep``) timed with an energy reading, backends in
    :data:`BACKENDS` order, less the readings above the board's power limit
    (:func:`over_power`); empty when the record has none (the CPU, a record without energy)."""
    out = {}
    for backend in BACKENDS:
        points = sorted((r.bytes_moved, r.energy_pj_per_byte, r.shape) for r in record.records
                        if (r.op, r.backend, r.dtype) == (op.name, backend, dtype) and r.status == "ok"
                        and r.energy_pj_per_byte is not None
                        and not marks.energy_doubts(r, record))
        if points:
            out[backend] = points
    return out


def over_power(record, op: Op) -> int:
    """How many of ``op``'s energy readings in ``record`` are above the board's power limit
    (``marks.energy_doubts``): left out of its energy plot, which says so."""
    return sum(1 for r in record.records if r.op == op.name and r.energy_pj_per_byte is not None
               and marks.energy_doubts(r, record))


def energy_figure(record, op: Op, machine: str):
    """The energy figure of memory-bound ``op`` (a matplotlib Figure) from a run's ``record``:
    pJ per byte moved by bytes moved, log-log, one line per backend, one panel per dtype; None
    when the op is compute-bound or the record has no energy for it."""
    from matplotlib.figure import Figure

    if op.roofline != "memory" or record is None:
        return None
    series = {d: energy_series(record, op, d) for d in op.dtypes}
    if not any(series.values()):
        return None
    t = THROUGHPUT["memory"]
    fig = Figure(figsize=(5 * len(op.dtypes), 4.4), layout="constrained")
    axes = fig.subplots(1, len(op.dtypes), sharey=True)
    for ax, dtype in zip(axes, op.dtypes):
        for backend, points in series[dtype].items():
            ax.plot([p[0] / t.x_scale for p in points], [p[1] for p in points], marker="o", ms=3.5,
                    label=backend, color=f"C{BACKENDS.index(backend) % 10}")
        ax.set_xscale("log")
        ax.set_yscale("log")  # the idle power of a short call over few bytes: decades above a large one
        ax.set_title(dtype)
        ax.set_xlabel(t.xlabel)
        ax.grid(True, which="major", alpha=0.3)
        _shape_ticks(ax, series[dtype], t.x_scale)
    axes[0].set_ylabel("energy per byte moved (pJ/B)")
    legend = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            legend.setdefault(label, handle)
    fig.legend(list(legend.values()), list(legend), fontsize=8, loc="outside lower center",
               ncol=min(len(legend), 6))
    commit = str(record.environment.get("git_commit") or "")
    left_out = over_power(record, op)
    fig.suptitle(f"{op.name} on {machine}: energy per byte moved by size, {ENERGY_NOTE} "
                 f"(NVML board energy, idle power included; commit {_short(commit)})"
                 + (f"\n{left_out} reading(s) above the board's power limit left out: not physical"
                    if left_out else ""))
    return fig


def sig(x: float) -> str:
    """Three significant digits (``fusebench.report.summary.sig``): a CPU's 0.0168 TFLOP/s is
    never ``0``."""
    from fusebench.report.summary import sig as _sig

    return _sig(x)


def newest_first(reader: results.Reader, machine: str, op: Op):
    """The readable runs of ``machine`` that measured ``op``, one per commit (its files merged),
    newest commit date first (the first is ``reader.latest``'s); an iterator that reads one
    commit at a time (``Reader.newest_first``): a plot needs the newest run, and an older one
    only for a backend the newest lacks."""
    prefix = benchmark_name(op.name, "")
    return (r for r in reader.newest_first(machine)
            if any(name.startswith(prefix) and any(results.is_measured(v) for v in vals.values())
                   for name, vals in r.values.items()))


def kinds(op: Op) -> tuple[str, ...]:
    """The kinds of plot of ``op``, in the order :func:`write_plots` draws them (``<op>-<kind>.png``)."""
    return THROUGHPUT[op.roofline].kind, "speedup", "energy"


def copy_drawn(drawn_root: Path, out_root: Path, machine: str, op: Op) -> list[Path] | None:
    """Copy the PNGs of ``machine`` and ``op`` that :func:`write_plots` drew into ``drawn_root``
    to ``out_root`` (each atomically; a link at the target is replaced, never followed).

    Returns the copies in :func:`write_plots`' order, or None (nothing copied) when one of the
    sources is not a plain file: the caller draws that group instead.
    """
    import os
    import stat

    from fusebench.atomic import write_atomic

    sources = []
    for kind in kinds(op):
        src = drawn_root / machine / f"{op.name}-{kind}.png"
        try:
            mode = src.lstat().st_mode
        except FileNotFoundError:
            continue  # not drawn: write_plots had no figure of this kind
        if not stat.S_ISREG(mode):
            return None
        sources.append(src)
    written = []
    for src in sources:
        fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as f:
            data = f.read()
        path = out_root / machine / src.name
        write_atomic(path, data)
        written.append(path)
    return written


def draw_group(results_dir: Path, out_root: Path, machine: str, op: Op, dpi: int,
               reader: results.Reader) -> list[Path]:
    """Draw and save the plots of one ``machine`` and ``op`` (:func:`write_plots`' unit of work)."""
    from fusebench.atomic import write_atomic

    runs = newest_first(reader, machine, op)
    run = next(runs, None)
    if run is None:
        return []  # no readable file of this machine measured the op
    try:  # the run's record gives the noise and contamination marks
        record = runrecord.load(runrecord.records_dir(results_dir), machine, run.commit)
    except UsageError:
        record = None
    figures = ((THROUGHPUT[op.roofline].kind, bandwidth_figure(run, op, runs, record)),
               ("speedup", speedup_figure(run, op, record)),
               ("energy", energy_figure(record, op, machine)))
    written = []
    for kind, fig in figures:
        if fig is None:
            continue
        path = out_root / machine / f"{op.name}-{kind}.png"
        png = io.BytesIO()
        fig.savefig(png, format="png", dpi=dpi, metadata=PNG_METADATA)
        write_atomic(path, png.getvalue())  # a committed link in its place is replaced, not followed
        written.append(path)
    return written


def speedups_not_drawn(reader: results.Reader, machines: list[str], ops: list[Op],
                       written: list[Path]) -> list[str]:
    """One line per (machine, op) with stored results whose ``<op>-speedup.png`` is not among
    ``written`` (:func:`write_plots`' files): the chart and why it was not drawn
    (:func:`no_speedup_reason`)."""
    names = {(p.parent.name, p.name) for p in written}
    out = []
    for machine in machines:
        for op in ops:
            if (machine, f"{op.name}-speedup.png") in names:
                continue
            run = next(newest_first(reader, machine, op), None)
            why = no_speedup_reason(run, op) if run is not None else None
            if why:
                out.append(f"{machine}/{op.name}-speedup.png not drawn: {why}")
    return out


#: The groups a pool of forked workers draws (set by :func:`write_plots` before it forks them):
#: inherited, not pickled, so an op of any case file or test can be drawn in a worker.
_JOB: tuple | None = None


def _draw_job(index: int) -> list[Path]:
    results_dir, out_root, groups, dpi, reader = _JOB
    return draw_group(results_dir, out_root, *groups[index], dpi, reader)


def cpus() -> int:
    """The CPUs this process may run on (a container's cpuset, not the host's count)."""
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def write_plots(results_dir: Path, out_root: Path, ops: list[Op], machines: list[str] | None = None,
                dpi: int = 110, reader: results.Reader | None = None,
                drawn: tuple[Path, list[Op]] | None = None, workers: int | None = None) -> list[Path]:
    """Write ``out_root/<machine>/<op>-bandwidth.png`` and ``<op>-speedup.png`` for each machine,
    and ``<op>-energy.png`` where the newest run's record has energy per call.

    Args:
        results_dir: asv results folder (``results/``).
        out_root: where the per-machine folders go (``plots/``).
        ops: the ops to plot (``fusebench.ops.OPS.values()``); ops with no stored result are left out.
        machines: machine names; default every machine with results.
        reader: reads the stored results and keeps the list of unreadable files
            (``reader.unreadable``) for the caller to report; without one, unreadable files
            raise once everything readable is drawn.
        drawn: ``(folder, ops)``: this function has just drawn ``ops`` into ``folder`` from the
            same results at the same ``dpi`` (the site's ``html/plots/``); the PNGs of an op in
            it (the same object, hence the same cases) are copied from there (:func:`copy_drawn`),
            not drawn again, and its unreadable files are those the drawing call named.
        workers: processes drawing at once, each one (machine, op) group; default the CPUs,
            at most the groups. With more than one, the stored results are read here first, then
            the groups are drawn by forked workers (Agg, no pyplot: no display involved); the
            files, their bytes and the order of the list returned are the sequential ones.

    Returns the files written. A result file that cannot be read is left out (the plots are drawn
    from the machine's other files) and named, never taken for "not measured".

    Raises:
        UsageError: (only without ``reader``) some result files could not be read; the message
            names them, and the plots of the rest are written. A machine's folder of ``out_root``
            or a folder above it in the checkout is a symbolic link: nothing written.
    """
    from fusebench.paths import real_folder

    strict = reader is None
    reader = reader or results.Reader(results_dir)
    machines = machines if machines is not None else results.machines(results_dir)
    for machine in machines:  # a committed plots/h200 -> /elsewhere is refused, not written through
        real_folder(out_root / machine)
    groups = [(machine, op) for machine in machines for op in ops]
    done: dict[int, list[Path]] = {}
    for i, (machine, op) in enumerate(groups):
        if drawn is not None and any(op is o for o in drawn[1]):
            copied = copy_drawn(drawn[0], out_root, machine, op)
            if copied is not None:
                done[i] = copied
    todo = [i for i in range(len(groups)) if i not in done]
    n = min(cpus() if workers is None else workers, len(todo))
    if n > 1 and "fork" in multiprocessing.get_all_start_methods():
        for machine in dict.fromkeys(groups[i][0] for i in todo):
            reader.read_all(machine)  # once, in order, none kept: unreadable files named so
        import matplotlib.figure  # noqa: F401  imported once, before the fork
        global _JOB
        _JOB = (results_dir, out_root, groups, dpi, reader)
        try:
            import signal

            from fusebench.children import ending_with_parent

            # a killed publish ends them: SIGKILL, which no handler inherited from the fork (run_main's
            # SIGTERM) turns into an exit that waits on a pipe a sibling holds (issue 56)
            with ProcessPoolExecutor(n, mp_context=multiprocessing.get_context("fork"),
                                     initializer=ending_with_parent(signal.SIGKILL)) as pool:
                done.update(zip(todo, pool.map(_draw_job, todo)))
        finally:
            _JOB = None
    else:
        for i in todo:
            done[i] = draw_group(results_dir, out_root, *groups[i], dpi, reader)
    written = [p for i in range(len(groups)) for p in done[i]]
    if strict and reader.unreadable:
        raise UsageError("; ".join(str(u) for u in reader.unreadable)
                         + f" (left out; {len(written)} plots drawn from the rest)")
    return written
