"""The stopping rule of each mode in each round (issue 44, item 3), on synthetic sample streams, and
its keys in the case file. CPU only."""

import random
import textwrap

import pytest

from fusebench import config
from fusebench.measure import stopping
from fusebench.measure.stopping import StopRule


def stream(spread: float, seed: int = 1):
    """``take(n)`` of a stream of 1.0 ms samples, uniform within +-``spread``/2, and its calls."""
    rng = random.Random(seed)
    chunks: list[int] = []

    def take(n: int) -> list[float]:
        chunks.append(n)
        return [1.0 + spread * (rng.random() - 0.5) for _ in range(n)]

    return take, chunks


def test_the_median_error_from_the_iqr():
    # IQR 0.5 of a median 10 over 25 samples: 1.2533 x 0.5 / 1.349 / 10 / 5 = 0.00929
    samples = [9.75] * 7 + [10.0] * 11 + [10.25] * 7
    assert stopping.median_error(samples) == pytest.approx(0.5 / 1.349 * (3.14159265 / 2) ** 0.5 / 10 / 5)
    assert stopping.median_error([1.0] * 4) == float("inf")  # too few to estimate
    assert stopping.median_error([0.0] * 10) == float("inf")


def test_a_quiet_stream_stops_early():
    """0.01 % of spread: known within 0.05 % after the first chunk of min_samples."""
    take, chunks = stream(1e-4)
    samples = stopping.sample_until(take, StopRule(max_noise=5e-4, min_samples=10), cap=400)
    assert len(samples) == 10 and chunks == [10]


def test_a_noisy_stream_runs_to_the_cap():
    """20 % of spread: the median's error stays above 0.05 % up to the cap (200 samples), in
    doubling chunks each bounded by what the cap leaves."""
    take, chunks = stream(0.2)
    samples = stopping.sample_until(take, StopRule(max_noise=5e-4, min_samples=10), cap=200)
    assert len(samples) == 200 and chunks == [10, 10, 20, 40, 80, 40]
    assert stopping.median_error(samples) > 5e-4


def test_a_moderate_stream_stops_between_when_its_median_is_known():
    # uniform over 1 %: IQR 0.5 %, the median's error 0.929 x 0.5 % / sqrt(n): under 0.05 % from
    # n = 87, so the chunk that ends at 160 samples (10, 10, 20, 40, 80) stops it
    take, chunks = stream(0.01, seed=3)
    samples = stopping.sample_until(take, StopRule(max_noise=5e-4, min_samples=10), cap=1000)
    assert len(samples) == 160 and chunks == [10, 10, 20, 40, 80] and stopping.median_error(samples) <= 5e-4
    assert stopping.median_error(samples[: len(samples) // 2]) > 5e-4


def test_never_under_the_minimum():
    """A cap below min_samples (a long call) is raised to it; a quiet stream never stops before it."""
    take, chunks = stream(0.0)
    assert len(stopping.sample_until(take, StopRule(min_samples=10), cap=3)) == 10
    take, chunks = stream(0.0)
    assert len(stopping.sample_until(take, StopRule(min_samples=25), cap=1000)) == 25 and chunks == [25]


def test_the_defaults_are_the_method_before_the_rule_as_its_cap():
    from fusebench.measure import sweep

    assert stopping.DEFAULT == StopRule(0.0005, 0.04, 10) == StopRule(
        config.DEFAULT_MAX_NOISE, config.DEFAULT_MAX_S, config.DEFAULT_MIN_SAMPLES)
    assert (sweep.ROUND_BUDGET_S, sweep.MIN_ROUND_SAMPLES) == (0.04, 10)


def write(tmp_path, settings: str):
    path = tmp_path / "cases.yaml"
    text = config.DEFAULT_PATH.read_text()
    head, _, rest = text.partition("\nsettings:\n")
    body = rest[rest.index("\nops:"):]
    path.write_text(head + "\nsettings:\n" + textwrap.indent(textwrap.dedent(settings), "  ") + body)
    return path


def test_the_case_files_timing_keys_are_read(tmp_path):
    def rule(cfg):
        return StopRule(cfg.max_noise, cfg.max_s, cfg.min_samples)

    assert rule(config.load()) == stopping.DEFAULT  # fusebench.yaml writes the defaults
    cfg = config.load(write(tmp_path, """\
        rounds: 5
        timing:
          max_noise: 0.001
          max_s: 0.08
          min_samples: 20
        """))
    assert cfg.rounds == 5 and rule(cfg) == StopRule(0.001, 0.08, 20)
    assert rule(config.load(write(tmp_path, "timing:\n  max_s: 0.02\n"))) == StopRule(0.0005, 0.02, 10)


@pytest.mark.parametrize("settings, message", [
    ("timing:\n  max_time: 0.1\n",
     "settings.timing.max_time: unknown key; valid keys: max_noise, max_s, min_samples"),
    ("timing:\n  max_noise: 0\n",
     "settings.timing.max_noise: bad value 0; valid: a number from 1e-05 to 0.1"),
    ("timing:\n  max_s: 5\n",
     "settings.timing.max_s: bad value 5; valid: a number of seconds from 0.001 to 1"),
    ("timing:\n  min_samples: 2\n",
     "settings.timing.min_samples: bad value 2; valid: an integer from 5 to 10000"),
    ("timing:\n  min_samples: 10.5\n",
     "settings.timing.min_samples: bad value 10.5; valid: an integer from 5 to 10000"),
    ("timing: 3\n", "settings.timing: expected a mapping of max_noise, max_s, min_samples, got 3"),
    ("stopping: {}\n", "settings.stopping: unknown key; valid keys: rounds, timing, gate"),
])
def test_bad_timing_keys_are_refused_in_one_line(tmp_path, settings, message):
    with pytest.raises(config.ConfigError) as err:
        config.load(write(tmp_path, settings))
    text = str(err.value)
    assert "\n" not in text and message in text


def test_time_round_is_called_as_before_and_says_its_samples():
    """``time_round(rec, fn, dev, flush)``, as make ab's and make bisect's children call it in
    other commits' code: the same figures, and each mode's samples under the rule (on the CPU,
    wall only: a quiet call stops before its cap, never under min_samples)."""
    import torch

    from fusebench.measure import sweep
    from fusebench.record import Record

    cpu = torch.device("cpu")
    rec = Record("gelu", "torch", "1024", "float32")
    fig = sweep.time_round(rec, lambda: None, cpu, None)
    assert {"repeats", "wall_time_ms", "wall_time_iqr_ms", "clock", "before", "after",
            "contamination", "samples"} <= set(fig) and rec.rounds == [fig]
    assert fig["clock"] == "host"
    assert 10 <= fig["samples"]["wall"] <= min(fig["repeats"], sweep.MAX_WALL_SAMPLES)
    strict = sweep.time_round(rec, lambda: None, cpu, None, rule=StopRule(1e-5, 0.04, 20))
    assert strict["samples"]["wall"] >= 20


def test_a_cpu_run_records_its_rule_and_the_fields():
    import io

    import torch

    from fusebench.measure import sweep
    from fusebench.ops import OPS
    from fusebench.record import Sweep

    todo = [(OPS["gelu"], "torch", (4096,), "float32")]
    rule = StopRule(0.001, 0.01, 5)
    result = sweep.measure(enumerate(todo), 1, "cpu", torch.device("cpu"), rounds=2, peak=False,
                           rule=rule, out=io.StringIO())
    assert result.timing == {"max_noise": 0.001, "max_s": 0.01, "min_samples": 5}
    assert result.methods["device_time_ms"] == 2 and result.methods["device_time_graph_ms"] == 1
    assert result.methods["energy_mj_per_call"] == 2
    (rec,) = result.records
    assert rec.status == "ok" and rec.wall_time_ms > 0 and len(rec.rounds) == 2
    assert all(5 <= r["samples"]["wall"] for r in rec.rounds)
    assert rec.energy_mj_per_call is None and rec.energy_reason == ""  # no counter on the CPU
    assert "energy top-up" not in result.phases
    assert Sweep(**{**result.__dict__}).timing == result.timing
