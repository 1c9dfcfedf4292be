"""The summary's figures keep significant digits, and the noise flag says "noisy" in words, at a
fixed width (issue 13, item 8: tables showed ``0 0%``; a noise of ``±3309.6%`` broke the columns)."""

import pytest

from fusebench.history import summary
from fusebench.measure import sweep


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
    rec = sweep.Record("gelu", "torch", "1024", "float32", device_time_ms=0.002, bandwidth_gbps=4.1,
                       pct_of_ceiling=0.097)
    eager = sweep.Record("gelu", "eager", "1024", "float32", device_time_ms=0.00008, bandwidth_gbps=0.4,
                         pct_of_ceiling=0.0095)
    assert summary.cell(rec, eager) == "4.10 0.097% 0.040x"
    assert summary.cell(eager, eager) == "0.400 0.0095% 1.0x"
    mm = sweep.Record("matmul", "torch", "64x64", "bfloat16", roofline="compute", device_time_ms=0.00512,
                      tflops=0.1024, pct_of_peak=0.013)
    assert summary.cell(mm, None) == "0.00512 ms 0.102 TF 0.013%"


@pytest.mark.parametrize("noise, text", [(0.004, "±0.4%"), (0.0995, "±10%"), (0.1, "±10%"),
                                         (0.101, "noisy (±10%)"), (2.88, "noisy (±288%)"),
                                         (33.096, "noisy (±3310%)"), (1e3, "noisy (>9999%)"),
                                         (None, "noise n/a"), (float("nan"), "noise n/a")])
def test_noise_in_words_when_large_at_a_fixed_width(noise, text):
    out = summary.noise_text(noise)
    assert out.rstrip() == text and len(out) == summary.NOISE_WIDTH
