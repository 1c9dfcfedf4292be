"""A history at scale for measuring ``fusebench publish`` and ``fusebench plots`` (issue 42 item 12).

Writes, into FOLDER, a throwaway clone of this checkout's HEAD whose ``main`` carries N/M new empty
commits (one a simulated hour apart, after HEAD), and in its ``results/`` and ``records/`` N asv
result files and N run records over M machines (``scale-00`` ... ``scale-<M-1>``), every machine
measuring every new commit. Each machine folder has its ``machine.json``; each file is a committed
H200 result or record (``results/h200/``, ``records/h200/``, the commits that have both, taken in
turn) with its commit, date and machine rewritten: valid for fusebench's readers (the machine name
in the file agrees with its folder, the record's ``git_commit`` with its name) and drawn by
``asv publish``, which places a result only when its commit is on the first-parent line of
``main`` in the repository the site is built from, hence the clone. ``results/benchmarks.json``
is this checkout's. The clone runs its own copy of fusebench (HEAD's), so commit a change before
building a fixture to measure it. Records are about 1.4 MB each: the defaults write about 4.5 GB.

    python probes/scale_fixture.py FOLDER [--results 3000] [--machines 10]

then, for example (``--cdn``: the clone has no ``site/node_modules``)::

    cd FOLDER && /usr/bin/time -v python -m fusebench publish --cdn --html /tmp/scale-html
    cd FOLDER && /usr/bin/time -v python -m fusebench plots --out /tmp/scale-plots

FOLDER must not exist. Exit status 2 with one line on bad input.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: The committed machine whose files are copied.
SOURCE_MACHINE = "h200"
#: Simulated time between two new commits (s).
STEP_S = 3600


def git(cwd: Path, *args: str, env: dict | None = None, stdin: str | None = None) -> str:
    """``git <args>`` in ``cwd``; its stdout stripped (a failure raises)."""
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True,
                          env=env, input=stdin).stdout.strip()


def templates(root: Path) -> list[tuple[Path, Path]]:
    """``[(result file, record file)]`` of the committed commits that have both, by name."""
    records = {p.stem: p for p in (root / "records" / SOURCE_MACHINE).glob("*.json")}
    out = []
    for path in sorted((root / "results" / SOURCE_MACHINE).glob("*.json")):
        sha8 = path.name.split("-", 1)[0]
        if path.name != "machine.json" and sha8 in records:
            out.append((path, records[sha8]))
    return out


def new_commits(repo: Path, count: int) -> list[tuple[str, int]]:
    """``count`` empty commits on ``repo``'s ``main`` after its HEAD: ``[(sha, date in s)]``, oldest
    first (``git commit-tree``: no checkout, no hooks)."""
    head = git(repo, "rev-parse", "HEAD")
    tree = git(repo, "rev-parse", "HEAD^{tree}")
    when = int(git(repo, "log", "-1", "--format=%ct", "HEAD"))
    out = []
    for i in range(count):
        when += STEP_S
        env = dict(os.environ, GIT_AUTHOR_NAME="scale", GIT_AUTHOR_EMAIL="scale@example.invalid",
                   GIT_COMMITTER_NAME="scale", GIT_COMMITTER_EMAIL="scale@example.invalid",
                   GIT_AUTHOR_DATE=f"{when} +0000", GIT_COMMITTER_DATE=f"{when} +0000")
        head = git(repo, "commit-tree", tree, "-p", head, env=env, stdin=f"scale fixture commit {i}\n")
        out.append((head, when))
    git(repo, "update-ref", "refs/heads/main", head)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folder", type=Path, help="where the clone goes (must not exist)")
    ap.add_argument("--results", type=int, default=3000, help="result files (and records) in all")
    ap.add_argument("--machines", type=int, default=10, help="machines they are spread over")
    args = ap.parse_args(argv)
    if args.machines < 1 or args.results < args.machines or args.results % args.machines:
        print(f"scale_fixture: error: --results {args.results} must be a multiple of --machines "
              f"{args.machines} (both positive)", file=sys.stderr)
        return 2
    if args.folder.exists():
        print(f"scale_fixture: error: {args.folder} exists; give a new folder", file=sys.stderr)
        return 2
    pairs = templates(ROOT)
    if not pairs:
        print(f"scale_fixture: error: no commit of {ROOT}/results/{SOURCE_MACHINE}/ has a record in "
              f"records/{SOURCE_MACHINE}/", file=sys.stderr)
        return 2
    dest = args.folder
    head = git(ROOT, "rev-parse", "HEAD")
    git(ROOT, "clone", "--quiet", "--no-checkout", str(ROOT), str(dest.resolve()))
    git(dest, "checkout", "--quiet", "-B", "main", head)
    commits = new_commits(dest, args.results // args.machines)
    machine_json = json.loads((ROOT / "results" / SOURCE_MACHINE / "machine.json").read_text())
    for kind in ("results", "records"):
        for old in (dest / kind).glob("*/"):
            if old.is_dir():
                subprocess.run(["rm", "-rf", str(old)], check=True)
    raw = [(json.loads(res.read_text()), rec.read_bytes()) for res, rec in pairs]
    for m in range(args.machines):
        machine = f"scale-{m:02d}"
        res_dir, rec_dir = dest / "results" / machine, dest / "records" / machine
        res_dir.mkdir(parents=True)
        rec_dir.mkdir(parents=True)
        (res_dir / "machine.json").write_text(json.dumps(dict(machine_json, machine=machine), indent=4))
        for i, (sha, when) in enumerate(commits):
            result, record = raw[(i + m) % len(raw)]
            old_sha = result["commit_hash"]
            result = dict(result, commit_hash=sha, date=when * 1000,
                          params=dict(result["params"], machine=machine))
            (res_dir / f"{sha[:8]}-{result['env_name']}.json").write_text(json.dumps(result))
            (rec_dir / f"{sha[:8]}.json").write_bytes(record.replace(old_sha.encode(), sha.encode()))
    print(f"{dest}: {len(commits)} commits on main after {head[:8]}, {args.results} results and "
          f"{args.results} records over {args.machines} machines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
