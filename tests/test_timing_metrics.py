import time

import pytest
import torch

from fusebench.measure import metrics, timing


def test_timing_summary_is_median_and_iqr():
    t = timing.Timing.from_samples([1.0, 2.0, 3.0, 4.0, 100.0], "host")
    assert t.median_ms == 3.0
    assert t.iqr_ms == pytest.approx(2.0)  # inclusive quartiles: 2.0 and 4.0
    assert t.repeats == 5
    assert t.noise == pytest.approx(2.0 / 3.0)


def test_timing_needs_samples():
    with pytest.raises(ValueError):
        timing.Timing.from_samples([], "host")


@pytest.mark.parametrize("estimate, expected", [(1.0, timing.MIN_REPEATS), (1e-9, timing.MAX_REPEATS),
                                                (0.001, 100), (0.0, timing.MAX_REPEATS)])
def test_repeats_fill_the_budget_within_bounds(estimate, expected):
    assert timing.repeats_for(estimate, budget_s=0.1) == expected


@pytest.mark.parametrize("estimate, lo, hi, expected", [(1.0, 3, 20, 3), (1e-9, 5, 50, 50), (0.01, 3, 20, 10),
                                                        (0.0, 5, 50, 50)])
def test_repeats_take_other_bounds(estimate, lo, hi, expected):
    assert timing.repeats_for(estimate, 0.1, lo, hi) == expected


def _sleeper(seconds: float, calls: list):
    """A CPU callable that takes at least ``seconds`` and counts its calls in ``calls``."""
    def fn():
        calls.append(1)
        time.sleep(seconds)
    return fn


@pytest.mark.parametrize("clock", timing.CLOCKS)
def test_measure_warms_up_then_times_the_budgeted_repeats_on_the_host_clock(clock):
    calls: list = []
    # 2 ms a call and 20 ms of budget: at most 10 repeats, at least the lower bound 3.
    t = timing.measure(_sleeper(0.002, calls), torch.device("cpu"), 0.02, clock=clock,
                       warm_up_calls=2, bounds=(3, 50))
    assert t.clock == "host" and 3 <= t.repeats <= 10
    assert len(calls) == 2 + 1 + t.repeats  # warm-up, the estimate, the timed repeats
    assert t.median_ms >= 2.0


def test_measure_keeps_the_lower_bound_when_one_call_exceeds_the_budget():
    calls: list = []
    t = timing.measure(_sleeper(0.005, calls), torch.device("cpu"), 0.001, bounds=(4, 50))
    assert t.repeats == 4 and len(calls) == 3 + 1 + 4  # three warm-up calls by default
    assert timing.planned_repeats(_sleeper(0.005, calls), torch.device("cpu"), 0.001) == timing.MIN_REPEATS


def test_measure_refuses_an_unknown_clock():
    with pytest.raises(ValueError, match="clock must be one of hot, wall, got 'cold'"):
        timing.measure(lambda: None, torch.device("cpu"), clock="cold")


@pytest.mark.gpu
def test_measure_hot_on_a_gpu_is_device_time():
    torch.cuda._sleep(1000)
    dev = torch.device("cuda")
    t = timing.measure(lambda: torch.cuda._sleep(1_000_000), dev, 0.05)
    wall = timing.measure(lambda: torch.cuda._sleep(1_000_000), dev, 0.05, clock="wall")
    ref = timing.device_time(lambda: torch.cuda._sleep(1_000_000), 10)
    assert (t.clock, wall.clock) == ("cuda-events", "wall")
    assert 0.9 < t.median_ms / ref.median_ms < 1.1 and wall.median_ms >= 0.9 * t.median_ms


def test_bandwidth_arithmetic():
    # 2 GB in 1 ms is 2000 GB/s (1 GB = 1e9 bytes)
    assert metrics.effective_bandwidth_gbps(2_000_000_000, 1.0) == pytest.approx(2000.0)
    assert metrics.pct_of_ceiling(4000.0, 4250.0) == pytest.approx(94.1176, rel=1e-4)
    assert metrics.effective_bandwidth_gbps(1, 0.0) != metrics.effective_bandwidth_gbps(1, 0.0)  # NaN


def test_wall_time_on_cpu_uses_the_host_clock():
    calls = []
    t = timing.wall_time(lambda: calls.append(1), 7, torch.device("cpu"))
    assert (t.clock, t.repeats, len(calls)) == ("host", 7, 7)
    assert t.median_ms >= 0


def test_copy_ceiling_on_cpu_is_positive_and_counts_both_ways():
    c = metrics.measure_copy_ceiling(torch.device("cpu"), nbytes=1 << 22)
    assert c.nbytes == 1 << 22
    assert c.gbps == pytest.approx(2 * c.nbytes / (c.timing.median_ms * 1e-3) / 1e9)


@pytest.mark.gpu
def test_device_time_of_a_sleep_kernel_matches_its_length():
    # torch.cuda._sleep spins for a number of cycles: the events must see it, the host must not.
    torch.cuda._sleep(1000)
    short = timing.device_time(lambda: torch.cuda._sleep(1_000_000), 10)
    longer = timing.device_time(lambda: torch.cuda._sleep(4_000_000), 10)
    assert short.clock == "cuda-events"
    assert 3.0 < longer.median_ms / short.median_ms < 5.0


def test_device_time_refuses_batches_in_cold_mode():
    with pytest.raises(ValueError, match="calls must be 1 in cold mode"):
        timing.device_time(lambda: None, 10, flush=torch.empty(1), calls=4)
    with pytest.raises(ValueError):
        timing.device_time(lambda: None, 10, calls=0)


@pytest.mark.gpu
def test_a_batch_of_calls_is_divided_by_its_length():
    # A long kernel has no fixed cost to speak of: one per repeat or four, the same per call.
    torch.cuda._sleep(1000)
    one = timing.device_time(lambda: torch.cuda._sleep(1_000_000), 10)
    four = timing.device_time(lambda: torch.cuda._sleep(1_000_000), 10, calls=4)
    assert 0.9 < four.median_ms / one.median_ms < 1.1


@pytest.mark.gpu
def test_hot_batches_spread_the_event_pairs_fixed_cost():
    x = torch.ones(1024, device="cuda")
    fn = lambda: x.add_(1)  # noqa: E731
    calls = timing.hot_calls(fn)
    # A few µs per call: a batch of many calls (HOT_MAX_CALLS unless the GPU is busy: the estimate
    # it is sized from is itself a short timing, which once came out above 3.1 µs on the H200).
    assert 1 < calls <= timing.HOT_MAX_CALLS
    per_call = timing.device_time(fn, 50).median_ms
    batched = timing.device_time(fn, 50, calls=calls).median_ms
    assert batched < per_call


@pytest.mark.gpu
def test_copy_ceiling_on_gpu_is_plausible():
    c = metrics.measure_copy_ceiling(torch.device("cuda"))
    assert 100 < c.gbps < 20_000


@pytest.mark.gpu
def test_device_time_excludes_host_launch_overhead():
    # A tiny kernel launched by a slow host (1 ms of Python per call): the blocking kernel keeps
    # the GPU queued, so device time is the kernel's microseconds, not the host's millisecond.
    import time as _time

    x = torch.ones(1024, device="cuda")

    def slow_host_tiny_kernel():
        _time.sleep(0.001)
        return x.add_(0)

    t = timing.device_time(slow_host_tiny_kernel, 20)
    assert t.median_ms < 0.1


def test_graph_calls_fill_the_batch_within_bounds():
    assert timing.graph_calls(0.001) == 200  # 0.2 ms of 1 us calls
    assert timing.graph_calls(0.0001) == timing.GRAPH_CALLS[1]
    assert timing.graph_calls(5.0) == timing.GRAPH_CALLS[0]


@pytest.mark.gpu
def test_graph_device_time_of_a_sleep_kernel_matches_its_length():
    """A graph of calls of a 100 us spin: the graph figure is the spin (no host in between)."""
    cycles = int(100e-6 * torch.cuda.clock_rate() * 1e6) if hasattr(torch.cuda, "clock_rate") else 200_000
    t = timing.graph_device_time(lambda: torch.cuda._sleep(cycles), 20, 8)
    assert t.clock == "cuda-graph" and t.repeats == 20
    assert 0.02 < t.median_ms < 0.5 and t.noise < 0.05


@pytest.mark.gpu
def test_graph_removes_the_launch_gaps_of_many_small_kernels():
    """Eight tiny kernels per call: the stream's hot figure waits for the host between them, the
    graph's does not."""
    x = torch.randn(1024, device="cuda")

    def eight():
        y = x
        for _ in range(8):
            y = y * 1.0001
        return y

    hot = timing.hot_device_time(eight, 200)
    graph = timing.graph_device_time(eight, 50, 64)
    assert graph.median_ms < hot.median_ms
    assert graph.median_ms < 8 * 0.004  # under 4 us per kernel once the host is out of the way


@pytest.mark.gpu
def test_a_call_that_cannot_be_captured_says_why():
    x = torch.randn(1024, device="cuda")
    with pytest.raises(timing.CaptureError) as err:
        timing.graph_device_time(lambda: (x * 2).sum().item(), 5, 2)  # .item() synchronizes
    assert str(err.value)
    assert float((x * 2).sum()) == pytest.approx(float(x.sum()) * 2, rel=1e-4)  # CUDA still usable


def test_the_blocking_kernel_covers_the_hosts_deficit_only():
    # Host-bound repeats (20 us of host, 2 us of GPU): the kernel holds the group's deficit.
    assert timing.block_ms(100, 0.020, 0.002) == pytest.approx(100 * 0.018 + timing.BLOCK_LEAD_MS)
    # Unknown GPU time: the whole host time, as for a repeat that takes the GPU no time.
    assert timing.block_ms(100, 0.020) == pytest.approx(2.0 + timing.BLOCK_LEAD_MS)
    # A flush of 70 us per repeat outlasts 30 us of host: the GPU cannot catch up; only the lead.
    assert timing.block_ms(500, 0.030, 0.070) == timing.BLOCK_LEAD_MS


def test_the_blocking_kernels_clock_is_never_below_the_default():
    class Props:
        clock_rate = 1_980_000  # kHz, an H200

    class Fast:
        clock_rate = 2_520_000

    real = torch.cuda.get_device_properties
    try:
        torch.cuda.get_device_properties = lambda _=None: Props()
        assert timing.block_clock_ghz(0) == timing.BLOCK_CLOCK_GHZ
        torch.cuda.get_device_properties = lambda _=None: Fast()
        assert timing.block_clock_ghz(0) == pytest.approx(2.52)
    finally:
        torch.cuda.get_device_properties = real


@pytest.mark.gpu
def test_a_repeat_longer_on_the_gpu_than_on_the_host_needs_no_long_block():
    # 1 ms of spin per repeat, a few us of host: with gpu_ms the kernel is only the lead, and the
    # samples are the spin's, as with the whole host time blocked.
    cycles = int(1e-3 * timing.block_clock_ghz() * 1e9)
    fn = lambda: torch.cuda._sleep(cycles)  # noqa: E731
    led = timing.device_time(fn, 20, gpu_ms=0.9).median_ms
    blocked = timing.device_time(fn, 20).median_ms
    assert 0.9 < led < 1.2 and led == pytest.approx(blocked, rel=0.02)


def test_host_estimate_is_tight_for_one_launch_and_generous_for_several(monkeypatch):
    launches_ms = [1.0, 2.0, 3.0, 4.0, 10.0]  # five launches, one slow (a host hiccup)
    monkeypatch.setattr(timing, "enqueue_ms", lambda fn, calls, pick: pick(launches_ms[:calls]))
    assert timing.host_ms_per_call(lambda: None, 1) == 1.25 * 3.0
    assert timing.host_ms_per_call(lambda: None, 9) == 2.0 * 10.0
    assert timing.host_ms_per_call(lambda: None, None) == 2.0 * 10.0
