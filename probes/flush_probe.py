"""Does the cold figure depend on the flush's size? ``timing.l2_flush_buffer`` writes
max(2 x L2, 256 MiB) before each cold repeat (the 256 MiB floor is Triton's ``do_bench``); on an
H200 that is over twice 2 x L2, and the flush is most of a cold round's GPU time (docs/gate.md).

The default grid of the ops named (default GELU), every backend, built once; each case's cold
figure with the current buffer and with one of 2 x L2, alternately, three times each; prints the
ratio (2 x L2 / current) by case and its distribution beside the current buffer's own spread
between its three readings, and the time each took. Run on a GPU host from the project root:

    PYTHONPATH=. python probes/flush_probe.py [op,op]
"""

import statistics
import sys
import time

import torch

from fusebench import ops as registry
from fusebench.measure import environment, sweep, timing


def main() -> None:
    names = (sys.argv[1] if len(sys.argv) > 1 else "gelu").split(",")
    dev = environment.device()
    current = timing.l2_flush_buffer(dev)
    l2 = torch.cuda.get_device_properties(dev).L2_cache_size
    small = torch.empty(2 * l2, dtype=torch.int8, device=dev)
    print(f"L2 {l2 >> 20} MiB; flush {current.numel() >> 20} MiB against {small.numel() >> 20} MiB; "
          f"{timing.flush_ms(current) * 1e3:.0f} us against {timing.flush_ms(small) * 1e3:.0f} us; "
          f"zeroed as int64: {timing.flush_ms(current.view(torch.int64)) * 1e3:.0f} us against "
          f"{timing.flush_ms(small.view(torch.int64)) * 1e3:.0f} us", flush=True)
    ratios, own, spent = [], [], {"current": 0.0, "2 x L2": 0.0}
    repeats = gpu = 0.0
    for rec, fn in sweep.ready(sweep.cases([registry.get_op(n) for n in names], "default"), dev):
        bounds = (sweep.MIN_ROUND_SAMPLES, timing.MAX_REPEATS)
        reps = timing.planned_repeats(fn, dev, sweep.ROUND_BUDGET_S, bounds=bounds)
        figures = {"current": [], "2 x L2": []}
        for _ in range(3):
            for name, buf in (("current", current), ("2 x L2", small)):
                t = time.perf_counter()
                figures[name].append(timing.device_time(fn, reps, buf).median_ms)
                spent[name] += time.perf_counter() - t
                if name == "current":
                    repeats += reps
                    gpu += reps * (figures[name][-1] + timing.flush_ms(buf)) * 1e-3
        a, b = statistics.median(figures["current"]), statistics.median(figures["2 x L2"])
        ratios.append(b / a)
        own.append((max(figures["current"]) - min(figures["current"])) / a)
        print(f"{rec.backend:8} {rec.shape:>12} {rec.dtype:9} current {a * 1e3:9.2f} us  "
              f"2 x L2 {b * 1e3:9.2f} us  "
              f"ratio {b / a:.3f}  current's spread {own[-1] * 100:.1f} %", flush=True)
    q = statistics.quantiles(ratios, n=20)
    print(f"2 x L2 / current: median {statistics.median(ratios):.4f}, 5-95 % {q[0]:.4f}-{q[-1]:.4f}; "
          f"current's spread between its readings: median {statistics.median(own) * 100:.1f} %; "
          f"seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in spent.items()))
    print(f"current: {spent['current'] / repeats * 1e3:.3f} ms per cold repeat against "
          f"{gpu / repeats * 1e3:.3f} ms of GPU time (flush + figure), {repeats:.0f} repeats")


if __name__ == "__main__":
    main()
