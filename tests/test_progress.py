"""Issue 41, item 2: while a run builds and times, its progress bar names the case it is on (the
cases' own lines come only after the last round)."""

import io
import sys

import pytest

from fusebench.measure import progress, sweep
from fusebench.ops import get_op

pytest.importorskip("tqdm")


class Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="the CPU's grid and skips")
def test_the_bars_name_the_case_being_built_and_timed(monkeypatch):
    term = Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    shown = []
    real = progress.show

    def spy(bar, phase, *case):
        real(bar, phase, *case)
        bar.refresh()
        shown.append(term.getvalue().rsplit("\r", 1)[-1])  # what the terminal's bar line reads now

    monkeypatch.setattr(progress, "show", spy)
    gelu = get_op("gelu")
    todo = [(0, (gelu, "torch", (1024,), "float32")), (1, (gelu, "cuda", (1024,), "float32"))]
    out = io.StringIO()
    run = sweep.measure(iter(todo), 2, "cpu-quick", sweep.environment.device(), rounds=2, peak=False,
                        out=out)
    assert [r.status for r in run.records] == ["ok", "skipped"]  # cuda: no GPU here (or gated out)
    assert [line.split(":")[0] for line in shown] == [
        "build gelu/torch/1024/float32", "build gelu/cuda/1024/float32",
        "round 1/2 gelu/torch/1024/float32", "round 2/2 gelu/torch/1024/float32"]
    assert shown[0].startswith("build gelu/torch/1024/float32:   0%") and "0/2" in shown[0]
    assert "1/2" in shown[1] and "0/2" in shown[2] and "1/2" in shown[3]  # 1 case built x 2 rounds
    # the skipped case is counted after the build, not a line of its own (issue 54, item 7)
    assert "[2/2] gelu     cuda" not in out.getvalue()
    assert ("; 1 skipped (1: needs a CUDA GPU; each case's reason is in the run's record, bench -v prints "
            "each)\n") in out.getvalue()
    verbose = io.StringIO()
    sweep.measure(iter(todo), 2, "cpu-quick", sweep.environment.device(), rounds=1, peak=False, out=verbose,
                  verbose=True)
    assert "[2/2] gelu     cuda             1024 float32   skipped: needs a CUDA GPU" in verbose.getvalue()


def test_no_bar_when_stderr_is_not_a_terminal(monkeypatch):
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    bar = progress.build_bar(3)
    progress.show(bar, "build", "gelu", "torch", "1024", "float32")
    out = io.StringIO()
    progress.say(bar, "a line", out)
    bar.update()
    bar.close()
    assert bar.disable and sys.stderr.getvalue() == "" and out.getvalue() == "a line\n"


def screen(text: str) -> list[str]:
    """The lines a terminal shows after ``text``: a carriage return goes back to the line's start
    and what follows overwrites it (tqdm draws and clears its bar so)."""
    lines, line, col = [], [], 0
    for ch in text:
        if ch == "\n":
            lines.append("".join(line).rstrip())
            line, col = [], 0
        elif ch == "\r":
            col = 0
        else:
            line[col:col + 1] = [ch]
            col += 1
    return lines + ["".join(line).rstrip()]


def test_the_screen_of_a_bar_torn_by_a_print_and_of_one_cleared_first():
    assert screen("\rrounds  50%|5 | 1/2fusebench: a line\n") == ["rounds  50%|5 | 1/2fusebench: a line", ""]
    assert screen("\rrounds  50%\r" + " " * 11 + "\rfusebench: a line\n\rrounds 100%") == [
        "fusebench: a line", "rounds 100%"]


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="the CPU's grid and skips")
def test_the_lines_printed_during_a_run_go_above_the_bar_never_into_it(monkeypatch):
    # stderr a terminal and the run's lines on it, as a run prints them: on the screen, each line
    # said is alone on its line (a bar drawn and not cleared would lead it: "round 1/2 ...: 50%|...")
    term = Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    gelu = get_op("gelu")
    todo = [(0, (gelu, "torch", (1024,), "float32")), (1, (gelu, "cuda", (1024,), "float32"))]
    sweep.measure(iter(todo), 2, "cpu-quick", sweep.environment.device(), rounds=2, peak=False,
                  out=term)
    lines = [ln for ln in screen(term.getvalue()) if ln]
    said = [ln for ln in lines if "fusebench:" in ln or "] gelu " in ln]
    assert [ln for ln in said if not ln.startswith(("fusebench: ", "[1/2] gelu ", "[2/2] gelu "))] == []
    # the lines said while a bar is live: each round's (and any warning of a contaminated case:
    # this machine's load decides); the skipped case is counted on the build's line
    summaries = [ln.split(":")[1] for ln in said if ln.startswith("fusebench: round ")]
    assert summaries == [" round 1/2", " round 2/2"]
    assert [ln[:20] for ln in said if "] gelu " in ln] == ["[1/2] gelu     torch"]
    assert lines == said  # every bar was cleared: none is left on the screen
