"""A torch.profiler Chrome trace of one op, one named range per case, as in nsys (no nsys needed).

    fusebench trace --op gelu [--backends ..] [--shapes ..] [--dtypes ..] [--calls N] [--out FILE]

Gates, warms up and times every case first (the op's nsys grid on a GPU, as ``make nsys``; its
quick grid on a host without one, the nsys grid's shapes being large for a CPU; ``--shapes``
picks others of its default grid), then runs each case's calls in one range and writes the
trace (default ``nsys/<op>-<machine>-<short sha>.trace.json``; open it in
https://ui.perfetto.dev); its last line names the grid and the shapes traced. On the CPU it
traces CPU ops only. Exit status: 0, 1 when nothing could run, 2 on bad input.
"""

from fusebench.commands.nsys import add_trace_arguments as add_arguments
from fusebench.commands.nsys import run_trace as run

__all__ = ["add_arguments", "run"]
