"""scripts/calibration.py: the leave-one-pair-out check of the history rule, as docs/gate.md runs it."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "scripts/calibration.py", *args], cwd=ROOT, text=True,
                          capture_output=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))


@pytest.mark.parametrize("machine", ["nope", "../records", "h200/.."])
def test_unknown_machine_is_one_line_and_exit_1(machine):
    p = run(machine)
    assert p.returncode == 1
    assert p.stdout == ""
    assert p.stderr.strip().count("\n") == 0 and "Traceback" not in p.stderr
    assert p.stderr.startswith("calibration: no records of machine")


@pytest.mark.slow
def test_committed_records_give_one_line_per_gated_metric():
    p = run("h200")
    assert p.returncode == 0, p.stderr
    pairs = int(re.match(r"h200: (\d+) A/A pairs with samples", p.stdout).group(1))
    assert pairs >= 2
    for field in ("device_time_ms", "device_time_cold_ms", "device_time_graph_ms"):
        m = re.search(rf"^  {field}: (\d+) samples, (\d+) beyond their limit, ([\d.]+) %", p.stdout, re.M)
        assert m, p.stdout
        samples, beyond, share = int(m.group(1)), int(m.group(2)), float(m.group(3))
        assert samples > 0 and 0 <= beyond <= samples and 0 <= share <= 100
