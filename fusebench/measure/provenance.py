"""Provenance: a figure stored in ``results/`` is what its name says it is.

asv files a result under a commit and a backend name. Two ways a run could store figures that
are not that commit's or not that backend's, both checked before anything is measured
(``fusebench bench`` calls :func:`before_sweep` right after its arguments are parsed):

1. **The commit.** A working tree whose measured files (:data:`MEASURED`) differ from HEAD
   would be stored under a commit that never produced those figures. Such a run is refused for
   ``results/`` before the sweep starts (exit 2, one line naming the first changed files).
   ``--dirty`` (``make bench DIRTY=1``) measures it anyway into :data:`DIRTY_RESULTS`, a scratch
   folder like the quick and partial ones (never published, never plotted), and the sweep
   records the changed files (``provenance`` in its environment). Quick, partial and explicit
   ``--results`` folders are scratch already: a dirty tree may go there, marked the same way.
   What does not count: files outside :data:`MEASURED` (README, notes, ``results/``, ``plots/``,
   ``reports/``, ``Makefile``); files git ignores (``__pycache__``, ``.venv/``, the GPU host's
   ``.device/``); mode bits (a copy of the tree onto another host may lose them, and they change
   nothing that runs). The check is repeated after the sweep (:meth:`Check.after`): a measured
   file edited while the sweep ran sends the run to the scratch folder as well.

2. **The backend.** A backend run in a non-native mode (Triton's interpreter, torch.compile
   switched off, every CUDA launch made blocking: :data:`MODES`) gives figures that are not that
   backend's. Choice made here: such a run is **refused**, wherever it would be stored (exit 2,
   one line naming the mode, the backends it touches, and the way out: unset the variable or
   leave those backends out). A 182 ms interpreter time filed as ``triton`` misleads in a
   scratch folder as much as in ``results/``, and nothing needs one stored: the tests run the
   interpreter without ``make bench``. Only the run's backends count (``TRITON_INTERPRET=1``
   with ``BACKENDS=eager,torch`` measures nothing in the interpreter), and GPU-only modes count
   only on a GPU. The sweep records the modes checked (``provenance.native``: true) so a
   stored sweep says it was measured natively.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from fusebench import git
from fusebench.errors import UsageError
from fusebench.measure import environment
from fusebench.paths import DIRTY_RESULTS, PROJECT_ROOT  # noqa: F401  (DIRTY_RESULTS: this module's name)

#: What a stored figure depends on, relative to the checkout (folders end with ``/``): the
#: harness, the ops (``kernels/``), the asv suite, the entry points of a measurement, the pinned
#: dependencies and image, the asv configuration. The one list every check reads.
MEASURED: tuple[str, ...] = (
    "fusebench/", "kernels/", "benchmarks/", "scripts/entrypoint.sh", "fusebench.yaml",
    "requirements.lock", "Dockerfile", "asv.conf.json",
)

#: Where ``--dirty`` stores a run that would have gone to ``results/``, relative to the checkout:
#: :data:`fusebench.paths.DIRTY_RESULTS` (imported above), named there so that ``--help`` needs no torch.

#: How many changed files the refusal names before "and N more".
SHOWN = 3


def changed_files(root: Path) -> list[str]:
    """The measured files (:data:`MEASURED`) of the git checkout ``root`` that differ from HEAD.

    Counts tracked files modified, staged, deleted or renamed, and untracked files that git does
    not ignore, under :data:`MEASURED`; mode-only changes do not count (``core.fileMode=false``).
    Uses ``git status`` (which compares contents when timestamps differ, so a copied tree whose
    files equal HEAD's is clean).

    Returns:
        Paths relative to ``root``, sorted; empty for a clean tree.

    Raises:
        UsageError: ``git status`` cannot run or fails in ``root``.
    """
    try:
        done = git.run(root, "-c", "core.fileMode=false", "status", "--porcelain=v1", "-z",
                       "--untracked-files=all", "--", *MEASURED)
    except UsageError as exc:
        raise UsageError(f"cannot tell whether the measured files differ from HEAD: {exc}") from None
    if done.returncode != 0:
        detail = done.stderr.strip()
        raise UsageError(f"cannot tell whether the measured files differ from HEAD: git status failed: "
                         f"{detail.splitlines()[0] if detail else done.returncode}")
    out = done.stdout
    entries, paths = out.split("\0"), set()
    i = 0
    while i < len(entries):
        entry = entries[i]
        i += 1
        if len(entry) < 4:
            continue
        status, path = entry[:2], entry[3:]
        paths.add(path)
        if "R" in status or "C" in status:  # -z: a rename's source path follows as its own entry
            paths.add(entries[i])
            i += 1
    return sorted(paths)


def describe(paths: list[str], shown: int = SHOWN) -> str:
    """``"kernels/gelu/triton.py, benchmarks/suite.py and 2 more"``: the first ``shown`` paths."""
    text = ", ".join(paths[:shown])
    return f"{text} and {len(paths) - shown} more" if len(paths) > shown else text


# --- non-native modes ---------------------------------------------------------------------------

def _triton_interprets() -> bool:
    """True when Triton would run its kernels in its interpreter (Triton's own reading of
    ``TRITON_INTERPRET``: ``triton.knobs.runtime.interpret``, which accepts 1/true/on/yes)."""
    try:
        from triton import knobs

        return bool(knobs.runtime.interpret)
    except (ImportError, AttributeError):  # no triton, or one before knobs: the same rule
        return os.environ.get("TRITON_INTERPRET", "").strip().lower() in ("1", "true", "on", "yes")


def _env_is(name: str, *values: str) -> Callable[[], bool]:
    """A check that ``name`` is set to one of ``values`` (any value but empty and 0 when none given)."""
    def on() -> bool:
        value = os.environ.get(name, "").strip().lower()
        return value in values if values else value not in ("", "0")
    return on


@dataclass(frozen=True)
class Mode:
    """A setting that makes some backends run other than natively.

    Attributes:
        setting: the variable(s), as the user sets them (``"TRITON_INTERPRET"``).
        what: what the backend then does, as a phrase after "would run" / "would be".
        active: ``active()`` is True when the setting is on in this process.
        backends: the backends it touches (None: every backend).
        gpu_only: it changes nothing on the CPU.
        source: where the library reads it.
    """

    setting: str
    what: str
    active: Callable[[], bool]
    backends: tuple[str, ...] | None
    gpu_only: bool
    source: str


#: Every non-native mode checked before a sweep. Adding one is one entry.
MODES: tuple[Mode, ...] = (
    Mode("TRITON_INTERPRET", "in Triton's interpreter (emulated on the host)",
         # liger and flaggems are Triton kernels too (QuACK's are CuTe DSL)
         _triton_interprets, ("triton", "liger", "flaggems"), False,
         "triton/knobs.py runtime_knobs.interpret"),
    # Inductor's GPU kernels are Triton kernels: it loads them into the interpreter too
    # (torch/_inductor/async_compile.py, runtime/triton_heuristics.py: TRITON_INTERPRET == "1").
    Mode("TRITON_INTERPRET", "with Inductor's Triton kernels in Triton's interpreter",
         _env_is("TRITON_INTERPRET", "1"), ("compile",), True, "torch/_inductor/async_compile.py"),
    Mode("TORCH_COMPILE_DISABLE", "as the eager function (torch.compile switched off)",
         _env_is("TORCH_COMPILE_DISABLE", "1"), ("compile",), False, "torch/_dynamo/config.py disable"),
    Mode("TORCHDYNAMO_DISABLE", "as the eager function (torch.compile switched off)",
         _env_is("TORCHDYNAMO_DISABLE", "1"), ("compile",), False, "torch/_dynamo/eval_frame.py optimize"),
    Mode("CUDA_LAUNCH_BLOCKING", "with every CUDA launch waiting for the GPU (no launch overlap)",
         _env_is("CUDA_LAUNCH_BLOCKING"), None, True, "the CUDA driver"),
    Mode("PYTORCH_NO_CUDA_MEMORY_CACHING", "with PyTorch's caching allocator off (a cudaMalloc per output)",
         _env_is("PYTORCH_NO_CUDA_MEMORY_CACHING"), None, True, "c10/cuda/CUDACachingAllocator.cpp"),
)


def non_native(backends: Iterable[str], gpu: bool) -> list[tuple[Mode, list[str]]]:
    """The active :data:`MODES` that touch some of ``backends`` on this device, with those backends.

    Args:
        backends: the run's backend names.
        gpu: the run measures on a GPU (GPU-only modes count only then).
    """
    backends = list(backends)
    found = []
    for mode in MODES:
        touched = [b for b in backends if mode.backends is None or b in mode.backends]
        if touched and (gpu or not mode.gpu_only) and mode.active():
            found.append((mode, touched))
    return found


def refuse_non_native(backends: Iterable[str], gpu: bool) -> None:
    """Refuse a run in which a backend would run non-natively (module docstring, item 2).

    Raises:
        UsageError: one line naming the first such mode, the backends it touches and the way
            out (unset the variable, or leave those backends out).
    """
    backends = list(backends)
    found = non_native(backends, gpu)
    if not found:
        return
    mode, touched = found[0]
    rest = [b for b in backends if b not in touched]
    out = f"unset {mode.setting}" + (f", or leave {' and '.join(touched)} out (BACKENDS={','.join(rest)})"
                                     if rest else "")
    raise UsageError(f"{mode.setting} is set: {' and '.join(touched)} would run {mode.what}, not "
                     f"{' and '.join(touched)}'s own figures, which are never stored; {out}")


# --- the check bench.py runs --------------------------------------------------------------------

@dataclass
class Check:
    """The outcome of :func:`before_sweep`: where the run stores, and what the sweep is marked with.

    Attributes:
        results: the results folder to use (``DIRTY_RESULTS`` when a dirty run was let through).
        changed: measured files that differed from HEAD before the sweep.
        root: the checkout.
    """

    results: Path
    changed: list[str]
    root: Path

    def after(self, env: dict) -> Path:
        """Check the tree again after the sweep, mark ``env`` (the sweep's environment), and
        return the results folder to store into.

        A measured file changed during the sweep sends a run bound for ``results/`` to
        :data:`DIRTY_RESULTS` (with a line on stderr): what was measured is then neither HEAD
        nor the tree as it is now.
        """
        now = changed_files(self.root)
        results = self.results
        if now != self.changed and _is_results(results, self.root):
            results = self.root / DIRTY_RESULTS
            print(f"bench: measured files changed during the sweep ({describe(now) or 'restored'}): "
                  f"stored in {DIRTY_RESULTS}, not results/", file=sys.stderr)
        changed = sorted(set(self.changed) | set(now))
        env["provenance"] = {"dirty": bool(changed), "changed_files": changed, "native": True,
                             "modes_checked": sorted({m.setting for m in MODES})}
        return results


def _is_results(folder: Path, root: Path) -> bool:
    return Path(folder).resolve() == (root / "results").resolve()


def before_sweep(results: Path, backends: Iterable[str], *, dirty: bool = False, gpu: bool | None = None,
          root: Path = PROJECT_ROOT) -> Check:
    """Run both checks of the module docstring before a sweep.

    Args:
        results: the folder the run would store into (``results/`` or a scratch folder).
        backends: the run's backend names.
        dirty: the user asked to measure a dirty tree anyway (``--dirty``).
        gpu: the run measures on a GPU (default: ``environment.device()`` is a GPU).
        root: the git checkout (default: this one).

    Returns:
        A :class:`Check`; its ``results`` is ``root/DIRTY_RESULTS`` for a dirty run bound for
        ``results/`` that ``dirty`` lets through, else ``results``.

    Raises:
        UsageError: a backend would run non-natively; or the tree is dirty, the run is bound
            for ``results/`` and ``dirty`` is False (the line names the first changed files and
            ``make bench DIRTY=1``); or git cannot tell.
    """
    refuse_non_native(backends, environment.device().type == "cuda" if gpu is None else gpu)
    changed = changed_files(root)
    if changed and _is_results(results, root):
        if not dirty:
            raise UsageError(f"measured files differ from HEAD ({describe(changed)}): results/ keeps only "
                             f"committed code; commit them, or measure anyway into {DIRTY_RESULTS} "
                             f"with make bench DIRTY=1 (--dirty)")
        return Check(root / DIRTY_RESULTS, changed, root)
    return Check(results, changed, root)
