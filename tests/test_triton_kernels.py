"""Tests of the Triton GELU and softmax kernels against float64 references.

Without a CUDA device the kernels run in the Triton interpreter (``TRITON_INTERPRET=1``, set
below before triton is imported) on CPU tensors; shapes are kept small for it.
"""

import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

triton = pytest.importorskip("triton")

from kernels import triton_softmax as ts
from kernels.triton_gelu import GeluConfig, gelu
from kernels.triton_softmax import SoftmaxPlan, plan, softmax

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # interpreter: exp overflow

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
DTYPES = (torch.float32, torch.bfloat16, torch.float16)
TOL = {torch.float32: (1e-5, 1e-6), torch.bfloat16: (1e-2, 1e-2), torch.float16: (1e-2, 1e-3)}
H200_SMS = 132


def _close(y: torch.Tensor, ref: torch.Tensor, dtype: torch.dtype) -> None:
    rtol, atol = TOL[dtype]
    assert y.dtype == dtype and y.shape == ref.shape and y.is_contiguous()
    torch.testing.assert_close(y.double(), ref, rtol=rtol, atol=atol, equal_nan=True)


def _randn(shape, dtype, scale=3.0, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g, dtype=torch.float32) * scale).to(dtype).to(DEVICE)


# --- GELU ------------------------------------------------------------------------------------


def _gelu_ref(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.gelu(x.double(), approximate="tanh")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1,), (7,), (100,), (1000,), (3, 5, 7), (3, 4099), ()])
def test_gelu_matches_reference(shape, dtype):
    x = _randn(shape, dtype)
    _close(gelu(x), _gelu_ref(x), dtype)


def test_gelu_extremes():
    x = torch.tensor([-1e4, -30.0, -8.0, -1e-20, 0.0, 1e-20, 8.0, 30.0, 1e4], device=DEVICE)
    _close(gelu(x), _gelu_ref(x), torch.float32)


@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16))
def test_gelu_non_contiguous(dtype):
    base = _randn((40, 30), dtype)
    for x in (base.t(), base[:, ::3], base[5:, 2:17]):
        assert not x.is_contiguous()
        _close(gelu(x), _gelu_ref(x), dtype)


@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16))
@pytest.mark.parametrize(
    "config",
    [
        GeluConfig(256, 2),  # several programs, masked last block
        GeluConfig(64, 1, programs_per_sm=1),  # persistent: 132 programs stride over 157 blocks
        GeluConfig(128, 4, programs_per_sm=4, evict_first=True, streaming_store=True),
        GeluConfig(16384, 8, evict_first=True),  # one program, mostly masked
        GeluConfig(64, 1, programs_per_sm=1, even=True),  # 132 programs, runs of 2 blocks, some none
    ],
)
def test_gelu_forced_configs(config, dtype):
    x = _randn((10001,), dtype)
    _close(gelu(x, _config=config), _gelu_ref(x), dtype)


def test_gelu_config_validation():
    with pytest.raises(ValueError):
        GeluConfig(100, 4)
    with pytest.raises(ValueError):
        GeluConfig(128, 3)
    with pytest.raises(ValueError):
        GeluConfig(128, 4, programs_per_sm=-1)
    with pytest.raises(ValueError, match="even needs"):
        GeluConfig(128, 4, even=True)


@pytest.mark.skipif(DEVICE == "cuda", reason="interpreter behaviour")
def test_gelu_pdl_config_needs_a_gpu():
    with pytest.raises(ValueError, match="needs a CUDA device"):
        gelu(_randn((100,), torch.float32), _config=GeluConfig(128, 4, pdl=True))


@pytest.mark.parametrize("shape", [(0,), (0, 5), (4, 0, 3)])
def test_gelu_empty(shape):
    y = gelu(torch.empty(shape, device=DEVICE))
    assert y.shape == shape and y.dtype == torch.float32


@pytest.mark.parametrize("dtype", (torch.float64, torch.int32))
def test_gelu_rejects_dtype(dtype):
    with pytest.raises(TypeError, match="unsupported dtype"):
        gelu(torch.zeros(4, dtype=dtype, device=DEVICE))


# --- softmax: numerics -----------------------------------------------------------------------


def _softmax_ref(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x.double(), dim=-1)


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
}


def _check_softmax(y: torch.Tensor, x: torch.Tensor) -> None:
    _close(y, _softmax_ref(x), x.dtype)
    yd = y.double()
    assert yd.min() >= 0 and yd.max() <= 1
    sum_tol = 1e-5 if x.dtype == torch.float32 else 2e-2
    assert torch.allclose(yd.sum(-1), torch.ones_like(yd.sum(-1)), atol=sum_tol)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1,), (7,), (1000,), (3, 100), (2, 3, 33), (5, 1), ()])
def test_softmax_default_plan(shape, dtype):
    x = _randn(shape, dtype)
    _check_softmax(softmax(x), x)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(FORCED))
def test_softmax_forced_plans(name, dtype):
    for shape in ((3, 100), (2, 2, 61), (1,), (4, 16)):
        x = _randn(shape, dtype, scale=5.0)
        _check_softmax(softmax(x, _plan=FORCED[name]), x)


@pytest.mark.parametrize("name", sorted(FORCED))
def test_softmax_large_magnitudes_and_neg_inf(name):
    x = _randn((3, 100), torch.float32, scale=1e3)
    x[1, :60] = float("-inf")  # whole chunks of -inf must not poison the row
    x[2, 7] = 80.0 + x[2].max()
    _check_softmax(softmax(x, _plan=FORCED[name]), x)
    all_neg_inf = torch.full((2, 100), float("-inf"), device=DEVICE)
    assert softmax(all_neg_inf, _plan=FORCED[name]).isnan().all()  # as torch.softmax


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
        x = _randn(shape, torch.float32)
        _check_softmax(softmax(x), x)


@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16))
def test_softmax_non_contiguous(dtype):
    base = _randn((40, 30), dtype)
    for x in (base.t(), base[:, ::3], base[5:, 2:17]):
        assert not x.is_contiguous()
        _check_softmax(softmax(x), x)
        _check_softmax(softmax(x, _plan=FORCED["split-loop"]), x)


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
        softmax(torch.zeros(2, 200, device=DEVICE), _plan=SoftmaxPlan("row", 128, 4))
    with pytest.raises(ValueError):
        SoftmaxPlan("split", 16, 1, chunk=24)
    with pytest.raises(ValueError):
        SoftmaxPlan("tiled", 16, 1)
    with pytest.raises(ValueError):
        SoftmaxPlan("coop", 16, 1, programs_per_sm=0)
    with pytest.raises(ValueError):
        SoftmaxPlan("row", 100, 4)
    with pytest.raises(ValueError):
        SoftmaxPlan("online", 16, 1, tail=24)


# --- softmax: plan ---------------------------------------------------------------------------

#: The benchmark's default grid (plus short rows and few long rows) and the kind each gets.
TARGETS = {
    (65536, 128): "row",
    (16384, 1024): "row",
    (4096, 4096): "row",
    (32768, 4096): "row",
    (8192, 16384): "row",
    (1024, 32768): "row",
    (4096, 65536): "online",
    (256, 262144): "split",
    (8, 262144): "split",
    (1, 1048576): "split",  # "coop" on a GPU: test_plan_coop_only_where_programs_run_concurrently
}


@pytest.mark.parametrize("element_size", (4, 2))
@pytest.mark.parametrize("shape", sorted(TARGETS))
def test_plan_targets(shape, element_size):
    n_rows, n_cols = shape
    p = plan(n_rows, n_cols, element_size, H200_SMS)
    assert p.kind == TARGETS[shape]
    tile = p.block * p.rows_per_program
    assert tile <= 2**20  # Triton's largest tensor
    assert tile // (32 * p.num_warps) <= 32  # values per thread: no spilling
    assert p.num_warps <= 32  # Triton's largest program
    if p.kind == "row":
        assert p.block >= n_cols and p.block < 2 * max(n_cols, 16)
        programs = triton.cdiv(n_rows, p.rows_per_program)
        assert programs >= min(n_rows, ts.ROW_MIN_PROGRAMS_PER_SM * H200_SMS)
    if p.kind == "split":
        n_chunks = triton.cdiv(n_cols, p.chunk)
        assert n_chunks <= ts.SPLIT_MAX_CHUNKS
        assert n_rows * n_chunks >= ts.SPLIT_MIN_PROGRAMS_PER_SM * H200_SMS


def test_plan_short_rows_are_packed():
    p = plan(65536, 128, 4, H200_SMS)
    assert p.rows_per_program == 32 and triton.cdiv(65536, p.rows_per_program) == 2048


def test_plan_every_kind_reachable_and_thresholds():
    sms = H200_SMS
    assert plan(10, ts.ROW_MAX_COLS, 4, sms).kind == "row"
    rows_split = ts.SPLIT_MAX_ROWS_PER_SM * sms
    assert plan(rows_split - 1, ts.ROW_MAX_COLS + 1, 4, sms).kind == "split"
    assert plan(rows_split, ts.ROW_MAX_COLS + 1, 4, sms).kind == "online"
    huge = plan(1, 2**31 - 2**20, 2, sms)  # chunks capped; programs loop
    assert huge.kind == "split" and triton.cdiv(2**31 - 2**20, huge.chunk) <= ts.SPLIT_MAX_CHUNKS
    with pytest.raises(ValueError):
        plan(1, 10, 8, sms)


def test_plan_coop_only_where_programs_run_concurrently(monkeypatch):
    long_rows = ((256, 262144), (4096, 65536), (1, 1048576))
    assert all(plan(*shape, 4, H200_SMS, cooperative=True).kind != "coop" for shape in long_rows)  # off
    monkeypatch.setattr(ts, "COOP_MAX_CHUNKS_PER_SM", 1)
    monkeypatch.setattr(ts, "GRID_PROGRAMS_PER_SM", 0)  # "grid" would take the few-row shapes
    ts.plan.cache_clear()
    try:
        for shape in long_rows:
            for item in (4, 2):
                p = plan(*shape, item, H200_SMS, cooperative=True)
                assert p.kind == "coop" and p.block * item == ts.COOP_BLOCK_BYTES
                assert p.block // (32 * p.num_warps) <= 32  # values per thread: no spilling
                assert plan(*shape, item, H200_SMS).kind != "coop"  # the interpreter
        assert plan(1024, 32768, 4, H200_SMS, cooperative=True).kind == "row"
        # A row of more blocks than SMs could wait on a program that is not resident: never coop.
        too_long = H200_SMS * (ts.COOP_BLOCK_BYTES // 4) + 1
        assert plan(1, too_long, 4, H200_SMS, cooperative=True).kind == "split"
    finally:
        ts.plan.cache_clear()


def test_plan_for_few_long_rows_on_a_gpu(monkeypatch):
    for item in (4, 2):
        # default: split with kernel B as a PDL launch (measured ahead of grid, GRID_DEFAULT off)
        p = plan(1, 1 << 20, item, H200_SMS, cooperative=True)
        assert p.kind == "split" and p.pdl and p.chunk == p.block == ts.SPLIT_BLOCK // 2
        assert not plan(1, 1 << 20, item, H200_SMS).pdl  # the interpreter: no PDL
        online = plan(4096, 65536, item, H200_SMS, cooperative=True)
        assert online.kind == "online" and online.tail == ts.ONLINE_TAIL[item]
        assert online.tail < 65536 and online.l2_hints == ts.ONLINE_L2_HINTS
    monkeypatch.setattr(ts, "GRID_DEFAULT", True)
    plan.cache_clear()
    try:
        for item in (4, 2):
            p = plan(1, 1 << 20, item, H200_SMS, cooperative=True)
            assert p.kind == "grid" and p.block == ts.GRID_BLOCK and p.num_warps == ts._warps(p.block)
            assert triton.cdiv(1 << 20, p.block) <= ts.GRID_PROGRAMS_PER_SM * H200_SMS
            eight = plan(8, 262144, item, H200_SMS, cooperative=True)  # 512 blocks of 4096: doubled once
            assert eight.kind == "grid" and eight.block == 2 * ts.GRID_BLOCK
            assert plan(256, 262144, item, H200_SMS, cooperative=True).kind == "split"
    finally:
        plan.cache_clear()


def test_sixteen_bit_row_tiles_take_fewer_warps():
    assert plan(16384, 1024, 2, H200_SMS).num_warps == 8  # a 16 KB tile of 8 rows
    assert plan(8192, 16384, 2, H200_SMS).num_warps == 32
    assert plan(16384, 1024, 4, H200_SMS).num_warps == 8  # float32: unchanged


@pytest.mark.skipif(DEVICE == "cuda", reason="interpreter behaviour")
def test_softmax_grid_counters_and_persistent_rows(monkeypatch):
    x = _randn((5, 100), torch.float32, scale=5.0)
    x[3] = float("-inf")
    softmax(x, _plan=FORCED["grid"])
    count = next(iter(ts._GRID_COUNT.values()))
    before = count.clone()
    for _ in range(3):  # the counters are never reset: each call adds EPOCH to each row's
        y = softmax(x, _plan=FORCED["grid"])
        _check_softmax(y[[0, 1, 2, 4]], x[[0, 1, 2, 4]])
        assert y[3].isnan().all()
    assert ((count - before)[:5] == 3 * ts.GRID_EPOCH).all() and (count == before)[5:].all()
    assert not (count % ts.GRID_EPOCH).any()
    with pytest.raises(ValueError, match="needs a GPU"):
        softmax(x, _plan=SoftmaxPlan("grid", block=32, num_warps=1))
    with pytest.raises(ValueError, match="pdl plan needs a CUDA device"):
        softmax(x, _plan=SoftmaxPlan("split", block=32, num_warps=1, chunk=32, pdl=True))
    # One SM: a single persistent program strides over the 4 tiles of 2 rows (last one masked).
    monkeypatch.setattr(ts, "INTERPRETER_SM_COUNT", 1)
    x = _randn((7, 100), torch.bfloat16, scale=5.0)
    _check_softmax(softmax(x, _plan=FORCED["row-persistent"]), x)


@pytest.mark.skipif(DEVICE == "cuda", reason="interpreter behaviour")
def test_softmax_coop_interpreter(monkeypatch):
    # One SM: a single group of one program walks every row, resetting the row's counters.
    monkeypatch.setattr(ts, "INTERPRETER_SM_COUNT", 1)
    x = _randn((5, 100), torch.float32, scale=5.0)
    x[3] = float("-inf")
    y = softmax(x, _plan=FORCED["coop"])
    _check_softmax(y[[0, 1, 2, 4]], x[[0, 1, 2, 4]])
    assert y[3].isnan().all()
    assert not any(buf.any() for buf in ts._COOP_SYNC.values())  # left zero for the next call
    with pytest.raises(ValueError, match="needs a GPU"):
        softmax(x, _plan=SoftmaxPlan("coop", block=32, num_warps=1))


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
    x = _randn(shape, dtype)
    x[0, : shape[1] // 2] = float("-inf")  # whole blocks of -inf must not poison the row
    p = SoftmaxPlan("coop", block=block, num_warps=ts._warps(block), programs_per_sm=per_sm, l2_hints=hints)
    _check_softmax(softmax(x, _plan=p), x)
    _check_softmax(softmax(x[:, :-1], _plan=p), x[:, :-1])  # ragged, unaligned rows: counters reset
    assert not any(buf.any() for buf in ts._COOP_SYNC.values())
    if shape[0] > 1:
        x[1] = float("-inf")
        assert softmax(x, _plan=p)[1].isnan().all()  # as torch.softmax


@pytest.mark.skipif(DEVICE != "cuda", reason="rows across co-resident programs need a GPU")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "shape, block", [((1, 1 << 20), 4096), ((1, 1 << 20), 8192), ((3, 100003), 2048), ((8, 262144), 8192)]
)
def test_softmax_grid_and_pdl_split_across_programs(shape, block, dtype):
    x = _randn(shape, dtype)
    x[0, : shape[1] // 2] = float("-inf")  # whole blocks of -inf must not poison the row
    grid = SoftmaxPlan("grid", block=block, num_warps=ts._warps(block), programs_per_sm=2)
    pdl = SoftmaxPlan("split", block=block, num_warps=ts._warps(block), chunk=block, pdl=True)
    for p in (grid, pdl):
        for _ in range(2):  # the grid counters carry over from call to call
            _check_softmax(softmax(x, _plan=p), x)
            _check_softmax(softmax(x[:, :-1], _plan=p), x[:, :-1])  # ragged, unaligned rows
    if shape[0] > 1:
        x[1] = float("-inf")
        assert softmax(x, _plan=grid)[1].isnan().all()  # as torch.softmax
    with pytest.raises(ValueError, match="resident programs"):
        softmax(x, _plan=SoftmaxPlan("grid", block=16, num_warps=1, programs_per_sm=1))


def test_sm_count_cpu():
    assert ts.sm_count(torch.device("cpu")) == ts.INTERPRETER_SM_COUNT
