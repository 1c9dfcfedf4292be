"""fusebench as a package: the wheel holds the harness, the kernels with their CUDA sources, the
case file and the `fusebench` command; every command answers --help; bad input is one line
(issue 16, items 1 and 3)."""

import argparse
import csv
import io
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from fusebench import commands
from fusebench.paths import PROJECT_ROOT
from fusebench.record import Record, Sweep
from fusebench.storage import runrecord


def fusebench(*args, **kw):
    return subprocess.run([sys.executable, "-m", "fusebench", *args], cwd=PROJECT_ROOT, capture_output=True,
                          text=True, timeout=300, **kw)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """The wheel built from a copy of the checkout's tracked files (setuptools writes build/ and
    *.egg-info beside the sources: not into the checkout)."""
    src, out = tmp_path_factory.mktemp("src"), tmp_path_factory.mktemp("wheel")
    files = subprocess.run(["git", "ls-files", "-z"], cwd=PROJECT_ROOT, capture_output=True,
                           check=True).stdout
    for rel in filter(None, files.decode().split("\0")):
        if (PROJECT_ROOT / rel).exists() or (PROJECT_ROOT / rel).is_symlink():
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(PROJECT_ROOT / rel, src / rel, follow_symlinks=False)
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                            "--wheel-dir", str(out), str(src)], capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-2000:]
    (path,) = out.glob("fusebench-*.whl")
    return zipfile.ZipFile(path)


@pytest.mark.slow
def test_the_wheel_holds_the_packages_the_cuda_sources_and_the_case_file(wheel):
    names = set(wheel.namelist())
    assert {"fusebench/__main__.py", "fusebench/measure/sweep.py", "fusebench/commands/bench.py",
            "fusebench/ops.py", "fusebench/kernels/gelu/__init__.py", "fusebench/kernels/gelu/triton.py",
            "fusebench/kernels/softmax/softmax.cu", "fusebench/kernels/gelu/gelu.cu",
            "fusebench/kernels/cuda/binding.cpp", "fusebench/kernels/cuda/common.cuh",
            "fusebench/kernels/cuda/fusebench_cuda.h", "fusebench/kernels/cuda_ext.py",
            "fusebench/fusebench.yaml"} <= names
    # the harness and its kernels only: kernels/ goes in as fusebench.kernels, never as a top-level
    # package of that common name
    assert {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")} == {"fusebench"}
    # the packaged case file is the repository's (the link followed), not a stub
    assert wheel.read("fusebench/fusebench.yaml") == (PROJECT_ROOT / "fusebench.yaml").read_bytes()


@pytest.mark.slow
def test_the_wheel_declares_the_command_and_the_dependencies(wheel):
    meta = next(n for n in wheel.namelist() if n.endswith(".dist-info/entry_points.txt"))
    assert "[console_scripts]\nfusebench = fusebench.commands:main" in wheel.read(meta).decode()
    metadata = wheel.read(next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    from packaging.requirements import Requirement

    requires = {(r.name, str(r.specifier)) for r in (Requirement(ln.split(":", 1)[1].strip())
                                                     for ln in metadata.splitlines()
                                                     if ln.startswith("Requires-Dist:")) if not r.marker}
    assert {"torch", "triton", "asv", "asv-runner", "nvtx", "nvidia-ml-py", "numpy", "scipy", "matplotlib",
            "pyyaml", "tqdm", "jinja2"} <= {name for name, _ in requires}
    # the bounds of pyproject.toml (tests/test_lock.py holds them to the locks) reach the wheel
    assert {("asv", "==0.6.6"), ("torch", ">=2.4"), ("jinja2", ">=3.0")} <= requires


@pytest.mark.slow
def test_help_lists_every_command():
    out = fusebench("--help")
    assert out.returncode == 0
    for name in commands.COMMANDS:
        assert f"\n    {name} " in out.stdout, name
    assert set(commands.COMMANDS) == {"bench", "list", "compare", "publish", "preview", "plots", "collect",
                                      "nsys", "ncu", "trace", "profile", "pitfalls", "mlp", "tune", "table",
                                      "bisect", "store", "ab"}


MORE_HELP = [["nsys", "run", "--help"], ["ncu", "capture", "--help"]]


@pytest.mark.parametrize("argv", [[name, "--help"] for name in commands.COMMANDS] + MORE_HELP)
def test_each_command_answers_help(argv, capsys):
    with pytest.raises(SystemExit) as done:
        commands.main(argv)
    assert done.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: fusebench {' '.join(argv[:-1])}")


@pytest.mark.slow
def test_an_unknown_command_is_one_line_and_exit_2():
    out = fusebench("benhc")
    assert out.returncode == 2
    assert out.stderr == ("fusebench: error: argument <command>: invalid choice: 'benhc' (choose from bench, "
                          "list, compare, publish, preview, plots, collect, nsys, trace, profile, pitfalls, "
                          "mlp, tune)\n") or out.stderr.count("\n") == 1
    assert out.stderr.startswith("fusebench: error: argument <command>: invalid choice: 'benhc'")


def test_an_unknown_option_is_one_line_and_exit_2(capsys):
    with pytest.raises(SystemExit) as done:
        commands.main(["bench", "--quik"])
    assert done.value.code == 2
    assert capsys.readouterr().err == "bench: error: unrecognized arguments: --quik\n"


def test_list_prints_the_cases_and_honours_the_selection(capsys):
    with pytest.raises(SystemExit) as done:
        commands.main(["list", "--ops", "softmax,matmul", "--backends", "torch", "--dtypes", "float32",
                       "--shapes", "1x1048576,256x256", "--quick"])
    assert done.value.code == 0
    out = capsys.readouterr()
    import torch

    if torch.cuda.is_available():  # the quick grid has both shapes
        return
    assert out.out.splitlines() == ["op       backend  shape      dtype",
                                    "softmax  torch    1x1048576  float32",
                                    "matmul   torch    256x256    float32"]
    assert out.err == "list: 2 case(s) of the cpu-quick grid: 2 to build and time\n"


def test_an_unknown_shape_names_the_valid_ones(capsys):
    with pytest.raises(SystemExit) as done:
        commands.main(["bench", "--ops", "softmax", "--shapes", "4096x4097"])
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("bench: error: unknown shape '4096x4097'; valid shapes: ") and "1x1048576" in err


def test_the_run_record_as_csv_has_one_row_per_case():
    recs = [Record("gelu", "torch", "1024", "float32", device_time_ms=0.01, kernels=["a", "b"]),
            Record("gelu", "cuda", "1024", "float32", status="skipped", reason="needs a CUDA GPU")]
    rows = list(csv.DictReader(io.StringIO(runrecord.to_csv(Sweep({}, 100.0, "cpu", recs)))))
    assert [(r["backend"], r["status"], r["device_time_ms"], r["kernels"], r["reason"]) for r in rows] == [
        ("torch", "ok", "0.01", "a; b", ""), ("cuda", "skipped", "", "", "needs a CUDA GPU")]
    assert "rounds" not in rows[0]


def test_no_sys_path_edits_in_the_code():
    hits = subprocess.run(["git", "grep", "-n", "sys.path.insert", "--", "fusebench", "scripts",
                           "benchmarks"], cwd=PROJECT_ROOT, capture_output=True, text=True).stdout
    assert hits == ""


def test_the_harness_is_handed_its_ops_and_never_imports_them():
    # kernels/ imports the harness's contract (fusebench.registry, backends, tuning); the arrow never
    # points back: only the command line (fusebench/commands) and asv's entry (benchmarks/suite.py)
    # name the ops, and the registry (fusebench/ops.py) finds them by the case file's names
    harness = ["fusebench/measure", "fusebench/storage", "fusebench/asv", "fusebench/gate",
               "fusebench/report", "fusebench/site", "fusebench/nsys", "fusebench/lecture",
               *(str(p.relative_to(PROJECT_ROOT)) for p in (PROJECT_ROOT / "fusebench").glob("*.py"))]
    ops = (r"^\s*(from fusebench\.(ops|kernels)\b|import fusebench\.(ops|kernels)\b"
           r"|from fusebench import (ops|kernels)\b)")
    hits = subprocess.run(["git", "grep", "-nE", ops, "--", *harness],
                          cwd=PROJECT_ROOT, capture_output=True, text=True).stdout
    assert hits == ""


def test_the_progress_bar_shows_elapsed_and_remaining_time_on_a_terminal_only(monkeypatch):
    pytest.importorskip("tqdm")
    from fusebench.measure import progress

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    term = Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    bar = progress.rounds_bar(4)
    for _ in range(2):
        bar.update()
    bar.refresh()
    text = term.getvalue()
    bar.close()
    assert "rounds" in text and "2/4 [00:00<00:00" in text, text
    monkeypatch.setattr(sys, "stderr", io.StringIO())  # a log file or a pipe: no bar at all
    quiet = progress.rounds_bar(4)
    quiet.update()
    quiet.close()
    assert quiet.disable and sys.stderr.getvalue() == ""


@pytest.mark.slow
def test_pip_install_gives_a_fusebench_command_that_works_outside_the_checkout(tmp_path, wheel):
    """A fresh venv that sees this interpreter's packages (a .pth file: no index needed), the wheel
    installed into it: the console command, the packaged case file, run from outside the checkout."""
    import site
    import sysconfig

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    ask = "import sysconfig; print(sysconfig.get_path('purelib'))"
    purelib = subprocess.run([str(venv / "bin" / "python"), "-c", ask], capture_output=True, text=True,
                             check=True).stdout.strip()
    ours = [p for p in (*site.getsitepackages(), sysconfig.get_path("purelib")) if p != str(PROJECT_ROOT)]
    (Path(purelib) / "parent.pth").write_text("\n".join(dict.fromkeys(ours)) + "\n")
    done = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-deps",
                           "--no-index", wheel.filename], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([str(venv / "bin" / "fusebench"), "list", "--ops", "matmul", "--dtypes", "tf32",
                          "--quick"], cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[1].split()[:4] == ["matmul", "torch", "256x256", "tf32"]
    where = subprocess.run([str(venv / "bin" / "python"), "-c",
                            "import fusebench.kernels.gelu; print(fusebench.kernels.gelu.__file__)"],
                           cwd=tmp_path, capture_output=True, text=True, env=env).stdout
    assert where.startswith(str(venv)), where
    # the distribution claims no top-level package of a common name (the ops were `kernels` once)
    old = subprocess.run([str(venv / "bin" / "python"), "-c", "import kernels"], cwd=tmp_path,
                         capture_output=True, text=True, env=env)
    assert old.returncode == 1 and "No module named 'kernels'" in old.stderr, old.stderr


def test_help_shows_literals_as_a_terminal_does():
    """The command docstrings are reST (``x``); `fusebench --help` and each command's help show `x`."""
    from fusebench import commands
    top = commands.parser().format_help()
    assert "``" not in top and "The `fusebench` command" in top
    sub = commands.parser("store")
    store_help = next(a for a in sub._actions if isinstance(a, argparse._SubParsersAction)).choices["store"]
    assert "``" not in store_help.format_help()


def test_list_says_how_many_of_its_count_it_does_not_list(capsys):
    """A backend an op does not register is counted (the run records it skipped) but not listed:
    the count line says so, with the numbers."""
    from fusebench import commands
    with pytest.raises(SystemExit) as done:
        commands.main(["list", "--ops", "gelu,matmul", "--backends", "torch,triton", "--dtypes",
                       "float32", "--quick"])
    assert done.value.code == 0
    out = capsys.readouterr()
    listed = len(out.out.splitlines()) - 1
    total = int(out.err.split(" case(s)")[0].split()[-1])
    assert total > listed > 0
    assert out.err.splitlines()[1] == (f"list: {listed} listed above (not the {total - listed} of an op "
                                       "without such a backend)")
