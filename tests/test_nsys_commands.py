"""The commands make nsys / make trace run: the Makefile calls `fusebench nsys capture` and `fusebench
trace`, and the capture runs the nsys commands Python builds (a fake nsys records them here)."""

import json
import os
import shlex
import subprocess
import sys

import pytest

from fusebench.nsys import tool
from fusebench.ops import OPS
from fusebench.paths import PROJECT_ROOT
from fusebench.registry import BACKENDS

VALID_OPS = ", ".join(OPS)  # the registry's order
VALID_BACKENDS = ", ".join(BACKENDS)

NSYS_PROFILE = ("-t cuda,nvtx --sample=none --cpuctxsw=none --capture-range=cudaProfilerApi "
                "--capture-range-end=stop")


def test_profile_command_traces_cuda_and_nvtx_only_inside_the_profiler_api_window():
    cmd = tool.profile_command("/x/nsys", "nsys/gelu-h200-1a2b3c4", ["python3", "drive.py"])
    assert shlex.join(cmd) == (f"/x/nsys profile {NSYS_PROFILE} -o nsys/gelu-h200-1a2b3c4 -f true "
                               "python3 drive.py")


def test_stats_command_writes_one_csv_per_report():
    cmd = tool.stats_command("nsys", "nsys/g", "nsys/g.nsys-rep")
    assert cmd == ["nsys", "stats", "-q", "-r", "nvtx_gpu_proj_sum,nvtx_kern_sum", "--format", "csv",
                   "-o", "nsys/g", "nsys/g.nsys-rep"]


def test_report_stem_is_op_machine_short_sha():
    assert tool.report_stem("gelu", "h200", "1a2b3c4d5e6f") == "nsys/gelu-h200-1a2b3c4"
    assert tool.report_stem("softmax", "cpu-x86_64", None) == "nsys/softmax-cpu-x86_64-nogit"


def test_driver_args_pass_the_selection_the_way_the_makefile_does():
    assert tool.driver_args("gelu") == ["--op=gelu"]
    assert tool.driver_args("softmax", "eager,torch", "4096x4096", "float32") == [
        "--op=softmax", "--backends", "eager,torch", "--shapes", "4096x4096", "--dtypes", "float32"]


def make_env():
    """The environment for a make of our own: no flags inherited from a `make test` around us."""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    return {**env, "FUSEBENCH_MACHINE": "h200"}


def make_n(*args):
    env = make_env()
    # DEPS= : this interpreter already has the dependencies (no venv step in the output).
    out = subprocess.run(["make", "-n", "--no-print-directory", *args, f"PYTHON={sys.executable}", "DEPS="],
                         cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


@pytest.mark.slow
@pytest.mark.parametrize("selection", [
    (), ("BACKENDS=eager,torch", "SHAPES=4096x4096", "DTYPES=bfloat16", "CALLS=5", "CONFIG=cases.yaml")])
def test_make_nsys_calls_the_one_python_capture(selection):
    op = "softmax" if selection else "gelu"
    lines = make_n("nsys", "LOCAL=1", f"OP={op}", "NSYS=/x/nsys", *selection)
    kv = dict(s.split("=", 1) for s in selection)
    args = tool.driver_args(op, kv.get("BACKENDS"), kv.get("SHAPES"), kv.get("DTYPES"))
    args += ["--calls", "5", "--config", "cases.yaml"] if selection else []
    assert lines[-1] == shlex.join([sys.executable, "-m", "fusebench", "nsys", "capture", *args,
                                    "--nsys", "/x/nsys"])
    assert not [line for line in lines if " profile " in line or " stats " in line]


@pytest.mark.slow
def test_make_trace_writes_a_chrome_trace_beside_the_captures():
    lines = make_n("trace", "OP=gelu")
    assert lines[-1] == shlex.join([sys.executable, "-m", "fusebench", "trace", "--op=gelu"])


FAKE_NSYS = """#!{python}
# A stand-in for nsys: logs its argv, writes what the real one would from tests/data/nsys/.
import json, shutil, sys
from pathlib import Path
args = sys.argv[1:]
data = Path({data!r})
with open({log!r}, "a") as log:
    log.write(json.dumps(args) + "\\n")
if args == ["--version"]:
    print("NVIDIA Nsight Systems version 2025.3.1.90-253135822126v0")
elif args[0] == "profile":
    out = args[args.index("-o") + 1]
    side = Path(args[args.index("--json") + 1])
    assert not side.exists(), "the old side file was not removed"
    shutil.copy(data / "gelu-h200-a54392d.json", side)
    Path(out + ".nsys-rep").write_text("timeline")
elif args[0] == "stats":
    prefix = args[args.index("-o") + 1]
    for report in args[args.index("-r") + 1].split(","):
        shutil.copy(data / f"gelu-h200-a54392d_{{report}}.csv", f"{{prefix}}_{{report}}.csv")
"""


def test_capture_runs_profile_then_stats_then_writes_the_summary(monkeypatch, capsys, tmp_path):
    """The whole pipeline on the CPU with a fake nsys: the commands it runs are the ones
    tool.profile_command and tool.stats_command build (each printed), the stale files of an
    earlier capture go first, and the capture's files land in <checkout>/nsys/."""
    from fusebench.commands import nsys as nsys_cmd

    log = tmp_path / "argv.jsonl"
    fake = tmp_path / "bin" / "nsys"
    fake.parent.mkdir()
    data = PROJECT_ROOT / "tests" / "data" / "nsys"
    fake.write_text(FAKE_NSYS.format(python=sys.executable, data=str(data), log=str(log)))
    fake.chmod(0o755)
    checkout = tmp_path / "checkout"
    (checkout / "nsys").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(nsys_cmd, "PROJECT_ROOT", checkout)
    monkeypatch.setattr(nsys_cmd, "_require_gpu", lambda what: None)
    monkeypatch.setattr(nsys_cmd, "_require_nvtx", lambda: None)
    monkeypatch.setattr(nsys_cmd._environment(), "machine_name", lambda *a: "h200")
    monkeypatch.setattr(nsys_cmd._environment(), "git_commit", lambda *a: "a54392d26a6e268c")
    stem = "nsys/gelu-h200-a54392d"
    for stale in (f"{stem}.json", f"{stem}.sqlite", f"{stem}_nvtx_old.csv"):
        (checkout / stale).write_text("stale")
    cases = tmp_path / "cases.yaml"
    cases.write_text((PROJECT_ROOT / "fusebench.yaml").read_text())
    status, err = driver_in_process(monkeypatch, capsys, "capture", "--op=gelu", "--backends", "eager,torch",
                                    "--config", "cases.yaml", "--nsys", str(fake))
    assert status == 0, err
    program = [sys.executable, "-m", "fusebench", "nsys", "run", "--op=gelu", "--backends", "eager,torch",
               "--calls", "20", "--config", str(cases), "--json", f"{stem}.json"]
    runs = [json.loads(line) for line in log.read_text().splitlines()]
    expected = [tool.profile_command(str(fake), stem, program),
                tool.stats_command(str(fake), stem, f"{stem}.nsys-rep")]
    assert runs[1:] == [c[1:] for c in expected] and runs[0] == ["--version"]
    printed = [line for line in err.splitlines() if line.startswith(str(fake))]
    assert printed == [shlex.join(c) for c in expected]
    assert sorted(p.name for p in (checkout / "nsys").iterdir()) == sorted(
        f"gelu-h200-a54392d{end}" for end in (".json", ".nsys-rep", ".md", ".csv",
                                               "_nvtx_gpu_proj_sum.csv", "_nvtx_kern_sum.csv"))
    assert (checkout / f"{stem}.csv").read_text() == (data / "gelu-h200-a54392d.csv").read_text()


@pytest.mark.parametrize("text, version", [
    ("NVIDIA Nsight Systems version 2025.3.1.90-253135822126v0", (2025, 3, 1)),
    ("NVIDIA Nsight Systems version 2023.4.4.54-234433681190v0", (2023, 4, 4)),
    ("NVIDIA Nsight Systems version 2024.3", (2024, 3, 0)),
    ("nsys: command not found", None),
])
def test_nsys_version_parsing(text, version):
    assert tool.parse_version(text) == version


def fake_nsys(tmp_path, version_line, status=0):
    path = tmp_path / "nsys"
    path.write_text(f"#!/bin/sh\necho '{version_line}'\nexit {status}\n")
    path.chmod(0o755)
    return str(path)


def test_a_recent_nsys_passes_the_check(tmp_path):
    path = fake_nsys(tmp_path, "NVIDIA Nsight Systems version 2025.3.1.90-253135822126v0")
    assert tool.check(path) == (2025, 3, 1)


def test_an_nsys_older_than_2024_3_is_refused_with_the_reason(tmp_path):
    path = fake_nsys(tmp_path, "NVIDIA Nsight Systems version 2024.2.1.106-242134037904v0")
    with pytest.raises(tool.NsysUnavailable, match=r"is Nsight Systems 2024\.2\.1: versions before "
                                                    r"2024\.3 silently drop the NVTX ranges"):
        tool.check(path)


def test_an_nsys_that_prints_no_version_is_refused(tmp_path):
    with pytest.raises(tool.NsysUnavailable, match="cannot read the version"):
        tool.check(fake_nsys(tmp_path, "error while loading shared libraries: libdw.so.1", 127))


def driver(*args, **kw):
    return subprocess.run([sys.executable, "-m", "fusebench", *args], cwd=PROJECT_ROOT,
                          capture_output=True, text=True, timeout=300, **kw)


@pytest.mark.slow
def test_without_nsys_one_line_says_how_to_get_it_and_the_exit_is_non_zero():
    out = driver("nsys", "check", "--op=gelu", "--nsys", "/nonexistent/nsys")
    assert out.returncode == 1
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr
    assert out.stderr.startswith("nsys: error: nsys not found (NSYS=/nonexistent/nsys): "
                                 "install Nsight Systems 2024.3 or newer")
    assert "NSYS=/path/to/nsys" in out.stderr


def test_with_nsys_but_no_gpu_the_check_says_so(monkeypatch, capsys, tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    path = fake_nsys(tmp_path, "NVIDIA Nsight Systems version 2025.3.1.90-253135822126v0")
    status, err = driver_in_process(monkeypatch, capsys, "check", "--op=gelu", "--nsys", path)
    assert (status, err) == (1, "nsys: error: make nsys needs an NVIDIA GPU (torch sees none); "
                                "`make trace OP=gelu` traces the CPU ops here\n")


@pytest.mark.slow
def test_make_nsys_without_nsys_stops_before_profiling():
    out = subprocess.run(["make", "nsys", "OP=gelu", "NSYS=/nonexistent/nsys", f"PYTHON={sys.executable}",
                          "DEPS="],
                         cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300, env=make_env())
    assert out.returncode != 0
    assert "nsys: error: nsys not found (NSYS=/nonexistent/nsys)" in out.stderr
    assert "profile" not in out.stdout


def driver_in_process(monkeypatch, capsys, *args):
    """Run ``fusebench nsys`` in this process (no interpreter start-up): (exit status, stderr)."""
    from fusebench import commands

    with pytest.raises(SystemExit) as exited:
        commands.main(["nsys", *args])
    return exited.value.code, capsys.readouterr().err


@pytest.mark.slow
def test_a_bad_name_in_a_fresh_process_is_one_line_without_traceback():
    out = driver("nsys", "check", "--op=relu", "--nsys", "nsys")
    assert out.returncode == 2
    assert out.stderr == f"nsys: error: unknown op 'relu'; valid ops: {VALID_OPS}\n"


@pytest.mark.parametrize("args, message", [
    (["--op=relu"], f"nsys: error: unknown op 'relu'; valid ops: {VALID_OPS}"),
    (["--op="], f"nsys: error: OP= names the op to profile; valid ops: {VALID_OPS}"),
    (["--op=gelu", "--backends", "cudnn"],
     f"nsys: error: unknown backend 'cudnn'; valid backends: {VALID_BACKENDS}"),
    (["--op=softmax", "--shapes", "3x3"], "nsys: error: unknown shape '3x3'; valid shapes: "
     "65536x128, 16384x1024, 4096x4096, 32768x4096, 8192x16384, 1024x32768, 4096x65536, 256x262144, "
     "1x1048576"),
    (["--op=gelu", "--dtypes", "fp8"],
     "nsys: error: unknown dtype 'fp8'; valid dtypes: float32, bfloat16, float16"),
])
def test_unknown_names_are_one_line_and_exit_2(monkeypatch, capsys, args, message):
    status, err = driver_in_process(monkeypatch, capsys, "check", *args, "--nsys", "/nonexistent/nsys")
    assert (status, err) == (2, message + "\n")


@pytest.mark.slow
def test_trace_writes_a_chrome_trace_with_the_nvtx_range_names(tmp_path):
    """make trace works with no nsys, and on the CPU (CPU ops only)."""
    out = driver("trace", "--op=gelu", "--backends", "eager,torch,cuda", "--shapes", "1024",
                 "--dtypes", "float32", "--calls", "3", "--out", str(tmp_path / "t.json"))
    assert out.returncode == 0, out.stderr[-2000:]
    events = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    ranges = [e for e in events if e.get("name", "").startswith("gelu/")
              and e.get("cat") == "user_annotation"]
    assert [e["name"] for e in sorted(ranges, key=lambda e: e["ts"])] == [
        "gelu/eager/1024/float32", "gelu/torch/1024/float32"]
    if "cuda" not in out.stderr.split("wrote")[0]:
        pytest.fail(out.stderr)
    assert "gelu/cuda/1024/float32" in out.stderr  # reported, with its reason, not traced
    # eager GELU: 9 aten ops per call on the CPU too, 3 calls inside its range
    eager = next(e for e in ranges if e["name"].startswith("gelu/eager"))
    inside = [e for e in events if e.get("cat") == "cpu_op" and e.get("ph") == "X"
              and eager["ts"] <= e["ts"] <= eager["ts"] + eager["dur"]]
    assert sum(e["name"] in ("aten::mul", "aten::add", "aten::tanh") for e in inside) == 9 * 3


@pytest.mark.slow
def test_nsys_capture_runs_the_check_first_and_stops_there_without_nsys():
    out = driver("nsys", "capture", "--op=gelu", "--nsys", "/nonexistent/nsys")
    assert out.returncode == 1
    assert out.stderr.startswith("nsys: error: nsys not found (NSYS=/nonexistent/nsys)")
    assert out.stderr.count("\n") == 1 and "profile" not in out.stderr


@pytest.mark.slow
@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="the CPU's default shapes")
def test_trace_says_the_grid_it_traces_and_its_help_says_the_same(tmp_path):
    """Issue 54, item 8: `make trace` on a CPU traced shapes other than the nsys grid its help named."""
    from fusebench.nsys.plan import DEFAULT_GRID
    from fusebench.ops import get_op

    grid = DEFAULT_GRID["cpu"]
    labels = ["x".join(map(str, s)) for s in get_op("gelu").grids[grid]]
    out = driver("trace", "--op=gelu", "--backends", "torch", "--dtypes", "float32", "--calls", "1",
                 "--out", str(tmp_path / "t.json"))
    assert out.returncode == 0, out.stderr[-2000:]
    assert f"({len(labels)} range(s) of gelu's {grid} grid: {', '.join(labels)}; CPU ops only" in out.stderr
    helped = " ".join(driver("trace", "--help").stdout.split())
    assert f"the op's nsys grid on a GPU, as `make nsys`; its {grid} grid on a host without one" in helped
