"""Every command a message suggests runs as printed (issue 29, item 4): each hint below is
provoked, the ``make`` command in it is taken from the text, and run as printed (with ``-n``, or
with ``--dry-run`` added to the command make would run, where running it would measure)."""

import os
import re
import shlex
import subprocess
import sys

import pytest

from fusebench.paths import PROJECT_ROOT

MAKE_COMMAND = re.compile(r"make [a-z-]+(?: [A-Z_]+=[^\s;`'\")]+)*")


def env(**extra) -> dict:
    out = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "MAKEFLAGS", "MAKELEVEL")}
    return {**out, **extra}


def run(args, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=600, **kw)


def fusebench(*args, extra_env=None) -> subprocess.CompletedProcess:
    return run([sys.executable, "-m", "fusebench", *args], env=env(**(extra_env or {})))


def make(command: str, *flags: str, extra_env=None) -> subprocess.CompletedProcess:
    """``command`` as printed (``make compare BASE=...``), with this interpreter as make's Python."""
    words = shlex.split(command)
    return run([words[0], *flags, "--no-print-directory", *words[1:], f"SYSTEM_PYTHON={sys.executable}",
                f"PYTHON={sys.executable}"], env=env(**(extra_env or {})))


def suggested(text: str) -> list[str]:
    found = [c.rstrip(",.") for c in MAKE_COMMAND.findall(text)]
    assert found, f"no make command in: {text}"
    return found


def dry_run_of(command: str, extra_env=None) -> subprocess.CompletedProcess:
    """What ``make bench ...`` would run here (``make -n bench-local``), with ``--dry-run``."""
    printed = make(command.replace("make bench", "make bench-local", 1), "-n", extra_env=extra_env)
    assert printed.returncode == 0, printed.stderr
    line = printed.stdout.strip().splitlines()[-1]
    return run([*shlex.split(line), "--dry-run"], env=env(**(extra_env or {})))


@pytest.mark.slow
def test_the_triton_interpreter_way_out_runs():
    """TRITON_INTERPRET=1 make bench QUICK=1 OP=gelu suggested BACKENDS=...,quack, refused."""
    out = fusebench("bench", "--quick", "--ops", "gelu", "--dry-run", extra_env={"TRITON_INTERPRET": "1"})
    assert out.returncode == 2
    backends = re.search(r"\(BACKENDS=([a-z,]+)\)", out.stderr).group(1)
    assert backends == "eager,torch,compile,cuda"
    done = dry_run_of(f"make bench QUICK=1 OP=gelu BACKENDS={backends}", extra_env={"TRITON_INTERPRET": "1"})
    assert done.returncode == 0, done.stderr
    assert "bench: dry run: nothing measured, nothing stored" in done.stderr


# HEAD: the commit that stores results is never the one measured, so HEAD has none stored
@pytest.mark.slow
@pytest.mark.parametrize("given", [[], ["BASE=HEAD", "MACHINE=h200"]])
def test_the_compare_hint_runs(given):
    """make compare without BASE suggested BASE=HEAD~1, which has no results on a fresh clone."""
    out = make(" ".join(["make compare", *given]))
    assert out.returncode == 2
    command = [c for c in suggested(out.stderr) if c.startswith("make compare ")][-1]
    assert re.fullmatch(r"make compare MACHINE=\S+ BASE=[0-9a-f]{8} HEAD=[0-9a-f]{8}", command), command
    done = make(command)
    # a verdict (ok, FAIL or inconclusive: exit 1 or 2, which make reports as its own 2), never a usage error
    machine = re.search(r"MACHINE=(\S+)", command).group(1)  # h200 or h100-80gb-hbm3: both committed
    verdict = rf"^compare: {re.escape(machine)} [0-9a-f]{{8}} -> [0-9a-f]{{8}} .* -> (ok|FAIL|inconclusive)$"
    assert re.search(verdict, done.stderr, re.M), done.stderr
    assert "error:" not in done.stderr and "Traceback" not in done.stderr


@pytest.mark.slow
def test_the_missing_dependency_hint_runs():
    block = ("import sys; sys.modules['torch'] = None; import runpy; "
             "runpy.run_module('fusebench', run_name='__main__')")
    out = run([sys.executable, "-c", block, "list"])
    assert out.returncode == 2
    assert suggested(out.stderr) == ["make venv"]
    assert make("make venv", "-n").returncode == 0


@pytest.mark.slow
def test_the_trace_hint_names_the_op_and_runs():
    out = fusebench("nsys", "check", "--op=softmax", "--nsys", "/nonexistent/nsys")
    assert out.returncode == 1
    assert suggested(out.stderr) == ["make trace OP=softmax"]
    assert make("make trace OP=softmax", "-n").returncode == 0


@pytest.mark.slow
def test_the_reference_install_hint_runs():
    from fusebench.kernels.reference_libs import INSTALL

    assert suggested(INSTALL) == ["make venv REFERENCE=1"]
    assert make("make venv REFERENCE=1", "-n").returncode == 0


@pytest.mark.slow
def test_list_and_bench_count_the_same_cases():
    """Issue 29: make list said 168 cases, make bench 288 (80 timed)."""
    listed = fusebench("list", "--quick")
    assert listed.returncode == 0, listed.stderr
    count = next(line for line in listed.stderr.splitlines()
                 if " case(s) of the " in line).removeprefix("list: ")
    bench = fusebench("bench", "--quick", "--dry-run")
    assert bench.returncode == 0, bench.stderr
    assert f"bench: {count}" in bench.stderr.splitlines()
    counted = re.match(r"(\d+) case\(s\) of the \S+ grid: (\d+) to build and time", count)
    total, timed = map(int, counted.groups())
    rows = listed.stdout.strip().splitlines()[1:]
    assert timed == sum("skipped:" not in r for r in rows) and total >= len(rows)
    if total > len(rows):  # the rest are an op's missing backends, counted and said, not listed
        assert listed.stderr.splitlines()[-1] == (f"list: {len(rows)} listed above (not the "
                                                  f"{total - len(rows)} of an op without such a backend)")
