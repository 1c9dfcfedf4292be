"""A noisy case's cause, where its rounds show it (issue 55, item 3): the round-1 state."""

from pathlib import Path

from fusebench.paths import PROJECT_ROOT
from fusebench.record import Record
from fusebench.report import summary
from fusebench.storage import runrecord


def _case(*hot_us: float) -> Record:
    rec = Record("gelu", "triton", "1048576", "float32", device_time_ms=sorted(hot_us)[1] / 1e3)
    rec.rounds = [{"device_time_ms": t / 1e3} for t in hot_us]
    return rec


def test_round_1_apart_from_rounds_that_agree_is_named():
    assert summary.noise_cause(_case(1.97, 2.44, 2.45)) == "round 1 alone"  # the H200's GELU 2^20
    assert summary.noise_cause(_case(2.45, 2.44, 1.97)) == ""  # round 3 apart: not the state
    assert summary.noise_cause(_case(1.97, 2.20, 2.45)) == ""  # rounds 2-3 do not agree
    assert summary.noise_cause(_case(2.40, 2.44, 2.45)) == ""  # round 1 within 6 %
    assert summary.noise_cause(_case(1.97, 2.44)) == ""  # two rounds say nothing


def test_a_contaminated_round_1_is_not_the_state():
    rec = _case(1.97, 2.44, 2.45, 2.44)
    rec.rounds[0]["contamination"] = ["throttled: sw_power_cap"]
    assert summary.noise_cause(rec) == ""


def test_the_h100_runs_noisy_cases_are_named_in_its_summary():
    sweep = runrecord.read(Path(PROJECT_ROOT / "records" / "h100-80gb-hbm3" / "567b5eb3.json.xz"))
    [line] = [ln for ln in summary.run_lines(sweep) if ln.startswith("cases noisier than")]
    assert line.startswith("cases noisier than 10 % between rounds: 9: ")
    assert line.count("(round 1 alone)") == 9 and "the round-1 state of a GPU (docs/gate.md)" in line
