"""The site's Verdicts page (issue 29, item 13): each measured commit on main against the previous
one, in the gate's words, each regression linking to its graph."""

import urllib.parse

import pytest
from asvfiles import main_commits, write_result

from fusebench.history import compare, results, runrecord, verdicts
from fusebench.paths import PROJECT_ROOT

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
    assert f"<code>{c[:8]}</code></td><td><code>{a[:8]}</code></td><td><b>FAIL</b>" in page
    link = verdicts.graph_link(T, TRITON, "box")
    assert link == ("../index.html#suite.Gelu.track_device_time?machine=box&p-backend=%27triton%27"
                    "&p-shape=%271024%27&p-dtype=%27float32%27")
    assert urllib.parse.unquote(link).endswith("p-backend='triton'&p-shape='1024'&p-dtype='float32'")
    assert link.replace("&", "&amp;") in page and b[:8] not in page


@pytest.mark.slow
def test_the_page_agrees_with_make_compare_on_the_committed_results():
    """The newest pair of the H200's measured commits, judged as make compare judges it."""
    res = PROJECT_ROOT / "results"
    newest = verdicts.judge_history(res, "h200")[0]
    line = verdicts.measured_line(res, "h200")
    assert (newest.base, newest.head) == (line[-2], line[-1])
    from fusebench import config
    from fusebench.history import noise

    settings = config.load(None)
    records = runrecord.records_dir(res)
    reader = results.Reader(res)
    rows = compare.compare(reader.commit("h200", newest.base), reader.commit("h200", newest.head),
                           settings.factor, runrecord.load(records, "h200", newest.base),
                           runrecord.load(records, "h200", newest.head), alpha=settings.alpha,
                           history=noise.from_records(records / "h200", PROJECT_ROOT))
    assert newest.counts == compare.summary(rows) and newest.failed == compare.failed_gate(rows)


def test_stored_strings_are_escaped():
    v = verdicts.Verdict("<b>m</b>", "a" * 40, "b" * 40, error="cannot read <script>x</script>")
    page = verdicts.page([v])
    assert "<script>x" not in page and "&lt;script&gt;" in page and "<b>m</b>" not in page
