"""What the published site needs so that what it shows can be read and believed.

* **A CPU's results stay off a site that has a GPU machine's.** asv's front page draws one
  summary tile per benchmark from every machine's results; a CPU run's host-clock figures (a
  developer's ``make bench`` on a laptop, ``results/cpu-*``) joined the H200 history there and a
  tile dropped at the newest commit. When both kinds are stored, the site is published from the
  GPU machines' results only (:func:`shown_results`), and ``make publish`` says so; a CPU's own
  results alone are published as they are.
* **A page opened from the file system says how to open it.** asv's page reads its data files
  with requests a browser refuses on ``file://``, and it then showed asv's "active internet
  connection" message although the site works offline when served. ``index.html`` now sends a
  ``file://`` reader to an error page that says how to serve it (:func:`explain_file_urls`).
* **A graph opens with its legend beside the plot.** asv draws the legend inside the plot, over the
  lines (eight backends or more on one graph). It is drawn in a "legend" panel of the left column
  under the plot settings, never over the plot; the ``legend`` button hides it (the address then
  says ``show-legend=false``) and shows it again (:func:`legend_beside_the_plot`).
"""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path
from typing import Iterator

from fusebench import tmpdirs
from fusebench.machine import is_cpu

#: What error.html says instead of asv's "active internet connection" paragraph.
ERROR_TEXT = r"""<p>
      Opened from the file system (a <code>file://</code> address)? Browsers do not let this page
      read its data files there. Serve the site and open it over http:
      <code>make preview</code> in the checkout (a site in its <code>html/</code>), else
      <code id="fusebench-serve">python -m fusebench preview --html FOLDER</code><span
      id="fusebench-folder"> (FOLDER: the one this page is in)</span>, then <a href="http://localhost:8080">http://localhost:8080</a>.
    </p>
    <script>
      // the folder of this page, quoted for a POSIX shell where it needs it
      if (window.location.protocol === "file:") {
        var folder = decodeURIComponent(window.location.pathname).replace(/[^\/]*$/, "");
        if (!/^[A-Za-z0-9_.\/-]+$/.test(folder)) folder = "'" + folder.replace(/'/g, "'\\''") + "'";
        document.getElementById("fusebench-serve").textContent =
          "python -m fusebench preview --html " + folder;
        document.getElementById("fusebench-folder").textContent = "";
      }
    </script>
    <p>
      Served over http and still here: a script did not load. A site published with
      <code>make publish CDN=1</code> loads them from CDNs and needs internet; <code>make publish</code>
      serves them from <code>html/vendor/</code>.
    </p>"""
ASV_ERROR_PARAGRAPH = "Make sure you have an active internet connection"
FILE_CHECK = ('<script>if (window.location.protocol === "file:") '
              '{ window.location.replace("error.html"); }</script>')
#: ``(asv 0.6.6's graphdisplay.js text, what replaces it)``, each found exactly once. flot draws the
#: legend into the panel :data:`LEGEND_PANEL`, not onto the plot (flot's ``legend.container``); an
#: address without ``show-legend`` shows it (asv kept the last graph's choice while its button said
#: shown).
LEGEND_JS = (
    ("        else {\n            show_legend_button.addClass('active');\n        }\n",
     "        else {\n            show_legend = true;  // fusebench: no show-legend, the legend shown\n"
     "            show_legend_button.addClass('active');\n        }\n"),
    ("                show: show_legend,\n                position: \"nw\",\n",
     "                show: show_legend,\n                position: \"nw\",\n"
     "                // fusebench: into the left column's legend panel, shown only with the legend\n"
     "                container: $('#fusebench-legend').toggle(show_legend).find('.panel-body'),\n"),
)
#: The left column's panel the legend is drawn into (hidden with the legend).
LEGEND_PANEL = """        <div id="fusebench-legend" class="panel panel-default">
          <div class="panel-heading">
            legend
          </div>
          <div class="panel-body" style="padding: 4px; overflow-x: auto"></div>
        </div>
"""
#: The end of asv 0.6.6's left column of the graph page (``index.html``): the panel goes before it.
LEGEND_PANEL_ANCHOR = """      </div>
      <div style="position: absolute; left: 220px; top: 60px; bottom: 10px; right: 20px;">
"""


@contextlib.contextmanager
def shown_results(results_dir: Path) -> Iterator[tuple[Path, list[str]]]:
    """The results folder the site is published from, and the machines left out of it.

    With a GPU machine and a CPU machine stored, a temporary copy of ``results_dir`` without the
    CPU machines' folders (asv reads only; the copy is removed on exit); otherwise
    ``results_dir`` itself and no machine left out.
    """
    machines = sorted(p.parent.name for p in results_dir.glob("*/machine.json"))
    cpus = [m for m in machines if is_cpu(m)]
    if not cpus or len(cpus) == len(machines):
        yield results_dir, []
        return
    with tmpdirs.scratch("site") as tmp:  # removed on every exit path, a SIGKILL's by the next run
        shown = tmp / "results"
        shown.mkdir()
        for entry in results_dir.iterdir():
            if entry.is_symlink() or (entry.is_dir() and entry.name in cpus):
                continue
            if entry.is_dir():
                shutil.copytree(entry, shown / entry.name, symlinks=True)
            elif entry.is_file():
                shutil.copy2(entry, shown / entry.name)
        yield shown, cpus


def explain_file_urls(html_dir: Path) -> bool:
    """Make ``error.html`` say how to open the site, and send a ``file://`` reader of
    ``index.html`` there before asv's scripts try to load. Returns True when a page changed."""
    changed = False
    error = html_dir / "error.html"
    if error.is_file():
        page = error.read_text()
        start = page.find("<p>")
        end = page.find("</p>", start) + len("</p>")
        if start >= 0 and ASV_ERROR_PARAGRAPH in page[start:end]:
            error.write_text(page[:start] + ERROR_TEXT + page[end:])
            changed = True
    index = html_dir / "index.html"
    page = index.read_text()
    if FILE_CHECK not in page:
        head = page.lower().find("<head>")
        if head < 0:
            raise ValueError(f"{index} has no <head>")
        at = head + len("<head>")
        index.write_text(page[:at] + "\n    " + FILE_CHECK + page[at:])
        changed = True
    return changed


def legend_beside_the_plot(html_dir: Path) -> bool:
    """Patch asv's ``graphdisplay.js`` (:data:`LEGEND_JS`) and put :data:`LEGEND_PANEL` into
    ``index.html``'s left column, so that the legend is drawn beside the plot, shown unless the
    address says ``show-legend=false``. Returns True when patched now; False when there is no
    ``graphdisplay.js``, it was patched before, or it or the page is not asv 0.6.6's (every anchor
    must be there exactly once; nothing is changed otherwise)."""
    path, index = html_dir / "graphdisplay.js", html_dir / "index.html"
    if not path.is_file() or not index.is_file():
        return False
    js, page = path.read_text(), index.read_text()
    if any(js.count(old) != 1 for old, _ in LEGEND_JS) or page.count(LEGEND_PANEL_ANCHOR) != 1:
        return False  # another asv, or patched already: left as it is
    for old, new in LEGEND_JS:
        js = js.replace(old, new, 1)
    path.write_text(js)
    index.write_text(page.replace(LEGEND_PANEL_ANCHOR, LEGEND_PANEL + LEGEND_PANEL_ANCHOR, 1))
    return True


def apply(html_dir: Path) -> None:
    """The page fixes of this module on a published site."""
    explain_file_urls(html_dir)
    legend_beside_the_plot(html_dir)
