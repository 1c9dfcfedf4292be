"""Wall time and peak memory of a command and every process it starts (Linux ``/proc``).

``/usr/bin/time -v`` reports the largest single process of a tree, not the tree: ``fusebench
publish`` runs ``asv publish`` (and its step-detection pool) and forked plot workers beside itself.
This runs the command and samples its whole process tree every ``--every`` seconds: the sum of
the processes' RSS (pages shared after a fork counted in each) and of their PSS (shared pages
split between the processes sharing them: the tree's own share of memory). Prints the wall time,
both peaks and the exit status on stderr, and exits with the command's status.

    python probes/tree_peak.py [--every 0.2] [--limit SECONDS] -- COMMAND [ARG ...]

``--limit``: after that many seconds the command is interrupted (SIGINT, as Ctrl-C; SIGKILL to
the tree 30 s later) and the figures are those up to then (the line says "stopped").
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time


def children(pid: int) -> list[int]:
    """The direct children of ``pid`` (every thread's ``children`` list)."""
    out = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(c) for c in f.read().split()]
    except OSError:
        pass
    return out


def tree(pid: int) -> list[int]:
    """``pid`` and all its descendants alive now."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += children(p)
    return out


def memory(pid: int) -> tuple[int, int]:
    """``(rss, pss)`` of ``pid`` in bytes (``smaps_rollup``); zeros once it is gone."""
    rss = pss = 0
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Rss:"):
                    rss = int(line.split()[1]) * 1024
                elif line.startswith("Pss:"):
                    pss = int(line.split()[1]) * 1024
    except OSError:
        pass
    return rss, pss


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--every", type=float, default=0.2, help="seconds between samples")
    ap.add_argument("--limit", type=float, default=None, help="interrupt the command after this long")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
    args = ap.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        print("tree_peak: error: no command given (tree_peak.py -- COMMAND ...)", file=sys.stderr)
        return 2
    start = time.monotonic()
    proc = subprocess.Popen(command)
    peak_rss = peak_pss = most = 0
    stopped = False
    while proc.poll() is None:
        if args.limit is not None and not stopped and time.monotonic() - start > args.limit:
            stopped = True
            proc.send_signal(signal.SIGINT)
        if stopped and time.monotonic() - start > args.limit + 30:
            for p in tree(proc.pid):
                with contextlib.suppress(OSError):
                    os.kill(p, signal.SIGKILL)
        pids = tree(proc.pid)
        sizes = [memory(p) for p in pids]
        peak_rss = max(peak_rss, sum(r for r, _ in sizes))
        peak_pss = max(peak_pss, sum(p for _, p in sizes))
        most = max(most, len(pids))
        time.sleep(args.every)
    wall = min(time.monotonic() - start, args.limit) if stopped else time.monotonic() - start
    print(f"tree_peak: {'stopped at ' if stopped else ''}{wall:.1f} s, peak tree RSS "
          f"{peak_rss / 2**20:.0f} MiB, peak tree PSS {peak_pss / 2**20:.0f} MiB, up to {most} "
          f"processes, exit {proc.returncode}", file=sys.stderr)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
