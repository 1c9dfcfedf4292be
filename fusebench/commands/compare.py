"""The regression gate between two commits' stored results on one machine.

    fusebench compare --base REV [--head REV] [--factor 1.04] [--machine NAME]
                      [--results DIR] [--base-results DIR] [--head-results DIR] [--all]
                      [--format text|json|markdown] [--config FILE]

Judges the gated metrics (hot, cold and graph device time) of every case, from each run's record
(``records/<machine>/<sha8>.json.xz``: every round's figures) where there is one, else from asv's
stored value. Prints the cases that changed (``+`` regression, ``!`` new failure, ``c``
contaminated, ``d`` different reference libraries loaded, ``k`` different kernel chosen by the
compiler, ``~`` slower or faster within noise, ``?`` blind: a limit beyond the host's margin,
``*`` fixed, ``-`` improvement; ``--all`` prints every case, with ``l`` launch path, ``.`` not on
both sides and blank same) with the limit each case was held to, and a summary line;
``docs/gate.md`` says what each status means. Exit status: 1 when a case regressed or newly fails
(whatever else happened: a regression is never hidden by another code); else 2 on bad input
(unknown revision, no stored results for a commit or machine), when nothing was judged (no case
has a gated figure on both sides: the line says what each side stored), when the verdict is
inconclusive (most case-metrics judged are blind; the line says what to run), or when a stored
result file of either commit could not be read (named; the rest is compared); else 0; 141 when
the output's reader closed it early (``| head``).
Each case is held to its own limit, learned from the A/A pairs of the committed records of
the machine (``records/<machine>/``, ``fusebench.gate.noise``); the run ends with how many
case-metrics the gate can see a 5, 10 and 20 % slowdown in, naming those it cannot see 20 % in.
The rule is in ``fusebench/gate/compare.py``, its data in ``docs/gate.md``.
``--base-results`` / ``--head-results`` read each side from its own results folder (and the
records folder beside it): two runs of the same commit, e.g. a one-GPU run in ``results/`` and a
``make bench GPUS=all RESULTS=<dir>`` run, compared with ``--base HEAD --head-results <dir>``
(the A/A check of a sharded run).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from fusebench import config, git
from fusebench.cli import add_config, command, report_unreadable
from fusebench.errors import UsageError
from fusebench.gate import compare, noise
from fusebench.machine import is_cpu, this_machine
from fusebench.paths import PROJECT_ROOT
from fusebench.storage import results, runrecord


def resolve(rev: str) -> str:
    """The full sha of git revision ``rev`` in this checkout.

    Raises:
        UsageError: git does not know ``rev`` as a commit.
    """
    sha = git.resolve(PROJECT_ROOT, rev)
    if sha is None:
        why = ("a revision never starts with '-'" if rev.startswith("-")
               else "git rev-parse found no such commit")
        raise UsageError(f"unknown revision {rev!r} ({why})")
    return sha


def parse_factor(text: str) -> float:
    """``--factor``: a number >= 1 (1.05 allows 5 %)."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value >= 1.0 or value == float("inf"):
        raise UsageError(f"bad factor {text!r}; give a number >= 1, e.g. 1.05 for 5 %")
    return value


def gpu_of(run: results.Run, record, side: str) -> str:
    """The GPU model one side ran on: its result's ``gpu`` field, which its record's environment
    (when there is one, and it names a GPU) must repeat.

    Raises:
        UsageError: the side's result and record name different GPU models.
    """
    gpu = str(run.fields.get("gpu") or "none")
    said = None if record is None else record.environment.get("gpu")
    if said is not None and str(said) != gpu:  # a record that names no GPU says nothing against it
        raise UsageError(f"the {side} side's result says GPU {gpu!r} but its run record "
                         f"{record.environment.get('gpu')!r}: refused, not compared")
    return gpu


def same_gpu(before: results.Run, after: results.Run, base_rec, head_rec) -> None:
    """A comparison's two sides ran on one GPU model (a figure of an H100 against one of an H200
    measures the boards, not the code: issue 42).

    Raises:
        UsageError: they did not (one line saying what differs and where each side was read).
    """
    base_gpu, head_gpu = gpu_of(before, base_rec, "base"), gpu_of(after, head_rec, "head")
    if base_gpu != head_gpu:
        raise UsageError(f"the sides ran on different GPU models: base {before.commit[:8]} on {base_gpu!r} "
                         f"({before.files[0].parent}), head {after.commit[:8]} on {head_gpu!r} "
                         f"({after.files[0].parent}); the gate compares one GPU model with itself")


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The options of ``fusebench compare``."""
    ap.add_argument("--base", required=True, help="git revision compared against")
    ap.add_argument("--head", default="HEAD", help="git revision checked (default HEAD)")
    ap.add_argument("--factor", help="allowed slowdown before noise (default: the case file's "
                                     f"settings.gate.factor, {config.DEFAULT_FACTOR} unless set)")
    add_config(ap)
    ap.add_argument("--machine", help="asv machine (default: this host's, e.g. h200)")
    ap.add_argument("--results", type=Path, default=PROJECT_ROOT / "results", help="asv results folder")
    ap.add_argument("--base-results", type=Path, help="results folder of the base side (default --results)")
    ap.add_argument("--head-results", type=Path, help="results folder of the head side (default --results)")
    ap.add_argument("--all", action="store_true", help="print every case, not only changed ones")
    ap.add_argument("--format", choices=("text", "markdown", "json"), default="text",
                    help="the table as text (default), a markdown table (a PR comment) or JSON (a CI "
                         "artifact: every case with its limit); same verdicts and exit status")


def run(args: argparse.Namespace) -> int:
    """Run ``fusebench compare`` with the parsed options; returns the exit status."""

    settings = config.load(args.config)
    factor = parse_factor(args.factor) if args.factor is not None else settings.factor
    base, head = resolve(args.base), resolve(args.head)
    if not args.machine:  # this host's, named without torch (fusebench.machine)
        args.machine = this_machine()
    base_dir, head_dir = args.base_results or args.results, args.head_results or args.results
    base_reader = results.Reader(base_dir, "compare")  # an unreadable file is named, the rest compared
    head_reader = (base_reader if head_dir.resolve() == base_dir.resolve()
                   else results.Reader(head_dir, "compare"))
    before, after = base_reader.commit(args.machine, base), head_reader.commit(args.machine, head)
    # said once both sides were found (an unknown machine or commit is its own one line, alone)
    if base == head and base_dir.resolve() == head_dir.resolve() and not is_cpu(args.machine):
        print(f"compare: {base[:8]} against itself in {base_dir}: give --head-results (HEAD_RESULTS=) "
              "for an A/A check of two runs", file=sys.stderr)
    base_rec = runrecord.load(runrecord.records_dir(base_dir), args.machine, base)
    head_rec = runrecord.load(runrecord.records_dir(head_dir), args.machine, head)
    same_gpu(before, after, base_rec, head_rec)
    left_out: list[str] = []  # records of the A/A history that could not be read: named, exit 2
    history = noise.from_records(runrecord.records_dir(args.results) / args.machine, PROJECT_ROOT, left_out)
    rows = compare.compare(before, after, factor, base_rec, head_rec, alpha=settings.alpha,
                           history=history)
    failed, judged_none = compare.failed_gate(rows), compare.nothing_judged(rows)
    blind = not judged_none and compare.inconclusive(rows)
    rounds = "/".join(f"{r.rounds} rounds" if r else "no record (one value per case)"
                      for r in (base_rec, head_rec))
    outcome = "FAIL" if failed else "nothing judged" if judged_none else "inconclusive" if blind else "ok"
    # the paired session on one GPU: what a comparison of two stored runs could not see, it can
    rerun = command("ab", "--base", base[:12], "--head", head[:12])
    verdict = (f"compare: {args.machine} {base[:8]} -> {head[:8]} ({rounds}), factor {factor:g}: "
               f"{compare.summary(rows)} -> {outcome}")
    if args.format == "json":
        print(json.dumps(compare.as_json(rows, machine=args.machine, base=base, head=head, factor=factor,
                                         failed=failed), indent=1))
    elif args.format == "markdown":
        print(compare.markdown(rows, show_all=args.all, title=verdict.removeprefix("compare: "), rerun=rerun))
    else:
        print(compare.table(rows, show_all=args.all))
    if judged_none and (why := compare.unjudged_text(rows)):  # measured, not judged: exit 2
        print(f"compare: nothing judged: no case-metric on both sides could be judged ({why}: the "
              "table says why for each)", file=sys.stderr)
    elif judged_none:  # nothing judged is not "ok": say what is missing, exit 2
        print(f"compare: nothing judged: {compare.missing_text(rows, base[:8], head[:8])}"
              + _elsewhere(args.results, args.machine), file=sys.stderr)
    else:
        print(compare.detectable_text(rows), file=sys.stderr)
    if blind:  # no regression, but most of what was judged could see nothing: not "ok"
        print(f"compare: {compare.inconclusive_text(rows, rerun)}", file=sys.stderr)
    print(verdict, file=sys.stderr)
    for line in left_out:
        print(f"compare: error: {line}; left out of the A/A history the limits are learned from",
              file=sys.stderr)
    unreadable = report_unreadable(base_reader, "compare") or bool(left_out)
    if head_reader is not base_reader:
        unreadable |= report_unreadable(head_reader, "compare")
    return 1 if failed else 2 if unreadable or judged_none or blind else 0  # a regression is never hidden


def _elsewhere(results_dir: Path, machine: str) -> str:
    """``; <another machine's newest commits and the make compare that judges them>`` when another
    machine of ``results_dir`` has two stored commits (a CPU host's figures are never judged: the
    committed GPU history is what it can compare), else the empty string."""
    for other in results.machines(results_dir):
        if other != machine and len(results.stored_commits(results_dir, other)) >= 2:
            return f"; {results.compare_hint(results_dir, other)}"
    return ""

