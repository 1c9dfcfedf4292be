"""The repo's plots copied from the site's, not drawn twice (issue 26, cost): the same bytes."""

import os

import pytest
from asvfiles import main_commits, write_result

from fusebench.history import plots
from fusebench.ops import OPS


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
    site = plots.write_plots(stored, tmp_path / "site", ops)
    fresh = plots.write_plots(stored, tmp_path / "fresh", ops, ["box", "other"])
    copied = plots.write_plots(stored, tmp_path / "repo", ops, ["box", "other"],
                               drawn=(tmp_path / "site", ops))
    assert [p.relative_to(tmp_path / "repo").as_posix() for p in copied] == [
        "box/gelu-bandwidth.png", "box/gelu-speedup.png", "box/matmul-tflops.png",
        "other/gelu-bandwidth.png", "other/gelu-speedup.png", "other/matmul-tflops.png"]
    assert [p.relative_to(tmp_path / "fresh") for p in fresh] == [
        p.relative_to(tmp_path / "repo") for p in copied]
    assert _bytes(copied) == _bytes(fresh) == _bytes(site)
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
