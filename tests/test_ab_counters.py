"""fusebench ab's counter notes: the rule on fabricated figures, and the whole path (each side's
nsys driver under ncu in its own tree, the head's parser, the note in text, markdown and JSON,
the stored session read back) with a fake ncu on PATH that answers from tests/data/ncu/."""

import csv
import io
import json
import os
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from test_ab import CASES, A, B, Fake, both

from fusebench.commands import ab as ab_cmd
from fusebench.errors import markdown_cell
from fusebench.gate import ab, ab_counters, compare
from fusebench.nsys import ncu_tool

DATA = Path(__file__).parent / "data" / "ncu"
GELU = DATA / "gelu-h100-e930cac-ncu"
SLOW = "gelu/triton/16777216/float32"


def figures(dram_bytes, dram_pct, kernels=1.0, declared=134217728.0, l2_bytes=None):
    return {"kernels": kernels, "dram_bytes": dram_bytes, "dram_pct": dram_pct, "time_ns": 1.0,
            "declared": declared, "l2_bytes": l2_bytes}


@pytest.mark.parametrize("base, head, said", [
    (figures(132.8e6, 84.2), figures(140.9e6, 84.0), "DRAM bytes +6.1 %, bandwidth same"),
    (figures(132.8e6, 84.2), figures(140.9e6, 80.0), "DRAM bytes +6.1 %, DRAM throughput -5.0 %"),
    (figures(132.8e6, 84.2), figures(133.0e6, 80.0), "bytes same, DRAM throughput -5.0 %"),
    (figures(132.8e6, 84.2), figures(132.9e6, 84.9), "bytes same, DRAM throughput same"),
    (figures(132.8e6, 84.2), figures(265.6e6, 84.2, 2.0),
     "DRAM bytes +100.0 %, bandwidth same, launches 1 -> 2"),
    # held in L2 (smaller than it, hot): what the L2 moved, not what it let through to DRAM
    (figures(4.9e6, 18.2, l2_bytes=190e6), figures(5.2e6, 18.0, l2_bytes=201.4e6),
     "in L2 (DRAM 0.04x the declared bytes): L2 bytes +6.0 %"),
    (figures(0.0, 0.0, l2_bytes=190e6), figures(0.0, 0.0, 2.0, l2_bytes=191e6),
     "in L2 (DRAM 0.00x the declared bytes): L2 bytes same, launches 1 -> 2"),
    (figures(4.9e6, 18.2), figures(5.2e6, 18.0), "DRAM bytes +6.1 %, bandwidth same"),  # no L2 figures
])
def test_the_note_tells_more_bytes_from_a_worse_access_pattern(base, head, said):
    assert ab_counters.note(base, head) == said


def row(status, metric="track_device_time", params=("triton", "16777216", "float32"), note=""):
    return compare.Row(f"suite.Gelu.{metric}", params, "seconds", 1.0, 1.05, 1.05, 0.0, status, 1.03, 0.01,
                       note)


def test_only_gpu_figures_judged_a_regression_or_an_improvement_are_flagged():
    rows = [row(compare.REGRESSION), row(compare.REGRESSION, "track_device_time_cold"),
            row(compare.IMPROVEMENT, params=("torch", "1024", "float32")),
            row(compare.REGRESSION, "track_wall_time", params=("eager", "1024", "float32")),
            row(compare.WITHIN_NOISE, params=("cuda", "1024", "float32")), row(compare.SAME)]
    assert ab_counters.flagged(rows) == [SLOW, "gelu/torch/1024/float32"]


def raw_of(change: str, case: str = SLOW) -> str:
    """The committed GELU page with ``case``'s kernels changed: ``bytes`` (6.1 % more bytes and
    time), ``pattern`` (5 % more time, the same bytes), ``launches`` (each kernel launched twice),
    ``l2`` (6 % more L2 bytes)."""
    rows = list(csv.reader(io.StringIO(Path(f"{GELU}_raw.csv").read_text())))
    head = rows[0]
    i = {name: head.index(name) for name in head}
    out = rows[:2]
    for r in rows[2:]:
        out.append(r)
        if r[1] != f"fusebench:{case}":
            continue
        if change == "bytes":
            for col in ("dram__bytes_read.sum", "dram__bytes_write.sum", "gpu__time_duration.sum"):
                r[i[col]] = str(float(r[i[col]]) * 1.061)
        elif change == "pattern":
            r[i["gpu__time_duration.sum"]] = str(float(r[i["gpu__time_duration.sum"]]) * 1.05)
            pct = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
            r[i[pct]] = str(float(r[i[pct]]) / 1.05)
        elif change == "launches":
            out.append(list(r))
        elif change == "l2":
            r[i["lts__t_bytes.sum"]] = str(float(r[i["lts__t_bytes.sum"]]) * 1.06)
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(out)
    return buf.getvalue()


FAKE_NCU = """#!{python}
# A stand-in for ncu: logs what it was asked, where and with which PYTHONPATH; answers from files.
import json, os, shutil, sys
from pathlib import Path
args = sys.argv[1:]
with open({log!r}, "a") as log:
    log.write(json.dumps({{"args": args, "cwd": os.getcwd(), "path": os.environ.get("PYTHONPATH")}}) + "\\n")
if args == ["--version"]:
    print("Version 2025.3.1.0 (build 36398880)")
elif args[0] == "-i":
    sys.stdout.write(Path({pages!r}, Path(Path(args[1]).read_text()).name).read_text())
else:
    out = args[args.index("-o") + 1]
    program = args[args.index("-o") + 2:]
    print("==PROF== Profiling \\"_gelu_kernel\\" - 0: Application replay pass 1")
    shutil.copy({side!r}, program[program.index("--json") + 1])
    Path(out + ".ncu-rep").write_text(Path(out).name.split("-")[0] + ".csv")
"""


@pytest.fixture
def fake_ncu(tmp_path, monkeypatch):
    """ncu on PATH answering base.csv (the committed page) and head.csv (set by the test)."""
    pages = tmp_path / "pages"
    pages.mkdir()
    (pages / "base.csv").write_text(Path(f"{GELU}_raw.csv").read_text())
    log = tmp_path / "ncu.jsonl"
    exe = tmp_path / "bin" / "ncu"
    exe.parent.mkdir()
    exe.write_text(FAKE_NCU.format(python=sys.executable, log=str(log), pages=str(pages),
                                   side=f"{GELU}.json"))
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{exe.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(ncu_tool, "DRIVER_PARAMS", tmp_path / "no-params")
    monkeypatch.setattr(ab_counters, "_gpu", lambda: True)
    return SimpleNamespace(pages=pages, log=log)


def measurer(tmp_path):
    trees = {side: tmp_path / f"tree-{side}" for side in ab_counters.SIDES}
    for tree in trees.values():
        tree.mkdir(exist_ok=True)
    return SimpleNamespace(trees={side: (tree, f"key-{side}") for side, tree in trees.items()},
                           env=lambda tree, key: {**os.environ, "PYTHONPATH": str(tree)},
                           python=sys.executable)


def slow_session():
    return ab.run(None, Fake(both(CASES, {SLOW: 1.05}), noise=0.003, seed=1), A, B)


@pytest.mark.parametrize("change, said", [
    ("bytes", "ncu: DRAM bytes +6.1 %, bandwidth same"),
    ("pattern", "ncu: bytes same, DRAM throughput -4.8 %"),
    ("launches", "ncu: DRAM bytes +100.0 %, bandwidth same, launches 1 -> 2"),
])
def test_each_side_s_driver_runs_under_ncu_in_its_tree_and_the_note_says_why(tmp_path, fake_ncu, change,
                                                                              said):
    (fake_ncu.pages / "head.csv").write_text(raw_of(change))
    out = slow_session()
    rows = ab.rows(out)
    ticks = iter([100.0, 112.5])
    counters = ab_counters.explain(rows, measurer(tmp_path), tmp_path / "counters", clock=lambda: next(ticks))
    assert list(counters["cases"]) == [SLOW] and counters["seconds"] == 12.5
    runs = [json.loads(line) for line in fake_ncu.log.read_text().splitlines()]
    profiles = [r for r in runs if "--replay-mode" in r["args"]]
    assert [(r["cwd"], r["path"]) for r in profiles] == [(str(tmp_path / f"tree-{s}"),) * 2
                                                          for s in ab_counters.SIDES]
    program = profiles[0]["args"][profiles[0]["args"].index(sys.executable):]
    assert program == [sys.executable, "-m", "fusebench", "nsys", "run", "--op=gelu", "--backends", "triton",
                       "--shapes", "16777216", "--dtypes", "float32", "--calls", "5", "--json",
                       str(tmp_path / "counters" / "base-gelu.json")]
    assert profiles[0]["args"][profiles[0]["args"].index("--metrics") + 1] == ",".join(ncu_tool.METRICS)
    flagged = [r for r in ab_counters.annotate(rows, counters) if r.status == compare.REGRESSION]
    assert flagged and all(r.note.endswith(said) for r in flagged)
    same = [r for r in ab_counters.annotate(rows, counters) if r.status != compare.REGRESSION]
    assert all("ncu:" not in r.note for r in same)
    out.phases["counters"] = counters["seconds"]
    text, lines, code = ab_cmd.verdict(out, "text", "h100", [], None, counters)
    assert code == 1 and said in text
    assert lines[0] == ("ab: counters: 1 flagged case(s) profiled once on each side with ncu in 12 s "
                        "(--no-counters, NO_COUNTERS=1 through make, skips it)")
    assert markdown_cell(said) in ab_cmd.verdict(out, "markdown", "h100", [], None, counters)[0]  # escaped
    data = json.loads(ab_cmd.verdict(out, "json", "h100", [], None, counters)[0])
    assert any(r["note"].endswith(said) for r in data["rows"] if r["status"] == compare.REGRESSION)
    assert data["counters"]["cases"][SLOW]["base"]["kernels"] == 1.0 and data["phases"]["counters"] == 12.5


def test_a_flagged_case_held_in_l2_is_told_by_its_l2_bytes_and_the_first_most_are_profiled(
        tmp_path, fake_ncu, monkeypatch):
    hot = "gelu/triton/4194304/float32"  # 16 MB each way: hot in the H100's 50 MiB L2
    (fake_ncu.pages / "head.csv").write_text(raw_of("l2", hot))
    rows = ab.rows(ab.run(None, Fake(both(CASES, {hot: 1.06, SLOW: 1.06}), noise=0.003, seed=1), A, B))
    monkeypatch.setattr(ab_counters, "MOST", 1)
    counters = ab_counters.explain(rows, measurer(tmp_path), tmp_path / "counters")
    notes = {r.params[1]: r.note.rpartition("; ")[2] for r in ab_counters.annotate(rows, counters)
             if r.status == compare.REGRESSION}
    assert notes["4194304"] == "ncu: in L2 (DRAM 0.15x the declared bytes): L2 bytes +6.0 %"
    assert not notes["16777216"].startswith("ncu:")  # past MOST: not profiled
    assert ab_counters.lines(counters)[0].startswith("ab: counters: 1 of 2 flagged case(s) profiled")


def test_without_a_gpu_or_ncu_one_line_says_so_and_nothing_flagged_says_nothing(tmp_path, monkeypatch):
    rows = ab.rows(slow_session())
    monkeypatch.setattr(ab_counters, "_gpu", lambda: False)
    skipped = ab_counters.explain(rows, measurer(tmp_path), tmp_path / "c")
    assert ab_counters.lines(skipped) == ["ab: counters: not profiled (no GPU here)"]
    monkeypatch.setattr(ab_counters, "_gpu", lambda: True)
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    monkeypatch.setattr(ncu_tool, "INSTALL_GLOB", str(tmp_path / "opt" / "*" / "ncu"))
    skipped = ab_counters.explain(rows, measurer(tmp_path), tmp_path / "c", ncu="ncu")
    assert ab_counters.lines(skipped) == [
        f"ab: counters: not profiled (ncu not found (NCU=ncu, nor {tmp_path}/opt/*/ncu))"]
    assert ab_counters.annotate(rows, skipped) == rows
    same = ab.rows(ab.run(None, Fake(both(CASES), noise=0.003, seed=1), A, B))
    assert ab_counters.explain(same, measurer(tmp_path), tmp_path / "c") is None
    assert ab_counters.lines(None) == [] and ab_counters.about(None) == {}
    assert not (tmp_path / "c").exists()


def test_a_side_whose_driver_fails_is_one_line_and_the_verdict_stands(tmp_path, fake_ncu):
    (fake_ncu.pages / "head.csv").write_text("not a page\n")
    rows = ab.rows(slow_session())
    counters = ab_counters.explain(rows, measurer(tmp_path), tmp_path / "counters")
    assert counters["skipped"] == "head: no header row starting with 'ID' (not ncu's raw page as CSV)"
    assert ab_counters.annotate(rows, counters) == rows


def test_the_stored_counters_are_read_back_by_from_and_bad_ones_refused(tmp_path, fake_ncu, capsys):
    from fusebench import commands

    (fake_ncu.pages / "head.csv").write_text(raw_of("bytes"))
    out = slow_session()
    counters = ab_counters.explain(ab.rows(out), measurer(tmp_path), tmp_path / "counters")
    path = tmp_path / "s" / "ab.json"
    path.parent.mkdir()
    path.write_text(json.dumps(dict(out.to_dict(), counters=counters)))
    with pytest.raises(SystemExit) as exited:
        commands.main(["ab", "--from", str(path)])
    printed = capsys.readouterr()
    assert exited.value.code == 1 and "ncu: DRAM bytes +6.1 %, bandwidth same" in printed.out
    assert "ab: counters: 1 flagged case(s) profiled" in printed.err
    for bad in ({"cases": {SLOW: {"base": {"dram_bytes": -1}, "head": {}}}}, {"cases": {"a b": {}}}, [1],
                {"cases": {SLOW: {"base": {"dram_bytes": float("nan")}, "head": {}}}}):
        path.write_text(json.dumps(dict(out.to_dict(), counters=bad)))
        with pytest.raises(SystemExit) as exited:
            commands.main(["ab", "--from", str(path)])
        err = capsys.readouterr().err
        assert exited.value.code == 2 and err.count("\n") == 1 and "not a valid session: counters" in err


def test_no_counters_is_an_option_and_make_passes_it():
    from fusebench.commands import parser

    assert parser("ab").parse_args(["ab", "--base", "x", "--no-counters"]).no_counters is True
    assert parser("ab").parse_args(["ab", "--base", "x"]).no_counters is False


@pytest.mark.slow
def test_make_ab_no_counters_passes_the_option():
    import subprocess

    from test_nsys_commands import make_env

    from fusebench.paths import PROJECT_ROOT

    out = subprocess.run(["make", "-n", "--no-print-directory", "ab", "BASE=HEAD", "NO_COUNTERS=1",
                          f"PYTHON={sys.executable}", "DEPS="], cwd=PROJECT_ROOT, capture_output=True,
                         text=True, timeout=120, env=make_env())
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-1].endswith(" --no-counters")
