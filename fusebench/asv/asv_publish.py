"""``asv publish``, its step detection fed to its process pool a few graphs at a time.

asv 0.6.6's ``GraphSet.detect_steps`` hands every series of every graph to the pool at once and
only then collects the steps: each task's data (a list of ``(revision, value, weight)`` per
parameter combination) waits in the parent until a worker takes it, so the whole history is held
a second time, in a bulkier form (3,000 results: about 1.5 GB more). Here the graphs are handed
over :data:`BATCH` per worker at a time and their steps collected before the next ones: the same
calls of asv's own ``Graph.detect_steps`` / ``get_steps`` on the same data, in the same pool, so
the same steps and the same site, with at most a few graphs' tasks in memory. Any other asv
version runs unchanged (the patch is for the code it was read against).

    python -m fusebench.asv.asv_publish --config asv.conf.json [asv publish options]
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys

#: Graphs in flight per worker of the pool.
BATCH = 4
#: The asv release whose ``GraphSet.detect_steps`` this replaces.
ASV_VERSION = "0.6.6"


def detect_steps(self, pool=None, dots=None) -> None:
    """``GraphSet.detect_steps`` (asv 0.6.6), the graphs submitted :data:`BATCH` per worker at a time."""
    graphs = list(self._graphs.values())
    step = BATCH * (multiprocessing.cpu_count() if pool is not None else 1)
    for start in range(0, len(graphs), step):
        batch = graphs[start:start + step]
        for graph in batch:
            graph.detect_steps(pool)
            if dots is not None and pool is None:
                dots()
        for graph in batch:
            graph.get_steps()
            if dots is not None and pool is not None:
                dots()


def _end_the_group(signum, frame) -> None:
    """SIGTERM (:func:`fusebench.asv.store.publish` starts this process in a process group of its
    own and arms the signal for its parent's death): end asv's pool workers with it. Killed
    alone, the workers were left blocked on their task pipe for good (issue 56). A worker inherits
    this handler: there, SIGTERM (the pool's own terminate) ends the worker alone, as by default."""
    if os.getpid() != os.getpgid(0):
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
        return
    os.killpg(0, signal.SIGKILL)


def arm() -> None:
    """In a process group of its own (the workers asv forks join it), SIGTERM ends the group
    (:func:`_end_the_group`)."""
    if os.getpgid(0) == os.getpid():
        signal.signal(signal.SIGTERM, _end_the_group)


def main() -> int:
    from importlib.metadata import version

    import asv.graph
    from asv.main import main as asv_main

    arm()

    if version("asv") == ASV_VERSION:
        asv.graph.GraphSet.detect_steps = detect_steps
    sys.argv = ["asv", "publish", *sys.argv[1:]]
    try:
        return asv_main()
    except Exception as exc:  # a full disk: one line, not asv's chained traceback
        from fusebench.errors import environment_error

        line = environment_error(exc)
        if line is None:
            raise
        print(f"publish: error: {line}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
