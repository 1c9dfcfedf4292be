"""``make clean``: remove the caches, the unpublished quick results, ab's and bisect's sessions,
and the worktrees ab and bisect made of this repository; never ``results/``.

Only real folders inside the checkout are removed: a folder that is, or lies under, a symbolic
link (``.asv -> /elsewhere``, which a commit can carry) is named and left as it is
(:func:`fusebench.paths.link_above`). The worktrees are those this repository's git lists under
the cache's ``worktrees/`` (``--cache``, default :func:`fusebench.paths.cache_dir`); the
extension builds beside them stay (minutes of work per commit).

    python -m fusebench.clean [--cache DIR]
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from fusebench import git
from fusebench.paths import PROJECT_ROOT, cache_dir, link_above

#: The folders removed, relative to the checkout.
FOLDERS = (".asv/quick-results", ".asv/partial-results", ".asv/partial-quick-results", ".asv/dirty-results",
           ".asv/quick-records", ".asv/partial-records", ".asv/partial-quick-records", ".asv/dirty-records",
           ".asv/sweeps", ".asv/ab", "bisect", ".pytest_cache")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="clean")
    ap.add_argument("--cache", type=Path, help="ab's and bisect's cache (default: theirs)")
    args = ap.parse_args(argv)
    named = set()
    for name in FOLDERS:
        path = PROJECT_ROOT / name
        link = link_above(path)
        if link is not None:
            if link not in named:
                print(f"clean: {link} is a symbolic link: left as it is", flush=True)
                named.add(link)
        elif path.is_dir():
            shutil.rmtree(path)
    trees = ((args.cache or cache_dir()).resolve() / "worktrees")
    listed = git.answer(PROJECT_ROOT, "worktree", "list", "--porcelain") or ""
    for line in listed.splitlines():
        tree = Path(line.removeprefix("worktree "))
        if line.startswith("worktree ") and tree.is_relative_to(trees):
            if git.run(PROJECT_ROOT, "worktree", "remove", "--force", str(tree)).returncode == 0:
                print(f"clean: removed the bisect worktree {tree}", flush=True)
    git.answer(PROJECT_ROOT, "worktree", "prune")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
