"""Find the commit that made a case slower, judged with the gate's statistics (make bisect).

    fusebench bisect GOOD BAD --case OP/BACKEND/SHAPE/DTYPE [--case ...] [--metric device_time]
                     [--rounds N] [--max-rounds 12] [--factor 1.04] [--config FILE] [--machine NAME]
                     [--repo DIR] [--cache DIR] [--records DIR] [--format text|json]

Walks BAD's first-parent line back to GOOD (``git rev-list --first-parent``) and bisects it. Each
probed commit is checked out in its own git worktree and measured by its own code in a child
process (its kernels, its CUDA extension build, cached by commit), only the named cases, in
interleaved rounds beside GOOD and BAD measured in the same session. Each probe is judged like
GOOD, like BAD or ambiguous with the gate's rule (``fusebench compare``); an ambiguous probe gets
more rounds up to ``--max-rounds``, then stays ambiguous (never guessed); a commit that does not
build or whose case fails is skipped and named. Prints each probe's figures and verdict, the
first BAD commit (or the smallest range it lies in) and the time spent; ``--format json`` prints
the same as JSON. Each probe's record and each child's log go to ``--records`` (default
``bisect/`` in the repository), never to ``results/``. docs/bisect.md says what a probe costs.

Exit status: 0 when the first BAD commit was found; 1 when the answer is a range (ambiguous or
skipped probes in the way), when the gate does not call GOOD -> BAD a regression on every case,
or when GOOD or BAD could not be measured; 2 when GOOD -> BAD is blind on most cases (held to a
limit beyond the host's margin: inconclusive, the line says what to run) and on bad input (a
case whose shape is in none of its op's grids or too large for this host's memory is refused
before any worktree is made).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Callable

from fusebench import atomic, config, metrictable
from fusebench.axes import BACKENDS, ELEMENT_SIZE
from fusebench.cli import add_config, command, duration, positive_int
from fusebench.commands import bisect_child
from fusebench.commands.compare import parse_factor
from fusebench.errors import UsageError, terminal
from fusebench.gate import bisect, bisect_git, compare, noise
from fusebench.gate.bisect_probe import ChildMeasurer
from fusebench.names import did_you_mean
from fusebench.paths import PROJECT_ROOT, cache_dir, real_folder
from fusebench.storage import runrecord

#: ``--metric`` values: the times a round measures (the gate judges the two device times).
METRICS = {"device_time": "track_device_time", "device_time_cold": "track_device_time_cold",
           "device_time_graph": "track_device_time_graph", "wall_time": "track_wall_time"}
_CASE = re.compile(r"[a-z][a-z0-9_]*/[a-z][a-z0-9_]*/[0-9]+(x[0-9]+)*/[a-z0-9]+")
DEFAULT_CACHE = cache_dir()


def parse_case(text: str) -> str:
    """``--case``: ``op/backend/shape/dtype`` with a known backend and dtype (the op is the
    probed commit's to know).

    Raises:
        UsageError: not of that form (the lowercase spelling offered where it is), or an unknown
            backend or dtype (the closest offered).
    """
    if not _CASE.fullmatch(text):
        hint = f" (did you mean {text.lower()}?)" if _CASE.fullmatch(text.lower()) else ""
        raise UsageError(f"bad case {text!r}{hint}; give op/backend/shape/dtype, e.g. "
                         "gelu/triton/16777216/float32")
    _, backend, _, dtype = text.split("/")
    if backend not in BACKENDS:
        raise UsageError(f"unknown backend {backend!r}{did_you_mean(backend, BACKENDS)} in {text!r}; "
                         f"valid backends: {', '.join(BACKENDS)}")
    if dtype not in ELEMENT_SIZE:
        raise UsageError(f"unknown dtype {dtype!r}{did_you_mean(dtype, ELEMENT_SIZE)} in {text!r}; "
                         f"valid dtypes: {', '.join(ELEMENT_SIZE)}")
    return text


def check_measurable(metric: str, args: argparse.Namespace, cases: list[str]) -> None:
    """Refuse, before any worktree is made or built, a metric this host cannot measure: every
    device time needs a CUDA GPU (the children would build GOOD and BAD, then find no figure).

    Raises:
        UsageError: a device-time ``metric`` and no CUDA GPU here; the line gives the option and
            the make command with ``METRIC=wall_time``.
    """
    if metric == "wall_time":
        return
    import torch  # here only: the command's --help and its bad input need no torch

    if torch.cuda.is_available():
        return
    label = metrictable.BY_NAME[METRICS[metric]].label
    raise UsageError(f"no CUDA GPU here: {label} cannot be measured, only wall time; give --metric "
                     f"wall_time (make bisect GOOD={args.good} BAD={args.bad} CASE={','.join(cases)} "
                     "METRIC=wall_time)")


def check_cases(cases: list[str], case_file: Path | None) -> None:
    """Refuse, before any worktree is made or built, a case no run here would measure: a shape in
    none of its op's grids (``make bench SHAPES=``'s and ``make ab``'s check, ``names.pick``; an
    op this checkout does not know is the probed commits' to know), and a shape this host's
    memory (the GPU's, else its RAM) cannot hold (``bench``'s ``storage.preflight.memory``).

    Raises:
        UsageError: one line naming the case, and the valid shapes or both memory figures.
    """
    from types import SimpleNamespace

    from fusebench.axes import parse_shape, shape_label
    from fusebench.commands.bench import device_memory
    from fusebench.measure import environment
    from fusebench.names import pick
    from fusebench.ops import configured
    from fusebench.storage import preflight

    ops = configured(case_file)
    planned = []
    for case in cases:
        name, backend, shape, dtype = case.split("/")
        if (op := ops.get(name)) is not None:
            valid = dict.fromkeys(shape_label(s) for grid in op.grids.values() for s in grid)
            try:
                pick("shape", shape, valid)
            except UsageError as exc:
                raise UsageError(f"{case}: {exc} (the shapes of {name}'s grids; make bench SHAPES= "
                                 "refuses it too)") from None
        planned.append((op or SimpleNamespace(name=name), backend, parse_shape(shape), dtype))
    preflight.memory(planned, *device_memory(environment.device()), way_out="give a case of a smaller shape")


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The options of ``fusebench bisect``."""
    ap.add_argument("good", metavar="GOOD", help="a git revision without the slowdown")
    ap.add_argument("bad", metavar="BAD", help="a later revision with it (GOOD on its first-parent line)")
    ap.add_argument("--case", action="append", required=True, metavar="OP/BACKEND/SHAPE/DTYPE",
                    help="a case to judge, e.g. gelu/triton/16777216/float32 (repeat for more)")
    ap.add_argument("--metric", choices=list(METRICS), default="device_time",
                    help="the time judged (default device_time; on the CPU only wall_time is measured)")
    ap.add_argument("--rounds", type=positive_int,
                    help="rounds per block (default: the case file's settings.rounds, 3 unless set)")
    ap.add_argument("--max-rounds", type=positive_int, default=12,
                    help="the rounds an ambiguous probe may grow to (default 12)")
    ap.add_argument("--factor", help="allowed slowdown before noise (default: the case file's "
                                     f"settings.gate.factor, {config.DEFAULT_FACTOR} unless set)")
    add_config(ap)
    ap.add_argument("--machine", help="whose committed records give each case's history limit, as "
                                      "in fusebench compare (default: the GPU measured, e.g. h200)")
    ap.add_argument("--repo", type=Path, default=PROJECT_ROOT,
                    help="the git repository (default: this checkout)")
    ap.add_argument("--cache", type=Path, default=DEFAULT_CACHE,
                    help=f"worktrees and extension builds per commit (default {DEFAULT_CACHE})")
    ap.add_argument("--records", type=Path,
                    help="where probe records and logs go (default: bisect/ in the repository)")
    ap.add_argument("--format", choices=("text", "json"), default="text", help="output format (default text)")


def history_limits(metric: metrictable.Metric, machine: Callable[[], str | None]):
    """The gate's history limit of each case (``fusebench.gate.noise``, from the committed
    records of ``machine()``: ``--machine``, else the machine GOOD's child measured on, so that
    this process never touches the GPU), asked once per case; None for a metric the gate does not
    judge (wall time)."""
    if not metric.gates:
        return None
    limits: dict[str, object] = {}
    histories: list = []

    def limit(case: str, per_launch_ms: float | None):
        if case not in limits:
            if not histories:
                name = machine()
                records = runrecord.records_dir(PROJECT_ROOT / "results")
                histories.append(noise.from_records(records / name, PROJECT_ROOT) if name
                                 else noise.History([], None))
            limits[case] = histories[0].limit(metric.field, tuple(case.split("/")), per_launch_ms)
        return limits[case]

    return limit


def _ms(value: float) -> str:
    return f"{value:.4f}" if math.isfinite(value) else "n/a"


def _x(value: float) -> str:
    return f"{value:.3f}x" if math.isfinite(value) else "n/a"


def p_text(p: float | None, slowdown: float) -> str:
    """The test's p named by its side: one-sided in the slowdown's direction (``compare.judge``),
    ``p(slower) 0.050`` or ``p(faster) 0.000``; ``p n/a`` without a test."""
    if p is None or not math.isfinite(slowdown):
        return "p n/a"
    return f"p({'slower' if slowdown >= 1 else 'faster'}) {p:.3f}"


def blind_reference(out: bisect.Outcome) -> list[bisect.CaseVerdict]:
    """The cases GOOD -> BAD was blind on (``compare.BLIND``: held to a limit beyond the host's
    margin) when they are most of the cases and no step was found: the bisection is inconclusive."""
    blind = [c for c in out.reference if c.reference.status == compare.BLIND]
    return blind if out.status == "no regression" and 2 * len(blind) > len(out.reference) else []


def text(out: bisect.Outcome, records: Path, machine: str | None = None, rerun: str = "") -> str:
    """The outcome as the text ``fusebench bisect`` prints (``machine``: where it was measured;
    ``rerun``: what to run when GOOD -> BAD was mostly blind)."""
    metric = metrictable.BY_NAME[out.metric].label
    lines = [f"bisect: {out.commits} commits after GOOD {out.good.short} up to BAD {out.bad.short} "
             f"(first-parent line), {metric} on {machine or 'an unknown machine'}, factor {out.factor:g}"]
    for c in out.reference:
        j = c.reference
        lines.append(f"GOOD -> BAD ({out.reference_rounds} rounds): {c.case}  {_ms(c.good_ms)} -> "
                     f"{_ms(c.bad_ms)} ms {_x(j.slowdown)} (limit {_x(j.limit)}, "
                     f"{p_text(j.p_value, j.slowdown)}): {j.status}"
                     + (f" [{j.note}]" if j.note else ""))
    if out.probes:
        head = ("probe", "commit", "verdict", "rounds", "case", "GOOD ms", "probe ms", "BAD ms",
                "probe/GOOD", "BAD/probe", "start s", "rounds s")
        rows = [head]
        for k, p in enumerate(out.probes, 1):
            first = (str(k), f"{p.sha[:8]} ({p.index}/{out.commits})", p.verdict, str(p.rounds))
            times = (f"{p.start_s:.0f}", f"{p.rounds_s:.0f}")
            if not p.cases:
                rows.append(first + ("", "", "", "", "", "") + times)
            for i, c in enumerate(p.cases):
                rows.append((first if i == 0 else ("",) * 4) + (
                    c.case, _ms(c.good_ms), _ms(c.probe_ms), _ms(c.bad_ms), _x(c.from_good.slowdown),
                    _x(c.to_bad.slowdown)) + (times if i == 0 else ("", "")))
        widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
        lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in rows]
        lines += [f"  probe {k}, {p.sha[:8]}: {p.why}" for k, p in enumerate(out.probes, 1) if p.why]
    spent = f"{len(out.probes)} probe{'s' if len(out.probes) != 1 else ''}, {duration(out.seconds)}"
    if out.status == "found":
        lines.append(f"first BAD commit: {out.first_bad.sha[:8]} {out.first_bad.subject} ({spent})")
    elif out.status == "range":
        lines.append(f"the first BAD commit is one of {len(out.candidates)} ({spent}); the probes between "
                     "were ambiguous or skipped:")
        verdicts = {p.sha: p.verdict for p in out.probes}
        lines += [f"  {c.sha[:8]} {c.subject}" + (f"  [{verdicts[c.sha]}]" if c.sha in verdicts else "")
                  for c in out.candidates]
    elif blind := blind_reference(out):
        limits = ", ".join(f"{c.case} {_x(c.reference.limit)}" for c in blind)
        lines.append(f"inconclusive: GOOD -> BAD is blind on {len(blind)} of {len(out.reference)} case(s) "
                     f"after {out.reference_rounds} rounds (limit {limits}, beyond the host's margin): a "
                     f"step smaller than that could not be seen here ({spent}); run it on a quieter host, or "
                     f"with more rounds: {rerun}")
    else:
        lines.append(f"nothing to bisect: the gate does not call GOOD -> BAD a regression on every case "
                     f"after {out.reference_rounds} rounds ({spent})")
    lines.append(f"records: {records}")
    return "\n".join(terminal(line) for line in lines)  # subjects and reasons come from git and children


def run(args: argparse.Namespace) -> int:
    """Run ``fusebench bisect`` with the parsed options; returns the exit status."""
    settings = config.load(args.config)
    factor = parse_factor(args.factor) if args.factor is not None else settings.factor
    rounds = args.rounds or settings.rounds
    if args.max_rounds < rounds:
        raise UsageError(f"--max-rounds {args.max_rounds} is below the rounds per block ({rounds})")
    cases = list(dict.fromkeys(parse_case(c) for c in args.case))
    repo = args.repo.resolve()
    commits = bisect_git.first_parent_line(repo, args.good, args.bad)
    check_measurable(args.metric, args, cases)
    check_cases(cases, args.config)
    session = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    root = args.records or repo / "bisect"
    records = root / f"{commits[0].short}-{commits[-1].short}-{session}"
    if root.is_symlink() or records.exists():
        raise UsageError(f"{records}: {'a symbolic link' if root.is_symlink() else 'exists'}: "
                         "give another --records")
    real_folder(root)

    def log(line: str) -> None:
        print(f"bisect: {terminal(line)}", file=sys.stderr, flush=True)

    def stored(probe: bisect.Probe) -> None:
        atomic.write_json(records / f"probe-{probe.index:03d}-{probe.sha[:8]}.json", asdict(probe))

    log(f"{len(commits) - 1} commits after GOOD {commits[0].short} up to BAD {commits[-1].short}; "
        f"records in {records}")
    metric = metrictable.BY_NAME[METRICS[args.metric]]
    measurer = ChildMeasurer(Path(bisect_child.__file__).read_text(), repo, args.cache.resolve(),
                             records / "logs", log=log)
    try:
        out = bisect.run(commits, cases, measurer, metric=metric, factor=factor, alpha=settings.alpha,
                         history=history_limits(metric, lambda: args.machine or measurer.machine),
                         rounds=rounds, max_rounds=args.max_rounds, log=log, on_probe=stored)
    except bisect.BisectError as exc:
        print(f"bisect: error: {exc}", file=sys.stderr)
        return 1
    data = dict(out.to_dict(), machine=measurer.machine, records=str(records))
    atomic.write_json(records / "bisect.json", data)
    blind = blind_reference(out)
    where = [*(("--repo", repo) if repo != PROJECT_ROOT.resolve() else ()),
             *(("--config", args.config) if args.config else ())]
    rerun = command("bisect", args.good, args.bad, *(a for c in cases for a in ("--case", c)),
                    "--metric", args.metric, "--rounds", rounds, "--max-rounds", 2 * args.max_rounds, *where)
    if args.format == "json":
        data = dict(data, inconclusive=bool(blind), rerun=rerun if blind else None)
        print(json.dumps(atomic.json_ready(data), indent=1))
    else:
        print(text(out, records, measurer.machine, rerun))
    return 0 if out.status == "found" else 2 if blind else 1
