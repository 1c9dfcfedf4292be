"""Fake ops and GPU identities for the CPU emulation of ``fusebench.measure.workers`` (tests/test_workers.py).

Imported by name in the spawned workers (``Job.registry = "workerops:ops"``): everything here is
module-level. A worker knows its fake GPU from ``CUDA_VISIBLE_DEVICES``, set by the parent.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from fusebench.registry import Op

#: Set by the test: a folder the fake workers use to order themselves (see ``_fragile``).
DIR_ENV = "FUSEBENCH_TEST_WORKERS_DIR"

TOY = Op("toy", reference=lambda x: x.double() * 2, grids={"cpu": [(64,), (128,), (256,)]},
         dtypes=("float32",))
TOY.backend("eager")(lambda x: (lambda: x * 2))
TOY.backend("torch")(lambda x: (lambda: x + x))


def _fragile(x):
    """Fake GPU 1 dies (exit code 3) building its first case; fake GPU 0 waits until it has, so
    that GPU 1 is sure to take one case before GPU 0 drains the queue."""
    folder = Path(os.environ[DIR_ENV])
    if os.environ.get("CUDA_VISIBLE_DEVICES") == "1":
        (folder / "dying").touch()
        os._exit(3)
    deadline = time.monotonic() + 120
    while not (folder / "dying").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return lambda: x * 2


def _dies_late(x):
    """Fake GPU 1 takes a case, then dies (exit code 3) only after fake GPU 0 has had time to
    build the rest and wait between the phases (the barrier a dead worker never reaches)."""
    folder = Path(os.environ[DIR_ENV])
    if os.environ.get("CUDA_VISIBLE_DEVICES") == "1":
        (folder / "took").touch()
        time.sleep(4)
        os._exit(3)
    deadline = time.monotonic() + 120
    while not (folder / "took").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return lambda: x * 2


LATE = Op("late", reference=lambda x: x.double() * 2, grids={"cpu": [(64,), (128,), (256,)]},
          dtypes=("float32",))
LATE.backend("eager")(_dies_late)

FRAGILE = Op("fragile", reference=lambda x: x.double() * 2, grids={"cpu": [(64,), (128,), (256,)]},
             dtypes=("float32",))
FRAGILE.backend("eager")(_fragile)

OPS = {op.name: op for op in (TOY, FRAGILE, LATE)}


def ops(case_file: str | None) -> dict:
    """The registry a worker reads (``Job.registry``), as ``fusebench.ops.configured`` is: the fake
    ops, whatever the case file."""
    return OPS


def identify(dev) -> dict:
    """Fake GPU identity: index from ``CUDA_VISIBLE_DEVICES``, serial ``SN<index>``, one model."""
    index = os.environ["CUDA_VISIBLE_DEVICES"]
    return {"gpu_index": int(index), "gpu_serial": f"SN{index}", "gpu": "NVIDIA Fake H200"}


def identify_two_models(dev) -> dict:
    """As :func:`identify`, but fake GPU 1 is another model (``Fake B200``)."""
    out = identify(dev)
    if out["gpu_index"] == 1:
        out["gpu"] = "NVIDIA Fake B200"
    return out
