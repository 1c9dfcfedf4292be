"""CPU tests of softmax's tuning space (fusebench/ops/softmax/tuning.py: fusebench tune cuda|triton) and
the CUDA variant table."""

import pytest

pytest.importorskip("torch")

from fusebench.commands import tune  # noqa: E402
from fusebench.ops import cuda_ext  # noqa: E402
from fusebench.ops.cuda_check import CUDA_DIR  # noqa: E402
from fusebench.ops.softmax import tuning  # noqa: E402


def test_variant_codes_match_the_header():
    header = (CUDA_DIR / "fusebench_cuda.h").read_text()
    assert "Tma = 8," in header and "TmaGrid = 9," in header
    assert cuda_ext.VARIANTS["tma"] == 8 and cuda_ext.VARIANTS["tma_grid"] == 9
    assert "softmax_tma.cu" in {p.name for p in cuda_ext.SOURCES}
    kb = header.split("kTmaChunkBytes[] = {")[1].split("}")[0]
    assert tuple(int(b) // 1024 for b in kb.split(",")) == cuda_ext.TMA_CHUNK_KB


def test_tma_names_parse_into_refusal_keywords():
    assert tuning.parse_tma("tma:64:256:4") == {
        "chunk_kb": 64, "threads": 256, "pieces": 4, "bulk_store": 0}
    assert tuning.parse_tma("tma_grid:2:512:1:bulk") == {
        "ctas_per_sm": 2, "threads": 512, "pieces": 1, "bulk_store": 1}
    for bad in ("tma:64:256", "cluster:4096", "tma:64:256:4:fast"):
        with pytest.raises(ValueError, match="not a tma configuration"):
            tuning.parse_tma(bad)


def test_every_tuned_tma_config_is_a_valid_knob_set():
    names = [n for n in tuning.tuned_names() if n.startswith(("tma:", "tma_grid:"))]
    assert len(names) == len(tuning.TMA_CONFIGS) + len(tuning.TMA_GRID_CONFIGS) == 36
    for n in names:
        k = tuning.parse_tma(n)
        assert k["threads"] in cuda_ext.TMA_THREADS and k["pieces"] in cuda_ext.TMA_PIECES
        assert k.get("chunk_kb", 16) in cuda_ext.TMA_CHUNK_KB
        assert k.get("ctas_per_sm", 1) in cuda_ext.TMA_CTAS_PER_SM


def test_tuned_scope_and_variant_filter():
    assert tuning.tuned_scope("tma:64:256:4", 16384, 4096, 132, 4)
    assert not tuning.tuned_scope("tma:64:256:4", 65536, 128, 132, 4)
    assert tuning.tuned_scope("tma_grid:1:256:1", 1, 1 << 20, 132, 2)
    assert not tuning.tuned_scope("tma_grid:1:256:1", 256, 262144, 132, 2)
    assert tune.keep("tma:64:256:4", ["tma"]) and not tune.keep("tma_grid:1:256:1", ["tma"])
    assert tune.keep("quack", None) and not tune.keep("quack", ["auto", "tma"])


@pytest.mark.parametrize("shape", [(16384, 1024), (1024, 32768), (8192, 16384), (4096, 65536)])
@pytest.mark.parametrize("dtype_name", ["float32", "bfloat16"])
def test_triton_softmax_candidates_are_distinct_plans(shape, dtype_name):
    pytest.importorskip("triton")
    import torch

    from fusebench.ops.softmax import triton as ts

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
