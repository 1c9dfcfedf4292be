"""The ops as the reports see them, described without torch: the case file and the run records.

The plots, the site and the asv results written from a record need of an op its name, roofline,
grids, dtypes, headline shape, backends and its declared work per case (bytes moved, flops: the x
axis of a throughput plot). The :class:`~fusebench.registry.Op` declares them in its package in
``kernels/``, which imports torch; so ``fusebench publish``, ``plots`` and ``store`` would need
torch to read what was measured (issue 43). A :class:`DescribedOp` has the same attributes, from
torch-free sources:

* name, grids, dtypes, headline and backends from the case file (``fusebench.config``);
* the roofline and the declared work from the run records (``records/<machine>/<sha8>.json``):
  each case's record holds ``roofline``, ``bytes_moved`` and ``flops`` as the op declared them
  when it was measured, which are the figures its bandwidth and TFLOP/s were computed from.

The work of a case is taken from the newest record that has it (commits newest first, machine by
machine), so a declaration that changed is plotted as the code now declares it once a run of the
new code is stored. :func:`describe` refuses (:class:`NotDescribed`) an op whose case file entry
names no backends (the op's package decides them) or with a case of its default grid that no
record holds: the caller then asks the op itself (``fusebench.ops.for_reports``), with torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from fusebench import config
from fusebench.axes import ROOFLINES, Shape, shape_label
from fusebench.errors import UsageError
from fusebench.storage import results, runrecord


class NotDescribed(Exception):
    """What the case file and the records cannot say about an op (one line)."""


@dataclass(frozen=True)
class DescribedOp:
    """An op as the reports use it (the attributes of :class:`~fusebench.registry.Op` they read).

    Attributes:
        name, roofline, grids, dtypes, headline: as :class:`~fusebench.registry.Op`'s.
        backends: the backends measured (the case file's list): membership and order, as
            ``Op.backends``' keys.
        work: ``(shape label, dtype) -> (bytes moved, flops or None)`` for every case of the
            default grid.
    """

    name: str
    roofline: str
    grids: dict[str, list[Shape]]
    dtypes: tuple[str, ...]
    headline: Shape | None
    backends: tuple[str, ...]
    work: dict[tuple[str, str], tuple[int, int | None]] = field(repr=False)

    def bytes_moved(self, shape: Shape, dtype: str) -> int:
        """The declared bytes of one call of case ``(shape, dtype)`` (``Op.bytes_moved``)."""
        return self.work[(shape_label(shape), str(dtype))][0]

    @property
    def flops(self) -> Callable[[Shape], int] | None:
        """``flops(shape)`` when the op declares its arithmetic (its records hold flops), else None
        (``Op.flops``)."""
        if all(f is None for _, f in self.work.values()):
            return None

        def flops(shape: Shape) -> int:  # the same for every dtype: declared from the shape
            return self.work[(shape_label(shape), self.dtypes[0])][1]

        return flops


def _records(records_dir: Path, results_dir: Path) -> Iterable:
    """The run records beside ``results_dir``, each machine's newest commit first (commit dates
    from the stored results); a record that cannot be read is passed over (the readers name it)."""
    for machine in results.machines(results_dir):
        for commit, _ in results.stored_commits(results_dir, machine):
            try:
                record = runrecord.load(records_dir, machine, commit)
            except UsageError:
                continue
            if record is not None:
                yield record


def describe(config_path: Path | str | None, results_dir: Path, extra: Iterable = (),
             complete: bool = True) -> dict[str, DescribedOp]:
    """Every op of the case file ``config_path`` (None: ``fusebench.yaml``), in its order, described
    from it and from the run records beside ``results_dir`` (``extra``: records read first, e.g.
    those being stored). ``complete=False``: an op needs one case in a record (its roofline, and
    whether it declares flops: what the asv suite's classes need), not the work of every case.

    Raises:
        fusebench.config.ConfigError: the case file is not valid.
        NotDescribed: an op's entry names no backends, or no record holds the declared work of one
            of its cases (the line names the first).
    """
    cfg = config.load(config_path)
    cases = {name: cfg.cases(name) for name in cfg.ops}
    for name, entry in cases.items():
        if entry.backends is None:
            raise NotDescribed(f"ops.{name} names no backends: the op's package decides them")
    wanted = {(name, shape_label(s), d) for name, c in cases.items()
              for s in c.grids["default"] for d in c.dtypes}
    work: dict[tuple[str, str, str], tuple[int, int | None]] = {}
    roofline: dict[str, str] = {}
    for record in (*extra, *_records(runrecord.records_dir(results_dir), results_dir)):
        for r in record.records:
            key = (r.op, r.shape, r.dtype)
            if key in wanted and key not in work and r.roofline in ROOFLINES:
                work[key] = (int(r.bytes_moved), None if r.flops is None else int(r.flops))
                roofline.setdefault(r.op, r.roofline)
        if len(work) == len(wanted):
            break
    if not complete:  # one case of each op is enough
        if unknown := [n for n in cases if n not in roofline]:
            raise NotDescribed(f"no run record beside {results_dir} holds a case of {unknown[0]}")
    elif missing := sorted(wanted - work.keys()):
        op, shape, dtype = missing[0]
        raise NotDescribed(f"no run record beside {results_dir} holds the declared work of {op} {shape} "
                           f"{dtype}" + (f" (and {len(missing) - 1} more cases)" if len(missing) > 1 else ""))
    return {name: DescribedOp(name, roofline[name], c.grids, c.dtypes, c.headline, tuple(c.backends),
                              {(s, d): w for (o, s, d), w in work.items() if o == name})
            for name, c in cases.items()}
