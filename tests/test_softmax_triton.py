"""The Triton softmax kernels (fusebench.kernels.softmax.triton, and triton_coop's "grid" and "coop" plans
of its tuning space): every plan kind against the float64 reference, with the invariants (outputs in
[0, 1], rows summing to 1).

Without a CUDA device they run in the Triton interpreter on CPU tensors; shapes are kept small for
it; the tests of rows across co-resident programs need a GPU.
"""

import pytest
import torch

triton = pytest.importorskip("triton")

from fusebench.kernels.softmax import triton as ts
from fusebench.kernels.softmax import triton_coop as tc
from fusebench.kernels.softmax.triton import SoftmaxPlan, plan, softmax
from kernelcheck import DEVICE, DTYPES, close, randn, softmax_ref

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # interpreter: exp overflow


FORCED = {
    "row": SoftmaxPlan("row", block=128, num_warps=4, rows_per_program=2),
    "online": SoftmaxPlan("online", block=16, num_warps=1),
    "split": SoftmaxPlan("split", block=16, num_warps=1, chunk=16),
    "split-loop": SoftmaxPlan("split", block=16, num_warps=1, chunk=48),
    # One program per row here (block >= every test row), so the interpreter can run it; the
    # multi-program rows are in test_softmax_coop_rows_across_programs (GPU).
    "coop": SoftmaxPlan("coop", block=128, num_warps=4),
    "grid": SoftmaxPlan("grid", block=128, num_warps=4),  # one program per row (interpreter)
    # head of 100 - 32 = 68: four full 16-element chunks and a partial one; rows <= 32: no head
    "online-tail": SoftmaxPlan("online", block=16, num_warps=1, tail=32, l2_hints=True),
    "online-tail-only": SoftmaxPlan("online", block=16, num_warps=1, tail=128),
    "row-persistent": SoftmaxPlan("row", block=128, num_warps=4, rows_per_program=2, persistent=True),
    "row-recompute": SoftmaxPlan("row", block=128, num_warps=4, rows_per_program=2, recompute=True),
    "row-persistent-recompute": SoftmaxPlan("row", block=128, num_warps=4, persistent=True, recompute=True),
    "online-persistent": SoftmaxPlan("online", block=16, num_warps=1, tail=32, persistent=True),
}


def forced(x: torch.Tensor, p: SoftmaxPlan) -> torch.Tensor:
    """Softmax of ``x`` with the forced plan ``p``: "grid" and "coop" through their own launcher."""
    return tc.softmax(x, p) if p.kind in ("coop", "grid") else softmax(x, _plan=p)


def _check_softmax(y: torch.Tensor, x: torch.Tensor) -> None:
    close(y, softmax_ref(x), x.dtype)
    yd = y.double()
    assert yd.min() >= 0 and yd.max() <= 1
    sum_tol = 1e-5 if x.dtype == torch.float32 else 2e-2
    assert torch.allclose(yd.sum(-1), torch.ones_like(yd.sum(-1)), atol=sum_tol)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1,), (7,), (1000,), (3, 100), (2, 3, 33), (5, 1), ()])
def test_softmax_default_plan(shape, dtype):
    x = randn(shape, dtype)
    _check_softmax(softmax(x), x)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(FORCED))
def test_softmax_forced_plans(name, dtype):
    for shape in ((3, 100), (2, 2, 61), (1,), (4, 16)):
        x = randn(shape, dtype, scale=5.0)
        _check_softmax(forced(x, FORCED[name]), x)


@pytest.mark.parametrize("name", sorted(FORCED))
def test_softmax_large_magnitudes_and_neg_inf(name):
    x = randn((3, 100), torch.float32, scale=1e3)
    x[1, :60] = float("-inf")  # whole chunks of -inf must not poison the row
    x[2, 7] = 80.0 + x[2].max()
    _check_softmax(forced(x, FORCED[name]), x)
    all_neg_inf = torch.full((2, 100), float("-inf"), device=DEVICE)
    assert forced(all_neg_inf, FORCED[name]).isnan().all()  # as torch.softmax


def test_softmax_default_online_split_and_packed_rows(monkeypatch):
    # With one SM assumed, small inputs reach every default branch.
    monkeypatch.setattr(ts, "INTERPRETER_SM_COUNT", 1)
    if DEVICE == "cuda":
        pytest.skip("sm_count comes from the device")
    cases = {
        "online": (4, ts.ROW_MAX_COLS + 100),
        "split": (3, ts.ROW_MAX_COLS + 100),
        "row": (1000, 100),
    }
    for kind, shape in cases.items():
        p = plan(shape[0], shape[1], 4, 1)
        assert p.kind == kind
        if kind == "row":
            assert p.rows_per_program > 1 and shape[0] % p.rows_per_program  # masked last tile
        x = randn(shape, torch.float32)
        _check_softmax(softmax(x), x)


@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16))
def test_softmax_non_contiguous(dtype):
    base = randn((40, 30), dtype)
    for x in (base.t(), base[:, ::3], base[5:, 2:17]):
        assert not x.is_contiguous()
        _check_softmax(softmax(x), x)
        _check_softmax(forced(x, FORCED["split-loop"]), x)


@pytest.mark.parametrize("shape", [(0,), (0, 5), (5, 0), (4, 0, 3)])
def test_softmax_empty(shape):
    y = softmax(torch.empty(shape, dtype=torch.bfloat16, device=DEVICE))
    assert y.shape == shape and y.dtype == torch.bfloat16


@pytest.mark.parametrize("dtype", (torch.float64, torch.int64))
def test_softmax_rejects_dtype(dtype):
    with pytest.raises(TypeError, match="unsupported dtype"):
        softmax(torch.zeros(4, dtype=dtype, device=DEVICE))


def test_softmax_rejects_bad_plans():
    with pytest.raises(ValueError):
        forced(torch.zeros(2, 200, device=DEVICE), SoftmaxPlan("row", 128, 4))
    with pytest.raises(ValueError):
        SoftmaxPlan("split", 16, 1, chunk=24)
    with pytest.raises(ValueError):
        SoftmaxPlan("tiled", 16, 1)
    with pytest.raises(ValueError, match="triton_coop"):  # the default launcher runs no cooperative plan
        softmax(torch.zeros(2, 20, device=DEVICE), _plan=SoftmaxPlan("coop", 32, 1))
    with pytest.raises(ValueError, match="coop and grid plans, not 'row'"):
        tc.softmax(torch.zeros(2, 20, device=DEVICE), SoftmaxPlan("row", 32, 1))
    with pytest.raises(ValueError):
        SoftmaxPlan("coop", 16, 1, programs_per_sm=0)
    with pytest.raises(ValueError):
        SoftmaxPlan("row", 100, 4)
    with pytest.raises(ValueError):
        SoftmaxPlan("online", 16, 1, tail=24)


@pytest.mark.skipif(DEVICE == "cuda", reason="interpreter behaviour")
def test_softmax_grid_counters_and_persistent_rows(monkeypatch):
    x = randn((5, 100), torch.float32, scale=5.0)
    x[3] = float("-inf")
    forced(x, FORCED["grid"])
    count = next(iter(tc._GRID_COUNT.values()))
    before = count.clone()
    for _ in range(3):  # the counters are never reset: each call adds EPOCH to each row's
        y = forced(x, FORCED["grid"])
        _check_softmax(y[[0, 1, 2, 4]], x[[0, 1, 2, 4]])
        assert y[3].isnan().all()
    assert ((count - before)[:5] == 3 * tc.GRID_EPOCH).all() and (count == before)[5:].all()
    assert not (count % tc.GRID_EPOCH).any()
    with pytest.raises(ValueError, match="needs a GPU"):
        forced(x, SoftmaxPlan("grid", block=32, num_warps=1))
    with pytest.raises(ValueError, match="pdl plan needs a CUDA device"):
        forced(x, SoftmaxPlan("split", block=32, num_warps=1, chunk=32, pdl=True))
    # One SM: a single persistent program strides over the 4 tiles of 2 rows (last one masked).
    monkeypatch.setattr(ts, "INTERPRETER_SM_COUNT", 1)
    x = randn((7, 100), torch.bfloat16, scale=5.0)
    _check_softmax(forced(x, FORCED["row-persistent"]), x)


@pytest.mark.skipif(DEVICE == "cuda", reason="interpreter behaviour")
def test_softmax_coop_interpreter(monkeypatch):
    # One SM: a single group of one program walks every row, resetting the row's counters.
    monkeypatch.setattr(ts, "INTERPRETER_SM_COUNT", 1)
    x = randn((5, 100), torch.float32, scale=5.0)
    x[3] = float("-inf")
    y = forced(x, FORCED["coop"])
    _check_softmax(y[[0, 1, 2, 4]], x[[0, 1, 2, 4]])
    assert y[3].isnan().all()
    assert not any(buf.any() for buf in tc._COOP_SYNC.values())  # left zero for the next call
    with pytest.raises(ValueError, match="needs a GPU"):
        forced(x, SoftmaxPlan("coop", block=32, num_warps=1))


@pytest.mark.skipif(DEVICE != "cuda", reason="rows across co-resident programs need a GPU")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("per_sm, hints", [(2, False), (8, True)])
@pytest.mark.parametrize(
    "shape, block",
    [
        ((256, 262144), 16384),
        ((1, 1 << 20), 8192),
        ((3, 100003), 4096),
        ((700, 40960), 8192),
        ((9, 65536), 1024),
    ],
)
def test_softmax_coop_rows_across_programs(shape, block, per_sm, hints, dtype):
    x = randn(shape, dtype)
    x[0, : shape[1] // 2] = float("-inf")  # whole blocks of -inf must not poison the row
    p = SoftmaxPlan("coop", block=block, num_warps=ts._warps(block), programs_per_sm=per_sm, l2_hints=hints)
    _check_softmax(forced(x, p), x)
    _check_softmax(forced(x[:, :-1], p), x[:, :-1])  # ragged, unaligned rows: counters reset
    assert not any(buf.any() for buf in tc._COOP_SYNC.values())
    if shape[0] > 1:
        x[1] = float("-inf")
        assert forced(x, p)[1].isnan().all()  # as torch.softmax


@pytest.mark.skipif(DEVICE != "cuda", reason="rows across co-resident programs need a GPU")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "shape, block", [((1, 1 << 20), 4096), ((1, 1 << 20), 8192), ((3, 100003), 2048), ((8, 262144), 8192)]
)
def test_softmax_grid_and_pdl_split_across_programs(shape, block, dtype):
    x = randn(shape, dtype)
    x[0, : shape[1] // 2] = float("-inf")  # whole blocks of -inf must not poison the row
    grid = SoftmaxPlan("grid", block=block, num_warps=ts._warps(block), programs_per_sm=2)
    pdl = SoftmaxPlan("split", block=block, num_warps=ts._warps(block), chunk=block, pdl=True)
    for p in (grid, pdl):
        for _ in range(2):  # the grid counters carry over from call to call
            _check_softmax(forced(x, p), x)
            _check_softmax(forced(x[:, :-1], p), x[:, :-1])  # ragged, unaligned rows
    if shape[0] > 1:
        x[1] = float("-inf")
        assert forced(x, grid)[1].isnan().all()  # as torch.softmax
    with pytest.raises(ValueError, match="resident programs"):
        forced(x, SoftmaxPlan("grid", block=16, num_warps=1, programs_per_sm=1))


def test_sm_count_cpu():
    assert ts.sm_count(torch.device("cpu")) == ts.INTERPRETER_SM_COUNT


@pytest.mark.slow
@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_online_persistent_strides_over_rows(dtype):
    # More rows than programs (one per SM): every program takes several rows in turn.
    x = randn((2 * ts.sm_count(torch.device(DEVICE)) + 5, 70), dtype, scale=5.0)
    _check_softmax(forced(x, FORCED["online-persistent"]), x)


@pytest.mark.parametrize("name", ["row-recompute", "row-persistent-recompute"])
def test_softmax_recompute_near_the_bfloat16_limits(name):
    # bfloat16 reaches 3.4e38: x * log2(e) would overflow float32, x - max does not. (The
    # recompute form runs on a GPU; the interpreter checks the plain form on the same values.)
    x = randn((3, 100), torch.bfloat16, scale=1.0)
    x[0, :3] = torch.tensor([3.0e38, 2.9e38, -3.0e38])
    x[1, 5] = -3.0e38
    x[2] = 1.0e38
    y = forced(x, FORCED[name])
    assert torch.isfinite(y.float()).all()
    close(y, softmax_ref(x), x.dtype)
