"""Where a run's files go: the project folder that holds ``results/``, ``records/``, the site and
the plots (the fusebench checkout, found once at import)."""

from __future__ import annotations

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
