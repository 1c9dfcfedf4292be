"""Run records, contamination readings (and another process on the GPU), kernel identities and
launch counts, and the results the site will not draw."""

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from fusebench.measure import environment, launches
from fusebench.ops import get_op
from fusebench.paths import PROJECT_ROOT
from fusebench.record import Record, Sweep, where
from fusebench.report import summary
from fusebench.site import drawable
from fusebench.storage import runrecord


def test_records_live_beside_their_results_folder():
    assert runrecord.records_dir(Path("/x/results")) == Path("/x/records")
    assert runrecord.records_dir(Path("/x/.asv/quick-results")) == Path("/x/.asv/quick-records")
    assert runrecord.records_dir(Path("/x/out")) == Path("/x/out-records")


def test_a_run_of_some_ops_keeps_the_other_ops_records(tmp_path):
    commit = "a" * 40
    first = Sweep({"git_commit": commit}, 4000.0, "default", [
        Record("gelu", "torch", "1024", "float32", device_time_ms=1.0),
        Record("softmax", "torch", "4x4", "float32", device_time_ms=2.0)], rounds=3)
    runrecord.save(first, tmp_path, "h200", commit)
    second = Sweep({"git_commit": commit}, 4100.0, "default", [
        Record("softmax", "torch", "4x4", "float32", device_time_ms=3.0)], rounds=3)
    path = runrecord.save(second, tmp_path, "h200", commit)
    assert path == tmp_path / "h200" / "aaaaaaaa.json.xz"
    back = runrecord.load(tmp_path, "h200", commit)
    assert {r.key: r.device_time_ms for r in back.records} == {
        ("gelu", "torch", "1024", "float32"): 1.0, ("softmax", "torch", "4x4", "float32"): 3.0}
    assert back.ceiling_gbps == 4100.0
    assert runrecord.load(tmp_path, "h200", "b" * 40) is None


def test_an_unreadable_record_is_named(tmp_path):
    from fusebench.errors import UsageError

    (tmp_path / "h200").mkdir()
    (tmp_path / "h200" / "cccccccc.json").write_text("{trunc")
    with pytest.raises(UsageError, match="cannot read run record .*cccccccc.json"):
        runrecord.load(tmp_path, "h200", "c" * 40)


def test_summary_lines_show_rounds_ceilings_phases_and_contamination():
    dirty = Record("softmax", "torch", "4x4", "bfloat16", device_time_ms=0.03, noise=0.01,
                   contamination=["another process on the GPU: pid 9 (100 MiB)"])
    noisy = Record("gelu", "eager", "1024", "float32", device_time_ms=0.01, noise=0.5)
    s = Sweep({"gpu": "NVIDIA H200", "git_commit": "d" * 40}, 4200.0, "quick", [dirty, noisy], rounds=3,
              ceilings_gbps=[4190.0, 4200.0, 4210.0], phases={"build": 10.0, "round 1": 5.0})
    text = "\n".join(summary.run_lines(s))
    assert "2 cases (2 timed) on NVIDIA H200, quick grid, 3 rounds" in text
    assert "copy ceiling per round: 4190, 4200, 4210 GB/s (median 4200)" in text
    assert "phases: build 10 s, round 1 5 s" in text
    assert "contaminated cases: 1: softmax/torch/4x4/bfloat16 (another process on the GPU: pid 9" in text
    assert "noisier than 10 % between rounds: 1: gelu/eager/1024/float32 ±50%" in text
    noisy.noise = 88.57  # issue 29: printed as ±8857%
    assert "gelu/eager/1024/float32 >100%" in "\n".join(summary.run_lines(s))


def test_contamination_from_nvml_readings():
    clean = {"sm_clock_mhz": 1980, "clock_event_reasons": ["gpu_idle"], "other_processes": []}
    assert environment.contamination([clean, clean]) == []
    hot = {"clock_event_reasons": ["sw_power_cap", "sync_boost"]}
    shared = {"other_processes": [{"pid": 42, "mem_mib": 2048}]}
    assert environment.contamination([clean, hot, shared, hot]) == [
        "throttled: sw_power_cap", "another process on the GPU: pid 42 (2048 MiB)"]
    assert set(environment.THROTTLE_REASONS) <= set(environment.CLOCK_EVENT_REASONS.values())


def test_kernel_identity_from_a_profiler_trace():
    trace = {"traceEvents": [
        {"cat": "kernel", "name": "triton_per_fused_softmax_0", "ts": 20,
         "args": {"grid": [4096, 1, 1], "block": [256, 1, 1], "registers per thread": 32,
                  "shared memory": 0}},
        {"cat": "cpu_op", "name": "aten::softmax", "ts": 1},
        {"cat": "kernel", "name": "x" * 500, "ts": 10, "args": {"grid": [1, 1, 1]}},
    ]}
    full, short = launches.kernels_from_trace(trace)
    assert short[1] == "triton_per_fused_softmax_0 grid=[4096, 1, 1] block=[256, 1, 1] regs=32 smem=0"
    assert short[0] == "x" * launches.NAME_CHARS + " grid=[1, 1, 1]" and len(full[0]) > len(short[0])
    other = json.loads(json.dumps(trace))
    other["traceEvents"][0]["args"]["block"] = [128, 1, 1]  # another config (num_warps) of the kernel
    assert launches.identity(full) != launches.identity(launches.kernels_from_trace(other)[0])
    assert launches.identity(full) == launches.identity(list(full)) and launches.identity([]) is None


@pytest.mark.gpu
@pytest.mark.parametrize("op, backend, expected", [
    ("gelu", "eager", 9), ("gelu", "torch", 1), ("gelu", "triton", 1), ("gelu", "cuda", 1),
    ("softmax", "eager", 5), ("softmax", "torch", 1), ("softmax", "compile", 1),
])
def test_launches_per_call(op, backend, expected):
    o = get_op(op)
    x = torch.randn(4096, 512, device="cuda")
    fn = o.backends[backend].factory(x)
    fn()
    assert launches.launches_per_call(fn, torch.device("cuda")) == expected


@pytest.mark.gpu
def test_another_process_on_the_gpu_is_seen_and_contaminates():
    """A matmul loop in another process (probes/neighbour.py) shows in NVML's process list."""
    dev = torch.device("cuda")
    torch.empty(1, device=dev)  # this process's context
    assert environment.other_processes(dev) == []
    neighbour = subprocess.Popen([sys.executable, str(PROJECT_ROOT / "scripts" / "neighbour.py"), "--seconds",
                                  "60"],
                                 stdout=subprocess.PIPE, text=True)
    try:
        line = neighbour.stdout.readline()
        assert line.startswith("neighbour: pid"), line
        time.sleep(2)
        sample = environment.gpu_sample(dev)
        assert sample["sm_clock_mhz"] > 0 and len(sample["other_processes"]) == 1
        # (a shared host may also report a power cap: the other process must be among the reasons)
        reasons = environment.contamination([sample])
        assert any(r.startswith("another process on the GPU: pid") for r in reasons), reasons
    finally:
        neighbour.kill()
        neighbour.wait()


def git(repo: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin"}
    return subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True,
                          check=True).stdout.strip()


def test_publish_names_a_result_it_will_not_draw(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "commit", "-q", "--allow-empty", "-m", "a")
    git(repo, "checkout", "-q", "-b", "side")
    git(repo, "commit", "-q", "--allow-empty", "-m", "on a branch")
    side = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "main")
    git(repo, "commit", "-q", "--allow-empty", "-m", "b")
    git(repo, "merge", "-q", "--no-ff", "-m", "merge", "side")
    drawn = git(repo, "rev-parse", "HEAD")
    results = tmp_path / "results"
    (results / "h200").mkdir(parents=True)
    (results / "h200" / "machine.json").write_text("{}")
    for commit in (side, drawn, "f" * 40):
        (results / "h200" / f"{commit[:8]}-existing.json").write_text(json.dumps({"commit_hash": commit}))
    (results / "h200" / "00000000-existing.json").write_text("{trunc")
    items = drawable.undrawn(results, root=repo)
    by_commit = {i.commit: i for i in items}
    assert set(by_commit) == {side, "f" * 40}  # the unreadable file is the readers' to name
    assert "off main's first-parent line" in by_commit[side].reason
    assert "not in this repository" in by_commit["f" * 40].reason
    lines = drawable.report(items, results)
    assert lines[-1] == "publish: 2 stored result(s) will not be drawn on the site"
    assert any(f"h200/{side[:8]}-existing.json (commit {side[:8]})" in ln for ln in lines)
    with pytest.raises(RuntimeError):
        drawable.undrawn(results, branch="nope", root=repo)


def test_every_result_says_where_it_ran():
    """In the pinned image or on a host's own Python: a host result never looks like an image one."""
    from fusebench.asv import store

    host = {"python": "3.12.3", "torch": "2.11.0+cu130", "triton": "3.6.0", "image_digest": None}
    image = dict(host, image_digest="sha256:0123456789abcdef0123456789")
    assert where(host) == "on host (python 3.12.3, torch 2.11.0+cu130, triton 3.6.0)"
    assert where(image) == "in image sha256:0123456789ab"
    # where it ran is the run record's, never a key of asv's series (issue 41, item 3)
    assert not {"where"} & (set(store.machine_info("h200", host)) | set(store.machine_info("h200", image)))
    s = Sweep({"git_commit": "e" * 40, **image}, 1.0, "cpu", [], rounds=1)
    assert summary.run_lines(s)[0].endswith("; in image sha256:0123456789ab")
    assert environment.capture(torch.device("cpu"))["where"].startswith("on host (python ")
