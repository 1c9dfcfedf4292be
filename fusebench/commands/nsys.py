"""An Nsight Systems capture of one op, one named range per case (fusebench nsys capture, make nsys).

    fusebench nsys capture --op gelu [--backends ..] [--shapes ..] [--dtypes ..] [--nsys nsys]
    fusebench nsys plan    --op gelu [--backends ..] [--shapes ..] [--dtypes ..]
    fusebench nsys stem    gelu
    fusebench nsys check   --op gelu [...] --nsys nsys
    fusebench nsys run     --op gelu [...] --json nsys/<stem>.json    (under nsys)
    fusebench nsys summary nsys/<stem>
    fusebench trace        --op gelu [...] --out nsys/<stem>.trace.json

``capture`` runs the whole capture (``check``, ``nsys profile`` of ``run``, ``nsys stats``,
``summary``, each nsys command printed as it starts), into ``nsys/`` of the checkout: the one
pipeline, which ``make nsys`` calls; the other steps are its parts. ``plan`` prints the range
names in run order; ``stem`` the capture's path without extension
(``nsys/<op>-<machine>-<short sha>``); ``check`` validates the selection and the nsys version and
that a GPU is there; ``run`` is what ``nsys profile`` starts: it gates, warms up and times every
case with the harness outside the capture window, then runs each case's calls inside one NVTX
range between ``cudaProfilerStart`` and ``cudaProfilerStop``, and writes the side file the
summary reads; ``summary`` reads the ``nsys stats`` CSVs and the side file and writes
``<stem>.md`` and ``<stem>.csv``; ``trace`` writes a ``torch.profiler`` Chrome
trace with the same range names (no nsys needed; on the CPU it traces CPU ops only).

Exit status: 0 on success (cases that are skipped or fail the gate are reported, and the rest
runs), 1 when nsys or a GPU is missing or nothing could run, 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

from fusebench import config as case_file
from fusebench.axes import BACKENDS, ELEMENT_SIZE
from fusebench.cli import add_config, positive_int
from fusebench.errors import UsageError
from fusebench.nsys import stats_csv, tool
from fusebench.nsys.plan import CALLS, DEFAULT_GRID, select
from fusebench.ops import configured, get_op
from fusebench.paths import PROJECT_ROOT, real_folder

PROG = "nsys"


def _environment():
    """``fusebench.measure.environment``, imported when a step needs the device (it imports torch:
    ``--help`` and ``summary`` need none)."""
    from fusebench.measure import environment

    return environment


class CannotRun(Exception):
    """This machine cannot do what was asked (no GPU, nothing runnable); exit status 1."""


def _selection(ap: argparse.ArgumentParser, calls: int = CALLS) -> None:
    ap.add_argument("--op", required=True, help=f"one of: {', '.join(case_file.load().ops)}")
    ap.add_argument("--backends", help=f"comma-separated, of: {', '.join(BACKENDS)}")
    ap.add_argument("--shapes", help="comma-separated shape labels of the op's default grid (default: its "
                    "nsys grid on a GPU, its quick grid on a host without one)")
    ap.add_argument("--dtypes", help=f"comma-separated, of: {', '.join(ELEMENT_SIZE)} (the op's)")
    ap.add_argument("--calls", type=positive_int, default=calls, help=f"calls per range (default {calls})")
    add_config(ap)


def _plan(args, device_type: str):
    if not args.op:
        raise UsageError(f"OP= names the op to profile; valid ops: {', '.join(configured(args.config))}")
    op = get_op(args.op, configured(args.config))
    return op, select(op, args.backends, args.shapes, args.dtypes, device_type, args.calls)


def _device():
    return _environment().device()


def cmd_plan(args) -> int:
    _, cases = _plan(args, _device().type)
    for case in cases:
        print(case.range)
    return 0


def cmd_stem(args) -> int:
    print(tool.report_stem(args.op, _environment().machine_name(), _environment().git_commit()))
    return 0


def _require_gpu(what: str) -> None:
    if _device().type != "cuda":
        raise CannotRun(f"{what} needs an NVIDIA GPU (torch sees none); `make trace OP=...` "
                           f"traces the CPU ops here")


def _require_nvtx() -> None:
    import importlib.util

    if importlib.util.find_spec("nvtx") is None:
        raise CannotRun("the nvtx package is not installed in this Python (pip install nvtx==0.2.16; "
                        "requirements.in lists it)")


def cmd_check(args) -> int:
    _, cases = _plan(args, "cuda")
    version = tool.check(args.nsys)
    _require_nvtx()
    _require_gpu("make nsys")
    print(f"{PROG}: nsys {'.'.join(map(str, version))} ({tool.locate(args.nsys)}); {len(cases)} "
          f"case(s) of {args.op}, {args.calls} calls per range", file=sys.stderr)
    return 0


def cmd_capture(args) -> int:
    """The whole capture (``make nsys``): check, ``nsys profile`` of ``fusebench nsys run``,
    ``nsys stats``, the summary; its files in ``<checkout>/nsys/``."""
    cmd_check(args)
    config = ["--config", str(args.config.resolve())] if args.config else []  # before the chdir
    os.chdir(PROJECT_ROOT)
    stem = tool.report_stem(args.op, _environment().machine_name(), _environment().git_commit())
    folder, name = Path(stem).parent, Path(stem).name
    for old in (Path(f"{stem}.json"), Path(f"{stem}.sqlite"), *folder.glob(f"{name}_nvtx_*.csv")):
        old.unlink(missing_ok=True)
    selection = tool.driver_args(args.op, args.backends, args.shapes, args.dtypes) + (
        ["--calls", str(args.calls), *config])
    program = [sys.executable, "-m", "fusebench", "nsys", "run", *selection, "--json", f"{stem}.json"]
    for cmd in (tool.profile_command(args.nsys, stem, program),
                tool.stats_command(args.nsys, stem, f"{stem}.nsys-rep")):
        print(shlex.join(cmd), file=sys.stderr, flush=True)
        status = subprocess.run(cmd).returncode
        if status != 0:
            raise CannotRun(f"`nsys {cmd[1]}` failed (exit {status}; its output is above)")
    args.stem = stem
    return cmd_summary(args)


def cmd_run(args) -> int:
    from fusebench.nsys import capture

    _require_nvtx()
    _require_gpu("the nsys driver")
    dev = _device()
    op, cases = _plan(args, dev.type)
    env = _environment().capture(dev)
    capture.allow_recompiles(len(cases))
    prepared = capture.prepare_all(op, cases, dev)
    capture.rewarm(prepared, dev)
    ready = [p for p in prepared if p.status == "ok"]
    if ready:
        print(f"{PROG}: capture window open: {len(ready)} range(s)", file=sys.stderr, flush=True)
        with capture.nvtx_window([p.case for p in ready]) as enter:
            capture.run_window(ready, dev, enter)
        print(f"{PROG}: capture window closed", file=sys.stderr, flush=True)
    side = capture.side_file(op, prepared, env)
    real_folder(args.json.parent).mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(side, indent=1))
    print(f"{PROG}: side file {args.json}", file=sys.stderr)
    not_run = [p for p in prepared if p.status != "ok"]
    for p in not_run:
        print(f"{PROG}: {p.case.range} {p.status}: {p.reason}", file=sys.stderr)
    if not ready:
        raise CannotRun(f"no case of {op.name} could run (all {len(prepared)} skipped or failed)")
    return 0


def cmd_summary(args) -> int:
    stem = args.stem
    side_path = Path(f"{stem}.json")
    if not side_path.is_file():
        raise UsageError(f"no side file {side_path}: run the driver first (make nsys OP=...)")
    from fusebench.nsys import capture_summary

    side = capture_summary.load_side(side_path)
    stats = stats_csv.load(stem)
    table = capture_summary.rows(side, stats)
    text = capture_summary.markdown(side, table, stem)
    Path(f"{stem}.md").write_text(text)
    Path(f"{stem}.csv").write_text(capture_summary.to_csv(table))
    print(text)
    print(f"{PROG}: wrote {stem}.md and {stem}.csv", file=sys.stderr)
    bad = capture_summary.disagreements(table)
    if bad:
        print(f"{PROG}: {len(bad)} case(s) of {capture_summary.CHECK_FROM_US:.0f} µs or more disagree "
              f"with the harness by more than {100 * capture_summary.AGREEMENT:.0f} % (see the notes)",
              file=sys.stderr)
    return 0


def cmd_trace(args) -> int:
    from fusebench.nsys import capture

    dev = _device()
    op, cases = _plan(args, dev.type)
    capture.allow_recompiles(len(cases))
    prepared = capture.prepare_all(op, cases, dev)
    capture.rewarm(prepared, dev)
    ready = [p for p in prepared if p.status == "ok"]
    if not ready:
        raise CannotRun(f"no case of {op.name} could run (all {len(prepared)} skipped or failed)")
    with capture.torch_window(dev) as (enter, prof):
        capture.run_window(ready, dev, enter)
    real_folder(args.out.parent).mkdir(parents=True, exist_ok=True)
    prof.export_chrome_trace(str(args.out))
    where = "CPU and GPU" if dev.type == "cuda" else "CPU ops only (no GPU here)"
    shapes = ", ".join(dict.fromkeys(c.shape_label for c in cases))
    grid = "the shapes given" if args.shapes else f"{op.name}'s {DEFAULT_GRID.get(dev.type, 'quick')} grid"
    print(f"trace: wrote {args.out} ({len(ready)} range(s) of {grid}: {shapes}; {where}); open it in "
          f"https://ui.perfetto.dev", file=sys.stderr)
    return 0


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The steps of ``fusebench nsys``, each a subcommand with its options."""
    sub = ap.add_subparsers(dest="step", required=True, metavar="<step>", parser_class=type(ap))
    p = sub.add_parser("capture", help="the whole capture: check, nsys profile, nsys stats, summary "
                                        "(what make nsys runs)")
    _selection(p)
    p.add_argument("--nsys", default="nsys", help="the nsys executable (default: nsys on PATH)")
    p = sub.add_parser("plan", help="print the range names in run order")
    _selection(p)
    p = sub.add_parser("stem", help="print nsys/<op>-<machine>-<short sha>")
    p.add_argument("op", nargs="?", default="")
    p = sub.add_parser("check", help="validate the selection, the nsys version and the GPU")
    _selection(p)
    p.add_argument("--nsys", default="nsys", help="the nsys executable (default: nsys on PATH)")
    p = sub.add_parser("run", help="prepare every case, then one NVTX range per case (under nsys)")
    _selection(p)
    p.add_argument("--json", type=Path, required=True, help="side file to write")
    p = sub.add_parser("summary", help="write <stem>.md and <stem>.csv from the nsys stats CSVs")
    p.add_argument("stem", help="capture path without extension, e.g. nsys/gelu-h200-1a2b3c4")


def add_trace_arguments(ap: argparse.ArgumentParser) -> None:
    """The options of ``fusebench trace``."""
    _selection(ap)
    ap.add_argument("--out", type=Path, help="trace file to write (.json; default "
                                             "nsys/<op>-<machine>-<short sha>.trace.json)")


def _run(command, args, prog: str) -> int:
    try:
        return command(args)
    except (CannotRun, tool.NsysUnavailable, stats_csv.StatsError) as exc:
        text = str(exc)
        if getattr(args, "op", None):  # the suggested command names this op: it runs as printed
            text = text.replace("`make trace OP=...`", f"`make trace OP={args.op}`")
        print(f"{prog}: error: {text}", file=sys.stderr)  # one line, no exception type: it says it all
        return 1


def run(args: argparse.Namespace) -> int:
    """Run the step ``args.step`` of ``fusebench nsys``; returns the exit status."""
    command = {"capture": cmd_capture, "plan": cmd_plan, "stem": cmd_stem, "check": cmd_check, "run": cmd_run,
               "summary": cmd_summary}[args.step]
    return _run(command, args, PROG)


def run_trace(args: argparse.Namespace) -> int:
    """Run ``fusebench trace``; returns the exit status."""
    if args.out is None:
        if not args.op:
            raise UsageError(f"--op names the op to trace; valid ops: {', '.join(configured(args.config))}")
        args.out = Path(tool.report_stem(args.op, _environment().machine_name(), _environment().git_commit())
                        + ".trace.json")
    return _run(cmd_trace, args, "trace")
