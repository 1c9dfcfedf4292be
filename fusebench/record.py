"""The run record's data model: one case's :class:`Record`, one run's :class:`Sweep`, their JSON
and its stored form (:data:`SUFFIX`: compact JSON in an xz stream; :func:`encode`, :func:`decode`).

What the sweep (``fusebench.measure.sweep``) writes and everything else reads: the gate, the
summary, the tables, the plots, the site, the merge of other hosts' records. A leaf: it imports
the standard library and the metric table only, so reading a record never imports torch or the
kernels. ``records/README.md`` documents the fields.
"""

from __future__ import annotations

import json
import lzma
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from fusebench import metrictable
from fusebench.atomic import write_atomic

#: Bump when the meaning of a record's fields changes (stored with each sweep).
FORMAT_VERSION = 2
#: A case's shape as a record stores it (``Record.shape``): at most 8 dimensions of at most 12
#: digits joined by ``x``. The case file accepts no other (``fusebench.config``), nor does a
#: record from another host (``fusebench.storage.untrusted``).
SHAPE = re.compile(r"[0-9]{1,12}(x[0-9]{1,12}){0,7}")
#: The most rounds a run may have: a round of the default grid takes minutes on an H200, so 100
#: is hours; more is a typo (``100000000000`` was accepted and would never end). The case file,
#: ``--rounds`` and a record from another host are held to it.
MAX_ROUNDS = 100
#: Seed of every case's input (``fusebench.measure.inputs``; recorded with each result).
SEED = 20261129
#: The per-round figures of a record (ms), aggregated as the median over rounds.
ROUND_FIELDS = ("device_time_ms", "device_time_iqr_ms", "device_time_cold_ms",
                "device_time_cold_iqr_ms", "device_time_graph_ms", "device_time_graph_iqr_ms",
                "wall_time_ms", "wall_time_iqr_ms")
#: The batched figures: field -> (the record's calls per timed repeat, the ms a repeat is sized
#: to fill, the most calls), ``fusebench.measure.timing``'s HOT_* and GRAPH_* (a test checks).
BATCHES = {"device_time_ms": ("hot_calls", 0.2, 64), "device_time_graph_ms": ("graph_calls", 0.2, 256)}
#: A batch is short when the one-call estimate it was sized from (at least fill / calls) exceeds
#: both this many times the figure and the figure plus SHORT_BATCH_MS: a stalled estimate.
SHORT_BATCH_RATIO = 3.0
SHORT_BATCH_MS = 0.01

#: A stored record's name ends so: compact JSON in one xz stream (``records/README.md`` says why
#: xz and what it saves). A name ending ``.json`` is a record of plain JSON: still read, never
#: written into a records folder.
SUFFIX = ".json.xz"
#: The most bytes a record's JSON may take, plain or once decompressed: a reader's memory stays
#: bounded whatever a file from another host holds (a compressed bomb stops here).
MAX_JSON = 64 << 20
#: The most memory the xz decoder may take; the header of a stream names its dictionary, and
#: ours (preset 6) needs 9 MiB: a header asking for more is refused before it is allocated.
XZ_MEMLIMIT = 32 << 20


def encode(data: dict) -> bytes:
    """``data`` (a :class:`Sweep` as a dict) as a stored record: compact JSON, xz preset 6."""
    return lzma.compress(json.dumps(data, separators=(",", ":")).encode(), preset=6)


def decode(raw: bytes, name: str, limit: int = MAX_JSON) -> bytes:
    """The JSON bytes of a record file named ``name`` holding ``raw``: decompressed when the name
    ends ``.xz`` (one xz stream, at most ``limit`` bytes out, the decoder's memory capped), else
    ``raw`` itself (no longer than ``limit``).

    Raises:
        ValueError: more than ``limit`` bytes, or not one whole xz stream (one line: why).
    """
    if not name.endswith(".xz"):
        if len(raw) > limit:
            raise ValueError(f"{len(raw)} bytes, more than the {limit >> 20} MB a record's JSON may take")
        return raw
    dec = lzma.LZMADecompressor(format=lzma.FORMAT_XZ, memlimit=XZ_MEMLIMIT)
    try:
        out = dec.decompress(raw, max_length=limit + 1)
    except lzma.LZMAError as exc:
        raise ValueError(f"not a whole xz stream ({exc}); corrupt or not xz") from None
    if len(out) > limit:
        raise ValueError(f"decompresses to more than the {limit >> 20} MB a record's JSON may take; "
                         "refused unread (a compressed bomb, or no record a run writes)")
    if not dec.eof:
        raise ValueError("truncated: its xz stream ends before its end marker")
    if dec.unused_data:
        raise ValueError(f"{len(dec.unused_data)} bytes after its xz stream")
    return out


def short_batch(field: str, calls: int | None, figure_ms: float | None) -> str:
    """Why a ``field`` figure of ``figure_ms`` timed ``calls`` per repeat was not timed in the
    batch its method asks for (empty: it was, or the field is not batched): :meth:`Record.short_batch`."""
    _, fill_ms, most = BATCHES.get(field, (None, 0.0, 0))
    if not calls or not figure_ms or calls >= most:
        return ""
    estimate = fill_ms / calls
    if estimate > SHORT_BATCH_RATIO * figure_ms and estimate > figure_ms + SHORT_BATCH_MS:
        return (f"short batch: {calls} call{'s' if calls != 1 else ''} per repeat for a "
                f"{figure_ms * 1e3:.3g} us call (sized from a stalled estimate)")
    return ""


@dataclass
class Record:
    """One case's outcome. Times in ms, bandwidth in GB/s, sizes in bytes, throughput in TFLOP/s.

    ``dtype`` is the dtype-axis name (``"tf32"`` included). ``flops``, ``tflops`` and
    ``pct_of_peak`` (of the run's matrix peak) are set for ops that declare their arithmetic;
    ``roofline`` says which ceiling bounds the op (``cache_flag`` applies to memory-bound ops).
    ``status`` is ``"ok"`` (gated and timed), ``"failed"`` (gate or run failed: ``reason``) or
    ``"skipped"`` (this machine or backend cannot run it: ``reason``). Device times are None on
    the CPU; there ``bandwidth_gbps`` comes from the host clock (``clock`` says which).

    Times are medians over rounds; ``rounds`` keeps each round's figures (the fields of
    :data:`ROUND_FIELDS`, ``repeats`` (hot, graph and wall; ``cold_repeats`` for cold mode), and the
    NVML readings ``before``/``after``). ``noise`` is
    the relative spread between rounds ((max - min) / median of the main time: hot device time on
    a GPU, host time on the CPU) when there are two rounds or more, else the IQR / median of the
    one round; ``noise_within`` is the median over rounds of the IQR / median of one batch.
    A round measured throttled or beside another process is left out of the figures while most
    rounds are clean (``dropped_rounds``, 0-based); otherwise the case is contaminated and
    ``contamination`` lists why (empty: clean; see :func:`clean_rounds`). ``kernels`` names the
    kernels one call launched with their geometry, ``kernel_id`` identifies them, and
    ``kernel_by_timing`` says the backend picks its kernel by timing at first use (Inductor), so
    that a different ``kernel_id`` between two runs is the compiler's choice, not the code's.
    ``hot_calls`` is the hot batch size (calls between one event pair), fixed across rounds.
    ``device_time_graph_ms`` is the graph device time (``graph_calls`` calls captured in one CUDA
    graph, replayed: ``fusebench.measure.timing.graph_device_time``); None with ``graph_reason``
    saying why when the case cannot be captured (the other figures stand).
    ``gpu_index`` and ``gpu_serial`` (NVML's index and board serial; None on the CPU or where NVML
    cannot say) name the one GPU that timed every round of the case.
    ``energy_mj_per_call`` and ``energy_pj_per_byte``: energy per call from NVML's total-energy
    counter read around each round's graph replays (each round's reading is its ``energy``,
    ``{"mj", "calls", "s"}``), summed over the rounds and topped up at the end of the run where
    that window is too short to be a figure (``fusebench.measure.energy``; shown, never gated;
    before method 2 of ``track_energy``, one window of calls after the rounds), None on the CPU,
    where the counter is missing or where the reading is no figure (``energy_reason`` says why);
    ``energy_w`` is the reading's average power (the counter's rise over its seconds, W), which
    ``fusebench.report.marks`` holds against the board's power limit. Each round's ``samples``
    says how many samples each mode took under the stopping rule (``Sweep.timing``).
    """

    op: str
    backend: str
    shape: str
    dtype: str
    status: str = "ok"
    reason: str = ""
    seed: int = SEED
    bytes_moved: int = 0
    max_rel_error: float | None = None
    tolerance: float | None = None
    device_time_ms: float | None = None
    device_time_iqr_ms: float | None = None
    device_time_cold_ms: float | None = None
    device_time_cold_iqr_ms: float | None = None
    device_time_graph_ms: float | None = None
    device_time_graph_iqr_ms: float | None = None
    graph_calls: int | None = None
    graph_reason: str = ""
    wall_time_ms: float | None = None
    wall_time_iqr_ms: float | None = None
    repeats: int | None = None
    noise: float | None = None
    clock: str | None = None
    bandwidth_gbps: float | None = None
    bandwidth_cold_gbps: float | None = None
    pct_of_ceiling: float | None = None
    cache_flag: bool = False
    launches: int | None = None
    compile_s: float | None = None
    clocks: dict = field(default_factory=dict)
    roofline: str = "memory"
    flops: int | None = None
    tflops: float | None = None
    pct_of_peak: float | None = None
    noise_within: float | None = None
    hot_calls: int | None = None
    kernels: list[str] = field(default_factory=list)
    kernel_id: str | None = None
    kernel_by_timing: bool = False
    contamination: list[str] = field(default_factory=list)
    dropped_rounds: list[int] = field(default_factory=list)
    rounds: list[dict] = field(default_factory=list)
    gpu_index: int | None = None
    gpu_serial: str | None = None
    energy_mj_per_call: float | None = None
    energy_pj_per_byte: float | None = None
    energy_reason: str = ""
    energy_w: float | None = None

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.op, self.backend, self.shape, self.dtype)

    @property
    def contaminated(self) -> bool:
        """True when some round was measured throttled or beside another process."""
        return bool(self.contamination)

    def short_batch(self, field: str) -> str:
        """Why ``field``'s batch is not the one its method asks for (empty: it is, or unbatched).

        The batch is sized from an estimate of one call with its event pair; one stalled by the
        host (the queue ran dry) makes the batch far shorter than its figure implies, and the
        fixed cost of each repeat is then spread over too few calls (``BATCHES``)."""
        calls_attr = BATCHES.get(field, (None,))[0]
        return short_batch(field, getattr(self, calls_attr, None) if calls_attr else None,
                           getattr(self, field, None))

    def main_time_ms(self) -> float | None:
        """The time the figures come from: hot device time on a GPU, host time on the CPU."""
        return self.device_time_ms if self.device_time_ms is not None else self.wall_time_ms

    def time_per_launch_ms(self) -> float | None:
        """Hot device time / launches per call (ms), None when either is unknown: below a few µs
        a case is launch-bound (the gate's time bands, ``fusebench.gate.noise``)."""
        if self.device_time_ms is None or not self.launches:
            return None
        return self.device_time_ms / self.launches


#: Which cases of a run get an energy top-up window (``Sweep.energy_scope``,
#: ``fusebench.measure.energy.selected``): the first is the default.
ENERGY_SCOPES = ("headline", "all")


@dataclass
class Sweep:
    """All records of one run, with the environment and the ceilings they were measured in.

    ``peak_tflops`` is the matrix peak (``fusebench.measure.metrics.measure_matrix_peak``), measured
    only when an op of the run declares flops; None otherwise. ``ceiling_gbps`` is the median of the copy
    ceilings measured at the start of each round (``ceilings_gbps``, GB/s). ``phases`` holds
    seconds per phase (``build``, ``gate``, ``profile``, ``round 1``, ..., and ``rounds: hot`` and the other
    parts of the rounds summed over them: ``sweep.ROUND_PARTS``; ``make bench`` adds
    ``asv`` and ``publish``); ``warnings`` what the run printed loudly (another process on the
    GPU at the start, contaminated cases). ``methods`` is each metric's method version
    (``fusebench.metrictable.Metric.method``: the gate's history never pairs two runs across a
    change of it); ``timing`` the stopping rule the rounds were measured under
    (``fusebench.measure.stopping.StopRule``: ``max_noise``, ``max_s``, ``min_samples``; empty in
    a record stored before the rule, whose every mode filled 0.04 s, at least 10 samples);
    ``energy_scope`` which cases got an energy top-up window (``fusebench.measure.energy.SCOPES``:
    ``headline``, each op's headline and largest shapes; ``all``, every case, as every record
    stored before the scope).
    """

    environment: dict
    ceiling_gbps: float
    grid: str
    records: list[Record]
    format_version: int = FORMAT_VERSION
    peak_tflops: float | None = None
    rounds: int = 1
    ceilings_gbps: list[float] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    methods: dict[str, int] = field(default_factory=metrictable.methods)
    timing: dict = field(default_factory=dict)
    energy_scope: str = "all"

    def save(self, path: Path) -> None:
        """Write as a stored record (:func:`encode`) when ``path`` ends ``.xz``, else as indented
        JSON (:func:`fusebench.atomic.write_atomic`)."""
        write_atomic(path, encode(asdict(self)) if path.name.endswith(".xz")
                     else json.dumps(asdict(self), indent=1))

    @classmethod
    def load(cls, path: Path) -> "Sweep":
        """Read a sweep written by :meth:`save` (:func:`decode`: bounded; not checked as a file
        from another host is, ``fusebench.storage.runrecord.read`` does that).

        Raises:
            ValueError: the file is not a sweep of this format version, or cannot be decoded.
        """
        path = Path(path)
        try:
            data = json.loads(decode(path.read_bytes(), path.name))
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None
        if data.get("format_version") != FORMAT_VERSION:
            raise ValueError(f"{path}: not a fusebench sweep of format {FORMAT_VERSION}")
        data["records"] = [Record(**r) for r in data["records"]]
        data.setdefault("methods", {})  # stored before methods were: version 1 of every metric
        return cls(**data)

    def by_key(self) -> dict[tuple[str, str, str, str], Record]:
        return {r.key: r for r in self.records}


def where(env: dict) -> str:
    """Where a run measured, in words every result and record carries: ``in image <digest>`` (the
    pinned image, its id cut to 19 characters) or ``on host (python X, torch Y, triton Z)`` (a
    host's own Python: its versions are not the lock's). ``env`` is a run's environment
    (``Sweep.environment``, from ``fusebench.measure.environment.capture``)."""
    if env.get("image_digest"):
        return f"in image {str(env['image_digest'])[:19]}"
    return (f"on host (python {env.get('python')}, torch {env.get('torch')}, "
            f"triton {env.get('triton') or 'none'})")


def clean_rounds(rounds: list[dict]) -> tuple[list[dict], list[str]]:
    """The rounds a case's figures come from, and its contamination.

    A round measured throttled or beside another process is left out while a majority of the
    rounds is clean (a power cap left over from the previous case in one round's order should
    not hide the case); with fewer clean rounds than that, every round is used and the case is
    contaminated: returns ``(rounds, reasons)`` with the reasons of every contaminated round.
    """
    clean = [r for r in rounds if not r.get("contamination")]
    if 2 * len(clean) > len(rounds):
        return clean, []
    reasons = [c for r in rounds for c in r.get("contamination", ())]
    return rounds, list(dict.fromkeys(reasons))
