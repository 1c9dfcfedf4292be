"""Nsight Systems: where it is, whether it is recent enough, and the exact commands a capture runs.

``fusebench nsys capture`` (what ``make nsys`` calls) runs these commands and prints each one;
the functions here are the only place they are spelled out.

* :func:`profile_command`: CUDA and NVTX tracing only (``-t cuda,nvtx``), no CPU sampling and no
  context-switch trace (``--sample=none --cpuctxsw=none``; ``-t osrt`` makes multi-GB traces),
  capture only between ``cudaProfilerStart`` and ``cudaProfilerStop``
  (``--capture-range=cudaProfilerApi --capture-range-end=stop``), so compilation and warm-up,
  done before the window, never land in the timeline.
* :func:`stats_command`: ``nsys stats`` writing one CSV per report, ``<prefix>_<report>.csv``.
* :data:`MIN_VERSION`: nsys before 2024.3 silently drops the ranges of ``nvtx`` >= 0.2.12
  (seen on an H200 with nvtx 0.2.16).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess

#: Oldest nsys (year, release) that keeps the ranges of the nvtx package this project pins.
MIN_VERSION: tuple[int, int] = (2024, 3)

#: ``nsys profile`` options of a capture.
PROFILE_OPTIONS: tuple[str, ...] = (
    "-t", "cuda,nvtx", "--sample=none", "--cpuctxsw=none",
    "--capture-range=cudaProfilerApi", "--capture-range-end=stop",
)

#: Reports a capture asks ``nsys stats`` for (their 2024+ names).
STATS_REPORTS: tuple[str, ...] = ("nvtx_gpu_proj_sum", "nvtx_kern_sum")

#: Folder of ``make nsys`` and ``make trace`` outputs, relative to the repository root.
FOLDER = "nsys"

HOW_TO_GET = (
    "install Nsight Systems 2024.3 or newer (https://developer.nvidia.com/nsight-systems; it also "
    "ships in the CUDA toolkit and inside Nsight Compute as host/target-linux-x64/nsys) and put "
    "nsys on PATH or pass NSYS=/path/to/nsys; `make trace OP=...` needs no nsys"
)


class NsysUnavailable(Exception):
    """nsys is missing, cannot run, or is too old; the message says what to do (one line)."""


def profile_command(nsys: str, output: str, program: list[str]) -> list[str]:
    """``nsys profile`` of ``program`` writing ``<output>.nsys-rep`` (overwritten if present).

    Args:
        nsys: the nsys executable (``NSYS=``).
        output: report path without extension, e.g. ``nsys/gelu-h200-1a2b3c4``.
        program: the command to profile, e.g. ``["python3", "-m", "fusebench", "nsys", "run", ...]``.
    """
    return [nsys, "profile", *PROFILE_OPTIONS, "-o", output, "-f", "true", *program]


def stats_command(nsys: str, prefix: str, report: str) -> list[str]:
    """``nsys stats`` of ``report`` (a ``.nsys-rep``) writing ``<prefix>_<name>.csv`` per report.

    ``-q`` drops the progress lines. nsys exports ``<report stem>.sqlite`` beside the report first.
    """
    return [nsys, "stats", "-q", "-r", ",".join(STATS_REPORTS), "--format", "csv", "-o", prefix,
            report]


def driver_args(op: str, backends: str | None = None, shapes: str | None = None,
                dtypes: str | None = None) -> list[str]:
    """The selection options of ``fusebench nsys``, as the Makefile passes them.

    ``--op=<op>`` in one word, so that an empty ``OP=`` reaches the driver (which names the valid
    ops) instead of argparse.
    """
    args = [f"--op={op}"]
    for flag, value in (("--backends", backends), ("--shapes", shapes), ("--dtypes", dtypes)):
        if value:
            args += [flag, value]
    return args


def report_stem(op: str, machine: str, commit: str | None, folder: str = FOLDER) -> str:
    """``nsys/<op>-<machine>-<short sha>``: the path of a capture's files without extension.

    ``commit`` is the full git sha (its first 7 characters are used), or None outside a git
    checkout (``nogit``).
    """
    return f"{folder}/{op}-{machine}-{commit[:7] if commit else 'nogit'}"


def parse_version(text: str) -> tuple[int, int, int] | None:
    """``"NVIDIA Nsight Systems version 2025.3.1.90-253135822126v0"`` -> ``(2025, 3, 1)``.

    Returns None when ``text`` holds no ``YYYY.N[.N]`` version.
    """
    m = re.search(r"\b(20\d\d)\.(\d+)(?:\.(\d+))?", text)
    return (int(m[1]), int(m[2]), int(m[3] or 0)) if m else None


def read_version(path: str, unavailable: type[Exception], how_to_get: str) -> tuple[int, int, int]:
    """``<path> --version`` read as ``(year, release, patch)`` (Nsight Systems' and Compute's alike).

    Raises:
        unavailable: it does not run, fails, or prints no version (the message ends in ``how_to_get``).
    """
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise unavailable(f"{path} --version failed: {exc}") from exc
    text = (out.stdout + out.stderr).strip()
    version = parse_version(text)
    if out.returncode != 0 or version is None:
        first = text.splitlines()[0] if text else f"exit status {out.returncode}"
        raise unavailable(f"cannot read the version of {path} ({first}); {how_to_get}")
    return version


def locate(nsys: str) -> str:
    """Absolute path of the nsys executable named by ``nsys`` (a path, or a name on PATH).

    Raises:
        NsysUnavailable: not found or not executable (the message says how to get it).
    """
    found = shutil.which(nsys)
    if found is None or not os.access(found, os.X_OK):
        raise NsysUnavailable(f"nsys not found (NSYS={nsys}): {HOW_TO_GET}")
    return found


def check(nsys: str) -> tuple[int, int, int]:
    """Locate ``nsys``, read ``nsys --version`` and refuse versions older than :data:`MIN_VERSION`.

    Returns:
        The version, e.g. ``(2025, 3, 1)``.

    Raises:
        NsysUnavailable: not found, ``--version`` fails or prints no version, or too old.
    """
    path = locate(nsys)
    version = read_version(path, NsysUnavailable, HOW_TO_GET)
    if version[:2] < MIN_VERSION:
        have = ".".join(map(str, version))
        need = ".".join(map(str, MIN_VERSION))
        raise NsysUnavailable(
            f"{path} is Nsight Systems {have}: versions before {need} silently drop the NVTX ranges "
            f"of the nvtx package >= 0.2.12; {HOW_TO_GET}")
    return version
