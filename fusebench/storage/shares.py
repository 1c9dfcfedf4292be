"""Shares of one run: the files of one commit and asv machine measured in parts by several tasks.

A Slurm array can split one machine's grid between its tasks (``deploy/slurm/fusebench.sbatch``,
``FUSEBENCH_TASK_ARGS='--ops gelu;--ops softmax,rmsnorm'``). Each task then leaves an asv result
file and a run record of the same name as the others' (same commit, machine and environment),
each holding only its own ops' cases. ``make collect`` (``fusebench.storage.collect``) merges
them into one, as a run of some ops adds to what is stored (``store.stage``,
``runrecord.save``): only when the cases are disjoint; two files giving one case are never
merged (the same case measured twice is a conflict, whatever its values).

The functions take and return parsed JSON and never write: the caller writes the merged file.
"""

from __future__ import annotations

import statistics

#: asv result file fields that must agree for two shares to be one run (``results`` and
#: ``durations`` are merged; ``date`` is the commit's date, the same for shares of one commit).
RESULT_IDENTITY = ("version", "commit_hash", "env_name", "python", "params", "requirements",
                   "env_vars", "result_columns")
#: Run record fields that must agree (the ones every case of a run was measured under).
RECORD_IDENTITY = ("format_version", "grid", "rounds")


def _key(record: dict) -> tuple:
    return tuple(record.get(k) for k in ("op", "backend", "shape", "dtype"))


def merge_results(a: dict, b: dict) -> tuple[dict | None, str]:
    """Two asv result files (asv's format 2) of one commit, machine and environment as one.

    Returns ``(merged, "")``, or ``(None, why)`` when they are not shares of one run: another
    commit or environment, other result columns, or a benchmark in both.
    """
    if not all(isinstance(x, dict) and isinstance(x.get("results"), dict) for x in (a, b)):
        return None, "not asv result files"
    if a.get("version") != 2:
        return None, "not asv's result format 2"
    if differ := [k for k in RESULT_IDENTITY if a.get(k) != b.get(k)]:
        return None, f"different {differ[0]}"
    if both := sorted(a["results"].keys() & b["results"].keys()):
        return None, f"{len(both)} benchmark(s) in both, e.g. {both[0]}"
    merged = dict(a, results={**a["results"], **b["results"]},
                  durations={**(a.get("durations") or {}), **(b.get("durations") or {})})
    return merged, ""


def merge_records(a: dict, b: dict) -> tuple[dict | None, str]:
    """Two run records (``records/<machine>/<sha8>.json.xz``) of one commit and machine as one: the
    cases of both; the first's environment, with each share's phases, ceilings, case count and
    host in ``shares``; the ceilings of both; their warnings.

    Returns ``(merged, "")``, or ``(None, why)`` when they are not shares of one run: another
    commit, grid, rounds or record format, or a case in both.
    """
    if not all(isinstance(x, dict) and isinstance(x.get("records"), list)
               and isinstance(x.get("environment"), dict) for x in (a, b)):
        return None, "not run records"
    if differ := [k for k in RECORD_IDENTITY if a.get(k) != b.get(k)]:
        return None, f"different {differ[0]}"
    if a["environment"].get("git_commit") != b["environment"].get("git_commit"):
        return None, "different git_commit"
    try:
        keys_a, keys_b = {_key(r) for r in a["records"]}, {_key(r) for r in b["records"]}
    except AttributeError:
        return None, "a case that is not an object"
    if both := sorted(keys_a & keys_b, key=str):
        return None, f"{len(both)} case(s) in both, e.g. {'/'.join(map(str, both[0]))}"
    env_a, env_b = a["environment"], b["environment"]
    parts = env_a.get("shares") or [_share(a)]
    env = {k: v for k, v in env_a.items() if k != "shares"}
    env["shares"] = [*parts, *(env_b.get("shares") or [_share(b)])]
    ceilings = [*(a.get("ceilings_gbps") or []), *(b.get("ceilings_gbps") or [])]
    peaks = [p for p in (a.get("peak_tflops"), b.get("peak_tflops")) if p]
    merged = dict(a, environment=env, records=[*a["records"], *b["records"]], ceilings_gbps=ceilings,
                  ceiling_gbps=statistics.median(ceilings) if ceilings else a.get("ceiling_gbps", 0.0),
                  peak_tflops=statistics.median(peaks) if peaks else None,
                  phases={}, warnings=[*(a.get("warnings") or []), *(b.get("warnings") or [])])
    return merged, ""


def holds_records(whole: dict, part: dict) -> bool:
    """True when ``part`` is a share already merged into run record ``whole``: listed in its
    ``shares``, every case of it there as it is (collecting it again adds nothing)."""
    try:
        cases = {_key(r): r for r in whole["records"]}
        return (_share(part) in (whole["environment"].get("shares") or [])
                and all(cases.get(_key(r)) == r for r in part["records"]))
    except (KeyError, TypeError, AttributeError):
        return False


def _share(record: dict) -> dict:
    """What one share's record says of its own run (kept in the merged record's ``shares``)."""
    env = record["environment"]
    return {"host": env.get("host"), "ops": sorted({str(r.get("op")) for r in record["records"]}),
            "cases": len(record["records"]), "ceilings_gbps": record.get("ceilings_gbps") or [],
            "phases": record.get("phases") or {}, "sweep_seconds": env.get("sweep_seconds")}
