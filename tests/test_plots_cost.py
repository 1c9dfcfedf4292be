"""The plots at less cost (issue 26, item 5): the repo's copied from the site's, not drawn twice; the
groups drawn by parallel workers. The same files, bytes and order as drawn one by one."""

import dataclasses
import os

import pytest
from asvfiles import main_commits, write_result

from fusebench.errors import UsageError
from fusebench.ops import OPS
from fusebench.report import plots
from fusebench.storage import results


@pytest.fixture
def stored(tmp_path):
    """Results of two machines: GELU (a throughput and a speedup plot each) and matmul (one)."""
    first, second = main_commits(2)  # one result file per op (their axes differ)
    res = tmp_path / "results"
    for machine, scale in (("box", 1.0), ("other", 0.5)):
        axes = [["eager", "triton"], ["16384x16384"], ["float32"]]
        e, t = ("eager", "16384x16384", "float32"), ("triton", "16384x16384", "float32")
        write_result(res, machine, first, {
            "suite.Gelu.track_device_time": {e: 2e-3 * scale, t: 1e-3},
            "suite.Gelu.track_bandwidth": {e: 1000.0, t: 2000.0 * scale}}, axes)
        mm = [["torch"], ["64x64", "8192x8192"], ["float32", "tf32", "bfloat16"]]
        write_result(res, machine, second, {"suite.Matmul.track_tflops": {
            ("torch", "64x64", "bfloat16"): 0.1, ("torch", "8192x8192", "bfloat16"): 550.0 * scale}}, mm,
                     date=1_700_000_100_000)
    return res


def _bytes(paths):
    return [(p.parent.name, p.name, p.read_bytes()) for p in paths]


def test_copied_plots_are_the_drawn_ones_byte_for_byte(stored, tmp_path):
    ops = [OPS["gelu"], OPS["matmul"]]
    fresh = plots.write_plots(stored, tmp_path / "site", ops)  # as the site draws them
    copied = plots.write_plots(stored, tmp_path / "repo", ops, ["box", "other"],
                               drawn=(tmp_path / "site", ops))
    assert [p.relative_to(tmp_path / "repo").as_posix() for p in copied] == [
        "box/gelu-bandwidth.png", "box/gelu-speedup.png", "box/matmul-tflops.png",
        "other/gelu-bandwidth.png", "other/gelu-speedup.png", "other/matmul-tflops.png"]
    assert [p.relative_to(tmp_path / "site") for p in fresh] == [
        p.relative_to(tmp_path / "repo") for p in copied]
    assert _bytes(copied) == _bytes(fresh)
    assert not [p for p in (tmp_path / "repo").rglob("*") if p.name.startswith(".")]  # no temp file left


def test_only_the_same_ops_are_copied_the_rest_drawn(stored, tmp_path):
    """An op of another case file (another object) is drawn, not taken from the site's folder."""
    site = tmp_path / "site"
    plots.write_plots(stored, site, [OPS["gelu"], OPS["matmul"]], ["box"])
    (site / "box" / "gelu-speedup.png").write_bytes(b"not this one")  # would show if copied
    (site / "box" / "matmul-tflops.png").write_bytes(b"copied")
    written = plots.write_plots(stored, tmp_path / "repo", [OPS["gelu"], OPS["matmul"]], ["box"],
                                drawn=(site, [OPS["matmul"]]))
    assert [p.name for p in written] == ["gelu-bandwidth.png", "gelu-speedup.png", "matmul-tflops.png"]
    assert written[1].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert written[2].read_bytes() == b"copied"


def test_a_link_is_never_followed(stored, tmp_path):
    site = tmp_path / "site"
    plots.write_plots(stored, site, [OPS["matmul"]], ["box"])
    fresh = (site / "box" / "matmul-tflops.png").read_bytes()
    outside = tmp_path / "outside.png"
    outside.write_bytes(b"keep")
    repo = tmp_path / "repo" / "box"
    repo.mkdir(parents=True)
    (repo / "matmul-tflops.png").symlink_to(outside)  # a link at the target: replaced, not written through
    plots.write_plots(stored, tmp_path / "repo", [OPS["matmul"]], ["box"],
                      drawn=(site, [OPS["matmul"]]))
    assert not (repo / "matmul-tflops.png").is_symlink()
    assert (repo / "matmul-tflops.png").read_bytes() == fresh
    assert outside.read_bytes() == b"keep"
    # a link as the source: the group is drawn, the link's target never read
    os.replace(site / "box" / "matmul-tflops.png", tmp_path / "moved.png")
    (site / "box" / "matmul-tflops.png").symlink_to(outside)
    written = plots.write_plots(stored, tmp_path / "again", [OPS["matmul"]], ["box"],
                                drawn=(site, [OPS["matmul"]]))
    assert [p.read_bytes() for p in written] == [fresh]


def test_workers_draw_the_same_files_in_the_same_order(stored, tmp_path):
    ops = [OPS["gelu"], OPS["matmul"]]
    one = plots.write_plots(stored, tmp_path / "one", ops, workers=1)
    two = plots.write_plots(stored, tmp_path / "two", ops, workers=2)
    assert [p.relative_to(tmp_path / "two").as_posix() for p in two] == [
        "box/gelu-bandwidth.png", "box/gelu-speedup.png", "box/matmul-tflops.png",
        "other/gelu-bandwidth.png", "other/gelu-speedup.png", "other/matmul-tflops.png"]
    assert [p.relative_to(tmp_path / "one") for p in one] == [p.relative_to(tmp_path / "two") for p in two]
    assert _bytes(two) == _bytes(one)
    assert plots._JOB is None  # nothing of the job left behind


def test_workers_draw_an_op_that_cannot_be_pickled_and_name_unreadable_files_in_order(stored, tmp_path):
    """The workers are forked: an op of a case file or a test (a lambda in it) is inherited, not
    pickled; an unreadable file is named once, as by the sequential path."""
    gelu = dataclasses.replace(OPS["gelu"], reference=lambda x: x)
    broken = stored / "other" / "zzzzzzzz-existing-py.json"
    broken.write_text("{")
    seq, par = results.Reader(stored), results.Reader(stored)
    one = plots.write_plots(stored, tmp_path / "one", [gelu, OPS["matmul"]], ["other"], reader=seq, workers=1)
    two = plots.write_plots(stored, tmp_path / "two", [gelu, OPS["matmul"]], ["other"], reader=par, workers=2)
    assert _bytes(two) == _bytes(one) and len(two) == 3
    assert [u.path for u in par.unreadable] == [u.path for u in seq.unreadable] == [broken]
    with pytest.raises(UsageError, match="zzzzzzzz-existing-py.json.*3 plots drawn from the rest"):
        plots.write_plots(stored, tmp_path / "three", [OPS["matmul"], gelu], ["other"], workers=2)


def test_the_cpus_counted_are_this_process_s():
    assert plots.cpus() == len(os.sched_getaffinity(0)) >= 1
