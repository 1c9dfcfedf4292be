"""The site's Verdicts page: for each measured commit on main, what changed, in the gate's words.

For each machine, the newest commits with stored results that lie on main's first-parent line
(the ones asv draws); each is judged against the previous one of them (its nearest
measured ancestor on that line) by the regression gate itself (``fusebench.history.compare``:
the run records' rounds, the machine's A/A history, the case file's factor and alpha), exactly
as ``make compare BASE=<previous> HEAD=<commit> MACHINE=<machine>`` would. Each row says the
verdict, the counts by status, and lists the regressions and new failures, each linking to its
graph on the site. asv's own Regressions tab applies a fixed threshold to the stored medians
(``asv.conf.json``'s ``regressions_thresholds``) and knows neither rounds, noise history nor
contamination: where the two disagree, this page is the gate's word (the page says so).
"""

from __future__ import annotations

import html as htmllib
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

from fusebench.paths import PROJECT_ROOT

#: Where the page goes under the site, and its tab.
VERDICTS = "verdicts"
NAV_VERDICTS = f'<li id="nav-li-verdicts"><a href="{VERDICTS}/index.html">Verdicts</a></li>'
#: Regressions listed per commit before "and N more".
SHOWN = 12
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
class Verdict:
    """One commit judged against the previous measured one on main.

    Attributes:
        machine, base, head: the machine and the two full shas.
        failed: the gate fails (a regression or a new failure).
        counts: ``compare.summary`` of the rows (counts by status).
        flagged: ``(benchmark, params, slowdown, limit, status)`` of each failing row.
        error: why the pair could not be judged (an unreadable file), else empty.
    """

    machine: str
    base: str
    head: str
    failed: bool = False
    counts: str = ""
    flagged: list[tuple] = field(default_factory=list)
    error: str = ""


def measured_line(results_dir: Path, machine: str, root: Path = PROJECT_ROOT,
                  branch: str = "main") -> list[str]:
    """``machine``'s stored commits on ``branch``'s first-parent line, oldest first."""
    import subprocess

    from fusebench.history import results

    out = subprocess.run(["git", "rev-list", "--first-parent", "--reverse", branch], cwd=root,
                         capture_output=True, text=True)
    if out.returncode != 0:
        return []
    stored = {c for c, _ in results.stored_commits(results_dir, machine)}
    return [c for c in out.stdout.split() if c in stored]


def judge_history(results_dir: Path, machine: str, root: Path = PROJECT_ROOT) -> list[Verdict]:
    """The newest :data:`PAIRS` measured commits of ``machine`` on main, each against the previous
    measured one, newest first."""
    from fusebench import config
    from fusebench.errors import UsageError
    from fusebench.history import compare, noise, results, runrecord

    settings = config.load(config.DEFAULT_PATH)
    records = runrecord.records_dir(results_dir)
    history = noise.from_records(records / machine, root)
    reader = results.Reader(results_dir)
    line = measured_line(results_dir, machine, root)[-(PAIRS + 1):]
    loaded: dict[str, object] = {}

    def record(commit: str):
        if commit not in loaded:
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
        v.flagged = [(r.benchmark, r.params, r.slowdown, r.limit, r.status) for r in rows
                     if r.status in compare.FAILING]
        out.append(v)
    return out[::-1]


def graph_link(benchmark: str, params: tuple, machine: str) -> str:
    """The site's graph of one case: ``../index.html#<benchmark>?machine=..&p-backend='..'...``
    (asv keeps parameter values as repr strings)."""
    names = ("backend", "shape", "dtype")
    query = [("machine", machine)] + [(f"p-{k}", repr(v)) for k, v in zip(names, params)]
    return f"../index.html#{benchmark}?" + urllib.parse.urlencode(query, quote_via=urllib.parse.quote)


def page(verdicts: list[Verdict]) -> str:
    """The Verdicts page (no script; every stored string escaped)."""
    esc = htmllib.escape
    body = []
    for machine in dict.fromkeys(v.machine for v in verdicts):
        rows = []
        for v in (v for v in verdicts if v.machine == machine):
            if v.error:
                verdict, detail = "not judged", esc(v.error)
            else:
                verdict = "FAIL" if v.failed else "ok"
                items = "".join(
                    f'<li><a href="{esc(graph_link(b, p, machine))}">{esc(b)} ({esc(", ".join(p))})</a>: '
                    f"{esc(status)}, {s:.3f}x against a limit of {lim:.3f}x</li>"
                    for b, p, s, lim, status in v.flagged[:SHOWN])
                more = f"<li>and {len(v.flagged) - SHOWN} more</li>" if len(v.flagged) > SHOWN else ""
                detail = esc(v.counts) + (f"<ul>{items}{more}</ul>" if items else "")
            rows.append(f"<tr><td><code>{esc(v.head[:8])}</code></td>"
                        f"<td><code>{esc(v.base[:8])}</code></td><td><b>{verdict}</b></td><td>{detail}</td></tr>")
        body.append(f"<h2>{esc(machine)}</h2><table border=\"1\" cellpadding=\"3\" style=\"border-collapse:"
                    "collapse\"><tr><th>commit</th><th>against</th><th>gate</th><th>cases by status</th></tr>"
                    + "".join(rows) + "</table>")
    if not body:
        body.append("<p>No two measured commits on main yet.</p>")
    return ("<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>fusebench verdicts</title></head>\n"
            "<body style=\"font-family:sans-serif\">\n"
            "<p><a href=\"../index.html\">&larr; benchmarks</a></p>\n"
            "<h1>fusebench: what each commit changed, in the gate's words</h1>\n"
            "<p>Each measured commit on main against the previous measured one, judged by the regression "
            "gate (make compare: rounds, the A/A history, contamination). asv's Regressions tab applies "
            "a fixed threshold to the stored medians and can disagree; this page is the gate's verdict.</p>\n"
            + "\n".join(body) + "\n</body></html>\n")


def write_page(html_dir: Path, results_dir: Path, root: Path = PROJECT_ROOT,
               machines: list[str] | None = None) -> Path:
    """``html/verdicts/index.html`` for ``machines`` (default: every one with stored results)."""
    from fusebench.history import results

    machines = results.machines(results_dir) if machines is None else machines
    verdicts = [v for m in machines for v in judge_history(results_dir, m, root)]
    path = html_dir / VERDICTS / "index.html"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(page(verdicts))
    tmp.replace(path)
    return path
