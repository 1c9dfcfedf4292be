"""The published site in a real browser: headless Debian chromium, driven by playwright-core
(``site/browser_check.mjs``), against a local server on 127.0.0.1.

The site is published from the committed ``results/`` (real H200 data). Every request to another
origin is aborted (``--block-external``), as on a GPU cluster with no internet, so the check does
not depend on this machine's network; the second test shows that the check catches a site whose
CDN URLs were not rewritten.
"""

import email.utils
import functools
import itertools
import json
import lzma
import math
import os
import shlex
import shutil
import subprocess
import sys
import threading
import urllib.parse
import urllib.request
from collections import Counter
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from committed import committed, committed_folder

from fusebench.asv import store
from fusebench.asv.asvsuite import benchmark_name
from fusebench.axes import shape_label
from fusebench.ops import OPS
from fusebench.paths import PROJECT_ROOT
from fusebench.registry import BACKENDS
from fusebench.report import summary
from fusebench.site import site, verdicts
from fusebench.storage import results, runrecord

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHECK = PROJECT_ROOT / "site" / "browser_check.mjs"

pytestmark = [
    pytest.mark.slow,  # a real publish, npm and a browser: make test-slow
    pytest.mark.skipif(not Path(CHROMIUM).exists(),
                       reason=f"chromium not installed at {CHROMIUM} (.ci/run installs Debian's chromium)"),
    pytest.mark.skipif(not shutil.which("node") or not shutil.which("npm"),
                       reason="node and npm are not installed (they install the site's scripts and "
                              "playwright-core)"),
]


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def serve():
    """``serve(folder)`` -> ``http://127.0.0.1:PORT`` serving it until the module's tests end."""
    servers = []

    def start(folder: Path) -> str:
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(folder)))
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        servers.append(httpd)
        return f"http://127.0.0.1:{httpd.server_address[1]}"

    yield start
    for httpd in servers:
        httpd.shutdown()
        httpd.server_close()


def _check(url: str, *args: str, site_dir: Path | None = None) -> tuple[int, dict]:
    """Run browser_check; with ``site_dir``, also assert that every graph the page missed
    (``missing_graphs``: asv asks for every machine-field combination) is absent from the site,
    and that such a combination has graphs of other benchmarks (a real host, not a broken path)."""
    out = subprocess.run(["node", str(CHECK), url, "--machine", "h200", "--block-external", *args],
                         capture_output=True, text=True, timeout=180, env=dict(os.environ, CHROMIUM=CHROMIUM))
    try:
        code, report = out.returncode, json.loads(out.stdout)
    except ValueError:
        pytest.fail(f"browser_check printed no report (exit {out.returncode}): {out.stderr[-2000:]}")
    for missed in report.get("missing_graphs", []) if site_dir else []:
        rel = urllib.parse.unquote(urllib.parse.urlsplit(missed).path).lstrip("/")
        assert not (site_dir / rel).exists(), f"the site has {rel}, yet the page got 404"
        assert any((site_dir / rel).parent.glob("*.json")), f"no graph at all under {rel}'s combination"
    return code, report


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    html = tmp_path_factory.mktemp("site") / "html"
    # npm ci, vendor files, rewrite, plots
    assert site.publish(committed_folder("results"), html, OPS.values()) == 0
    return html


def test_the_published_site_works_offline(published, serve):
    code, report = _check(serve(published), site_dir=published)
    assert report["problems"] == [] and code == 0, report
    assert {"suite.Gelu.track_bandwidth", "suite.Softmax.track_device_time"} <= set(report["benchmarks"])
    assert report["machine_button"] and report["series"] >= 1 and report["points"] >= 1
    # history: asv draws the commits of main's first-parent history (git rev-list --first-parent)
    # that measured the graph's benchmark, with the same machine fields, as one line
    chain = set(subprocess.run(["git", "rev-list", "--first-parent", "main"], cwd=PROJECT_ROOT,
                               capture_output=True,
                               text=True).stdout.split())
    files = results.result_files(committed_folder("results"), "h200")
    runs = [r for r in (results.read_file(f) for f in files)
            if r.commit in chain and any(results.is_measured(v)
                                         for v in r.values.get("suite.Gelu.track_bandwidth", {}).values())]
    # issue 41, item 3: host details are no series keys, so the whole H200 history is one line
    envs = Counter(json.dumps(r.fields, sort_keys=True) for r in runs)
    assert len(envs) == 1, f"the runs' asv machine fields differ: {len(envs)} series per case"
    assert report["longest"] >= len(runs) >= 2
    assert report["failed"] == [] and report["external"] == [] and not report["error_page"]


@pytest.mark.parametrize("benchmark, headline", [("suite.Gelu.track_bandwidth", "16384x16384"),
                                                 ("suite.Softmax.track_bandwidth", "8192x16384")])
def test_the_first_view_opens_at_the_headline_shape_with_units_and_every_bar(published, serve, benchmark,
                                                                              headline):
    """Issue 13, item 9: asv's default is the first (smallest) shape; flot-orderbars drew only the
    middle series (compile) of bars against a category axis; tile titles had no unit."""
    base = serve(published)
    code, report = _check(base, "--benchmark", benchmark, site_dir=published)
    assert code == 0, report
    assert report["hash"] == f"#{benchmark}?machine=h200&p-shape='{headline}'"
    # the bars of fusebench's five backends at least (orderbars once drew only one series); the
    # reference backends' series are empty where a library was not installed, so not every series
    # draws; a backend the op does not have has none (issue 54)
    op = next(op for op in OPS.values() if benchmark.startswith(benchmark_name(op.name, "")))
    assert report["drawn"] >= 5 and report["series"] == len(op.backends), report
    assert "Gelu.track_bandwidth [GB/s]" in report["titles"]
    assert "Softmax.track_device_time [seconds]" in report["titles"]
    code, report = _check(base, "--benchmark", benchmark, "--x-axis", "shape", site_dir=published)
    assert code == 0, report
    assert report["drawn"] >= 5 and report["series"] == len(op.backends), report  # the backends' bars


def test_the_plots_page_and_its_images_load(published, serve):
    base = serve(published)
    page = urllib.request.urlopen(f"{base}/plots/index.html", timeout=10).read().decode()
    images = [part.split('"')[0] for part in page.split('<img src="')[1:]]
    assert "h200/gelu-bandwidth.png" in images and "h200/softmax-speedup.png" in images
    for img in images:
        assert urllib.request.urlopen(f"{base}/plots/{img}", timeout=10).read()[:4] == b"\x89PNG"
    assert 'href="plots/index.html"' in (published / "asv.html").read_text()


def test_the_check_fails_on_a_site_that_loads_from_cdns(tmp_path, serve):
    """Without the rewrite the CDN requests fail offline and asv shows its error page."""
    html = tmp_path / "html"
    assert store.publish(committed_folder("results"), html) == 0  # plain asv publish: CDN URLs left
    (html / "index.html").rename(html / "asv.html")  # where the check opens asv's page
    code, report = _check(serve(html))
    assert code == 1
    assert any(f.startswith("https://code.jquery.com/jquery-3.3.1.min.js") for f in report["failed"])
    assert report["error_page"] and report["benchmarks"] == []


def test_a_site_from_a_folder_carrying_markup_runs_no_script(tmp_path):
    """Issue 28, item 1: markup in another host's benchmark names, code, machine.json fields and
    result params (tests/test_untrusted_site.py plants it) ran in the published site. Each payload,
    if rendered, would request /pwned-<where> from the server, which records every request."""
    from test_untrusted_site import poisoned_results

    html = tmp_path / "html"
    assert site.publish(poisoned_results(tmp_path), html, OPS.values()) == 2  # the markup named, left out
    requested: list[str] = []

    class Recording(_Quiet):
        def do_GET(self):
            requested.append(self.path)
            super().do_GET()

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Recording, directory=str(html)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        code, report = _check(f"http://127.0.0.1:{httpd.server_address[1]}", site_dir=html)
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert [p for p in requested if "pwned" in p] == []
    assert report["page_errors"] == [] and "suite.Gelu.track_bandwidth" in report["benchmarks"], report
    assert len(requested) > 10  # the page did load its scripts and graphs from this server


def test_the_verdicts_page_names_the_cases_that_moved_each_linking_to_its_graph(published, serve):
    """Issue 29, item 13, and issue 41, item 6: each measured commit on main against the previous
    one, in the gate's words; each case that moved is a row linking to the graph of a benchmark
    the site lists, with that case's parameters; what was not on both sides is said apart."""
    base = serve(published)
    code, report = _check(base, "--pages", site_dir=published)
    assert code == 0, report
    verdicts_page = report["pages"]["verdicts"]
    assert sorted(verdicts_page["headings"]) == ["NVIDIA H100 80GB HBM3 (h100-80gb-hbm3)",
                                                 "NVIDIA H200 (h200)"]  # every committed GPU
    cases = verdicts_page["cases"]
    statuses = {c[0] for c in cases}
    assert {"within noise", "different kernel"} <= statuses, statuses
    index = json.loads(urllib.request.urlopen(f"{base}/index.json", timeout=10).read())
    for _status, text, href in cases:
        url = urllib.parse.urlsplit(href)
        assert url.path == "/asv.html", href
        name, _, query = urllib.parse.unquote(url.fragment).partition("?")
        assert name in index["benchmarks"] and text.startswith(name.split(".", 1)[1] + " ("), (text, href)
        params = dict(kv.split("=", 1) for kv in query.split("&"))
        case = f"({params['p-backend'][1:-1]}, {params['p-shape'][1:-1]}, {params['p-dtype'][1:-1]})"
        assert params["machine"] in ("h200", "h100-80gb-hbm3") and text.endswith(case), (text, href)
    page = urllib.request.urlopen(f"{base}/verdicts/index.html", timeout=10).read().decode()
    assert page.count('class="label label-success gate">ok<') + page.count('gate">FAIL<') >= 2
    assert "of reference backends installed on neither side" in page
    assert "Left out: " in page and "backends the op does not have" in page
    assert 'href="verdicts/index.html"' in (published / "asv.html").read_text()


def test_a_git_tag_with_markup_runs_no_script(tmp_path, monkeypatch):
    """Issue 42, item 2: ``git tag "<img/src=x/onerror=...>" 463f960f`` went raw into
    ``html/index.json`` and asv's page inserted it as HTML (the page's title became the payload's).
    The tags are planted in a clone (never in this checkout); the payload, if rendered, requests
    /pwned-tag from the server, which records every request."""
    from fusebench.site import site_fixes

    repo = tmp_path / "repo"
    subprocess.run(["git", "clone", "-q", "--shared", "--no-checkout", "--branch", "main", str(PROJECT_ROOT),
                    str(repo)], check=True)
    for tag in ("<img/src=pwned-tag>", "v1.0"):
        subprocess.run(["git", "tag", tag, "463f960f"], cwd=repo, check=True)
    monkeypatch.setattr(store, "PROJECT_ROOT", repo)  # asv publish reads git tags from there
    html_dir = tmp_path / "html"
    assert site.publish(committed_folder("results"), html_dir, OPS.values()) == 2  # the tag named, left out
    index = json.loads((html_dir / "index.json").read_text())
    assert list(index["tags"]) == ["v1.0"]
    assert site_fixes.TAG.fullmatch("v1.0")
    requested: list[str] = []

    class Recording(_Quiet):
        def do_GET(self):
            requested.append(self.path)
            super().do_GET()

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Recording, directory=str(html_dir)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        code, report = _check(f"http://127.0.0.1:{httpd.server_address[1]}", "--benchmark",
                              "suite.Gelu.track_bandwidth", site_dir=html_dir)
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert [p for p in requested if "pwned" in p] == []
    assert code == 0 and report["page_errors"] == [] and report["points"] >= 1, report


def test_the_plots_runs_and_verdicts_pages_have_the_sites_navigation_bar(published, serve):
    """Issue 41, item 6: those pages had no navigation bar, and the Plots page was not titled by GPU."""
    code, report = _check(serve(published), "--pages", "--landing", site_dir=published)
    assert code == 0, report
    tabs = ["Overview", "Benchmark grid", "Benchmark list", "Regressions", "Plots", "Runs", "Verdicts"]
    pages = (("plots", "Plots"), ("runs", "Runs"), ("verdicts", "Verdicts"), ("landing", "Overview"))
    for name, label in pages:
        got = report["pages"][name]
        assert (got["tabs"], got["active"], got["styled"]) == (tabs, [label], True), (name, got)
    assert sorted(report["pages"]["plots"]["headings"]) == ["NVIDIA H100 80GB HBM3 (h100-80gb-hbm3)",
                                                            "NVIDIA H200 (h200)"]


def test_the_regressions_tab_points_to_verdicts_and_the_runs_page_has_an_index(published, serve):
    """Issue 54, item 3: asv's Regressions tab listed 1.1-1.23x "regressions" the Verdicts page calls
    ok or within noise, without a word pointing there; the Runs page (1 MB) had no index nor anchors,
    and bootstrap's zero cell padding ran its headers together ("eagertorchcompile")."""
    code, report = _check(serve(published), "--pages", site_dir=published)
    assert code == 0, report
    note = report["regressions_note"]
    assert note is not None and note["links"] == ["verdicts/index.html"], report
    assert "within noise" in note["text"] and "Verdicts" in note["text"]
    runs = report["pages"]["runs"]
    assert runs["anchors"] == len(committed("records/*/*.json.xz")) and runs["dead_anchors"] == [], runs
    assert runs["cell_padding"] >= 3, runs


def _colour(text: str) -> tuple[int, ...]:
    return tuple(int(v) for v in text[text.index("(") + 1:text.index(")")].split(","))


def test_a_graph_against_shape_spans_the_width_with_only_the_ops_backends(published, serve):
    """Issue 54, item 2: GELU against shape squashed every bar into the leftmost pixels (its shapes,
    numbers as text, stretched the category axis to 67108864); the selector and legend listed liger
    and quack, which GELU has no backends for; the graph opened with no legend and eager and
    flaggems in the same blue; "backend" was clipped to "backenc"; the top series sat on the frame;
    the commit picker was not in order."""
    gelu = OPS["gelu"]
    shapes = [shape_label(s) for s in gelu.grids["default"]]
    code, report = _check(serve(published), "--benchmark", "suite.Gelu.track_device_time",
                          "--click-x-axis", "shape", "--legend", "open", site_dir=published)
    assert code == 0, report
    assert report["categories"] == shapes and report["x_range"] == [-0.5, len(shapes) - 0.5], report
    assert report["drawn"] >= 5, report  # every backend measured at the newest commit: its bars
    backends = [label.split(";")[0].removeprefix("backend-") for label in report["labels"]]
    assert backends == [b for b in BACKENDS if b in gelu.backends], report["labels"]
    assert report["visible_buttons"]["backend"] == backends, report["visible_buttons"]
    assert report["legend_rows"] == len(backends) and not report["legend_over_plot"], report
    colours = [_colour(c) for c in report["colors"]]
    assert min(math.dist(a, b) for a, b in itertools.combinations(colours, 2)) > 60, colours  # were 44
    assert report["clipped"] == [] and "backend" in report["visible_buttons"]["x-axis"], report
    assert report["y_top"] >= 1.05 * report["data_top"], report
    commits = report["visible_buttons"]["commit"]
    dates = [email.utils.parsedate_to_datetime(c.split(" ", 1)[1]) for c in commits[1:]]
    assert commits[0] == "last" and len(dates) >= 2 and dates == sorted(dates, reverse=True), commits
    code, report = _check(serve(published), "--benchmark", "suite.Gelu.track_bandwidth",
                          "--x-axis", "backend", site_dir=published)
    assert code == 0 and report["categories"] == backends, report  # no liger, quack on the axis
    assert report["y_top"] >= 1.05 * report["data_top"], report


#: A GPU made for the test beside the committed ones (h200, h100-80gb-hbm3): the h200's record with
#: its times SLOWER times longer, so that every ratio of the side-by-side tables is known.
H100 = "h100-pcie"
#: The made GPU's times over the h200's (its copy ceiling and bandwidths as much lower).
SLOWER = 1.5


def _second_gpu(results_dir: Path, commit: str) -> None:
    """A second GPU machine beside the h200's: its result and run record of ``commit``, copied with
    the machine and the GPU renamed, every time ``SLOWER`` times longer, the copy ceiling, the matrix
    peak and the bandwidths as much lower (the % of the ceiling unchanged)."""
    (results_dir / H100).mkdir()
    machine = json.loads((results_dir / "h200" / "machine.json").read_text())
    machine.update(machine=H100, gpu="NVIDIA H100 PCIe")
    (results_dir / H100 / "machine.json").write_text(json.dumps(machine))
    for path in (results_dir / "h200").glob(f"{commit[:8]}-*.json"):
        data = json.loads(path.read_text())
        data["params"].update(machine=H100, gpu=machine["gpu"])
        (results_dir / H100 / path.name).write_text(json.dumps(data))
    records = runrecord.records_dir(results_dir)
    raw = json.loads(lzma.decompress((records / "h200" / f"{commit[:8]}.json.xz").read_bytes()))
    raw["environment"]["gpu"] = machine["gpu"]
    raw["ceiling_gbps"] /= SLOWER
    raw["peak_tflops"] /= SLOWER
    raw["ceilings_gbps"] = [c / SLOWER for c in raw["ceilings_gbps"]]
    for rec in raw["records"]:
        for key in ("device_time_ms", "device_time_cold_ms", "device_time_graph_ms", "wall_time_ms"):
            rec[key] = rec[key] * SLOWER if rec.get(key) is not None else rec.get(key)
        for key in ("bandwidth_gbps", "bandwidth_cold_gbps"):
            rec[key] = rec[key] / SLOWER if rec.get(key) is not None else rec.get(key)
    (records / H100).mkdir()
    (records / H100 / f"{commit[:8]}.json.xz").write_bytes(lzma.compress(json.dumps(raw).encode()))


def test_the_landing_page_answers_per_gpu_and_side_by_side(tmp_path, serve):
    """Issue 54, item 1: the site opened on asv's grid of axis-less sparklines; nothing said how much
    fusion buys on a GPU, which backend is fastest or what the last commit did. The landing page
    has, per GPU, each op's headline shape with every backend's figures (the committed run
    record's), the best in bold, the newest commit's verdict, links one click away; and two GPUs'
    nearest commits side by side. Its tables are in the HTML: no script draws them."""
    shutil.copytree(committed_folder("results"), tmp_path / "results")
    shutil.copytree(committed_folder("records"), tmp_path / "records")
    results_dir = tmp_path / "results"
    newest = verdicts.measured_line(results_dir, "h200")[-1]
    _second_gpu(results_dir, newest)
    html = tmp_path / "html"
    assert site.publish(results_dir, html, OPS.values()) == 0
    code, report = _check(serve(html), "--landing", site_dir=html)
    assert code == 0, report
    page = report["pages"]["landing"]
    assert page["scripts"] == 1 and page["dead_anchors"] == [] and page["cell_padding"] >= 3, page
    # its one script sends an old address of asv's page on; the feed's links go there too
    assert report["old_link"].startswith("/asv.html#suite.Gelu.track_bandwidth?machine=h200"), report
    feed = (html / "regressions.xml").read_text()
    assert 'href="asv.html#suite.' in feed and 'href="index.html' not in feed
    machines = [s for s in page["sections"] if s["id"] in ("h200", H100)]
    assert [s["heading"] for s in machines] == [f"NVIDIA H100 PCIe ({H100})", "NVIDIA H200 (h200)"]
    [real] = [s for s in page["sections"] if s["id"] == "h100-80gb-hbm3"]  # the committed H100's runs
    assert real["heading"] == "NVIDIA H100 80GB HBM3 (h100-80gb-hbm3)" and len(real["tables"]) >= 3
    records = runrecord.records_dir(results_dir)
    headline_ops = [op for op in OPS.values() if op.headline is not None]
    for section in machines:
        sweep = runrecord.load(records, section["id"], newest)
        want = [summary.headline_table(sweep, op.name, shape_label(op.headline)) for op in headline_ops]
        want = [t for t in want if t is not None]
        assert len(want) >= 3 and [t[0] for t in section["tables"]] == [t.title for t in want]
        for (_, header, rows), table in zip(section["tables"], want):
            assert header == table.header, header
            assert rows == [[[label, False]] + [[table.cell_text(c).replace("**", ""), c.best] for c in cells]
                            for label, cells in table.rows]
        assert f"plots/index.html#{section['id']}" in section["links"]
        assert any(link.startswith(f"asv.html#suite.Gelu.track_bandwidth?machine={section['id']}")
                   for link in section["links"])
    h100, h200 = machines
    assert h200["verdict"].startswith(f"Newest measured commit {newest[:8]}")
    assert " against " in h200["verdict"] and ("ok" in h200["verdict"] or "FAIL" in h200["verdict"])
    assert "no earlier measured commit" in h100["verdict"]
    gelu = next(t for t in h200["tables"] if t[0].startswith("gelu "))
    assert gelu[1] == ["gelu 16384x16384, dtype", "eager", "torch", "compile", "triton", "cuda", "flaggems"]
    assert all(any(bold for _, bold in row) for row in gelu[2])  # a best backend in every dtype's row
    h100_gelu = next(t for t in h100["tables"] if t[0].startswith("gelu "))
    assert "(2833 GB/s)" in h100_gelu[0] and "(4250 GB/s)" in gelu[0]  # the copy ceilings
    [pair] = [s for s in page["sections"] if s["id"] == f"{H100}-h200"]
    assert [t[0].split(":")[0] for t in pair["tables"]] == [t[0].split(":")[0] for t in h200["tables"]]
    assert all("= 0.67x: a case as close" in title for title, _, _ in pair["tables"])  # copy ceilings 1/1.5
    ratios = [text.rsplit(" ", 1)[-1] for _, _, rows in pair["tables"] for row in rows for text, _ in row[1:]
              if text.endswith("x")]
    assert len(ratios) >= 20 and set(ratios) == {"0.67x"}, ratios  # each case 1/1.5 the time on the h200
    served = (html / "index.html").read_text()
    assert f"<td>{gelu[2][0][0][0]}</td>" in served and gelu[2][0][1][0] in served  # in the HTML itself


def test_the_legend_shows_beside_the_plot_and_hides_on_a_click(published, serve):
    """Issue 41, item 4: the legend's rows covered the plot; issue 54, item 2: the graph then opened
    with no legend. It opens shown, beside the plot; its button hides it (show-legend=false)."""
    base = serve(published)
    code, report = _check(base, "--legend", "open", site_dir=published)
    assert code == 0, report
    assert report["legend_rows"] >= 5 and not report["legend_over_plot"], report  # a row per backend
    code, report = _check(base, "--legend", "click", site_dir=published)
    assert code == 0 and report["legend_rows"] == 0 and "show-legend=false" in report["legend_hash"], report
    code, report = _check(base, "--legend", "hidden", site_dir=published)
    assert code == 0 and report["legend_rows"] == 0, report


def test_the_benchmark_list_colours_a_change_by_the_metrics_direction(published, serve):
    """Issue 41, item 5: a bandwidth gain (+102.0 % GB/s) was coloured red, like a regression. Now
    red is worse and green better for every metric (asv colours beyond 5 %)."""
    from fusebench import metrictable

    code, report = _check(serve(published), "--list", site_dir=published)
    assert code == 0, report
    seen = Counter()
    for name, change, cls in report["changes"]:
        metric = metrictable.metric(name.split(" ")[0])
        rise = change.startswith("+")  # asv writes a fall with U+2212
        if cls:
            worse = rise if metric.better == metrictable.LOWER else not rise
            assert cls == ("positive-change" if worse else "negative-change"), (name, change, cls)
            seen[(metric.better, rise, cls)] += 1
    # the list shows one machine's newest change (with two GPUs committed, the H100's two runs): a
    # few of each kind, every one coloured by its metric's direction
    assert seen[("higher", True, "negative-change")] >= 3  # bandwidth gains, green
    assert seen[("lower", True, "positive-change")] >= 3  # slower device times, red


def test_a_site_opened_from_the_file_system_names_the_command_that_serves_its_folder(published, tmp_path):
    """asv's pages cannot read their data over file://; asv.html sends such a reader to
    error.html, which names the command serving the folder the page is in (quoted for the shell
    where it needs it), and that command serves it as printed."""
    spaced = tmp_path / "it's a site"
    shutil.copytree(published, spaced)
    quoted = "'" + f"{spaced}/".replace("'", "'\\''") + "'"
    for folder, shown in ((published, f"{published}/"), (spaced, quoted)):
        out = subprocess.run(["node", str(PROJECT_ROOT / "site" / "file_check.mjs"),
                              (folder / "asv.html").as_uri()], capture_output=True, text=True,
                             timeout=120, env=dict(os.environ, CHROMIUM=CHROMIUM))
        assert out.returncode == 0, out.stderr
        report = json.loads(out.stdout)
        assert report == {"url": (folder / "error.html").as_uri(),
                          "serve": f"python -m fusebench preview --html {shown}"}
    # as printed, with this interpreter for `python` (any free port: 8080 may be taken here)
    argv = [sys.executable, *shlex.split(report["serve"])[1:], "--port", "0"]
    server = subprocess.Popen(argv, cwd=PROJECT_ROOT, text=True, stderr=subprocess.PIPE)
    try:
        line = server.stderr.readline()
        assert line.startswith(f"preview: serving {spaced}/ on http://127.0.0.1:"), line
        url = line.split(" on ")[1].split(" ")[0]
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(url + "index.html", timeout=30) as page:
            assert b"<h1>How much fusion buys, per GPU</h1>" in page.read()  # the landing page
    finally:
        server.terminate()
        server.wait(timeout=30)
