"""The ops the case file names, found in ``kernels/`` (imported as ``fusebench.kernels``).

``kernels/<name>/`` holds an op: ``__init__.py`` builds its ``Op`` (reference, declared work,
backends), beside its Triton kernel (``triton.py``), CUDA sources (``*.cu``) and tuning space
(``tuning.py``, read through :mod:`fusebench.tuning`). ``REGISTERED`` holds each op the case
file ``fusebench.yaml`` names, as its folder builds it; ``OPS`` the same ops with their cases
(grids, dtypes, headline shape, the backends measured) from the case file (``fusebench.config``),
read on first use. Every consumer (asv suite, sweep, nsys driver, tests, plots) iterates ``OPS``;
adding a shape or a dtype edits only the YAML. How to add an op or a backend: ``docs/extending.md``.
"""

from __future__ import annotations

import functools
import importlib
from pathlib import Path
from typing import TYPE_CHECKING

from fusebench import config
from fusebench.axes import KERNELS
from fusebench.errors import UsageError
from fusebench.names import did_you_mean

if TYPE_CHECKING:  # the registry imports torch: only finding an op does (op_module), not importing this
    from fusebench.registry import Op

_modules: dict[str, Op] = {}
_configured: dict[str, dict[str, Op]] = {}


def op_module(name: str, path: Path | str) -> Op:
    """The :class:`Op` that module ``fusebench.kernels.<name>`` builds (``OP``), imported once.

    The case file's ``ops`` entries name the packages: adding an op is its folder in
    ``kernels/`` and its entry in the YAML, with no list of ops in Python to extend.

    Raises:
        fusebench.config.ConfigError: no such module, or it builds no ``OP`` of that name (one
            line naming the case file and the key).
    """
    if name not in _modules:
        from fusebench.registry import Op

        try:
            module = importlib.import_module(f"{KERNELS}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{KERNELS}.{name}":
                raise
            raise config.ConfigError(
                f"{path}: ops.{name}: no package kernels/{name}/ builds this op") from None
        op = getattr(module, "OP", None)
        if not isinstance(op, Op) or op.name != name:
            raise config.ConfigError(
                f"{path}: ops.{name}: kernels/{name}/__init__.py has no OP named {name!r}")
        _modules[name] = op
    return _modules[name]


@functools.cache
def registered(path: Path | str = config.DEFAULT_PATH) -> dict[str, Op]:
    """The ops the case file ``path`` names (default: ``fusebench.yaml``), as their modules build
    them (reference, declared work, backends), in the file's order; read once per path.

    Raises:
        fusebench.config.ConfigError: the file is not valid, or names an op no module builds.
    """
    cfg = config.load(path)
    return {name: op_module(name, cfg.path) for name in cfg.ops}


def configured(path: Path | str | None = None) -> dict[str, Op]:
    """The ops with their cases from the case file ``path`` (None: ``fusebench.yaml``; never the
    environment: a command passes its ``--config`` down), read once per path.

    Raises:
        fusebench.config.ConfigError: the file is missing or not valid (one line: file, key,
            valid values).
    """
    key = str(Path(config.DEFAULT_PATH if path is None else path).resolve())
    if key not in _configured:
        cfg = config.load(path)
        _configured[key] = cfg.apply({**registered(), **{n: op_module(n, cfg.path) for n in cfg.ops}})
    return _configured[key]


def __getattr__(name: str):
    if name == "OPS":  # read on first use, not at import (a bad file is then one clear line)
        return configured()
    if name == "REGISTERED":  # the ops of the default case file, as their modules build them
        return registered()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def for_reports(path: Path | str | None, results_dir: Path, extra=(), complete: bool = True) -> list:
    """The ops of the case file ``path`` as the reports use them (the plots, the site, the asv
    results written from a record): described from the case file and the run records beside
    ``results_dir``, without torch (:mod:`fusebench.report.described`; ``extra`` and ``complete``
    as there); where those cannot say, the ops as their packages build them (:func:`configured`,
    which imports torch). Either way the same names, grids, dtypes, backends and declared work.

    Raises:
        fusebench.config.ConfigError: the case file is not valid.
        UsageError: the records cannot describe the ops and this Python has no torch to import
            them (one line: what the records lack, and what to do).
    """
    from fusebench.report import described

    try:
        return list(described.describe(path, results_dir, extra, complete).values())
    except described.NotDescribed as exc:
        lacking = str(exc)
    try:
        return list(configured(path).values())
    except ModuleNotFoundError as exc:
        if exc.name not in ("torch", "triton"):
            raise
        import sys

        raise UsageError(f"{lacking}; the op packages that declare it need {exc.name}, which "
                         f"{sys.executable} does not have (make venv; or store a run's record: "
                         "make bench)") from None


def get_op(name: str, ops: dict[str, Op] | None = None) -> Op:
    """The op called ``name`` in ``ops`` (default: ``OPS``).

    Raises:
        UsageError: unknown op (the message offers the closest and lists the valid ones).
    """
    ops = configured() if ops is None else ops
    if name not in ops:
        raise UsageError(f"unknown op {name!r}{did_you_mean(name, ops)}; valid ops: {', '.join(ops)}")
    return ops[name]
