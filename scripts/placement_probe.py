"""Is a case's between-run state where its buffers lie, or how long the GPU has run? (issue 26;
docs/gate.md: the round-1 effect, and one board's second run with Triton softmax's wide 16-bit
rows 8-12 % slower)

For each case: K copies of its input, each at its own address (all kept alive), and its graph
device time on each copy, the K copies measured in turn in R passes. A spread between copies that
repeats in every pass is placement; a drift across passes that every copy shares is time. Prints,
per case, each copy's input and output address (MiB) and its R figures (µs), then both spreads:
between copies (median over passes of max/min across copies) and between passes (the same the
other way). Run on a GPU host from the project root:

    PYTHONPATH=. python scripts/placement_probe.py [K] [R]
"""

import statistics
import sys

import torch

from fusebench.measure import inputs, timing
from fusebench.ops.gelu.triton import gelu as triton_gelu
from fusebench.ops.softmax.triton import softmax as triton_softmax

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
    k = int(sys.argv[1]) if len(sys.argv) > 1 else 6
    r = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    for name, f, shape, dtype in CASES:
        copies = [inputs.make_input(shape, dtype, "cuda", seed=i) for i in range(k)]
        fns = [lambda x=x, f=f: f(x) for x in copies]
        outs = [f(x) for x in copies]  # each copy's first output, kept: the next lands elsewhere
        calls = timing.graph_calls(timing.hot_device_time(fns[0], 50).median_ms)
        figs = [[0.0] * r for _ in range(k)]
        for p in range(r):
            for i, fn in enumerate(fns):
                timing.warm_up(fn, torch.device("cuda"))
                figs[i][p] = timing.graph_device_time(fn, 20, calls).median_ms * 1e3
        print(f"{name}: {calls} calls per graph", flush=True)
        for i in range(k):
            where = f"x at {copies[i].data_ptr() >> 20:7d} MiB, first y at {outs[i].data_ptr() >> 20:7d} MiB"
            print(f"   {where}: " + " ".join(f"{v:8.2f}" for v in figs[i]), flush=True)
        by_pass = [list(col) for col in zip(*figs)]
        print(f"   between copies {spread(figs):.3f}x, between passes {spread(by_pass):.3f}x", flush=True)
        del copies, fns, outs
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
