"""The case file fusebench.yaml: its defaults are what runs today, and every bad value is one line
naming the file, the key and the valid values (issue 16, item 2)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fusebench import config, metrictable, ops
from fusebench.asv import asvsuite
from fusebench.gate import compare
from fusebench.measure import sweep
from fusebench.ops import OPS, REGISTERED
from fusebench.paths import PROJECT_ROOT
from fusebench.registry import BACKENDS, shape_label


def test_the_asv_parameters_are_those_of_the_committed_h200_results():
    stored = json.loads((PROJECT_ROOT / "results" / "benchmarks.json").read_text())
    for op in OPS.values():
        params = asvsuite.suite_class(op).params
        committed = stored[f"suite.{asvsuite.class_name(op.name)}.track_device_time"]["params"]
        assert [[repr(v) for v in axis] for axis in params] == committed, op.name


def test_the_grids_dtypes_and_headlines_are_those_that_ran_before_the_yaml():
    assert {g: [shape_label(s) for s in shapes] for g, shapes in OPS["softmax"].grids.items()} == {
        "default": ["65536x128", "16384x1024", "4096x4096", "32768x4096", "8192x16384", "1024x32768",
                    "4096x65536", "256x262144", "1x1048576"],
        "cpu": ["65536x128", "1x1048576"], "quick": ["16384x1024", "1x1048576"],
        "cpu-quick": ["1x1048576"], "nsys": ["4096x4096", "256x262144", "1x1048576"]}
    assert OPS["gelu"].grids["cpu-quick"] == [(16384,)] and OPS["gelu"].headline == (16384, 16384)
    assert OPS["matmul"].dtypes == ("float32", "tf32", "bfloat16") and OPS["matmul"].headline == (8192, 8192)
    assert list(OPS["matmul"].backends) == ["torch"]
    # every backend an op registers is measured, on the axis's order (no list of them here to keep)
    assert {n: list(op.backends) for n, op in OPS.items()} == {
        n: [b for b in BACKENDS if b in op.backends] for n, op in REGISTERED.items()}


def test_the_settings_default_to_the_code_defaults():
    cfg = config.load()
    defaults = (sweep.DEFAULT_ROUNDS, metrictable.DEFAULT_FACTOR, compare.ALPHA)
    assert (cfg.rounds, cfg.factor, cfg.alpha) == defaults
    assert (cfg.rounds, cfg.factor, cfg.alpha) == (3, 1.04, 0.05)
    assert metrictable.asv_regression_settings(cfg.factor) == metrictable.asv_regression_settings()


def test_a_file_without_settings_takes_the_code_defaults(tmp_path):
    data = yaml.safe_load((PROJECT_ROOT / "fusebench.yaml").read_text())
    del data["settings"]
    path = tmp_path / "cases.yaml"
    path.write_text(yaml.safe_dump(data))
    cfg = config.load(path)
    assert (cfg.rounds, cfg.factor, cfg.alpha) == (3, 1.04, 0.05)


def mutated(tmp_path, change) -> Path:
    data = yaml.safe_load((PROJECT_ROOT / "fusebench.yaml").read_text())
    change(data)
    path = tmp_path / "cases.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _set(keys, value):
    def change(data):
        d = data
        for k in keys[:-1]:
            d = d[k]
        if value is KeyError:
            del d[keys[-1]]
        else:
            d[keys[-1]] = value
    return change


SOFTMAX_DEFAULT = ("65536x128, 16384x1024, 4096x4096, 32768x4096, 8192x16384, 1024x32768, 4096x65536, "
                   "256x262144, 1x1048576")


@pytest.mark.parametrize("change, message", [
    (_set(["ops", "softmax", "grids", "default", 3], "32768xx"),
     "ops.softmax.grids.default[3]: bad shape '32768xx'; write at most 8 dimensions joined by 'x', e.g. "
     "4096x4096 (a number for 1-D)"),
    (_set(["ops", "softmax", "grids", "quick", 0], "8x8"),
     f"ops.softmax.grids.quick[0]: shape 8x8 is not in the default grid (asv's parameters); valid shapes: "
     f"{SOFTMAX_DEFAULT}"),
    (_set(["ops", "gelu", "dtypes", 1], "fp8"),
     "ops.gelu.dtypes[1]: unknown dtype 'fp8'; valid dtypes: float32, bfloat16, float16, tf32"),
    (_set(["ops", "matmul", "backends", 0], "triton"),
     "ops.matmul.backends[0]: kernels/matmul/ registers no backend 'triton' (add its factory, "
     "@OP.backend('triton'), to kernels/matmul/__init__.py); valid backends: torch"),
    (_set(["ops", "gelu", "grids", "nsys"], KeyError),
     "ops.gelu.grids.nsys: expected a non-empty list of shapes (every op needs the grids default, cpu, "
     "quick, cpu-quick, nsys)"),
    (_set(["ops", "gelu", "grids", "tiny"], [1024]),
     "ops.gelu.grids.tiny: unknown key; valid keys: default, cpu, quick, cpu-quick, nsys"),
    (_set(["ops", "gelu", "colour"], "red"),
     "ops.gelu.colour: unknown key; valid keys: dtypes, backends, headline, grids"),
    (_set(["ops", "relu"], {}), f"ops.relu: no such op; valid ops: {', '.join(REGISTERED)}"),
    (_set(["ops", "matmul"], KeyError),
     f"ops: matmul is missing (every registered op needs an entry); valid ops: {', '.join(REGISTERED)}"),
    (_set(["ops", "softmax", "headline"], "3x3"),
     f"ops.softmax.headline: shape 3x3 is not in the default grid; valid shapes: {SOFTMAX_DEFAULT}"),
    (_set(["ops", "matmul", "grids", "cpu", 1], "64x128"),
     "ops.matmul.grids.cpu[1]: shape 64x128 is not in the default grid (asv's parameters); valid shapes: "
     "64x64, 128x128, 256x256, 512x512, 1024x1024, 2048x2048, 4096x4096, 8192x8192"),
    (_set(["settings", "rounds"], 0), "settings.rounds: bad value 0; valid: an integer from 1 to 100 "
                                      "(a round of the default grid takes minutes)"),
    (_set(["settings", "rounds"], 100000000000), "settings.rounds: bad value 100000000000; valid: an integer "
                                                 "from 1 to 100 (a round of the default grid takes minutes)"),
    (_set(["settings", "gate", "factor"], 0.9),
     "settings.gate.factor: bad value 0.9; valid: a number from 1 to 100 (1.04 allows 4 %)"),
    (_set(["settings", "gate", "alpha"], 2), "settings.gate.alpha: bad value 2; valid: a number above 0 and "
                                             "at most 0.5"),
    (_set(["settings", "seed"], 1), "settings.seed: unknown key; valid keys: rounds, timing, gate"),
])
def test_each_bad_value_is_one_line_with_file_key_and_valid_values(tmp_path, change, message):
    path = mutated(tmp_path, change)
    with pytest.raises(config.ConfigError) as err:
        config.load(path).apply(REGISTERED)
    assert str(err.value) == f"{path}: {message}"


def test_an_op_is_its_module_named_by_the_yaml(tmp_path):
    # adding an op is kernels/<name>/ and its YAML entry: the entry names the module
    assert list(REGISTERED) == list(config.load().ops)
    path = mutated(tmp_path, _set(["ops", "relu"], {}))
    with pytest.raises(config.ConfigError) as err:
        ops.configured(path)
    assert str(err.value) == f"{path}: ops.relu: no package kernels/relu/ builds this op"


def test_a_matmul_shape_its_flops_refuse_is_named(tmp_path):
    def change(data):
        data["ops"]["matmul"]["grids"]["default"].append("64x128")
    path = mutated(tmp_path, change)
    with pytest.raises(config.ConfigError, match=r"ops\.matmul\.grids\.default\[8\]: matmul takes a square"):
        config.load(path).apply(REGISTERED)


def test_a_missing_or_broken_file_is_one_line(tmp_path):
    with pytest.raises(config.ConfigError, match=r"nope\.yaml: cannot read the case file: No such file"):
        config.load(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("ops:\n  gelu: [\n")
    with pytest.raises(config.ConfigError, match=r"bad\.yaml: not valid YAML \(line 3, column 1\)"):
        config.load(bad)


def test_adding_a_shape_and_a_dtype_edits_only_the_yaml(tmp_path):
    def change(data):
        data["ops"]["gelu"]["grids"]["default"].append("2048x2048")
        data["ops"]["gelu"]["grids"]["cpu"].append("2048x2048")
        data["ops"]["gelu"]["dtypes"].append("tf32")
    ops = config.load(mutated(tmp_path, change)).apply(REGISTERED)
    assert ops["gelu"].grids["cpu"][-1] == (2048, 2048) and ops["gelu"].dtypes[-1] == "tf32"
    assert asvsuite.suite_class(ops["gelu"]).params[1][-1] == "2048x2048"


def run(*args, cwd=PROJECT_ROOT):
    return subprocess.run([sys.executable, "-m", "fusebench", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


@pytest.mark.slow
def test_a_bad_config_on_the_command_line_is_one_line_and_exit_2(tmp_path):
    path = mutated(tmp_path, _set(["ops", "gelu", "dtypes", 0], "fp8"))
    out = run("list", "--config", str(path))
    assert out.returncode == 2
    assert out.stderr == (f"list: error: {path}: ops.gelu.dtypes[0]: unknown dtype 'fp8'; valid dtypes: "
                          "float32, bfloat16, float16, tf32\n")


@pytest.mark.slow
def test_list_reads_another_config(tmp_path):
    def change(data):
        data["ops"]["gelu"]["grids"]["default"] = [12345]
        for grid in ("cpu", "quick", "cpu-quick", "nsys"):
            data["ops"]["gelu"]["grids"][grid] = [12345]
        del data["ops"]["gelu"]["headline"]
    out = run("list", "--ops", "gelu", "--backends", "torch", "--dtypes", "float32", "--config",
              str(mutated(tmp_path, change)))
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["op    backend  shape  dtype", "gelu  torch    12345  float32"]


# Issue 28, items 3 and 11: the case file is read by a strict loader (fusebench/safeyaml.py).
def _with_text(tmp_path, old: str, new: str) -> Path:
    text = (PROJECT_ROOT / "fusebench.yaml").read_text()
    assert old in text
    path = tmp_path / "cases.yaml"
    path.write_text(text.replace(old, new, 1))
    return path


@pytest.mark.slow
def test_a_yaml_alias_bomb_is_refused_at_once_in_one_line(tmp_path):
    """Nine levels of nested aliases under settings.rounds hung `fusebench list --config` at 3 GB."""
    levels = ["&l0 [x, x, x, x, x, x, x, x, x]"] + [
        f"&l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, 9)]
    bomb = "\n".join(f"  r{i}: {level}" for i, level in enumerate(levels))
    path = tmp_path / "bomb.yaml"
    path.write_text(f"settings:\n{bomb}\nops: {{}}\n")
    out = run("list", "--config", str(path))
    assert out.returncode == 2
    assert out.stderr == (f"list: error: {path}: line 2, column 7: anchors and aliases are not accepted "
                          "(&l0); write the value out\n")


@pytest.mark.parametrize("old, new, message", [
    ("rounds: 3", "rounds: 3\n  rounds: 5", "line 14, column 3: duplicate key 'rounds' (first at line 13, "
                                            "column 3); each key may appear once"),
    ("nsys: [4096x4096", "nsys: [0x16",
     "'0x16' is a YAML 1.1 non-decimal number (hex, octal, binary, '_' or ':'); write it in decimal, or "
     "quote it if it is text"),
    ("rounds: 3", "rounds: 010", "'010' is a YAML 1.1 non-decimal number"),
    ("rounds: 3", "rounds: 1_000", "'1_000' is a YAML 1.1 non-decimal number"),
    ("rounds: 3", "rounds: yes", "'yes' is read as a YAML 1.1 boolean; write true or false"),
])
def test_duplicate_keys_and_yaml_1_1_numbers_are_refused_quoting_the_text(tmp_path, old, new, message):
    path = _with_text(tmp_path, old, new)
    with pytest.raises(config.ConfigError) as err:
        config.load(path)
    assert str(err.value).startswith(f"{path}: line ") and message in str(err.value)
    assert "\n" not in str(err.value)


def test_a_huge_shape_is_refused_before_anything_is_built(tmp_path):
    path = mutated(tmp_path, _set(["ops", "gelu", "grids", "default", 0], "1000000x1000000"))
    with pytest.raises(config.ConfigError) as err:
        config.load(path).apply(REGISTERED)
    assert str(err.value) == (f"{path}: ops.gelu.grids.default[0]: bad shape '1000000x1000000': 1e+12 "
                              "elements, more than 4.29e+09 (2^32), the most a GPU here holds with its "
                              "float64 reference")


@pytest.mark.slow
def test_a_long_value_is_cut_in_the_error_line(tmp_path):
    path = mutated(tmp_path, _set(["settings", "rounds"], list(range(100000))))
    with pytest.raises(config.ConfigError) as err:
        config.load(path)
    value = str(err.value).split("bad value ", 1)[1].split("; valid:", 1)[0]
    assert len(value) <= 48 and value.endswith("...")  # the value is cut, the valid range is whole


def test_a_case_file_larger_than_1_mb_is_refused_unread(tmp_path):
    path = tmp_path / "big.yaml"
    path.write_text("# " + "x" * (1 << 20) + "\nops: {}\n")
    with pytest.raises(config.ConfigError, match=r"big\.yaml: larger than 1024 KB; a case file is a few KB$"):
        config.load(path)


# -- issue 56, item 10: shapes a record accepts, numbers bounded, bytes and file kinds named -------

@pytest.mark.parametrize("shape", ["1x1x1x1x1x1x1x1x1x1x16384",  # measured, then no reader took its record
                                   "1" + "0" * 400 + "x2",  # its element count overflowed a float
                                   int("9" * 30)])
def test_a_shape_no_record_accepts_is_refused_naming_its_key(tmp_path, shape):
    """Item 10: an 11-dimension shape was measured and stored (exit 0), then every reader refused
    the record; the shape pattern is the record's (``fusebench.record.SHAPE``)."""
    from fusebench.record import SHAPE

    path = mutated(tmp_path, _set(["ops", "gelu", "grids", "default", 0], shape))
    with pytest.raises(config.ConfigError) as err:
        config.load(path).apply(REGISTERED)
    assert str(err.value).startswith(f"{path}: ops.gelu.grids.default[0]: bad shape ")
    assert str(err.value).endswith("; write at most 8 dimensions joined by 'x', e.g. 4096x4096 (a number "
                                   "for 1-D)")
    assert SHAPE.fullmatch("1x1x1x1x1x1x1x16384") and not SHAPE.fullmatch(str(shape))


def _edited(tmp_path: Path, old: bytes, new: bytes) -> Path:
    path = tmp_path / "cases.yaml"
    text = (PROJECT_ROOT / "fusebench.yaml").read_bytes()
    assert old in text
    path.write_bytes(text.replace(old, new, 1))
    return path


def test_a_5000_digit_number_is_one_line_naming_its_key(tmp_path):
    """Item 10: ``rounds: <5000 digits>`` was ``ValueError`` (exit 1), file and key not named."""
    path = _edited(tmp_path, b"rounds: 3", b"rounds: " + b"9" * 5000)
    with pytest.raises(config.ConfigError) as err:
        config.load(path)
    assert str(err.value) == (f"{path}: settings.rounds: bad value '{'9' * 40}...'; valid: an integer from 1 "
                              "to 100 (a round of the default grid takes minutes)")


@pytest.mark.parametrize("old, new, key, byte", [(b"  gelu:", b"  gelu\xff:", "ops.gelu?", "0xff"),
                                                 (b"rounds: 3", b"rounds: 3\xfe", "settings.rounds", "0xfe")])
def test_a_byte_that_is_not_utf8_is_named_with_its_key(tmp_path, old, new, key, byte):
    """Item 10: a non-UTF-8 byte was ``UnicodeDecodeError`` (exit 1), file and key not named."""
    path = _edited(tmp_path, old, new)
    with pytest.raises(config.ConfigError) as err:
        config.load(path)
    text = (PROJECT_ROOT / "fusebench.yaml").read_bytes()
    line = text[:text.index(old)].count(b"\n") + 1
    assert str(err.value).startswith(f"{path}: {key}: byte {byte} (line {line}, column ")
    assert str(err.value).endswith(") is not UTF-8; a case file is UTF-8 text")


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_fifo_or_a_device_is_refused_unread(tmp_path, kind):
    """Item 10: ``--config /dev/zero`` read 2.5 GB before a MemoryError; a FIFO hung."""
    import os

    path = Path("/dev/zero") if kind == "device" else tmp_path / "cases.fifo"
    if kind == "fifo":
        os.mkfifo(path)
    out = subprocess.run([sys.executable, "-m", "fusebench", "list", "--config", str(path)], cwd=PROJECT_ROOT,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert out.stderr == f"list: error: {path}: not a regular file; a case file is a YAML file\n"


def test_the_committed_benchmarks_json_is_what_a_store_writes_now():
    """Every store (a CPU ``make bench`` too) rewrites ``results/benchmarks.json`` from the suite: the
    committed file must be what it writes, or each run leaves a tracked file modified (moving the
    suite's module changed the 46 ``setup_cache_key`` entries)."""
    from fusebench.asv import store

    stored = json.loads((PROJECT_ROOT / "results" / "benchmarks.json").read_text())
    written = {d["name"]: json.loads(json.dumps(d)) for d in store.definitions(OPS.values())}
    assert {k: v for k, v in stored.items() if k != "version"} == written
