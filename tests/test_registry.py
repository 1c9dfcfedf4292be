import math

import pytest
import torch

from fusebench.cli import pick
from fusebench.errors import SkipCase, UsageError
from fusebench.ops import OPS, get_op
from fusebench.registry import BACKENDS, DTYPES, Op, parse_dtype, parse_shape, shape_label

VALID_OPS = ", ".join(OPS)  # the registry's order
VALID_BACKENDS = ", ".join(BACKENDS)


def test_every_memory_bound_op_registers_the_portable_backends():
    for op in (op for op in OPS.values() if op.roofline == "memory"):
        assert {"eager", "torch", "compile", "triton"} <= set(op.backends), op.name
        assert set(op.backends) <= set(BACKENDS)


@pytest.mark.parametrize("op", OPS.values(), ids=lambda o: o.name)
def test_smaller_grids_are_subsets_of_the_default(op):
    # asv parameters come from the default grid: no other grid may add keys.
    assert {"cpu", "quick", "cpu-quick", "nsys"} <= set(op.grids)
    for grid in op.grids:
        assert set(op.grids[grid]) <= set(op.grids["default"]), grid


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_quick_is_the_smallest_run_on_every_device(device):
    # QUICK=1 runs a subset of the device's full grid, fewer shapes and fewer elements for every op
    # (the GPU's quick grid on a CPU took longer than the CPU's full grid).
    from fusebench.measure.sweep import grid_name

    dev = torch.device(device)
    full, quick = grid_name(dev, quick=False), grid_name(dev, quick=True)
    assert (full, quick) == {"cpu": ("cpu", "cpu-quick"), "cuda": ("default", "quick")}[device]
    for op in OPS.values():
        small, big = op.grids[quick], op.grids[full]
        assert set(small) < set(big), op.name
        assert sum(math.prod(s) for s in small) < sum(math.prod(s) for s in big), op.name


def test_unknown_op_lists_the_valid_ones():
    with pytest.raises(UsageError, match=f"unknown op 'gleu'; valid ops: {VALID_OPS}"):
        get_op("gleu")


def test_unknown_backend_lists_the_valid_ones():
    with pytest.raises(UsageError, match=f"valid backends: {VALID_BACKENDS}"):
        get_op("gelu").get_backend("cudnn")


def test_valid_but_unregistered_backend_is_a_skip():
    op = Op("toy", reference=lambda x: x, grids={"default": []})
    with pytest.raises(SkipCase, match="toy has no cuda backend"):
        op.get_backend("cuda")


def test_registering_a_bad_or_duplicate_backend_is_refused():
    op = Op("toy", reference=lambda x: x, grids={"default": []})
    with pytest.raises(ValueError, match="write lowercase letters, digits and _"):
        op.backend("Fast one")
    op.backend("fast")(lambda x: x)  # any name: the case file decides the axis (tests/test_extending.py)
    op.backend("eager")(lambda x: x)
    with pytest.raises(ValueError, match="twice"):
        op.backend("eager")(lambda x: x)


def test_bytes_moved_is_read_once_write_once():
    op = get_op("softmax")
    assert op.bytes_moved((4096, 4096), torch.float32) == 2 * 4096 * 4096 * 4
    assert op.bytes_moved((1, 1048576), torch.bfloat16) == 2 * 1048576 * 2


def test_an_op_may_declare_its_own_traffic():
    # A normalization also reads its weight vector: rows x cols in and out, cols more in.
    op = Op("toy", reference=lambda x: x, grids={"default": []},
            traffic=lambda shape, itemsize: (2 * shape[0] + 1) * shape[1] * itemsize)
    assert op.bytes_moved((8, 1024), torch.bfloat16) == (2 * 8 + 1) * 1024 * 2
    assert op.bytes_moved((8, 1024), torch.float32) == (2 * 8 + 1) * 1024 * 4


def test_shape_labels_round_trip():
    assert shape_label((8192, 16384)) == "8192x16384"
    assert parse_shape("8192x16384") == (8192, 16384)
    assert parse_shape(shape_label((1 << 20,))) == (1 << 20,)
    with pytest.raises(UsageError, match="bad shape"):
        parse_shape("12xx")


def test_dtype_names():
    assert parse_dtype("bfloat16") is torch.bfloat16
    with pytest.raises(UsageError, match="valid dtypes: float32, bfloat16, float16"):
        parse_dtype("fp8")
    assert list(DTYPES) == ["float32", "bfloat16", "float16"]


def test_pick_checks_each_name():
    assert pick("op", None, OPS) == list(OPS) and list(OPS)[:2] == ["gelu", "softmax"]
    assert pick("op", "softmax", OPS) == ["softmax"]
    with pytest.raises(UsageError, match="unknown op 'relu'"):
        pick("op", "gelu,relu", OPS)
