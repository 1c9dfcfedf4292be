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
  ``file://`` reader to an error page that says ``make preview`` (:func:`explain_file_urls`).
* **A graph opens with the plot in view.** asv draws the legend inside the plot, over the lines
  (twenty series on one graph): it now opens hidden, its ``legend`` button shows it
  (:func:`legend_off_at_first`).
"""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path
from typing import Iterator

from fusebench import tmpdirs

#: What error.html says instead of asv's "active internet connection" paragraph.
ERROR_TEXT = """<p>
      Opened from the file system (a <code>file://</code> address)? Browsers do not let this page
      read its data files there. Serve the site and open it over http:
      <code>make preview</code>, then <a href="http://localhost:8080">http://localhost:8080</a>.
    </p>
    <p>
      Served over http and still here: a script did not load. A site published with
      <code>make publish CDN=1</code> loads them from CDNs and needs internet; <code>make publish</code>
      serves them from <code>html/vendor/</code>.
    </p>"""
ASV_ERROR_PARAGRAPH = "Make sure you have an active internet connection"
FILE_CHECK = ('<script>if (window.location.protocol === "file:") '
              '{ window.location.replace("error.html"); }</script>')
LEGEND_DEFAULT = "    var show_legend = true;\n"
LEGEND_BUTTON_DEFAULT = ("        else {\n            show_legend_button.addClass('active');\n"
                         "        }\n")


def is_cpu(machine: str) -> bool:
    """A CPU machine's name (``environment.machine_name`` on a host without a GPU: ``cpu-<arch>``)."""
    return machine.startswith("cpu-")


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


def legend_off_at_first(html_dir: Path) -> bool:
    """asv's graph page (``graphdisplay.js``) with its legend hidden until the ``legend`` button
    is pressed (a ``show-legend`` in the address still wins). Returns True when patched."""
    path = html_dir / "graphdisplay.js"
    if not path.is_file():
        return False
    js = path.read_text()
    if LEGEND_DEFAULT not in js or LEGEND_BUTTON_DEFAULT not in js:
        return False  # another asv: left as it is
    js = js.replace(LEGEND_DEFAULT, "    var show_legend = false;  // fusebench: the plot in view first\n", 1)
    js = js.replace(LEGEND_BUTTON_DEFAULT, "        else {\n            show_legend = false;\n        }\n", 1)
    path.write_text(js)
    return True


def apply(html_dir: Path) -> None:
    """The page fixes of this module on a published site."""
    explain_file_urls(html_dir)
    legend_off_at_first(html_dir)
