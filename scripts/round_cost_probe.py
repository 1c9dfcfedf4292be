"""What the blocking-kernel rule costs and whether it moves a figure (issue 26's cost; docs/gate.md).

The default grid of the ops named (default GELU), every backend, built once; then rounds that
alternate the former rule (each group of repeats behind a blocking kernel of twice the slowest of
five launches per call) with the current one (``timing.queued_samples``: the same less the GPU
time the repeats are known to take). Prints each round's time by part and, per metric, how the
figures of the current rule compare with the former's, beside the same comparison of the former
rule's two rounds with each other (the spread a figure has anyway). Run on a GPU host from the
project root:

    PYTHONPATH=. python scripts/round_cost_probe.py [op,op] [rounds per rule]
"""

import statistics
import sys
import time

from fusebench import ops as registry
from fusebench.measure import environment, metrics, sweep, timing

NEW = timing.queued_samples


def former(body, repeats, per_repeat_ms, before=None, gpu_ms=0.0):
    """The former rule: the blocking kernel holds the whole host time, whatever the GPU time (the
    current rule with no GPU time credited; it keeps the current one's 1 ms lead and clock)."""
    return NEW(body, repeats, per_repeat_ms, before)


def main() -> None:
    names = (sys.argv[1] if len(sys.argv) > 1 else "gelu").split(",")
    per_rule = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    dev = environment.device()
    todo = sweep.cases([registry.get_op(n) for n in names], "default")
    t = time.perf_counter()
    built = list(sweep.ready(todo, dev))
    print(f"built {len(built)} of {len(todo)} cases in {time.perf_counter() - t:.0f} s", flush=True)
    flush = timing.l2_flush_buffer(dev)
    metrics.measure_copy_ceiling(dev)
    rules = ["former", "current"] * per_rule
    for r, rule in enumerate(rules):
        timing.queued_samples = former if rule == "former" else NEW
        spent: dict[str, float] = {}
        t = time.perf_counter()
        for i in sweep.round_order(len(built), r):
            rec, fn = built[i]
            fig = sweep.time_round(rec, fn, dev, flush, spent=spent)
            fig["rule"] = rule
        parts = ", ".join(f"{k} {v:.1f}" for k, v in spent.items())
        print(f"round {r + 1} ({rule}): {time.perf_counter() - t:.1f} s ({parts} s)", flush=True)
    timing.queued_samples = NEW

    fields = ("device_time_ms", "device_time_cold_ms", "device_time_graph_ms")
    for field in fields:
        cur_vs_former, former_vs_former = [], []
        for rec, _ in built:
            f = [x[field] for x in rec.rounds if x["rule"] == "former" and x.get(field)]
            c = [x[field] for x in rec.rounds if x["rule"] == "current" and x.get(field)]
            if len(f) >= 2 and len(c) >= 2:
                cur_vs_former.append((statistics.median(c) / statistics.median(f), rec))
                former_vs_former.append(f[1] / f[0])
        ratios = sorted(x for x, _ in cur_vs_former)
        aa = sorted(former_vs_former)

        def describe(v):
            q = statistics.quantiles(v, n=20)
            return (f"median {statistics.median(v):.4f}, 5-95 % {q[0]:.4f}-{q[-1]:.4f}, "
                    f"beyond 3 %: {sum(abs(x - 1) > 0.03 for x in v)} of {len(v)}")

        print(f"{field}: current/former {describe(ratios)}; former round 2/round 1 {describe(aa)}")
        for x, rec in sorted(cur_vs_former, key=lambda p: -abs(p[0] - 1))[:6]:
            print(f"   {x:.3f} {rec.backend} {rec.shape} {rec.dtype}")

    # Capture cost, one per case, and the energy counter's update period.
    t = time.perf_counter()
    for rec, fn in built:
        if rec.graph_calls:
            try:
                timing.capture(fn, rec.graph_calls).reset()
            except timing.CaptureError:
                pass
    print(f"one capture of each case: {time.perf_counter() - t:.1f} s", flush=True)


if __name__ == "__main__":
    main()
