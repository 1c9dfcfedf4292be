"""Issue 54 (the answer at a glance): the landing page (``fusebench.site.landing``) and the graph
page's fixes (``fusebench.site.site_fixes.fix_graphs``) on asv's own files; the browser checks are
in ``test_site_browser.py``."""

import json
import shutil
from dataclasses import replace
from pathlib import Path

import asv
from committed import committed_folder

from fusebench.axes import shape_label
from fusebench.ops import OPS
from fusebench.site import landing, site_fixes, verdicts
from fusebench.storage import runrecord

WWW = Path(asv.__file__).parent / "www"


def _asv_files(tmp_path: Path) -> Path:
    html = tmp_path / "html"
    html.mkdir()
    for name in ("graphdisplay.js", "asv.js", "index.html"):
        shutil.copy(WWW / name, html / name)
    backends = ["'eager'", "'torch'", "'liger'", "'quack'", "'flaggems'"]
    (html / "index.json").write_text(json.dumps({"benchmarks": {
        "suite.Gelu.track_bandwidth": {"param_names": ["backend", "shape", "dtype"],
                                       "params": [backends, ["'1024'"], ["'float32'"]]},
        "suite.Softmax.track_bandwidth": {"param_names": ["backend", "shape", "dtype"],
                                          "params": [backends, ["'1x1048576'"], ["'float32'"]]}}}))
    return html


def test_the_graph_fixes_patch_asvs_own_files_once(tmp_path):
    """Each anchor is asv 0.6.6's, found once: the absent backends marked and left out, category
    axes spanning their values, the commit picker by number, y headroom, ten colours, the buttons'
    style, the note above the regressions list."""
    html = _asv_files(tmp_path)
    assert site_fixes.fix_graphs(html, OPS.values()) and site_fixes.regressions_note(html)
    index = json.loads((html / "index.json").read_text())["benchmarks"]
    assert index["suite.Gelu.track_bandwidth"][site_fixes.ABSENT_KEY] == {"backend": [2, 3]}  # liger, quack
    assert site_fixes.ABSENT_KEY not in index["suite.Softmax.track_bandwidth"]  # softmax has all five
    js = (html / "graphdisplay.js").read_text()
    for _, new in site_fixes.GRAPH_JS:
        assert js.count(new) == 1
    assert "revisions.sort();" not in js and "options.xaxis.min = -0.5;" in js
    assert site_fixes.COLOURS in (html / "asv.js").read_text()
    page = (html / "index.html").read_text()
    assert page.index(site_fixes.STYLE) < page.index("</head>")
    assert page.index('id="fusebench-regressions-note"') < page.index('id="regressions-body"')
    assert 'href="verdicts/index.html"' in site_fixes.REGRESSIONS_NOTE
    before = {p.name: p.read_text() for p in html.iterdir()}
    assert not site_fixes.fix_graphs(html, OPS.values()) and not site_fixes.regressions_note(html)
    assert {p.name: p.read_text() for p in html.iterdir()} == before  # once only
    (html / "graphdisplay.js").write_text("another asv")
    assert not site_fixes.fix_graphs(html, OPS.values())
    assert (html / "graphdisplay.js").read_text() == "another asv"  # left as it is


def test_the_nearest_commits_of_two_gpus():
    order = list("abcdefgh")
    assert landing.nearest_commits(["a", "c", "f"], ["c", "h"], order) == ("c", "c", 0)
    assert landing.nearest_commits(["a", "e"], ["b", "f"], order) == ("e", "f", 1)  # newest of the nearest
    assert landing.nearest_commits(["a"], ["h"], order) == ("a", "h", 7)
    assert landing.nearest_commits(["a"], ["x"], order) is None  # not on main's line


def _newest_h200():
    res = committed_folder("results")
    commit = verdicts.measured_line(res, "h200")[-1]
    return commit, runrecord.load(runrecord.records_dir(res), "h200", commit)


def test_two_gpus_side_by_side_time_ratio_against_their_ceilings():
    """The time on one over the time on the other, per dtype and backend, beside their copy
    ceilings' ratio; a case doubtful on either side gets no ratio, only its marks."""
    _, a = _newest_h200()
    recs = []
    for r in a.records:
        if r.status == "ok" and r.device_time_ms is not None:
            r = replace(r, device_time_ms=r.device_time_ms * 2)
        if (r.op, r.backend, r.shape, r.dtype) == ("gelu", "triton", "16384x16384", "float16"):
            r = replace(r, noise=0.5)  # noisy on one side
        recs.append(r)
    b = replace(a, records=recs, ceiling_gbps=a.ceiling_gbps / 2)
    shape = shape_label(OPS["gelu"].headline)
    table = landing.ratio_table(a, b, "gelu", shape, "one", "two")
    ceilings = f"{a.ceiling_gbps:.0f} / {b.ceiling_gbps:.0f} GB/s = 2.0x"
    assert table.title.startswith(f"gelu {shape}: time per call on one / on two (ms), then two's over one's; "
                                  f"their copy ceilings {ceilings}")
    assert table.header == [f"gelu {shape}, dtype", "eager", "torch", "compile", "triton", "cuda"]
    cells = {(label, col): c.text for label, row in table.rows for col, c in zip(table.header[1:], row)}
    assert all(text.endswith(" 2.0x") for key, text in cells.items() if key != ("float16", "triton")), cells
    assert cells[("float16", "triton")].endswith(" n/a ~") and table.legend.startswith("Marks: ~ noisy")
    assert landing.ratio_table(a, b, "gelu", "no such shape", "one", "two") is None


def test_the_landing_page_escapes_what_it_shows(tmp_path):
    """A GPU name from machine.json (another host's file) is text on the page, never markup."""
    shutil.copytree(committed_folder("results"), tmp_path / "results")
    shutil.copytree(committed_folder("records"), tmp_path / "records")
    machine = tmp_path / "results" / "h200" / "machine.json"
    data = json.loads(machine.read_text())
    machine.write_text(json.dumps({**data, "gpu": "<img src=x onerror=alert(1)>"}))
    page = landing.page(tmp_path / "results", ["h200"], OPS.values(), judged=[])
    assert "&lt;img src=x onerror=alert(1)&gt; (h200)" in page and "<img src=x" not in page
    assert page.count("<script") == 1 and page.index("</script>") < page.index("<body>")  # only the redirect
    assert page.count('<table class="fb-table"') >= 3  # the headline tables, no verdict judged here
    assert "no earlier measured commit to judge it against" in page
