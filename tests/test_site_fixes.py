"""What the published site shows first (``fusebench.site.site_fixes``; the browser check is in
``test_site_browser.py``): headline shape, units in tile titles, the flot-orderbars patch."""

import json

import pytest

from fusebench.ops import OPS
from fusebench.paths import PROJECT_ROOT
from fusebench.site import site, site_fixes

NPM_ORDERBARS = PROJECT_ROOT / "site" / "node_modules" / "flot-orderbars" / "js" / "jquery.flot.orderBars.js"
SRC = site_fixes.ORDERBARS


def _site(tmp_path, plugin: str):
    (tmp_path / SRC).parent.mkdir(parents=True)
    (tmp_path / SRC).write_text(plugin)
    (tmp_path / "index.html").write_text(
        f'<html><head>\n<script src="{SRC}" integrity="sha256-OXNbT0b5b/TgglckAfR8VaJ2ezZv0dHoIeRKjYMKEr8=" '
        'crossorigin="anonymous"></script>\n</head><body></body></html>')
    return tmp_path


def test_the_orderbars_patch_measures_a_categories_axis_in_categories(tmp_path):
    plugin = f"function calc(plot){{\n{site_fixes.ORDERBARS_ANCHOR}            pixel = AxeSize / 1;\n}}\n"
    html = _site(tmp_path, plugin)
    assert site_fixes.patch_orderbars(html)
    patched = (html / SRC).read_text()
    assert patched == plugin.replace(site_fixes.ORDERBARS_ANCHOR,
                                     site_fixes.ORDERBARS_ANCHOR + site_fixes.ORDERBARS_PATCH)
    integrity = (html / "index.html").read_text().split('integrity="')[1].split('"')[0]
    assert site.sri_matches(integrity, patched.encode())  # the browser still checks the file
    assert site_fixes.patch_orderbars(html) and (html / SRC).read_text() == patched  # once only
    (html / SRC).write_text("something else")
    with pytest.raises(ValueError, match="not the flot-orderbars 1.0.0"):
        site_fixes.patch_orderbars(html)
    (html / SRC).unlink()
    assert site_fixes.patch_orderbars(html) is False  # published with CDN URLs: nothing to patch


@pytest.mark.skipif(not NPM_ORDERBARS.is_file(), reason="site/node_modules not installed (npm ci in site/)")
def test_the_anchor_is_in_the_pinned_orderbars_release():
    assert NPM_ORDERBARS.read_text().count(site_fixes.ORDERBARS_ANCHOR) == 1


def _index():
    shapes = {"suite.Gelu.": ["'1024'", "'16384x16384'"], "suite.Softmax.": ["'65536x128'", "'8192x16384'"],
              "suite.Matmul.": ["'64x64'", "'8192x8192'"]}
    bms = {}
    for prefix, values in shapes.items():
        for metric, unit in (("track_bandwidth", "GB/s"), ("track_device_time", "seconds")):
            bms[prefix + metric] = {"name": prefix + metric, "unit": unit,
                                    "param_names": ["backend", "shape", "dtype"],
                                    "params": [["'eager'"], values, ["'float32'"]]}
    return {"benchmarks": bms}


def test_each_graph_opens_at_its_ops_headline_shape(tmp_path):
    selection = site_fixes.headline_selection(_index(), OPS.values())
    assert selection["suite.Gelu.track_bandwidth"] == "'16384x16384'"
    assert selection["suite.Softmax.track_device_time"] == "'8192x16384'"
    assert selection["suite.Matmul.track_bandwidth"] == "'8192x8192'"
    assert set(selection) == set(_index()["benchmarks"])
    index = _index()
    index["benchmarks"]["suite.Gelu.track_bandwidth"]["params"][1] = ["'1024'"]  # not in this grid
    assert "suite.Gelu.track_bandwidth" not in site_fixes.headline_selection(index, OPS.values())
    (tmp_path / "index.json").write_text(json.dumps(_index()))
    (tmp_path / "index.html").write_text("<html><head>\n<script src='asv.js'></script></head></html>")
    site_fixes.open_at_headline(tmp_path, OPS.values())
    site_fixes.open_at_headline(tmp_path, OPS.values())
    page = (tmp_path / "index.html").read_text()
    assert page.count(f'<script src="{site_fixes.DEFAULTS_JS}"></script>') == 1
    assert page.index(site_fixes.DEFAULTS_JS) < page.index("asv.js")  # before asv reads the address
    script = (tmp_path / site_fixes.DEFAULTS_JS).read_text()
    assert '"suite.Gelu.track_bandwidth": "\'16384x16384\'"' in script and "p-shape=" in script


def test_tile_titles_carry_the_unit(tmp_path):
    assert site_fixes.title("suite.Gelu.track_bandwidth", "GB/s") == "Gelu.track_bandwidth [GB/s]"
    assert "(" not in site_fixes.title("suite.Gelu.track_pct_of_ceiling", "%")  # asv's list reads (...)
    index = _index()
    index["benchmarks"]["suite.Gelu.track_device_time"]["pretty_name"] = "GELU hot device time, s"
    (tmp_path / "index.json").write_text(json.dumps(index))
    assert site_fixes.titles_with_units(tmp_path) == 5
    out = json.loads((tmp_path / "index.json").read_text())["benchmarks"]
    assert out["suite.Softmax.track_device_time"]["pretty_name"] == "Softmax.track_device_time [seconds]"
    assert out["suite.Gelu.track_device_time"]["pretty_name"] == "GELU hot device time, s"  # kept


def test_the_benchmark_list_colours_a_change_by_the_metrics_direction(tmp_path):
    """Issue 41, item 5: asv coloured every rise red, so a bandwidth gain looked like a regression."""
    import shutil
    from pathlib import Path

    import asv

    shutil.copy(Path(asv.__file__).parent / "www" / "summarylist.js", tmp_path / "summarylist.js")
    (tmp_path / "index.json").write_text(json.dumps(_index()))
    assert site_fixes.colour_by_direction(tmp_path) == 3  # track_bandwidth of Gelu, Softmax, Matmul
    bms = json.loads((tmp_path / "index.json").read_text())["benchmarks"]
    assert bms["suite.Gelu.track_bandwidth"][site_fixes.BETTER_KEY] == "higher"
    assert site_fixes.BETTER_KEY not in bms["suite.Gelu.track_device_time"]  # lower: asv's reading
    js = (tmp_path / "summarylist.js").read_text()
    assert site_fixes.SUMMARYLIST_COLOURS not in js and js.count(site_fixes.SUMMARYLIST_BY_DIRECTION) == 1
    assert "fusebench_better === 'higher' ? -change : change;" in js
    site_fixes.colour_by_direction(tmp_path)  # once
    assert (tmp_path / "summarylist.js").read_text() == js
    (tmp_path / "summarylist.js").write_text("another asv")
    with pytest.raises(ValueError, match="not asv 0.6.6's"):
        site_fixes.colour_by_direction(tmp_path)
