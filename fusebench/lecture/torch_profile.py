"""``make profile OP=gelu``: a ``torch.profiler`` table per backend, the first look before ``make nsys``.

For each backend of one op, on one case (shape, dtype): the correctness gate, warm-up, then
``calls`` calls under ``torch.profiler`` (CPU activity, plus CUDA activity on a GPU). The table
is PyTorch's own ``key_averages().table()``, sorted by device (GPU) time on a GPU and by CPU
time on the CPU: which operators and kernels ran, how many times, how long. A summary per
backend gives GPU operations per call (kernels, memsets, copies) and GPU time per call (from
the CUDA activity records), and the profiled CPU time per call.

Profiled times include the profiler's own overhead: use them to see *which* kernels run and in
what proportion, and the sweep (``make bench``) for *how fast*.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import torch

from fusebench.errors import SkipCase, first_line
from fusebench.measure import correctness, inputs, timing
from fusebench.measure.torch_logs import quiet_profiler
from fusebench.registry import BACKENDS, PRECISIONS, Op, Shape, shape_label

#: Rows of each table (the busiest operators and kernels).
ROW_LIMIT = 12


@dataclass
class BackendProfile:
    """One backend's profile. Times per call in ms; ``status`` as in a sweep record."""

    backend: str
    status: str = "ok"
    reason: str = ""
    calls: int = 0
    gpu_ops_per_call: float | None = None
    gpu_ms_per_call: float | None = None
    cpu_ms_per_call: float | None = None
    rows: list[dict] = field(default_factory=list)
    table: str = ""


def default_shape(op: Op, dev: torch.device) -> Shape:
    """The case profiled unless one is given: the op's largest shape of the ``quick`` grid on a GPU,
    of the ``cpu`` grid on the CPU."""
    return max(op.grids["quick" if dev.type == "cuda" else "cpu"], key=math.prod)


def _rows(averages, cuda: bool) -> list[dict]:
    key = "device_time_total" if cuda else "cpu_time_total"
    events = sorted(averages, key=lambda e: getattr(e, key), reverse=True)[:ROW_LIMIT]
    return [{"name": e.key, "count": e.count,
             "cpu_total_us": e.cpu_time_total, "self_cpu_us": e.self_cpu_time_total,
             "device_total_us": e.device_time_total if cuda else None,
             "self_device_us": e.self_device_time_total if cuda else None} for e in events]


def profile_callable(fn, dev: torch.device, calls: int = 5) -> BackendProfile:
    """Profile ``calls`` warmed-up calls of ``fn`` on ``dev`` (``fn`` must already be warmed up).

    Raises:
        RuntimeError: the profiler could not record.
    """
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    cuda = dev.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    timing.synchronize(dev)
    quiet_profiler()  # no Kineto 'USDT: profiler_start/stop' lines on stderr
    with profile(activities=activities) as prof:
        for _ in range(calls):
            fn()
        timing.synchronize(dev)
    averages = prof.key_averages()
    res = BackendProfile("", calls=calls, rows=_rows(averages, cuda))
    res.table = averages.table(sort_by="device_time_total" if cuda else "cpu_time_total",
                               row_limit=ROW_LIMIT)
    # Top-level CPU time: the operators called directly (no parent), as the caller sees them.
    top = [e for e in prof.events() if e.device_type == DeviceType.CPU and e.cpu_parent is None]
    res.cpu_ms_per_call = sum(e.cpu_time_total for e in top) / 1e3 / calls
    if cuda:
        gpu = [e for e in prof.events() if e.device_type == DeviceType.CUDA]
        res.gpu_ops_per_call = len(gpu) / calls
        res.gpu_ms_per_call = sum(e.time_range.elapsed_us() for e in gpu) / 1e3 / calls
    return res


def profile_op(op: Op, dev: torch.device, shape: Shape, dtype: str, backend_names=BACKENDS,
               calls: int = 5) -> list[BackendProfile]:
    """Profile each selected backend of ``op`` on one case; a backend that cannot run or fails
    the gate gets ``status`` ``"skipped"``/``"failed"`` and its reason, never an exception."""
    precision = PRECISIONS[dtype]
    x = inputs.make_input(tuple(shape), precision.dtype, str(dev))
    out = []
    for name in backend_names:
        res = BackendProfile(name)
        try:
            fn = precision.bind(op.get_backend(name).factory, x)
            gate = correctness.check(op, fn, x, dtype)
            if not gate.passed:
                res.status, res.reason = "failed", f"correctness gate: {gate.reason}"
            else:
                timing.warm_up(fn, dev)
                res = profile_callable(fn, dev, calls)
                res.backend = name
        except SkipCase as exc:
            res.status, res.reason = "skipped", str(exc)
        except Exception as exc:
            res.status, res.reason = "failed", first_line(exc)
        out.append(res)
    return out


def render(op: Op, shape: Shape, dtype: str, profiles: list[BackendProfile], header: str,
           cuda: bool) -> str:
    """Markdown: a summary table over backends, then each backend's torch.profiler table."""
    sort = "GPU (device) time" if cuda else "CPU time"
    out = [f"# Profile: {op.name} {shape_label(shape)} {dtype}", "", header, "",
           f"torch.profiler over {profiles[0].calls or '?'} warmed-up calls per backend, tables sorted "
           f"by {sort}. Profiled times include the profiler's overhead (use `make bench` for speed).", ""]
    if cuda:
        out += ["| backend | GPU ops per call | GPU ms per call | CPU ms per call |", "|---|---:|---:|---:|"]
    else:
        out += ["| backend | CPU ms per call |", "|---|---:|"]
    for p in profiles:
        if p.status != "ok":
            out.append(f"| {p.backend} | {p.status}: {p.reason} |" + (" | |" if cuda else ""))
        elif cuda:
            out.append(f"| {p.backend} | {p.gpu_ops_per_call:g} | {p.gpu_ms_per_call:.4f} | "
                       f"{p.cpu_ms_per_call:.4f} |")
        else:
            out.append(f"| {p.backend} | {p.cpu_ms_per_call:.4f} |")
    for p in profiles:
        if p.status == "ok":
            out += ["", f"## {p.backend}", "", "```", p.table.rstrip(), "```"]
    if not cuda:
        out += ["", "On the CPU there are no GPU kernels: the rows are PyTorch operators "
                    "(one per primitive in `eager`), timed on the host."]
    return "\n".join(out)


def as_data(op: Op, shape: Shape, dtype: str, profiles: list[BackendProfile]) -> dict:
    """The JSON-serializable profile (stored with the report)."""
    return {"params": {"op": op.name, "shape": shape_label(shape), "dtype": dtype},
            "results": [asdict(p) for p in profiles]}
