"""NVTX range names, colours and markers: one range per case, ``<op>/<backend>/<shape>/<dtype>``.

Ranges live in the NVTX domain :data:`DOMAIN` (``fusebench``) and are coloured by backend, so a
timeline shows at a glance which implementation ran where. Nsight Systems prints a range of a
named domain as ``fusebench:gelu/eager/16777216/float32``, one of the default domain as
``:gelu/...``, and some report versions print the bare name: :func:`parse_range` accepts all three.

Markers use the ``nvtx`` package's fast path (NVTX docs, "Domain.push_range"): the domain, the
registered strings and the event attributes are built once, before the capture window, so the
hot loop only calls ``domain.push_range(attributes)`` / ``domain.pop_range()``. Without a tool
attached (no nsys), ``nvtx.get_domain`` returns a dummy domain and the markers cost nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from fusebench.axes import BACKENDS

#: NVTX domain of every fusebench range.
DOMAIN = "fusebench"

#: One ARGB colour per backend, in the order of :data:`fusebench.axes.BACKENDS`
#: (matplotlib's tab10: blue, orange, green, red, purple). Integers, so ``nvtx`` needs no
#: matplotlib to convert them.
PALETTE: tuple[int, ...] = (0xFF1F77B4, 0xFFFF7F0E, 0xFF2CA02C, 0xFFD62728, 0xFF9467BD,
                            0xFF8C564B, 0xFFE377C2, 0xFF7F7F7F)


@dataclass(frozen=True)
class RangeName:
    """The four axes a range name carries (shape as its label, e.g. ``16384x16384``)."""

    op: str
    backend: str
    shape: str
    dtype: str

    def __str__(self) -> str:
        return f"{self.op}/{self.backend}/{self.shape}/{self.dtype}"


def range_name(op: str, backend: str, shape: str, dtype: str) -> str:
    """``("gelu", "eager", "16777216", "float32")`` -> ``"gelu/eager/16777216/float32"``.

    ``shape`` is the label of :func:`fusebench.registry.shape_label`. The name carries no domain;
    nsys prefixes it with ``fusebench:``.
    """
    return str(RangeName(op, backend, shape, dtype))


def parse_range(text: str, domain: str = DOMAIN) -> RangeName | None:
    """The case named by an nsys ``Range`` / ``NVTX Range`` cell, or None when it is not ours.

    Accepts ``fusebench:gelu/eager/16777216/float32`` (named domain, nsys 2024.3 and later),
    ``:gelu/eager/...`` (default domain) and the bare ``gelu/eager/...``; surrounding blanks and
    quotes are ignored. Ranges of another domain, or not of four ``/``-separated parts, give None.
    """
    text = text.strip().strip('"').strip()
    prefix, sep, name = text.rpartition(":")
    if sep and prefix not in ("", domain):
        return None
    parts = name.split("/")
    if len(parts) != 4 or not all(parts):
        return None
    return RangeName(*parts)


def backend_color(backend: str) -> int:
    """ARGB colour of ``backend``'s ranges (its position in :data:`BACKENDS` picks the colour).

    Raises:
        ValueError: ``backend`` is not one of :data:`BACKENDS`.
    """
    return PALETTE[BACKENDS.index(backend) % len(PALETTE)]


class Markers:
    """NVTX push/pop markers for a fixed set of range names, built once, outside the hot loop.

    ``markers = Markers([(name, color), ...])`` registers every name in the domain and builds its
    event attributes; then ``markers.push(name)`` / ``markers.pop()`` cost one C call each.
    Without a profiler attached both are no-ops.
    """

    def __init__(self, ranges: Iterable[tuple[str, int]], domain: str = DOMAIN) -> None:
        import nvtx

        self.domain = nvtx.get_domain(domain)
        self.attributes = {name: self.domain.get_event_attributes(message=name, color=color)
                           for name, color in ranges}

    def push(self, name: str) -> None:
        """Open the range ``name`` (one of the names given at construction) on this thread."""
        self.domain.push_range(self.attributes[name])

    def pop(self) -> None:
        """Close the innermost open range of this thread."""
        self.domain.pop_range()
