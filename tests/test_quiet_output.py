"""A failure is the project's one line: no Kineto ``USDT:`` lines from the profiler, no second
``make[1]: *** ... Error`` line from a recursive make (issue 13, item 8)."""

import os
import subprocess
import sys

import pytest

from fusebench.paths import PROJECT_ROOT

#: each test runs the profiler or make in a fresh process: seconds each (make test-slow)
pytestmark = pytest.mark.slow

PROFILE = """
import torch
from fusebench.lecture.torch_profile import profile_callable
x = torch.ones(64)
profile_callable(lambda: x + 1, torch.device("cpu"), calls=2)
profile_callable(lambda: x * 2, torch.device("cpu"), calls=2)
print("ok")
"""


def _profile(**env):
    env = {**{k: v for k, v in os.environ.items() if k != "KINETO_LOG_LEVEL"}, **env}
    return subprocess.run([sys.executable, "-c", PROFILE], cwd=PROJECT_ROOT, capture_output=True, text=True,
                          env=env, timeout=300)


def test_the_profiler_prints_no_usdt_lines():
    out = _profile()
    assert out.stdout.strip() == "ok" and "USDT" not in out.stderr, out.stderr


def test_a_kineto_log_level_the_user_set_is_kept():
    assert "USDT:" in _profile(KINETO_LOG_LEVEL="5").stderr


def test_a_failing_make_bench_is_one_line_and_one_line_of_make():
    # run as a top-level make (the suite itself may run under make: make[1])
    top = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
    out = subprocess.run(["make", "bench", "OP=nope", "DOCKER=/nonexistent/docker",
                          f"SYSTEM_PYTHON={sys.executable}", "DEPS="],
                         cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300, env=top)
    assert out.returncode == 2
    err = out.stderr.strip().splitlines()
    assert err[0].startswith("bench: docker not found")
    assert err[1].startswith("bench: error: unknown op 'nope'")
    assert len(err) == 3 and err[2].startswith("make: *** ") and "make[1]" not in out.stderr, err
