"""An energy figure its window cannot have drawn is marked where shown: the window's average power
(the record's ``energy_w``) against the board's power limit (``clocks.power_limit_w``), on the
CPU with fake NVML and hand-made records."""

import sys
import types

import pytest
import torch

from fusebench.measure import energy, environment
from fusebench.ops import OPS
from fusebench.record import Record, Sweep
from fusebench.report import marks, plots, summary

CPU = torch.device("cpu")


def rec(shape: str, backend: str = "torch", mj: float | None = 100.0, watts=None, gpu_index=None) -> Record:
    per_byte = None if mj is None else mj * 1e9 / (int(shape) * 8)
    return Record("gelu", backend, shape, "float32", bytes_moved=int(shape) * 8, device_time_ms=0.5,
                  energy_mj_per_call=mj, energy_pj_per_byte=per_byte, energy_w=watts, gpu_index=gpu_index)


def run(records, limit=700.0, env=None) -> Sweep:
    return Sweep(env if env is not None else {"clocks": {"power_limit_w": limit}}, 4000.0, "default", records)


def test_the_reading_keeps_its_windows_average_power(monkeypatch):
    """A window of 150 calls of 205 mJ over 0.3 s drew 102.5 W on average; a case of 2 ms per
    call (the host sleeps that long) read over a top-up window (a counter of 20 ms steps: 0.1 s)."""
    import time

    monkeypatch.setattr(energy, "COUNTER_STEP_S", 0.02)

    c = types.SimpleNamespace(total=0.0)

    def call():
        time.sleep(0.002)
        c.total += 205.0

    reading = energy.Energy(205.0, 150, 0.3)
    assert reading.watts == pytest.approx(205.0 * 150 / 0.3 / 1e3)
    assert energy.Energy(1.0, 1, 0.0).watts is None
    r = Record("gelu", "torch", "1024", "float32", device_time_ms=2.0, bytes_moved=8192)
    energy.fill(r, energy.top_up(r, call, CPU, lambda: c.total))
    assert r.energy_mj_per_call == pytest.approx(205.0)
    assert 50.0 < r.energy_w < 103.0  # 205 mJ every 2 ms and a little more: just under 102.5 W


def test_the_power_limit_is_read_with_the_clocks(monkeypatch):
    fake = types.SimpleNamespace(
        NVML_CLOCK_SM=0, NVML_CLOCK_MEM=1, NVML_TEMPERATURE_GPU=0,
        nvmlDeviceGetClockInfo=lambda h, which: 1980, nvmlDeviceGetCurrentClocksEventReasons=lambda h: 4,
        nvmlDeviceGetTemperature=lambda h, which: 41, nvmlDeviceGetPowerUsage=lambda h: 84224,
        nvmlDeviceGetEnforcedPowerLimit=lambda h: 700000)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.setattr(environment, "_nvml_handle", lambda index: "handle")
    got = environment.clocks(torch.device("cuda", 0))
    assert got["power_limit_w"] == 700.0 and got["power_w"] == pytest.approx(84.224)
    assert got["clock_event_reasons"] == ["sw_power_cap"]

    def unsupported(h):
        raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")

    fake.nvmlDeviceGetEnforcedPowerLimit = unsupported
    got = environment.clocks(torch.device("cuda", 0))
    assert "power_limit_w" not in got and got["sm_clock_mhz"] == 1980


def test_a_window_above_the_limit_is_marked_and_one_below_is_not():
    assert marks.OVER_POWER == 1.10
    board = run([])  # a 700 W board
    assert marks.energy_doubts(rec("1024", watts=771.0), board) == ["over-power"]
    assert marks.energy_doubts(rec("1024", watts=769.0), board) == []
    # nothing to judge: no window power (records stored before it), no limit, no reading
    assert marks.energy_doubts(rec("1024", watts=None), board) == []
    assert marks.energy_doubts(rec("1024", watts=900.0), run([], env={})) == []
    assert marks.energy_doubts(rec("1024", mj=None, watts=900.0), board) == []
    # a record from another host may hold anything its schema lets through: never a traceback
    assert marks.energy_doubts(rec("1024", watts="900"), board) == []
    assert marks.energy_doubts(rec("1024", watts=float("inf")), board) == []
    junk_limit = run([], env={"clocks": {"power_limit_w": "x"}})
    assert marks.energy_doubts(rec("1024", watts=900.0), junk_limit) == []


def test_the_limit_is_the_gpu_that_measured_the_case():
    one = run([], env={"clocks": {"power_limit_w": 700}})
    assert marks.power_limit_w(one, rec("1024")) == 700.0
    several = run([], env={"gpus": [{"gpu_index": 0, "clocks": {"power_limit_w": 700.0}},
                                    {"gpu_index": 1, "clocks": {"power_limit_w": 500.0}}]})
    assert marks.power_limit_w(several, rec("1024", gpu_index=1)) == 500.0
    assert marks.power_limit_w(several, rec("1024", gpu_index=0)) == 700.0
    assert marks.power_limit_w(run([], env={"clocks": {"sm_clock_mhz": 1980}}), rec("1024")) is None
    assert marks.power_limit_w(run([], env={"clocks": "700"}), rec("1024")) is None
    assert marks.power_limit_w(run([], env={}), rec("1024")) is None


def test_the_energy_table_marks_the_figure_and_explains_the_mark():
    result = run([rec("1024", watts=120.0), rec("4096", watts=1050.0)])
    (table,) = summary.energy_tables(result)
    assert table.rows == [["1024", "100 mJ 12207031 pJ/B"], ["4096", "100 mJ 3051758 pJ/B #"]]
    assert table.legend.startswith("Marks: # energy read above the board's power limit")
    assert "speedup" not in table.legend
    lines = summary.energy_lines(result)
    assert lines[-1] == table.legend and lines[-3].endswith("pJ/B # |")
    # the same run without the limit (stored before it was read): nothing marked, no legend
    (plain,) = summary.energy_tables(run(result.records, env={}))
    assert plain.legend == "" and not any("#" in c for row in plain.rows for c in row)


def test_the_energy_plot_leaves_a_marked_reading_out_and_says_so():
    result = run([rec("1024", watts=120.0), rec("4096", watts=1050.0),
                  rec("8192", backend="eager", watts=90.0)])
    series = plots.energy_series(result, OPS["gelu"], "float32")
    assert {b: [p[2] for p in pts] for b, pts in series.items()} == {"eager": ["8192"], "torch": ["1024"]}
    assert plots.over_power(result, OPS["gelu"]) == 1
    fig = plots.energy_figure(result, OPS["gelu"], "h200")
    assert "1 reading(s) above the board's power limit left out" in fig._suptitle.get_text()
