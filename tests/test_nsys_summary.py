"""The nsys statistics parser and the per-range summary.

Two kinds of input: small CSVs written here in the documented formats of several nsys versions
(Nsight Systems Post-Collection Analysis Guide, report columns), and the real CSVs of a capture on
an H200 committed in tests/data/nsys/ (see its README); the tests on real data skip until those
files are there.
"""

import csv
import io
import json
from pathlib import Path

import pytest

from fusebench.nsys import capture_summary, stats_csv
from fusebench.nsys.nvtx_ranges import RangeName

DATA = Path(__file__).parent / "data" / "nsys"

PROJ_HEADER = ("Range,Style,Total Proj Time (ns),Total Range Time (ns),Range Instances,Proj Avg (ns),"
               "Proj Med (ns),Proj Min (ns),Proj Max (ns),Proj StdDev (ns),Total GPU Ops,Avg GPU Ops,"
               "Avg Range Lvl,Avg Num Child")
KERN_HEADER = ("NVTX Range,Style,PID,TID,NVTX Inst,Kern Inst,Total Time (ns),Avg (ns),Med (ns),Min (ns),"
               "Max (ns),StdDev (ns),Kernel Name")

# 20 calls per range. eager: 9 kernels a call (6 mul, 2 add, 1 tanh), 400 µs a call;
# torch: 1 kernel, 45 µs; compile: 1 kernel, 130 µs by nsys against 120 µs by the harness.
PROJ_2025 = f"""{PROJ_HEADER}
fusebench:gelu/eager/16777216/float32,PushPop,8010000,900000,1,8010000.0,8010000.0,8010000,8010000,0.0,180,180.0,0.0,0.0
fusebench:gelu/torch/16777216/float32,PushPop,905000,400000,1,905000.0,905000.0,905000,905000,0.0,20,20.0,0.0,0.0
fusebench:gelu/compile/16777216/float32,PushPop,2600000,300000,1,2600000.0,2600000.0,2600000,2600000,0.0,20,20.0,0.0,0.0
:forward,PushPop,123,123,1,123.0,123.0,123,123,0.0,1,1.0,0.0,0.0
other:gelu/eager/16777216/float32,PushPop,1,1,1,1.0,1.0,1,1,0.0,1,1.0,0.0,0.0
"""


def kern_row(backend, kernels, total_ns, name):
    """One nvtx_kern_sum row (PID and TID 77, one range instance) for a gelu 2^24 float32 range."""
    avg = total_ns / kernels
    return (f"fusebench:gelu/{backend}/16777216/float32,PushPop,77,77,1,{kernels},{total_ns},{avg},{avg},"
            f"{avg - 1000:.0f},{avg + 1000:.0f},300.0,{name}")


KERN_2025 = "\n".join([
    KERN_HEADER,
    kern_row("eager", 120, 5280000, '"elementwise_kernel<4, MulFunctor<float>, std::array<char *, 3>>"'),
    kern_row("eager", 40, 1760000, '"elementwise_kernel<4, CUDAFunctorOnSelf_add<float>>"'),
    kern_row("eager", 20, 900000, '"elementwise_kernel<4, tanh_kernel_cuda(TensorIteratorBase &)>"'),
    kern_row("torch", 20, 900000, '"elementwise_kernel<4, GeluCUDAKernelImpl(TensorIteratorBase &)>"'),
    kern_row("compile", 20, 2580000, "triton_poi_fused_add_mul_tanh_0"),
]) + "\n"


def side_file(**overrides):
    def case(backend, status="ok", reason="", harness_ms=None):
        return {"range": f"gelu/{backend}/16777216/float32", "op": "gelu", "backend": backend,
                "shape": "16777216", "dtype": "float32", "calls": 20, "status": status, "reason": reason,
                "bytes_moved": 2 * (1 << 24) * 4, "device_time_ms": harness_ms}

    side = {"format": capture_summary.SIDE_FORMAT, "op": "gelu", "calls": 20,
            "environment": {"gpu": "NVIDIA H200", "git_commit": "1a2b3c4d5e6f"},
            "cases": [case("eager", harness_ms=0.3950), case("torch", harness_ms=0.0440),
                      case("compile", harness_ms=0.1200), case("triton", harness_ms=0.0450),
                      case("cuda", "skipped", "cuda extension unavailable: no nvcc")]}
    side.update(overrides)
    return side


def write(tmp_path, files):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    return tmp_path / "g"


def test_new_report_names_and_domain_spelling(tmp_path):
    stats = stats_csv.load(write(tmp_path, {"g_nvtx_gpu_proj_sum.csv": PROJ_2025,
                                             "g_nvtx_kern_sum.csv": KERN_2025}))
    assert set(stats) == {RangeName("gelu", b, "16777216", "float32") for b in ("eager", "torch", "compile")}
    eager = stats[RangeName("gelu", "eager", "16777216", "float32")]
    assert (eager.instances, eager.gpu_ops, eager.kernels, eager.kernel_names) == (1, 180, 180, 3)
    assert eager.proj_ns == 8010000 and eager.range_ns == 900000
    assert eager.kernel_ns == 5280000 + 1760000 + 900000


def test_old_report_names_default_domain_spelling_and_other_time_units(tmp_path):
    """nsys 2023 spellings: nvtxkernsum / nvtxppsum, ':name' ranges, --timeunit usec, a notice first."""
    kern = ("NOTICE: Existing SQLite export found: g.sqlite\n\n"
            + KERN_HEADER.replace("(ns)", "(us)").replace("NVTX Range", "Range") + "\n"
            + ":gelu/torch/16777216/float32,PushPop,77,77,1,20,900.0,45.0,45.0,44.0,46.0,0.3,gelu_kernel\n")
    pushpop = ("Time (%),Total Time (ns),Instances,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Range\n"
               "100.0,400000,1,400000.0,400000.0,400000,400000,0.0,:gelu/torch/16777216/float32\n")
    stats = stats_csv.load(write(tmp_path, {"g_nvtxkernsum.csv": kern, "g_nvtxppsum.csv": pushpop}))
    torch_ = stats[RangeName("gelu", "torch", "16777216", "float32")]
    assert (torch_.instances, torch_.kernels, torch_.kernel_ns, torch_.range_ns) == (1, 20, 900000.0, 400000)
    assert torch_.proj_ns is None and torch_.gpu_ops is None  # no projection in these reports


def test_the_newest_report_name_wins_when_both_are_there(tmp_path):
    stats = stats_csv.load(write(tmp_path, {
        "g_nvtx_gpu_proj_sum.csv": PROJ_2025, "g_nvtx_kern_sum.csv": KERN_2025,
        "g_nvtxkernsum.csv": f"{KERN_HEADER}\n{kern_row('torch', 99, 1, 'k')}\n",
    }))
    assert stats[RangeName("gelu", "torch", "16777216", "float32")].kernels == 20


def test_no_nvtx_report_says_why(tmp_path):
    with pytest.raises(stats_csv.StatsError, match=r"g_nvtx_gpu_proj_sum\.csv: nsys stats wrote no NVTX "
                                                     r"data .* nsys before 2024\.3 drops"):
        stats_csv.load(write(tmp_path, {"g_nvtx_kern_sum.csv": KERN_2025}))


def test_a_file_without_a_range_header_is_refused(tmp_path):
    with pytest.raises(stats_csv.StatsError, match="no header row"):
        stats_csv.load(write(tmp_path, {"g_nvtx_gpu_proj_sum.csv": "Name,Total Time (ns)\nk,1\n"}))


def test_column_units_convert_to_nanoseconds():
    assert stats_csv.column_key("Total Proj Time (ns)") == ("total proj time", 1.0)
    assert stats_csv.column_key("Avg (us)") == ("avg", 1e3)
    assert stats_csv.column_key("Total Time (ms)") == ("total time", 1e6)
    assert stats_csv.column_key("Time (%)") == ("time (%)", None)
    assert stats_csv.column_key(" Kern Inst ") == ("kern inst", None)


def summary_rows(tmp_path, side=None):
    stats = stats_csv.load(write(tmp_path, {"g_nvtx_gpu_proj_sum.csv": PROJ_2025,
                                             "g_nvtx_kern_sum.csv": KERN_2025}))
    return capture_summary.rows(side or side_file(), stats)


def test_summary_per_call_figures_and_ratios(tmp_path):
    rows = {r.backend: r for r in summary_rows(tmp_path)}
    eager = rows["eager"]
    assert (eager.kernels_per_call, eager.gpu_ops_per_call) == (9, 9)
    assert eager.proj_us == pytest.approx(400.5) and eager.kernel_us == pytest.approx(397.0)
    assert eager.bandwidth_gbps == pytest.approx(2 * (1 << 24) * 4 / 400.5e-6 / 1e9)
    assert eager.harness_us == pytest.approx(395.0)
    assert eager.proj_ratio == pytest.approx(400.5 / 395.0) and eager.agrees is True and eager.note == ""
    torch_ = rows["torch"]
    assert torch_.kernels_per_call == 1 and torch_.proj_us == pytest.approx(45.25)
    assert torch_.agrees is None  # under 100 µs: shown, not held to 5 %


def test_summary_flags_disagreement_skips_and_missing_ranges(tmp_path):
    rows = {r.backend: r for r in summary_rows(tmp_path)}
    compile_ = rows["compile"]
    assert compile_.agrees is False
    assert compile_.note == ("nsys and harness disagree by more than 5 %: range +8.3 %; "
                             "kernels +7.5 %: overlapping kernels counted twice")
    assert (rows["cuda"].status, rows["cuda"].note) == (
        "skipped", "skipped: cuda extension unavailable: no nvcc")
    assert rows["triton"].status == "missing"
    assert "range not in the nsys report" in rows["triton"].note
    assert [r.backend for r in capture_summary.disagreements(list(rows.values()))] == ["compile"]


def test_markdown_and_csv_summaries(tmp_path):
    side = side_file()
    rows = summary_rows(tmp_path, side)
    md = capture_summary.markdown(side, rows, "nsys/gelu-h200-1a2b3c4")
    assert md.startswith("# nsys: gelu on NVIDIA H200 (1a2b3c4)\n")
    assert ("| `gelu/eager/16777216/float32` | 9 | 9 | 400.5 | 397.0 | 335 | 395.0 | 1.014 | 1.005 |  |"
            in md)
    assert "| `gelu/cuda/16777216/float32` | – | – | – | – | – | – | – | – | skipped: cuda extension" in md
    assert md.rstrip().endswith("**1 of 2 case(s) of 100 µs or more disagree with the harness by more "
                                "than 5 %** (see notes).")
    table = list(csv.DictReader(io.StringIO(capture_summary.to_csv(rows))))
    assert [r["range"] for r in table] == [c["range"] for c in side["cases"]]
    assert table[0]["kernels_per_call"] == "9.0" and table[0]["agrees"] == "True"
    assert table[4]["proj_us"] == ""


def test_a_side_file_of_another_format_is_refused(tmp_path):
    with pytest.raises(ValueError, match="not a fusebench-nsys/1 side file"):
        capture_summary.rows(side_file(format="other"), {})


def test_summary_command_writes_md_and_csv_beside_the_capture(tmp_path, capsys, monkeypatch):
    from fusebench import commands

    stem = write(tmp_path, {"g_nvtx_gpu_proj_sum.csv": PROJ_2025, "g_nvtx_kern_sum.csv": KERN_2025,
                            "g.json": json.dumps(side_file())})
    with pytest.raises(SystemExit) as exited:
        commands.main(["nsys", "summary", str(stem)])
    assert exited.value.code == 0
    out = capsys.readouterr()
    assert (tmp_path / "g.md").read_text() == out.out[:-1]
    assert (tmp_path / "g.csv").read_text().startswith("range,backend,shape,dtype,status,calls,")
    assert "1 case(s) of 100 µs or more disagree with the harness by more than 5 %" in out.err


# ---- Real captures (tests/data/nsys/): recorded on an H200 with nsys 2025.3.1 ----------------

REAL_SIDE_FILES = sorted(DATA.glob("*.json"))

#: Kernels one call launches, known independently of nsys (see kernels/gelu/__init__.py,
#: kernels/softmax/__init__.py and the torch.profiler counts of
#: tests/test_run_record.py::test_launches_per_call).
KERNELS_PER_CALL = {("gelu", "eager"): 9, ("gelu", "torch"): 1, ("gelu", "compile"): 1,
                    ("gelu", "triton"): 1, ("gelu", "cuda"): 1, ("softmax", "eager"): 5,
                    ("softmax", "torch"): 1}


def test_real_capture_placeholder():
    if not REAL_SIDE_FILES:
        pytest.skip("PLACEHOLDER: no real H200 capture in tests/data/nsys/ yet; the lead drops in the "
                    "files of `make nsys OP=gelu` and `OP=softmax` (see tests/data/nsys/README.md)")


@pytest.mark.parametrize("side_path", REAL_SIDE_FILES, ids=lambda p: p.stem)
def test_real_capture_has_every_range_with_the_known_kernel_counts(side_path):
    stem = side_path.with_suffix("")
    side = capture_summary.load_side(side_path)
    stats = stats_csv.load(stem)
    rows = capture_summary.rows(side, stats)
    ok = [r for r in rows if r.status == "ok"]
    assert ok, "no case ran in the recorded capture"
    assert not [r.range for r in rows if r.status == "missing"]  # every range reached the report
    checked = 0
    for r in ok:
        assert r.calls == 20
        expected = KERNELS_PER_CALL.get((side["op"], r.backend))
        if expected is not None:
            assert r.kernels_per_call == expected, r.range
            checked += 1
        assert r.gpu_ops_per_call >= r.kernels_per_call >= 1
        assert r.proj_us > 0
        if r.kernels_per_call == 1:  # several kernels may overlap (the cuda split-row's PDL launch)
            assert r.kernel_us <= r.proj_us * 1.001, r.range
    assert checked
    if side["op"] == "gelu":
        eager = [r for r in ok if r.backend == "eager"]
        assert eager and all(r.kernels_per_call == 9 for r in eager)


@pytest.mark.parametrize("side_path", REAL_SIDE_FILES, ids=lambda p: p.stem)
def test_real_capture_agrees_with_the_harness_from_100_us(side_path):
    stem = side_path.with_suffix("")
    rows = capture_summary.rows(capture_summary.load_side(side_path), stats_csv.load(stem))
    long_ = [r for r in rows if r.agrees is not None]
    assert long_, "no case of 100 µs or more"
    assert not [(r.range, r.note) for r in long_ if not r.agrees]


@pytest.mark.parametrize("side_path", REAL_SIDE_FILES, ids=lambda p: p.stem)
def test_real_capture_summary_csv_is_what_the_parser_gives(side_path):
    stem = side_path.with_suffix("")
    written = Path(f"{stem}.csv")
    if not written.is_file():
        pytest.skip(f"{written.name} not committed")
    rows = capture_summary.rows(capture_summary.load_side(side_path), stats_csv.load(stem))
    assert capture_summary.to_csv(rows) == written.read_text()
