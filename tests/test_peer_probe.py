"""probes/peer_probe.py on the CPU: its command line, the rotation, the spread and the table on
given numbers, nvbench's report read back, and one line with exit 2 where there is no GPU. (The
measurements themselves need a GPU.)"""

import importlib.util
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("peer_probe", ROOT / "probes" / "peer_probe.py")
peer = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(peer)


def test_the_eight_cases_of_issue_44():
    assert [peer.label(c) for c in peer.CASES] == [
        "gelu/1024/float32", "gelu/16384/float32", "gelu/262144/float32", "gelu/4194304/float32",
        "gelu/67108864/float32", "softmax/65536x128/float32", "softmax/4096x4096/float32",
        "softmax/1024x32768/bfloat16"]


def test_the_command_line(tmp_path):
    args = peer.parse_args([])
    assert (args.procs, args.json, args.child) == (3, None, None)
    assert args.tools == ["fusebench", "triton", "nvbench"]
    args = peer.parse_args(["--procs", "5", "--tools", "triton,fusebench",
                            "--json", str(tmp_path / "p.json")])
    assert (args.procs, args.tools, args.json) == (5, ["triton", "fusebench"], tmp_path / "p.json")
    for bad in (["--procs", "1"], ["--tools", "fusebench,nvbenchh"], ["--tools", ","], ["--procs", "x"]):
        with pytest.raises(SystemExit) as exc:
            peer.parse_args(bad)
        assert exc.value.code == 2


def test_the_tools_rotate():
    tools = ["fusebench", "triton", "nvbench"]
    assert [peer.rotation(tools, k) for k in range(4)] == [
        ["fusebench", "triton", "nvbench"], ["triton", "nvbench", "fusebench"],
        ["nvbench", "fusebench", "triton"], ["fusebench", "triton", "nvbench"]]


def test_the_spread():
    assert peer.spread([10.0, 10.5, 9.5]) == pytest.approx(0.1)
    assert peer.spread([2.0, 2.0, 2.0]) == 0.0
    assert peer.spread([4.0, 1.0]) == pytest.approx(3.0 / 2.5)
    assert math.isnan(peer.spread([1.0])) and math.isnan(peer.spread([0.0, 0.0]))


NO_NVBENCH = "cuda.bench not importable (ModuleNotFoundError: No module named 'cuda')"


def _run(tool, k, seconds, figures, skipped=None):
    return {"tool": tool, "round": k, "seconds": seconds, "figures": figures, "skipped": skipped}


def test_the_summary_and_its_table():
    a, b = "gelu/1024/float32", "softmax/4096x4096/float32"
    def fb(hot, cold, graph, wall):
        return {"hot": hot, "cold": cold, "graph": graph, "wall": wall}

    runs = [
        _run("fusebench", 0, {a: 1.0, b: 2.0}, {a: fb(10.0, 20.0, 5.0, 30.0), b: fb(100, 200, 50, 300)}),
        _run("fusebench", 1, {a: 1.0, b: 1.0}, {a: fb(11.0, 20.0, 5.0, 33.0), b: fb(100, 202, 50.5, 300)}),
        _run("fusebench", 2, {a: 2.0, b: 1.0}, {a: fb(9.0, 20.0, 5.0, 27.0), b: fb(100, 198, 50, 300)}),
        _run("triton", 0, {a: 0.2}, {a: {"cold": 21.0, "graph": 5.0}}),
        _run("triton", 1, {a: 0.4}, {a: {"cold": 19.0, "graph": None}}),
        _run("nvbench", 0, {}, {}, NO_NVBENCH),
        _run("nvbench", 1, {}, {}, NO_NVBENCH),
    ]
    s = peer.summarize(runs)
    fb = s["fusebench"]
    assert fb["processes"] == 3 and fb["s_per_case"] == pytest.approx(8.0 / 6)
    assert fb["spread"]["hot"] == {a: pytest.approx(0.2), b: 0.0}
    assert fb["range"]["cold"] == (0.0, pytest.approx(0.02))
    assert fb["range"]["graph"] == (0.0, pytest.approx(0.01))
    assert fb["range"]["wall"] == (0.0, pytest.approx(0.2))
    tr = s["triton"]
    assert tr["s_per_case"] == pytest.approx(0.3)
    assert tr["spread"] == {"cold": {a: pytest.approx(0.1)}}  # one graph figure: no spread
    assert s["nvbench"]["processes"] == 0 and s["nvbench"]["skipped"].startswith("cuda.bench not importable")
    text = peer.table(s)
    lines = text.splitlines()
    assert lines[2] == ("| fusebench, 3 rounds (`sweep.run_case`) | 3 | 1.33 | hot, cold, graph, wall | "
                        "hot 0.0-20.0 %, cold 0.0-2.0 %, graph 0.0-1.0 %, wall 0.0-20.0 % |")
    assert lines[3] == ("| triton.testing `do_bench` + `do_bench_cudagraph` | 2 | 0.30 | cold "
                        "| cold 10.0-10.0 % |")
    assert lines[4] == f"| NVIDIA nvbench (`cuda.bench`, Python) | 0 | - | - | skipped: {NO_NVBENCH} |"
    assert lines[6] == ("| case | fusebench hot % | fusebench cold % | fusebench graph % | fusebench wall % "
                        "| triton cold % |")
    assert lines[8] == f"| {a} | 20.0 | 0.0 | 0.0 | 20.0 | 10.0 |"
    assert lines[9] == f"| {b} | 0.0 | 2.0 | 1.0 | 0.0 | - |"


def test_nvbench_report_read_back():
    def state(case, cold, batch=None, skipped=False):
        def value(v):
            return [{"name": "value", "type": "float64", "value": v}]

        summaries = [{"tag": "nv/cold/time/gpu/mean", "data": value(cold)},
                     {"tag": "nv/cold/time/cpu/mean", "data": value("1")}]
        if batch is not None:
            summaries.append({"tag": "nv/batch/time/gpu/mean", "data": value(batch)})
        return {"name": f"Device=0 case={case}", "is_skipped": skipped, "summaries": summaries,
                "axis_values": [{"name": "case", "type": "string", "value": case}]}

    report = {"benchmarks": [{"name": "one", "states": [
        state("gelu/1024/float32", "5.5e-06", "2.25e-06"), state("softmax/65536x128/float32", "1.0e-04"),
        state("gelu/16384/float32", "1", skipped=True)]}]}
    assert peer.nvbench_figures(report) == {
        "gelu/1024/float32": {"cold": pytest.approx(5.5), "batch": pytest.approx(2.25)},
        "softmax/65536x128/float32": {"cold": pytest.approx(100.0)}}
    assert peer.nvbench_figures({}) == {}


def test_without_a_gpu_one_line_and_exit_2():
    if torch.cuda.is_available():
        pytest.skip("this host has a GPU")
    p = subprocess.run([sys.executable, str(ROOT / "probes" / "peer_probe.py")], cwd=ROOT, text=True,
                       capture_output=True, env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=120)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr == "peer_probe: needs a CUDA GPU; this host has none\n"
