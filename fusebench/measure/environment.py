"""The environment every result carries: device, driver, versions, clocks, image and commit.

GPU facts come from NVML (``nvidia-ml-py``): name, UUID, driver, SM and memory clocks and the
clock-event (throttle) reasons, sampled around the measurement (NVML API reference,
``nvmlDeviceGetCurrentClocksEventReasons``). Nothing here changes a GPU setting.
"""

from __future__ import annotations

import math
import os
import platform
import time
from functools import cache

import torch

from fusebench import git
from fusebench.machine import slug  # noqa: F401  (this module's name for it, since before fusebench.machine)
from fusebench.paths import PROJECT_ROOT
from fusebench.record import where

#: NVML clock-event reason bits (nvml.h ``nvmlClocksEventReason*``) and their names.
CLOCK_EVENT_REASONS = {
    0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap",
    0x8: "hw_slowdown", 0x10: "sync_boost", 0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown", 0x80: "hw_power_brake_slowdown", 0x100: "display_clock_setting",
}


def device() -> torch.device:
    """The device measured on: ``cuda`` (the current device) when a GPU is usable, else ``cpu``."""
    if torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def machine_name(dev: torch.device | None = None) -> str:
    """asv machine name derived from the GPU model (``"NVIDIA H200"`` -> ``"h200"``).

    On the CPU: ``cpu-<arch>`` (``cpu-x86_64``). ``FUSEBENCH_MACHINE`` overrides both.
    """
    if name := os.environ.get("FUSEBENCH_MACHINE"):
        return name
    dev = dev or device()
    if dev.type != "cuda":
        return f"cpu-{platform.machine().lower()}"
    return slug(torch.cuda.get_device_name(dev))


@cache
def _nvml_handle(dev_index: int):
    try:
        import pynvml

        pynvml.nvmlInit()
        uuid = str(getattr(torch.cuda.get_device_properties(dev_index), "uuid", "") or "")
        if uuid:
            return pynvml.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith("GPU-") else f"GPU-{uuid}")
        return pynvml.nvmlDeviceGetHandleByIndex(dev_index)
    except Exception:  # no NVML (no driver, no nvidia-ml-py): clocks are recorded as unknown
        return None


def clocks(dev: torch.device) -> dict:
    """SM and memory clocks (MHz), clock-event reasons, temperature (C) and power (W), now, and
    the board's enforced power limit (``power_limit_w``, W).

    Returns an empty dict on the CPU or where NVML is unavailable.
    """
    if dev.type != "cuda" or (h := _nvml_handle(dev.index or 0)) is None:
        return {}
    import pynvml

    out = {}
    try:
        out["sm_clock_mhz"] = pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM)
        out["mem_clock_mhz"] = pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM)
        getter = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
            pynvml.nvmlDeviceGetCurrentClocksThrottleReasons
        mask = getter(h)
        out["clock_event_reasons"] = [n for bit, n in CLOCK_EVENT_REASONS.items() if mask & bit]
        out["temperature_c"] = pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU)
        out["power_w"] = pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0
    except Exception as exc:  # older drivers lack some queries; keep what was read
        out["nvml_error"] = str(exc)
    try:
        out["power_limit_w"] = pynvml.nvmlDeviceGetEnforcedPowerLimit(h) / 1000.0
    except Exception:  # noqa: BLE001 - not every board reports it: energy figures then go unjudged
        pass
    return out


def gpu_identity(dev: torch.device) -> dict:
    """Which physical GPU ``dev`` is: ``{"gpu_index": int, "gpu_serial": str | None}``, NVML's
    index (of the GPUs NVML sees: inside a container, of the container's) and the board serial
    (None where NVML does not give one, e.g. GeForce boards). Found through the UUID torch
    reports, so it is right under ``CUDA_VISIBLE_DEVICES``. Empty on the CPU or without NVML.
    """
    if dev.type != "cuda" or (h := _nvml_handle(dev.index or 0)) is None:
        return {}
    import pynvml

    out: dict = {"gpu_index": None, "gpu_serial": None}
    try:
        out["gpu_index"] = int(pynvml.nvmlDeviceGetIndex(h))
    except Exception:  # noqa: BLE001 - unknown stays None
        pass
    try:
        serial = pynvml.nvmlDeviceGetSerial(h)
        out["gpu_serial"] = (serial.decode() if isinstance(serial, bytes) else str(serial)) or None
    except Exception:  # noqa: BLE001 - not supported on every board
        pass
    return out


#: Clock-event reasons that mean the GPU ran slower than it could (power or thermal capping, a
#: hardware slowdown): a case measured under one is contaminated. ``gpu_idle``,
#: ``applications_clocks_setting``, ``sync_boost`` and ``display_clock_setting`` are not.
THROTTLE_REASONS = ("sw_power_cap", "hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown",
                    "hw_power_brake_slowdown")


def other_processes(dev: torch.device) -> list[dict] | None:
    """Compute processes on ``dev``'s GPU other than this one (NVML), ``[{"pid", "mem_mib"}]``.

    NVML reports process ids of the host's PID namespace: inside a container this process is
    then listed under another id. When this process's id is not in the list, the list is taken
    to include this process once (its largest user of memory is assumed to be us, which holds
    since the suite allocates GBs), so "another process" means one more than ourselves.

    Returns None on the CPU or where NVML cannot say (no driver, query unsupported).
    """
    if dev.type != "cuda" or (h := _nvml_handle(dev.index or 0)) is None:
        return None
    import pynvml

    try:
        procs = [{"pid": int(p.pid), "mem_mib": round((p.usedGpuMemory or 0) / 2**20)}
                 for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h)]
    except Exception:
        return None
    me = os.getpid()
    if any(p["pid"] == me for p in procs):
        return [p for p in procs if p["pid"] != me]
    procs.sort(key=lambda p: p["mem_mib"])
    return procs[:-1]


#: Other work on the CPU above which a host-clock measurement is contaminated: half a core's
#: worth, of CPU time other processes used while it ran, else of the 1-minute load average less
#: this process's threads (:func:`contamination`).
HOST_LOAD_LIMIT = 0.5


#: Ticks per second of the CPU times ``/proc/stat`` and ``os.times`` count in.
_TICK_S = 1.0 / (os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100)


def _busy_s() -> float | None:
    """CPU seconds all cores have spent busy since boot (``/proc/stat``: all but idle and iowait),
    None where the host does not say."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
        ticks = [int(x) for x in fields[1:]]
        return (sum(ticks) - ticks[3] - (ticks[4] if len(ticks) > 4 else 0)) * _TICK_S
    except (OSError, ValueError, IndexError):
        return None


def host_sample() -> dict:
    """The CPU's load, now: the 1-minute load average (``os.getloadavg``), the cores, and this
    process's compute threads (``torch.get_num_threads``, at most the cores): the load that is
    ours; and, where the host counts CPU time, the CPU seconds every process (``busy_s``) and
    this one (``own_s``) have used, at ``t`` (monotonic seconds), from which
    :func:`contamination` reads what others used between two samples. Empty where the platform
    has no load average."""
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        return {}
    cores = os.cpu_count() or 1
    out = {"loadavg": round(load, 2), "cores": cores, "threads": min(torch.get_num_threads(), cores)}
    busy = _busy_s()
    if busy is not None:
        own = os.times()
        out.update(busy_s=busy, own_s=own.user + own.system, t=time.monotonic())
    return out


def _others_cores(host: list[dict]) -> tuple[float, float] | None:
    """``(cores other processes kept busy between the first and last of the host samples, the
    resolution of that figure)``; None where they carry no CPU times or the interval is too short
    for the counters' 10 ms ticks (a resolution above :data:`HOST_LOAD_LIMIT`). The resolution is
    a tick per core and one of ours over the interval."""
    timed = [s for s in host if all(isinstance(s.get(k), (int, float)) for k in ("busy_s", "own_s", "t"))]
    if len(timed) < 2:
        return None
    first, last = timed[0], timed[-1]
    dt = last["t"] - first["t"]
    resolution = (last["cores"] + 1) * _TICK_S / dt if dt > 0 else math.inf
    if resolution > HOST_LOAD_LIMIT:
        return None
    others = (last["busy_s"] - first["busy_s"] - (last["own_s"] - first["own_s"])) / dt
    return max(0.0, others), resolution


def gpu_sample(dev: torch.device) -> dict:
    """What a case's contamination check reads, now: SM clock (MHz), clock-event reasons, other
    compute processes (:func:`other_processes`); on the CPU the host's load (:func:`host_sample`:
    other processes share the host clock's cores). Empty on a GPU without NVML."""
    if dev.type != "cuda":
        return host_sample()
    if (h := _nvml_handle(dev.index or 0)) is None:
        return {}
    import pynvml

    out: dict = {}
    try:
        out["sm_clock_mhz"] = pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM)
        getter = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
            pynvml.nvmlDeviceGetCurrentClocksThrottleReasons
        mask = getter(h)
        out["clock_event_reasons"] = [n for bit, n in CLOCK_EVENT_REASONS.items() if mask & bit]
    except Exception as exc:  # keep what was read
        out["nvml_error"] = str(exc)
    others = other_processes(dev)
    if others is not None:
        out["other_processes"] = others
    return out


def contamination(samples: list[dict]) -> list[str]:
    """Why a measurement is contaminated, from the :func:`gpu_sample` readings taken around it.

    Returns one short text per cause (empty: clean): a throttle reason seen
    (:data:`THROTTLE_REASONS`), another compute process on the GPU, or on the CPU other load
    above :data:`HOST_LOAD_LIMIT` cores: the cores other processes kept busy between the first
    and last samples (beyond the counters' resolution over that interval) where the host counts
    CPU time and the interval is long enough to read it, else the highest load average of the
    samples less our threads.
    """
    reasons: list[str] = []
    host = [s for s in samples if "loadavg" in s]
    read = _others_cores(host)
    if read is not None:  # what others used while it ran, rather than a minute's average
        others, resolution = read
        if others > HOST_LOAD_LIMIT + resolution:
            reasons.append(f"other processes share the CPU ({others:.1f} of {host[-1]['cores']} cores "
                           f"busy beside ours while it ran)")
    elif host:
        worst = max(host, key=lambda s: s["loadavg"] - s["threads"])
        if worst["loadavg"] - worst["threads"] > HOST_LOAD_LIMIT:
            reasons.append(f"other processes share the CPU (load {worst['loadavg']:.0f} on "
                           f"{worst['cores']} cores, {worst['threads']} thread(s) ours)")
    for s in samples:
        for r in s.get("clock_event_reasons", ()):
            if r in THROTTLE_REASONS and f"throttled: {r}" not in reasons:
                reasons.append(f"throttled: {r}")
        for p in s.get("other_processes", ()):
            text = f"another process on the GPU: pid {p['pid']} ({p['mem_mib']} MiB)"
            if text not in reasons:
                reasons.append(text)
    return reasons


def _version(module: str) -> str | None:
    try:
        return __import__(module).__version__
    except Exception:
        return None


def git_commit() -> str | None:
    """``git rev-parse HEAD`` of the checkout, or None outside a git checkout."""
    out = git.answer(PROJECT_ROOT, "rev-parse", "HEAD")
    return out.strip() if out else None


def git_dirty() -> bool:
    """True when tracked files differ from HEAD (the result then is not exactly that commit's)."""
    out = git.answer(PROJECT_ROOT, "status", "--porcelain", "--untracked-files=no")
    return bool(out and out.strip())


def ram_bytes() -> str:
    """Physical memory in bytes, as asv's machine entry gives it (``"0"`` where unknown)."""
    try:
        return str(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError):
        return "0"


def capture(dev: torch.device) -> dict:
    """Everything a result must carry about where it was measured (JSON-serializable dict)."""
    env = {
        "device": dev.type,
        "host": platform.node(),
        "os": f"{platform.system()} {platform.release()}",
        "arch": platform.machine(),
        "cpu": platform.processor() or platform.machine(),
        "num_cpu": os.cpu_count(),
        "ram": ram_bytes(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": _version("triton"),
        "cuda_runtime": torch.version.cuda,
        "git_commit": git_commit(),
        "git_dirty": git_dirty(),
        # Set in the container (Dockerfile, `make bench`'s docker run); absent on a bare host.
        "image_digest": os.environ.get("FUSEBENCH_IMAGE_DIGEST") or None,
        "base_digest": os.environ.get("FUSEBENCH_BASE_DIGEST") or None,
        "lock_hash": os.environ.get("FUSEBENCH_LOCK_HASH") or None,
    }
    env["where"] = where(env)
    if dev.type == "cuda":
        props = torch.cuda.get_device_properties(dev)
        env.update(gpu=props.name, gpu_uuid=str(getattr(props, "uuid", "")),
                   sm_count=props.multi_processor_count,
                   l2_bytes=getattr(props, "L2_cache_size", None),
                   memory_bytes=props.total_memory,
                   capability=f"{props.major}.{props.minor}")
        if _nvml_handle(dev.index or 0) is not None:
            import pynvml

            env["driver"] = pynvml.nvmlSystemGetDriverVersion()
        env["clocks"] = clocks(dev)
    return env
