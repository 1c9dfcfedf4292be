"""All GPUs of a host (``fusebench.measure.workers``): the GPU choice, and the workers emulated on the CPU.

The emulation spawns real worker processes on the CPU, each pinned (``CUDA_VISIBLE_DEVICES``) to a
fake GPU whose index, serial and model come from ``tests/workerops.py``.
"""

import dataclasses
import subprocess

import pytest
import workerops

from fusebench.errors import UsageError
from fusebench.measure import sweep, workers
from fusebench.paths import PROJECT_ROOT
from fusebench.record import Sweep
from fusebench.storage import runrecord

SLOTS = [workers.Slot(0, "0"), workers.Slot(1, "1")]


def _job(ops=("toy",), identify=workerops.identify, rounds=2, backends=("eager", "torch")):
    return workers.Job("workerops:ops", ops, backends, ("float32",), "cpu", rounds, "cpu", identify)


def test_gpus_all_or_a_list_each_gpu_once():
    assert workers.parse_gpus("all", ["0", "1"]) == SLOTS
    assert workers.parse_gpus("1", ["0", "1"]) == [workers.Slot(0, "1")]
    # indices into what this process may use: a Slurm allocation's CUDA_VISIBLE_DEVICES=4,6
    assert workers.parse_gpus("1,0", ["4", "6"]) == [workers.Slot(0, "6"), workers.Slot(1, "4")]
    for text, why in [("0,0", "GPU 0 named twice"), ("2", "no GPU 2 here"), ("one", "give all or"),
                      (",", "give all or")]:
        with pytest.raises(UsageError, match=why):
            workers.parse_gpus(text, ["0", "1"])
    with pytest.raises(UsageError, match="no GPU visible"):
        workers.parse_gpus("all", [])


def test_visible_gpus_follow_cuda_visible_devices(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-aaa, GPU-bbb")
    assert workers.visible_gpus() == ["GPU-aaa", "GPU-bbb"]


@pytest.fixture(scope="module")
def two_workers():
    """One emulated run of two workers over the toy op (6 cases, 2 rounds)."""
    return workers.run(_job(), SLOTS)


@pytest.mark.slow
def test_each_case_timed_by_one_worker_in_all_rounds(two_workers):
    assert two_workers.failures == [] and list(two_workers.machines) == ["fake-h200"]
    result = two_workers.machines["fake-h200"]
    keys = [r.key for r in result.records]
    expected = [sweep.new_record(*c).key for c in _job().cases()]
    assert keys == expected  # every case once, in grid order, none measured twice
    for rec in result.records:
        assert rec.status == "ok", rec.reason
        assert len(rec.rounds) == 2 and rec.wall_time_ms > 0
        assert rec.gpu_index in (0, 1) and rec.gpu_serial == f"SN{rec.gpu_index}"
    gpus = result.environment["gpus"]
    # two workers, each its own GPU, each its own copy ceiling per round
    assert sorted(g["worker"]["visible"] for g in gpus) == ["0", "1"]
    assert sorted(g["gpu_index"] for g in gpus) == [0, 1]
    assert all(len(g["ceilings_gbps"]) == 2 and min(g["ceilings_gbps"]) > 0 for g in gpus)
    assert sum(g["cases"] for g in gpus) == 6
    for g in gpus:  # a worker's records are its GPU's
        assert sum(r.gpu_index == g["gpu_index"] for r in result.records) == g["cases"]
    assert "gpu_index" not in result.environment  # per GPU, not for the machine
    assert result.rounds == 2 and len(result.ceilings_gbps) == 4
    assert {"build, gate, profile (all GPUs)", "rounds (all GPUs)"} <= set(result.phases)


@pytest.mark.slow
def test_the_merged_record_keeps_gpu_index_and_serial(two_workers, tmp_path):
    result = two_workers.machines["fake-h200"]
    path = runrecord.save(result, tmp_path, "fake-h200", "a" * 40)
    back = Sweep.load(path)
    assert [(r.gpu_index, r.gpu_serial) for r in back.records] == \
        [(r.gpu_index, r.gpu_serial) for r in result.records]
    assert len(back.environment["gpus"]) == 2
    assert workers.gpu_lines(back)[0].startswith("GPU ")


@pytest.mark.slow
def test_gpus_of_two_models_are_two_machines():
    outcome = workers.run(_job(identify=workerops.identify_two_models), SLOTS)
    assert sorted(outcome.machines) == ["fake-b200", "fake-h200"]
    h200, b200 = outcome.machines["fake-h200"], outcome.machines["fake-b200"]
    assert {r.gpu_index for r in h200.records} <= {0} and {r.gpu_index for r in b200.records} <= {1}
    assert len(h200.records) + len(b200.records) == 6
    assert [g["gpu_index"] for g in h200.environment["gpus"]] == [0]
    assert b200.environment["gpu"] == "NVIDIA Fake B200"


@pytest.mark.slow
def test_a_dead_worker_is_reported_and_the_rest_stored(tmp_path, monkeypatch):
    monkeypatch.setenv(workerops.DIR_ENV, str(tmp_path))
    outcome = workers.run(_job(ops=("fragile",), backends=("eager",)), SLOTS)
    [line] = outcome.failures
    assert "worker of GPU 1 failed: died (exit code 3)" in line and "1 case(s)" in line
    result = outcome.machines["fake-h200"]
    assert len(result.records) == 3
    lost = [r for r in result.records if r.status == "failed"]
    assert len(lost) == 1 and lost[0].reason == "its worker on GPU 1 failed: died (exit code 3)"
    ok = [r for r in result.records if r.status == "ok"]
    assert len(ok) == 2 and {r.gpu_index for r in ok} == {0} and all(len(r.rounds) == 2 for r in ok)
    path = runrecord.save(result, tmp_path / "records", "fake-h200", "b" * 40)
    assert [r.status for r in Sweep.load(path).records].count("ok") == 2


@pytest.mark.slow
def test_a_worker_dying_while_the_others_wait_between_the_phases_does_not_hang_them(tmp_path, monkeypatch):
    # GPU 0 builds its cases and waits at the barrier; GPU 1 dies after that, never reaching it
    import signal

    def hung(*_):
        raise TimeoutError("workers.run hung: the surviving worker waits at the barrier")

    monkeypatch.setenv(workerops.DIR_ENV, str(tmp_path))
    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(150)
    try:
        outcome = workers.run(_job(ops=("late",), backends=("eager",)), SLOTS)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    [line] = outcome.failures
    assert "worker of GPU 1 failed: died (exit code 3)" in line
    ok = [r for r in outcome.machines["fake-h200"].records if r.status == "ok"]
    assert len(ok) == 2 and {r.gpu_index for r in ok} == {0}


def test_deal_puts_the_costliest_first_on_the_least_loaded_worker():
    assert workers.deal([5, 1, 1, 1, 1, 1], 2) == [[0], [1, 2, 3, 4, 5]]  # 5 and 5
    costs = [0.3, 7.0, 2.5, 2.5, 1.0, 4.0, 0.2, 3.3, 0.9, 1.1]
    shares = workers.deal(costs, 3)
    assert sorted(i for s in shares for i in s) == list(range(10))  # every case once
    loads = [sum(costs[i] for i in s) for s in shares]
    assert sorted(loads) == pytest.approx([7.5, 7.5, 7.8])  # the best: 22.8 / 3 = 7.6 each
    assert workers.deal([1.0], 2) == [[0], []]


@pytest.mark.slow
def test_cases_dealt_by_a_stand_in_cost_model_not_by_who_builds_first():
    """A stand-in cost model (no two-GPU machine here): the first toy case costs as much as the
    five others together, so one worker gets it alone and the other the five, whatever order
    they would have built in (a shared queue gives each about three)."""
    costs = (9.0, 1.0, 1.0, 1.0, 1.0, 5.0)
    outcome = workers.run(dataclasses.replace(_job(), costs=costs), SLOTS)
    assert outcome.failures == []
    result = outcome.machines["fake-h200"]
    by_gpu = {g["gpu_index"]: g["cases"] for g in result.environment["gpus"]}
    assert by_gpu == {0: 1, 1: 5}
    first, *rest = result.records
    assert first.gpu_index == 0 and {r.gpu_index for r in rest} == {1}
    assert all(r.status == "ok" and len(r.rounds) == 2 for r in result.records)


def test_costs_from_an_h200_record_balance_two_gpus():
    """The committed 485-case H200 run's own figures as the costs: dealt to two GPUs, the two
    loads are within 1 %; by count (every other case) they are not."""
    from fusebench.ops import OPS

    record = Sweep.load(PROJECT_ROOT / "records" / "h200" / "5a030682.json.xz")
    ops = sorted({r.op for r in record.records}, key=list(OPS).index)
    job = workers.Job("fusebench.ops:configured", tuple(ops),
                      tuple(sorted({r.backend for r in record.records})),
                      tuple(sorted({r.dtype for r in record.records})), record.grid, record.rounds)
    cases = job.cases()
    costs = workers.costs_from_record(cases, record, record.rounds)
    timed = {r.key for r in record.records if r.status == "ok"}
    measured = [c for c, case in zip(costs, cases) if sweep.new_record(*case).key in timed]
    assert len(measured) == 485
    loads = [sum(costs[i] for i in s) for s in workers.deal(costs, 2)]
    assert abs(loads[0] - loads[1]) / max(loads) < 0.01
    by_count = [sum(costs[0::2]), sum(costs[1::2])]
    assert abs(by_count[0] - by_count[1]) / max(by_count) > 0.05
    # the model's round time for the whole run is the record's, within its per-case overhead
    per_round = (sum(measured) - sum(r.compile_s or workers.BUILD_S.get(r.backend, 0.05)
                                     for r in record.records if r.status == "ok")) / record.rounds
    assert 0.6 < per_round / record.phases["round 1"] < 1.4


def test_an_estimate_without_a_record_grows_with_the_bytes_and_the_build():
    from fusebench.ops import OPS

    gelu = OPS["gelu"]
    small, large = (gelu, "eager", (1024,), "float32"), (gelu, "eager", (16384, 16384), "float32")
    # the timing budget bounds both (as the records show: about the same time per case) ...
    assert workers.estimated_cost(large, 3) == workers.estimated_cost(small, 3)
    # ... until a kernel is so long that its least repeats take longer
    huge = (gelu, "eager", (65536, 65536), "float32")
    assert workers.estimated_cost(huge, 3) > 2 * workers.estimated_cost(small, 3)
    assert workers.estimated_cost((gelu, "compile", (1024,), "float32"), 3) > workers.estimated_cost(small, 3)
    assert workers.costs_from_record([small], None, 3) == (workers.estimated_cost(small, 3),)


def _state(machine, gpu, records):
    env = {"gpu": gpu, "gpu_index": records[0].gpu_index, "worker": {"visible": str(records[0].gpu_index)}}
    result = Sweep(env, 100.0, "cpu", records, rounds=2, ceilings_gbps=[100.0, 100.0])
    return workers._State(workers.Slot(0, "0"), None, None, machine, gpu, [], True, result)


def test_one_machine_name_for_two_models_is_refused():
    job = _job()
    a, b = [sweep.new_record(*c) for c in job.cases()[:2]]
    a.gpu_index, b.gpu_index = 0, 1
    states = [_state("box", "NVIDIA H200", [a]), _state("box", "NVIDIA B200", [b])]
    with pytest.raises(UsageError, match="machine box would hold GPUs of 2 models"):
        workers.merge(job, states, {})


def _make_n(*args):
    out = subprocess.run(["make", "--no-print-directory", "-n", "PYTHON=py", "DEPS=", *args],
                         cwd=PROJECT_ROOT,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_make_bench_gpus():
    assert "py -m fusebench bench --ops gelu\n" in _make_n("bench", "LOCAL=1", "OP=gelu")  # one GPU
    assert "fusebench bench --gpus all\n" in _make_n("bench", "LOCAL=1", "GPUS=all")
    assert "fusebench bench --gpus 0,1 --results '/tmp/aa'\n" in _make_n("bench", "LOCAL=1", "GPUS=0,1",
                                                                      "RESULTS=/tmp/aa")
    image = _make_n("bench", "CONTAINER=docker", "ENGINE_OK=1", "GPUS=0,1", "IMAGE_TAG=t")
    assert "--gpus '\"device=0,1\"'" in image and image.rstrip().endswith("fusebench:t --gpus all")
    podman = _make_n("bench", "CONTAINER=podman", "ENGINE_OK=1", "GPUS=1", "ROOTLESS=", "IMAGE_TAG=t")
    assert "--device nvidia.com/gpu=1 " in podman
    plain = _make_n("bench", "CONTAINER=docker", "ENGINE_OK=1", "IMAGE_TAG=t")
    assert "--gpus all " in plain and plain.rstrip().endswith("fusebench:t")


@pytest.mark.gpu
def test_two_real_gpus_quick_gelu():
    """On a host with 2 GPUs or more: GPU 0 and 1 each time some cases, each case on one GPU."""
    import torch

    if torch.cuda.device_count() < 2:
        pytest.skip("needs 2 GPUs")
    job = workers.Job("fusebench.ops:configured", ("gelu",), ("eager", "torch"), ("float32",), "quick", 2)
    outcome = workers.run(job, workers.parse_gpus("0,1", workers.visible_gpus()))
    assert outcome.failures == []
    [result] = outcome.machines.values()
    assert all(r.status == "ok" and len(r.rounds) == 2 for r in result.records)
    assert {r.gpu_index for r in result.records} <= {0, 1}
    assert all(r.gpu_serial is not None or r.gpu_index is not None for r in result.records)
    assert len({g["gpu_uuid"] for g in result.environment["gpus"]}) == 2
