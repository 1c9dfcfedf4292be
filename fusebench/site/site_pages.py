"""fusebench's own pages of the published site (the landing page, Plots, Runs, Verdicts), on jinja2
templates.

The templates (``fusebench/site/templates/``) share ``base.html``: asv's navigation bar (the
same classes and tabs as asv's ``index.html``, the page's own tab active) and asv's stylesheets
(bootstrap, ``asv.css``), so the pages read as the site's. The environment escapes every value by
default (``autoescape=True``): a string from git, a record, a result file or ``machine.json`` is
text, never markup; only HTML this project's code built and escaped itself is passed as
``markupsafe.Markup``. A name a template uses and the caller did not pass is an error
(``StrictUndefined``), not an empty string.

The pages are written while ``asv publish`` runs and moved into the site before its CDN URLs are
rewritten (``fusebench.site.site.rewrite_cdn``): they load bootstrap's stylesheet from the same
URL as asv's page, so they get its local copy too (or keep the CDN's with ``CDN=1``).
"""

from __future__ import annotations

import html as htmllib
import json
from dataclasses import dataclass
from pathlib import Path

import jinja2

from fusebench.machine import is_cpu

#: asv 0.6.6's stylesheet URL (``fusebench.site.site.ASSETS``; rewritten to the local copy).
BOOTSTRAP_CSS = "https://cdn.jsdelivr.net/npm/bootstrap@3.1.1/dist/css/bootstrap.min.css"


#: The site's first page, fusebench's answer (``fusebench.site.landing``), and asv's own page
#: (its benchmark grid, list, regressions and graphs), moved there from ``index.html``.
LANDING = "index.html"
ASV_PAGE = "asv.html"


@dataclass(frozen=True)
class Tab:
    """One tab of the navigation bar: asv's ``nav-li-<id>`` and its address from the site's root."""

    id: str
    href: str
    label: str


#: The landing page's tab, asv's tabs, then fusebench's (``fusebench.site.site`` adds the first and
#: the last three to asv's page).
TABS = (
    Tab("overview", LANDING, "Overview"),
    Tab("", f"{ASV_PAGE}#/", "Benchmark grid"),
    Tab("summarylist", f"{ASV_PAGE}#/summarylist", "Benchmark list"),
    Tab("regressions", f"{ASV_PAGE}#/regressions", "Regressions"),
    Tab("plots", "plots/index.html", "Plots"),
    Tab("runs", "runs/index.html", "Runs"),
    Tab("verdicts", "verdicts/index.html", "Verdicts"),
)

_ENV = jinja2.Environment(loader=jinja2.PackageLoader("fusebench.site", "templates"),
                          autoescape=True, undefined=jinja2.StrictUndefined,
                          keep_trailing_newline=True)


def _context(active: str, title: str, heading: str, root: str) -> dict:
    if active not in {t.id for t in TABS}:
        raise ValueError(f"no tab {active!r}")
    return {"tabs": TABS, "active": active, "title": title, "heading": heading, "root": root,
            "bootstrap_css": BOOTSTRAP_CSS}


def render(template: str, active: str, title: str, heading: str, root: str = "../", **context) -> str:
    """The page ``template`` (a file of ``templates/``) with the navigation bar, tab ``active``
    (a :data:`TABS` id) highlighted; ``root``: the path from the page to the site's root (``"../"``
    for a page one folder below it, ``""`` for the landing page)."""
    return _ENV.get_template(template).render(**_context(active, title, heading, root), **context)


def render_to(path: Path, template: str, active: str, title: str, heading: str, root: str = "../",
              **context) -> None:
    """:func:`render` written to ``path`` as it is rendered: a page of thousands of runs is never
    held whole, and an iterator in ``context`` is read one item at a time."""
    stream = _ENV.get_template(template).stream(**_context(active, title, heading, root), **context)
    stream.enable_buffering(64)
    with open(path, "w", encoding="utf-8") as f:
        stream.dump(f)


def machine_order(machines) -> list[str]:
    """GPU machines first, by name, then the CPU ones: a reader opens a page for the GPUs' figures."""
    return sorted(set(machines), key=lambda m: (is_cpu(m), m))


def gpu_title(results_dir: Path, machine: str) -> str:
    """A machine's heading: its GPU as ``machine.json`` names it, then the machine (``NVIDIA H200
    (h200)``); the machine alone where the file or its ``gpu`` field is missing or not text, and
    ``CPU (cpu-x86_64)`` for a CPU machine. The text is escaped by the templates."""
    if is_cpu(machine):
        return f"CPU ({machine})"
    try:
        gpu = json.loads((results_dir / machine / "machine.json").read_text()).get("gpu")
    except (OSError, ValueError, AttributeError, RecursionError):
        gpu = None
    return f"{gpu} ({machine})" if isinstance(gpu, str) and gpu.strip() else machine


def table_html(table) -> str:
    """A :class:`fusebench.report.summary.CeilingTable` as an HTML table: the same cells as its Markdown
    (``CeilingTable.cell_text``, bold as ``<b>``), a case not timed carrying its reason as a tooltip
    too, the numbered notes and the marks' legend under it."""
    esc = htmllib.escape

    def td(c) -> str:
        text = esc(table.cell_text(c)).replace("**", "")
        text = f"<b>{text}</b>" if c.best else text
        title = f' title="{esc(c.note)}"' if c.note else ""
        return f'<td style="text-align:right"{title}>{text}</td>'

    head = "".join(f"<th>{esc(h)}</th>" for h in table.header)
    rows = "".join(f"<tr><td>{esc(label)}</td>{''.join(td(c) for c in cells)}</tr>"
                   for label, cells in table.rows)
    notes = "".join(f"<li>{esc(n)}</li>" for n in table.notes)
    return (f"<p>{esc(table.title)}</p><table class=\"fb-table\" border=\"1\" cellpadding=\"3\" "
            f"style=\"border-collapse:collapse\"><tr>{head}</tr>{rows}</table>"
            + (f"<ol>{notes}</ol>" if notes else "")
            + (f"<p>{esc(table.legend)}</p>" if table.legend else ""))


def energy_html(tables) -> str:
    """:class:`fusebench.report.summary.EnergyTable` s as HTML tables under the energy intro
    (``summary.ENERGY_INTRO``); empty without a table."""
    from fusebench.report.summary import ENERGY_INTRO

    esc = htmllib.escape
    if not tables:
        return ""
    out = [f"<p>{esc(ENERGY_INTRO)}</p>"]
    for t in tables:
        head = "".join(f"<th>{esc(h)}</th>" for h in t.header)
        rows = "".join(f"<tr><td>{esc(row[0])}</td>"
                       + "".join(f'<td style="text-align:right">{esc(c)}</td>' for c in row[1:]) + "</tr>"
                       for row in t.rows)
        out.append(f"<p>{esc(t.title)}</p><table class=\"fb-table\" border=\"1\" cellpadding=\"3\" "
                   f"style=\"border-collapse:collapse\"><tr>{head}</tr>{rows}</table>"
                   + (f"<p>{esc(t.legend)}</p>" if t.legend else ""))
    return "".join(out)
