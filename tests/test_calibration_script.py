"""scripts/calibration.py: the leave-one-pair-out check of the history rule, as docs/gate.md runs it."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "calibration.py"), *args], cwd=cwd,
                          text=True, capture_output=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))


def one_line_exit_1(p: subprocess.CompletedProcess, start: str) -> None:
    assert p.returncode == 1
    assert p.stdout == ""
    assert p.stderr.strip().count("\n") == 0 and "Traceback" not in p.stderr
    assert p.stderr.startswith(start), p.stderr


@pytest.mark.parametrize("machine", ["nope", "../records", "h200/.."])
def test_unknown_machine_is_one_line_and_exit_1(machine):
    one_line_exit_1(run(machine), "calibration: no records of machine")


@pytest.mark.parametrize("args", [("h200", "extra"), ("--help",), ("-x",)])
def test_other_arguments_print_the_usage_and_exit_1(args):
    one_line_exit_1(run(*args), "usage: PYTHONPATH=. python scripts/calibration.py")


def test_records_with_no_pair_are_one_line_and_exit_1(tmp_path):
    """A folder outside the checkout: the records' commits cannot be compared, so no pair."""
    (tmp_path / "records" / "h200").mkdir(parents=True)
    shutil.copy(ROOT / "records" / "h200" / "616a8e55.json.xz", tmp_path / "records" / "h200")
    one_line_exit_1(run("h200", cwd=tmp_path), "calibration: no A/A pair in records/h200")


@pytest.mark.slow
def test_committed_records_print_what_noise_calibration_computes():
    from fusebench.gate import noise

    p = run("h200")
    assert p.returncode == 0, p.stderr
    history = noise.from_records(ROOT / "records" / "h200", ROOT)
    pairs = {tuple(sorted(s.pair)) for ss in history.samples.values() for s in ss}
    assert p.stdout.splitlines()[0] == f"h200: {len(pairs)} pairs of records give A/A samples"
    for field, c in noise.calibration(history).items():
        m = re.search(rf"^  {field}: (\d+) samples, (\d+) beyond their limit, ([\d.]+) %", p.stdout, re.M)
        assert m is not None, p.stdout
        assert (int(m.group(1)), int(m.group(2))) == (c["samples"], c["beyond"])
        assert float(m.group(3)) == pytest.approx(100 * c["at_5"], abs=0.05)
