"""Where a round's time goes, and whether a tighter blocking kernel moves a figure (issue 26's cost;
docs/gate.md).

The default grid of the ops named (default GELU), every backend, built once; then rounds that
alternate the current rule with a candidate. The current rule sizes each group's blocking kernel
from the host's time per call as ``timing.host_ms_per_call`` estimates it (one launch: 1.25 x the
median of five launches; several: twice the slowest); the candidate from ONE x the median for a
call of one launch and SEVERAL x the slowest for a call of several. Prints, per round and per
mode (hot, cold, graph), the seconds spent in ``timing.queued_samples``, the blocking kernels'
time, and the GPU time of the timed repeats (cold mode: with their flushes); what is left is the
host's. Then, per metric, how the candidate's figures compare with the current rule's, beside the
current rule's two rounds against each other (the spread a figure has anyway): a candidate that
lets the GPU wait for the host raises the short cases' figures. Run on a GPU host from the
project root:

    PYTHONPATH=. python probes/round_cost_probe.py [op,op] [rounds per rule, >= 2] [ONE] [SEVERAL]

(ONE and SEVERAL default to 1.0 and 1.5. docs/gate.md's comparisons of earlier rules came from
earlier versions of this script; git log has them.)
"""

import statistics
import sys
import time
from collections import defaultdict

from fusebench import ops as registry
from fusebench.errors import UsageError
from fusebench.measure import environment, metrics, sweep, timing

QUEUED = timing.queued_samples
CURRENT = (timing.ONE_LAUNCH_ESTIMATE, timing.SEVERAL_LAUNCHES_ESTIMATE)
MODES = ("hot", "cold", "graph")
USAGE = ("usage: PYTHONPATH=. python probes/round_cost_probe.py [op,op] [rounds per rule >= 2] "
         "[ONE] [SEVERAL]")


def use(rule: tuple) -> None:
    """Size the blocking kernels by ``rule``: (one-launch estimate, several-launch estimate)."""
    timing.ONE_LAUNCH_ESTIMATE, timing.SEVERAL_LAUNCHES_ESTIMATE = rule


def accounted(spent: dict):
    """``timing.queued_samples`` that adds to ``spent[mode]`` its seconds, its blocking kernels'
    and its repeats' GPU time (the mode: cold with a flush, graph for a replay, else hot)."""

    def queued(body, repeats, per_repeat_ms, before=None, gpu_ms=0.0):
        replay = getattr(body, "__name__", "") == "replay"
        mode = "cold" if before is not None else "graph" if replay else "hot"
        t = time.perf_counter()
        elapsed = QUEUED(body, repeats, per_repeat_ms, before, gpu_ms)
        s = spent[mode]
        s["seconds"] += time.perf_counter() - t
        group = max(1, min(repeats, int(timing.BLOCK_MS_MAX / per_repeat_ms)))
        s["block"] += sum(timing.block_ms(min(group, repeats - i), per_repeat_ms, gpu_ms)
                          for i in range(0, repeats, group)) * 1e-3
        flush = timing.flush_ms(before.__self__) if before is not None else 0.0
        s["gpu"] += (sum(elapsed) + flush * repeats) * 1e-3
        s["repeats"] += repeats
        return elapsed

    return queued


def describe(v: list[float]) -> str:
    q = statistics.quantiles(v, n=20)
    return (f"median {statistics.median(v):.4f}, 5-95 % {q[0]:.4f}-{q[-1]:.4f}, "
            f"beyond 3 %: {sum(abs(x - 1) > 0.03 for x in v)} of {len(v)}")


def main() -> None:
    names = (sys.argv[1] if len(sys.argv) > 1 else "gelu").split(",")
    try:
        per_rule = int(sys.argv[2]) if len(sys.argv) > 2 else 2
        one = float(sys.argv[3]) if len(sys.argv) > 3 else 1.0
        several = float(sys.argv[4]) if len(sys.argv) > 4 else 1.5
    except ValueError:
        sys.exit(USAGE)
    if per_rule < 2 or one <= 0 or several <= 0:
        sys.exit(USAGE + " (two rounds per rule at least: the comparison needs two of each)")
    try:
        ops = [registry.get_op(n) for n in names]
    except UsageError as exc:
        sys.exit(f"round_cost_probe: {exc}")
    dev = environment.device()
    if dev.type != "cuda":
        sys.exit("round_cost_probe: needs a CUDA GPU; this host has none")
    candidate = ((one, statistics.median), (several, max))
    print(f"candidate: {one} x the median launch for one launch per call, {several} x the slowest "
          f"for several", flush=True)
    todo = sweep.cases(ops, "default")
    t = time.perf_counter()
    built = list(sweep.ready(todo, dev))
    print(f"built {len(built)} of {len(todo)} cases in {time.perf_counter() - t:.0f} s", flush=True)
    flush = timing.l2_flush_buffer(dev)
    metrics.measure_copy_ceiling(dev)
    rules = ["current", "candidate"] * per_rule
    for r, rule in enumerate(rules):
        spent: dict = defaultdict(lambda: defaultdict(float))
        timing.queued_samples = accounted(spent)
        parts: dict[str, float] = {}
        t = time.perf_counter()
        try:
            for i in sweep.round_order(len(built), r):
                rec, fn = built[i]
                use(candidate if rule == "candidate" else CURRENT)
                sweep.time_round(rec, fn, dev, flush, spent=parts)["rule"] = rule
        finally:
            timing.queued_samples = QUEUED
            use(CURRENT)
        print(f"round {r + 1} ({rule}): {time.perf_counter() - t:.1f} s ("
              + ", ".join(f"{k} {v:.1f}" for k, v in parts.items()) + " s)", flush=True)
        for mode in MODES:
            s = spent[mode]
            rest = s["seconds"] - s["block"] - s["gpu"]
            print(f"   {mode:5}: {s['seconds']:.1f} s timing {s['repeats']:.0f} repeats: blocking "
                  f"{s['block']:.1f} s, GPU {s['gpu']:.1f} s, the rest {rest:.1f} s", flush=True)

    for field in ("device_time_ms", "device_time_cold_ms", "device_time_graph_ms"):
        cand_vs_cur, cur_vs_cur = [], []
        for rec, _ in built:
            c = [x[field] for x in rec.rounds if x["rule"] == "current" and x.get(field)]
            n = [x[field] for x in rec.rounds if x["rule"] == "candidate" and x.get(field)]
            if len(c) >= 2 and len(n) >= 2:
                cand_vs_cur.append((statistics.median(n) / statistics.median(c), rec))
                cur_vs_cur.append(c[1] / c[0])
        if len(cand_vs_cur) < 2:
            continue
        print(f"{field}: candidate/current {describe([x for x, _ in cand_vs_cur])}; "
              f"current round 2/round 1 {describe(cur_vs_cur)}")
        single = [i for i, (_, rec) in enumerate(cand_vs_cur) if rec.launches == 1]
        if len(single) >= 20:
            cand = describe([cand_vs_cur[i][0] for i in single])
            print(f"   one launch per call: candidate/current {cand}; "
                  f"current round 2/round 1 {describe([cur_vs_cur[i] for i in single])}")
        for x, rec in sorted(cand_vs_cur, key=lambda p: -abs(p[0] - 1))[:8]:
            print(f"   {x:.3f} {rec.backend} {rec.shape} {rec.dtype} ({rec.launches} launches)")


if __name__ == "__main__":
    main()
