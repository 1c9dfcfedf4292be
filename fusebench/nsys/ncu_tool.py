"""Nsight Compute's CLI (``ncu``): where it is, whether the counters may be read, and the exact commands.

``fusebench ncu capture`` (``make ncu``) and ``fusebench ab``'s counter notes run these commands;
the functions here are the only place they are spelled out.

* :func:`profile_command`: the program runs once per replay pass (``--replay-mode
  application``: each pass collects some of :data:`METRICS`, the kernels run as the program
  runs them, one after another), from ``cudaProfilerStart`` on (``--profile-from-start off``:
  building, gating and warming up the cases is not profiled), with the caches left as the
  program leaves them (``--cache-control none``: no flush before each kernel, so a kernel reads
  what the one before it left in L2), and the NVTX ranges recorded (``--nvtx``).
* :func:`raw_csv_command`: the report's raw page as CSV, one row per kernel, base units.
* :func:`permission_problem`: the driver lets only administrators read the GPU's performance
  counters (``ERR_NVGPUCTRPERM``).

:data:`METRICS`: the time of each kernel, its DRAM bytes read and written, its DRAM throughput as
a share of the peak, the L2's sector hit rate and the L2's bytes (the weight of the hit rate when
the kernels of a call are summed).
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from pathlib import Path

from fusebench.nsys.tool import parse_version, read_version

#: Where Nsight Compute installs itself (``/opt/nvidia/nsight-compute/<version>/ncu``), looked at when
#: ``ncu`` is not on PATH.
INSTALL_GLOB = "/opt/nvidia/nsight-compute/*/ncu"

#: The metrics every capture collects (Nsight Compute's names; the raw CSV's columns of the same
#: names): each kernel's time, DRAM bytes read and written, DRAM throughput as % of peak.
DRAM_METRICS: tuple[str, ...] = (
    "gpu__time_duration.sum",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
)
#: The L2's sector hit rate and its bytes (the hit rate's weight; what a case held in L2 moves).
L2_METRICS: tuple[str, ...] = ("lts__t_sector_hit_rate.pct", "lts__t_bytes.sum")
METRICS: tuple[str, ...] = DRAM_METRICS + L2_METRICS

#: ``ncu`` options of a capture (the module doc says why each).
PROFILE_OPTIONS: tuple[str, ...] = (
    "--nvtx", "--profile-from-start", "off", "--cache-control", "none", "--replay-mode", "application",
)

#: The error ncu prints when the driver keeps the counters for administrators.
PERMISSION_ERROR = "ERR_NVGPUCTRPERM"

#: The driver's setting, as ``/proc/driver/nvidia/params`` shows it (1: administrators only).
DRIVER_PARAMS = Path("/proc/driver/nvidia/params")

PERMISSION_HOW = (
    f"the driver lets only administrators read the GPU performance counters ({PERMISSION_ERROR}): "
    "load the nvidia module with NVreg_RestrictProfilingToAdminUsers=0 (e.g. a line "
    "'options nvidia NVreg_RestrictProfilingToAdminUsers=0' in /etc/modprobe.d/, then reboot), or run as root"
)

HOW_TO_GET = (
    "install Nsight Compute (https://developer.nvidia.com/nsight-compute; the CUDA toolkit ships it "
    "as /opt/nvidia/nsight-compute/<version>/ncu) and put ncu on PATH or pass NCU=/path/to/ncu"
)


class NcuUnavailable(Exception):
    """ncu is missing, cannot run, or may not read the counters; the message says what to do (one line)."""


def profile_command(ncu: str, output: str, program: list[str],
                    metrics: tuple[str, ...] = METRICS) -> list[str]:
    """``ncu`` of ``program`` collecting ``metrics``, writing ``<output>.ncu-rep`` (overwritten)."""
    return [ncu, *PROFILE_OPTIONS, "--metrics", ",".join(metrics), "-f", "-o", output, *program]


def raw_csv_command(ncu: str, report: str) -> list[str]:
    """``ncu -i <report>`` printing the raw page as CSV on stdout: a header row, a units row, one
    row per kernel, numbers in base units (bytes, ns, %)."""
    return [ncu, "-i", report, "--csv", "--page", "raw", "--print-units", "base"]


def _installed() -> list[str]:
    """The ncu executables under :data:`INSTALL_GLOB`, newest version first."""
    found = [p for p in glob.glob(INSTALL_GLOB) if os.access(p, os.X_OK)]
    return sorted(found, key=lambda p: parse_version(Path(p).parent.name) or (0, 0, 0), reverse=True)


def locate(ncu: str = "ncu") -> str:
    """Absolute path of the ncu executable: ``ncu`` as a path or a name on PATH, else (for the
    plain name ``ncu``) the newest of :data:`INSTALL_GLOB`.

    Raises:
        NcuUnavailable: not found (the message says how to get it).
    """
    found = shutil.which(ncu)
    if found is None and ncu == "ncu":
        found = next(iter(_installed()), None)
    if found is None or not os.access(found, os.X_OK):
        where = f"NCU={ncu}, nor {INSTALL_GLOB}" if ncu == "ncu" else f"NCU={ncu}"
        raise NcuUnavailable(f"ncu not found ({where}): {HOW_TO_GET}")
    return found


def version(path: str) -> tuple[int, int, int]:
    """``ncu --version`` of the executable at ``path``, e.g. ``(2025, 3, 1)``.

    Raises:
        NcuUnavailable: it does not run or prints no version.
    """
    return read_version(path, NcuUnavailable, HOW_TO_GET)


def admin_only(params: Path | None = None) -> bool:
    """Whether the loaded driver keeps the counters for administrators (``RmProfilingAdminOnly: 1``
    in ``params``); False when the file is not there or does not say."""
    try:
        text = (params or DRIVER_PARAMS).read_text(errors="replace")
    except OSError:
        return False
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "RmProfilingAdminOnly":
            return value.strip() == "1"
    return False


def permission_problem(params: Path | None = None) -> str | None:
    """The one line saying why this user may not read the counters, or None when it may (or the
    driver does not say: ncu's own ``ERR_NVGPUCTRPERM`` is then the check)."""
    if admin_only(params) and os.geteuid() != 0:
        return PERMISSION_HOW
    return None


def check(ncu: str = "ncu", params: Path | None = None) -> tuple[str, tuple[int, int, int]]:
    """Locate ncu, read its version, and refuse when the driver keeps the counters for administrators.

    Returns:
        ``(path, version)``.

    Raises:
        NcuUnavailable: not found, no version, or counters not permitted (one line each).
    """
    path = locate(ncu)
    found = version(path)
    if why := permission_problem(params):
        raise NcuUnavailable(why)
    return path, found


#: ncu's line for each kernel of each pass (``==PROF== Profiling "k" - 12: Application replay pass 2``):
#: counted, not echoed (a capture makes hundreds).
KERNEL_LINE = '==PROF== Profiling "'


def run_profile(cmd: list[str], cwd: str | Path | None = None, env: dict | None = None,
                echo=None) -> tuple[int, int]:
    """Run an ``ncu`` profile command, echoing its output (and the program's) to ``echo`` but for
    the per-kernel lines, which are counted.

    Returns:
        ``(exit status, kernel lines)``: the kernels profiled, summed over the replay passes.

    Raises:
        NcuUnavailable: ncu said the counters are not permitted (``ERR_NVGPUCTRPERM``), or the
            executable does not run.
    """
    import sys

    echo = echo or sys.stderr
    denied, kernels = False, 0
    try:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, errors="replace")
    except OSError as exc:
        raise NcuUnavailable(f"{cmd[0]} did not start: {exc}") from exc
    with proc:
        for line in proc.stdout:
            denied = denied or PERMISSION_ERROR in line
            if line.startswith(KERNEL_LINE):
                kernels += 1
            else:
                echo.write(line)
                echo.flush()
    if denied:
        raise NcuUnavailable(PERMISSION_HOW)
    return proc.returncode, kernels
