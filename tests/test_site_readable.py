"""The site can be read (issue 29, item 11): a CPU's results stay off a site with a GPU machine's
tiles, a page opened from the file system says how to open it, a graph opens with its plot in
view. On asv's own page files and on a published site."""

import json
import shutil
from pathlib import Path

import asv
import pytest
from committed import committed_folder

from fusebench.ops import OPS
from fusebench.paths import PROJECT_ROOT
from fusebench.site import site, site_readable

WWW = Path(asv.__file__).parent / "www"


def _machine(results: Path, name: str) -> None:
    (results / name).mkdir(parents=True)
    (results / name / "machine.json").write_text(json.dumps({"machine": name, "version": 1}))
    (results / name / "0123abcd-existing-py3.12.json").write_text("{}")


def test_a_cpu_beside_a_gpu_machine_is_left_out_of_the_site(tmp_path):
    results = tmp_path / "results"
    _machine(results, "h200")
    _machine(results, "cpu-x86_64")
    (results / "benchmarks.json").write_text("{}")
    with site_readable.shown_results(results) as (shown, left_out):
        assert left_out == ["cpu-x86_64"] and shown != results
        assert sorted(p.name for p in shown.iterdir()) == ["benchmarks.json", "h200"]
        assert (shown / "h200" / "0123abcd-existing-py3.12.json").read_text() == "{}"
    assert not shown.exists() and (results / "cpu-x86_64").is_dir()


def test_a_cpu_alone_is_published_as_it_is(tmp_path):
    results = tmp_path / "results"
    _machine(results, "cpu-x86_64")
    with site_readable.shown_results(results) as (shown, left_out):
        assert (shown, left_out) == (results, [])


def _asv_pages(tmp_path) -> Path:
    html = tmp_path / "html"
    html.mkdir()
    for name in ("index.html", "error.html", "graphdisplay.js"):
        shutil.copy(WWW / name, html / name)
    return html


def test_a_page_opened_from_the_file_system_says_how_to_open_it(tmp_path):
    html = _asv_pages(tmp_path)
    assert site_readable.explain_file_urls(html)
    error = (html / "error.html").read_text()
    assert "active internet connection" not in error and "<code>make preview</code>" in error
    assert '<code id="fusebench-serve">python -m fusebench preview --html FOLDER</code>' in error
    index = (html / "index.html").read_text()
    head = index.index("<head>") + len("<head>")
    assert index[head:].lstrip().startswith(site_readable.FILE_CHECK)  # before any script of asv
    assert not site_readable.explain_file_urls(html)  # once


def test_a_graph_opens_with_its_legend_shown_beside_the_plot(tmp_path):
    """Issue 41, item 4: the legend was drawn over the plot; issue 54, item 2: the graph then opened
    with no legend at all. It opens shown, in the left column; an address without show-legend shows
    it whatever the graph before chose."""
    html = _asv_pages(tmp_path)
    assert site_readable.legend_beside_the_plot(html)
    js = (html / "graphdisplay.js").read_text()
    assert "var show_legend = true;" in js and "var show_legend = false;" not in js
    assert "update_state_url({'show-legend': show_legend ? [] : [false]});" in js  # asv's: off in the address
    assert "show_legend = true;  // fusebench: no show-legend, the legend shown" in js
    assert "container: $('#fusebench-legend').toggle(show_legend).find('.panel-body')," in js
    page = (html / "index.html").read_text()
    nav = page[page.index('id="graphdisplay-navigation"'):page.index('left: 220px')]
    assert nav.index('id="show-legend"') < nav.index('id="fusebench-legend"')  # the left column
    assert not site_readable.legend_beside_the_plot(html)  # already patched: left as it is
    assert (html / "graphdisplay.js").read_text() == js and page.count('id="fusebench-legend"') == 1
    (html / "graphdisplay.js").write_text("another asv")
    (html / "index.html").write_text(page.replace(site_readable.LEGEND_PANEL, ""))
    assert not site_readable.legend_beside_the_plot(html)
    assert 'id="fusebench-legend"' not in (html / "index.html").read_text()  # nothing half done


@pytest.mark.slow
def test_publish_leaves_a_cpu_out_and_patches_the_pages(tmp_path, capsys, monkeypatch):
    results = tmp_path / "results"
    shutil.copytree(committed_folder("results"), results)
    shutil.copytree(PROJECT_ROOT / "results" / "h200", results / "cpu-x86_64")
    for path in (results / "cpu-x86_64").glob("*.json"):  # a machine named as its folder (issue 28)
        data = json.loads(path.read_text())
        (data["params"] if "params" in data else data)["machine"] = "cpu-x86_64"
        path.write_text(json.dumps(data))
    monkeypatch.setattr(site.shutil, "which", lambda name: None)  # no npm: CDN=1's site
    site_dir = tmp_path / "site"
    site_dir.mkdir()
    shutil.copy(PROJECT_ROOT / "site" / "package-lock.json", site_dir)
    assert site.publish(results, tmp_path / "html", OPS.values(), cdn=True, site_dir=site_dir) == 0
    err = capsys.readouterr().err
    assert "publish: cpu-x86_64 left out of the site: a CPU's host-clock figures" in err
    index = json.loads((tmp_path / "html" / "index.json").read_text())
    assert "cpu-x86_64" not in index["params"]["machine"]
    assert "make preview" in (tmp_path / "html" / "error.html").read_text()
    assert "no show-legend, the legend shown" in (tmp_path / "html" / "graphdisplay.js").read_text()
    verdicts = (tmp_path / "html" / "verdicts" / "index.html").read_text()
    assert '<h2 id="h200">NVIDIA H200 (h200)</h2>' in verdicts and "cpu-x86_64" not in verdicts
    assert 'href="verdicts/index.html">Verdicts</a>' in (tmp_path / "html" / "asv.html").read_text()
