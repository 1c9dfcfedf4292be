"""Does a case's figure move with where its buffers lie, or with how long the GPU has run? (issue
26: the cases whose figure sits in one of two states from run to run, docs/gate.md)

For each case: K copies of its input, each at its own address (all kept alive), and the case's
hot device time on each copy, the K copies measured in turn in R passes. Before each measurement
one call's output is taken and freed, so the timed calls reuse its block: its address is printed
with the figure. A spread between copies that repeats in every pass is placement; a drift across
passes that every copy shares is time. Prints, per case and copy, the input's address and, per
pass, the output's address (MiB) and the figure (µs); then both spreads: between copies (median
over passes of max/min across copies) and between passes (the same the other way). Run on a GPU
host from the project root:

    PYTHONPATH=. python probes/placement_probe.py [K] [R]
"""

import statistics
import sys

import torch
from fusebench.kernels.gelu.triton import gelu as triton_gelu
from fusebench.kernels.softmax.triton import softmax as triton_softmax

from fusebench.measure import inputs, timing

CASES = [
    ("triton softmax 4096x65536 float16", triton_softmax, (4096, 65536), torch.float16),
    ("triton softmax 1024x32768 float16", triton_softmax, (1024, 32768), torch.float16),
    ("triton softmax 1024x32768 float32", triton_softmax, (1024, 32768), torch.float32),
    ("triton gelu 1048576 float32", triton_gelu, (2**20,), torch.float32),
]


def spread(rows: list[list[float]]) -> float:
    """Median over columns of max / min down each column."""
    return statistics.median(max(col) / min(col) for col in zip(*rows))


def main() -> None:
    usage = "usage: PYTHONPATH=. python probes/placement_probe.py [copies >= 2] [passes >= 2]"
    try:
        k = int(sys.argv[1]) if len(sys.argv) > 1 else 6
        r = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    except ValueError:
        sys.exit(usage)
    if k < 2 or r < 2 or len(sys.argv) > 3:
        sys.exit(usage)
    if not torch.cuda.is_available():
        sys.exit("placement_probe: needs a CUDA GPU; this host has none")
    dev = torch.device("cuda")
    for name, f, shape, dtype in CASES:
        copies = [inputs.make_input(shape, dtype, "cuda", seed=i) for i in range(k)]
        fns = [lambda x=x, f=f: f(x) for x in copies]
        figs = [[0.0] * r for _ in range(k)]
        where = [[0] * r for _ in range(k)]
        for p in range(r):
            for i, fn in enumerate(fns):
                timing.warm_up(fn, dev)
                y = fn()
                where[i][p] = y.data_ptr() >> 20
                del y
                figs[i][p] = timing.hot_device_time(fn, 200).median_ms * 1e3
        print(f"{name}:", flush=True)
        for i in range(k):
            cells = " ".join(f"{where[i][p]:7d}:{figs[i][p]:8.2f}" for p in range(r))
            print(f"   x at {copies[i].data_ptr() >> 20:7d} MiB; y MiB:us per pass {cells}", flush=True)
        by_pass = [list(col) for col in zip(*figs)]
        print(f"   between copies {spread(figs):.3f}x, between passes {spread(by_pass):.3f}x", flush=True)
        del copies, fns
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
