"""The progress bar of a run's rounds: elapsed time and an estimate of the time left (tqdm).

On stderr, and only when stderr is a terminal (a log file or a test gets the one-line-per-case
output alone); the bar is cleared when the rounds end.
"""

from __future__ import annotations

import sys


def rounds_bar(total: int):
    """A bar over ``total`` timed case-rounds (cases x rounds), e.g.
    ``rounds  37%|███▋      | 95/255 [00:41<01:09, 2.3 case/s]``; ``update()`` after each.

    Returns a ``tqdm.tqdm`` (imported here: only a run needs it)."""
    from tqdm import tqdm

    return tqdm(total=total, desc="rounds", unit=" case", file=sys.stderr, leave=False,
                disable=not sys.stderr.isatty(), dynamic_ncols=True)
