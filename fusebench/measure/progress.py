"""The progress bars of a run: the build phase and the rounds, each naming the case it is on, with
elapsed time and an estimate of the time left (tqdm).

On stderr, and only when stderr is a terminal (a log file or a test gets the one-line-per-case
output alone); a bar is cleared when its phase ends. A run's build phase (compiling, gating,
profiling every case) can take minutes before the first round: its bar says which case is being
built, so a slow build is seen as it happens, not after the rounds.
"""

from __future__ import annotations

import sys


def bar(total: int, phase: str):
    """A bar over ``total`` cases of ``phase`` (``build``, ``rounds``), e.g.
    ``rounds  37%|███▋      | 95/255 [00:41<01:09, 2.3 case/s]``; ``update()`` after each case,
    :func:`show` before it.

    Returns a ``tqdm.tqdm`` (imported here: only a run needs it)."""
    from tqdm import tqdm

    return tqdm(total=total, desc=phase, unit=" case", file=sys.stderr, leave=False,
                disable=not sys.stderr.isatty(), dynamic_ncols=True)


def rounds_bar(total: int):
    """:func:`bar` of the rounds: ``total`` timed case-rounds (cases x rounds)."""
    return bar(total, "rounds")


def build_bar(total: int):
    """:func:`bar` of the build phase: ``total`` cases built, gated and profiled."""
    return bar(total, "build")


def show(progress, phase: str, op: str, backend: str, shape: str, dtype: str) -> None:
    """Name the case ``progress`` (a :func:`bar`) is on now: ``build gelu/torch/16384/float32``,
    ``round 2/3 gelu/torch/16384/float32``."""
    progress.set_description_str(f"{phase} {op}/{backend}/{shape}/{dtype}")


def say(progress, line: str, out) -> None:
    """Print ``line`` to ``out`` above ``progress`` (a :func:`bar`): the bar is cleared and drawn
    again below it, never split by the line (tqdm's ``write``). Every line a run prints while a bar
    is live goes through here; ``progress`` None (no bar yet or any more): a plain print."""
    if progress is None or progress.disable:
        print(line, file=out, flush=True)
    else:
        progress.write(line, file=out)
        out.flush()
