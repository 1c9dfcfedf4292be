"""docs/extending.md's checklists followed on a clone: a new op is one package in kernels/ and one
entry in fusebench.yaml; a new backend is one factory and its name in the op's ``backends:`` list.
Either is listed, measured, stored and judged with no other change, and the fast suite passes."""

import dataclasses
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys

import pytest
import yaml
from committed import committed_folder

from fusebench import axes, config, ops
from fusebench.asv import asvsuite
from fusebench.commands import main
from fusebench.errors import UsageError
from fusebench.paths import PROJECT_ROOT

TOY = '''"""A toy op for the extending test: y = 2x (memory-bound, one read and one write)."""

import torch

from fusebench.registry import Op


def reference(x):
    return x.double() * 2


OP = Op(name="toy", reference=reference)


@OP.backend("eager")
def eager(x):
    return lambda: x + x


@OP.backend("torch")
def torch_mul(x):
    return lambda: torch.mul(x, 2.0)
'''

ENTRY = """
  toy:
    dtypes: [float32]
    backends: [eager, torch]
    headline: 4096
    grids:
      default: [4096, 65536]
      cpu: [4096]
      quick: [4096]
      cpu-quick: [4096]
      nsys: [4096]
"""


def _run(clone, *args, timeout=600):
    return subprocess.run([sys.executable, "-m", "fusebench", *args], cwd=clone, capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, "HOME": str(clone.parent)})


@pytest.mark.slow
def test_a_toy_op_is_listed_measured_and_judged_with_one_module_and_one_entry(tmp_path):
    clone = tmp_path / "repo"
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(PROJECT_ROOT), str(clone)], check=True)
    (clone / "kernels" / "toy").mkdir()
    (clone / "kernels" / "toy" / "__init__.py").write_text(TOY)
    cases = clone / "fusebench.yaml"
    cases.write_text(cases.read_text().rstrip("\n") + "\n" + ENTRY)
    suite = _run(clone, "store", "--suite")  # the guide's step 6: results/benchmarks.json
    assert suite.returncode == 0 and "(5 op(s): gelu, softmax, rmsnorm, matmul, toy)" in suite.stderr, \
        suite.stderr
    git = ["git", "-C", str(clone), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "a toy op"], check=True)
    subprocess.run([*git, "checkout", "-q", "-B", "main"], check=True)  # asv stores only main's commits

    # the fast tests of the asv suite and of the case file pass on the clone with the toy op; the
    # torch-free readers wait for its first GPU record (step 8), and say so
    fast = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "tests/test_config.py", "tests/test_torch_free.py", "-k",
                           "asv_parameters or benchmarks_json or described or readers_run"],
                          cwd=clone, capture_output=True, text=True, timeout=600)
    assert "1 failed, 3 passed" in fast.stdout, fast.stdout[-3000:]
    assert "Failed: no committed run record holds toy: " in fast.stdout

    listed = _run(clone, "list", "--ops", "toy")
    assert listed.returncode == 0, listed.stderr
    assert [line.split() for line in listed.stdout.splitlines()[1:]] == [
        ["toy", "eager", "4096", "float32"], ["toy", "torch", "4096", "float32"]]

    results = tmp_path / "results"
    run = _run(clone, "bench", "--ops", "toy", "--rounds", "2", "--no-publish", "--results", str(results))
    assert run.returncode == 0, run.stderr[-2000:]
    assert "| shape | eager | torch |" in run.stdout
    machine = next(p.parent.name for p in results.glob("*/machine.json"))
    stored = [p for p in (results / machine).glob("*.json") if p.name != "machine.json"]
    assert len(stored) == 1 and "suite.Toy.track_device_time" in stored[0].read_text()

    judged = _run(clone, "compare", "--base", "HEAD", "--head", "HEAD", "--machine", machine,
                  "--base-results", str(results), "--head-results", str(results), "--format", "json")
    assert judged.returncode == 2, judged.stdout + judged.stderr  # nothing judged is not "ok"
    rows = json.loads(judged.stdout)["rows"]
    toy = {(r["benchmark"], r["params"][0]): r["status"] for r in rows
           if r["benchmark"].startswith("suite.Toy.")}
    # every gated metric of the toy's backends is a row; a CPU measures no device time: none judged
    assert {(f"suite.Toy.{m}", b) for b in ("eager", "torch")
            for m in ("track_device_time", "track_device_time_cold", "track_device_time_graph")} <= set(toy)
    assert set(toy.values()) == {"not on both sides"}
    assert "compare: nothing judged: " in judged.stderr and "a run without a GPU measures wall time only" \
        in judged.stderr


# --- a new backend: its factory and its name in the op's backends list ------------------------------

#: A GELU variant for the extending test: tanh(z) = 2 sigmoid(2z) - 1, so this is the tanh GELU of
#: ``eager`` through one sigmoid (it passes the correctness gate).
SIGMOID = """

@OP.backend("sigmoid")
def sigmoid(x):
    return lambda: x * torch.sigmoid(1.5957691216057308 * (x + 0.044715 * x * x * x))
"""
GELU_BACKENDS = "    backends: [eager, torch, compile, triton, cuda, flaggems]\n"
#: A backend name no op lists or registers (here and on the clone of the slow test below).
UNLISTED = "variant"


def test_the_backend_axis_is_the_case_files_lists_merged_in_order():
    cfg = config.load()
    assert axes.BACKENDS == axes.backend_axis((n, cfg.ops[n]["backends"]) for n in cfg.ops)
    for name in cfg.ops:  # each op's list is in the axis's order
        assert [b for b in axes.BACKENDS if b in cfg.cases(name).backends] == list(cfg.cases(name).backends)
    # the backends of a committed asv result keep their order (its files are rewritten byte for byte)
    result = json.loads((PROJECT_ROOT / "results" / "h200" / "178ab4e8-existing-py3.12.json").read_text())
    stored = result["results"]["suite.Softmax.track_device_time"][result["result_columns"].index("params")][0]
    assert [repr(b) for b in axes.BACKENDS if repr(b) in stored] == stored and len(stored) == 8
    gelu, softmax = ["eager", "torch", "cuda", "flaggems"], ["eager", "torch", "cuda", "liger", "flaggems"]
    assert axes.backend_axis([("gelu", gelu), ("softmax", softmax)]) == (
        "eager", "torch", "cuda", "liger", "flaggems")
    # a name appended to one op's list goes last: every other backend keeps its place (asv, colours)
    assert axes.backend_axis([("gelu", [*gelu, "sigmoid"]), ("softmax", softmax)]) == (
        "eager", "torch", "cuda", "liger", "flaggems", "sigmoid")
    # what is not a list of names is the case file reader's to refuse, with the key
    assert axes.backend_axis([("a", None), ("b", ["eager", 3, "Bad name", "torch"])]) == ("eager", "torch")
    with pytest.raises(UsageError, match=r"^fusebench.yaml: the ops' backends lists order torch, cuda "
                                         r"differently; list them in one order \(the report order\)"):
        axes.backend_axis([("gelu", ["eager", "torch", "cuda"]), ("softmax", ["cuda", "torch"])])


@pytest.fixture
def gelu_with_variant(monkeypatch):
    """The ops as they are once kernels/gelu registers a factory of a name the case file does not
    list; the op caches emptied before and after."""
    gelu = ops.op_module("gelu", "fusebench.yaml")
    changed = dataclasses.replace(gelu, backends=dict(gelu.backends))
    changed.backend(UNLISTED)(lambda x: (lambda: x))
    monkeypatch.setattr(ops, "_modules", {**ops._modules, "gelu": changed})
    monkeypatch.setattr(ops, "_configured", {})
    ops.registered.cache_clear()
    monkeypatch.chdir(PROJECT_ROOT)
    yield
    ops.registered.cache_clear()


def test_a_factory_the_case_file_does_not_list_is_one_line_naming_the_file(gelu_with_variant, capsys):
    """Issue 54, item 5: the factory alone was `bench: error: ValueError: backend name 'sigmoid' is
    not one of ...`, exit 1, naming neither the case file nor the list to add it to."""
    with pytest.raises(SystemExit) as end:
        main(["list", "--ops", "gelu"])
    assert (end.value.code, capsys.readouterr().err.splitlines()) == (2, [
        f"list: error: fusebench.yaml: ops.gelu.backends: kernels/gelu/ registers backend '{UNLISTED}', "
        "which no op's backends list names: add it to ops.gelu.backends in fusebench.yaml"])


def test_a_backend_listed_but_not_registered_is_one_line_naming_the_factory(tmp_path, capsys):
    cases = tmp_path / "cases.yaml"
    data = yaml.safe_load((PROJECT_ROOT / "fusebench.yaml").read_text())
    data["ops"]["gelu"]["backends"].append("liger")  # on the axis (softmax's), not gelu's
    cases.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(SystemExit) as end:
        main(["list", "--ops", "gelu", "--config", str(cases)])
    at = len(data["ops"]["gelu"]["backends"]) - 1
    assert (end.value.code, capsys.readouterr().err.splitlines()) == (2, [
        f"list: error: {cases}: ops.gelu.backends[{at}]: kernels/gelu/ registers no backend 'liger' (add "
        f"its factory, @OP.backend('liger'), to kernels/gelu/__init__.py); valid backends: "
        f"{', '.join(ops.REGISTERED['gelu'].backends)}"])


def _hashes(folder) -> dict:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_backend_added_leaves_every_committed_result_as_it_is_stored(tmp_path, monkeypatch, capsys):
    """The committed asv files are written from their records byte for byte
    (tests/test_store_command.py); once the axis has a backend no record holds, a store of each
    record still leaves them as committed: asv reads a result under the parameters of a later suite
    (a NaN for every case it lacks), so the file need not change."""
    shutil.copytree(committed_folder("results"), tmp_path / "results")
    shutil.copytree(committed_folder("records"), tmp_path / "records")
    (tmp_path / "results" / "benchmarks.json").unlink()  # the suite's: it gains the backend
    before = _hashes(tmp_path / "results")
    monkeypatch.setattr(asvsuite, "BACKENDS", (*axes.BACKENDS, UNLISTED))
    records = sorted((tmp_path / "records" / "h200").glob("*.json.xz"))
    with pytest.raises(SystemExit) as end:
        main(["store", *map(str, records)])
    assert end.value.code == 0, capsys.readouterr().err
    after = _hashes(tmp_path / "results")
    suite = json.loads((tmp_path / "results" / "benchmarks.json").read_text())
    assert suite["suite.Gelu.track_device_time"]["params"][0][-1] == repr(UNLISTED)
    del after["benchmarks.json"]
    assert after == before


def _git(clone, *args):
    subprocess.run(["git", "-C", str(clone), "-c", "user.name=t", "-c", "user.email=t@t", *args], check=True)


@pytest.mark.slow
def test_a_new_backend_is_its_factory_and_its_line_and_the_fast_suite_passes(tmp_path):
    """Issue 54, item 5: docs/extending.md's "A new name", followed on a clone with a GELU variant:
    the factory alone is one line naming the case file; with its name in ops.gelu.backends and
    `fusebench store --suite`, it is listed and measured, and the whole fast suite passes there
    (it took about 10 files before: the axis in fusebench/axes.py, tests pinning it...)."""
    clone = tmp_path / "repo"
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(PROJECT_ROOT), str(clone)], check=True)
    if (PROJECT_ROOT / ".venv").exists():  # as in the checkout: tests that read .venv find it
        (clone / ".venv").symlink_to((PROJECT_ROOT / ".venv").resolve())
    with open(clone / "kernels" / "gelu" / "__init__.py", "a") as f:
        f.write(SIGMOID)
    alone = _run(clone, "list", "--ops", "gelu")
    assert (alone.returncode, alone.stderr) == (2, "list: error: fusebench.yaml: ops.gelu.backends: "
                                                   "kernels/gelu/ registers backend 'sigmoid', which no op's "
                                                   "backends list names: add it to ops.gelu.backends in "
                                                   "fusebench.yaml\n")
    cases = clone / "fusebench.yaml"
    assert GELU_BACKENDS in cases.read_text()
    cases.write_text(cases.read_text().replace(GELU_BACKENDS, GELU_BACKENDS.replace("]", ", sigmoid]")))
    suite = _run(clone, "store", "--suite")  # results/benchmarks.json: the axis has a new value
    assert suite.returncode == 0, suite.stderr
    assert "'sigmoid'" in (clone / "results" / "benchmarks.json").read_text()
    _git(clone, "add", "-A")
    _git(clone, "commit", "-q", "-m", "gelu: a sigmoid backend")
    _git(clone, "checkout", "-q", "-B", "main")

    listed = _run(clone, "list", "--ops", "gelu", "--backends", "sigmoid", "--quick")
    assert listed.returncode == 0, listed.stderr
    assert [line.split()[:2] for line in listed.stdout.splitlines()[1:]] == [["gelu", "sigmoid"]] * 3
    results = tmp_path / "results"
    run = _run(clone, "bench", "--ops", "gelu", "--backends", "sigmoid", "--quick", "--rounds", "2",
               "--no-publish", "--results", str(results))
    assert run.returncode == 0, run.stderr[-2000:]
    assert "| shape | sigmoid |" in run.stdout

    # the whole fast suite, as make test runs it (two workers without a GPU, TEST_JOBS=0: one)
    import torch

    jobs = os.environ.get("TEST_JOBS", "0" if torch.cuda.is_available() else "2")
    workers = ["-n", jobs, "--dist", "loadfile"] if jobs != "0" and importlib.util.find_spec("xdist") else []
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    fast = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not slow",
                           *workers], cwd=clone, capture_output=True, text=True, timeout=5400, env=env)
    assert fast.returncode == 0, fast.stdout[-5000:]
