"""No torch where none is needed (issue 43, item 4): every ``--help``, and ``compare``, ``publish``
(with its Verdicts and landing pages), ``plots``, ``table``, ``collect`` and ``store`` on the committed
results, run in a Python where torch and triton cannot be imported (``tests/torchless.py``), with the same
output as with them."""

from __future__ import annotations

import json
import platform
import shutil
import subprocess
import sys
import types

import pytest
from committed import committed, committed_folder

from fusebench import machine
from fusebench.commands import COMMANDS
from fusebench.paths import PROJECT_ROOT


def torchless(*argvs: list[str]) -> tuple[list[dict], list[str]]:
    """Each command line run in turn without torch and triton: ``([{argv, code, out, err}],
    refused modules that got loaded)``."""
    out = subprocess.run([sys.executable, str(PROJECT_ROOT / "tests" / "torchless.py"),
                          *(json.dumps([str(a) for a in argv]) for argv in argvs)],
                         cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    # asv publish writes its progress to the file descriptor itself: only our JSON lines count
    lines = [json.loads(line) for line in out.stdout.splitlines() if line.startswith('{"')]
    return [d for d in lines if "argv" in d], lines[-1]["loaded"]


def test_every_help_runs_without_torch():
    nsys_steps = [["nsys", step, "--help"] for step in ("capture", "plan", "stem", "check", "run", "summary")]
    ran, loaded = torchless(["--help"], *([name, "--help"] for name in COMMANDS), *nsys_steps)
    assert loaded == []
    assert [(r["argv"], r["code"], r["err"]) for r in ran] == [(r["argv"], 0, "") for r in ran]
    for r in ran[1:]:
        assert r["out"].startswith(f"usage: fusebench {' '.join(r['argv'][:-1])}"), r


def test_the_axes_agree_with_torch():
    import torch

    from fusebench import axes, registry

    assert list(registry.DTYPES) == list(axes.PLAIN_DTYPES)
    assert {n: torch.empty((), dtype=p.dtype).element_size() for n, p in registry.PRECISIONS.items()} \
        == axes.ELEMENT_SIZE


def _recorded_ops(results_dir) -> set[str]:
    """The ops of which some run record beside ``results_dir`` holds a case."""
    from fusebench.report.described import _records
    from fusebench.storage import runrecord

    return {r.op for rec in _records(runrecord.records_dir(results_dir), results_dir) for r in rec.records}


def test_the_ops_described_from_the_records_are_the_registered_ops(tmp_path):
    """Every op a committed record holds is described as its package declares it. An op no record
    holds yet (one just added, docs/extending.md) is refused, and the reports import it instead
    (``for_reports``, the next test)."""
    import yaml

    from fusebench.ops import configured
    from fusebench.registry import PRECISIONS
    from fusebench.report.described import NotDescribed, describe

    stored = committed_folder("results")
    recorded = _recorded_ops(stored)
    ops = configured()
    assert {"gelu", "softmax", "rmsnorm", "matmul"} <= recorded
    config = None
    if new := [name for name in ops if name not in recorded]:
        with pytest.raises(NotDescribed, match=f"holds the declared work of ({'|'.join(new)}) "):
            describe(None, stored)
        data = yaml.safe_load((PROJECT_ROOT / "fusebench.yaml").read_text())
        data["ops"] = {name: entry for name, entry in data["ops"].items() if name in recorded}
        config = tmp_path / "recorded.yaml"
        config.write_text(yaml.safe_dump(data, sort_keys=False))
    described = describe(config, stored)
    for name, op in ops.items():
        if name not in recorded:
            continue
        d = described[name]
        assert (d.roofline, d.grids, d.dtypes, d.headline, d.backends) == (
            op.roofline, op.grids, op.dtypes, op.headline, tuple(op.backends))
        assert (d.flops is None) == (op.flops is None)
        for shape in op.grids["default"]:
            for dtype in op.dtypes:
                assert d.bytes_moved(shape, dtype) == op.bytes_moved(shape, PRECISIONS[dtype].dtype)
                assert d.flops is None or d.flops(shape) == op.flops(shape)


def test_without_the_records_the_reports_import_the_ops(tmp_path):
    from fusebench.ops import for_reports
    from fusebench.registry import Op
    from fusebench.report.described import NotDescribed, describe

    shutil.copytree(committed_folder("results"), tmp_path / "results")
    with pytest.raises(NotDescribed, match=r"^no run record beside .* holds the declared work of gelu "):
        describe(None, tmp_path / "results")
    assert all(isinstance(op, Op) for op in for_reports(None, tmp_path / "results"))


def test_this_machine_is_named_without_torch(monkeypatch):
    monkeypatch.setenv("FUSEBENCH_MACHINE", "box")
    assert machine.this_machine() == "box"
    monkeypatch.delenv("FUSEBENCH_MACHINE")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # no GPU for this process: the CPU's name
    assert machine.this_machine() == machine.cpu_machine() == f"cpu-{platform.machine().lower()}"
    names = {("index", 1): b"NVIDIA H200"}  # bytes, as older nvidia-ml-py returns them
    fake = types.SimpleNamespace(nvmlInit=lambda: None, nvmlDeviceGetCount=lambda: 2,
                                 nvmlDeviceGetHandleByIndex=lambda i: ("index", i),
                                 nvmlDeviceGetHandleByUUID=lambda u: ("uuid", u),
                                 nvmlDeviceGetName=lambda h: names.get(h, "NVIDIA H100 80GB HBM3"))
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,0")  # the first visible GPU names the machine
    assert machine.this_machine() == "h200"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-8d5d2242")
    assert machine.this_machine() == "h100-80gb-hbm3"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert machine.this_machine() == "h100-80gb-hbm3"  # device 0


@pytest.mark.slow
def test_the_readers_run_without_torch_on_the_committed_results(tmp_path):
    from fusebench.ops import configured

    stored = committed_folder("results")
    recorded = _recorded_ops(stored)
    if new := [name for name in configured() if name not in recorded]:  # an op just added
        pytest.fail(f"no committed run record holds {', '.join(new)}: the readers describe each op from "
                    "the records, without torch; store a GPU run of the new op with the commit "
                    "(docs/extending.md, 'Before you commit')")
    shutil.copytree(committed_folder("results"), tmp_path / "results")
    shutil.copytree(committed_folder("records"), tmp_path / "records")
    res, rec = tmp_path / "results", tmp_path / "records"
    shutil.copytree(res, tmp_path / "bare" / "results")  # no records: the ops must be imported
    base, head = (subprocess.run(["git", "rev-parse", c], cwd=PROJECT_ROOT, capture_output=True, text=True,
                                 check=True).stdout.strip() for c in ("616a8e55", "463f960f"))
    compare = ["compare", "--base", base, "--head", head, "--machine", "h200", "--results", res]
    ran, loaded = torchless(
        compare,
        ["plots", "--results", res, "--out", tmp_path / "plots"],
        ["publish", "--results", res, "--html", tmp_path / "html", "--cdn"],
        ["table", rec / "h200" / "463f960f.json.xz"],
        ["collect", res, "--into", tmp_path / "collected" / "results"],
        ["store", rec / "h200" / "463f960f.json.xz", "--results", tmp_path / "stored" / "results"],
        ["plots", "--results", tmp_path / "bare" / "results", "--out", tmp_path / "bare" / "plots"])
    assert loaded == []
    by = {r["argv"][0]: r for r in ran[:-1]}
    assert {k: r["code"] for k, r in by.items()} == {
        "compare": 0, "plots": 0, "publish": 0, "table": 0, "collect": 0, "store": 0}, ran
    # the same verdicts as with torch
    with_torch = subprocess.run([sys.executable, "-m", "fusebench", *map(str, compare)], cwd=PROJECT_ROOT,
                                capture_output=True, text=True)
    assert (by["compare"]["out"], by["compare"]["err"]) == (with_torch.stdout, with_torch.stderr)
    assert "-> ok" in by["compare"]["err"]
    # the plots are the committed ones, byte for byte, from plots and from publish alike
    shown = committed("plots/h200/*.png")
    assert len(shown) == 10
    for png in shown:
        assert (tmp_path / "plots" / "h200" / png.name).read_bytes() == png.read_bytes(), png.name
        assert (tmp_path / "html" / "plots" / "h200" / png.name).read_bytes() == png.read_bytes(), png.name
    assert "h200" in (tmp_path / "html" / "verdicts" / "index.html").read_text()
    landing = (tmp_path / "html" / "index.html").read_text()  # the headline tables, without torch
    assert "<h1>How much fusion buys, per GPU</h1>" in landing
    assert landing.count('<table class="fb-table"') >= 3
    assert by["table"]["out"].startswith("gelu") or "GB/s" in by["table"]["out"]
    assert (tmp_path / "collected" / "records" / "h200" / "463f960f.json.xz").is_file()
    assert len(list((tmp_path / "stored" / "results" / "h200").glob("463f960f-*.json"))) == 1
    # no record declares the work, and the ops need torch: one line, exit 2
    bare = ran[-1]
    assert bare["code"] == 2 and bare["err"].count("\n") == 1, bare
    assert bare["err"].startswith("plots: error: no run record beside ") and "need torch" in bare["err"]
