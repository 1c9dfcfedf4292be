"""The site's Verdicts page (issue 29, item 13): each measured commit on main against the previous
one, in the gate's words, each regression linking to its graph."""

import urllib.parse

import pytest
from asvfiles import main_commits, write_result
from committed import committed_folder

from fusebench.gate import compare
from fusebench.paths import PROJECT_ROOT
from fusebench.site import verdicts
from fusebench.storage import results, runrecord

T = "suite.Gelu.track_device_time"
AXES = [["eager", "triton"], ["1024"], ["float32"]]
EAGER, TRITON = ("eager", "1024", "float32"), ("triton", "1024", "float32")


def test_each_commit_is_judged_against_the_previous_measured_one(tmp_path):
    a, b, c = main_commits(3)
    res = tmp_path / "results"
    write_result(res, "box", a, {T: {EAGER: 1.0e-3, TRITON: 1.0e-4}}, AXES, date=1)
    write_result(res, "box", c, {T: {EAGER: 1.0e-3, TRITON: 2.0e-4}}, AXES, date=3)  # b: not measured
    assert verdicts.measured_line(res, "box") == [a, c]
    [v] = verdicts.judge_history(res, "box")
    assert (v.base, v.head, v.failed, v.error) == (a, c, True, "")
    assert v.counts.startswith("0 new failure, 1 regression")
    assert [(f[0], f[1], round(f[2], 3), f[4]) for f in v.flagged] == [(T, TRITON, 2.0, "regression")]
    page = verdicts.page([v])
    assert (f'<code>{c[:8]}</code> against <code>{a[:8]}</code>:\n<span class="label label-danger gate">FAIL'
            '</span> 1 regression</div>') in page
    link = verdicts.graph_link(T, TRITON, "box")
    assert link == ("../asv.html#suite.Gelu.track_device_time?machine=box&p-backend=%27triton%27"
                    "&p-shape=%271024%27&p-dtype=%27float32%27")
    assert urllib.parse.unquote(link).endswith("p-backend='triton'&p-shape='1024'&p-dtype='float32'")
    assert link.replace("&", "&amp;") in page and b[:8] not in page


@pytest.mark.slow
def test_the_page_agrees_with_make_compare_on_the_committed_results():
    """The newest pair of the H200's measured commits, judged as make compare judges it."""
    res = committed_folder("results")
    newest = verdicts.judge_history(res, "h200")[0]
    line = verdicts.measured_line(res, "h200")
    assert (newest.base, newest.head) == (line[-2], line[-1])
    from fusebench import config
    from fusebench.gate import noise

    settings = config.load(None)
    records = runrecord.records_dir(res)
    reader = results.Reader(res)
    rows = compare.compare(reader.commit("h200", newest.base), reader.commit("h200", newest.head),
                           settings.factor, runrecord.load(records, "h200", newest.base),
                           runrecord.load(records, "h200", newest.head), alpha=settings.alpha,
                           history=noise.from_records(records / "h200", PROJECT_ROOT))
    assert newest.counts == compare.summary(rows) and newest.failed == compare.failed_gate(rows)


def test_stored_strings_are_escaped():
    v = verdicts.Verdict("<b>m</b>", "a" * 40, "b<i>" * 10, error="cannot read <script>x</script>")
    row = compare.Row("suite.Gelu.track_device_time", ("<img src=x>", "1024", "float32"), "seconds",
                      1e-3, 2e-3, 2.0, 0.01, "regression", 1.1, 0.05, "note <script>")
    w = verdicts.Verdict("<b>m</b>", "a" * 40, "c" * 40, moved=[row])
    page = verdicts.page([v, w], {"<b>m</b>": "GPU <svg onload=x>"})
    assert "<script>" not in page and "&lt;script&gt;" in page and "<b>m</b>" not in page
    assert "<i>" not in page and "<img src=x" not in page and "<svg" not in page
    assert "GPU &lt;svg onload=x&gt;" in page and "note &lt;script&gt;" in page


def test_each_commit_names_the_cases_that_moved_each_linking_to_its_graph():
    """Issue 41, item 6: the page was a table of status counts; it names the cases now, in the
    site's navigation bar, and says apart what was not on both sides and why."""
    rows = [compare.Row(T, EAGER, "seconds", 1e-3, 1e-3, 1.0, 0.0, "same"),
            compare.Row(T, TRITON, "seconds", 1e-4, 0.8e-4, 0.8, 0.01, "improvement", 1.1),
            compare.Row(T, ("compile", "1024", "float32"), "seconds", 1e-4, 1.05e-4, 1.05, 0.01,
                        "within noise", 1.1),
            compare.Row(T, ("cuda", "1024", "float32"), "seconds", 1e-4, 1.3e-4, 1.3, 0.01,
                        "different kernel", 1.1, note="kernels a -> b"),
            compare.Row(T, ("torch", "1024", "float32"), "seconds", 1e-4, 1.3e-4, 1.3, 0.01, "regression",
                        1.1)]
    v = verdicts.Verdict("h200", "a" * 40, "b" * 40, True, moved=sorted(
        rows[1:], key=lambda r: verdicts.MOVED.index(r.status)), same=1)
    page = verdicts.page([v], {"h200": "NVIDIA H200 (h200)"})
    assert '<h2 id="h200">NVIDIA H200 (h200)</h2>' in page
    active = '<li id="nav-li-verdicts" class="active"><a href="../verdicts/index.html">Verdicts</a></li>'
    assert active in page
    assert '<li id="nav-li-plots"><a href="../plots/index.html">Plots</a></li>' in page
    assert [line.split('data-status="')[1].split('"')[0] for line in page.splitlines()
            if 'data-status="' in line] == ["regression", "different kernel", "within noise", "improvement"]
    assert ('<tr class="danger" data-status="regression"><td>regression</td><td><a href="'
            + verdicts.graph_link(T, ("torch", "1024", "float32"), "h200").replace("&", "&amp;")
            + '">Gelu.track_device_time (torch, 1024, float32)</a></td><td>100us</td><td>130us</td>'
            '<td>1.300x</td><td>1.100x</td><td></td></tr>') in page
    assert "1 regression, 1 different kernel, 1 within noise, 1 improvement" in page


def test_what_was_not_on_both_sides_is_said_apart():
    from fusebench.ops import OPS
    from fusebench.record import Record, Sweep

    nan = float("nan")
    missing = "liger-kernel 0.8.5 is not installed; install the reference group: make venv REFERENCE=1"
    recs = [Record(op="softmax", backend="liger", shape="1024", dtype="float32", status="skipped",
                   reason=missing)]
    sweep = Sweep({"device": "cuda"}, 4000.0, "default", recs)
    NB = compare.NOT_BOTH
    rows = [compare.Row("suite.Softmax.track_device_time", ("liger", "1024", "float32"), "seconds", nan, nan,
                        nan, 0, NB),
            compare.Row("suite.Gelu.track_device_time", ("liger", "1024", "float32"), "seconds", nan, nan,
                        nan, 0, NB),
            compare.Row("suite.Gelu.track_device_time", ("cuda", "1024", "float32"), "seconds", 1e-3, nan,
                        nan, 0, NB),
            compare.Row("suite.Gelu.track_device_time", ("triton", "1024", "float32"), "seconds", nan, nan,
                        nan, 0, NB)]
    nb = verdicts.not_both(rows, sweep, sweep, OPS)
    counts = (nb.no_backend, nb.not_installed, nb.neither, nb.base_only, nb.head_only)
    assert counts == (1, {"liger": 1}, 1, 1, 0)
    assert nb.text() == ("Not judged, 3 case-metrics not on both sides: 1 of reference backends installed "
                         "on neither side (liger); 1 skipped or not stored on both sides; 1 measured before "
                         "only. Left out: 1 case-metrics of backends the op does not have.")
    assert verdicts.not_both(rows, None, sweep, OPS).not_installed == {}  # a side without its record


def test_a_commit_mostly_blind_is_inconclusive_on_the_page_and_its_blind_cases_named():
    """Issue 54, item 6: a verdict whose case-metrics are mostly blind is not "ok" on the page either."""
    blind = compare.Row(T, TRITON, "seconds", 1e-4, 1e-4, 1.0, 0.4, compare.BLIND, 1.8,
                        note="blind: limit 1.80x, beyond the host's margin of 1.5x")
    v = verdicts.Verdict("h200", "a" * 40, "b" * 40, inconclusive=compare.inconclusive([blind]),
                         moved=[blind])
    page = verdicts.page([v])
    assert '<span class="label label-warning gate">inconclusive</span> 1 blind' in page
    assert '<tr class="warning" data-status="blind"><td>blind</td>' in page
    ok = verdicts.page([verdicts.Verdict("h200", "a" * 40, "b" * 40)])
    assert '<span class="label label-success gate">ok</span>' in ok
