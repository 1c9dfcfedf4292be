"""The offline site: CDN URLs of asv's real page rewritten to local copies, and the machine fields."""

import base64
import hashlib
import json
import re
import shutil
from pathlib import Path

import asv
import pytest
from asvfiles import main_commits, write_result
from committed import committed_folder

from fusebench.asv import store
from fusebench.ops import OPS
from fusebench.paths import PROJECT_ROOT
from fusebench.site import site, site_pages

ASV_INDEX = Path(asv.__file__).parent / "www" / "index.html"


def _sri(data: bytes) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(data).digest()).decode()


def test_every_external_load_of_asvs_page_has_a_local_copy():
    loads = site.external_loads(ASV_INDEX.read_text())
    assert len(loads) == 10 and "https://code.jquery.com/jquery-3.3.1.min.js" in loads
    assert set(loads) == {a.url for a in site.ASSETS}


def test_npm_versions_match_what_asv_asks_for():
    lock = json.loads((PROJECT_ROOT / "site" / "package-lock.json").read_text())["packages"]
    pkg = json.loads((PROJECT_ROOT / "site" / "package.json").read_text())
    for asset in site.ASSETS:
        version = lock[f"node_modules/{asset.package}"]["version"]
        assert pkg["dependencies"][asset.package] == version  # exact pins, no ranges
        if not asset.note:  # same release as the CDN's: its version is in the URL
            assert re.search(rf"[-/@]{re.escape(version)}/", asset.url.replace(".min.js", "/")), asset
    assert all("resolved" not in entry for entry in lock.values())  # no download addresses


def _fake_site(tmp_path, jquery=b"jquery!", flot=b"flot!"):
    html = tmp_path / "html"
    (html / "vendor/jquery/dist").mkdir(parents=True)
    (html / "vendor/jquery/dist/jquery.min.js").write_bytes(jquery)
    (html / "vendor/flot").mkdir(parents=True)
    (html / "vendor/flot/jquery.flot.js").write_bytes(flot)
    return html


def test_rewrite_keeps_integrity_only_when_the_local_file_matches(tmp_path):
    html = _fake_site(tmp_path)
    page = (f'<script src="https://code.jquery.com/jquery-3.3.1.min.js" integrity="{_sri(b"jquery!")}" '
            'crossorigin="anonymous"></script>\n'
            '<script src="https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.min.js" '
            f'integrity="{_sri(b"minified flot")}"></script>\n'
            '<a href="https://github.com/airspeed-velocity/asv/">asv</a>')
    new, urls = site.rewrite_page(page, "", html)
    assert len(urls) == 2 and site.external_loads(new) == []
    assert f'src="vendor/jquery/dist/jquery.min.js" integrity="{_sri(b"jquery!")}"' in new
    assert '<script src="vendor/flot/jquery.flot.js"></script>' in new  # mismatching hash dropped
    assert 'href="https://github.com/airspeed-velocity/asv/"' in new  # a link, not a load
    assert 'src="../vendor/flot/jquery.flot.js"' in site.rewrite_page(page, "../", html)[0]


def test_an_unknown_cdn_url_is_an_error(tmp_path):
    html = _fake_site(tmp_path)
    (html / "index.html").write_text('<script src="https://cdn.example/x.js"></script>')
    (html / "ok.html").write_text('<script src="https://code.jquery.com/jquery-3.3.1.min.js"></script>')
    with pytest.raises(site.SiteError, match="https://cdn.example/x.js"):
        site.rewrite_cdn(html)
    assert "code.jquery.com" in (html / "ok.html").read_text()  # no page changed


def test_rewriting_asvs_real_page(tmp_path):
    html = tmp_path / "html"
    (html / "sub").mkdir(parents=True)
    (html / "index.html").write_text(ASV_INDEX.read_text())
    (html / "sub" / "page.html").write_text(ASV_INDEX.read_text())
    urls = site.rewrite_cdn(html)
    assert len(urls) == 20
    for page, prefix in ((html / "index.html", ""), (html / "sub" / "page.html", "../")):
        text = page.read_text()
        assert site.external_loads(text) == []
        assert f'href="{prefix}vendor/bootstrap/dist/css/bootstrap.min.css"' in text
    site.add_plots_tab(html)
    site.add_plots_tab(html)  # idempotent
    assert (html / "index.html").read_text().count(site.NAV_PLOTS) == 1


def test_copy_vendor_follows_stylesheet_urls(tmp_path):
    modules = tmp_path / "node_modules"
    css = modules / "bootstrap/dist/css/bootstrap.min.css"
    css.parent.mkdir(parents=True)
    css.write_text("@font-face{src:url('../fonts/g.eot?#iefix') format('eot'),url(data:x)}")
    (modules / "bootstrap/dist/fonts").mkdir(parents=True)
    (modules / "bootstrap/dist/fonts/g.eot").write_bytes(b"font")
    assets = (site.Asset("https://x/bootstrap.min.css", "bootstrap", "dist/css/bootstrap.min.css"),)
    written = site.copy_vendor(modules, tmp_path / "html", assets)
    assert sorted(p.relative_to(tmp_path / "html").as_posix() for p in written) == [
        "vendor/bootstrap/dist/css/bootstrap.min.css", "vendor/bootstrap/dist/fonts/g.eot"]
    missing = (site.Asset("https://x/y.js", "nope", "y.js"),)
    with pytest.raises(site.SiteError, match="missing"):
        site.copy_vendor(modules, tmp_path / "html", missing)


def test_npm_missing_is_one_clear_error(tmp_path, monkeypatch):
    (tmp_path / "package-lock.json").write_text('{"packages": {"": {}, "node_modules/a": {"version": "1"}}}')
    monkeypatch.setattr(site.shutil, "which", lambda name: None)
    with pytest.raises(site.SiteError, match="^npm not found"):
        site.npm_install(tmp_path)
    # what npm installed already matches the lock: no npm needed
    (tmp_path / "node_modules" / "a").mkdir(parents=True)
    (tmp_path / "node_modules" / ".package-lock.json").write_text(
        '{"packages": {"node_modules/a": {"version": "1"}}}')
    assert site.npm_install(tmp_path) == tmp_path / "node_modules"
    (tmp_path / "node_modules" / ".package-lock.json").write_text(
        '{"packages": {"node_modules/a": {"version": "2"}}}')
    assert not site.installed_matches(tmp_path)


def test_machine_fields_become_selectors_when_they_differ(tmp_path):
    """Each field of the asv machine (driver, CUDA, torch, ...) is a selector of the published site."""
    old, new = main_commits(2)
    axes = [["torch"], ["1024"], ["float32"]]
    values = {"suite.Gelu.track_device_time": {("torch", "1024", "float32"): 1e-3}}
    write_result(tmp_path / "results", "h200", old, values, axes, {"torch": "2.10.0", "driver": "575.1"})
    write_result(tmp_path / "results", "h200", new, values, axes, {"torch": "2.11.0", "driver": "580.2"})
    assert store.publish(tmp_path / "results", tmp_path / "html") == 0
    index = json.loads((tmp_path / "html" / "index.json").read_text())
    assert sorted(index["params"]["torch"]) == ["2.10.0", "2.11.0"]
    assert sorted(index["params"]["driver"]) == ["575.1", "580.2"]
    assert index["params"]["gpu"] == ["NVIDIA H200"] and index["params"]["machine"] == ["h200"]
    assert {"gpu", "driver", "cuda", "torch", "triton"} <= set(index["machines"]["h200"])


def test_machine_info_carries_the_environment():
    env = {"gpu": "NVIDIA H200", "driver": "580.1", "cuda_runtime": "13.0", "torch": "2.11.0",
           "triton": "3.6.0", "image_digest": "sha256:abc"}
    info = store.machine_info("h200", env)
    assert {k: info[k] for k in ("gpu", "driver", "cuda", "torch", "triton", "image_digest")} == {
        "gpu": "NVIDIA H200", "driver": "580.1", "cuda": "13.0", "torch": "2.11.0", "triton": "3.6.0",
        "image_digest": "sha256:abc"}


@pytest.mark.slow
def test_publish_without_npm(tmp_path, monkeypatch, capsys):
    """No npm: ``make publish`` stops with one line; with ``CDN=1`` (and in ``make bench``) the
    site is published with its CDN URLs and a warning."""
    site_dir = tmp_path / "site"
    site_dir.mkdir()
    shutil.copy(PROJECT_ROOT / "site" / "package-lock.json", site_dir)
    monkeypatch.setattr(site.shutil, "which", lambda name: None)
    assert site.publish(committed_folder("results"), tmp_path / "html", OPS.values(), site_dir=site_dir) == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("publish: error: npm not found") and "CDN=1" in err
    assert site.publish(committed_folder("results"), tmp_path / "html", OPS.values(), cdn=True,
                        site_dir=site_dir) == 0
    assert "needs internet" in capsys.readouterr().err
    index = (tmp_path / "html" / "asv.html").read_text()
    assert "https://code.jquery.com/jquery-3.3.1.min.js" in site.external_loads(index)
    assert site.NAV_PLOTS in index and (tmp_path / "html/plots/h200/gelu-speedup.png").is_file()


def test_the_runs_tab_shows_energy_per_call_where_the_record_has_it(tmp_path):
    """Issue 29 item 12: the H200 run of 0a5fc94 measured energy per call; the Runs tab shows its
    mJ per call and pJ per byte per (op, dtype), escaped; a record without energy shows none."""
    from fusebench.report import summary

    folder = tmp_path / "records" / "h200"
    folder.mkdir(parents=True)
    for name in ("0a5fc94f.json.xz", "1fd9c63c.json.xz"):
        (folder / name).write_bytes((PROJECT_ROOT / "records" / "h200" / name).read_bytes())
    page = site.write_runs_page(tmp_path / "html", tmp_path / "records").read_text()
    with_energy, without = (page[page.index(f'<h2 id="h200-{n}">h200 {n}</h2>'):]
                            for n in ("0a5fc94f", "1fd9c63c"))
    with_energy = with_energy.split("<h2")[1]
    without = without.split("<h2")[1]
    assert "<p>gelu float32: energy per call</p>" in with_energy
    assert "<p>softmax float16: energy per call</p>" in with_energy
    # gelu 16384x16384 float32: eager 3072 mJ, 1431 pJ/B (docs/results/h200.md)
    assert ('<tr><td>16384x16384</td><td style="text-align:right">3072 mJ 1431 pJ/B</td>'
            in with_energy)
    assert "energy per call" not in without
    table = summary.EnergyTable("gelu float32: energy per call", ["shape", "eager"],
                                [["<img src=x>", "1.00 mJ"]])
    assert "<td>&lt;img src=x&gt;</td>" in site_pages.energy_html([table])
    assert site_pages.energy_html([]) == ""


def test_the_runs_tab_lists_the_newest_commit_first_whatever_the_files_times(tmp_path):
    """A fresh clone gives every record about the same file time: the Runs tab orders each
    machine's records by their commit's time in git, unknown commits after, newest file first."""
    import os

    folder = tmp_path / "records" / "h200"
    folder.mkdir(parents=True)
    names = ["0a5fc94f.json.xz", "8cd47df5.json.xz", "93fa9d02.json.xz"]  # oldest commit first
    for i, name in enumerate(names):
        (folder / name).write_bytes((PROJECT_ROOT / "records" / "h200" / name).read_bytes())
        os.utime(folder / name, (2_000_000 - i, 2_000_000 - i))  # the oldest commit's file is newest
    (folder / "deadbeef.json").write_text("{}")  # a plain record, as an older commit wrote them
    os.utime(folder / "deadbeef.json", (3_000_000, 3_000_000))
    (tmp_path / "records" / "cpu").mkdir()
    (tmp_path / "records" / "cpu" / "0a5fc94f.json").write_text("{}")
    ordered = site.records_newest_first([("h200", folder / n) for n in [*names, "deadbeef.json"]]
                                + [("cpu", tmp_path / "records" / "cpu" / "0a5fc94f.json")])
    assert [(m, p.name) for m, p in ordered] == [
        ("cpu", "0a5fc94f.json"), ("h200", "8cd47df5.json.xz"), ("h200", "93fa9d02.json.xz"),
        ("h200", "0a5fc94f.json.xz"), ("h200", "deadbeef.json")]
    page = site.write_runs_page(tmp_path / "html", tmp_path / "records").read_text()
    heads = [page.index(f'<h2 id="h200-{n}">h200 {n}</h2>')
             for n in ("8cd47df5", "93fa9d02", "0a5fc94f", "deadbeef")]
    assert heads == sorted(heads)
    assert "unreadable record" in page.split('<h2 id="h200-deadbeef">h200 deadbeef</h2>')[1]
    # the index above them, newest first, each linking to its run's anchor (issue 54, item 3)
    assert '<a href="#h200-8cd47df5">8cd47df5</a> · <a href="#h200-93fa9d02">93fa9d02</a>' in page
    assert page.index('<a href="#h200-8cd47df5">') < heads[0]


def test_the_plots_page_starts_with_the_gpus_titled_by_their_gpu(tmp_path):
    """Issue 41, item 6: the Plots page started with cpu-x86_64 and named machines, not GPUs."""
    assert site_pages.BOOTSTRAP_CSS in {a.url for a in site.ASSETS}  # rewritten with asv's page
    results_dir = tmp_path / "results"
    for machine, fields in (("h200", {"gpu": "NVIDIA H200 <b>"}), ("cpu-x86_64", {}), ("a100", {"gpu": 3})):
        (results_dir / machine).mkdir(parents=True)
        (results_dir / machine / "machine.json").write_text(json.dumps({"machine": machine, **fields}))
    html = tmp_path / "html"
    pngs = [html / "plots" / m / "gelu-speedup.png" for m in ("cpu-x86_64", "h200", "a100")]
    page = site.write_plots_page(html, pngs, [], results_dir).read_text()
    heads = [h.split(">", 1)[1].split("</h2>")[0] for h in page.split("<h2 ")[1:]]
    assert heads == ["a100", "NVIDIA H200 &lt;b&gt; (h200)", "CPU (cpu-x86_64)"]
    assert '<li id="nav-li-plots" class="active"><a href="../plots/index.html">Plots</a></li>' in page
    cpu = page.split('id="cpu-x86_64"')[1]
    assert "tf32 are not measured there" in cpu and "tf32" not in page.split('id="cpu-x86_64"')[0]
    assert '<img src="h200/gelu-speedup.png"' in page
