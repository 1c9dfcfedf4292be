"""Every figure a user sees can be believed (issue 29): the CPU's other load contaminates a
host-clock figure, an unstable matrix peak is measured again or marked, the compare hint names
stored commits by date, and ``fusebench --help`` needs no torch."""

import json
import subprocess
import sys
import time

import pytest
import torch

from fusebench.errors import UsageError
from fusebench.measure import environment, metrics, timing
from fusebench.paths import PROJECT_ROOT
from fusebench.storage import results

CPU = torch.device("cpu")


@pytest.mark.parametrize("load, threads, dirty", [(4.2, 1, True), (1.4, 1, False), (2.4, 2, False),
                                                  (2.6, 2, True), (0.0, 1, False)])
def test_other_load_on_the_cpu_contaminates(load, threads, dirty):
    """Issue 29: "contaminated cases: 0" at a load average of 4-8 on two cores."""
    sample = {"loadavg": load, "cores": 2, "threads": threads}
    reasons = environment.contamination([{"loadavg": 0.1, "cores": 2, "threads": threads}, sample])
    if dirty:
        assert reasons == [f"other processes share the CPU (load {load:.0f} on 2 cores, {threads} thread(s) "
                           "ours)"]
    else:
        assert reasons == []


@pytest.mark.parametrize("others, dt, dirty", [(1.2, 1.0, True), (0.3, 1.0, False), (0.55, 0.5, False),
                                               (0.6, 0.5, True), (1.5, 0.1, True), (0.75, 0.1, False),
                                               (1.9, 0.05, None)])
def test_the_cpu_time_others_used_while_it_ran_decides_where_it_can_be_read(others, dt, dirty):
    """A new user's trial: eager GELU read 120x too slow beside a CI job at a load average of 1.87
    on 2 cores (ours 2 threads), 'contaminated cases: 0'. Between the first and last samples, the
    CPU seconds every process used less ours decide, beyond the counters' resolution (a 10 ms
    tick per core and one of ours over the interval: 0.03 cores over 1 s, 0.06 over 0.5 s, 0.3
    over 0.1 s); an interval whose resolution exceeds half a core (0.05 s on 2 cores) falls back
    on the load average (here 0.1: clean). What other processes did between two measurements
    (a sibling of `make ab` or `make bisect` timing its side) is not counted."""
    own = 1.5 * dt  # ours: 1.5 cores busy
    first = {"loadavg": 0.1, "cores": 2, "threads": 2, "busy_s": 100.0, "own_s": 10.0, "t": 50.0}
    last = dict(first, busy_s=100.0 + own + others * dt, own_s=10.0 + own, t=50.0 + dt)
    reasons = environment.contamination([first, last])
    if dirty:
        assert reasons == [f"other processes share the CPU ({others:.1f} of 2 cores busy beside ours "
                           "while it ran)"]
    else:
        assert reasons == []
    assert environment.contamination([first]) == []  # one sample: the load average (0.1)


def test_a_cpu_sample_reads_the_load(monkeypatch):
    monkeypatch.setattr(environment.os, "getloadavg", lambda: (5.5, 3.0, 1.0))
    sample = environment.gpu_sample(CPU)
    assert sample["loadavg"] == 5.5 and sample["cores"] >= 1
    assert 1 <= sample["threads"] <= sample["cores"]
    assert sample["busy_s"] > 0 and sample["own_s"] > 0 and sample["t"] > 0  # Linux counts CPU time
    assert environment.contamination([sample])[0].startswith("other processes share the CPU (load 6 on ")


def _fake_timings(monkeypatch, tflops_seq, n=64):
    """``timing.measure`` returning the times that give ``tflops_seq`` for an n^3 matmul."""
    times = iter([2 * n ** 3 / (t * 1e12) * 1e3 for t in tflops_seq])
    monkeypatch.setattr(metrics.timing, "measure",
                        lambda fn, dev: timing.Timing(next(times), 0.0, 20, "host"))


def test_an_unstable_peak_is_measured_again_until_it_repeats(monkeypatch):
    """Issue 29: the CPU's peak moved 8x between runs (0.0168, 0.123, 0.135 TFLOP/s)."""
    _fake_timings(monkeypatch, [0.0168, 0.123, 0.135, 0.131])
    peak = metrics.measure_matrix_peak(CPU, n=64, dtypes=(torch.float32,))
    assert peak.stable and len(peak.tries) == 4
    assert peak.tflops == pytest.approx(0.135)
    assert peak.timing.median_ms == pytest.approx(2 * 64 ** 3 / 0.135e12 * 1e3)


def test_a_peak_that_never_repeats_is_marked(monkeypatch):
    _fake_timings(monkeypatch, [0.01, 0.02, 0.04, 0.08, 0.16, 0.32])
    peak = metrics.measure_matrix_peak(CPU, n=64, dtypes=(torch.float32,))
    assert not peak.stable and len(peak.tries) == metrics.PEAK_TRIES
    assert peak.describe() == ("matrix peak 0.32 TFLOP/s (float32 64^3), UNSTABLE: 6 tries from 0.01 to "
                               "0.32 TFLOP/s; every % of peak is in doubt")


def test_a_steady_peak_takes_two_tries(monkeypatch):
    _fake_timings(monkeypatch, [1.0, 0.97])
    peak = metrics.measure_matrix_peak(CPU, n=64, dtypes=(torch.float32,))
    assert peak.stable and peak.tries == pytest.approx((1.0, 0.97)) and peak.describe().endswith("64^3)")


def _store(folder, machine, commit, date_ms):
    (folder / machine).mkdir(parents=True, exist_ok=True)
    (folder / machine / "machine.json").write_text("{}")
    (folder / machine / f"{commit[:8]}-existing-py3.12.json").write_text(
        json.dumps({"commit_hash": commit, "date": date_ms}))


def test_the_compare_hint_names_the_newest_stored_commits_by_date(tmp_path):
    """Issue 29: the hint said BASE=HEAD~1 (no results there) and listed commits in hash order."""
    res = tmp_path / "results"
    _store(res, "h200", "a" * 40, 1_796_000_000_000)
    _store(res, "h200", "b" * 40, 1_796_100_000_000)
    _store(res, "h200", "0" * 40, 1_796_200_000_000)
    assert [c[:1] for c, _ in results.stored_commits(res, "h200")] == ["0", "b", "a"]
    hint = results.compare_hint(res, "h200")
    assert hint.startswith("the newest commits stored for h200: 00000000 (2026-")
    assert hint.endswith(f"e.g. fusebench compare --machine h200 --results {res} --base bbbbbbbb "
                         "--head 00000000")
    other = results.compare_hint(res, "cpu-x86_64")
    assert other.startswith("cpu-x86_64 has no results stored (make bench stores this machine's); "
                            "another machine's newest two: fusebench compare --machine h200")
    with pytest.raises(UsageError, match="no results for commit cccccccc on machine 'h200' in .*; the new"):
        results.Reader(res).commit("h200", "c" * 40)


def test_the_committed_results_hint_is_a_make_command():
    # the checkout's own results/ (the hint says `make compare` only for it); h200's files are the
    # committed ones, whatever a CPU run left beside them
    hint = results.compare_hint(PROJECT_ROOT / "results", "h200")
    commits = results.stored_commits(PROJECT_ROOT / "results", "h200")
    base, head = commits[1][0][:8], commits[0][0][:8]
    assert hint.endswith(f"e.g. make compare MACHINE=h200 BASE={base} HEAD={head}")


def test_help_needs_no_torch_and_is_fast():
    """Issue 29: ``python -m fusebench --help`` failed without torch; the installed one took 10.9 s."""
    block = ("import sys; sys.modules['torch'] = None; import runpy; "
             "runpy.run_module('fusebench', run_name='__main__')")
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", block, "--help"], cwd=PROJECT_ROOT, capture_output=True,
                         text=True)
    took = time.perf_counter() - start
    assert out.returncode == 0, out.stderr
    assert "bench     Measure every case on this machine" in out.stdout and "compare" in out.stdout
    assert took < 5.0
    out = subprocess.run([sys.executable, "-c", block, "bench", "--help"], cwd=PROJECT_ROOT,
                         capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.startswith("usage: fusebench bench"), out.stderr  # issue 43
    out = subprocess.run([sys.executable, "-c", block, "bench", "--dry-run"], cwd=PROJECT_ROOT,
                         capture_output=True, text=True)
    assert out.returncode == 2
    assert out.stderr.strip() == (f"bench: error: bench needs torch, which {sys.executable} does not have: "
                                  "make venv creates .venv from requirements.lock, then run "
                                  ".venv/bin/python -m fusebench bench (the Makefile uses .venv)")


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU's skips")
def test_the_skips_list_predicts_are_the_ones_the_sweep_records(monkeypatch):
    """fusebench list says which cases bench will skip and why, without building any: the same
    reason the sweep records for each of them."""
    from fusebench.commands.bench import plan
    from fusebench.measure import sweep
    from fusebench.ops import OPS
    from fusebench.registry import BACKENDS, PRECISIONS

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    planned = plan(list(OPS.values()), "cpu-quick", list(BACKENDS), list(PRECISIONS), CPU)
    skipped = {(op.name, b, d): (op, s, why) for op, b, s, d, why in planned if why}
    assert {b for _, b, _ in skipped} >= {"triton", "cuda", "liger", "quack", "flaggems"}
    for (_, backend, dtype), (op, shape, why) in skipped.items():
        built = sweep.build_and_gate(op, backend, shape, dtype, CPU)
        assert (built.status, built.reason) == ("skipped", why)
    assert ("gelu", "eager", "float32") not in skipped and ("matmul", "torch", "tf32") in skipped


def test_a_shared_cpu_names_a_few_contaminated_cases_per_round_and_counts_the_rest(monkeypatch):
    """Every case of a run on a loaded CPU is contaminated: three named per round, then a count
    (the run's 240 warning lines of the CPU grid were noise)."""
    import io

    from fusebench.measure import sweep
    from fusebench.ops import OPS

    monkeypatch.setattr(environment.os, "getloadavg", lambda: (9.0, 9.0, 9.0))
    monkeypatch.setattr(environment, "_busy_s", lambda: None)  # a host that counts no CPU time
    gelu = OPS["gelu"]
    todo = [(gelu, b, (64 * (i + 1),), "float32") for i in range(3) for b in ("eager", "torch")]
    out = io.StringIO()
    result = sweep.measure(enumerate(todo), len(todo), "cpu", CPU, rounds=2, peak=False, out=out)
    assert all(r.contaminated and r.contamination[0].startswith("other processes share the CPU (load 9 ")
               for r in result.records)
    for r in (1, 2):
        said = [w for w in result.warnings if w.startswith(f"round {r}: ")]
        assert len(said) == sweep.LOUD_PER_ROUND + 1
        assert said[-1] == (f"round {r}: 3 more case(s) contaminated (each case's reasons are in the record "
                            "and the summary)")
    from fusebench.report import summary

    assert "contaminated cases: 6" in "\n".join(summary.run_lines(result))


def test_one_reason_for_many_contaminated_cases_is_said_once():
    from fusebench.record import Record, Sweep
    from fusebench.report import summary

    why = "other processes share the CPU (load 13 on 2 cores, 2 thread(s) ours)"
    recs = [Record("gelu", "eager", str(n), "float32", wall_time_ms=1.0, contamination=[why])
            for n in range(7)]
    line = next(ln for ln in summary.run_lines(Sweep({}, 1.0, "cpu", recs))
                if ln.startswith("contaminated cases"))
    assert line == ("contaminated cases: 7: gelu/eager/0/float32, gelu/eager/1/float32, "
                    "gelu/eager/2/float32, gelu/eager/3/float32, gelu/eager/4/float32 and 2 more "
                    f"({why})")
