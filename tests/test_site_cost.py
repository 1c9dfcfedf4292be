"""The site's own pages are built while ``asv publish`` runs, beside the folder it empties, then
moved in (issue 26, item 5: the publish phase's cost)."""

import shutil
import threading

from asvfiles import main_commits, write_result

from fusebench.asv import store
from fusebench.ops import OPS
from fusebench.site import site, site_fixes, site_readable, verdicts


def test_the_pages_are_built_while_asv_publishes_and_survive_it(tmp_path, monkeypatch):
    res = tmp_path / "results"
    key = ("eager", "16384x16384", "float32")
    write_result(res, "box", main_commits(1)[0], {"suite.Gelu.track_device_time": {key: 2e-3},
                                                  "suite.Gelu.track_bandwidth": {key: 1000.0}},
                 [["eager"], ["16384x16384"], ["float32"]])
    html = tmp_path / "stage"
    html.mkdir()
    verdicts_written = threading.Event()
    seen = {}

    def asv(checked, html_dir, python):  # asv publish empties its folder first, then writes its pages
        shutil.rmtree(html_dir)
        html_dir.mkdir()
        seen["concurrent"] = verdicts_written.wait(60)  # the last page built beside it
        (html_dir / "index.html").write_text("asv")
        return 0

    write_page = verdicts.write_page
    monkeypatch.setattr(store, "publish", asv)
    monkeypatch.setattr(verdicts, "write_page",
                        lambda *a, **k: (write_page(*a, **k), verdicts_written.set())[0])
    monkeypatch.setattr(site, "npm_install", lambda site_dir: tmp_path)
    for mod, name in ((site, "copy_vendor"), (site, "rewrite_cdn"), (site_fixes, "apply"),
                      (site_readable, "apply")):
        monkeypatch.setattr(mod, name, lambda *a: None)
    tabs = []
    monkeypatch.setattr(site, "add_tab", lambda html_dir, tab: tabs.append(tab))
    monkeypatch.setattr(site, "add_overview_tab", lambda html_dir: None)
    status, reader = site._build(res, res, html, list(OPS.values()), False, "python", tmp_path)
    assert status == 0 and reader.unreadable == [] and seen["concurrent"]
    assert sorted(p.relative_to(html).as_posix() for p in html.rglob("*") if p.is_file()) == [
        "asv.html", "index.html", "plots/box/gelu-bandwidth.png", "plots/box/gelu-speedup.png",
        "plots/index.html", "runs/index.html", "verdicts/index.html"]
    assert (html / "asv.html").read_text() == "asv"  # asv's page made way for the landing page
    assert "<h1>How much fusion buys, per GPU</h1>" in (html / "index.html").read_text()
    assert tabs == [site.NAV_PLOTS, site.NAV_RUNS, verdicts.NAV_VERDICTS]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("fusebench-side")] == []  # removed


def test_a_failed_asv_publish_fails_the_build_and_leaves_nothing_beside(tmp_path, monkeypatch):
    res = tmp_path / "results"
    write_result(res, "box", main_commits(1)[0], {"suite.Gelu.track_device_time": {
        ("eager", "16384x16384", "float32"): 2e-3}}, [["eager"], ["16384x16384"], ["float32"]])
    html = tmp_path / "stage"
    html.mkdir()
    monkeypatch.setattr(store, "publish", lambda checked, html_dir, python: 3)
    assert site._build(res, res, html, [OPS["gelu"]], False, "python", tmp_path) == (3, None)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("fusebench-side")] == []
