"""What does a case cost with fusebench's harness, and how far apart are two runs of it, against
its peers? (issue 44: "on the same 8 cases, fusebench's run-to-run spread no worse than today's in
every metric, at <= 0.5 s per case").

The cases: the `torch` backend (the built-in fused op) of GELU 2^10, 2^14, 2^18, 2^22, 2^26 float32
and softmax 65536x128, 4096x4096 float32, 1024x32768 bfloat16, each built by fusebench's own
factory on its seeded input and through the correctness gate. The tools:

- ``fusebench``: ``sweep.run_case(..., rounds=3)``, a case's build, gate, profile and 3 rounds
  back to back (hot, cold, graph and wall time); the copy ceiling and the L2 flush buffer are made
  once per process, outside the cases' time;
- ``triton``: ``triton.testing.do_bench`` (L2 flushed before each call: cold) and
  ``do_bench_cudagraph`` (graph), at their defaults;
- ``nvbench``: NVIDIA nvbench's Python bindings (``cuda.bench``, PyPI ``cuda-bench``), one
  benchmark with the case as a string axis, ``state.exec`` at its defaults (cold and batch), read
  back from its ``--json`` file; skipped, saying why, where ``cuda.bench`` cannot be imported.

Each tool runs in ``--procs`` fresh processes (default 3): process round k starts the tools in
order rotated by k, so no tool always comes first on a cold GPU. Per tool it prints the seconds per
case (from making the case's input to its last figure, the mean over processes and cases) and per
metric the run-to-run spread, (max - min) / median of a case's figure over the processes, as the
lowest and highest over the cases; then the spreads case by case. ``--json FILE`` writes every
process's figures (µs) and seconds, and the summary.

Run on a GPU host from the project root (cuda-bench is not in the lock: install it beside, e.g.
``pip install --target /tmp/peer cuda-bench==0.3.0`` and add ``/tmp/peer`` to PYTHONPATH):

    PYTHONPATH=. python probes/peer_probe.py [--procs 3] [--tools fusebench,triton,nvbench] [--json FILE]

Without a GPU it says so in one line and exits 2.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: (op, shape, dtype) of the 8 cases, in issue 44's order.
CASES = [("gelu", (1 << p,), "float32") for p in (10, 14, 18, 22, 26)] + [
    ("softmax", (65536, 128), "float32"), ("softmax", (4096, 4096), "float32"),
    ("softmax", (1024, 32768), "bfloat16")]
TOOLS = ("fusebench", "triton", "nvbench")
#: What each tool's figures are called, in the order the table shows them.
METRICS = {"fusebench": ("hot", "cold", "graph", "wall"), "triton": ("cold", "graph"),
           "nvbench": ("cold", "batch")}
LABELS = {"fusebench": "fusebench, 3 rounds (`sweep.run_case`)",
          "triton": "triton.testing `do_bench` + `do_bench_cudagraph`",
          "nvbench": "NVIDIA nvbench (`cuda.bench`, Python)"}
#: The line of a child's stdout that carries its result (the tools print their own lines too).
MARK = "PEER_PROBE_RESULT "
ROUNDS = 3


def label(case: tuple) -> str:
    """``gelu/1024/float32``, ``softmax/65536x128/float32``."""
    op, shape, dtype = case
    return f"{op}/{'x'.join(map(str, shape))}/{dtype}"


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The command line (argparse: a bad one is its one usage line and exit 2)."""
    p = argparse.ArgumentParser(prog="probes/peer_probe.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--procs", type=int, default=3,
                   help="fresh processes per tool (at least 2; default 3)")
    p.add_argument("--tools", default=",".join(TOOLS), help=f"comma-separated, of {', '.join(TOOLS)}")
    p.add_argument("--json", type=Path, help="write every process's figures and the summary here")
    p.add_argument("--timeout", type=float, default=1200.0, help="seconds one process may take")
    p.add_argument("--child", choices=TOOLS, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.procs < 2:
        p.error("--procs must be at least 2 (a spread needs two processes)")
    args.tools = [t for t in args.tools.split(",") if t]
    bad = [t for t in args.tools if t not in TOOLS]
    if bad or not args.tools:
        p.error(f"--tools: {'unknown ' + ', '.join(bad) if bad else 'none given'}; valid: {', '.join(TOOLS)}")
    return args


def rotation(tools: list[str], k: int) -> list[str]:
    """The order of the tools in process round ``k`` (0-based): rotated left by k."""
    k %= len(tools)
    return tools[k:] + tools[:k]


def spread(values: list[float]) -> float:
    """(max - min) / median; NaN for fewer than two values or a median that is not positive."""
    if len(values) < 2:
        return math.nan
    med = statistics.median(values)
    return (max(values) - min(values)) / med if med > 0 else math.nan


def summarize(runs: list[dict]) -> dict:
    """Per tool, from its processes' results (``{"tool", "seconds": {case: s}, "figures": {case:
    {metric: µs}}, "skipped"}``): ``processes`` measured, ``s_per_case`` (the mean of every
    process's case seconds), ``spread`` per metric per case (:func:`spread` over the processes),
    ``range`` per metric (lowest, highest over the cases), ``skipped`` (the first reason, when no
    process measured anything)."""
    out = {}
    for tool in dict.fromkeys(r["tool"] for r in runs):
        mine = [r for r in runs if r["tool"] == tool]
        measured = [r for r in mine if not r.get("skipped")]
        entry = {"processes": len(measured), "skipped": None if measured else mine[0].get("skipped"),
                 "s_per_case": None, "spread": {}, "range": {}}
        seconds = [s for r in measured for s in r["seconds"].values()]
        if seconds:
            entry["s_per_case"] = statistics.fmean(seconds)
        cases = list(dict.fromkeys(c for r in measured for c in r["figures"]))
        for metric in METRICS.get(tool, ()):
            per_case = {}
            for case in cases:
                values = [r["figures"][case][metric] for r in measured
                          if r["figures"].get(case, {}).get(metric) is not None]
                if not math.isnan(s := spread(values)):
                    per_case[case] = s
            if per_case:
                entry["spread"][metric] = per_case
                entry["range"][metric] = (min(per_case.values()), max(per_case.values()))
        out[tool] = entry
    return out


def pct(x: float) -> str:
    return f"{x * 100:.1f}"


def table(summary: dict) -> str:
    """The markdown table of :func:`summarize`'s result: one row per tool, then the spreads case by
    case."""
    lines = ["| tool | processes | s per case | metrics | run-to-run spread (max-min)/median, "
             "lowest-highest over the cases |", "| --- | --- | --- | --- | --- |"]
    for tool, e in summary.items():
        name = LABELS.get(tool, tool)
        if e["skipped"]:
            lines.append(f"| {name} | 0 | - | - | skipped: {e['skipped']} |")
            continue
        spreads = ", ".join(f"{m} {pct(lo)}-{pct(hi)} %" for m, (lo, hi) in e["range"].items())
        s = "-" if e["s_per_case"] is None else f"{e['s_per_case']:.2f}"
        metrics = ", ".join(e["range"]) or "-"
        lines.append(f"| {name} | {e['processes']} | {s} | {metrics} | {spreads or '-'} |")
    columns = [(tool, m) for tool, e in summary.items() for m in e["spread"]]
    if columns:
        cases = list(dict.fromkeys(c for tool, m in columns for c in summary[tool]["spread"][m]))
        lines += ["", "| case | " + " | ".join(f"{t} {m} %" for t, m in columns) + " |",
                  "| --- |" + " --- |" * len(columns)]
        for case in cases:
            cells = [summary[t]["spread"][m].get(case) for t, m in columns]
            lines.append(f"| {case} | " + " | ".join("-" if c is None else pct(c) for c in cells) + " |")
    return "\n".join(lines)


def nvbench_figures(report: dict) -> dict[str, dict[str, float]]:
    """Per case (the ``case`` axis), the cold and batch GPU time (µs, the means) of an nvbench
    ``--json`` report; a figure nvbench did not give is left out."""
    tags = {"cold": "nv/cold/time/gpu/mean", "batch": "nv/batch/time/gpu/mean"}
    out = {}
    for bench in report.get("benchmarks", ()):
        for state in bench.get("states", ()):
            axes = {a.get("name"): a.get("value") for a in state.get("axis_values") or ()}
            case = axes.get("case")
            if case is None or state.get("is_skipped"):
                continue
            got = {}
            for summary in state.get("summaries") or ():
                for metric, tag in tags.items():
                    if summary.get("tag") == tag:
                        value = next((d.get("value") for d in summary.get("data", ())
                                      if d.get("name") == "value"), None)
                        if value is not None:
                            got[metric] = float(value) * 1e6
            out[str(case)] = got
    return out


# ---- the children: one tool in one fresh process ----

def _setup():
    from fusebench.measure import environment, sweep
    from fusebench.ops import get_op

    return environment.device(), sweep, get_op


def _built(sweep, get_op, case, dev):
    op, shape, dtype = case
    built = sweep.build_and_gate(get_op(op), "torch", shape, dtype, dev)
    if built.status != "ok":
        raise RuntimeError(f"{label(case)}: {built.status}: {built.reason}")
    return built.fn


def child_fusebench() -> dict:
    from fusebench.measure import metrics, timing

    dev, sweep, get_op = _setup()
    ceiling = metrics.measure_copy_ceiling(dev).gbps
    flush = timing.l2_flush_buffer(dev)
    seconds, figures = {}, {}
    for case in CASES:
        op, shape, dtype = case
        t = time.perf_counter()
        rec = sweep.run_case(get_op(op), "torch", shape, dtype, dev, ceiling, flush, rounds=ROUNDS)
        seconds[label(case)] = time.perf_counter() - t
        if rec.status != "ok":
            raise RuntimeError(f"{label(case)}: {rec.status}: {rec.reason}")
        ms = {"hot": rec.device_time_ms, "cold": rec.device_time_cold_ms,
              "graph": rec.device_time_graph_ms, "wall": rec.wall_time_ms}
        figures[label(case)] = {k: None if v is None else v * 1e3 for k, v in ms.items()}
    return {"seconds": seconds, "figures": figures}


def child_triton() -> dict:
    try:
        from triton.testing import do_bench, do_bench_cudagraph
    except ImportError as exc:
        return {"skipped": f"triton.testing not importable: {exc}"}
    dev, sweep, get_op = _setup()
    seconds, figures = {}, {}
    for case in CASES:
        t = time.perf_counter()
        fn = _built(sweep, get_op, case, dev)
        cold = do_bench(fn)
        graph = do_bench_cudagraph(fn)  # captures on a side stream of its own
        seconds[label(case)] = time.perf_counter() - t
        figures[label(case)] = {"cold": cold * 1e3, "graph": graph * 1e3}
    return {"seconds": seconds, "figures": figures}


def child_nvbench() -> dict:
    try:
        import cuda.bench as bench
    except Exception as exc:  # noqa: BLE001 - any reason it cannot be imported is the skip's reason
        first = str(exc).splitlines()[0] if str(exc) else ""
        return {"skipped": f"cuda.bench not importable ({type(exc).__name__}: {first})"}
    import torch

    dev, sweep, get_op = _setup()
    by_label = {label(c): c for c in CASES}
    seconds: dict[str, float] = {}

    def one(state) -> None:
        name = state.get_string("case")
        t = time.perf_counter()
        fn = _built(sweep, get_op, by_label[name], dev)

        def launch(launcher) -> None:
            stream = torch.cuda.ExternalStream(launcher.get_stream().addressof(), device=dev)
            with torch.cuda.stream(stream):
                fn()

        state.exec(launch)
        seconds[name] = time.perf_counter() - t

    bench.register(one).add_string_axis("case", list(by_label))
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "nvbench.json"
        bench.run_all_benchmarks(["peer_probe", "--json", str(report), "--devices", str(dev.index or 0)])
        figures = nvbench_figures(json.loads(report.read_text()))
    return {"seconds": seconds, "figures": figures}


CHILDREN = {"fusebench": child_fusebench, "triton": child_triton, "nvbench": child_nvbench}


def run_child(tool: str) -> int:
    """A child's body: its result on one line of stdout after :data:`MARK`."""
    try:
        result = CHILDREN[tool]()
    except Exception as exc:  # noqa: BLE001 - the parent reports it in its table
        first = str(exc).splitlines()[0] if str(exc) else ""
        result = {"failed": f"{type(exc).__name__}: {first}"}
    print(MARK + json.dumps(result), flush=True)
    return 0


# ---- the parent ----

def gpu_missing() -> str | None:
    """Why this host cannot run the probe (no CUDA GPU torch can see), or None; asks NVML, so the
    parent holds no CUDA context beside its children."""
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "needs a CUDA GPU; this host has none"
    return None


def measure(tools: list[str], procs: int, timeout: float, out=sys.stderr) -> list[dict]:
    """Every tool in ``procs`` fresh processes, round k in :func:`rotation` k; each process's result
    with its ``tool``, ``round``, ``process_s`` (its whole life, start and imports included)."""
    runs = []
    for k in range(procs):
        for tool in rotation(tools, k):
            t = time.perf_counter()
            try:
                p = subprocess.run([sys.executable, __file__, "--child", tool], capture_output=True,
                                   text=True, timeout=timeout)
                lines = [ln for ln in p.stdout.splitlines() if ln.startswith(MARK)]
                result = json.loads(lines[-1][len(MARK):]) if lines else {
                    "failed": f"exit {p.returncode}: {(p.stderr.strip().splitlines() or [''])[-1]}"}
            except subprocess.TimeoutExpired:
                result = {"failed": f"took over {timeout:.0f} s"}
            if why := result.pop("failed", None):
                result["skipped"] = f"failed: {why}"
            result.update(tool=tool, round=k, process_s=round(time.perf_counter() - t, 2))
            result.setdefault("seconds", {})
            result.setdefault("figures", {})
            print(f"peer_probe: round {k + 1}/{procs} {tool}: " + (result.get("skipped") or (
                f"{len(result['figures'])} cases, {sum(result['seconds'].values()):.1f} s in the cases, "
                f"{result['process_s']:.1f} s in the process")), file=out, flush=True)
            runs.append(result)
    return runs


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if args.child:
        return run_child(args.child)
    if why := gpu_missing():
        print(f"peer_probe: {why}", file=sys.stderr)
        return 2
    runs = measure(args.tools, args.procs, args.timeout)
    summary = summarize(runs)
    print(table(summary))
    if args.json:
        args.json.write_text(json.dumps({"cases": [label(c) for c in CASES], "procs": args.procs,
                                         "runs": runs, "summary": summary}, indent=1))
        print(f"peer_probe: figures written to {args.json}", file=sys.stderr)
    return 0 if any(e["processes"] for e in summary.values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
