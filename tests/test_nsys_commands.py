"""The commands make nsys / make trace run: built in Python and spelled out in the Makefile, alike."""

import json
import os
import shlex
import subprocess
import sys

import pytest

from fusebench.measure.environment import git_commit
from fusebench.nsys import tool
from fusebench.paths import PROJECT_ROOT
from fusebench.registry import BACKENDS
from kernels import OPS

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
    (), ("BACKENDS=eager,torch", "SHAPES=4096x4096", "DTYPES=bfloat16")])
def test_make_nsys_runs_exactly_the_commands_python_builds(selection):
    op = "softmax" if selection else "gelu"
    lines = make_n("nsys", f"OP={op}", "NSYS=/x/nsys", *selection)
    stem = tool.report_stem(op, "h200", git_commit())
    kv = dict(s.split("=", 1) for s in selection)
    args = tool.driver_args(op, kv.get("BACKENDS"), kv.get("SHAPES"), kv.get("DTYPES"))
    driver = [sys.executable, "-m", "fusebench", "nsys"]
    expected = [
        shlex.join([*driver, "check", *args, "--nsys", "/x/nsys"]),
        f"rm -f {stem}.json {stem}.sqlite {stem}_nvtx_*.csv",
        shlex.join(tool.profile_command("/x/nsys", stem, [*driver, "run", *args, "--json", f"{stem}.json"])),
        shlex.join(tool.stats_command("/x/nsys", stem, f"{stem}.nsys-rep")),
        shlex.join([*driver, "summary", stem]),
    ]
    assert lines[-5:] == expected
    assert f"/x/nsys profile {NSYS_PROFILE} -o nsys/{op}-h200-" in lines[-3]
    assert f"/x/nsys stats -q -r nvtx_gpu_proj_sum,nvtx_kern_sum --format csv -o nsys/{op}-h200-" in lines[-2]


@pytest.mark.slow
def test_make_trace_writes_a_chrome_trace_beside_the_captures():
    lines = make_n("trace", "OP=gelu")
    stem = tool.report_stem("gelu", "h200", git_commit())
    assert lines[-1] == shlex.join([sys.executable, "-m", "fusebench", "trace", "--op=gelu",
                                    "--out", f"{stem}.trace.json"])


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
