"""An op's tuning space: the configurations ``fusebench tune <backend>`` times beside the default.

An op's folder may hold ``tuning.py`` defining ``SPACES``, backend name -> :class:`Space`. The tune
command reads the spaces through :func:`spaces` and names no op and no kernel: the variants a default
plan never picks, and the knobs of the ones it does, live with the op they belong to.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable

import torch

from fusebench.registry import KERNELS, Op

Shape = tuple[int, ...]


@dataclass(frozen=True)
class Candidate:
    """One configuration: ``label`` names it in the table; ``make(x)`` does all setup and returns the
    zero-argument call that is timed (a backend factory's contract), or raises ``SkipCase`` when
    the configuration cannot run ``x``."""

    label: str
    make: Callable[[torch.Tensor], Callable[[], object]]


@dataclass(frozen=True)
class Space:
    """What ``fusebench tune <backend>`` times for one op.

    Attributes:
        cases: ``cases(op)`` -> the ``(shape, dtype)`` cases, in order (the op as the case file
            configures it: its grids).
        candidates: ``candidates(x)`` -> the configurations for the input ``x``, the default first
            (the table's "vs def" baseline), labels distinct.
        budget_s: seconds of timed repeats per candidate when the command is given no ``--budget``.
    """

    cases: Callable[[Op], list[tuple[Shape, torch.dtype]]]
    candidates: Callable[[torch.Tensor], list[Candidate]]
    budget_s: float = 0.03


def spaces(backend: str, ops: dict[str, Op]) -> dict[str, Space]:
    """The ops of ``ops`` (name -> :class:`Op`) whose ``tuning.py`` has a space for ``backend``,
    in their order; an op without a tuning module has none."""
    out = {}
    for name in ops:
        module_name = f"{KERNELS}.{name}.tuning"
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            continue
        if (space := getattr(module, "SPACES", {}).get(backend)) is not None:
            out[name] = space
    return out
