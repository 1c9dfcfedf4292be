"""Why a flagged case of ``fusebench ab`` moved: Nsight Compute's counters on both sides, once.

Where ncu and a GPU are here, every case ``ab`` judged a regression or an improvement on a GPU
figure is profiled once on each side after the rounds: the side's own ``python -m fusebench nsys
run`` (a command every revision with ``make nsys`` has) runs in the side's worktree, with the
side's environment, under ``ncu`` as ``make ncu`` runs it (application replay, caches not flushed,
:data:`CALLS` calls per range), and the head's parser reads both reports. Per case and side: DRAM
bytes per call, DRAM throughput as % of peak (weighted by kernel time), kernels per call. The
note (:func:`note`) says what changed:

* the DRAM bytes differ by more than :data:`SAME` (2 %): ``DRAM bytes +6.1 %``, then
  ``bandwidth same`` or ``DRAM throughput -3.0 %``: the change moves more (or less) data;
* else ``bytes same, DRAM throughput -5.0 %`` (a worse access pattern, more work between the
  loads) or ``bytes same, DRAM throughput same`` (the change is outside the DRAM traffic);
* the kernels per call differ: ``launches 1 -> 2``.

A case that moves under half its declared DRAM bytes on both sides ran from L2 (it is smaller
than the L2, and hot; :data:`FROM_L2`): its DRAM bytes are what the L2 let through, so its note
compares the L2's bytes instead: ``in L2 (DRAM 0.15x the declared bytes): L2 bytes +5.8 %``.

Without ncu, a GPU, or a permission to read the counters, nothing is profiled and one line says
why; ``--no-counters`` skips it. The figures are stored in the session (``ab.json``, key
``counters``) and read back, checked, by ``ab --from``.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable

from fusebench.gate import compare

#: Two figures within this fraction of each other are "same".
SAME = 0.02
#: Calls per range under ncu (each kernel is profiled on its own).
CALLS = 5
#: The most flagged cases profiled (the first in the verdict's order): each op's run covers the
#: product of its cases' backends, shapes and dtypes, and each replay pass runs it again.
MOST = 16
#: A case under this share of its declared bytes on both sides ran from L2.
FROM_L2 = 0.5
#: The statuses a note explains.
FLAGGED = (compare.REGRESSION, compare.IMPROVEMENT)
#: The figures kept per case and side (``RangeCounters.per_call``'s, and the declared bytes).
FIGURES = ("kernels", "dram_bytes", "dram_pct", "l2_bytes", "time_ns", "declared")
CASE = re.compile(r"[a-z][a-z0-9_]*/[a-z][a-z0-9_]*/[0-9]+(x[0-9]+)*/[a-z0-9]+")
SIDES = ("base", "head")


def _case(row: compare.Row) -> str | None:
    """``op/backend/shape/dtype`` of a row of a GPU figure (None for wall time, a CPU figure)."""
    _, op, metric = (row.benchmark.split(".") + ["", ""])[:3]
    if metric.startswith("track_wall_time"):
        return None
    return "/".join([op.lower(), *row.params])


def flagged(rows: list[compare.Row]) -> list[str]:
    """The cases with a GPU figure judged a regression or an improvement, in row order."""
    return list(dict.fromkeys(c for r in rows if r.status in FLAGGED and (c := _case(r))))


def _pct(new: float, old: float) -> float:
    return 100.0 * (new / old - 1.0)


def _differ(new: float | None, old: float | None) -> bool:
    return bool(new and old) and abs(new / old - 1.0) > SAME


def _count(value: float) -> str:
    return f"{value:.0f}" if abs(value - round(value)) < 0.01 else f"{value:.2f}"


def note(base: dict, head: dict) -> str:
    """The note for one case from each side's figures (the module doc's rule)."""
    b_bytes, h_bytes = base.get("dram_bytes") or 0.0, head.get("dram_bytes") or 0.0
    b_pct, h_pct = base.get("dram_pct"), head.get("dram_pct")
    b_l2, h_l2 = base.get("l2_bytes"), head.get("l2_bytes")
    declared = head.get("declared") or base.get("declared")
    throughput = (f"DRAM throughput {_pct(h_pct, b_pct):+.1f} %" if _differ(h_pct, b_pct)
                  else "DRAM throughput same")
    if declared and b_l2 and h_l2 and max(b_bytes, h_bytes) < FROM_L2 * declared:
        moved = f"L2 bytes {_pct(h_l2, b_l2):+.1f} %" if _differ(h_l2, b_l2) else "L2 bytes same"
        parts = [f"in L2 (DRAM {max(b_bytes, h_bytes) / declared:.2f}x the declared bytes): {moved}"]
    elif _differ(h_bytes, b_bytes):
        parts = [f"DRAM bytes {_pct(h_bytes, b_bytes):+.1f} %",
                 "bandwidth same" if throughput.endswith("same") else throughput]
    else:
        parts = ["bytes same", throughput]
    if round(base.get("kernels", 0), 2) != round(head.get("kernels", 0), 2):
        parts.append(f"launches {_count(base['kernels'])} -> {_count(head['kernels'])}")
    return ", ".join(parts)


def annotate(rows: list[compare.Row], counters: dict | None) -> list[compare.Row]:
    """``rows`` with each flagged row's note ending in its case's counter note (``ncu: ...``)."""
    cases = (counters or {}).get("cases") or {}
    out = []
    for r in rows:
        both = cases.get(_case(r) or "") if r.status in FLAGGED else None
        if both and all(side in both for side in SIDES):
            r = replace(r, note="; ".join(filter(None, (r.note, "ncu: " + note(both["base"], both["head"])))))
        out.append(r)
    return out


def lines(counters: dict | None) -> list[str]:
    """The run's line about the counters (none when no case was flagged)."""
    if not counters:
        return []
    if counters.get("skipped"):
        return [f"ab: counters: not profiled ({counters['skipped']})"]
    n = len(counters.get("cases") or {})
    of = f" of {counters['flagged']:.0f}" if counters.get("flagged", n) > n else ""
    return [f"ab: counters: {n}{of} flagged case(s) profiled once on each side with ncu in "
            f"{counters.get('seconds', 0):.0f} s (--no-counters, NO_COUNTERS=1 through make, skips it)"]


def about(counters: dict | None) -> dict:
    """The JSON verdict's ``counters`` entry (none when no case was flagged)."""
    return {"counters": counters} if counters else {}


def _program(python: str, op: str, cases: list[str], side_file: Path) -> list[str]:
    """``python -m fusebench nsys run`` of ``cases`` (one op): the backends, shapes and dtypes they
    name (their product: a case more may run, only these are read)."""
    from fusebench.nsys import tool

    axes = [list(dict.fromkeys(c.split("/")[i] for c in cases)) for i in (1, 2, 3)]
    return [python, "-m", "fusebench", "nsys", "run", *tool.driver_args(op, *(",".join(a) for a in axes)),
            "--calls", str(CALLS), "--json", str(side_file)]


def profile_side(ncu: str, python: str, tree: Path, env: dict, cases: list[str], folder: Path,
                 side: str) -> dict[str, dict]:
    """Profile ``cases`` with the code of ``tree``: each case's figures (``FIGURES``).

    Raises:
        RuntimeError: ncu or the side's driver failed (one line; the log in ``folder``).
        fusebench.nsys.ncu_tool.NcuUnavailable: the counters are not permitted.
    """
    from fusebench.nsys import capture_summary, ncu_csv, ncu_tool

    figures: dict[str, dict] = {}
    for op in dict.fromkeys(c.split("/")[0] for c in cases):
        mine = [c for c in cases if c.startswith(f"{op}/")]
        stem = folder / f"{side}-{op}"
        program = _program(python, op, mine, Path(f"{stem}.json"))
        cmd = ncu_tool.profile_command(ncu, str(stem), program)
        log = Path(f"{stem}.log")
        with log.open("w") as out:
            status, _ = ncu_tool.run_profile(cmd, cwd=tree, env=env, echo=out)
        if status != 0:
            raise RuntimeError(f"{side}: ncu of its nsys driver failed (exit {status}; log {log})")
        page = subprocess.run(ncu_tool.raw_csv_command(ncu, f"{stem}.ncu-rep"), capture_output=True,
                              text=True, errors="replace")
        if page.returncode != 0:
            raise RuntimeError(f"{side}: ncu could not read its report {stem}.ncu-rep")
        try:
            raw = ncu_csv.trimmed(page.stdout)
            Path(f"{stem}_raw.csv").write_text(raw)
            counters, _ = ncu_csv.by_range(ncu_csv.read(raw))
            side_file = capture_summary.load_side(f"{stem}.json")
        except (ncu_csv.CountersError, ValueError, OSError) as exc:
            raise RuntimeError(f"{side}: {exc}") from None
        from fusebench.nsys.nvtx_ranges import parse_range

        for case in side_file["cases"]:
            c = counters.get(parse_range(case["range"]))
            if case["range"] in mine and case.get("status") == "ok" and c is not None and c.kernels:
                figures[case["range"]] = {**c.per_call(case.get("calls")),
                                          "declared": float(case.get("bytes_moved") or 0)}
    return {k: {f: v.get(f) for f in FIGURES} for k, v in figures.items()}


def side_tree(measurer, side: str) -> tuple[Path, dict]:
    """The worktree a side's children ran in and their environment (``ab_probe.ABChildren``'s)."""
    from fusebench.gate import bisect_git

    if side in measurer.trees:
        tree, key = measurer.trees[side]
    else:
        sha = measurer.commits[side].sha
        tree, key = bisect_git.worktree(measurer.repo, measurer.cache / "worktrees", sha), sha
    return tree, measurer.env(tree, key)


def _gpu() -> bool:
    import torch

    return torch.cuda.is_available()


def explain(rows: list[compare.Row], measurer, folder: Path, ncu: str = "ncu",
            log: Callable[[str], None] = lambda line: None,
            clock: Callable[[], float] = time.monotonic) -> dict | None:
    """Profile the flagged cases on both sides (the module doc): ``{"cases": {case: {"base": ...,
    "head": ...}}, "seconds": ..., "calls": ...}``, or ``{"skipped": why}``, or None when nothing
    was flagged. Never raises for a missing tool or a failing side."""
    from fusebench.nsys import ncu_tool

    every = flagged(rows)
    cases = every[:MOST]
    if not cases:
        return None
    if not _gpu():
        return {"skipped": "no GPU here"}
    try:
        path, _ = ncu_tool.check(ncu)
    except ncu_tool.NcuUnavailable as exc:
        return {"skipped": str(exc).split(":")[0] if "not found" in str(exc) else str(exc)}
    start = clock()
    folder.mkdir(parents=True, exist_ok=True)
    log(f"counters: profiling {len(cases)} flagged case(s) once on each side with ncu (--no-counters skips)")
    found: dict[str, dict] = {}
    try:
        for side in SIDES:
            tree, env = side_tree(measurer, side)
            for case, figures in profile_side(path, measurer.python, tree, env, cases, folder, side).items():
                found.setdefault(case, {})[side] = figures
    except (RuntimeError, ncu_tool.NcuUnavailable, ValueError, OSError, KeyError, TypeError) as exc:
        return {"skipped": str(exc), "seconds": round(clock() - start, 1)}
    both = {c: f for c, f in found.items() if all(s in f for s in SIDES)}
    return {"cases": both, "seconds": round(clock() - start, 1), "calls": CALLS, "flagged": len(every),
            "folder": str(folder)}


def from_dict(data) -> dict | None:
    """The ``counters`` of a stored session, checked as untrusted input (None when absent).

    Raises:
        ValueError: one line saying what is wrong.
    """
    if data is None:
        return None
    if not isinstance(data, dict):
        raise ValueError("counters: not an object")

    def number(v, name):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise ValueError(f"counters: {name}: not a finite number of at least 0")
        return float(v)

    out: dict = {}
    if "skipped" in data:
        out["skipped"] = "".join(ch for ch in str(data["skipped"]) if ch.isprintable())[:300]
    for key in ("seconds", "flagged"):
        if key in data:
            out[key] = number(data[key], key)
    cases = data.get("cases", {})
    if not isinstance(cases, dict):
        raise ValueError("counters: cases: not an object")
    out["cases"] = {}
    for case, sides in cases.items():
        if not (isinstance(case, str) and CASE.fullmatch(case) and isinstance(sides, dict)
                and all(isinstance(sides.get(s), dict) for s in SIDES)):
            raise ValueError("counters: a case of a bad name or form")
        out["cases"][case] = {side: {f: number(sides[side][f], f"{case} {side} {f}") for f in FIGURES
                                     if sides[side].get(f) is not None} for side in SIDES}
    return out


def load(path: Path) -> dict | None:
    """The checked ``counters`` of the stored session at ``path`` (None when it has none).

    Raises:
        ValueError: as :func:`from_dict`, or not JSON.
    """
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    return from_dict(data.get("counters") if isinstance(data, dict) else None)

