"""Issue 41, item 10: an unknown op, backend, dtype or shape is refused with the closest valid name
offered (``did you mean gelu?``), wherever a name is chosen: the command line, the case file,
``fusebench bisect --case``."""

import subprocess
import sys

import pytest

from fusebench import config
from fusebench.commands.bisect import parse_case
from fusebench.errors import UsageError
from fusebench.measure import selection
from fusebench.names import closest, pick
from fusebench.ops import OPS, REGISTERED, get_op
from fusebench.paths import PROJECT_ROOT
from fusebench.registry import BACKENDS, PRECISIONS

VALID_OPS = ", ".join(OPS)


@pytest.mark.parametrize("name, valid, expected", [
    ("GELU", OPS, "gelu"), ("Softmax", OPS, "softmax"), ("softmx", OPS, "softmax"),
    ("rmsnrom", OPS, "rmsnorm"), ("Torch", BACKENDS, "torch"), ("tritn", BACKENDS, "triton"),
    ("flag_gems", BACKENDS, "flaggems"), ("bf16", PRECISIONS, "bfloat16"), ("fp16", PRECISIONS, "float16"),
    ("FLOAT32", PRECISIONS, "float32"), ("4096*4096", ["4096x4096", "1x1048576"], "4096x4096"),
    ("1048567", ["1024", "16384", "1048576"], "1048576"),
    # not typos of a valid name: nothing offered (relu is another op, not a misspelt gelu)
    ("relu", OPS, None), ("cudnn", BACKENDS, None), ("fp8", PRECISIONS, None), ("3x3", ["1024"], None),
])
def test_the_closest_valid_name(name, valid, expected):
    assert closest(name, valid) == expected


def test_pick_offers_the_closest_and_still_lists_the_valid_ones():
    with pytest.raises(UsageError) as err:
        pick("op", "GELU", OPS)
    assert str(err.value) == f"unknown op 'GELU' (did you mean gelu?); valid ops: {VALID_OPS}"
    with pytest.raises(UsageError) as err:
        pick("op", "relu", OPS)
    assert str(err.value) == f"unknown op 'relu'; valid ops: {VALID_OPS}"


@pytest.mark.parametrize("kwargs, message", [
    ({"ops": "GELU"}, f"unknown op 'GELU' (did you mean gelu?); valid ops: {VALID_OPS}"),
    ({"backends": "Eager"},
     f"unknown backend 'Eager' (did you mean eager?); valid backends: {', '.join(BACKENDS)}"),
    ({"dtypes": "bf16"},
     f"unknown dtype 'bf16' (did you mean bfloat16?); valid dtypes: {', '.join(PRECISIONS)}"),
])
def test_a_run_selection_offers_the_closest(kwargs, message):
    args = {"ops": None, "backends": None, "dtypes": None, **kwargs}
    with pytest.raises(UsageError) as err:
        selection.choose(OPS, args["ops"], args["backends"], args["dtypes"])
    assert str(err.value) == message


def test_a_shape_selection_offers_the_closest():
    gelu = get_op("gelu")
    with pytest.raises(UsageError) as err:
        selection.narrow_shapes([gelu], "cpu", "1048567")
    assert str(err.value).startswith("unknown shape '1048567' (did you mean 1048576?); valid shapes: 1024, ")


def test_get_op_offers_the_closest():
    with pytest.raises(UsageError) as err:
        get_op("GELU")
    assert str(err.value) == f"unknown op 'GELU' (did you mean gelu?); valid ops: {VALID_OPS}"


def test_a_bisect_case_offers_the_closest():
    with pytest.raises(UsageError) as err:
        parse_case("GELU/torch/16384/float32")
    assert str(err.value).startswith(
        "bad case 'GELU/torch/16384/float32' (did you mean gelu/torch/16384/float32?); give ")
    with pytest.raises(UsageError) as err:
        parse_case("gelu/torhc/16384/float32")
    assert str(err.value).startswith("unknown backend 'torhc' (did you mean torch?) in ")
    with pytest.raises(UsageError) as err:
        parse_case("gelu/torch/16384/fp32")
    assert str(err.value).startswith("unknown dtype 'fp32' (did you mean float32?) in ")


def test_the_case_file_offers_the_closest(tmp_path):
    text = (PROJECT_ROOT / "fusebench.yaml").read_text()
    path = tmp_path / "cases.yaml"
    path.write_text(text.replace("dtypes: [float32, bfloat16, float16]", "dtypes: [float32, bf16, float16]",
                                 1))
    assert path.read_text() != text
    with pytest.raises(config.ConfigError,
                       match=r"dtypes\[1\]: unknown dtype 'bf16' \(did you mean bfloat16\?\); valid "):
        config.load(path).apply(REGISTERED)


def test_make_list_op_gelu_says_did_you_mean_in_one_line():
    """The issue's words: `make list OP=GELU` (the same option `make bench OP=` passes)."""
    out = subprocess.run([sys.executable, "-m", "fusebench", "list", "--ops", "GELU"], cwd=PROJECT_ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert out.stderr == f"list: error: unknown op 'GELU' (did you mean gelu?); valid ops: {VALID_OPS}\n"


@pytest.mark.parametrize("text", ["eager,,torch", "eager,", ",eager", "eager, ,torch"])
def test_an_empty_item_of_a_comma_list_is_refused_in_one_line(text):
    """Issue 54, item 8: `BACKENDS=eager,,torch` was read as eager,torch."""
    with pytest.raises(UsageError) as err:
        pick("backend", text, BACKENDS)
    assert str(err.value) == (f"an empty backend in {text!r} (two commas in a row, or one at an end); "
                              f"valid backends: {', '.join(BACKENDS)}")


def test_an_empty_item_is_refused_by_every_command_that_reads_a_list():
    from fusebench.measure import workers

    with pytest.raises(UsageError, match=r"^GPUS=0,,1: give all or comma-separated GPU indices"):
        workers.parse_gpus("0,,1", ["0", "1"])
    out = subprocess.run([sys.executable, "-m", "fusebench", "list", "--backends", "eager,,torch"],
                         cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and out.stderr.startswith("list: error: an empty backend in 'eager,,torch'")
    assert out.stderr.count("\n") == 1
