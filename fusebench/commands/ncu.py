"""Nsight Compute counters of one op: DRAM bytes per call against the declared bytes (make ncu).

    fusebench ncu capture --op gelu [--backends ..] [--shapes ..] [--dtypes ..] [--calls 5] [--ncu ncu]
    fusebench ncu check   --op gelu [...] [--ncu ncu]
    fusebench ncu summary nsys/<stem>-ncu

``capture`` runs the whole capture into ``nsys/`` of the checkout: ``check``, then ``ncu`` of
``fusebench nsys run`` (the nsys capture's driver: every case of the op's nsys grid is built,
gated and warmed up before ``cudaProfilerStart``, then its calls run inside one NVTX range),
with application replay and the caches left as the program leaves them, then the report's raw
page (``<stem>_raw.csv``, only the columns the summary reads) and ``summary``, which writes
``<stem>.md`` and ``<stem>.csv``: per case, kernels per call, DRAM bytes read and written per
call, measured over declared bytes (marked above 1.1x), DRAM throughput as % of peak, L2 hit
rate. ``check`` validates the selection, finds ncu (PATH, then
``/opt/nvidia/nsight-compute/*/ncu``), and checks that the counters may be read and that a GPU is
there. The stem is ``nsys/<op>-<machine>-<short sha>-ncu``. docs/profiling.md says how to read it.

Exit status: 0 on success, 1 when ncu or a GPU is missing, the counters are not permitted, or
nothing could run, 2 on bad input.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

from fusebench.atomic import write_atomic
from fusebench.commands import nsys as nsys_cmd
from fusebench.errors import UsageError
from fusebench.nsys import ncu_csv, ncu_tool, tool
from fusebench.paths import PROJECT_ROOT

PROG = "ncu"
#: Calls per range: each kernel is profiled on its own, so fewer than nsys's 20; 5 leave the
#: writes one call's last kernel leaves in L2 a fifth of what they would be in one call.
CALLS = 5


def stem_of(args) -> str:
    env = nsys_cmd._environment()
    return tool.report_stem(args.op, env.machine_name(), env.git_commit()) + "-ncu"


def cmd_check(args) -> int:
    _, cases = nsys_cmd._plan(args, "cuda")
    nsys_cmd._require_gpu("make ncu")  # first: without a GPU, installing ncu would not help
    path, version = ncu_tool.check(args.ncu)
    nsys_cmd._require_nvtx()
    print(f"{PROG}: ncu {'.'.join(map(str, version))} ({path}); {len(cases)} case(s) of {args.op}, "
          f"{args.calls} calls per range; application replay runs the program once per pass",
          file=sys.stderr)
    args.ncu_path = path
    return 0


def cmd_capture(args) -> int:
    """The whole capture (``make ncu``): check, ``ncu`` of ``fusebench nsys run``, the raw page,
    the summary; its files in ``<checkout>/nsys/``."""
    cmd_check(args)
    config = ["--config", str(args.config.resolve())] if args.config else []  # before the chdir
    os.chdir(PROJECT_ROOT)
    stem = stem_of(args)
    for end in (".json", "_raw.csv", ".md", ".csv"):
        Path(f"{stem}{end}").unlink(missing_ok=True)
    selection = tool.driver_args(args.op, args.backends, args.shapes, args.dtypes) + (
        ["--calls", str(args.calls), *config])
    program = [sys.executable, "-m", "fusebench", "nsys", "run", *selection, "--json", f"{stem}.json"]
    cmd = ncu_tool.profile_command(args.ncu_path, stem, program)
    print(shlex.join(cmd), file=sys.stderr, flush=True)
    start = time.monotonic()
    status, kernels = ncu_tool.run_profile(cmd)
    if status != 0:
        raise nsys_cmd.CannotRun(f"`ncu` failed (exit {status}; its output is above)")
    print(f"{PROG}: {kernels} kernel profile(s) over the replay passes in {time.monotonic() - start:.0f} s",
          file=sys.stderr)
    write_raw(args.ncu_path, stem)
    args.stem = stem
    return cmd_summary(args)


def raw_page(ncu: str, report: str) -> str:
    """The raw page of ``report`` as CSV text (``ncu -i``).

    Raises:
        CannotRun: ncu could not read the report.
    """
    cmd = ncu_tool.raw_csv_command(ncu, report)
    print(shlex.join(cmd) + f" > {Path(report).with_suffix('')}_raw.csv (trimmed)", file=sys.stderr)
    out = subprocess.run(cmd, capture_output=True, text=True, errors="replace")
    if out.returncode != 0:
        lines = out.stderr.strip().splitlines()
        raise nsys_cmd.CannotRun(f"`ncu -i {report}` failed (exit {out.returncode}): "
                                 f"{lines[-1] if lines else 'no message'}")
    return out.stdout


def write_raw(ncu: str, stem: str) -> None:
    """``<stem>_raw.csv``: the report's raw page, trimmed to the columns the summary reads."""
    write_atomic(Path(f"{stem}_raw.csv"), ncu_csv.trimmed(raw_page(ncu, f"{stem}.ncu-rep")))


def cmd_summary(args) -> int:
    stem = args.stem
    side_path, raw_path = Path(f"{stem}.json"), Path(f"{stem}_raw.csv")
    for path in (side_path, raw_path):
        if path.is_symlink() or not path.is_file():
            raise UsageError(f"no file {path}: run the capture first (make ncu OP=...)")
    from fusebench.nsys import capture_summary, ncu_summary

    try:
        side = capture_summary.load_side(side_path)
        counters, outside = ncu_csv.by_range(ncu_csv.read(raw_path.read_text(errors="replace")))
        table = ncu_summary.rows(side, counters)
    except (ValueError, KeyError, TypeError, ncu_csv.CountersError) as exc:
        raise UsageError(f"{stem}: not a capture's files ({exc})") from None
    text = ncu_summary.markdown(side, table, stem, outside)
    write_atomic(Path(f"{stem}.md"), text)
    write_atomic(Path(f"{stem}.csv"), ncu_summary.csv_text(table))
    print(text)
    print(f"{PROG}: wrote {stem}.md and {stem}.csv", file=sys.stderr)
    over = [r for r in table if r.over_declared]
    if over:
        print(f"{PROG}: {len(over)} case(s) move more than {ncu_summary.OVER_DECLARED:g}x their declared "
              "bytes through DRAM (marked +)", file=sys.stderr)
    return 0


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The steps of ``fusebench ncu``, each a subcommand with its options."""
    sub = ap.add_subparsers(dest="step", required=True, metavar="<step>", parser_class=type(ap))
    for name, text in (("capture", "the whole capture: check, ncu of the nsys driver, raw page, summary "
                                   "(what make ncu runs)"),
                       ("check", "validate the selection, find ncu, check the counters may be read "
                                 "and the GPU")):
        p = sub.add_parser(name, help=text)
        nsys_cmd._selection(p, CALLS)
        p.add_argument("--ncu", default="ncu", help="the ncu executable (default: ncu on PATH, else the "
                                                    f"newest {ncu_tool.INSTALL_GLOB})")
    p = sub.add_parser("summary", help="write <stem>.md and <stem>.csv from <stem>_raw.csv and <stem>.json")
    p.add_argument("stem", help="capture path without extension, e.g. nsys/gelu-h100-1a2b3c4-ncu")


def run(args: argparse.Namespace) -> int:
    """Run the step ``args.step`` of ``fusebench ncu``; returns the exit status."""
    command = {"capture": cmd_capture, "check": cmd_check, "summary": cmd_summary}[args.step]
    try:
        return command(args)
    except (nsys_cmd.CannotRun, ncu_tool.NcuUnavailable, ncu_csv.CountersError) as exc:
        text = str(exc)
        if getattr(args, "op", None):  # the suggested command names this op: it runs as printed
            text = text.replace("`make trace OP=...`", f"`make trace OP={args.op}`")
        print(f"{PROG}: error: {text}", file=sys.stderr)
        return 1
