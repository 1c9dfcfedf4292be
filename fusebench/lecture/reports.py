"""Storing a report (one of the lecture's experiments: pitfalls, profile, mlp) with its environment.

Each run writes two files, ``reports/<machine>/<name>-<commit[:12]>.json`` (the figures, the
parameters and ``environment.capture``: GPU, driver, versions, clocks, commit, dirty flag) and
a ``.md`` rendering beside it, the way ``results/<machine>/`` keeps asv results per machine and
commit. A later run of the same report at the same commit on the same machine replaces both.
"""

from __future__ import annotations

import json
from pathlib import Path

from fusebench.atomic import write_atomic
from fusebench.paths import PROJECT_ROOT, real_folder

#: Where reports are kept (committed, like results/).
REPORTS_DIR = PROJECT_ROOT / "reports"

#: Bump when the layout of a stored report changes.
FORMAT_VERSION = 1


def report_paths(name: str, machine: str, commit: str | None, root: Path = REPORTS_DIR) -> tuple[Path, Path]:
    """``(json, md)`` paths of report ``name``: ``<root>/<machine>/<name>-<commit[:12]>``.

    Outside a git checkout the commit part is ``nocommit``.
    """
    stem = f"{name}-{commit[:12] if commit else 'nocommit'}"
    return root / machine / f"{stem}.json", root / machine / f"{stem}.md"


def save(name: str, data: dict, markdown: str, env: dict, root: Path = REPORTS_DIR,
         machine: str | None = None) -> tuple[Path, Path]:
    """Write report ``name`` (``data``: JSON-serializable figures and parameters) and its markdown.

    The JSON holds ``{"report", "format_version", "environment", **data}``; ``env`` is
    :func:`fusebench.measure.environment.capture`'s dict (its ``git_commit`` names the files). Files are
    written atomically (a temporary file, then a rename). Returns ``(json path, md path)``.
    """
    if not machine:
        from fusebench.measure import environment  # torch: only when no machine is given

        machine = environment.machine_name()
    json_path, md_path = report_paths(name, machine, env.get("git_commit"), root)
    real_folder(json_path.parent)  # a committed reports/<machine> link is refused
    json_path.parent.mkdir(parents=True, exist_ok=True)
    payload = {"report": name, "format_version": FORMAT_VERSION, "environment": env, **data}
    for path, text in ((json_path, json.dumps(payload, indent=1)), (md_path, markdown.rstrip() + "\n")):
        write_atomic(path, text)
    return json_path, md_path


def where(env: dict) -> str:
    """One line naming the device and versions a report was measured with (its markdown header)."""
    dev = env.get("gpu") or f"CPU ({env.get('cpu', '?')}, {env.get('num_cpu', '?')} cores)"
    parts = [dev, f"torch {env.get('torch')}"]
    if env.get("cuda_runtime"):
        parts.append(f"CUDA {env['cuda_runtime']}")
    if env.get("driver"):
        parts.append(f"driver {env['driver']}")
    commit = (env.get("git_commit") or "no commit")[:12]
    parts.append(f"commit {commit}{' (dirty)' if env.get('git_dirty') else ''}")
    return ", ".join(parts)
