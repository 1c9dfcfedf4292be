"""The summary's figures keep significant digits, and the noise flag says "noisy" in words, at a
fixed width (issue 13, item 8: tables showed ``0 0%``; a noise of ``±3309.6%`` broke the columns)."""

import pytest

from fusebench.record import Record, Sweep
from fusebench.report import marks, summary


@pytest.mark.parametrize("x, text", [(3986.4, "3986"), (374.1, "374"), (41.27, "41.3"), (4.1, "4.10"),
                                     (0.4104, "0.410"), (0.01234, "0.0123"), (0.0, "0")])
def test_three_significant_digits(x, text):
    assert summary.sig(x) == text


@pytest.mark.parametrize("pct, text", [(94.4, "94%"), (10.0, "10%"), (4.24, "4.2%"), (0.097, "0.097%"),
                                       (0.00412, "0.0041%")])
def test_percentages_never_read_as_zero(pct, text):
    assert summary.pct_text(pct) == text


def test_a_small_cell_is_not_zero_zero():
    """The CPU's 1024-element GELU: a few GB/s, a tenth of a % of the ceiling."""
    rec = Record("gelu", "torch", "1024", "float32", device_time_ms=0.002, bandwidth_gbps=4.1,
                 pct_of_ceiling=0.097)
    eager = Record("gelu", "eager", "1024", "float32", device_time_ms=0.00008, bandwidth_gbps=0.4,
                   pct_of_ceiling=0.0095)
    assert summary.cell(rec, eager) == "4.10 0.097% 0.040x"
    assert summary.cell(eager, eager) == "0.400 0.0095% 1.0x"
    mm = Record("matmul", "torch", "64x64", "bfloat16", roofline="compute", device_time_ms=0.00512,
                tflops=0.1024, pct_of_peak=0.013)
    assert summary.cell(mm, None) == "0.00512 ms 0.102 TF 0.013%"


@pytest.mark.parametrize("noise, text", [(0.004, "±0.4%"), (0.0995, "±10%"), (0.1, "±10%"),
                                         (0.101, "noisy (±10%)"), (0.45, "noisy (±45%)"),
                                         (1.0, "noisy (±100%)"), (1.01, "noisy (>100%)"),
                                         (2.88, "noisy (>100%)"), (88.57, "noisy (>100%)"),
                                         (1e3, "noisy (>100%)"),
                                         (None, "noise n/a"), (float("nan"), "noise n/a")])
def test_noise_in_words_when_large_at_a_fixed_width(noise, text):
    """Beyond 100 % (the rounds differ by more than the figure) no number: issue 29 saw ``±8857%``."""
    out = summary.noise_text(noise)
    assert out.rstrip() == text and len(out) == summary.NOISE_WIDTH


def _rec(backend, ms, noise=0.01, **kw):
    return Record("gelu", backend, "16384", "float16", wall_time_ms=ms, bandwidth_gbps=65536 / ms / 1e6,
                  pct_of_ceiling=kw.pop("pct", 5.0), noise=noise, **kw)


def test_a_noisy_eager_gives_no_speedup_and_the_cell_is_marked():
    """Issue 29: ``109.9x`` from an eager figure of 8 ms ± 99 %: no speedup, a mark instead."""
    eager, torch_ = _rec("eager", 7.9976, noise=0.99), _rec("torch", 0.0728)
    assert summary.cell(eager, eager) == "0.00819 5.0% ~"
    assert summary.cell(torch_, eager) == "0.900 5.0%"  # no 109.9x
    assert summary.cell(torch_, _rec("eager", 0.1456)) == "0.900 5.0% 2.0x"


@pytest.mark.parametrize("kw, symbol", [({"contamination": ["other processes share the CPU"]}, "!"),
                                        ({"pct": 139.6}, "^"), ({"noise": float("nan")}, "~")])
def test_every_doubtful_figure_is_marked_and_loses_its_speedup(kw, symbol):
    rec = _rec("triton", 0.05, **kw)
    assert summary.cell(rec, _rec("eager", 0.1)) == f"{summary.cell(rec, None)}"
    assert summary.cell(rec, None).endswith(f" {symbol}")


def test_above_the_matrix_peak_is_marked():
    mm = Record("matmul", "torch", "256x256", "float32", roofline="compute", wall_time_ms=0.3,
                tflops=0.11, pct_of_peak=665.9, noise=0.02)
    assert summary.cell(mm, None) == "0.300 ms 0.110 TF 666% ^"
    assert marks.doubts(mm) == ["peak"]
    mm.pct_of_peak = 99.0
    assert marks.doubts(mm) == []


def test_the_summary_says_host_clock_and_explains_the_marks():
    env = {"device": "cpu", "where": "on host"}
    result = Sweep(env, 10.0, "cpu", [_rec("eager", 8.0, noise=0.99), _rec("torch", 0.07)])
    text = summary.summary(result)
    assert "Host-clock figures of the CPU" in text.splitlines()[0]
    assert "Marks: ~ noisy: rounds differ by more than 10 %. A marked figure gets no speedup." in text
    assert marks.legend(iter(["cache", "noisy"])).startswith("Marks: ~ noisy: rounds differ by more "
                                                             "than 10 %; ^ above the copy ceiling")
    assert "| 16384 | 0.00819 5.0% ~ | 0.936 5.0% |" in text


def test_every_pct_of_an_unstable_peak_is_marked():
    """A CPU's matrix peak that did not repeat (issue 29: 0.0168 to 0.135 TFLOP/s between runs)."""
    mm = Record("matmul", "torch", "256x256", "float32", roofline="compute", wall_time_ms=0.3,
                tflops=0.11, pct_of_peak=18.5, noise=0.02)
    result = Sweep({"device": "cpu"}, 10.0, "cpu", [mm], peak_tflops=0.6,
                   warnings=["matrix peak 0.638 TFLOP/s (bfloat16 512^3), UNSTABLE: 6 tries from 0.048 "
                             "to 0.638 TFLOP/s; every % of peak is in doubt"])
    text = summary.summary(result)
    assert "| 256x256 | 0.300 ms 0.110 TF 18% ? |" in text
    assert "? % of a matrix peak that did not repeat between tries: in doubt" in text
    result.warnings = []
    assert "| 256x256 | 0.300 ms 0.110 TF 18% |" in summary.summary(result)
