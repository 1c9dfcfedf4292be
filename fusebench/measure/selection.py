"""What a run selects (ops, backends, dtypes), checked before anything is measured; and the
check after a sweep that something was measured at all.

A name can be valid and still select nothing: ``tf32`` is a dtype, but not one of GELU's;
``eager`` is a backend, but matmul has none. Such a selection is refused before the sweep, with
the values that do apply (as ``make profile`` does). A sweep in which no case was measured
(every case skipped or failed, or none at all) is refused after it: nothing is stored.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Mapping, Sequence

from fusebench.errors import UsageError
from fusebench.names import pick
from fusebench.registry import BACKENDS, PRECISIONS, Op, no_backend_reason, shape_label


def _ops_phrase(ops: Sequence[Op]) -> str:
    names = [op.name for op in ops]
    return names[0] if len(names) == 1 else f"any of {', '.join(names)}"


def choose(all_ops: Mapping[str, Op], ops: str | None, backends: str | None,
           dtypes: str | None) -> tuple[list[Op], list[str], list[str]]:
    """Parse a run's comma-separated selection and check that each chosen name applies.

    Args:
        all_ops: the op registry (``fusebench.ops.OPS``), name -> :class:`Op`.
        ops, backends, dtypes: comma-separated names as given on the command line; None or empty
            selects all (of the ops; every backend name; every dtype-axis value).

    Returns:
        ``(ops, backend names, dtype names)``, in the order given (the registry's for defaults).

    Raises:
        UsageError: an unknown name, or an empty list (``","``): the valid names; a backend that
            none of the chosen ops registers, or a dtype on none of their dtype axes: the
            values that apply to them.
    """
    chosen_ops = [all_ops[n] for n in pick("op", ops, all_ops)]
    chosen_backends = pick("backend", backends, BACKENDS)
    chosen_dtypes = pick("dtype", dtypes, PRECISIONS)
    if backends:
        valid = [b for b in BACKENDS if any(b in op.backends for op in chosen_ops)]
        for b in chosen_backends:
            if b not in valid:
                raise UsageError(f"backend {b!r} does not apply to {_ops_phrase(chosen_ops)}; "
                                 f"valid backends: {', '.join(valid)}")
    if dtypes:
        valid = [d for d in PRECISIONS if any(d in op.dtypes for op in chosen_ops)]
        for d in chosen_dtypes:
            if d not in valid:
                raise UsageError(f"dtype {d!r} does not apply to {_ops_phrase(chosen_ops)}; "
                                 f"valid dtypes: {', '.join(valid)}")
    return chosen_ops, chosen_backends, chosen_dtypes


def narrow_shapes(ops: Sequence[Op], grid: str, shapes: str | None) -> list[Op]:
    """The ops with ``grid`` narrowed to the comma-separated shape labels ``shapes``
    (``"4096x4096,1x1048576"``); an op none of whose shapes is chosen is left out.

    Args:
        ops: the chosen ops (their ``grids`` from the case file).
        grid: the run's grid name (``default``, ``cpu``, ``quick``, ``cpu-quick``).
        shapes: None or empty keeps every shape.

    Raises:
        UsageError: a shape in none of the ops' ``grid`` (the message lists the valid ones), or
            only commas.
    """
    if not shapes:
        return list(ops)
    valid = list(dict.fromkeys(shape_label(s) for op in ops for s in op.grids[grid]))
    chosen = set(pick("shape", shapes.lower(), valid))
    out = []
    for op in ops:
        kept = [s for s in op.grids[grid] if shape_label(s) in chosen]
        if kept:
            out.append(dataclasses.replace(op, grids={**op.grids, grid: kept}))
    return out


def require_measured(records: Sequence) -> None:
    """Refuse a sweep in which no case was measured, before anything of it is stored.

    Args:
        records: the sweep's records (``fusebench.record.Record``: ``status`` is ``"ok"``,
            ``"skipped"`` or ``"failed"``, ``reason`` says why).

    Raises:
        UsageError: no record has status ``"ok"``; one line with the counts and the most common
            reason (e.g. ``nothing measured: 6 case(s) skipped, 0 failed (most common reason, 6
            case(s): needs a CUDA GPU); nothing stored``).
    """
    if any(r.status == "ok" for r in records):
        return
    if not records:
        raise UsageError("nothing measured: the selection has no case on this machine's grid; nothing stored")
    counts = Counter(r.status for r in records)
    # an op without such a backend is no news (every run records the whole backend axis): the
    # reason named is the real cause where there is one (tf32 on a CPU, not "matmul has no eager")
    news = [r.reason for r in records if r.reason != no_backend_reason(r.op, r.backend)]
    reason, n = Counter(news or [r.reason for r in records]).most_common(1)[0]
    raise UsageError(f"nothing measured: {counts['skipped']} case(s) skipped, {counts['failed']} failed "
                     f"(most common reason, {n} case(s): {reason}); nothing stored")
