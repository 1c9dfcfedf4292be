"""A stored result file that cannot be read is named, the rest is read, and the reader exits
non-zero: never taken for "this machine never measured it" (issue 13, item 3)."""

import shutil
import subprocess
import sys

import pytest
from asvfiles import main_commits, write_result
from committed import committed_folder

from fusebench.errors import UsageError
from fusebench.ops import OPS
from fusebench.paths import PROJECT_ROOT
from fusebench.report import plots
from fusebench.site import site
from fusebench.storage import results

T = "suite.Gelu.track_device_time"
AXES = [["eager", "torch"], ["16384x16384"], ["float32"]]
EAGER, TORCH = ("eager", "16384x16384", "float32"), ("torch", "16384x16384", "float32")


@pytest.fixture
def two_commits(tmp_path):
    """``results/box/`` with an older readable commit and a newer one whose file is truncated."""
    old, new = main_commits(2)
    write_result(tmp_path, "box", old, {T: {EAGER: 2e-3, TORCH: 1e-3}}, AXES, date=1_700_000_000_000)
    path = write_result(tmp_path, "box", new, {T: {EAGER: 2e-3, TORCH: 5e-4}}, AXES, date=1_800_000_000_000)
    path.write_text(path.read_text()[:300])
    return tmp_path, old, new, path


def test_the_reader_names_the_file_and_reads_the_rest(two_commits):
    res, old, new, bad = two_commits
    reader = results.Reader(res)
    run = reader.latest("box", "suite.Gelu.")
    assert run is not None and run.commit == old  # the readable rest
    assert [u.path for u in reader.unreadable] == [bad]
    assert "JSON" in reader.unreadable[0].reason and str(bad) not in reader.unreadable[0].reason
    why = reader.unreadable[0].reason
    assert reader.lines("plots") == [f"plots: error: cannot read {bad}: {why}; left out"]
    with pytest.raises(UsageError, match=f"cannot read {bad}"):  # the strict helpers still refuse
        results.load_latest(res, "box", "suite.Gelu.")


@pytest.mark.slow
def test_write_plots_draws_the_rest_then_names_the_file(two_commits, tmp_path_factory):
    res, old, _, bad = two_commits
    out = tmp_path_factory.mktemp("plots")
    reader = results.Reader(res)
    written = plots.write_plots(res, out, [OPS["gelu"]], reader=reader)
    assert [p.name for p in written] == ["gelu-speedup.png"]  # only device times stored
    fig = plots.speedup_figure(reader.latest("box"), OPS["gelu"])
    assert f"(commit {old[:8]})" in fig.axes[0].get_title()
    assert [u.path for u in reader.unreadable] == [bad]
    with pytest.raises(UsageError, match=f"cannot read {bad}.*plots drawn from the rest"):
        plots.write_plots(res, out, [OPS["gelu"]])  # no reader: raises after drawing


@pytest.mark.slow
def test_make_plots_exits_non_zero_naming_the_truncated_h200_file(tmp_path):
    """The issue's case: the committed H200 results with one file truncated."""
    res = tmp_path / "results"
    shutil.copytree(committed_folder("results"), res)
    bad = next((res / "h200").glob("d0a40cb8-*.json"))
    bad.write_bytes(bad.read_bytes()[:1000])
    out = subprocess.run([sys.executable, "-m", "fusebench", "plots", "--results", str(res), "--out",
                          str(tmp_path / "plots")], cwd=PROJECT_ROOT, capture_output=True, text=True)
    assert out.returncode == 2, out.stderr
    err = out.stderr.strip().splitlines()
    errors = [line for line in err if line.startswith("plots: error: ")]  # beside "... not drawn" lines
    assert len(errors) == 1, err
    assert errors[0].startswith(f"plots: error: cannot read {bad}: ") and errors[0].endswith("; left out")
    assert err[-1] == "plots: 1 stored file(s) could not be read (named above) and were left out"
    assert (tmp_path / "plots/h200/gelu-bandwidth.png").is_file()  # the rest is still drawn


def test_check_finds_broken_machine_and_benchmark_files(tmp_path):
    old, new = main_commits(2)
    write_result(tmp_path, "box", old, {T: {EAGER: 1e-3}}, AXES)
    write_result(tmp_path, "lost", new, {T: {EAGER: 1e-3}}, AXES)
    (tmp_path / "lost" / "machine.json").unlink()
    write_result(tmp_path, "bad", new, {T: {EAGER: 1e-3}}, AXES)
    (tmp_path / "bad" / "machine.json").write_text("{")
    (tmp_path / "benchmarks.json").write_text("")
    found = {u.path.relative_to(tmp_path).as_posix(): u.reason for u in results.Reader(tmp_path).check()}
    assert sorted(found) == ["bad/machine.json", "benchmarks.json", "lost/machine.json"]
    assert found["lost/machine.json"] == "missing (asv leaves out the 1 result file(s) beside it)"


@pytest.mark.slow
def test_compare_names_an_unreadable_file_and_exits_2(tmp_path):
    base, head = main_commits(2)
    write_result(tmp_path, "box", base, {T: {TORCH: 1e-3}}, AXES)
    write_result(tmp_path, "box", head, {T: {TORCH: 1e-3}}, AXES)
    broken = tmp_path / "box" / f"{head[:8]}-other-env.json"
    broken.write_text('{"version": 2, "commit_hash"')
    cmd = [sys.executable, "-m", "fusebench", "compare", "--base", base, "--head", head, "--machine", "box",
           "--results", str(tmp_path)]
    out = subprocess.run(cmd, cwd=PROJECT_ROOT, capture_output=True, text=True)
    assert out.returncode == 2, out.stderr
    assert f"compare: error: cannot read {broken}: " in out.stderr and "-> ok" in out.stderr  # rest compared
    (tmp_path / "box" / f"{head[:8]}-existing-py.json").write_text("")
    out = subprocess.run(cmd, cwd=PROJECT_ROOT, capture_output=True, text=True)
    assert out.returncode == 2
    assert out.stderr.strip().startswith(f"compare: error: no readable results for commit {head[:8]}")


@pytest.mark.slow
def test_a_regression_is_exit_1_even_beside_an_unreadable_file(tmp_path):
    """A CI step that tests for exit 1 must see a regression whatever else went wrong."""
    base, head = main_commits(2)
    write_result(tmp_path, "box", base, {T: {TORCH: 1e-3}}, AXES)
    write_result(tmp_path, "box", head, {T: {TORCH: 3e-3}}, AXES)
    broken = tmp_path / "box" / f"{head[:8]}-other-env.json"
    broken.write_text('{"version": 2, "commit_hash"')
    out = subprocess.run([sys.executable, "-m", "fusebench", "compare", "--base", base, "--head", head,
                          "--machine", "box", "--results", str(tmp_path)],
                         cwd=PROJECT_ROOT, capture_output=True, text=True)
    assert f"compare: error: cannot read {broken}: " in out.stderr
    assert "1 regression" in out.stderr and "-> FAIL" in out.stderr
    assert out.returncode == 1, out.stderr


def test_publish_ends_with_the_count_and_lists_the_file_on_the_plots_page(two_commits, monkeypatch, capsys):
    res, _, _, bad = two_commits
    site_dir = res.parent / "site"
    site_dir.mkdir()
    monkeypatch.setattr(site.shutil, "which", lambda name: None)  # no npm: CDN URLs, a warning
    html = res.parent / "html"
    assert site.publish(res, html, OPS.values(), cdn=True, site_dir=site_dir) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert f"publish: error: cannot read {bad}: " in "\n".join(err)
    assert err[-1] == "publish: 1 stored file(s) could not be read (named above) and were left out"
    page = (html / "plots" / "index.html").read_text()
    assert "1 stored file(s) could not be read" in page and str(bad) in page
    bad.unlink()
    assert site.publish(res, html, OPS.values(), cdn=True, site_dir=site_dir) == 0
    assert capsys.readouterr().err.strip().splitlines()[-1] == \
        "publish: every stored file was read (1 result files)"
