"""The profiling plan: which cases ``make nsys`` / ``make trace`` run, in which order, how often.

A plan is a pure function of the registry and the user's selection (no device work), so the
range names a capture will contain, and their order, are known and testable before any GPU runs.
Order: shape, then dtype, then backend (the sweep's order): the backends of one shape and dtype
sit side by side on the timeline.

Defaults: each op's ``nsys`` grid (a few representative shapes: one streaming from HBM, one
large 2-D case, the odd regimes) on a GPU, its ``quick`` grid on the CPU; dtypes float32 and
bfloat16; :data:`CALLS` calls per range.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from fusebench.axes import BACKENDS, Shape, parse_shape, shape_label
from fusebench.errors import UsageError
from fusebench.names import pick
from fusebench.nsys.nvtx_ranges import backend_color, range_name

if TYPE_CHECKING:  # the registry imports torch; planning the ranges (and --help) needs none
    from fusebench.registry import Op

#: Calls of a backend inside its one NVTX range (enough to average, short on the timeline).
CALLS = 20

#: Dtypes profiled when ``DTYPES=`` is not given.
DEFAULT_DTYPES: tuple[str, ...] = ("float32", "bfloat16")

#: The op grid a plan takes its default shapes from, by device type.
DEFAULT_GRID = {"cuda": "nsys", "cpu": "quick"}


@dataclass(frozen=True)
class Case:
    """One case of a plan: ``calls`` calls of ``backend`` on a ``shape`` ``dtype`` input.

    Attributes:
        op, backend, dtype: registry names.
        shape: dimensions, e.g. ``(16384, 16384)``.
        calls: calls inside the case's NVTX range.
    """

    op: str
    backend: str
    shape: Shape
    dtype: str
    calls: int = CALLS

    @property
    def shape_label(self) -> str:
        """``"16384x16384"``."""
        return shape_label(self.shape)

    @property
    def range(self) -> str:
        """NVTX / record_function range name, ``gelu/eager/16777216/float32``."""
        return range_name(self.op, self.backend, self.shape_label, self.dtype)

    @property
    def color(self) -> int:
        """ARGB colour of the range (by backend)."""
        return backend_color(self.backend)


def plan(op: Op, backends: list[str], shapes: list[Shape], dtypes: list[str],
         calls: int = CALLS) -> list[Case]:
    """Every case of ``op`` over the given axes, in run order (shape, dtype, backend).

    Pure: no device work, no validation (see :func:`select` for that).
    """
    return [Case(op.name, b, s, d, calls) for s in shapes for d in dtypes for b in backends]


def select(op: Op, backends: str | None = None, shapes: str | None = None,
           dtypes: str | None = None, device_type: str = "cuda", calls: int = CALLS) -> list[Case]:
    """The plan for the user's comma-separated selection (None or empty: the defaults).

    Args:
        op: the op (``fusebench.ops.get_op(name)`` validates its name).
        backends: e.g. ``"eager,torch"`` (a backend the op lacks is reported as skipped when run);
            default the op's own backends, in :data:`BACKENDS` order.
        shapes: shape labels of the op's ``default`` grid, e.g. ``"4096x4096,1x1048576"``;
            default the op's ``nsys`` grid on a GPU, ``quick`` grid on the CPU.
        dtypes: e.g. ``"float32"``, of the op's dtype axis; default those of :data:`DEFAULT_DTYPES`
            the op has.
        device_type: ``"cuda"`` or ``"cpu"`` (picks the default shapes).
        calls: calls per range, at least 1.

    Raises:
        UsageError: an unknown backend, shape or dtype (the message lists the valid ones), or
            ``calls`` < 1.
    """
    if calls < 1:
        raise UsageError(f"calls per range must be at least 1, not {calls}")
    valid_shapes = [shape_label(s) for s in op.grids["default"]]
    if shapes:
        shape_list = [parse_shape(s) for s in pick("shape", _normalized(shapes), valid_shapes)]
    else:
        shape_list = list(op.grids[DEFAULT_GRID.get(device_type, "quick")])
    chosen = pick("backend", backends, BACKENDS) if backends else [b for b in BACKENDS if b in op.backends]
    return plan(op, chosen, shape_list,
                pick("dtype", dtypes, op.dtypes) if dtypes else [d for d in DEFAULT_DTYPES if d in op.dtypes],
                calls)


def _normalized(labels: str) -> str:
    """Shape labels respelled canonically where they parse (``16384X16384`` -> ``16384x16384``)."""
    out = []
    for label in (x.strip() for x in labels.split(",")):
        try:
            out.append(shape_label(parse_shape(label)))
        except UsageError:
            out.append(label)  # reported by pick() as unknown, with the valid shapes
    return ",".join(out)
