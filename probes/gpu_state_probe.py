"""How a case's figure moves with how long the GPU has been busy (issue 26's round-1 effect).

Triton GELU on 2^20 float32 (L2-resident), hot and graph device time back to back, with NVML's
SM and memory clocks, clock-event reasons (hex), power and temperature after each measurement,
and idle pauses of 3 s before the 9th and 12th. Run on a GPU host from the project root:

    PYTHONPATH=. python probes/gpu_state_probe.py [settle seconds]

With a number, the GPU first writes a 256 MiB buffer back to back for that many seconds (a
sustained load before the first measurement).

docs/gate.md gives what an H200 showed.
"""

import sys
import time

import pynvml
import torch
from fusebench.kernels.gelu.triton import gelu as tg

from fusebench.measure import inputs, timing

pynvml.nvmlInit()
h = pynvml.nvmlDeviceGetHandleByIndex(0)


def st() -> str:
    sm = pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM)
    mem = pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM)
    r = pynvml.nvmlDeviceGetCurrentClocksEventReasons(h)
    p = pynvml.nvmlDeviceGetPowerUsage(h) / 1e3
    t = pynvml.nvmlDeviceGetTemperature(h, 0)
    return f"sm {sm} mem {mem} reasons {r:#x} power {p:.0f} W temp {t} C"


x = inputs.make_input((2**20,), torch.float32, "cuda")


def fn():
    return tg(x)


settle_s = float(sys.argv[1]) if len(sys.argv) > 1 else 0.0
if settle_s:
    buf = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
    end = time.perf_counter() + settle_s
    while time.perf_counter() < end:
        for _ in range(20):
            buf.zero_()
        torch.cuda.synchronize()
timing.warm_up(fn, torch.device("cuda"))
t0 = time.perf_counter()
for i in range(14):
    if i in (8, 11):
        time.sleep(3.0)
    hot = timing.hot_device_time(fn, 60).median_ms * 1e3
    gr = timing.graph_device_time(fn, 30, 40).median_ms * 1e3
    print(f"t {time.perf_counter()-t0:5.2f} s  hot {hot:.2f} graph {gr:.2f} us  {st()}", flush=True)
