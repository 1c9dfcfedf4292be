"""This host's asv machine name, known without torch.

A run names its machine after the GPU it measured on (``fusebench.measure.environment.machine_name``,
which asks torch for the device it times). The commands that only read stored results (``compare``
and ``make compare``'s hint) need the same name to pick this host's results by default, in a Python
without torch (issue 43): the GPU's model comes from NVML here, the driver's own name for it, the
one torch reports too. The stored files cannot say it: ``results/<machine>/machine.json`` and the
records say which GPU each stored machine had, not which of them this host is.
"""

from __future__ import annotations

import importlib.util
import os
import platform
import re

#: The variable that names the machine instead of the GPU model (a deployment's own name).
MACHINE_ENV = "FUSEBENCH_MACHINE"


def slug(gpu_name: str) -> str:
    """Lowercase, vendor dropped, other runs as ``-``: ``"NVIDIA H100 80GB HBM3"`` -> ``"h100-80gb-hbm3"``."""
    name = re.sub(r"\b(nvidia|geforce)\b", "", gpu_name.lower())
    return re.sub(r"[^a-z0-9]+", "-", name).strip("-") or "gpu"


def cpu_machine() -> str:
    """The machine name of a run on the CPU: ``cpu-<arch>`` (``cpu-x86_64``)."""
    return f"cpu-{platform.machine().lower()}"


def is_cpu(machine: str) -> bool:
    """A CPU machine's name (:func:`cpu_machine`: ``cpu-<arch>``), whose host-clock figures are
    shown, never judged."""
    return machine.startswith("cpu-")


def _nvml_gpu() -> str | None:
    """The model of the first GPU this process may use (``CUDA_VISIBLE_DEVICES``' first entry, an
    index or a UUID; set and empty: none), as NVML names it; "" when NVML sees none, None when NVML
    cannot say (no driver, no nvidia-ml-py)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    first = "0" if visible is None else next((v.strip() for v in visible.split(",") if v.strip()), "")
    if not first:
        return ""
    try:
        import pynvml

        pynvml.nvmlInit()
        if pynvml.nvmlDeviceGetCount() == 0:
            return ""
        handle = (pynvml.nvmlDeviceGetHandleByIndex(int(first)) if first.isdigit()
                  else pynvml.nvmlDeviceGetHandleByUUID(first))
        name = pynvml.nvmlDeviceGetName(handle)
        return name.decode() if isinstance(name, bytes) else str(name)
    except Exception:  # noqa: BLE001 - no NVML here (a CPU host, a container without the driver)
        return None


def this_machine() -> str:
    """This host's asv machine: ``FUSEBENCH_MACHINE``; else the slug of its GPU's model (NVML);
    else, where NVML cannot say and torch is installed, torch's answer (as a run names it); else
    ``cpu-<arch>``."""
    if name := os.environ.get(MACHINE_ENV):
        return name
    gpu = _nvml_gpu()
    if gpu:
        return slug(gpu)
    if gpu is None and _has_torch():  # as a run asks (environment.machine_name), without its module
        import torch

        if torch.cuda.is_available():
            return slug(torch.cuda.get_device_name(torch.cuda.current_device()))
    return cpu_machine()


def _has_torch() -> bool:
    try:
        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):  # blocked, or a half-imported module without a spec
        return False
