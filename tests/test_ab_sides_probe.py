"""probes/ab_sides_probe.py: the per-round medians of head / base it reports, and its refusals."""

import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROBE = ROOT / "probes" / "ab_sides_probe.py"
spec = importlib.util.spec_from_file_location("ab_sides_probe", PROBE)
probe = importlib.util.module_from_spec(spec)
spec.loader.exec_module(probe)


def _round(hot, graph, dirty=()):
    return {"device_time_ms": hot, "device_time_graph_ms": graph, "contamination": list(dirty)}


def test_round_ratios_are_medians_of_clean_pairs_per_round_and_by_first_side():
    session = {"cases": [
        {"first": ["base", "head"], "base": [_round(1.0, 1.0), _round(1.0, 1.0)],
         "head": [_round(0.99, 1.0), _round(0.98, 1.0)]},
        {"first": ["head", "base"], "base": [_round(2.0, 2.0), _round(2.0, 2.0)],
         "head": [_round(1.98, 2.02), _round(1.96, 2.0, ["throttled: sw_power_cap"])]},
        {"first": ["base", "head"], "base": [_round(4.0, 4.0), None], "head": [_round(3.96, 4.0), None]},
    ]}
    lines = probe.round_ratios(session)
    assert [line.split(":")[0] for line in lines] == ["device_time_ms", "device_time_graph_ms"]
    # round 1: 0.99 for every case; round 2: only the first case is clean (0.98)
    assert lines[0].startswith("device_time_ms: r1 0.9900 (n 3) r2 0.9800 (n 1);")
    # graph: round 1 ratios 1.0, 1.01, 1.0 -> median 1.0; round 2: 1.0
    assert lines[1].startswith("device_time_graph_ms: r1 1.0000 (n 3) r2 1.0000 (n 1);")
    # base timed first: round 1 of cases 1 and 3 (0.99, 0.99); head first: case 1's round 2 (0.98)
    # and case 2's round 1 (0.99), whose median is their geometric mean
    assert lines[0].endswith(f"base first 0.9900 head first {math.sqrt(0.98 * 0.99):.4f}")


def test_stored_session_and_refusals(tmp_path):
    good = tmp_path / "ab.json"
    good.write_text(json.dumps({"cases": [{"first": ["base"], "base": [_round(1.0, 1.0)],
                                           "head": [_round(1.05, 1.0)]}]}))
    run = [sys.executable, str(PROBE)]
    p = subprocess.run([*run, "--session", str(good)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stdout.startswith("device_time_ms: r1 1.0500 (n 1); base first 1.0500")
    for argv, says in ((["--session", str(tmp_path / "none.json")], "not a readable session"),
                       (["--out", str(tmp_path / "o"), "--", "--all"], "give the A/B's arguments after --"),
                       (["--out", str(tmp_path / "o"), "--pin", "2-x", "--", "--base", "HEAD"],
                        "--pin 2-x: give node or a CPU list")):
        p = subprocess.run([*run, *argv], capture_output=True, text=True, timeout=60)
        assert p.returncode == 2 and says in p.stderr, p.stderr
        assert p.stderr.strip().count("\n") == 0 and "Traceback" not in p.stderr
    assert not (tmp_path / "o").exists()  # refused before anything was written


def test_cpu_lists_in_the_kernels_format():
    assert probe.cpu_list("0-3,8\n") == {0, 1, 2, 3, 8}
    assert probe.cpu_list("5") == {5}
    for bad in ("", "x", "1-y", "5-3"):
        with pytest.raises(ValueError):
            probe.cpu_list(bad)
