"""Energy per call (issue 29, item 12; the window between two steps of the counter, issue 26), built
and tested on the CPU with a fake NVML: the counter reader, the window, the record's fields, the
sweep, the run's tables. Not run on a GPU here."""

import io
import sys
import time
import types

import pytest
import torch

from fusebench.history import runrecord, summary
from fusebench.measure import energy, environment, sweep
from fusebench.record import Record, Sweep

CPU = torch.device("cpu")


class FakeCounter:
    """A total-energy counter that rises by ``mj_per_call`` at each call of the case."""

    def __init__(self, mj_per_call: float, start: float = 1e6):
        self.total, self.mj_per_call, self.reads, self.calls = start, mj_per_call, 0, 0

    def call(self):
        self.total += self.mj_per_call
        self.calls += 1

    def read(self) -> float:
        self.reads += 1
        return self.total


class SteppingCounter(FakeCounter):
    """NVML's counter as an H200 shows it: the energy accrues at each call but the value read changes
    only at each ``period_s`` of ``clock``, to the energy accrued by then.

    ``clock`` is the real host clock, or with ``call_s`` a virtual one that each call advances by
    ``call_s`` (a GPU running the op back to back), which makes where the steps fall exact."""

    def __init__(self, mj_per_call: float, period_s: float, call_s: float = 0.0, real: bool = True):
        super().__init__(mj_per_call)
        self.period_s, self.call_s, self.real = period_s, call_s, real
        self.now, self.origin = 0.0, time.perf_counter()
        self.shown, self.period = self.total, self._period()

    def _period(self) -> int:
        return int((time.perf_counter() - self.origin if self.real else self.now) // self.period_s)

    def _step(self):
        if (k := self._period()) > self.period:
            self.period, self.shown = k, self.total

    def call(self):
        if self.real:
            end = time.perf_counter() + self.call_s
            while time.perf_counter() < end:  # the call's GPU time, spent
                pass
        else:
            self.now += self.call_s
        self._step()
        super().call()

    def read(self) -> float:
        self._step()
        self.reads += 1
        return self.shown


def one_window(c: FakeCounter, calls: int) -> float:
    """The rule this replaced: the counter read before and after a fixed window of calls."""
    before = c.read()
    for _ in range(calls):
        c.call()
    return (c.read() - before) / calls


def test_energy_per_call_is_the_rise_between_two_steps_over_the_calls_between():
    """A counter that moves at every call steps after the first chunk, and the window ends at the
    first step after MIN_CHUNKS chunks: one call per chunk for a 2 ms call."""
    c = FakeCounter(205.0)
    reading = energy.per_call(c.call, CPU, c.read, call_ms=2.0)
    assert reading.calls == energy.MIN_CHUNKS == 20 and reading.mj_per_call == pytest.approx(205.0)
    assert c.calls == 21 and c.reads == 22
    # GELU on 2^28 float32 moves 2 x 2^28 x 4 bytes: 205 mJ is about 95 pJ per byte
    assert reading.pj_per_byte(2 * 2 ** 28 * 4) == pytest.approx(95.5, abs=0.1)


@pytest.mark.parametrize("phase", [0.0, 0.013, 0.031, 0.052, 0.07, 0.091])
def test_a_counter_that_steps_every_100_ms_is_read_between_two_steps(phase):
    """The H200's counter (a step every 100 ms) under a GPU running a 37 us call back to back: the
    figure is the energy per call to within one chunk (2 ms of 100: 2 %), wherever the steps fall,
    where one window of 0.25 s read at arbitrary times holds 2 or 3 steps for 2.5 periods of calls
    (20 % off either way)."""
    def counter() -> SteppingCounter:
        c = SteppingCounter(0.9, period_s=0.1, call_s=37e-6, real=False)
        for _ in range(round(phase / 37e-6)):  # the rounds before: the steps fall anywhere
            c.call()
        return c

    reading = energy.per_call((c := counter()).call, CPU, c.read, call_ms=0.037)
    assert reading.mj_per_call == pytest.approx(0.9, rel=0.02)
    assert reading.calls == pytest.approx(0.1 / 37e-6, rel=0.03)  # one period's calls
    ratio = one_window(counter(), round(0.25 / 37e-6)) / 0.9
    assert ratio == pytest.approx(0.8, abs=0.01) or ratio == pytest.approx(1.2, abs=0.01)


def test_a_counter_stepping_on_the_real_clock_gives_the_energy_per_call():
    """The same on the host's clock: a call that spends 50 us, a step every 20 ms, chunks of 0.5 ms.
    At least MIN_CHUNKS chunks lie between the steps and the calls are counted to within one: 5 %."""
    c = SteppingCounter(3.0, period_s=0.02, call_s=50e-6)
    t = time.perf_counter()
    reading = energy.per_call(c.call, CPU, c.read, call_ms=0.05, chunk_ms=0.5, chunk_host_s=1.0)
    assert reading.mj_per_call == pytest.approx(3.0, rel=0.05)
    assert reading.calls >= energy.MIN_CHUNKS * 10 and 0.015 < reading.seconds < 0.5
    assert time.perf_counter() - t < 1.0  # at most a wait for the first step and a few periods


def test_a_host_bound_call_ends_each_chunk_on_the_host_clock():
    """A call the host takes 2 ms to issue but the GPU 1 us to run: each chunk closes after about
    CHUNK_HOST_S of host time, not after the 2000 calls the GPU time alone would ask for."""
    c = SteppingCounter(0.5, period_s=0.02)

    def slow_call():
        time.sleep(0.002)
        c.call()

    reading = energy.per_call(slow_call, CPU, c.read, call_ms=0.001)
    assert energy.MIN_CHUNKS <= reading.calls <= 4 * energy.MIN_CHUNKS * 3
    assert reading.mj_per_call == pytest.approx(0.5, rel=0.15) and reading.seconds < 0.6


def test_a_counter_that_does_not_step_gives_no_figure():
    c = FakeCounter(0.0)
    t = time.perf_counter()
    assert energy.per_call(c.call, CPU, c.read, call_ms=1.0, wait_s=0.01) is None
    assert time.perf_counter() - t < 0.1
    rec = Record("gelu", "torch", "1024", "float32", wall_time_ms=1.0, bytes_moved=8192)
    energy.fill(rec, c.call, CPU, c.read)
    assert rec.energy_mj_per_call is None and rec.energy_pj_per_byte is None and rec.energy_reason == (
        "energy: the counter did not step twice within the wait (or went backwards)")


def test_a_counter_that_steps_once_only_gives_no_figure():
    values = iter([1000.0, 1000.0, 1100.0])
    last = [0.0]

    def read():
        last[0] = next(values, last[0])
        return last[0]

    assert energy.per_call(lambda: None, CPU, read, call_ms=1.0, cap_s=0.01) is None


@pytest.mark.parametrize("values", [[1000.0, 500.0], [1000.0, 1000.0, 1100.0, 1100.0, 40.0]])
def test_a_counter_going_backwards_gives_no_figure(values):
    """A driver reload resets the counter, before the first step or between the two."""
    it = iter(values + [50.0] * 100)
    assert energy.per_call(lambda: None, CPU, lambda: next(it), call_ms=1.0) is None


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


def test_a_sweep_with_a_counter_records_energy_and_the_summary_shows_it(monkeypatch):
    """The sweep on the CPU, with the fake counter standing in for NVML's."""
    from fusebench.ops import OPS

    c = FakeCounter(0.0)
    monkeypatch.setattr(energy, "counter", lambda dev: c.read)
    real = energy.per_call

    def per_call(fn, dev, read, call_ms, **kw):
        c.mj_per_call = 2.0
        return real(lambda: (fn(), c.call()), dev, read, call_ms, **kw)

    monkeypatch.setattr(energy, "per_call", per_call)
    todo = [(OPS["gelu"], b, (4096,), "float32") for b in ("eager", "torch")]
    result = sweep.measure(enumerate(todo), 2, "cpu", CPU, rounds=1, peak=False, out=io.StringIO())
    for rec in result.records:
        assert rec.energy_mj_per_call == pytest.approx(2.0)
        assert rec.energy_pj_per_byte == pytest.approx(2.0 * 1e9 / (2 * 4096 * 4))
    assert "energy" in result.phases
    text = summary.summary(result)
    assert "| 4096 | 2.00 mJ 61035 pJ/B | 2.00 mJ 61035 pJ/B |" in text
    assert "energy per call measured for 2 of 2 cases" in "\n".join(runrecord.summary_lines(result))
    loaded = Sweep(**{**result.__dict__})
    assert loaded.records[0].energy_mj_per_call == pytest.approx(2.0)


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
    from fusebench.history import asvsuite
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
