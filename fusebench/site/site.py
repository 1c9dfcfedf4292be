"""The published asv site, made to work with no internet access, with the plots linked.

asv 0.6.6's ``index.html`` loads jQuery, flot (and two plugins), stupidtable, blueimp-md5 and
bootstrap from CDNs; offline (GPU clusters often are) its ``onerror`` handlers send the reader to
``error.html``. After ``asv publish`` this module:

1. installs those libraries with ``npm ci`` from ``site/package.json`` + ``site/package-lock.json``
   (exact versions) into ``site/node_modules`` (ignored by git; skipped when what is installed
   already matches the lock file);
2. copies the files the site needs into ``html/vendor/<package>/<path>`` (a stylesheet's relative
   ``url(...)`` files too: bootstrap's glyphicon fonts);
3. rewrites every ``<script src>`` / ``<link href>`` that points at a CDN to the local copy. The
   ``integrity`` hash is kept where the local file is byte-identical to the CDN's (jQuery,
   bootstrap, orderBars, md5: checked by the browser) and dropped where the npm release ships a
   different file (:data:`ASSETS` says which and why). An external URL not in :data:`ASSETS` is an
   error: the site would still need the internet;
4. renders the plots (``fusebench.report.plots``) into ``html/plots/`` with an index page, and adds a
   "Plots" tab to asv's navigation bar (this page, the runs and verdicts pages are built while
   ``asv publish`` runs, beside the folder it empties first, and moved in once it is done);
5. fixes what the site shows first (``fusebench.site.site_fixes``): graphs open at the op's headline
   shape, tile titles carry units, bars against a category axis are all drawn.
6. writes ``html/runs/index.html`` from the run records (``fusebench.storage.runrecord``: rounds, copy
   ceiling per round, phases, contaminated and noisy cases, % of the copy ceiling and energy per
   call per case), with a "Runs" tab;
7. names every stored result asv will not draw (``fusebench.site.drawable``).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import html as htmllib
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from fusebench.paths import PROJECT_ROOT, real_folder

#: The npm project whose dependencies the site loads.
SITE_DIR = PROJECT_ROOT / "site"
#: Where in the published site the local copies go.
VENDOR = "vendor"
#: Where in the published site the plots go.
PLOTS = "plots"


class SiteError(Exception):
    """The offline site cannot be built (npm missing or failing, an unknown CDN URL); one line."""


@dataclass(frozen=True)
class Asset:
    """A CDN file asv's page loads, and the file of an npm package that replaces it.

    Attributes:
        url: the URL exactly as in asv's ``www/index.html``.
        package: npm package name (version pinned in ``site/package-lock.json``).
        path: the file inside the package.
        note: why the local file differs from the CDN's, where it does (integrity then dropped).
    """

    url: str
    package: str
    path: str
    note: str = ""

    @property
    def local(self) -> str:
        """The file's path in the published site, relative to its root."""
        return f"{VENDOR}/{self.package}/{self.path}"


_FLOT = "the same flot 0.8.3 release; npm ships it unminified (cdnjs minified it)"
#: Every external file asv 0.6.6's ``index.html`` loads (checked by tests against the installed asv).
ASSETS: tuple[Asset, ...] = (
    Asset("https://code.jquery.com/jquery-3.3.1.min.js", "jquery", "dist/jquery.min.js"),
    Asset("https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.min.js", "flot",
          "jquery.flot.js", _FLOT),
    Asset("https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.time.min.js", "flot",
          "jquery.flot.time.js", _FLOT),
    Asset("https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.selection.min.js", "flot",
          "jquery.flot.selection.js", _FLOT),
    Asset("https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.categories.min.js", "flot",
          "jquery.flot.categories.js", _FLOT),
    Asset("https://cdn.jsdelivr.net/npm/flot-orderbars@1.0.0/js/jquery.flot.orderBars.js",
          "flot-orderbars", "js/jquery.flot.orderBars.js"),
    Asset("https://cdnjs.cloudflare.com/ajax/libs/stupidtable/1.0.1/stupidtable.min.js",
          "stupid-table-plugin", "stupidtable.min.js",
          "stupidtable 1.0.1 was never published to npm; 1.1.3 (its first npm release) has the same "
          "stupidtable()/stupidsort() API"),
    Asset("https://cdnjs.cloudflare.com/ajax/libs/blueimp-md5/2.19.0/js/md5.min.js", "blueimp-md5",
          "js/md5.min.js"),
    Asset("https://cdn.jsdelivr.net/npm/bootstrap@3.1.1/dist/js/bootstrap.min.js", "bootstrap",
          "dist/js/bootstrap.min.js"),
    Asset("https://cdn.jsdelivr.net/npm/bootstrap@3.1.1/dist/css/bootstrap.min.css", "bootstrap",
          "dist/css/bootstrap.min.css"),
)

_TAG = re.compile(r"<(script|link)\b[^>]*>", re.IGNORECASE)
_URL_ATTR = re.compile(r'\b(src|href)\s*=\s*"([^"]*)"', re.IGNORECASE)
_INTEGRITY = re.compile(r'\s+integrity\s*=\s*"([^"]*)"', re.IGNORECASE)
_CSS_URL = re.compile(r"url\(\s*['\"]?([^'\")]+)['\"]?\s*\)")


def is_external(url: str) -> bool:
    """True for a URL on another host (``https://…``, ``http://…``, ``//host/…``)."""
    return bool(re.match(r"^(https?:)?//", url.strip(), re.IGNORECASE))


def external_loads(page: str) -> list[str]:
    """URLs of the scripts and stylesheets ``page`` (HTML text) loads from other hosts.

    Only ``<script src>`` and ``<link href>`` count: ``<a href>`` links load nothing.
    """
    out = []
    for tag in _TAG.finditer(page):
        for _, url in _URL_ATTR.findall(tag.group(0)):
            if is_external(htmllib.unescape(url)):
                out.append(htmllib.unescape(url))
    return out


def sri_matches(integrity: str, data: bytes) -> bool:
    """True when ``data`` has one of the Subresource Integrity hashes (``sha256-<base64> ...``)."""
    for item in integrity.split():
        alg, _, digest = item.partition("-")
        if alg.lower() in ("sha256", "sha384", "sha512"):
            if base64.b64encode(hashlib.new(alg.lower(), data).digest()).decode() == digest:
                return True
    return False


def installed_matches(site_dir: Path = SITE_DIR) -> bool:
    """True when ``site_dir/node_modules`` holds exactly the versions of ``package-lock.json``.

    Reads npm's own record of what it installed, ``node_modules/.package-lock.json``.
    """
    try:
        want = json.loads((site_dir / "package-lock.json").read_text())["packages"]
        have = json.loads((site_dir / "node_modules" / ".package-lock.json").read_text())["packages"]
    except (OSError, ValueError, KeyError):
        return False
    want = {k: v.get("version") for k, v in want.items() if k}
    have = {k: v.get("version") for k, v in have.items() if k}
    return want == have and all((site_dir / k).is_dir() for k in want)


def npm_install(site_dir: Path = SITE_DIR, npm: str | None = None) -> Path:
    """``npm ci`` in ``site_dir`` unless what is installed matches the lock file.

    Returns the ``node_modules`` folder.

    Raises:
        SiteError: npm is not installed, or ``npm ci`` failed (its last error line quoted).
    """
    modules = site_dir / "node_modules"
    if installed_matches(site_dir):
        return modules
    npm = npm or shutil.which("npm")
    if not npm:
        raise SiteError("npm not found: the site's scripts (jQuery, flot, bootstrap) cannot be "
                        "installed locally; install Node.js and npm")
    try:
        out = subprocess.run([npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund"], cwd=site_dir,
                             capture_output=True, text=True)
    except OSError as exc:
        raise SiteError(f"cannot run {npm}: {exc}") from None
    if out.returncode != 0:
        lines = [ln for ln in (out.stderr + out.stdout).splitlines() if ln.strip()]
        raise SiteError(f"npm ci failed in {site_dir} (exit {out.returncode}): "
                        f"{lines[-1] if lines else 'no output'}")
    return modules


def _normalise(path: str) -> str:
    """``"dist/css/../fonts/a.woff"`` -> ``"dist/fonts/a.woff"`` (POSIX, relative)."""
    parts: list[str] = []
    for part in path.split("/"):
        if part == "..":
            if parts:
                parts.pop()
        elif part not in ("", "."):
            parts.append(part)
    return "/".join(parts)


def copy_vendor(modules: Path, html_dir: Path, assets: tuple[Asset, ...] = ASSETS) -> list[Path]:
    """Copy each asset (and the files a stylesheet's relative ``url(...)`` names) into the site.

    Returns the files written.

    Raises:
        SiteError: a file is missing from the installed packages.
    """
    written = []
    todo = [(a.package, a.path) for a in assets]
    seen = set()
    while todo:
        package, path = todo.pop()
        if (package, path) in seen:
            continue
        seen.add((package, path))
        src = modules / package / path
        if not src.is_file():
            raise SiteError(f"{src} is missing: is site/package-lock.json in step with "
                            "fusebench/site/site.py?")
        dst = html_dir / VENDOR / package / path
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)
        written.append(dst)
        if src.suffix == ".css":
            for ref in _CSS_URL.findall(src.read_text(errors="replace")):
                ref = re.split(r"[?#]", ref)[0]
                if ref and not is_external(ref) and not ref.startswith(("data:", "/")):
                    todo.append((package, _normalise(f"{Path(path).parent.as_posix()}/{ref}")))
    return written


def rewrite_page(page: str, root_prefix: str, html_dir: Path, assets: tuple[Asset, ...] = ASSETS
                 ) -> tuple[str, list[str]]:
    """``page`` with every CDN ``<script src>`` / ``<link href>`` pointing at the local copy.

    Args:
        page: HTML text.
        root_prefix: relative path from the page to the site root (``""`` or ``"../"``).
        html_dir: the site root, where :func:`copy_vendor` put the files (for the integrity check).

    Returns ``(new page, URLs rewritten)``.

    Raises:
        SiteError: the page loads an external URL that :data:`ASSETS` does not know.
    """
    by_url = {a.url: a for a in assets}
    rewritten = []

    def fix(tag_match: re.Match) -> str:
        tag = tag_match.group(0)
        for _, url in _URL_ATTR.findall(tag):
            plain = htmllib.unescape(url)
            if not is_external(plain):
                continue
            asset = by_url.get(plain)
            if asset is None:
                raise SiteError(f"the site loads {plain}, which fusebench/site/site.py has no local "
                                "copy of (add it to ASSETS and site/package.json)")
            tag = tag.replace(f'"{url}"', f'"{root_prefix}{asset.local}"', 1)
            integrity = _INTEGRITY.search(tag)
            local = html_dir / _normalise(asset.local)
            if integrity and not (local.is_file() and sri_matches(integrity.group(1), local.read_bytes())):
                tag = tag.replace(integrity.group(0), "", 1)
            rewritten.append(plain)
        return tag

    return _TAG.sub(fix, page), rewritten


def rewrite_cdn(html_dir: Path, assets: tuple[Asset, ...] = ASSETS) -> list[str]:
    """Rewrite every ``*.html`` under ``html_dir`` in place (see :func:`rewrite_page`).

    Returns the URLs rewritten, over all pages.

    Raises:
        SiteError: a page loads an unknown external URL (no page is changed then).
    """
    pages = sorted(html_dir.rglob("*.html"))
    new = {}
    urls = []
    for page in pages:
        depth = len(page.relative_to(html_dir).parts) - 1
        text, done = rewrite_page(page.read_text(), "../" * depth, html_dir, assets)
        new[page] = text
        urls += done
    for page, text in new.items():
        page.write_text(text)
    return urls


#: Where in the published site the run records' page goes.
RUNS = "runs"
#: The tabs added to asv's navigation bar, after "Regressions".
NAV_ANCHOR = '<li id="nav-li-regressions">'
NAV_PLOTS = f'<li id="nav-li-plots"><a href="{PLOTS}/index.html">Plots</a></li>'
NAV_RUNS = f'<li id="nav-li-runs"><a href="{RUNS}/index.html">Runs</a></li>'


def add_tab(html_dir: Path, tab: str) -> None:
    """Add ``tab`` (an ``<li>``) to asv's navigation bar in ``index.html``, after "Regressions"
    and the tabs added before it (once).

    Raises:
        SiteError: asv's page has no "Regressions" tab to put it after.
    """
    index = html_dir / "index.html"
    page = index.read_text()
    if tab in page:
        return
    start = page.find(NAV_ANCHOR)
    end = page.find("</li>", start)
    if start < 0 or end < 0:
        raise SiteError(f"{index} has no {NAV_ANCHOR!r} to add a tab after (asv changed?)")
    end += len("</li>")
    for added in (NAV_PLOTS, NAV_RUNS):
        if page.startswith("\n\t" + added, end):
            end += len("\n\t" + added)
    index.write_text(page[:end] + "\n\t" + tab + page[end:])


#: The landing page's tab, first in asv's navigation bar (``fusebench.site.landing``).
NAV_OVERVIEW = '<li id="nav-li-overview"><a href="index.html">Overview</a></li>'
#: asv's first tab, "Benchmark grid".
NAV_FIRST = '<li id="nav-li-"'
#: Where the landing page is built before asv's ``index.html`` makes way for it.
LANDING_STAGED = "fusebench-landing.html"


def add_overview_tab(html_dir: Path) -> None:
    """Add the landing page's tab before asv's first tab in ``index.html`` (once).

    Raises:
        SiteError: asv's page has no "Benchmark grid" tab.
    """
    index = html_dir / "index.html"
    page = index.read_text()
    if NAV_OVERVIEW in page:
        return
    at = page.find(NAV_FIRST)
    if at < 0:
        raise SiteError(f"{index} has no {NAV_FIRST!r} tab to add the overview before (asv changed?)")
    index.write_text(page[:at] + NAV_OVERVIEW + "\n\t" + page[at:])


def add_plots_tab(html_dir: Path) -> None:
    """Add a "Plots" tab linking ``<html_dir>/plots/index.html`` to asv's ``index.html`` (once)."""
    add_tab(html_dir, NAV_PLOTS)


def records_newest_first(records: list[tuple[str, Path]],
                         root: Path = PROJECT_ROOT) -> list[tuple[str, Path]]:
    """``[(machine, record path)]`` by machine, then newest commit first: the committer time of the
    commit the file is named after (``<sha8>.json.xz``) in the repository at ``root``; records of
    commits git does not know (or without git) come after, newest file first. A checkout's files all
    have about the same time, so the commit's, not the file's, orders a fresh clone's page."""
    from fusebench import git
    from fusebench.storage import runrecord

    by_prefix = git.commit_times(root, prefix=8)

    def key(mp: tuple[str, Path]):
        machine, path = mp
        when = by_prefix.get(runrecord.sha8(path))
        return (machine, when is None, -(when or 0), -path.stat().st_mtime, path.name)

    return sorted(records, key=key)


def write_runs_page(html_dir: Path, records_folder: Path, reader=None) -> Path:
    """``html/runs/index.html`` (``templates/runs.html``): each stored run record's summary
    (``summary.run_lines``), its ops' % of the copy ceiling per backend
    (``summary.ceiling_table``) and, where measured, energy per call (``summary.energy_tables``),
    newest commit first per machine, GPU machines first, under an index of them (each run's
    anchor ``<machine>-<sha8>``); no script. An unreadable record
    (``runrecord.read``: refused or broken) is named on the page and noted in ``reader`` (a
    ``results.Reader``: publish then names it and exits 2)."""
    from markupsafe import Markup

    from fusebench.errors import UsageError
    from fusebench.report import summary
    from fusebench.site import site_pages
    from fusebench.storage import runrecord

    ordered = records_newest_first(runrecord.all_records(records_folder))
    rank = {m: i for i, m in enumerate(site_pages.machine_order(m for m, _ in ordered))}

    def runs():  # one record read at a time, its section written before the next is read
        for machine, path in sorted(ordered, key=lambda mp: rank[mp[0]]):  # stable: newest first kept
            tables, energy = [], []
            try:
                sweep = runrecord.read(path)
                lines = summary.run_lines(sweep)
                tables = [t for op in dict.fromkeys(r.op for r in sweep.records)
                          if (t := summary.ceiling_table(sweep, op)) is not None]
                energy = summary.energy_tables(sweep)
            except (OSError, ValueError, TypeError, KeyError, UsageError) as exc:
                lines = [f"unreadable record: {type(exc).__name__}: {exc}"]
                if reader is not None:
                    reader._note(path, str(exc).removeprefix(f"cannot read run record {path}: "))
            # table_html and energy_html escape every stored string themselves (tests/test_site.py)
            yield {"machine": machine, "commit": runrecord.sha8(path), "lines": lines,
                   "anchor": f"{machine}-{runrecord.sha8(path)}",
                   "tables": Markup("".join(site_pages.table_html(t) for t in tables)
                                    + site_pages.energy_html(energy))}

    index = [{"machine": m, "commits": [runrecord.sha8(p) for mm, p in ordered if mm == m]}
             for m in sorted(rank, key=rank.get)]
    page = html_dir / RUNS / "index.html"
    page.parent.mkdir(parents=True, exist_ok=True)
    site_pages.render_to(page, "runs.html", "runs", "runs", "Run records: rounds, ceilings, contamination",
                         runs=runs(), index=index)
    return page


def write_plots_page(html_dir: Path, pngs: list[Path], unreadable: list | None = None,
                     results_dir: Path | None = None) -> Path:
    """``html/plots/index.html`` (``templates/plots.html``): every PNG under ``html/plots/``, one
    section per machine titled by its GPU (``site_pages.gpu_title``, from ``results_dir``), GPU
    machines first; a CPU machine's section says what a host without a GPU does not measure; no
    script.

    ``unreadable``: the stored files that could not be read (``fusebench.storage.results.Unreadable``),
    listed at the top so a reader knows what the plots leave out.
    """
    from fusebench.site import site_pages

    plots_dir = html_dir / PLOTS
    by_machine: dict[str, list[Path]] = {}
    for png in sorted(pngs):
        by_machine.setdefault(png.parent.name, []).append(png)
    machines = [{"name": m, "cpu": site_pages.is_cpu(m),
                 "title": site_pages.gpu_title(results_dir, m) if results_dir else m,
                 "pngs": [{"src": png.relative_to(plots_dir).as_posix(), "name": png.stem}
                          for png in by_machine[m]]}
                for m in site_pages.machine_order(by_machine)]
    page = plots_dir / "index.html"
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(site_pages.render("plots.html", "plots", "plots",
                                      "Bandwidth, speedup and energy per GPU", machines=machines,
                                      unreadable=[str(u) for u in unreadable or []]))
    return page


def publish(results_dir: Path, html_dir: Path, ops, *, cdn: bool = False, python: str = sys.executable,
             site_dir: Path = SITE_DIR, strict: bool = False) -> int:
    """``asv publish`` of every stored result into ``html_dir``, then made offline, plots and the
    runs page added; every stored result asv will not draw is named (``fusebench.site.drawable``).

    Args:
        ops: the :class:`~fusebench.registry.Op` objects of the stored results (plots per op, each
            graph opened at its op's headline shape), handed over by the caller.
        cdn: keep asv's CDN URLs (the site then needs internet) instead of failing when the local
            copies cannot be installed; a warning says so.
        strict: a stored result that will not be drawn is an error (exit 1), not a warning.

    The site is built in a staging folder and swapped in whole at the end
    (:func:`fusebench.storage.transaction.swap_in`): a failed or killed publish leaves ``html_dir``
    as it was. asv's pages are built from a checked copy of the results
    (:func:`fusebench.storage.untrusted.checked_copy`): a stored file whose names or fields fail
    their checks (markup in a benchmark name or a machine field) is named and left out, as is a
    benchmark of ``benchmarks.json`` that fails.

    Returns 0 on success, asv's exit status when ``asv publish`` failed, 1 when the offline copies
    could not be installed (npm missing or failing) and ``cdn`` is False,
    or when ``strict`` and some result will not be drawn; 2 when a stored file could not be read
    or was refused, or a git tag is not a plain name (each named on stderr; the site is published
    without them: bad input, never 1), and when ``benchmarks.json`` is missing or not asv's at
    all (nothing published).
    """
    from fusebench import tmpdirs
    from fusebench.site import drawable, site_fixes, site_readable
    from fusebench.storage import results, transaction, untrusted
    from fusebench.storage.results import report_unreadable

    ops = tuple(ops)
    from fusebench.storage import runrecord

    real_folder(html_dir)  # html/ of the checkout a link (a commit may carry one): refused at once
    transaction.settle(results_dir, (runrecord.records_dir(results_dir),), "publish")  # before any read
    try:
        undrawn = drawable.undrawn(results_dir)
    except RuntimeError as exc:
        print(f"publish: warning: cannot tell which results the site draws: {exc}", file=sys.stderr)
        undrawn = []
    for line in drawable.report(undrawn, results_dir):
        print(line, file=sys.stderr)

    with tmpdirs.scratch("publish") as tmp:
        checked = tmp / "results"
        refused = untrusted.checked_copy(results_dir, checked)
        # the files asv cannot load at all: named by report_unreadable, not again here
        named = {u.path for u in results.Reader(results_dir, "publish", checked=False).check()}
        for exc in (only_refused := [exc for exc in refused if exc.path not in named]):
            print(f"publish: error: {exc}; left out of the site", file=sys.stderr)
        if not (checked / "benchmarks.json").is_file():
            print(f"publish: error: no usable {results_dir / 'benchmarks.json'}; nothing published",
                  file=sys.stderr)
            return 2
        with site_readable.shown_results(checked) as (shown, left_out):
            if left_out:
                print(f"publish: {', '.join(left_out)} left out of the site: a CPU's host-clock figures "
                      "would join the GPU machines' history on its tiles (their runs are in the Runs tab, "
                      "their plots in plots/)", file=sys.stderr)
            real_html = html_dir.resolve()  # given outside the checkout, a link to a served folder
            stage = transaction.staging_folder(real_html)
            try:
                status = _build(shown, results_dir, stage, ops, cdn, python, site_dir)
                if status is None:
                    return 1
                if status[0] != 0:
                    return status[0]
                bad_tags = site_fixes.drop_unsafe_tags(stage)  # asv's page writes tag names as HTML
                for tag in bad_tags:
                    print(f"publish: error: git tag {tag} is not a plain name (letters, digits and "
                          ". _ / + = , @ -); left out of the site", file=sys.stderr)
                transaction.swap_in(stage, real_html)
            finally:
                shutil.rmtree(stage, ignore_errors=True)
    reader = status[1]
    # a file refused above (or in a machine folder refused whole) is named once, as refused
    gone = {exc.path for exc in refused} | {exc.path.parent for exc in refused
                                            if exc.path.name == "machine.json"}
    reader.unreadable[:] = [u for u in reader.unreadable
                            if u.path in named or not (u.path in gone or u.path.parent in gone)]
    unreadable = report_unreadable(reader, "publish", count=not only_refused)
    if only_refused:  # never "every stored file was read" after naming them
        print(f"publish: {len(only_refused)} stored file(s) or benchmark(s) refused (named above) and left "
              "out of the site", file=sys.stderr)
    if strict and undrawn:
        print(f"publish: error: STRICT=1 and {len(undrawn)} stored result(s) will not be drawn",
              file=sys.stderr)
        return 1
    return 2 if refused or bad_tags else unreadable  # bad input; 1 is a regression


@contextlib.contextmanager
def _stopping_asv_on_error():
    """An exception (Ctrl-C, SIGTERM) inside the block stops ``asv publish`` at once, before the
    thread pool waits for it (``store.stop_publishing``)."""
    from fusebench.asv import store

    try:
        yield
    except BaseException:
        store.stop_publishing()
        raise


def _build(checked: Path, results_dir: Path, html_dir: Path, ops, cdn: bool, python: str, site_dir: Path):
    """Build the whole site into ``html_dir`` (a staging folder): asv's pages from ``checked``
    (the checked copy of ``results_dir``), the plots and runs pages from ``results_dir``.
    Returns ``(status, reader)``, or None when the offline copies failed (named).

    ``asv publish`` (a subprocess that first empties ``html_dir``) runs while the plots, runs and
    verdicts pages, which read nothing of asv's, are built beside it and then moved in."""
    from concurrent.futures import ThreadPoolExecutor

    from fusebench import tmpdirs
    from fusebench.asv import store
    from fusebench.report import plots
    from fusebench.site import landing, site_fixes, site_pages, site_readable, verdicts
    from fusebench.storage import results, runrecord

    with tmpdirs.scratch("side", html_dir.parent) as side, ThreadPoolExecutor(1) as asv, \
            _stopping_asv_on_error():
        published = asv.submit(store.publish, checked, html_dir, python=python)
        reader = results.Reader(results_dir)
        pngs = plots.write_plots(results_dir, side / PLOTS, list(ops), reader=reader)
        write_plots_page(side, pngs, reader.check(), results_dir)
        write_runs_page(side, runrecord.records_dir(results_dir), reader)
        # the gate's verdicts of the machines the site shows (read from results_dir, beside its records),
        # on the Verdicts page and the landing page
        shown = results.machines(checked)
        judged = verdicts.judge(results_dir, shown, ops=ops)
        verdicts.write_page(side, results_dir, machines=shown, ops=ops, judged=judged)
        landing.write_page(side, results_dir, shown, ops, judged, name=LANDING_STAGED)
        status = published.result()
        if status != 0:
            return status, None
        # moved in before the CDN URLs are rewritten: they load asv's stylesheet, and get its copy
        for name in (PLOTS, RUNS, verdicts.VERDICTS, LANDING_STAGED):
            os.replace(side / name, html_dir / name)
        try:
            copy_vendor(npm_install(site_dir), html_dir)
            rewrite_cdn(html_dir)
        except SiteError as exc:
            if not cdn:
                print(f"publish: error: {exc} (or publish with CDN=1: the site then needs internet)",
                      file=sys.stderr)
                return None
            print(f"publish: warning: {exc}; the site loads its scripts from CDNs and needs internet",
                  file=sys.stderr)
    add_plots_tab(html_dir)
    site_fixes.apply(html_dir, ops)  # headline shape first, units in titles, bars on category axes
    site_readable.apply(html_dir)  # file:// explained, the legend off the plot
    add_tab(html_dir, NAV_RUNS)
    add_tab(html_dir, verdicts.NAV_VERDICTS)
    add_overview_tab(html_dir)
    # asv's page makes way for the landing page; its scripts read index.json, not their page's name
    os.replace(html_dir / "index.html", html_dir / site_pages.ASV_PAGE)
    os.replace(html_dir / LANDING_STAGED, html_dir / site_pages.LANDING)
    feed_to_asv_page(html_dir)
    return 0, reader


def feed_to_asv_page(html_dir: Path) -> None:
    """Point the regressions feed's links (``regressions.xml``: ``index.html#<graph>``) at asv's
    page, where the graphs now are (the landing page also sends such an address on)."""
    from fusebench.site.site_pages import ASV_PAGE

    feed = html_dir / "regressions.xml"
    if feed.is_file():
        feed.write_text(feed.read_text().replace('href="index.html#', f'href="{ASV_PAGE}#'))
