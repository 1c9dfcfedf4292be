"""Energy per call (issue 29, item 12), built and tested on the CPU with a fake NVML: the counter
reader, the window, the record's fields, the sweep, the run's tables. Not run on a GPU here."""

import io
import sys
import types

import pytest
import torch

from fusebench.measure import energy, environment, sweep
from fusebench.record import Record, Sweep
from fusebench.report import summary

CPU = torch.device("cpu")


class FakeCounter:
    """A total-energy counter that rises by ``mj_per_call`` at each call of the case."""

    def __init__(self, mj_per_call: float, start: float = 1e6):
        self.total, self.mj_per_call, self.reads = start, mj_per_call, 0

    def call(self):
        self.total += self.mj_per_call

    def read(self) -> float:
        self.reads += 1
        return self.total


def test_energy_per_call_is_the_counters_rise_over_the_calls():
    c = FakeCounter(205.0)
    reading = energy.per_call(c.call, CPU, c.read, call_ms=2.0, window_s=0.3)
    assert reading.calls == 150 and reading.mj_per_call == pytest.approx(205.0) and c.reads == 2
    # GELU on 2^28 float32 moves 2 x 2^28 x 4 bytes: 205 mJ is about 95 pJ per byte
    assert reading.pj_per_byte(2 * 2 ** 28 * 4) == pytest.approx(95.5, abs=0.1)


def test_a_host_bound_call_ends_the_window_on_the_host_clock():
    """A call the host takes 2 ms to issue but the GPU 1 us to run: the window closes after about
    WINDOW_S of host time, not after the 200 000 calls the GPU time alone would ask for."""
    import time

    c = FakeCounter(0.5)

    def slow_call():
        time.sleep(0.002)
        c.call()

    reading = energy.per_call(slow_call, CPU, c.read, call_ms=0.001, window_s=0.05)
    assert 5 <= reading.calls <= 26 and reading.mj_per_call == pytest.approx(0.5)
    assert reading.seconds < 0.2


def test_a_counter_that_does_not_rise_gives_no_figure():
    c = FakeCounter(0.0)
    assert energy.per_call(c.call, CPU, c.read, call_ms=1.0, window_s=0.01) is None
    rec = Record("gelu", "torch", "1024", "float32", wall_time_ms=1.0, bytes_moved=8192)
    energy.fill(rec, energy.top_up(rec, c.call, CPU, c.read))
    assert rec.energy_mj_per_call is None and rec.energy_reason == (
        "energy: the counter did not rise within the window")


def test_the_step_error_and_the_windows_a_figure_needs():
    """The counter steps every 100 ms: one window's two readings lag by up to a step each, an
    error of step / sqrt(6) rms whatever its length; k windows add k such errors."""
    assert energy.step_error(1.0, 1) == pytest.approx(0.1 / 6 ** 0.5)  # 4.1 %: "about a second"
    assert energy.step_error(0.2, 1) == pytest.approx(0.204, abs=1e-3)  # the window before: 20 %
    assert energy.step_error(0.3, 3) == pytest.approx(0.1 * 0.5 ** 0.5 / 0.3)
    assert energy.needed_s(1) == pytest.approx(0.204, abs=1e-3)  # MAX_ERROR 20 %: today's precision
    assert energy.needed_s(3) == pytest.approx(0.354, abs=1e-3)
    assert energy.step_error(0.0, 0) == float("inf")


def test_rounds_accumulate_and_a_long_enough_window_is_the_figure():
    rounds = [{"energy": {"mj": 600.0, "calls": 2000, "s": 0.3}} for _ in range(3)]
    rounds.append({"device_time_ms": 1.0})  # a round with no graph reading adds nothing
    win = energy.accumulate(rounds)
    assert (win.mj, win.calls, win.seconds, win.windows) == (1800.0, 6000, pytest.approx(0.9), 3)
    assert win.enough and energy.top_up_s(win) == (0.0, True)
    rec = Record("gelu", "torch", "16777216", "float32", device_time_ms=0.15, bytes_moved=2 * 2 ** 24 * 4)
    rec.rounds = rounds
    energy.fill(rec, win)
    assert rec.energy_mj_per_call == pytest.approx(0.3)
    assert rec.energy_pj_per_byte == pytest.approx(0.3 * 1e9 / (2 * 2 ** 24 * 4))
    assert rec.energy_w == pytest.approx(1800.0 / 0.9 / 1e3)  # 2 W: mJ over s / 1000
    assert rec.energy_reason == ""


def test_a_short_accumulated_window_is_topped_up_or_set_aside():
    # 3 rounds of 0.08 s: 0.24 s < 0.354 s; one more window to 4 windows needs 0.408 s, 0.168 s
    # more, shorter than one window alone (0.204 s): the rounds are kept
    win = energy.accumulate([{"energy": {"mj": 100.0, "calls": 10, "s": 0.08}}] * 3)
    assert not win.enough and win.error == pytest.approx(0.1 * 0.5 ** 0.5 / 0.24)
    seconds, keep = energy.top_up_s(win)
    assert keep and seconds == pytest.approx(energy.needed_s(4) - 0.24)
    assert seconds == pytest.approx(0.168, abs=1e-3)
    # 3 rounds of 0.04 s (a graph mode of today's 0.04 s cap): one window alone is shorter
    short = energy.accumulate([{"energy": {"mj": 20.0, "calls": 10, "s": 0.04}}] * 3)
    assert energy.top_up_s(short) == (pytest.approx(energy.needed_s(1)), False)
    rec = Record("gelu", "torch", "1024", "float32", device_time_ms=0.004, bytes_moved=8192)
    energy.fill(rec, short)
    assert rec.energy_mj_per_call is None
    assert rec.energy_reason == ("energy: 0.12 s over 3 window(s) is too short (the counter's steps: "
                                 "+-59 %, at most 20 % is a figure)")
    backwards = energy.Window()
    backwards.add(-5.0, 10, 1.0)
    assert energy.top_up_s(backwards) == (pytest.approx(energy.needed_s(1)), False)
    energy.fill(rec, backwards)
    assert rec.energy_reason == "energy: the counter went backwards (a driver reload?)"


def test_the_top_up_of_a_case_without_a_graph_is_a_window_of_calls(monkeypatch):
    """On the CPU (no graph): the window the rounds lack, of back-to-back calls, read as one."""
    monkeypatch.setattr(energy, "COUNTER_STEP_S", 0.001)  # a counter of 1 ms steps: 2 ms suffice
    import time

    c = FakeCounter(3.0)

    def call():  # a call of 0.5 ms or more: at most 6 calls, the window closing after 2.6 ms
        time.sleep(0.0005)
        c.call()

    rec = Record("gelu", "torch", "1024", "float32", wall_time_ms=0.5, bytes_moved=8192)
    win = energy.top_up(rec, call, CPU, c.read)
    assert win.windows == 1 and 1 <= win.calls <= 6 and win.seconds >= 0.002 and win.enough
    energy.fill(rec, win)
    assert rec.energy_mj_per_call == pytest.approx(3.0)


def test_the_counter_comes_from_nvml_on_a_gpu_only(monkeypatch):
    assert energy.counter(CPU) is None
    fake = types.SimpleNamespace(nvmlDeviceGetTotalEnergyConsumption=lambda h: 123456)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.setattr(environment, "_nvml_handle", lambda index: "handle")
    read = energy.counter(torch.device("cuda", 0))
    assert read() == 123456.0

    def unsupported(h):
        raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")

    fake.nvmlDeviceGetTotalEnergyConsumption = unsupported
    assert energy.counter(torch.device("cuda", 0)) is None
    monkeypatch.setattr(environment, "_nvml_handle", lambda index: None)
    assert energy.counter(torch.device("cuda", 0)) is None


@pytest.fixture
def counted(monkeypatch):
    """The fake counter standing in for NVML's, 2 mJ a call in a window of calls (and 1 us steps, so
    that the top-up window a CPU case gets, having no graph replays, needs microseconds: a loaded
    host cannot cut it short of a figure)."""
    c = FakeCounter(0.0)
    monkeypatch.setattr(energy, "counter", lambda dev: c.read)
    monkeypatch.setattr(energy, "COUNTER_STEP_S", 1e-6)
    real = energy.per_call

    def per_call(fn, dev, read, call_ms, window_s=energy.WINDOW_S):
        c.mj_per_call = 2.0
        return real(lambda: (fn(), c.call()), dev, read, call_ms, window_s=window_s)

    monkeypatch.setattr(energy, "per_call", per_call)
    return c


def test_a_sweep_with_a_counter_records_energy_and_the_summary_shows_it(counted):
    """The sweep on the CPU, with the fake counter standing in for NVML's."""
    from fusebench.ops import OPS

    todo = [(OPS["gelu"], b, (4096,), "float32") for b in ("eager", "torch")]
    result = sweep.measure(enumerate(todo), 2, "cpu", CPU, rounds=1, peak=False, out=io.StringIO(),
                           energy_scope="all")
    assert result.energy_scope == "all"
    for rec in result.records:
        assert rec.energy_mj_per_call == pytest.approx(2.0)
        assert rec.energy_pj_per_byte == pytest.approx(2.0 * 1e9 / (2 * 4096 * 4))
    assert "energy top-up" in result.phases and "energy" not in result.phases
    text = summary.summary(result)
    assert "| 4096 | 2.00 mJ 61035 pJ/B | 2.00 mJ 61035 pJ/B |" in text
    assert "energy per call measured for 2 of 2 cases (NVML total energy; shown, never gated; every case)" \
        in "\n".join(summary.run_lines(result))
    loaded = Sweep(**{**result.__dict__})
    assert loaded.records[0].energy_mj_per_call == pytest.approx(2.0)


def test_by_default_only_each_ops_headline_and_largest_shapes_get_a_top_up_window(counted, monkeypatch):
    """Issue 55: the top-up window (80-93 s of a full default grid) goes to the headline and the
    largest shape of the grid; the other cases keep no figure and say why; the record says which."""
    from fusebench.ops import OPS

    topped = []
    real = energy.top_up
    monkeypatch.setattr(energy, "top_up", lambda rec, *a: (topped.append(rec.shape), real(rec, *a))[1])
    gelu = OPS["gelu"]
    assert max(gelu.grids["cpu"], key=lambda s: s[0]) == (1048576,)
    todo = [(gelu, "torch", shape, "float32") for shape in [(1024,), (16384,), (1048576,)]]
    result = sweep.measure(enumerate(todo), 3, "cpu", CPU, rounds=1, peak=False, out=io.StringIO())
    assert result.energy_scope == "headline"
    assert topped == ["1048576"]
    by_shape = {r.shape: r for r in result.records}
    assert by_shape["1048576"].energy_mj_per_call == pytest.approx(2.0)
    for shape in ("1024", "16384"):
        assert by_shape[shape].energy_mj_per_call is None
        assert "headline and largest shapes only" in by_shape[shape].energy_reason
        assert "ENERGY=all" in by_shape[shape].energy_reason
    assert "a top-up window at each op's headline and largest shapes" in "\n".join(summary.run_lines(result))


def test_the_headline_shape_is_selected_beside_the_largest():
    from fusebench.ops import OPS

    softmax = OPS["softmax"]
    grid = softmax.grids["default"]
    chosen = [s for s in grid if energy.selected(softmax, s, "default", "headline")]
    largest = max(grid, key=lambda s: (s[0] * s[1], s))
    assert set(chosen) == {softmax.headline, largest} and len(chosen) == 2
    assert all(energy.selected(softmax, s, "default", "all") for s in grid)


def test_a_record_without_energy_fields_still_loads(tmp_path):
    """Records stored before energy was measured (every committed one) load with None."""
    rec = Record("gelu", "torch", "1024", "float32")
    fields = {k: v for k, v in rec.__dict__.items() if not k.startswith("energy")}
    assert Record(**fields).energy_mj_per_call is None
    assert summary.energy_lines(Sweep({}, 1.0, "cpu", [Record(**fields)])) == []


def test_the_asv_suite_reports_energy_per_call_and_never_gates_it():
    """Issue 29 item 12: ``suite.<Op>.track_energy`` is the record's mJ per call; a case without a
    reading (the CPU) is skipped for that metric alone; the gate and asv's Regressions tab leave it out."""
    import re

    from fusebench import metrictable
    from fusebench.asv import asvsuite
    from fusebench.ops import OPS

    m = metrictable.BY_NAME["track_energy"]
    assert (m.field, m.unit, m.scale, m.better, m.gates) == ("energy_mj_per_call", "mJ", 1.0, "lower", False)
    assert m not in metrictable.GATED and "energy_mj_per_call" in asvsuite.CACHED_FIELDS
    gelu = asvsuite.suite_class(OPS["gelu"])()
    key = ("gelu", "torch", "16384", "float32")
    gelu.setup({"records": {key: {"status": "ok", "energy_mj_per_call": 1.16}}}, *key[1:])
    assert gelu.track_energy(None, *key[1:]) == 1.16 and gelu.track_energy.unit == "mJ"
    gelu.setup({"records": {key: {"status": "ok", "energy_mj_per_call": None}}}, *key[1:])
    with pytest.raises(asvsuite.SkipNotImplemented):
        gelu.track_energy(None, *key[1:])
    (off,), (on,) = (list(d) for d in metrictable.asv_regression_settings().values())
    assert re.match(off, "suite.Gelu.track_energy('torch', '16384', 'float32')")
    assert not re.match(on, "suite.Gelu.track_energy('torch', '16384', 'float32')")


def test_a_top_up_that_ends_short_gets_the_one_more_window_it_needs(monkeypatch):
    """A top-up is sized 1.05x what it needs from the case's figure; where the calls ran faster
    than that figure and the window ended short, one more window makes up the difference (the
    reading keeps both windows), and no case gets more than TOP_UP_WINDOWS."""
    asked, lengths = [], iter([0.15, 0.2, 0.2])

    def per_call(fn, dev, read, call_ms, window_s):
        asked.append(window_s)
        seconds = next(lengths)
        return energy.Energy(mj_per_call=2.0, calls=100, seconds=seconds)

    monkeypatch.setattr(energy, "per_call", per_call)
    rec = Record("gelu", "torch", "1024", "float32", wall_time_ms=0.5, bytes_moved=8192)
    win = energy.top_up(rec, lambda: None, CPU, lambda: 0.0)
    # first: one window alone, 0.204 s x 1.05; it lasted 0.15 s (error 27 %), so the second tops
    # the two windows up to what two need (0.289 s), again x 1.05
    assert asked == [pytest.approx(energy.needed_s(1) * 1.05),
                     pytest.approx((energy.needed_s(2) - 0.15) * 1.05)]
    assert (win.windows, win.calls, win.seconds) == (2, 200, pytest.approx(0.35)) and win.enough
    energy.fill(rec, win)
    assert rec.energy_mj_per_call == pytest.approx(2.0) and rec.energy_reason == ""

    asked.clear()
    lengths = iter([0.05, 0.05, 0.05])  # a figure that overstates the call: both windows short
    rec = Record("gelu", "torch", "1024", "float32", wall_time_ms=0.5, bytes_moved=8192)
    win = energy.top_up(rec, lambda: None, CPU, lambda: 0.0)
    assert len(asked) == energy.TOP_UP_WINDOWS == 2 and not win.enough
    energy.fill(rec, win)
    assert rec.energy_mj_per_call is None and "too short" in rec.energy_reason
