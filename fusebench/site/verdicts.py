"""The site's Verdicts page: for each measured commit on main, what changed, in the gate's words.

For each machine, the newest commits with stored results that lie on main's first-parent line
(the ones asv draws); each is judged against the previous one of them (its nearest
measured ancestor on that line) by the regression gate itself (``fusebench.gate.compare``:
the run records' rounds, the machine's A/A history, the case file's factor and alpha), exactly
as ``make compare BASE=<previous> HEAD=<commit> MACHINE=<machine>`` would. Each commit says the
verdict (FAIL, inconclusive: mostly blind, or ok) and names the cases that moved (regression, new
failure, improvement, fixed, within noise, blind, contaminated, different kernel, different
libraries), each linking to its graph on the site; the
cases within the factor and those measured on the launch path are counted. What was not judged
("not on both sides") is broken down (:class:`NotBoth`): a backend the op does not register is
left out, a reference backend whose library neither run had installed is said so apart, then the
cases skipped on both sides for another reason and those measured on one side only. asv's own
Regressions tab applies a fixed threshold to the stored medians (``asv.conf.json``'s
``regressions_thresholds``) and knows neither rounds, noise history nor contamination: where the
two disagree, this page is the gate's word (the page says so).
"""

from __future__ import annotations

import math
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

from fusebench import git
from fusebench.atomic import write_atomic
from fusebench.paths import PROJECT_ROOT

#: Where the page goes under the site, and its tab.
VERDICTS = "verdicts"
NAV_VERDICTS = f'<li id="nav-li-verdicts"><a href="{VERDICTS}/index.html">Verdicts</a></li>'
#: Cases listed per commit before "and N more".
SHOWN = 60
#: The statuses of the cases a commit's rows name, in the page's order: every verdict but
#: "same", "launch path" (counted) and "not on both sides" (broken down, :class:`NotBoth`).
MOVED = ("new failure", "regression", "contaminated", "different libraries", "different kernel",
         "within noise", "blind", "fixed", "improvement")
#: A reference library's skip reason when it is missing (``fusebench.kernels.reference_libs.load``:
#: ``"<package> <version> is not installed; ..."``, or ``"... cannot be imported (...)"``).
NOT_INSTALLED = (" is not installed", " cannot be imported")
#: The newest measured commits judged per machine (each pair costs a full gate run).
PAIRS = 8


class _Indexed:
    """A run record whose ``by_key`` is built once (the gate asks it once per case)."""

    def __init__(self, sweep):
        self._sweep, self._keys = sweep, sweep.by_key()

    def by_key(self):
        return self._keys

    def __getattr__(self, name):
        return getattr(self._sweep, name)


@dataclass
class NotBoth:
    """The case-metrics of a pair measured on at most one side, by why.

    Attributes:
        no_backend: the op does not register the backend (the suite's backend axis is the full
            list): left out of the page but for this count.
        not_installed: ``{backend: case-metrics}`` of reference backends whose library neither run
            had (both records skipped it as not installed or not importable).
        neither: skipped, failed to set up or not stored on both sides for another reason.
        base_only, head_only: measured on one side only.
    """

    no_backend: int = 0
    not_installed: dict[str, int] = field(default_factory=dict)
    neither: int = 0
    base_only: int = 0
    head_only: int = 0

    def text(self) -> str:
        """What was not judged, in one or two sentences; empty when nothing was left out."""
        parts = []
        if self.not_installed:
            parts.append(f"{sum(self.not_installed.values())} of reference backends installed on neither "
                         f"side ({', '.join(sorted(self.not_installed))})")
        if self.neither:
            parts.append(f"{self.neither} skipped or not stored on both sides")
        if self.base_only:
            parts.append(f"{self.base_only} measured before only")
        if self.head_only:
            parts.append(f"{self.head_only} measured after only")
        total = sum(self.not_installed.values()) + self.neither + self.base_only + self.head_only
        out = f"Not judged, {total} case-metrics not on both sides: {'; '.join(parts)}." if total else ""
        if self.no_backend:
            out += (" " if out else "") + (f"Left out: {self.no_backend} case-metrics of backends the op "
                                           "does not have.")
        return out


def not_both(rows, base_record, head_record, ops=None) -> NotBoth:
    """:class:`NotBoth` of the ``rows`` (``compare.Row``) whose status is "not on both sides";
    ``ops``: ``{op name: Op}`` (their registered backends), None when unknown (then no case counts
    as a backend the op does not have)."""
    from fusebench.gate import compare, noise

    out = NotBoth()
    keys = [r.by_key() if r is not None else {} for r in (base_record, head_record)]
    for r in rows:
        if r.status != compare.NOT_BOTH:
            continue
        op, backend = r.benchmark.split(".")[1].lower(), r.params[0]
        stored = [v is None or not math.isnan(v) for v in (r.before, r.after)]  # None: failed
        if stored[0] != stored[1]:
            if stored[0]:
                out.base_only += 1
            else:
                out.head_only += 1
        elif ops is not None and op in ops and backend not in ops[op].backends:
            out.no_backend += 1
        elif backend in noise.REFERENCE_BACKENDS and all(
                (rec := k.get((op, *r.params))) is not None and rec.status == "skipped"
                and any(t in rec.reason for t in NOT_INSTALLED) for k in keys):
            out.not_installed[backend] = out.not_installed.get(backend, 0) + 1
        else:
            out.neither += 1
    return out


@dataclass
class Verdict:
    """One commit judged against the previous measured one on main.

    Attributes:
        machine, base, head: the machine and the two full shas.
        failed: the gate fails (a regression or a new failure).
        inconclusive: no failure, but most case-metrics judged are blind (``compare.inconclusive``).
        counts: ``compare.summary`` of the rows (counts by status).
        flagged: ``(benchmark, params, slowdown, limit, status)`` of each failing row.
        moved: the ``compare.Row`` of every case whose status is in :data:`MOVED`, in that order.
        same, launch_path: how many case-metrics were within the factor, on the launch path.
        missing: :class:`NotBoth`.
        error: why the pair could not be judged (an unreadable file), else empty.
    """

    machine: str
    base: str
    head: str
    failed: bool = False
    inconclusive: bool = False
    counts: str = ""
    flagged: list[tuple] = field(default_factory=list)
    moved: list = field(default_factory=list)
    same: int = 0
    launch_path: int = 0
    missing: NotBoth = field(default_factory=NotBoth)
    error: str = ""


def measured_line(results_dir: Path, machine: str, root: Path = PROJECT_ROOT,
                  branch: str = "main") -> list[str]:
    """``machine``'s stored commits on ``branch``'s first-parent line, oldest first."""
    from fusebench.storage import results

    line = git.first_parent(root, branch, oldest_first=True)
    if line is None:
        return []
    stored = {c for c, _ in results.stored_commits(results_dir, machine)}
    return [c for c in line if c in stored]


def judge_history(results_dir: Path, machine: str, root: Path = PROJECT_ROOT, ops=None) -> list[Verdict]:
    """The newest :data:`PAIRS` measured commits of ``machine`` on main, each against the previous
    measured one, newest first; ``ops``: ``{op name: Op}`` for :func:`not_both`."""
    from fusebench import config
    from fusebench.errors import UsageError
    from fusebench.gate import compare, noise
    from fusebench.storage import results, runrecord

    settings = config.load(config.DEFAULT_PATH)
    records = runrecord.records_dir(results_dir)
    history = noise.from_records(records / machine, root)
    reader = results.Reader(results_dir)
    line = measured_line(results_dir, machine, root)[-(PAIRS + 1):]
    loaded: dict[str, object] = {}

    def record(commit: str):
        if commit not in loaded:
            for older in list(loaded)[:-1]:  # a pair's head is the next pair's base: two kept at most
                del loaded[older]
            rec = runrecord.load(records, machine, commit)
            loaded[commit] = _Indexed(rec) if rec is not None else None
        return loaded[commit]

    out = []
    for base, head in zip(line, line[1:]):
        v = Verdict(machine, base, head)
        try:
            rows = compare.compare(reader.commit(machine, base), reader.commit(machine, head),
                                   settings.factor, record(base), record(head), alpha=settings.alpha,
                                   history=history)
        except UsageError as exc:
            v.error = str(exc)
            out.append(v)
            continue
        v.failed, v.counts = compare.failed_gate(rows), compare.summary(rows)
        v.inconclusive = compare.inconclusive(rows)
        v.flagged = [(r.benchmark, r.params, r.slowdown, r.limit, r.status) for r in rows
                     if r.status in compare.FAILING]
        v.moved = sorted((r for r in rows if r.status in MOVED),
                         key=lambda r: (MOVED.index(r.status), r.benchmark, r.params))
        v.same = sum(r.status == compare.SAME for r in rows)
        v.launch_path = sum(r.status == compare.LAUNCH_PATH for r in rows)
        v.missing = not_both(rows, record(base), record(head), ops)
        out.append(v)
    return out[::-1]


def graph_link(benchmark: str, params: tuple, machine: str, root: str = "../") -> str:
    """The site's graph of one case: ``../asv.html#<benchmark>?machine=..&p-backend='..'...``
    (asv keeps parameter values as repr strings; fewer ``params``, fewer selected); ``root``: the
    path from the linking page to the site's root."""
    from fusebench.site.site_pages import ASV_PAGE

    names = ("backend", "shape", "dtype")
    query = [("machine", machine)] + [(f"p-{k}", repr(v)) for k, v in zip(names, params)]
    return f"{root}{ASV_PAGE}#{benchmark}?" + urllib.parse.urlencode(query, quote_via=urllib.parse.quote)


#: The bootstrap class of a case row, by status: worse red, better green, judged apart amber.
ROW_CLASS = {"new failure": "danger", "regression": "danger", "improvement": "success", "fixed": "success",
             "contaminated": "warning", "different libraries": "warning", "different kernel": "warning",
             "blind": "warning"}


def _ratio(x: float) -> str:
    return f"{x:.3f}x" if math.isfinite(x) else ""


def headline(v: Verdict) -> dict:
    """What a commit's verdict says at a glance (the Verdicts page's panel heading, the landing
    page's line): ``head8``, ``base8``, ``verdict`` (ok, FAIL, inconclusive, not judged), its bootstrap
    ``label_class``, ``moved_counts`` (``"2 within noise, 1 fixed"``), ``counts`` (the gate's
    count by status, ``compare.summary``) and ``error``."""
    counts: dict[str, int] = {}
    for r in v.moved:
        counts[r.status] = counts.get(r.status, 0) + 1
    return {"head8": v.head[:8], "base8": v.base[:8], "error": v.error, "counts": v.counts,
            "verdict": "not judged" if v.error else ("FAIL" if v.failed else "inconclusive"
                                                     if v.inconclusive else "ok"),
            "label_class": ("label-default" if v.error else "label-danger" if v.failed
                            else "label-warning" if v.inconclusive else "label-success"),
            "moved_counts": ", ".join(f"{n} {s}" for s, n in counts.items()) or "nothing moved"}


def page(verdicts: list[Verdict], titles: dict[str, str] | None = None) -> str:
    """The Verdicts page (``templates/verdicts.html``; no script; every stored string escaped by
    the template). ``titles``: ``{machine: heading}`` (its GPU), else the machine's name."""
    from fusebench.gate.compare import human
    from fusebench.site import site_pages

    machines = []
    for machine in site_pages.machine_order(v.machine for v in verdicts):
        items = []
        for v in (v for v in verdicts if v.machine == machine):
            items.append({
                **headline(v),
                "rows": [{"status": r.status, "row_class": ROW_CLASS.get(r.status, ""),
                          "link": graph_link(r.benchmark, r.params, machine),
                          "benchmark": r.benchmark.split(".", 1)[-1], "params": ", ".join(r.params),
                          "before": human(r.before, r.unit), "after": human(r.after, r.unit),
                          "slowdown": _ratio(r.slowdown), "limit": _ratio(r.limit), "note": r.note}
                         for r in v.moved[:SHOWN]],
                "more": max(len(v.moved) - SHOWN, 0),
                "unchanged": f"{v.same} within the gate's factor; {v.launch_path} stream figures measure "
                             "the launch path (their graph time is judged).",
                "not_both": v.missing.text()})
        machines.append({"name": machine, "title": (titles or {}).get(machine, machine), "verdicts": items})
    return site_pages.render("verdicts.html", "verdicts", "verdicts",
                             "What each commit changed, in the gate's words", machines=machines)


def judge(results_dir: Path, machines: list[str], root: Path = PROJECT_ROOT, ops=None) -> list[Verdict]:
    """:func:`judge_history` of each of ``machines``, one after the other; ``ops``: the site's
    :class:`~fusebench.registry.Op` objects (a backend one does not register is left out), None
    when unknown."""
    by_name = {op.name: op for op in ops} if ops is not None else None
    return [v for m in machines for v in judge_history(results_dir, m, root, by_name)]


def write_page(html_dir: Path, results_dir: Path, root: Path = PROJECT_ROOT,
               machines: list[str] | None = None, ops=None, judged: list[Verdict] | None = None) -> Path:
    """``html/verdicts/index.html`` for ``machines`` (default: every one with stored results),
    each titled by its GPU; ``judged``: their verdicts (:func:`judge`), judged here when None."""
    from fusebench.site import site_pages
    from fusebench.storage import results

    machines = results.machines(results_dir) if machines is None else machines
    verdicts = judge(results_dir, machines, root, ops) if judged is None else judged
    path = html_dir / VERDICTS / "index.html"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, page(verdicts, {m: site_pages.gpu_title(results_dir, m) for m in machines}))
    return path
