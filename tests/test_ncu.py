"""make ncu: Nsight Compute's raw page parsed, summed per NVTX range, and set against the declared
bytes; the capture's commands, run with a fake ncu on the CPU.

The real figures come from tests/data/ncu/ (see its README): one capture of GELU and one of
softmax on an H100, trimmed by ``ncu_csv.trimmed``.
"""

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from fusebench.nsys import capture_summary, ncu_csv, ncu_summary, ncu_tool
from fusebench.nsys.nvtx_ranges import RangeName
from fusebench.paths import PROJECT_ROOT

DATA = Path(__file__).parent / "data" / "ncu"
GELU, SOFTMAX = DATA / "gelu-h100-e930cac-ncu", DATA / "softmax-h100-e930cac-ncu"

NVTX = "thread Domain:Push/Pop_Range:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg"
HEADER = ['"ID"', '"Process ID"', f'"{NVTX}"', '"Kernel Name"', '"dram__bytes_read.sum"',
          '"dram__bytes_write.sum"', '"dram__throughput.avg.pct_of_peak_sustained_elapsed"',
          '"gpu__time_duration.sum"', '"lts__t_bytes.sum"', '"lts__t_sector_hit_rate.pct"']


def cell(domain, name):
    return f'"{domain}:{name}:none:none:RGB:0xff1f77b4:REGISTERED:{name}"'


def raw_row(i, nvtx, read, write, pct, ns, l2, hit):
    quoted = '"' + nvtx.replace('"', '""') + '"'
    return ",".join([f'"{i}"', '"594"', quoted, '"k"', *(f'"{v}"' for v in (read, write, pct, ns, l2, hit))])


# ncu's own layout: a units row, thousands separators, the spin kernel outside every range, a
# range nested in one of another domain, and one nested inside ours.
RAW = "\n".join([
    "==PROF== Disconnected from process 594",
    ",".join(HEADER),
    '"","","","","byte","byte","%","ns","byte","%"',
    raw_row(0, "", "97,792", "550,656", "0.00", "13,745,760", "6,232,800", "69.19"),
    raw_row(1, '594  ' + cell("fusebench", "gelu/eager/16777216/float32") + " ", "4,200,448", "3,042,560",
            "37.26", "5,824", "14,218,240", "55.76"),
    raw_row(2, '594  ' + cell("torch", "forward") + " " + cell("fusebench", "gelu/eager/16777216/float32"),
            "1,536", "2,781,440", "20.70", "4,064", "17,060,512", "94.98"),
    raw_row(3, '594  ' + cell("fusebench", "gelu/eager/16777216/float32") + " "
            + cell("fusebench", "gelu/triton/16777216/float32"), "100", "200", "50", "1,000", "0", "0"),
]) + "\n"


def test_the_raw_page_is_read_with_its_units_separators_and_nested_ranges():
    kernels = ncu_csv.read(RAW)
    eager, triton = RangeName("gelu", "eager", "16777216", "float32"), RangeName("gelu", "triton", "16777216",
                                                                                   "float32")
    assert [k.range for k in kernels] == [None, eager, eager, triton]  # the innermost of ours
    assert kernels[1].metrics["dram__bytes_read.sum"] == 4200448.0
    sums, outside = ncu_csv.by_range(kernels)
    assert outside == 1
    e = sums[eager]
    assert (e.kernels, e.dram_read, e.dram_write, e.time_ns) == (2, 4201984.0, 5824000.0, 9888.0)
    assert e.dram_pct == pytest.approx((37.26 * 5824 + 20.70 * 4064) / 9888)
    assert e.l2_hit_pct == pytest.approx((55.76 * 14218240 + 94.98 * 17060512) / (14218240 + 17060512))
    assert sums[triton].l2_hit_pct is None  # no L2 bytes: no hit rate, not 0


def test_units_other_than_base_are_scaled():
    text = RAW.replace('"","","","","byte","byte"', '"","","","","Kbyte","Mbyte"')
    k = ncu_csv.read(text)[1]
    assert (k.metrics["dram__bytes_read.sum"], k.metrics["dram__bytes_write.sum"]) == (4200448e3, 3042560e6)


@pytest.mark.parametrize("change, message", [
    (lambda t: t.replace('"dram__bytes_read.sum"', '"dram__sectors_read.sum"'),
     "no column dram__bytes_read.sum"),
    (lambda t: t.replace(NVTX, "Kernel Tag"), "no NVTX column"),
    (lambda t: t.replace('"byte","byte"', '"byte","parsecs"'), "unit 'parsecs' not known"),
    (lambda t: t.replace('"3,042,560"', '"n/a"'), "row 4 dram__bytes_write.sum: 'n/a' is not a number"),
    (lambda t: t.replace('"3,042,560"', '"-1"'), "is not a finite number of at least 0"),
    (lambda t: "a,b\n1,2\n", "no header row"),
])
def test_a_page_that_is_not_a_capture_s_is_one_line(change, message):
    with pytest.raises(ncu_csv.CountersError, match=message):
        ncu_csv.read(change(RAW))


def test_the_trimmed_page_reads_back_to_the_same_counters():
    once = ncu_csv.trimmed(RAW)
    assert once.splitlines()[2] == "0,,13745760,97792,550656,0,69.19,6232800"
    assert ncu_csv.trimmed(once) == once
    assert ncu_csv.by_range(ncu_csv.read(once)) == ncu_csv.by_range(ncu_csv.read(RAW))
    committed = (GELU.parent / f"{GELU.name}_raw.csv").read_text()
    assert ncu_csv.trimmed(committed) == committed


def summary(stem: Path):
    side = capture_summary.load_side(f"{stem}.json")
    counters, outside = ncu_csv.by_range(ncu_csv.read(Path(f"{stem}_raw.csv").read_text()))
    table = ncu_summary.rows(side, counters)
    return side, {r.range: r for r in table}, table, outside


def test_gelu_on_the_h100_reads_as_its_declared_bytes_fused_and_ten_times_them_eager():
    """The lead's H100 capture (5 calls per range): fused backends at 2^24 and 2^26 within 5 % of
    the declared bytes; eager's nine kernels 10.4x from 2^24 up, 6.9x at 2^22, and under its
    declared bytes at 2^20, where its intermediates stay in the 50 MB L2."""
    _, by, table, outside = summary(GELU)
    ratio = {name: r.measured_over_declared for name, r in by.items()}
    assert ratio["gelu/eager/16777216/float32"] == pytest.approx(10.42, abs=0.01)
    assert ratio["gelu/eager/67108864/float32"] == pytest.approx(10.48, abs=0.01)
    assert ratio["gelu/eager/4194304/float32"] == pytest.approx(6.88, abs=0.01)
    assert ratio["gelu/eager/1048576/float32"] == pytest.approx(0.48, abs=0.01)
    for backend in ("torch", "compile", "triton"):
        for size in (16777216, 67108864):
            assert abs(ratio[f"gelu/{backend}/{size}/float32"] - 1) < 0.05
        assert ratio[f"gelu/{backend}/4194304/float32"] < 0.45  # hot: the input is still in L2
        assert ratio[f"gelu/{backend}/1048576/float32"] < 0.04
    assert [r.range for r in table if r.over_declared] == [
        f"gelu/eager/{n}/float32" for n in (4194304, 16777216, 67108864)]
    assert {r.kernels_per_call for r in table if r.backend == "eager"} == {9.0}
    assert {r.kernels_per_call for r in table if r.backend != "eager"} == {1.0}
    e = by["gelu/eager/1048576/float32"]
    assert (round(e.dram_read_mb, 2), round(e.dram_write_mb, 2)) == (0.86, 3.14)
    assert e.note == "less than declared: data left in L2 (50 MiB) by the call before"
    t = by["gelu/triton/67108864/float32"]
    assert (round(t.dram_pct_of_peak, 1), round(t.l2_hit_pct, 1)) == (88.9, 50.7)
    assert outside == 16  # one spin kernel before each range


def test_softmax_on_the_h100_reads_as_its_declared_bytes_fused_and_four_times_them_eager():
    _, by, _, _ = summary(SOFTMAX)
    ratio = {name: round(r.measured_over_declared, 3) for name, r in by.items()}
    assert ratio == {"softmax/eager/4096x4096/float32": 3.776, "softmax/torch/4096x4096/float32": 0.991,
                     "softmax/triton/4096x4096/float32": 0.986, "softmax/eager/8192x16384/float32": 3.999,
                     "softmax/torch/8192x16384/float32": 1.005, "softmax/triton/8192x16384/float32": 0.998}


def test_the_markdown_marks_the_cases_over_declared_and_tabulates_eager_by_size():
    side, _, table, outside = summary(GELU)
    text = ncu_summary.markdown(side, table, "nsys/gelu-h100-e930cac-ncu", outside)
    lines = text.splitlines()
    assert "| `gelu/eager/16777216/float32` | 9 | 805.32 | 593.79 | 134.22 | 10.424+ |" in text
    assert "| `gelu/triton/16777216/float32` | 1 | 67.11 | 65.65 | 134.22 | 0.989 |" in text
    assert "| eager | float32 | 0.476 | 6.877+ | 10.424+ | 10.484+ |" in lines
    assert any(line.startswith("Marks: + moved more than 1.1x its declared bytes") for line in lines)
    assert lines[-1].startswith("16 kernel(s) outside every case's range")
    assert ncu_summary.csv_text(table).splitlines()[0] == (
        "range,backend,shape,dtype,status,calls,kernels_per_call,dram_read_mb,dram_write_mb,declared_mb,"
        "measured_over_declared,over_declared,dram_pct_of_peak,l2_hit_pct,kernel_us,dram_gbps,harness_us,note")


def test_a_case_missing_from_the_report_or_not_run_says_so():
    side = json.loads(Path(f"{GELU}.json").read_text())
    side["cases"][1].update(status="skipped", reason="no triton")
    table = ncu_summary.rows(side, {})
    assert (table[0].status, table[0].note) == ("missing", "no kernel of this range in the ncu report")
    assert (table[1].status, table[1].note) == ("skipped", "skipped: no triton")


FAKE_NCU = """#!{python}
# A stand-in for ncu: logs its argv, writes what the real one would from tests/data/ncu/.
import json, shutil, sys
from pathlib import Path
args = sys.argv[1:]
with open({log!r}, "a") as log:
    log.write(json.dumps(args) + "\\n")
if args == ["--version"]:
    print("NVIDIA (R) Nsight Compute Command Line Profiler\\nVersion 2025.3.1.0 (build 36398880)")
elif args[0] == "-i":
    sys.stdout.write(Path({raw!r}).read_text())
else:
    print("==PROF== Connected to process 594")
    for i in range(3):
        print(f'==PROF== Profiling "_gelu_kernel" - {{i}}: Application replay pass 1')
    print({extra!r})
    program = args[args.index("-o") + 2:]
    side = Path(program[program.index("--json") + 1])
    shutil.copy({side!r}, side)
    Path(args[args.index("-o") + 1] + ".ncu-rep").write_text("report")
"""


def fake_ncu(tmp_path, extra=""):
    log = tmp_path / "argv.jsonl"
    fake = tmp_path / "bin" / "ncu"
    fake.parent.mkdir(exist_ok=True)
    fake.write_text(FAKE_NCU.format(python=sys.executable, log=str(log), raw=f"{GELU}_raw.csv",
                                    side=f"{GELU}.json", extra=extra))
    fake.chmod(0o755)
    return fake, log


def in_process(monkeypatch, capsys, tmp_path, *args):
    """``fusebench ncu`` in this process, the GPU checks passed, the checkout in tmp_path:
    (exit status, stdout, stderr)."""
    from fusebench import commands
    from fusebench.commands import ncu as ncu_cmd
    from fusebench.commands import nsys as nsys_cmd

    checkout = tmp_path / "checkout"
    (checkout / "nsys").mkdir(parents=True, exist_ok=True)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(ncu_cmd, "PROJECT_ROOT", checkout)
    monkeypatch.setattr(nsys_cmd, "_require_gpu", lambda what: None)
    monkeypatch.setattr(nsys_cmd, "_require_nvtx", lambda: None)
    monkeypatch.setattr(nsys_cmd._environment(), "machine_name", lambda *a: "h100")
    monkeypatch.setattr(nsys_cmd._environment(), "git_commit", lambda *a: "e930caca2482004f")
    monkeypatch.setattr(ncu_tool, "DRIVER_PARAMS", tmp_path / "no-params")
    with pytest.raises(SystemExit) as exited:
        commands.main(["ncu", *args])
    out = capsys.readouterr()
    return exited.value.code, out.out, out.err


def test_capture_runs_ncu_of_the_nsys_driver_then_writes_the_raw_page_and_the_summary(
        monkeypatch, capsys, tmp_path):
    fake, log = fake_ncu(tmp_path)
    status, out, err = in_process(monkeypatch, capsys, tmp_path, "capture", "--op=gelu", "--backends",
                                  "triton", "--dtypes", "float32", "--ncu", str(fake))
    assert status == 0, err
    stem = "nsys/gelu-h100-e930cac-ncu"
    program = [sys.executable, "-m", "fusebench", "nsys", "run", "--op=gelu", "--backends", "triton",
               "--dtypes", "float32", "--calls", "5", "--json", f"{stem}.json"]
    profile = ncu_tool.profile_command(str(fake), stem, program)
    runs = [json.loads(line) for line in log.read_text().splitlines()]
    assert runs == [["--version"], profile[1:], ncu_tool.raw_csv_command(str(fake), f"{stem}.ncu-rep")[1:]]
    assert shlex.join(profile) in err.splitlines()
    assert "--cache-control none --replay-mode application" in shlex.join(profile)
    assert "Profiling" not in err and "ncu: 3 kernel profile(s) over the replay passes in" in err
    checkout = tmp_path / "checkout"
    assert sorted(p.name for p in (checkout / "nsys").iterdir()) == sorted(
        f"gelu-h100-e930cac-ncu{end}" for end in (".json", ".ncu-rep", "_raw.csv", ".md", ".csv"))
    assert (checkout / f"{stem}_raw.csv").read_text() == Path(f"{GELU}_raw.csv").read_text()
    assert "| `gelu/eager/16777216/float32` | 9 |" in (checkout / f"{stem}.md").read_text()
    assert out == (checkout / f"{stem}.md").read_text() + "\n"
    assert err.splitlines()[-1] == ("ncu: 3 case(s) move more than 1.1x their declared bytes through DRAM "
                                    "(marked +)")


PERMISSION_LINE = ("ncu: error: the driver lets only administrators read the GPU performance counters "
                   "(ERR_NVGPUCTRPERM): load the nvidia module with NVreg_RestrictProfilingToAdminUsers=0")


def test_counters_not_permitted_by_ncu_is_one_line_naming_the_driver_setting(monkeypatch, capsys, tmp_path):
    fake, _ = fake_ncu(tmp_path, extra="==ERROR== ERR_NVGPUCTRPERM - The user does not have permission")
    status, _, err = in_process(monkeypatch, capsys, tmp_path, "capture", "--op=gelu", "--ncu", str(fake))
    assert status == 1
    last = err.splitlines()[-1]
    assert last.startswith(PERMISSION_LINE) and last.endswith("or run as root")
    assert not (tmp_path / "checkout" / "nsys" / "gelu-h100-e930cac-ncu.md").exists()


def test_counters_kept_for_administrators_by_the_driver_stop_the_check(monkeypatch, capsys, tmp_path):
    fake, log = fake_ncu(tmp_path)
    params = tmp_path / "params"
    params.write_text("ResmanDebugLevel: 4294967295\nRmProfilingAdminOnly: 1\n")
    monkeypatch.setattr(ncu_tool.os, "geteuid", lambda: 1000)
    assert ncu_tool.admin_only(params) and ncu_tool.permission_problem(params) == ncu_tool.PERMISSION_HOW
    monkeypatch.setattr(ncu_tool.os, "geteuid", lambda: 0)
    assert ncu_tool.permission_problem(params) is None  # root may
    params.write_text("RmProfilingAdminOnly: 0\n")
    monkeypatch.setattr(ncu_tool.os, "geteuid", lambda: 1000)
    assert ncu_tool.permission_problem(params) is None
    assert not ncu_tool.admin_only(tmp_path / "absent")


def test_without_ncu_one_line_says_how_to_get_it_and_the_exit_is_1(monkeypatch, capsys, tmp_path):
    status, _, err = in_process(monkeypatch, capsys, tmp_path, "check", "--op=gelu", "--ncu",
                                "/nonexistent/ncu")
    assert (status, err.count("\n")) == (1, 1)
    assert err.startswith("ncu: error: ncu not found (NCU=/nonexistent/ncu): install Nsight Compute")


def test_ncu_is_found_on_path_else_the_newest_install(monkeypatch, tmp_path):
    for version in ("2024.1.0", "2025.3.1", "2025.10.0"):
        exe = tmp_path / "opt" / version / "ncu"
        exe.parent.mkdir(parents=True)
        exe.write_text("#!/bin/sh\n")
        exe.chmod(0o755)
    monkeypatch.setattr(ncu_tool, "INSTALL_GLOB", str(tmp_path / "opt" / "*" / "ncu"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert ncu_tool.locate() == str(tmp_path / "opt" / "2025.10.0" / "ncu")
    (tmp_path / "empty").mkdir()
    on_path = tmp_path / "empty" / "ncu"
    on_path.write_text("#!/bin/sh\n")
    on_path.chmod(0o755)
    assert ncu_tool.locate() == str(on_path)


def test_summary_of_files_that_are_not_a_capture_s_is_bad_input(monkeypatch, capsys, tmp_path):
    stem = tmp_path / "x-ncu"
    Path(f"{stem}.json").write_text(Path(f"{GELU}.json").read_text())
    Path(f"{stem}_raw.csv").write_text("ID,x\n")
    status, _, err = in_process(monkeypatch, capsys, tmp_path, "summary", str(stem))
    assert status == 2 and err.startswith(f"ncu: error: {stem}: not a capture's files (no column ")
    status, _, err = in_process(monkeypatch, capsys, tmp_path, "summary", str(tmp_path / "none"))
    assert (status, err) == (2, f"ncu: error: no file {tmp_path / 'none'}.json: run the capture first "
                                "(make ncu OP=...)\n")


@pytest.mark.slow
def test_make_ncu_passes_the_selection_as_make_nsys_does():
    import subprocess

    from test_nsys_commands import make_env

    out = subprocess.run(["make", "-n", "--no-print-directory", "ncu", "OP=softmax", "SHAPES=4096x4096",
                          "DTYPES=float32", "CALLS=3", "NCU=/x/ncu", f"PYTHON={sys.executable}", "DEPS="],
                         cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120, env=make_env())
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-1] == shlex.join(
        [sys.executable, "-m", "fusebench", "ncu", "capture", "--op=softmax", "--shapes", "4096x4096",
         "--dtypes", "float32", "--calls", "3", "--ncu", "/x/ncu"])


def test_an_ncu_that_prints_no_version_is_refused(tmp_path):
    exe = tmp_path / "ncu"
    exe.write_text("#!/bin/sh\necho 'error while loading shared libraries: libcuda.so.1'\nexit 127\n")
    exe.chmod(0o755)
    with pytest.raises(ncu_tool.NcuUnavailable, match=r"cannot read the version of .*ncu \(error while"):
        ncu_tool.check(str(exe))


@pytest.mark.parametrize("op", ["gelu", "softmax"])
def test_the_committed_h100_example_is_its_raw_page_summarised(op, tmp_path):
    """nsys/examples/<op>-h100-80gb-hbm3-e7bc77c-ncu.*: `make ncu` on an H100 (nsys/README.md);
    summarising its committed raw page and side file again writes its committed CSV, and its
    markdown but for the folder named in it. Eager GELU's traffic by size is in it."""
    stem = f"{op}-h100-80gb-hbm3-e7bc77c-ncu"
    examples = PROJECT_ROOT / "nsys" / "examples"
    for end in (".json", "_raw.csv"):
        (tmp_path / f"{stem}{end}").write_bytes((examples / f"{stem}{end}").read_bytes())
    done = subprocess.run([sys.executable, "-m", "fusebench", "ncu", "summary", str(tmp_path / stem)],
                          cwd=PROJECT_ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / f"{stem}.csv").read_text() == (examples / f"{stem}.csv").read_text()
    md = (tmp_path / f"{stem}.md").read_text().replace(f"{tmp_path}/", "nsys/")
    assert md == (examples / f"{stem}.md").read_text()
    if op == "gelu":
        assert "| eager | float32 | 0.475 | 6.895+ | 10.423+ | 10.484+ |" in md
        assert "| triton | float32 | 0.008 | 0.166 | 0.989 | 0.998 |" in md
