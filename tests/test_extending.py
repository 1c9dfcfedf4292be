"""docs/extending.md's checklist for a new op, followed on a clone: one package in kernels/ and one
entry in fusebench.yaml, and the op is listed, measured, stored and judged with no other change."""

import json
import os
import subprocess
import sys

import pytest

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
