"""Where a run's files go: the project folder that holds ``results/``, ``records/``, the site and
the plots (the fusebench checkout, found once at import)."""

from __future__ import annotations

import os
from pathlib import Path


def project_root() -> Path:
    """The fusebench checkout results, records, the site and plots belong to: the one this
    package lives in (run from a checkout, or installed with ``pip install -e .``), else the
    first folder holding ``asv.conf.json`` from the working directory up (an installed
    fusebench run inside a checkout), else the working directory."""
    here = Path(__file__).resolve().parent.parent
    if (here / "asv.conf.json").is_file():
        return here
    cwd = Path.cwd().resolve()
    return next((d for d in (cwd, *cwd.parents) if (d / "asv.conf.json").is_file()), cwd)


#: The project folder (:func:`project_root`): the checkout, with ``asv.conf.json`` at its top.
PROJECT_ROOT = project_root()

#: Where ``make bench DIRTY=1`` stores a run of a tree whose measured files differ from HEAD
#: (``fusebench.measure.provenance``); here, torch-free, for ``fusebench bench --help`` to name it.
DIRTY_RESULTS = ".asv/dirty-results"


def link_above(path: Path, top: Path | None = None) -> Path | None:
    """The first symbolic link among ``path`` and its folders up to ``top`` (not ``top`` itself),
    or None; ``top`` as :func:`real_folder` takes it."""
    path = Path(os.path.abspath(path))
    top = PROJECT_ROOT if path.is_relative_to(PROJECT_ROOT) else top or path
    for folder in (path, *path.parents):
        if folder == top or not folder.is_relative_to(top):
            return None
        if folder.is_symlink():
            return folder
    return None


def real_folder(path: Path, top: Path | None = None) -> Path:
    """``path``, a folder fusebench writes into or deletes, checked to be a real folder: neither
    it nor a folder above it, up to ``top`` (not checked itself), is a symbolic link. Inside the
    checkout, ``top`` is the checkout (a commit may carry a link, ``plots/h200 -> /elsewhere``,
    and ``git pull`` makes it: issue 56); outside, the folder given (default ``path``: a folder
    given outside the checkout is the user's own choice, not checked). A path that does not
    exist yet is fine: what makes it makes real folders.

    Raises:
        UsageError: one line naming the link and what to do.
    """
    from fusebench.errors import UsageError

    path = Path(os.path.abspath(path))
    link = link_above(path, top)
    if link is not None:
        raise UsageError(f"{link} is a symbolic link (fusebench writes and deletes only in real "
                         f"folders; a commit can carry a link): refused, nothing done to {path}: "
                         "remove the link and run again")
    return path


def cache_dir() -> Path:
    """Where ``fusebench ab`` and ``bisect`` keep worktrees and extension builds of other commits:
    ``$XDG_CACHE_HOME/fusebench/bisect``, else ``$HOME/.cache/fusebench/bisect``, else (no
    ``HOME``, or ``HOME`` the root folder, as a container's user may have) the checkout's
    ``.asv/cache``, never ``/.cache``."""
    for var, below in (("XDG_CACHE_HOME", ()), ("HOME", (".cache",))):
        base = os.environ.get(var, "")
        if os.path.isabs(base) and Path(base) != Path("/"):
            return Path(base, *below, "fusebench", "bisect")
    return PROJECT_ROOT / ".asv" / "cache"


def other_checkout() -> Path | None:
    """The fusebench checkout the working folder is in when it is not :data:`PROJECT_ROOT` (a
    fusebench installed from one checkout, ``pip install -e``, run in another would store into
    the first), else None."""
    cwd = Path.cwd().resolve()
    here = next((d for d in (cwd, *cwd.parents) if (d / "asv.conf.json").is_file()), None)
    if here is None or here == PROJECT_ROOT or not (here / "fusebench" / "__init__.py").is_file():
        return None
    return here
