"""The Triton softmax plan (fusebench.kernels.softmax.triton.plan): which kind, block, warps and programs
each shape gets on an H200 (132 SMs), and that every kind is reachable."""

import pytest

triton = pytest.importorskip("triton")

from fusebench.kernels.softmax import triton as ts
from fusebench.kernels.softmax.triton import plan

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # interpreter: exp overflow

H200_SMS = 132

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
    (1, 1048576): "split",  # a PDL launch on a GPU: test_plan_for_few_long_rows_on_a_gpu
}


#: Where 16-bit inputs take another kind: whole rows of raw 16-bit values (recompute).
TARGETS_16BIT = {(4096, 65536): "row"}


@pytest.mark.parametrize("element_size", (4, 2))
@pytest.mark.parametrize("shape", sorted(TARGETS))
def test_plan_targets(shape, element_size):
    n_rows, n_cols = shape
    p = plan(n_rows, n_cols, element_size, H200_SMS)
    assert p.kind == (TARGETS_16BIT.get(shape, TARGETS[shape]) if element_size == 2 else TARGETS[shape])
    tile = p.block * p.rows_per_program
    assert tile <= 2**20  # Triton's largest tensor
    # values per thread: no spilling (32 float32 values, or 64 raw 16-bit ones in 32 registers)
    assert tile // (32 * p.num_warps) <= (64 if p.recompute else 32)
    assert not p.recompute or element_size == 2
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
    p = plan(65536, 128, 4, H200_SMS)  # 8 KB tiles: 16 rows of 128 float32
    assert p.rows_per_program == 16 and triton.cdiv(65536, p.rows_per_program) == 4096
    assert plan(65536, 128, 2, H200_SMS).rows_per_program == 32


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


def test_plan_never_picks_a_cooperative_plan():
    """"grid" and "coop" belong to the tuning space (triton_coop.py): no shape, dtype or device gets them."""
    for shape in ((256, 262144), (4096, 131072), (1, 1048576), (8, 262144), (1, 1 << 24), (1024, 32768)):
        for item in (4, 2):
            for gpu in (False, True):
                assert plan(*shape, item, H200_SMS, cooperative=gpu).kind in ("row", "online", "split")


def test_plan_for_few_long_rows_on_a_gpu():
    for item in (4, 2):
        # split with kernel B as a PDL launch (measured ahead of grid: docs/tuning/softmax.md)
        p = plan(1, 1 << 20, item, H200_SMS, cooperative=True)
        assert p.kind == "split" and p.pdl and p.chunk == p.block == ts.SPLIT_BLOCK // 2
        assert not plan(1, 1 << 20, item, H200_SMS).pdl  # the interpreter: no PDL
        online = plan(4096, 131072, item, H200_SMS, cooperative=True)
        assert online.kind == "online" and online.tail == ts.ONLINE_TAIL[item]
        assert online.tail < 65536 and online.l2_hints == ts.ONLINE_L2_HINTS
        assert (online.block, online.num_warps) == ts.ONLINE_LAUNCH[item]


def test_sixteen_bit_long_rows_are_held_raw():
    p = plan(1024, 32768, 2, H200_SMS)  # two programs of 16 warps per SM
    assert (p.kind, p.num_warps, p.recompute, p.maxnreg) == ("row", 16, True, 64)
    assert plan(1024, 20000, 2, H200_SMS) == p  # padded to the same block
    assert not plan(1024, 32768, 4, H200_SMS).recompute  # float32: unchanged
    rows = ts.SPLIT_MAX_ROWS_PER_SM * H200_SMS
    whole = plan(rows, ts.ROW16_MAX_COLS, 2, H200_SMS)
    assert (whole.kind, whole.block, whole.num_warps, whole.recompute) == ("row", 65536, 32, True)
    assert plan(rows, ts.ROW16_MAX_COLS + 1, 2, H200_SMS).kind == "online"
    assert plan(rows - 1, ts.ROW16_MAX_COLS, 2, H200_SMS).kind == "split"  # too few rows to fill
    assert plan(rows, ts.ROW16_MAX_COLS, 4, H200_SMS).kind == "online"


def test_plan_register_cap_is_checked():
    assert ts.SoftmaxPlan("row", 32768, 16, maxnreg=64).maxnreg == 64
    for bad in (8, 256, -1):
        with pytest.raises(ValueError, match="maxnreg"):
            ts.SoftmaxPlan("row", 32768, 16, maxnreg=bad)


#: (rows, cols, element size) -> (rows per program, warps) of the "row" plans set from two tune
#: runs (ROW_TILE_BYTES, _row_warps; docs/tuning/softmax.md).
ROW_TILES = {
    (16384, 1024, 4): (2, 4),
    (16384, 1024, 2): (4, 8),
    (4096, 4096, 4): (1, 16),
    (4096, 4096, 2): (1, 8),
    (32768, 4096, 4): (1, 16),
    (65536, 128, 2): (32, 8),
    (8192, 16384, 4): (1, 16),
    (8192, 16384, 2): (1, 32),
}


@pytest.mark.parametrize("case", sorted(ROW_TILES))
def test_row_tiles_and_warps(case):
    p = plan(*case[:2], case[2], H200_SMS)
    assert p.kind == "row" and (p.rows_per_program, p.num_warps) == ROW_TILES[case]
    assert p.block * p.rows_per_program * case[2] <= ts.ROW_TILE_BYTES or p.rows_per_program == 1


def test_row_warps_steps():
    assert [ts._row_warps(t, 4) for t in (1024, 2048, 4096, 16384, 32768)] == [4, 4, 16, 16, 32]
    assert [ts._row_warps(t, 2) for t in (2048, 4096, 8192, 16384)] == [4, 8, 8, 32]
