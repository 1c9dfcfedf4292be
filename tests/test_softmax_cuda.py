"""The hand-written CUDA softmax (fusebench.kernels.cuda_ext): every variant through the correctness gate,
cluster and tma at every configuration, their refusals, and the automatic pick.
Marked ``gpu`` (skipped without one; run on the H200)."""

import pytest
import torch
from kernelcheck import DTYPES, softmax_ref

from fusebench.measure import correctness
from fusebench.ops import get_op

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("variant, shape", [
    ("warp_per_row", (300, 1000)), ("block_per_row", (64, 5000)), ("online", (16, 70001)),
    ("split_row", (3, 300000)), ("online", (8, 1000)), ("block_per_row", (5, 33)),
    # 16-byte sub-warp groups, several rows per group, a partial last block.
    ("warp_per_row", (1001, 128)), ("warp_per_row", (77, 8)), ("warp_per_row", (333, 256)),
    ("warp_per_row", (50, 100)), ("split_row", (1, 1 << 20)), ("split_row", (2, 70000)),
    ("online_l2", (1000, 4096)), ("online_l2", (3, 65536)), ("online_l2", (400, 1001)),
    ("tma", (256, 262144)), ("tma", (1024, 32768)), ("tma", (3, 100000)), ("tma", (50, 1000)),
])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_every_cuda_softmax_variant_passes_the_gate(variant, shape, dtype):
    from fusebench.kernels import cuda_ext

    assert cuda_ext.unavailable_reason() is None
    x = torch.randn(shape, device="cuda", dtype=dtype)
    r = correctness.check(get_op("softmax"), lambda: cuda_ext.softmax_variant(x, variant), x)
    assert r.passed, r.reason


def _assert_matches_reference(y: torch.Tensor, x: torch.Tensor, what: str) -> None:
    """y against float64 torch.softmax within the gate's dtype tolerance (normwise, per the gate);
    NaN exactly where the reference has NaN (rows of all -inf)."""
    ref = softmax_ref(x)
    nan = ref.isnan()
    assert torch.equal(y.isnan(), nan), f"{what}: NaN where the reference has none, or vice versa"
    err = correctness.relative_error(y[~nan], ref[~nan])
    tol = correctness.TOLERANCE[x.dtype]
    assert err <= tol, f"{what}: normwise relative error {err:.3g} > {tol:.3g}"


def test_auto_picks_cluster_for_long_rows():
    from fusebench.kernels import cuda_ext

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    v = cuda_ext.VARIANTS
    picks = {(r, c, e): cuda_ext.pick_variant(r, c, e, sms)
             for r, c, e in [(256, 262144, 4), (4096, 65536, 4), (4096, 65536, 2), (256, 262144, 2),
                             (1, 1 << 20, 4), (1, 1 << 20, 2), (200, 32769, 2), (4096, 32768, 4),
                             (8192, 16384, 2), (8192, 16384, 4), (1024, 32768, 2), (4, 65536, 4)]}
    long_rows = [(256, 262144, 4), (4096, 65536, 4), (4096, 32768, 4), (4096, 65536, 2),
                 (256, 262144, 2), (1024, 32768, 2), (200, 32769, 2)]
    assert {picks[k] for k in long_rows} == {v["cluster"]}  # (200, 32769, 2) falls back at run time
    assert picks[(8192, 16384, 2)] == v["tma"]  # 16-bit rows of 16384: tma measured ahead
    assert picks[(8192, 16384, 4)] == v["block_per_row"]  # float32 rows up to 16384
    # rows whose CTAs fill fewer than half the SMs, or that 16 CTAs cannot hold: split_row
    assert picks[(1, 1 << 20, 4)] == picks[(1, 1 << 20, 2)] == picks[(4, 65536, 4)] == v["split_row"]
    # Where an automatic cluster pick cannot run (cols not a multiple of the vector), softmax
    # falls back.
    for x in (torch.randn(3, 40001, device="cuda"), torch.randn(200, 40001, device="cuda").half(),
              torch.randn(3, 32769, device="cuda").bfloat16(), torch.randn(1, (1 << 20) + 1, device="cuda")):
        r = correctness.check(get_op("softmax"), lambda x=x: cuda_ext.softmax(x), x)
        assert r.passed, r.reason


# ---- cluster (variant 7): a row split over a thread-block cluster (sm_90) -------------------------


@pytest.mark.parametrize("chunk", [0, 4096, 8192, 16384, 32768, 65536])
@pytest.mark.parametrize("shape", [(256, 262144), (9, 65536), (5, 40000), (3, 100000), (11, 4104)], ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_cluster_every_chunk_matches_the_reference(chunk, shape, dtype):
    from fusebench.kernels import cuda_ext

    x = torch.randn(shape, device="cuda", dtype=dtype) * 4
    x[0, : shape[1] // 2] = float("-inf")  # whole CTAs of -inf must not poison the row
    x[0, -3] = float("-inf")  # and a single -inf inside a packed 16-bit word
    if shape[0] > 2:
        x[1] = float("-inf")  # an all -inf row gives NaN, as torch.softmax
        x[2] = 7.0  # all equal
    if chunk not in (0, *cuda_ext.CLUSTER_CHUNKS):
        with pytest.raises(ValueError, match=r"chunk must be 0 or one of \(4096, 8192, 16384, 32768\)"):
            cuda_ext.softmax_cluster(x, chunk)
        return
    default = cuda_ext.cluster_default_chunk(shape[1], x.element_size())
    fits = [c for most in (8, 16) for c in (4096, 8192, 16384, 32768) if -(-shape[1] // c) <= most]
    assert default == (16384 if x.element_size() == 2 else fits[0])
    if -(-shape[1] // (chunk or default)) > 16:
        with pytest.raises(ValueError, match="at most 16 CTAs"):
            cuda_ext.softmax_cluster(x, chunk)
        return
    y = cuda_ext.softmax_cluster(x, chunk)
    _assert_matches_reference(y, x, f"cluster:{chunk} {shape} {dtype}")


def test_cluster_refuses_what_it_cannot_run():
    from fusebench.kernels import cuda_ext

    with pytest.raises(ValueError, match="softmax_cluster"):
        cuda_ext.softmax_cluster(torch.randn(4, 40001, device="cuda"), 0)  # not a multiple of 4
    with pytest.raises(ValueError, match="softmax_cluster"):
        cuda_ext.softmax_cluster(torch.randn(4, 40000, device="cuda"), 1000)  # no such chunk
    for bad in (99, "tiled"):
        with pytest.raises(ValueError, match="unknown variant"):
            cuda_ext.softmax_variant(torch.randn(4, 100, device="cuda"), bad)
    with pytest.raises(ValueError, match="warp_per_row needs cols"):
        cuda_ext.softmax_variant(torch.randn(4, 2000, device="cuda"), "warp_per_row")
    y = cuda_ext.softmax_variant(torch.zeros(2, 65536, device="cuda"), "cluster")
    assert torch.allclose(y, torch.full_like(y, 1 / 65536))  # the next launch still runs


# ---- tma (variant 8): row chunks staged in shared memory by bulk copies (sm_90) -----------------


def _special_rows(shape, dtype):
    x = torch.randn(shape, device="cuda", dtype=dtype) * 4
    x[0, : shape[1] // 2] = float("-inf")  # whole CTAs of -inf must not poison the row
    x[0, -3] = float("-inf")
    if shape[0] > 2:
        x[1] = float("-inf")  # an all -inf row gives NaN, as torch.softmax
        x[2] = 7.0  # all equal
    return x


@pytest.mark.parametrize("name", [pytest.param(n, id=n) for n in (
    "tma:16:128:1:0", "tma:32:256:4:0", "tma:64:512:4:0", "tma:128:256:2:0", "tma:192:128:8:0",
    "tma:64:256:4:1", "tma:0:0:0:0")])
@pytest.mark.parametrize("shape", [(256, 262144), (9, 65536), (5, 40000), (3, 100000), (11, 4104),
                                   (1000, 1024), (4, 8)], ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_tma_every_config_matches_the_reference(name, shape, dtype):
    from fusebench.kernels import cuda_ext

    kb, threads, pieces, bulk = (int(p) for p in name.split(":")[1:])
    x = _special_rows(shape, dtype)
    why = cuda_ext.refusal(shape[0], shape[1], x.element_size(), "tma", cc_major=9, chunk_kb=kb,
                           threads=threads, pieces=pieces, bulk_store=bulk)
    if why is not None:
        assert "at most 16" in why, why  # the only refusal of these aligned shapes
        with pytest.raises(ValueError, match="softmax_tma: .*at most 16"):
            cuda_ext.softmax_tma(x, kb, threads, pieces, bool(bulk))
        return
    y = cuda_ext.softmax_tma(x, kb, threads, pieces, bool(bulk))
    _assert_matches_reference(y, x, f"{name} {shape} {dtype}")
    xg = torch.randn_like(x)
    fn = lambda: cuda_ext.softmax_tma(xg, kb, threads, pieces, bool(bulk))  # noqa: E731
    r = correctness.check(get_op("softmax"), fn, xg)
    assert r.passed, r.reason


def test_tma_refusals_are_clear_and_fall_back_in_auto():
    from fusebench.kernels import cuda_ext

    x = torch.randn(4, 40001, device="cuda")
    with pytest.raises(ValueError,
                       match="softmax_tma: tma: needs 16-byte aligned rows and cols a multiple of 4"):
        cuda_ext.softmax_tma(x)
    with pytest.raises(ValueError, match="softmax_tma: tma: threads must be"):
        cuda_ext.softmax_tma(torch.randn(4, 40000, device="cuda"), threads=100)
    with pytest.raises(ValueError, match="softmax_tma: tma: chunk_kb must be"):
        cuda_ext.softmax_tma(torch.randn(4, 40000, device="cuda"), chunk_kb=40)
    with pytest.raises(ValueError, match="softmax_tma: tma: needs 64 CTAs"):
        cuda_ext.softmax_tma(torch.randn(1, 1 << 20, device="cuda"), chunk_kb=64)
    misaligned = torch.randn(4 * 40000 + 1, device="cuda")[1:].view(4, 40000)
    with pytest.raises(ValueError, match="16-byte aligned"):
        cuda_ext.softmax_variant(misaligned, "tma")
    misaligned16 = torch.randn(4 * 40000 + 1, device="cuda").bfloat16()[1:].view(4, 40000)
    for xa in (x, misaligned16):  # auto: tma refused at run time, the classic pick runs
        r = correctness.check(get_op("softmax"), lambda xa=xa: cuda_ext.softmax(xa), xa)
        assert r.passed, r.reason
