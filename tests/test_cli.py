"""Bad input: one line on stderr naming the valid values, exit status 2, never a traceback."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from fusebench.ops import OPS
from fusebench.paths import PROJECT_ROOT
from fusebench.registry import BACKENDS

VALID_OPS = ", ".join(OPS)  # the registry's order
VALID_BACKENDS = ", ".join(BACKENDS)


def bench(*args):
    return subprocess.run([sys.executable, "-m", "fusebench", "bench", *args], cwd=PROJECT_ROOT,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.slow
@pytest.mark.parametrize("args, message", [
    (["--ops", "relu"], f"bench: error: unknown op 'relu'; valid ops: {VALID_OPS}"),
    (["--backends", "cudnn"],
     f"bench: error: unknown backend 'cudnn'; valid backends: {VALID_BACKENDS}"),
    (["--dtypes", "fp8"],
     "bench: error: unknown dtype 'fp8'; valid dtypes: float32, bfloat16, float16, tf32"),
    (["--ops", "gelu", "--shapes", "16384,4096x4096"],
     "bench: error: unknown shape '4096x4096'; valid shapes: " + ", ".join(
         ["1024", "16384", "262144", "1048576"] if not __import__("torch").cuda.is_available() else
         ["1024", "16384", "262144", "1048576", "4194304", "16777216", "67108864", "16384x16384"])),
])
def test_unknown_names_are_one_line_and_exit_2(args, message):
    out = bench(*args)
    assert out.returncode == 2
    assert out.stderr.strip() == message
    assert "Traceback" not in out.stderr


@pytest.mark.slow
def test_quick_bench_end_to_end(tmp_path):
    """A real quick run on this machine into a temporary results folder: sweep, asv, summary."""
    out = subprocess.run(
        [sys.executable, "-m", "fusebench", "bench", "--quick", "--ops", "gelu", "--dtypes", "float32",
         "--backends", "eager,torch", "--results", str(tmp_path / "results"),
         "--json", str(tmp_path / "run.json"), "--csv", str(tmp_path / "run.csv")],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=600,
        env={**__import__("os").environ, "HOME": str(tmp_path)})
    assert out.returncode == 0, out.stderr[-2000:]
    import torch

    from fusebench.measure.sweep import grid_name
    from fusebench.ops import get_op

    grid = grid_name(torch.device("cuda" if torch.cuda.is_available() else "cpu"), quick=True)
    n = 2 * len(get_op("gelu").grids[grid])  # two backends, one dtype: cpu-quick here, 2 cases
    assert f"({grid} grid)" in out.stderr and f"[1/{n}] gelu     eager" in out.stderr
    assert "| shape | eager | torch |" in out.stdout
    stored = list((tmp_path / "results").rglob("*.json"))
    assert len(stored) >= 2  # machine.json and the commit's result file (and benchmarks.json)
    # --json: the run's record (the stored record's format), --csv: one row per case
    from fusebench.record import Sweep

    record = Sweep.load(tmp_path / "run.json")
    assert [(r.op, r.backend, r.dtype) for r in record.records] == [("gelu", "eager", "float32"),
                                                                    ("gelu", "torch", "float32")] * (n // 2)
    assert record.rounds == 3 and all(len(r.rounds) == 3 for r in record.records if r.status == "ok")
    rows = (tmp_path / "run.csv").read_text().splitlines()
    assert rows[0].startswith("op,backend,shape,dtype,status,") and len(rows) == 1 + n
    assert "bench: run record written to" in out.stderr
    # a new user's trial: make bench QUICK=1 published nothing and said nothing of it
    assert (f"bench: no site published: this run's results are in {tmp_path / 'results'}/, apart from "
            "results/ (make publish builds html/ from results/)") in out.stderr


def test_only_a_full_default_run_stores_into_results():
    from fusebench.commands import bench
    assert bench.results_folder(quick=False, partial=False) == "results"
    assert bench.results_folder(quick=True, partial=False) == ".asv/quick-results"
    # A narrowed quick run must not replace a full quick run's values with n/a either.
    assert bench.results_folder(quick=True, partial=True) == ".asv/partial-quick-results"
    assert bench.results_folder(quick=False, partial=True) == ".asv/partial-results"


def test_a_reader_that_stops_early_is_not_a_regression():
    """`compare --all | head -1`: the closed pipe ends compare quietly with 141 (a tool ended by
    SIGPIPE), never 1, the status of a regression."""
    proc = subprocess.Popen([sys.executable, "-m", "fusebench", "compare", "--machine", "h200", "--base",
                             "8f1a039", "--head", "9cefc15", "--all"], cwd=PROJECT_ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert "benchmark" in proc.stdout.readline()  # ~300 KB of rows follow: more than a pipe holds
    proc.stdout.close()
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 141 and "error" not in err


def test_a_duration_is_rounded_before_it_is_split_into_minutes():
    from fusebench.cli import duration

    assert [duration(s) for s in (0.4, 45, 59.6, 125.2, 179.6, 3600)] == [
        "0 s", "45 s", "1 min 0 s", "2 min 5 s", "3 min 0 s", "60 min 0 s"]


# --- numeric options: argparse's error names the option and the valid range -------------------


def _usage_error(capsys, *argv: str) -> tuple[int, str]:
    from fusebench.commands import main

    with pytest.raises(SystemExit) as end:
        main(list(argv))
    return end.value.code, capsys.readouterr().err


def _typed_options():
    """``(argv prefix, option)`` of every option of every command with a type of its own (not a
    path or text), subcommands' too (``nsys capture``)."""
    import argparse

    from fusebench.commands import COMMANDS, parser

    def walk(ap, prefix):
        for action in ap._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield from walk(sub, [*prefix, name])
            elif action.type not in (None, str, Path) and action.option_strings and not action.choices:
                yield prefix, action.option_strings[-1]

    for command in COMMANDS:
        commands = parser(command)._subparsers._group_actions[0].choices
        yield from walk(commands[command], [command])


def test_every_numeric_option_names_its_range_not_a_python_function(capsys):
    """``bench --rounds 0`` said ``invalid rounds_arg value: '0'``: the name of a function and no
    valid range. Every typed option of every command now says what it takes, in one line, exit 2."""
    options = list(_typed_options())
    assert [" ".join([*p, o]) for p, o in options] == [  # the walk finds them all
        "bench --rounds", "ab --factor", "ab --target", "ab --min-pairs", "ab --max-pairs", "ab --time-cap",
        "ab --process-rounds", "bisect --rounds", "bisect --max-rounds", "preview --port",
        "nsys capture --calls", "nsys plan --calls", "nsys check --calls", "nsys run --calls",
        "ncu capture --calls", "ncu check --calls", "trace --calls", "profile --calls", "pitfalls --n",
        "pitfalls --launches", "pitfalls --rounds", "tune --budget"]
    pattern = re.compile(r"argument (--[a-z-]+): give a (whole )?number (>=? -?[0-9.]+|from [0-9.]+ to "
                         r"[0-9.]+), not '(abc|-99999999)'\n")
    for prefix, option in options:
        for bad in ("abc", "-99999999"):
            code, err = _usage_error(capsys, *prefix, f"{option}={bad}")
            found = pattern.fullmatch(err.partition(": error: ")[2])
            assert code == 2 and found and found.group(1) == option, (prefix, option, err)


@pytest.mark.parametrize("argv, message", [
    (["bench", "--rounds", "0"],
     "bench: error: argument --rounds: give a whole number from 1 to 100, not '0'"),
    (["bench", "--rounds=-1"],
     "bench: error: argument --rounds: give a whole number from 1 to 100, not '-1'"),
    (["bench", "--rounds", "1.5"],
     "bench: error: argument --rounds: give a whole number from 1 to 100, not '1.5'"),
    (["bench", "--rounds", "abc"],
     "bench: error: argument --rounds: give a whole number from 1 to 100, not 'abc'"),
    (["preview", "--port", "99999"],
     "preview: error: argument --port: give a whole number from 0 to 65535, not '99999'"),
    (["ab", "--min-pairs", "1"], "ab: error: argument --min-pairs: give a whole number >= 2, not '1'"),
    (["ab", "--factor", "nan"], "ab: error: argument --factor: give a number from 1 to 2, not 'nan'"),
    (["tune", "triton", "--budget", "0"], "tune: error: argument --budget: give a number > 0, not '0'"),
    (["nsys", "capture", "--op", "gelu", "--calls", "0"],
     "nsys: error: argument --calls: give a whole number >= 1, not '0'"),
])
def test_a_bad_number_is_one_line_with_the_valid_range(capsys, argv, message):
    code, err = _usage_error(capsys, *argv)
    assert code == 2 and err == message + "\n"
