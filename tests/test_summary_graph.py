"""The run summary puts each case's stream and graph device time side by side."""

from fusebench.record import Record, Sweep
from fusebench.report import summary


def rec(backend, hot_ms, graph_ms, shape="1024"):
    r = Record("gelu", backend, shape, "float32", device_time_ms=hot_ms, device_time_graph_ms=graph_ms)
    return r


def test_graph_text_gives_both_figures_and_the_launch_share():
    assert summary.graph_text(rec("eager", 0.0179, 0.0103)) == "17.9 / 10.3 us 42%"
    assert summary.graph_text(rec("triton", 0.00129, 0.00140)) == "1.29 / 1.40 us 0%"  # never negative
    assert summary.graph_text(rec("cuda", 0.002, None)) == "2.00 / - us"
    assert summary.graph_text(None) == "-"
    assert summary.graph_text(Record("gelu", "torch", "1024", "float32", status="skipped")) == "-"


def test_graph_lines_make_one_table_per_op_and_dtype_and_none_without_graph_figures():
    s = Sweep({"device": "cuda"}, 1000.0, "default",
              [rec("eager", 0.0179, 0.0103), rec("torch", 0.00211, 0.00119)])
    lines = summary.graph_lines(s)
    assert "gelu float32: stream / graph" in lines
    assert "| 1024 | 17.9 / 10.3 us 42% | 2.11 / 1.19 us 44% |" in lines
    assert summary.graph_lines(Sweep({}, 1.0, "cpu", [rec("eager", None, None)])) == []
