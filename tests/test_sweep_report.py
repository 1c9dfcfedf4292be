import pytest
import torch

from fusebench.measure import sweep, timing
from fusebench.ops import get_op
from fusebench.record import Record, Sweep
from fusebench.registry import Op
from fusebench.report import summary

CPU = torch.device("cpu")


def test_ok_case_has_every_cpu_figure():
    rec = sweep.run_case(get_op("gelu"), "torch", (4096,), "float32", CPU, 10.0, None)
    assert rec.status == "ok", rec.reason
    assert rec.bytes_moved == 2 * 4096 * 4
    assert rec.clock == "host" and rec.wall_time_ms > 0
    assert rec.device_time_ms is None and rec.launches is None  # no GPU figure on the CPU
    assert rec.bandwidth_gbps == rec.bytes_moved / (rec.wall_time_ms * 1e-3) / 1e9
    assert rec.pct_of_ceiling == 100 * rec.bandwidth_gbps / 10.0


@pytest.mark.gpu
def test_a_gpu_case_has_every_figure():
    op = get_op("gelu")
    dev = torch.device("cuda")
    rec = sweep.run_case(op, "triton", (1 << 24,), "float32", dev, 4000.0, timing.l2_flush_buffer(dev))
    assert rec.status == "ok", rec.reason
    assert rec.clock == "cuda-events" and rec.launches == 1
    assert 0 < rec.device_time_ms <= rec.device_time_cold_ms * 1.5
    assert rec.wall_time_ms >= rec.device_time_ms * 0.5
    assert rec.clocks.get("sm_clock_mhz", 0) > 0


@pytest.mark.gpu
def test_a_gpu_case_records_its_kernels_and_rounds():
    dev = torch.device("cuda")
    rec = sweep.run_case(get_op("softmax"), "compile", (4096, 4096), "float16", dev, 4000.0,
                         timing.l2_flush_buffer(dev), rounds=3)
    assert rec.status == "ok", rec.reason
    assert len(rec.rounds) == 3 and rec.kernel_by_timing and rec.launches == 1
    assert len(rec.kernels) == 1 and "grid=" in rec.kernels[0] and "block=" in rec.kernels[0]
    assert len(rec.kernel_id) == 12 and rec.hot_calls >= 1
    assert rec.contamination == [] and 0 <= rec.noise < 0.2
    # Cold repeats fill the round's budget with each repeat's flush counted in: fewer than hot's.
    assert all(sweep.MIN_ROUND_SAMPLES <= r["cold_repeats"] <= r["repeats"] for r in rec.rounds)


def test_triton_without_gpu_or_interpreter_is_skipped(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    rec = sweep.run_case(get_op("softmax"), "triton", (4, 8), "float32", CPU, 10.0, None)
    assert rec.status == "skipped" and "needs a CUDA GPU" in rec.reason


def test_a_failing_backend_is_recorded_and_not_timed():
    op = Op("toy", reference=lambda x: x.double() * 2, grids={"default": [(8,)]})
    op.backend("eager")(lambda x: (lambda: x * 3))
    op.backend("torch")(lambda x: (lambda: 1 / 0))
    wrong = sweep.run_case(op, "eager", (8,), "float32", CPU, 10.0, None)
    assert wrong.status == "failed" and "relative error" in wrong.reason
    assert wrong.wall_time_ms is None
    broken = sweep.run_case(op, "torch", (8,), "float32", CPU, 10.0, None)
    assert broken.status == "failed" and "ZeroDivisionError" in broken.reason


def test_sweep_round_trips_through_json(tmp_path):
    rec = Record("gelu", "eager", "1024", "float32", bandwidth_gbps=1.5)
    s = Sweep({"device": "cpu"}, 20.0, "cpu", [rec])
    s.save(tmp_path / "s.json")
    back = Sweep.load(tmp_path / "s.json")
    assert back.records == [rec] and back.ceiling_gbps == 20.0


def test_cases_follow_the_grid_and_selection():
    op = get_op("softmax")
    todo = sweep.cases([op], "quick", ["eager", "triton"], ["float32"])
    assert [(c[1], c[2]) for c in todo] == [("eager", (16384, 1024)), ("triton", (16384, 1024)),
                                            ("eager", (1, 1048576)), ("triton", (1, 1048576))]


def test_progress_line_and_summary():
    ok = Record("gelu", "torch", "1024", "float32", device_time_ms=0.002, noise=0.01,
                bandwidth_gbps=4.1, pct_of_ceiling=50.0, launches=1)
    eager = Record("gelu", "eager", "1024", "float32", device_time_ms=0.02, noise=0.01,
                   bandwidth_gbps=0.41, pct_of_ceiling=5.0, launches=9)
    skipped = Record("gelu", "cuda", "1024", "float32", status="skipped", reason="needs a CUDA GPU")
    line = sweep.progress_line(3, 40, ok)
    assert line.startswith("[ 3/40] gelu") and "4.1 GB/s" in line and "1 launch" in line
    assert "launches" not in line
    assert sweep.progress_line(4, 40, skipped).endswith("skipped: needs a CUDA GPU")
    table = summary.summary(Sweep({"device": "cuda", "gpu": "NVIDIA H200"}, 8.2, "default",
                                 [eager, ok, skipped]))
    assert "| 1024 | 0.410 5.0% 1.0x | 4.10 50% 10.0x |" in table  # not "0 5%" (issue 13)
    assert "cuda" not in table.splitlines()[4]  # skipped-only backends get no column


def test_a_contamination_reason_met_in_several_rounds_is_said_once():
    shared = [f"other processes share the CPU (load {n} on 2 cores, 2 thread(s) ours)" for n in (3, 4, 3)]
    assert sweep.contamination_text(shared + ["throttled: sw_power_cap"]) == (
        "other processes share the CPU (load 3 on 2 cores, 2 thread(s) ours) in 3 rounds; "
        "throttled: sw_power_cap")
    assert sweep.contamination_text(shared[:1]) == shared[0]


def test_a_run_prints_no_line_for_an_op_without_such_a_backend():
    """fusebench list leaves those out; the run did print each (120 lines on a CPU host)."""
    import io

    out = io.StringIO()
    run = sweep.run([get_op("gelu")], quick=True, backend_names=["eager", "quack"], dtype_names=["float32"],
                    rounds=1, out=out)
    assert [(r.backend, r.status) for r in run.records] == [("eager", "ok"), ("quack", "skipped")]
    text = out.getvalue()
    assert "gelu     eager" in text and "quack" not in text



def test_a_run_that_built_nothing_times_no_round(monkeypatch):
    """A trial's `make bench OP=gelu BACKENDS=triton` on a CPU host timed three empty rounds
    ("round 1/3: 0 cases ... copy ceiling") before saying nothing was measured."""
    import io

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    out = io.StringIO()
    run = sweep.run([get_op("gelu")], quick=True, backend_names=["triton"], dtype_names=["float32"],
                    rounds=3, out=out)
    assert run.records and {r.status for r in run.records} == {"skipped"}
    text = out.getvalue()
    assert "built and gated 0 of" in text and "round 1/3" not in text
    assert len(run.ceilings_gbps) == 1 and run.ceiling_gbps == run.ceilings_gbps[0] > 0
    assert not [k for k in run.phases if k.startswith("round")]


@pytest.mark.slow
def test_compile_time_is_recorded_apart_from_run_time():
    rec = sweep.run_case(get_op("gelu"), "compile", (256,), "float32", CPU, 10.0, None)
    assert rec.status == "ok", rec.reason
    assert rec.compile_s is not None and rec.compile_s > rec.wall_time_ms * 1e-3


def test_batch_sizes_come_from_the_smallest_estimate():
    """One estimate stalled by the host (33 us for a 3.3 us call with its event pair) must not set
    the batch: the hot and graph batches of 0.2 ms would be 6 calls instead of 61."""
    seen = iter([0.033, 0.0033, 0.0034])
    assert sweep.batch_estimate_ms(None, estimate=lambda: next(seen)) == 0.0033
    assert timing.graph_calls(0.0033) == 61 and timing.graph_calls(0.033) == 7


def test_the_record_knows_the_batches_the_timing_sizes():
    """record.BATCHES (read by the gate, which loads no torch) states timing's batch targets."""
    from fusebench import record
    assert record.BATCHES == {"device_time_ms": ("hot_calls", timing.HOT_BATCH_MS, timing.HOT_MAX_CALLS),
                              "device_time_graph_ms": ("graph_calls", timing.GRAPH_BATCH_MS,
                                                       timing.GRAPH_CALLS[1])}


def test_a_round_says_where_its_time_went():
    """``spent`` gains each part of a round; on the CPU: the warm-up, the host clock's repeats and
    the readings around them (no device modes), together no longer than the round."""
    import time

    rec = Record("gelu", "torch", "4096", "float32")
    x = torch.ones(4096)
    spent: dict[str, float] = {}
    start = time.perf_counter()
    sweep.time_round(rec, lambda: x * 2, CPU, None, budget_s=0.005, spent=spent)
    sweep.time_round(rec, lambda: x * 2, CPU, None, budget_s=0.005, spent=spent)
    took = time.perf_counter() - start
    assert set(spent) == {"warm-up", "wall", "readings"} <= set(sweep.ROUND_PARTS)
    assert all(v > 0 for v in spent.values()) and sum(spent.values()) <= took
    assert len(rec.rounds) == 2 and "cold_repeats" not in rec.rounds[0]


def test_ready_yields_the_built_cases_only():
    todo = [(get_op("gelu"), b, (4096,), "float32") for b in ("torch", "cuda", "eager")]
    got = [(rec.backend, rec.status, rec.shape) for rec, fn in sweep.ready(todo, CPU) if fn() is not None]
    assert got == [("torch", "ok", "4096"), ("eager", "ok", "4096")]  # cuda: skipped on the CPU
