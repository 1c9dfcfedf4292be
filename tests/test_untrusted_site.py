"""Issue 28, item 1: no string from another host runs as HTML in the published site. A results
folder carrying markup in every string field asv's page renders (a benchmark name, its code,
machine.json fields, a result's params) is published: what fails its checks is named and left
out, the code is escaped, and no file of the site holds the markup. The same site in headless
Chromium: tests/test_site_browser.py."""

import json
import shutil
from pathlib import Path

import pytest
from committed import committed_folder

from fusebench.ops import OPS
from fusebench.paths import PROJECT_ROOT
from fusebench.site import site
from fusebench.storage.untrusted import _cut


#: Markup whose only effect, if rendered, is a request for /pwned-<where> (the browser test
#: watches for it).
def payload(where: str) -> str:
    return f"<img src=/pwned-{where} onerror=document.title='pwned-{where}'>"


BAD_NAME = f"suite.Gelu.{payload('name')}"
RESULT = "b34537da-existing-py3.12.json"


def poisoned_results(folder: Path) -> Path:
    """The committed results, plus markup from 'another host' in every string field."""
    results = folder / "results"
    shutil.copytree(committed_folder("results"), results)
    bench_path = results / "benchmarks.json"
    bench = json.loads(bench_path.read_text())
    bench[BAD_NAME] = dict(bench["suite.Gelu.track_bandwidth"], name=BAD_NAME)
    bench["suite.Gelu.track_bandwidth"]["code"] += f"\n# {payload('code')}"
    bench["suite.Softmax.track_bandwidth"]["unit"] = payload("unit")
    bench_path.write_text(json.dumps(bench))
    # another machine whose machine.json fields carry markup (the tooltip of its button)
    evil = results / "evil"
    evil.mkdir()
    info = json.loads((results / "h200" / "machine.json").read_text())
    info.update(machine="evil", gpu=payload("gpu"), driver=payload("driver"))
    (evil / "machine.json").write_text(json.dumps(info))
    data = json.loads((results / "h200" / RESULT).read_text())
    data["params"].update(machine="evil", gpu=payload("gpu"))
    (evil / RESULT).write_text(json.dumps(data))
    # a result of the good machine whose params (selectors) and a benchmark name carry markup
    data = json.loads((results / "h200" / RESULT).read_text())
    data["commit_hash"] = "f" * 40
    data["params"]["torch"] = payload("torch")
    data["results"][BAD_NAME] = next(iter(data["results"].values()))
    (results / "h200" / f"ffffffff-{RESULT.split('-', 1)[1]}").write_text(json.dumps(data))
    return results


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    """The poisoned folder published (with CDN URLs: no npm needed), and publish's stderr."""
    import contextlib
    import io

    tmp = tmp_path_factory.mktemp("poisoned")
    results = poisoned_results(tmp)
    err = io.StringIO()
    mp = pytest.MonkeyPatch()
    mp.setattr(site.shutil, "which", lambda name: None)  # no npm: CDN=1's site
    site_dir = tmp / "site"
    site_dir.mkdir()
    shutil.copy(PROJECT_ROOT / "site" / "package-lock.json", site_dir)
    try:
        with contextlib.redirect_stderr(err):
            status = site.publish(results, tmp / "html", OPS.values(), cdn=True, site_dir=site_dir)
    finally:
        mp.undo()
    return tmp / "html", results, status, err.getvalue()


@pytest.mark.slow
def test_each_file_or_benchmark_carrying_markup_is_named_and_left_out(published):
    html, results, status, err = published
    assert status == 2  # bad input named and left out; 1 is a regression
    errors = sorted(ln for ln in err.splitlines() if ln.startswith("publish: error:"))
    plain = "is not plain text (no markup characters such as < > & \" ', at most 300 characters)"
    assert errors == sorted([
        f"publish: error: {results / 'benchmarks.json'}: benchmark name {_cut(BAD_NAME)} is not a "
        "benchmark name (identifiers joined by '.'); left out of the site",
        f"publish: error: {results / 'benchmarks.json'}: benchmark suite.Softmax.track_bandwidth: unit "
        f"{_cut(payload('unit'))} {plain}; left out of the site",
        f"publish: error: {results / 'evil' / 'machine.json'}: machine.json.driver {_cut(payload('driver'))} "
        f"{plain}; left out of the site",
        f"publish: error: {results / 'h200' / ('ffffffff-' + RESULT.split('-', 1)[1])}: params.torch "
        f"{_cut(payload('torch'))} {plain}; left out of the site",
    ]), err
    assert err.strip().splitlines()[-1] == ("publish: 4 stored file(s) or benchmark(s) refused (named above) "
                                            "and left out of the site")  # never "every file was read"


def test_no_file_of_the_site_holds_the_markup(published):
    html, _, _, _ = published
    files = [p for p in html.rglob("*") if p.is_file() and p.suffix in (".html", ".json", ".js")]
    assert len(files) > 20
    for path in files:
        assert "<img src=/pwned" not in path.read_text(errors="replace"), path
    index = json.loads((html / "index.json").read_text())
    assert "evil" not in index["params"]["machine"] and "h200" in index["params"]["machine"]
    assert BAD_NAME not in index["benchmarks"]
    # the code tooltip (asv renders it as HTML) shows the text as written, escaped
    code = index["benchmarks"]["suite.Gelu.track_bandwidth"]["code"]
    assert "&lt;img src=/pwned-code" in code and "class &lt;locals&gt;:" in code
