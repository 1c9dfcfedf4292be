"""Energy per call, from NVML's total-energy counter: shown beside the times, never gated.

``nvmlDeviceGetTotalEnergyConsumption`` is the board's energy since the driver loaded, in mJ
(NVIDIA Volta and later): the whole board's energy, idle power included. pJ per byte divides a
call's energy by the op's declared bytes moved. On the CPU, or where NVML or the counter is
missing, nothing is measured (the fields stay None).

**Where it is read: around the CUDA-graph replays every round already times.** Each round reads
the counter before and after the case's graph replays (``timing.graph_replays``: one queued block,
one synchronization at its end) and keeps the rise, the calls and the seconds in the round
(``Record.rounds[i]["energy"]``); the case's reading is the sum over its rounds
(:func:`accumulate`). Graph replays and not the hot batches: between the two readings the GPU runs
the op's kernels back to back and nothing else, with no launch gap (a hot batch of a launch-bound
call leaves the GPU idle between launches, and its blocking kernel spins as long as the host's
deficit, both charged to the calls), no flush (cold mode) and no synchronization inside the window
(a chunked reading tried before charged each synchronization's idle power to the calls: 1.38-1.45x;
docs/method.md). So graph mode keeps one queued block per round and no stopping rule
(``fusebench.measure.stopping``: a rule synchronizes between chunks), and its blocking kernel is
cut to its lead (1 ms) by the GPU time the replays are known to take. A case with no graph figure
(not captured) reads one window of back-to-back calls at the end instead (:func:`per_call`, the
method before this one).

**When an accumulated reading is a figure.** On an H200 the counter advances in steps every
100 ms (``docs/method.md``: 10 steps in 1 s, gaps 100.1 ms median, 103.1 ms at most): a reading
holds the energy up to the last step, so each of a window's two readings lags by between 0 and one
step period's energy, uniformly where the window starts at no particular time. The error of one
window is the difference of two such lags (root mean square ``step / sqrt(6)`` of the window's
power), whatever its length; ``k`` windows add ``k`` independent errors. The relative error of an
accumulated reading of ``seconds`` over ``k`` windows is therefore about
``COUNTER_STEP_S * sqrt(k / 6) / seconds`` (:func:`step_error`): 20 % for one 0.2 s window (the
reading before this one, whose figures moved by 0.75-2.1x between runs), 4 % for one 1 s window
(the issue's "a window under about a second is not a figure"). A figure is given when that error
is at most :data:`MAX_ERROR` (20 %, the precision of the one 0.2 s window before, which issue 44
keeps: "at the precision of today"): one window of at least 0.204 s, or 0.354 s over 3 rounds.
Splitting a window costs precision (sqrt(k)), so accumulating short windows does not replace one
long one: it only counts the replays the rounds run anyway.

**A case whose rounds fall short** gets one top-up window at the end of the run (the phase
``energy top-up``), of graph replays back to back (calls where there is no graph), as long as the
shorter of: what the rounds' reading needs to reach :data:`MAX_ERROR` with one more window, or
what one window alone needs (:func:`top_up_s`; the rounds' reading is then set aside, since it
would only add error), 1.05x for safety, and one more window where it still came out short. A
reading that does not rise or goes backwards (a driver reload) gives no figure, with its reason
(``energy_reason``), and is not tried again.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable

import torch

from fusebench.measure import timing
from fusebench.record import ENERGY_SCOPES

#: Seconds of back-to-back calls between the two counter readings of :func:`per_call`: the calls
#: stop when their GPU time (hot device time x calls) or the host's time to issue them reaches it.
WINDOW_S = 0.2
#: The counter's update period on an H200, s (docs/method.md: 100.1 ms median, 103.1 ms at most).
COUNTER_STEP_S = 0.1
#: The largest relative error from the counter's steps (:func:`step_error`) a reading may have to
#: be a figure: one window of 0.204 s, 0.354 s over 3 windows (module doc).
MAX_ERROR = 0.20
#: A top-up window is sized this much longer than it needs (:func:`top_up`): its calls are counted
#: from the case's figure; one that still ends short gets the one more window it then needs
#: (:data:`TOP_UP_WINDOWS`), rather than every case paying a wide margin.
TOP_UP_MARGIN = 1.05
#: Most top-up windows per case: the first, and one more where the first came out short.
TOP_UP_WINDOWS = 2
#: Most calls in one window (a very short call is bounded by the host anyway).
MAX_CALLS = 200_000
#: Which cases get a top-up window (``fusebench bench --energy``; the record's ``energy_scope``):
#: ``headline``, each op's headline shape and its grid's largest shape, every backend and dtype
#: (the default: energy is shown, never gated, and a top-up window costs 0.2-0.4 s a case, 80-93 s
#: of a full default grid); ``all``, every case (every record stored before the scope existed).
SCOPES = ENERGY_SCOPES
DEFAULT_SCOPE = ENERGY_SCOPES[0]


def selected(op, shape, grid: str, scope: str) -> bool:
    """Whether a case of ``op`` (``fusebench.registry.Op``) at ``shape`` in ``grid`` gets a
    top-up window under ``scope`` (:data:`SCOPES`): with ``headline``, the op's headline shape
    and the largest shape (most elements) of its ``grid``."""
    if scope == "all":
        return True
    shapes = op.grids.get(grid) or [shape]
    largest = max(shapes, key=lambda s: (math.prod(s), s))
    return tuple(shape) in (tuple(largest), tuple(op.headline or largest))


def not_selected_reason(scope: str) -> str:
    """The ``energy_reason`` of a case :func:`selected` leaves out."""
    return (f"energy: a top-up window is taken at each op's headline and largest shapes only "
            f"(--energy {scope}; --energy all, make bench ENERGY=all: every case)")


@dataclass(frozen=True)
class Energy:
    """One case's energy reading.

    Attributes:
        mj_per_call: the counter's rise over the window / calls, mJ.
        calls: calls in the window.
        seconds: the window's length (host clock, synchronized at both ends).
    """

    mj_per_call: float
    calls: int
    seconds: float

    @property
    def watts(self) -> float | None:
        """The window's average power, W: the counter's rise (mJ) over its length (s) / 1000."""
        return self.mj_per_call * self.calls / self.seconds / 1e3 if self.seconds > 0 else None

    def pj_per_byte(self, bytes_moved: int) -> float | None:
        """Energy per byte the call must move, pJ (1 mJ = 1e9 pJ); None without bytes."""
        return self.mj_per_call * 1e9 / bytes_moved if bytes_moved else None


def counter(dev: torch.device) -> Callable[[], float] | None:
    """A reader of ``dev``'s total-energy counter (mJ), or None: the CPU, no NVML, or a GPU
    whose driver does not report it (checked with one reading)."""
    if dev.type != "cuda":
        return None
    from fusebench.measure.environment import _nvml_handle

    handle = _nvml_handle(dev.index or 0)
    if handle is None:
        return None
    import pynvml

    def read() -> float:
        return float(pynvml.nvmlDeviceGetTotalEnergyConsumption(handle))

    try:
        read()
    except Exception:  # NVML_ERROR_NOT_SUPPORTED on pre-Volta boards, an old driver
        return None
    return read


def per_call(fn: Callable[[], object], dev: torch.device, read: Callable[[], float],
             call_ms: float, window_s: float = WINDOW_S) -> Energy | None:
    """Energy per call of ``fn`` over one window of back-to-back calls.

    Args:
        fn: the case's ready callable (warmed up).
        read: the counter (:func:`counter`).
        call_ms: one call's time (the case's hot device time), to size the window.
        window_s: the window's length, about.

    Returns None when the counter did not rise (it did not update within the window) or went
    backwards (a driver reload).
    """
    most = max(1, min(MAX_CALLS, math.ceil(window_s * 1e3 / max(call_ms, 1e-6))))
    timing.synchronize(dev)
    before, start = read(), time.perf_counter()
    calls, stop = 0, start + window_s
    while calls < most and (calls == 0 or time.perf_counter() < stop):
        fn()
        calls += 1
    timing.synchronize(dev)
    after, seconds = read(), time.perf_counter() - start
    if not after > before:
        return None
    return Energy((after - before) / calls, calls, seconds)


def step_error(seconds: float, windows: int, step_s: float | None = None) -> float:
    """Relative error (root mean square) the counter's steps give a reading of ``seconds`` summed
    over ``windows`` windows: ``step_s * sqrt(windows / 6) / seconds`` (module doc; ``step_s``
    None: :data:`COUNTER_STEP_S`); infinite for no window or no time."""
    if windows < 1 or seconds <= 0:
        return math.inf
    return (COUNTER_STEP_S if step_s is None else step_s) * math.sqrt(windows / 6) / seconds


def needed_s(windows: int) -> float:
    """The fewest seconds a reading over ``windows`` windows needs to be a figure
    (:func:`step_error` at most :data:`MAX_ERROR`)."""
    return COUNTER_STEP_S * math.sqrt(windows / 6) / MAX_ERROR


@dataclass
class Window:
    """A case's counter readings summed over windows (:func:`accumulate`).

    Attributes:
        mj: the counter's rise, summed, mJ.
        calls: the calls run inside the windows.
        seconds: the windows' host seconds between readings, summed.
        windows: how many windows.
        problems: why a window's reading is unusable (the counter did not rise or went backwards).
    """

    mj: float = 0.0
    calls: int = 0
    seconds: float = 0.0
    windows: int = 0
    problems: list[str] = field(default_factory=list)

    def add(self, mj: float, calls: int, seconds: float) -> None:
        """One more window: the counter rose by ``mj`` over ``calls`` calls in ``seconds``."""
        if mj < 0:
            self.problems.append("the counter went backwards (a driver reload?)")
        self.mj, self.calls, self.seconds, self.windows = (
            self.mj + mj, self.calls + calls, self.seconds + seconds, self.windows + 1)

    @property
    def error(self) -> float:
        """The relative error of the summed reading from the counter's steps (:func:`step_error`)."""
        return step_error(self.seconds, self.windows)

    @property
    def enough(self) -> bool:
        """A figure: at most :data:`MAX_ERROR`, a usable counter, a rise and a call."""
        return not self.problems and self.calls > 0 and self.mj > 0 and self.error <= MAX_ERROR

    def reading(self) -> Energy:
        """The summed reading as one :class:`Energy` (mJ per call, calls, seconds)."""
        return Energy(self.mj / self.calls if self.calls else 0.0, self.calls, self.seconds)


def accumulate(rounds: list[dict]) -> Window:
    """The window of a case's rounds: the sum of each round's ``energy`` entry
    (``{"mj", "calls", "s"}``, set by ``sweep.time_round`` around its graph replays)."""
    win = Window()
    for r in rounds:
        if (e := r.get("energy")) is not None:
            win.add(e["mj"], e["calls"], e["s"])
    return win


def top_up_s(win: Window) -> tuple[float, bool]:
    """The seconds of one more window that make ``win`` a figure, and whether ``win`` is kept:
    the shorter of what ``win`` plus one window needs and what one window alone needs (then
    ``win`` is set aside: its windows would only add error). ``(0.0, True)`` when ``win`` is
    already a figure."""
    if win.enough:
        return 0.0, True
    alone = needed_s(1)
    if win.problems or win.calls == 0 or win.mj <= 0:
        return alone, False
    combined = needed_s(win.windows + 1) - win.seconds
    return (combined, True) if combined < alone else (alone, False)


def replay_window(fn: Callable[[], object], dev: torch.device, read: Callable[[], float],
                  graph_calls: int, call_ms: float, seconds: float) -> tuple[float, int, float]:
    """One window of back-to-back replays of ``graph_calls`` calls of ``fn`` captured in one CUDA
    graph, as many as last ``seconds`` at ``call_ms`` per call: ``(mj, calls, seconds)``.

    Raises:
        timing.CaptureError: ``fn`` cannot be captured.
    """
    graph = timing.capture(fn, graph_calls)
    try:
        graph.replay()
        replays = max(1, math.ceil(seconds * 1e3 / max(call_ms * graph_calls, 1e-6)))
        timing.synchronize(dev)
        before, start = read(), time.perf_counter()
        for _ in range(replays):
            graph.replay()
        timing.synchronize(dev)
        return read() - before, replays * graph_calls, time.perf_counter() - start
    finally:
        graph.reset()


def top_up(rec, fn: Callable[[], object], dev: torch.device, read: Callable[[], float]) -> Window:
    """The case's window after its rounds (:func:`accumulate`), topped up where it falls short
    (:func:`top_up_s`): graph replays where the case has a graph figure, else calls back to back
    (:func:`per_call`). The calls are sized from the case's graph (or hot) device time, with
    :data:`TOP_UP_MARGIN`; a top-up that still ends short (the GPU ran the calls faster than the
    figure they were counted from) is followed by the window it then needs, at most
    :data:`TOP_UP_WINDOWS` in all."""
    win = accumulate(rec.rounds)
    call_ms = rec.device_time_graph_ms or rec.main_time_ms() or 1e-3
    graph = bool(rec.graph_calls and not rec.graph_reason and rec.device_time_graph_ms is not None)
    for _ in range(TOP_UP_WINDOWS):
        seconds, keep = top_up_s(win)
        if seconds <= 0:
            break
        win = win if keep else Window()
        seconds *= TOP_UP_MARGIN
        if graph:
            mj, calls, took = replay_window(fn, dev, read, rec.graph_calls, call_ms, seconds)
        else:
            one = per_call(fn, dev, read, call_ms, window_s=seconds)
            mj, calls, took = (one.mj_per_call * one.calls, one.calls, one.seconds) if one else (0.0, 0, 0.0)
        if mj == 0:  # a counter that did not move in a window this long is not retried
            win.problems.append("the counter did not rise within the window")
            break
        win.add(mj, calls, took)
        if win.problems:
            break
    return win


def fill(rec, win: Window, short: str | None = None) -> None:
    """Set ``rec.energy_mj_per_call``, ``rec.energy_pj_per_byte`` and ``rec.energy_w`` (the
    reading's average power) of a timed record (``fusebench.record.Record``) from its window;
    one that is no figure leaves them None and says why in ``rec.energy_reason`` (never fails
    the case); ``short``: the reason given when the window is too short (a case that got no
    top-up: :func:`not_selected_reason`)."""
    if rec.status != "ok":
        return
    if win.problems:
        rec.energy_reason = f"energy: {win.problems[0]}"
        return
    if not win.enough and short:
        rec.energy_reason = short
        return
    if win.calls == 0 or win.mj <= 0:
        rec.energy_reason = "energy: the counter did not rise within the window"
        return
    if not win.enough:
        rec.energy_reason = (f"energy: {win.seconds:.2f} s over {win.windows} window(s) is too short "
                             f"(the counter's steps: +-{100 * win.error:.0f} %, at most "
                             f"{100 * MAX_ERROR:.0f} % is a figure)")
        return
    reading = win.reading()
    rec.energy_mj_per_call = reading.mj_per_call
    rec.energy_pj_per_byte = reading.pj_per_byte(rec.bytes_moved)
    rec.energy_w = reading.watts
