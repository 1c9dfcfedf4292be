"""CPU tests of softmax's tuning space (kernels/softmax/tuning.py: fusebench tune cuda|triton) and
the CUDA variant table."""

import re

import pytest

pytest.importorskip("torch")

from fusebench.kernels import cuda_ext  # noqa: E402
from fusebench.kernels.cuda_check import CUDA_DIR  # noqa: E402
from fusebench.kernels.softmax import tuning  # noqa: E402

from fusebench.commands import tune  # noqa: E402


def test_variant_codes_match_the_header():
    header = (CUDA_DIR / "fusebench_cuda.h").read_text()
    enum = header.split("enum class SoftmaxVariant : int {")[1].split("};")[0]
    codes = {name: int(code) for name, code in re.findall(r"^\s*(\w+) = (\d+),", enum, re.M)}
    # the codes the run records and tune labels name; 6 (coop) and 9 (tma_grid) were removed
    assert codes == {"Auto": 0, "WarpPerRow": 1, "BlockPerRow": 2, "Online": 3, "SplitRow": 4,
                     "OnlineL2": 5, "Cluster": 7, "Tma": 8}
    assert cuda_ext.VARIANTS == {"auto": 0, "warp_per_row": 1, "block_per_row": 2, "online": 3,
                                 "split_row": 4, "online_l2": 5, "cluster": 7, "tma": 8}
    assert "softmax_tma.cu" in {p.name for p in cuda_ext.SOURCES}
    kb = header.split("kTmaChunkBytes[] = {")[1].split("}")[0]
    assert tuple(int(b) // 1024 for b in kb.split(",")) == cuda_ext.TMA_CHUNK_KB


@pytest.mark.parametrize("removed", [6, 9, "coop", "tma_grid"])
def test_a_removed_variant_is_refused_before_the_extension(removed, monkeypatch):
    import torch

    def untouchable():
        raise AssertionError("the extension was called")

    monkeypatch.setattr(cuda_ext, "_module", untouchable)
    with pytest.raises(ValueError, match=rf"unknown variant {removed!r}; valid: auto, .*, cluster, tma$"):
        cuda_ext.softmax_variant(torch.ones(2, 8), removed)
    with pytest.raises(ValueError, match="unknown variant"):
        cuda_ext.refusal(2, 8, 4, removed, cc_major=9)


def test_tma_names_parse_into_refusal_keywords():
    assert tuning.parse_tma("tma:64:256:4") == {
        "chunk_kb": 64, "threads": 256, "pieces": 4, "bulk_store": 0}
    assert tuning.parse_tma("tma:128:512:1:bulk") == {
        "chunk_kb": 128, "threads": 512, "pieces": 1, "bulk_store": 1}
    for bad in ("tma:64:256", "cluster:4096", "tma:64:256:4:fast", "tma_grid:1:256:1"):
        with pytest.raises(ValueError, match="not a tma configuration"):
            tuning.parse_tma(bad)


def test_every_tuned_tma_config_is_a_valid_knob_set():
    names = [n for n in tuning.tuned_names() if n.startswith("tma:")]
    assert len(names) == len(tuning.TMA_CONFIGS) == 27
    for n in names:
        k = tuning.parse_tma(n)
        assert k["threads"] in cuda_ext.TMA_THREADS and k["pieces"] in cuda_ext.TMA_PIECES
        assert k["chunk_kb"] in cuda_ext.TMA_CHUNK_KB


def test_tuned_names_are_the_labels_of_the_remaining_configurations():
    # fusebench tune cuda labels: the removed coop:<chunk> and tma_grid:... are gone, the others kept
    names = tuning.tuned_names()
    assert [n for n in names if not n.startswith("tma:")] == [
        "cluster:4096", "cluster:8192", "cluster:16384", "cluster:32768",
        "split:1024", "split:1024:nopdl", "split:2048", "split:2048:nopdl", "split:4096",
        "split:4096:nopdl", "split:8192", "split:8192:nopdl", "split:16384", "split:16384:nopdl",
        "warp:1", "warp:2", "warp:8"]


def test_tuned_scope_and_variant_filter():
    assert tuning.tuned_scope("tma:64:256:4", 4096)
    assert not tuning.tuned_scope("tma:64:256:4", 128)
    assert tuning.tuned_scope("split:4096", 32769) and not tuning.tuned_scope("split:4096", 32768)
    assert tuning.tuned_scope("cluster:8192", 4097) and not tuning.tuned_scope("cluster:8192", 4096)
    assert tuning.tuned_scope("warp:2", 256) and not tuning.tuned_scope("warp:2", 257)
    assert tune.keep("tma:64:256:4", ["tma"]) and not tune.keep("cluster:4096", ["tma"])
    assert tune.keep("split:4096", ["split"]) and not tune.keep("split_row", ["split"])  # whole words
    assert tune.keep("quack", None) and not tune.keep("quack", ["auto", "tma"])


@pytest.mark.parametrize("shape", [(16384, 1024), (1024, 32768), (8192, 16384), (4096, 65536)])
@pytest.mark.parametrize("dtype_name", ["float32", "bfloat16"])
def test_triton_softmax_candidates_are_distinct_plans(shape, dtype_name):
    pytest.importorskip("triton")
    import torch
    from fusebench.kernels.softmax import triton as ts

    dtype = getattr(torch, dtype_name)
    x = torch.empty(shape, dtype=dtype, device="meta")  # the list needs only the shape and dtype
    candidates = tuning.triton_plans(x)
    labels = [label for label, _ in candidates]
    assert labels[0].startswith("default: ") and len(set(labels)) == len(labels)
    assert candidates[0][1] is None  # the default: softmax's own plan
    default = ts.plan(*shape, x.element_size(), ts.INTERPRETER_SM_COUNT, cooperative=False)
    plans = [p for _, p in candidates[1:]]
    assert all(isinstance(p, ts.SoftmaxPlan) and p != default for p in plans)
    assert len(set(plans)) == len(plans)
    assert all(not p.recompute for p in plans) or dtype == torch.bfloat16
    if default.recompute:  # the plain form is timed beside it
        assert any(p.kind == "row" and not p.recompute and p.block == default.block for p in plans)
