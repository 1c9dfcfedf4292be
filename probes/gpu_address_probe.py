"""Does a case's figure move with where its output lands? (issue 26's round-1 effect; docs/gate.md)

Triton softmax 4096x4096 bfloat16 and Triton GELU 2^20 float32, hot and graph device time, with
filler allocations of 0-32 MiB placing the output at other addresses. Run on a GPU host from the
project root: PYTHONPATH=. python probes/gpu_address_probe.py
"""

import torch
from fusebench.kernels.gelu.triton import gelu as tg
from fusebench.kernels.softmax.triton import softmax as tsm

from fusebench.measure import inputs, timing


def run(name, make_x, f):
    x = make_x()
    for k in [0, 1, 2, 3, 4, 6, 8, 12, 16, 0, 1, 2]:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        filler = torch.empty(k * 2 * 2**20, dtype=torch.uint8, device="cuda") if k else None
        y0 = f(x)
        ptr = y0.data_ptr()
        del y0
        fn = lambda: f(x)
        timing.warm_up(fn, torch.device("cuda"))
        hot = timing.hot_device_time(fn, 60).median_ms * 1e3
        calls = timing.graph_calls(hot * 1e-3)
        gr = timing.graph_device_time(fn, 30, calls).median_ms * 1e3
        print(
            f"{name} filler {k * 2:3d} MiB  y at {ptr % 2**30 // 2**20:5d} MiB mod 1 GiB  "
            f"hot {hot:7.2f} us  graph {gr:7.2f} us",
            flush=True,
        )
        del filler


run("softmax 4096x4096 bf16", lambda: inputs.make_input((4096, 4096), torch.bfloat16, "cuda"), tsm)
run("gelu 2^20 f32", lambda: inputs.make_input((2**20,), torch.float32, "cuda"), tg)
