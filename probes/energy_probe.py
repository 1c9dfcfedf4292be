"""Energy per call: the 0.2 s window (``fusebench.measure.energy``) beside a reading aligned to the
steps of NVML's counter that never synchronizes inside its window (docs/method.md says why both).

NVML's total-energy counter advances in steps (every 100 ms on an H200). The aligned reading keeps
the GPU queue full: the calls go in chunks of about 2 ms, a CUDA event after each; the counter is
read between chunks; when it steps, the calls the GPU has completed are counted from the events
(to within one chunk) and the host time noted; the figure is the rise between two observed steps
over the calls completed between them, and the average power over that span (W) is printed beside
the board's power limit, which no reading may exceed. The default grid of the ops named (default
GELU), every backend, each case read twice each way. Run on a GPU host from the project root:

    PYTHONPATH=. python probes/energy_probe.py [op,op]
"""

import collections
import math
import statistics
import sys
import time

import pynvml
import torch

from fusebench import ops as registry
from fusebench.measure import energy, environment, sweep

CHUNK_MS = 2.0
AHEAD = 4  # chunks queued ahead of the GPU
WAIT_S, CAP_S = 0.25, 0.6


def aligned(fn, read, call_ms: float):
    """(mJ per call, calls, seconds, average W) between two observed steps, or None."""
    size = max(1, min(20_000, math.ceil(CHUNK_MS / max(call_ms, 1e-6))))
    queued: collections.deque = collections.deque()
    issued = done = 0

    def issue():
        nonlocal issued
        for _ in range(size):
            fn()
        issued += size
        ev = torch.cuda.Event()
        ev.record()
        queued.append((ev, issued))

    def completed():
        nonlocal done
        while queued and queued[0][0].query():
            done = queued.popleft()[1]
        return done

    torch.cuda.synchronize()
    for _ in range(AHEAD):
        issue()
    last, start, steps = read(), time.perf_counter(), []
    while len(steps) < 2:
        if len(queued) >= AHEAD:
            queued[0][0].synchronize()  # the later chunks keep the GPU busy meanwhile
        issue()
        value, now = read(), time.perf_counter()
        if value < last:
            break
        if value > last:
            steps.append((value, completed(), now))
            last = value
        if now - start > (WAIT_S if not steps else WAIT_S + CAP_S):
            break
    torch.cuda.synchronize()
    if len(steps) < 2 or steps[1][1] <= steps[0][1]:
        return None
    (e0, c0, t0), (e1, c1, t1) = steps
    return (e1 - e0) / (c1 - c0), c1 - c0, t1 - t0, (e1 - e0) / (t1 - t0) / 1e3


def main() -> None:
    names = (sys.argv[1] if len(sys.argv) > 1 else "gelu").split(",")
    dev = environment.device()
    read = energy.counter(dev)
    pynvml.nvmlInit()
    limit_w = pynvml.nvmlDeviceGetEnforcedPowerLimit(pynvml.nvmlDeviceGetHandleByIndex(dev.index or 0)) / 1e3
    print(f"power limit {limit_w:.0f} W", flush=True)
    ratios, over = [], 0
    for rec, fn in sweep.ready(sweep.cases([registry.get_op(n) for n in names], "default"), dev):
        one = sweep.batch_estimate_ms(fn)
        window = [energy.per_call(fn, dev, read, one) for _ in range(2)]
        steps = [aligned(fn, read, one) for _ in range(2)]
        w = [x.mj_per_call for x in window if x]
        a = [x[0] for x in steps if x]
        watts = [x[3] for x in steps if x]
        over += any(x > 1.05 * limit_w for x in watts)
        if w and a:
            ratios.append(statistics.median(a) / statistics.median(w))
        print(f"{rec.backend:8} {rec.shape:>12} {rec.dtype:9} window {' '.join(f'{x:.4g}' for x in w):20} "
              f"aligned {' '.join(f'{x:.4g}' for x in a):20} mJ/call; aligned span "
              f"{' '.join(f'{x[2] * 1e3:.0f}' for x in steps if x)} ms, "
              f"{' '.join(f'{x:.0f}' for x in watts)} W", flush=True)
    if ratios:
        q = statistics.quantiles(ratios, n=20) if len(ratios) > 1 else ratios * 19
        print(f"aligned / window: median {statistics.median(ratios):.3f}, 5-95 % {q[0]:.3f}-{q[-1]:.3f}; "
              f"cases whose aligned span averaged more than 1.05 x the power limit: {over}")


if __name__ == "__main__":
    main()
