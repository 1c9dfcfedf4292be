"""Did a change make it slower? Both revisions measured side by side on this GPU (make ab).

    fusebench ab --base REV [--head REV] [--all] [--ops ...] [--backends ...] [--dtypes ...]
                 [--shapes ...] [--factor 1.02] [--target 1.03] [--min-pairs 4] [--max-pairs 16]
                 [--time-cap 600] [--process-rounds 1] [--format text|markdown|json]
                 [--output FILE] [--scratch DIR] [--cache DIR] [--repo DIR] [--no-counters]
    fusebench ab --from SESSION/ab.json [--factor ...] [--format ...]      (judge again, no GPU)

Each side is checked out in its own git worktree (bisect's; when no --head is given and the
measured files differ from HEAD, the head is the checkout's changes as they are at the start,
taken as a commit on top of HEAD and marked "with changes": later edits are not measured), built
and measured by its own code in its own process, on one GPU, in interleaved rounds whose order
alternates (A B B A ...), so that what the board does over minutes lands on both sides. A case
gets --min-pairs rounds, then stops once each gated time (hot, cold, graph device time) is
decided or its minimum detectable effect is at or under --target (on a host without a GPU wall
time, margin 1.5, is judged instead), at --max-pairs rounds, or when
--time-cap seconds of rounds are spent. Every --process-rounds rounds both sides' processes are
replaced by fresh ones building the cases still open, so that a state one process holds for its
life (seen on an H200: 11 % in a few cases) cannot decide a verdict; 0 keeps one per side.

The cases: by default the backends whose measured code differs between the two revisions
(every backend when shared harness files, the lock, the image or the case file differ; the run
names the files that decided it); --all the whole grid; --ops, --backends, --dtypes, --shapes
narrow either. No measured file changed: nothing to measure, exit 0.

The verdict per case and metric, from the pairs: the ratio head/base with its confidence
interval, and the limit, the smallest slowdown these pairs would call a regression (the minimum
detectable effect); statuses as in `fusebench compare` (docs/ab/README.md has the rule). Every round
of both sides is kept in the session folder (--scratch, default .asv/ab/), never in results/:
`fusebench ab --from <session>/ab.json` judges it again without a GPU; the file is written after
every pass over the open cases, so a run stopped on the way keeps every round it made.

A case-metric whose limit is beyond the host's margin (1.5x for device time, 2x for wall time) is
"blind", and a session with no regression whose case-metrics judged are mostly blind is
"inconclusive": it names what to run (more pairs, on a quieter host), never "ok". A case measured
on a busy host (contaminated) whose paired interval and every pair lie beyond that margin is still a
regression or an improvement, marked "host busy; paired": both sides took the load in turn.

Exit status: 1 when a case regressed or newly fails (whatever else happened); else 2 on bad
input, when nothing could be judged (no case measured on both sides, or every one contaminated,
another kernel or the launch path) or when the verdict is inconclusive; else 0.

Where Nsight Compute's ncu and a GPU are here, each case with a GPU figure judged a regression or
an improvement is then profiled once on each side (its own `nsys run` under ncu) and its note says
why it moved: DRAM bytes, DRAM throughput, launches (`fusebench/gate/ab_counters.py`);
--no-counters skips that.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import sys
import time
from pathlib import Path

from fusebench.atomic import json_ready, write_atomic
from fusebench.cli import command, number, positive_int, whole_number
from fusebench.errors import UsageError
from fusebench.paths import PROJECT_ROOT, cache_dir, real_folder

DEFAULT_CACHE = cache_dir()
DEFAULT_SCRATCH = PROJECT_ROOT / ".asv" / "ab"
#: The largest stored session ``--from`` reads (a full grid of 16 pairs is about 10 MB).
MAX_SESSION_BYTES = 256 * 1024 * 1024


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The options of ``fusebench ab``."""
    from fusebench.gate import ab

    ap.add_argument("--base", help="git revision measured as the base (e.g. origin/main)")
    ap.add_argument("--head", help="git revision measured as the head (default: the checkout, with its "
                                   "uncommitted changes to measured files if any)")
    ap.add_argument("--all", action="store_true", help="every case of the grid, not only the backends "
                                                       "whose measured code changed")
    ap.add_argument("--ops", help="comma-separated ops to keep")
    ap.add_argument("--backends", help="comma-separated backends to keep")
    ap.add_argument("--dtypes", help="comma-separated dtypes to keep")
    ap.add_argument("--shapes", help="comma-separated shape labels to keep, e.g. 4096x4096,1x1048576")
    ap.add_argument("--factor", type=number(1.0, 2.0),
                    help=f"the margin: a regression is a ratio surely above it (default {ab.FACTOR})")
    ap.add_argument("--target", type=number(1.0, 2.0), default=ab.TARGET,
                    help=f"a case stops once it can see this slowdown on every metric (default {ab.TARGET})")
    ap.add_argument("--min-pairs", type=whole_number(2), default=ab.MIN_PAIRS,
                    help=f"rounds every case gets (default {ab.MIN_PAIRS}, at least 2)")
    ap.add_argument("--max-pairs", type=positive_int, default=ab.MAX_PAIRS,
                    help=f"rounds a case gets at most (default {ab.MAX_PAIRS})")
    ap.add_argument("--time-cap", type=number(1.0, 86400.0), default=ab.TIME_CAP_S,
                    help=f"seconds of rounds, then every open case is judged on what it has "
                         f"(default {ab.TIME_CAP_S:.0f})")
    ap.add_argument("--process-rounds", type=whole_number(0), default=ab.PROCESS_ROUNDS,
                    help=f"rounds per pair of processes, then fresh ones (default {ab.PROCESS_ROUNDS}; "
                         "0: one process per side for the session)")
    ap.add_argument("--format", choices=("text", "markdown", "json"), default="text",
                    help="the verdict as text (default), a markdown table (a PR comment) or JSON")
    ap.add_argument("--output", type=Path, metavar="FILE", help="write the verdict there, not to stdout")
    ap.add_argument("--no-counters", action="store_true",
                    help="do not profile the flagged cases with ncu (Nsight Compute) on both sides")
    ap.add_argument("--from", dest="session", type=Path, metavar="FILE",
                    help="judge a stored session (ab.json) again, measuring nothing")
    ap.add_argument("--scratch", type=Path, default=DEFAULT_SCRATCH,
                    help=f"where sessions are kept (default {DEFAULT_SCRATCH})")
    ap.add_argument("--cache", type=Path, default=DEFAULT_CACHE,
                    help=f"worktrees and extension builds per commit, bisect's (default {DEFAULT_CACHE})")
    ap.add_argument("--repo", type=Path, default=PROJECT_ROOT,
                    help="the git repository (default: this checkout)")


def _select(args, choice) -> tuple[dict, list[str]]:
    """What each child measures: the pairs chosen by the change (or all), narrowed by the options,
    checked against this checkout's ops, backends and dtypes."""
    from fusebench.gate.ab_cases import EVERY
    from fusebench.names import pick
    from fusebench.ops import configured
    from fusebench.registry import BACKENDS, PRECISIONS

    ops = configured(None)
    op_names = pick("op", args.ops, ops) if args.ops else list(ops)
    backends = pick("backend", args.backends, BACKENDS) if args.backends else None
    dtypes = pick("dtype", args.dtypes, PRECISIONS) if args.dtypes else None
    import torch

    from fusebench.registry import shape_label

    # a shape of the grid this host measures (each child measures its commit's grid of this name:
    # the GPU's on a GPU host, the CPU's on a host without one)
    grid = "default" if torch.cuda.is_available() else "cpu"
    valid = list(dict.fromkeys(shape_label(s) for op in op_names for s in ops[op].grids.get(grid, ())))
    try:
        shapes = pick("shape", args.shapes.lower(), valid) if args.shapes else None
    except UsageError as exc:
        where = "GPU" if grid == "default" else "CPU"
        raise UsageError(f"{exc} (this host measures the {where} grid)") from None
    if choice is None or choice.pairs is None:
        wanted = [(op, b) for op in op_names for b in ops[op].backends]
    else:
        wanted = [(op, b) for op, b0 in choice.pairs if op in op_names
                  for b in (ops[op].backends if b0 == EVERY else [b0])]
    pairs = [[op, b] for op, b in dict.fromkeys(wanted) if backends is None or b in backends]
    return {"pairs": pairs, "dtypes": dtypes, "shapes": shapes}, [f"{op}/{b}" for op, b in pairs]


def _load(path: Path):
    """The stored session, the machine it names (None when it names none that is valid) and the
    commit its head's uncommitted changes were taken as (None: a clean head)."""
    from fusebench.gate import ab
    from fusebench.gate.bisect_probe import MACHINE
    from fusebench.storage import untrusted

    if path.is_symlink() or not path.is_file():
        raise UsageError(f"{path}: not a file (a stored session is <session>/ab.json)")
    try:  # read as a file from another host: size, nesting and integers capped before parsing
        data = untrusted.parse(path, untrusted.read_bytes(path, MAX_SESSION_BYTES))
    except untrusted.Refused as exc:
        raise UsageError(f"{path}: not a valid session: {exc.why}") from None
    try:
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        machine = data.get("machine")
        named = isinstance(machine, str) and MACHINE.fullmatch(machine)
        snap = data.get("snapshot")
        if snap is not None and not (isinstance(snap, str) and re.fullmatch(r"[0-9a-f]{40}", snap)):
            raise ValueError("snapshot: not a commit sha")
        return ab.from_dict(data), machine if named else None, snap
    except (ValueError, UnicodeDecodeError) as exc:
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UsageError(f"{path}: not a valid session: {why}") from None


def verdict(out, fmt: str, machine: str | None, decided_by: list[str],
            snapshot: str | None = None, counters: dict | None = None) -> tuple[str, list[str], int]:
    """The verdict's text in ``fmt``, the lines for stderr, and the exit status; ``snapshot``: the
    commit a head with changes was measured as (named beside it); ``counters``: the flagged cases'
    hardware counters (``fusebench.gate.ab_counters``), named in their notes."""
    from fusebench.gate import ab, ab_counters, compare

    rows = ab_counters.annotate(ab.rows(out), counters)
    failed = compare.failed_gate(rows)
    judged = not compare.nothing_judged(rows)
    blind = judged and compare.inconclusive(rows)
    rerun = rerun_command(out, rows, snapshot) if blind else ""
    changes = f" with changes ({snapshot[:8]})" if snapshot else " with changes"
    head = out.head.short + (changes if out.head_dirty else "")
    pairs = [len(c.base) for c in out.cases if c.base]
    span = f"{min(pairs)}-{max(pairs)} rounds" if pairs else "no rounds"
    status = "FAIL" if failed else "inconclusive" if blind else "ok" if judged else "nothing judged"
    margin = f"factor {out.factor:g}"
    if any(r.benchmark.endswith(ab.WALL.name) for r in rows):  # a host without a GPU: wall time's margin
        margin += f", wall time {max(out.factor, ab.WALL_FACTOR):g}"
    line = (f"ab: {machine or 'unknown machine'} {out.base.short} -> {head} "
            f"({len(out.cases)} case(s), {span}, {margin}): {compare.summary(rows)} -> {status}")
    lines = [*decided_by, *ab_counters.lines(counters)]
    if judged:
        lines.append(compare.detectable_text(rows).replace("compare:", "ab:"))
        if blind:
            lines.append(f"ab: {compare.inconclusive_text(rows, rerun)}")
    elif why := compare.unjudged_text(rows):
        lines.append(f"ab: no case-metric measured on both sides could be judged ({why}: the table "
                     "above says why for each)")
    elif rows:
        lines.append("ab: no case was measured on both sides (the table above says why for each)")
    else:
        lines.append("ab: the selection holds no case either side built on this host: nothing was measured")
    if out.capped:
        lines.append(f"ab: the time cap ended the rounds: {sum('time cap' in c.stopped for c in out.cases)} "
                     "case(s) judged on fewer rounds (--time-cap)")
    lines.append(line)
    if fmt == "json":
        text = json.dumps(json_ready(compare.as_json(rows, base=out.base.sha, head=out.head.sha,
                                                 head_dirty=out.head_dirty, machine=machine,
                                                 factor=out.factor, outcome=status, rerun=rerun or None,
                                                 alpha=out.alpha, target=out.target, failed=failed,
                                                 seconds=out.seconds, phases=out.phases,
                                                 pairs={c.case: len(c.base) for c in out.cases},
                                                 **ab_counters.about(counters))), indent=1)
    elif fmt == "markdown":
        text = compare.markdown(rows, title=line.removeprefix("ab: "), p_legend=ab.P_LEGEND, rerun=rerun)
    else:  # nothing judged: every row, each with why it was not
        text = compare.table(rows, show_all=not judged, p_legend=ab.P_LEGEND)
    code = 1 if failed else 2 if blind or not judged else 0
    return text, lines, code


def rerun_command(out, rows, snapshot: str | None = None) -> str:
    """What to run when a session is inconclusive: the same two commits (a head with changes as the
    commit they were taken as), the blind cases' ops, backends, dtypes and shapes, twice the pairs
    and the time (the interval narrows with the square root of the pairs); on a quieter host."""
    from fusebench.gate import ab, compare

    blind = [r for r in rows if r.status == compare.BLIND]
    ops = sorted({r.benchmark.split(".")[1].lower() for r in blind})
    backends, shapes, dtypes = (",".join(sorted({r.params[i] for r in blind})) for i in range(3))
    sides = ("--base", out.base.sha[:12], "--head", (snapshot or out.head.sha)[:12])
    more = ("--max-pairs", max(2 * out.max_pairs, ab.MAX_PAIRS), "--time-cap", f"{2 * ab.TIME_CAP_S:.0f}")
    return command("ab", *sides, "--all", "--ops", ",".join(ops), "--backends", backends, "--dtypes", dtypes,
                   "--shapes", shapes, *more)


def run(args: argparse.Namespace) -> int:
    """Run ``fusebench ab`` with the parsed options; returns the exit status."""
    if args.session is not None:
        out, machine, snap = _load(args.session)
        from fusebench.gate import ab_counters

        try:
            counters = ab_counters.load(args.session)
        except ValueError as exc:
            raise UsageError(f"{args.session}: not a valid session: {exc}") from None
        out.factor = args.factor or out.factor
        again = [f"ab: judged again from {args.session}"]
        text, lines, code = verdict(out, args.format, machine, again, snap, counters)
        return _finish(args, text, lines, code)
    if not args.base:
        raise UsageError("give --base REV (make ab BASE=<rev>), or --from <session>/ab.json")
    if args.max_pairs < args.min_pairs or args.min_pairs < 2:
        raise UsageError(f"need 2 <= --min-pairs <= --max-pairs, got {args.min_pairs} and {args.max_pairs}")
    from fusebench.gate import ab, ab_cases, ab_probe, bisect_git
    from fusebench.gate.bisect import Commit, ProbeFailed

    repo = args.repo.resolve()
    base_sha = bisect_git.resolve(repo, args.base)
    dirty = False
    if args.head:
        head_sha = bisect_git.resolve(repo, args.head)
    else:
        head_sha = bisect_git.resolve(repo, "HEAD")
        from fusebench.measure.provenance import MEASURED, changed_files

        dirty = bool(changed_files(repo))
    snap = None
    if dirty:  # taken now: what is edited while the rounds run is not measured
        try:
            snap = bisect_git.snapshot(repo, head_sha, MEASURED)
        except ProbeFailed as exc:
            raise UsageError(f"cannot take the checkout's uncommitted changes as a commit: {exc}") from None
    changed = ab_cases.changed_files(repo, base_sha, snap or head_sha)
    from fusebench.ops import configured

    ops = {name: tuple(op.backends) for name, op in configured(None).items()}
    choice = None if args.all else ab_cases.choose(changed, ops)
    decided = []
    if args.all:
        decided.append("ab: --all: every case of the grid")
    else:
        decided.append(f"ab: {len(changed)} file(s) of the harness or the kernels differ in code between "
                       "base and head"
                       + (":" if changed else ""))
        decided += [f"ab:   {path} -> {what}" for path, what in choice.reasons]
    select, measured = _select(args, choice)
    if not select["pairs"]:
        for line in decided:
            print(line, file=sys.stderr)
        print(f"ab: nothing to measure: no code that the selected cases run differs between {base_sha[:8]} "
              f"and {head_sha[:8]}{' with changes' if dirty else ''} "
              "(--all, ALL=1 through make, measures every case)", file=sys.stderr)
        return 0
    what = ", ".join(measured) if len(measured) <= 12 else f"{len(measured)} op/backend pairs"
    decided.append(f"ab: measuring {what}")
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    root = args.scratch
    if root.is_symlink():
        raise UsageError(f"{root}: a symbolic link: give another --scratch")
    real_folder(root)
    session = root / f"{base_sha[:8]}-{head_sha[:8]}{'-dirty' if dirty else ''}-{stamp}"
    if session.exists():
        raise UsageError(f"{session} exists: wait a second, or give another --scratch")
    session.mkdir(parents=True)
    trees = {}
    if snap:  # the extension is built from its own sources: a change elsewhere reuses HEAD's build
        from fusebench.gate import noise

        cuda = any(noise.touches({p}, noise.BACKEND_PATHS["cuda"]) for p in changed)
        try:
            tree = bisect_git.worktree(repo, args.cache.resolve() / "worktrees", snap)
        except ProbeFailed as exc:
            raise UsageError(f"cannot check out the head's changes: {exc}") from None
        trees[ab.HEAD] = (tree, snap if cuda else head_sha)
        where = "" if repo == Path.cwd().resolve() else f" -C {shlex.quote(str(repo))}"
        show = f"git{where} show {snap[:8]}"
        decided.append(f"ab: head: {head_sha[:8]} with the checkout's uncommitted changes as they are now, "
                       f"taken as commit {snap[:8]} ({show}); later edits are not measured")

    def log(line: str) -> None:
        print(f"ab: {line}", file=sys.stderr, flush=True)

    for line in decided:
        print(line, file=sys.stderr)
    log(f"session in {session}")
    from fusebench.commands import bisect_child

    measurer = ab_probe.ABChildren(Path(bisect_child.__file__).read_text(), repo, args.cache.resolve(),
                                   session, select, trees, log=log)
    subject = bisect_git.subject(repo, base_sha), bisect_git.subject(repo, head_sha)

    def store(partial) -> None:  # every pass: a run stopped on the way keeps its rounds
        data = dict(partial.to_dict(), machine=measurer.machine, changed=changed, snapshot=snap, partial=True)
        write_atomic(session / "ab.json", json.dumps(json_ready(data)))

    try:
        out = ab.run(None, measurer, Commit(base_sha, subject[0]), Commit(head_sha, subject[1]),
                     head_dirty=dirty, factor=args.factor or ab.FACTOR, target=args.target,
                     min_pairs=args.min_pairs, max_pairs=args.max_pairs, time_cap_s=args.time_cap,
                     process_rounds=args.process_rounds,
                     log=log, on_round=store)
    except ab.ABError as exc:
        print(f"ab: error: {exc}", file=sys.stderr)
        return 2
    counters = None
    if not args.no_counters:  # the flagged cases under ncu, once per side (fusebench/gate/ab_counters.py)
        from fusebench.gate import ab_counters

        counters = ab_counters.explain(ab.rows(out), measurer, session / "counters", log=log)
        if counters and "seconds" in counters:
            out.phases["counters"] = counters["seconds"]
    data = dict(out.to_dict(), machine=measurer.machine, changed=changed, snapshot=snap, counters=counters)
    write_atomic(session / "ab.json", json.dumps(json_ready(data)))
    text, lines, code = verdict(out, args.format, measurer.machine, [], snap, counters)
    again = command("ab", "--from", session / "ab.json")
    lines.insert(0, f"ab: every round is in {session / 'ab.json'} (judge it again: {again})")
    return _finish(args, text, lines, code)


def _finish(args, text: str, lines: list[str], code: int) -> int:
    if args.output is not None:
        write_atomic(args.output, text + "\n")
    else:
        print(text)
    for line in lines:
        print(line, file=sys.stderr)
    return code
