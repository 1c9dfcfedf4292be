"""Measure every case on this machine, store it with asv, print the summary, publish (make bench).

    fusebench bench [--ops gelu,softmax] [--backends ...] [--dtypes ...] [--shapes ...] [--quick]
                    [--dirty] [--rounds 3] [--gpus all|0,1] [--config FILE] [--results DIR]
                    [--html DIR] [--plots DIR] [--no-publish] [--json FILE] [--csv FILE]

The cases come from the case file (``fusebench.yaml``, or ``--config``; ``fusebench list`` prints
them); a run with another case file, or of some shapes, is stored apart like a run of some
backends. ``--json``/``--csv`` also write this run's record (every case; JSON: the fields of
``records/<machine>/<sha8>.json.xz``, as plain indented JSON) to a file. A progress bar naming the
case it is on, with the elapsed and remaining time, runs on stderr while the run builds and times
when stderr is a terminal.

On a GPU the default grid runs; on the CPU a smaller grid with host clocks, GPU-only backends
skipped with their reason. ``--quick`` runs the quick grid into ``.asv/quick-results``, and a
run of some backends or dtypes goes to ``.asv/partial-results`` (``.asv/partial-quick-results``
with ``--quick``; never where the full runs are stored: asv would store n/a over the others);
a run of some ops keeps the other ops' stored results. Each case is timed in ``--rounds``
interleaved rounds (default 3); the run's full record (every round) is kept in
``records/<machine>/<sha8>.json.xz`` (``fusebench.storage.runrecord``) and asv's result files are
written from it (``fusebench.asv.store``), both in one transaction. ``--gpus`` measures on
several GPUs of the host at once, one worker process per GPU (``fusebench/measure/workers.py``);
each GPU model is stored as its own asv machine. The output ends with the time of each phase.
A tree whose measured files differ from HEAD, or a backend run emulated, is refused before
measuring (``fusebench/measure/provenance.py``; ``--dirty`` measures a dirty tree into
``.asv/dirty-results``). Exit status: 0 on success, 1 when a case failed or the asv files could
not be written, 2 on bad input (a selection that applies to none of the chosen ops included) or
when nothing was measured (nothing stored).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib.util
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from fusebench import config
from fusebench.asv import store
from fusebench.axes import BACKENDS, ELEMENT_SIZE
from fusebench.cli import add_config, duration, whole_number
from fusebench.commands.preview import DEFAULT_HTML, serves
from fusebench.errors import UsageError
from fusebench.ops import configured
from fusebench.paths import DIRTY_RESULTS, PROJECT_ROOT
from fusebench.record import ENERGY_SCOPES
from fusebench.report import plots, summary
from fusebench.site import site
from fusebench.storage import preflight, runrecord, transaction

if TYPE_CHECKING:
    import torch

    from fusebench.record import Sweep
    from fusebench.registry import Op

# torch (and the sweep, the workers, the environment, which import it) is imported inside the
# functions that measure: `fusebench bench --help` and `fusebench list --help` run without it.


def results_folder(quick: bool, partial: bool) -> str:
    """Where a run's asv results go, relative to the checkout: ``results`` only for a full run of
    the default grid; a quick run to ``.asv/quick-results``; a run of some backends or dtypes,
    quick or not, to its own folder, so its n/a cells never replace a full run's values."""
    if partial:
        return ".asv/partial-quick-results" if quick else ".asv/partial-results"
    return ".asv/quick-results" if quick else "results"


def results_reader(results: Path):
    """A reader of the stored results that names unreadable files instead of raising (publish has
    named them already)."""
    from fusebench.storage.results import Reader

    return Reader(results)


def build_cuda_extension() -> None:
    """Build the CUDA extension once, here, before the GPU workers start (each then only loads it);
    a failure is one line (each cuda case then says why it is skipped)."""
    from fusebench.kernels import cuda_ext

    try:
        cuda_ext.build()
    except RuntimeError as exc:
        print(f"bench: {exc}; the cuda cases will say why", file=sys.stderr)


def store_run(result: Sweep, machine: str, commit: str, results: Path, ops,
              case_file: Path | None = None) -> int:
    """Store one machine's sweep: asv's files written from it (``fusebench.asv.store``; the
    suite of the cases of ``case_file``, None: ``fusebench.yaml``), the summary, then the asv
    files and the run record together, in one transaction (``fusebench.storage.transaction``; the
    caller holds the folder's lock). Returns 0 when stored, 1 when the asv files could not be
    written (``results`` then untouched)."""
    t = time.perf_counter()
    records = runrecord.records_dir(results)
    with transaction.Transaction(results, (records,)) as txn:
        try:
            store.stage(result, machine, commit, results, txn, configured(case_file).values(),
                        ops=[op.name for op in ops])
        except UsageError as exc:
            print(summary.summary(result))
            print(f"bench: the asv results could not be written: {exc}; {results} left as it was",
                  file=sys.stderr)
            return 1
        result.phases["asv"] = round(time.perf_counter() - t, 1)
        print(summary.summary(result))
        record = runrecord.stage(result, records, machine, commit, txn)
        txn.commit()
    print(f"bench: results stored in {results}/{machine}/ for commit {commit[:12]} in "
          f"{time.perf_counter() - t:.1f} s; its record (every round) in {record}", file=sys.stderr)
    return 0


def add_selection(ap: argparse.ArgumentParser) -> None:
    """The options that select a run's cases (``fusebench bench`` and ``fusebench list``)."""
    # the case file's ops are the registered ones (fusebench.ops.registered), named without importing them
    ap.add_argument("--ops", help=f"comma-separated, of: {', '.join(config.load().ops)}")
    ap.add_argument("--backends", help=f"comma-separated, of: {', '.join(BACKENDS)}")
    ap.add_argument("--dtypes", help=f"comma-separated, of: {', '.join(ELEMENT_SIZE)}")
    ap.add_argument("--shapes", help="comma-separated shapes of the run's grid, e.g. 4096x4096,1x1048576")
    ap.add_argument("--quick", action="store_true", help="quick grid, results kept apart")
    add_config(ap)


def selected(args: argparse.Namespace) -> tuple[list[Op], list[str], list[str], str, bool]:
    """The run ``args`` select: ``(ops, backend names, dtype names, grid, partial)``; ``ops``
    narrowed to the chosen shapes of this machine's ``grid``; ``partial`` when the run covers less
    than the default case file's full grid (its results are then kept apart).

    Raises:
        UsageError: an unknown or inapplicable name or shape, or a case file that is not valid.
    """
    from fusebench.measure import environment, sweep
    from fusebench.measure.selection import choose, narrow_shapes

    ops, backends, dtypes = choose(configured(args.config), args.ops, args.backends, args.dtypes)
    grid = sweep.grid_name(environment.device(), args.quick)
    narrowed = narrow_shapes(ops, grid, args.shapes)
    # A run of some backends, dtypes or shapes would replace the others' stored values of this
    # commit with n/a (asv stores a benchmark's whole parameter grid at once), and a run of
    # another case file has other parameters: keep it apart, like --quick.
    partial = (len(backends) < len(BACKENDS) or len(dtypes) < len(ELEMENT_SIZE) or bool(args.shapes)
               or args.config is not None)
    return narrowed, backends, dtypes, grid, partial


def skip_reason(op: Op, backend: str, dtype: str, dev: torch.device) -> str | None:
    """Why the run will skip a case, known before anything is built (None: it will be built and
    timed, unless building it fails): the backend's own availability check on a probe tensor
    of ``dev`` (no build, no compile), the op not registering the backend, a dtype the device
    cannot run. The same texts the sweep records (a test compares them on the CPU)."""
    import torch

    from fusebench.backends import require_triton
    from fusebench.errors import SkipCase
    from fusebench.kernels import cuda_ext, reference_libs
    from fusebench.registry import PRECISIONS, no_backend_reason

    if backend not in op.backends:
        return no_backend_reason(op.name, backend)
    probe = torch.empty(0, device=dev)
    try:
        PRECISIONS[dtype].check_device(dev)
        if backend == "triton":
            require_triton(probe)
        elif backend == "cuda" and dev.type != "cuda":
            cuda_ext.require(probe)  # on a GPU this would build the extension: left to the run
        elif backend in reference_libs.LIBRARIES:
            lib = reference_libs.LIBRARIES[backend]
            if dev.type != "cuda":
                raise SkipCase(f"{lib.package} needs a CUDA GPU")
            if importlib.util.find_spec(lib.module) is None:
                raise SkipCase(f"{lib.package} {lib.version} is not installed; {reference_libs.INSTALL}")
    except SkipCase as exc:
        return str(exc)
    return None


def plan(ops: list[Op], grid: str, backends: list[str], dtypes: list[str],
         dev: torch.device | None = None) -> list[tuple[Op, str, tuple, str, str | None]]:
    """Every case the run records, in run order (``sweep.cases``), with :func:`skip_reason`."""
    from fusebench.measure import environment, sweep

    dev = dev or environment.device()
    return [(op, b, s, d, skip_reason(op, b, d, dev))
            for op, b, s, d in sweep.cases(ops, grid, backends, dtypes)]


def plan_line(planned, grid: str) -> str:
    """One line that ``fusebench list`` and ``fusebench bench`` both print: the cases the run
    records, how many it will time, and the skipped ones counted by reason, most first (an op
    not registering a backend counted as one reason, named last: it is no news)."""
    from collections import Counter

    from fusebench.registry import no_backend_reason

    skipped: Counter = Counter()
    who: dict[str, dict[str, None]] = {}
    no_backend = "the op has no such backend"  # no news: named last, whatever its count
    for op, b, _, _, r in planned:
        if r is not None:
            r = no_backend if r == no_backend_reason(op.name, b) else r
            skipped[r] += 1
            who.setdefault(r, {})[b] = None
    timed = len(planned) - sum(skipped.values())
    order = sorted(skipped.items(), key=lambda rn: (rn[0] == no_backend, -rn[1], rn[0]))
    reasons = "; ".join(f"{n} {','.join(who[r]) if len(who[r]) < 4 else 'of several backends'}: {r}"
                        for r, n in order)
    return (f"{len(planned)} case(s) of the {grid} grid: {timed} to build and time"
            + (f", {sum(skipped.values())} skipped ({reasons})" if skipped else ""))


def device_memory(dev: torch.device) -> tuple[int, str]:
    """The bytes a run on ``dev`` can hold, and what they are: the GPU's memory, else the host's
    RAM (0 where unknown)."""
    import torch

    from fusebench.measure import environment

    if dev.type == "cuda":
        return torch.cuda.get_device_properties(dev).total_memory, torch.cuda.get_device_name(dev)
    return int(environment.ram_bytes()), "this host's RAM"


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The options of ``fusebench bench``."""
    add_selection(ap)
    ap.add_argument("--rounds", type=whole_number(1, config.MAX_ROUNDS),
                    help=f"interleaved rounds per case (default: the case file's settings.rounds, "
                         f"{config.DEFAULT_ROUNDS} unless set; at most {config.MAX_ROUNDS}); noise: their "
                         "spread")
    ap.add_argument("--energy", choices=ENERGY_SCOPES, default=ENERGY_SCOPES[0],
                    help="which cases get an energy top-up window: headline (default: each op's headline "
                         "and largest shapes, every backend and dtype) or all (every case, about 80-90 s "
                         "more on a full default grid); the record says which")
    ap.add_argument("--gpus", help="all, or comma-separated GPU indices (0,1): one worker per GPU, "
                    "pulling cases from one queue (default: one GPU, in this process)")
    ap.add_argument("--json", type=Path, metavar="FILE", help="also write this run's record as JSON")
    ap.add_argument("--csv", type=Path, metavar="FILE", help="also write this run's cases as CSV")
    ap.add_argument("--results", type=Path, help="asv results folder (default results/)")
    ap.add_argument("--html", type=Path, default=DEFAULT_HTML, help="where the site goes")
    ap.add_argument("--plots", type=Path, default=PROJECT_ROOT / "plots", help="where plots go")
    ap.add_argument("--no-publish", action="store_true", help="store only: no site, no plots")
    ap.add_argument("--dirty", action="store_true", help="measure a tree whose measured files differ "
                    f"from HEAD anyway, into {DIRTY_RESULTS} (no effect on a clean tree)")
    ap.add_argument("--dry-run", action="store_true", help="check the selection and the tree as a run "
                    "does, print what it would time and skip, measure and store nothing")
    ap.add_argument("-v", "--verbose", action="store_true", help="print each skipped case as it is met "
                    "(default: one line counting them by reason; every reason is in the run's record)")


def run(args: argparse.Namespace) -> int:
    """Run ``fusebench bench`` with the parsed options; returns the exit status."""
    import torch

    from fusebench.measure import environment, sweep, workers
    from fusebench.measure.provenance import before_sweep

    ops, backends, dtypes, _, partial = selected(args)
    rounds = args.rounds or config.load(args.config).rounds
    results = args.results or PROJECT_ROOT / results_folder(args.quick, partial)
    commit = environment.git_commit()
    if commit is None:
        raise UsageError("not a git checkout: asv stores results per commit (git rev-parse HEAD failed)")
    slots = workers.parse_gpus(args.gpus, workers.visible_gpus()) if args.gpus else None
    if not slots:  # a shape the device cannot hold, said at once (a GPUS= parent leaves CUDA alone)
        dev = environment.device()
        preflight.memory(sweep.cases(ops, sweep.grid_name(dev, args.quick), backends, dtypes),
                         *device_memory(dev))
    # Only the backends the chosen ops register: a way out the refusal suggests must run as printed.
    applicable = [b for b in backends if any(b in op.backends for op in ops)]
    checked = before_sweep(results, applicable, dirty=args.dirty, gpu=True if slots else None)
    grid = sweep.grid_name(torch.device("cuda") if slots else environment.device(), args.quick)
    planned = plan(ops, grid, backends, dtypes)
    if not args.dry_run and all(why is not None for *_, why in planned):  # said before any peak or build
        raise UsageError(f"nothing to measure here: {plan_line(planned, grid)}; nothing measured, nothing "
                         "stored (make list with the same variables shows each case and why)")
    print(f"bench: {plan_line(planned, grid)}", file=sys.stderr)
    if environment.device().type != "cuda" and not slots:
        print("bench: no GPU: every figure is host-clock time on the CPU (perf_counter around each "
              "call), not a GPU figure", file=sys.stderr)
    if args.dry_run:
        print(f"bench: dry run: nothing measured, nothing stored (would store in {checked.results})",
              file=sys.stderr)
        return 0
    with contextlib.ExitStack() as held:
        locked: set[Path] = set()
        ready(held, locked, checked.results, len(sweep.cases(ops, grid, backends, dtypes)))
        return _measure_and_store(args, ops, backends, dtypes, rounds, commit, slots, checked, held, locked)


def ready(held: contextlib.ExitStack, locked: set[Path], results: Path, cases: int) -> None:
    """Before measuring into ``results``: hold its lock (a second run of it is refused; released
    when ``held`` closes) and check that the run can store what it measures
    (``fusebench.storage.preflight``: results and records writable, free space)."""
    real = results.resolve()
    if real in locked:
        return
    records = runrecord.records_dir(results)
    preflight.check({"results": results, "run records": records}, cases)
    held.enter_context(transaction.locked(results, "bench", (records,)))
    locked.add(real)


def stop_rule(args: argparse.Namespace):
    """The stopping rule of the case file's ``settings.timing`` (``fusebench.measure.stopping``)."""
    from fusebench.measure.stopping import StopRule

    cfg = config.load(args.config)
    return StopRule(cfg.max_noise, cfg.max_s, cfg.min_samples)


def _measure_and_store(args, ops, backends, dtypes, rounds, commit, slots, checked, held, locked) -> int:
    """The rest of :func:`run`, with the results folder locked and checked."""
    import torch

    from fusebench.measure import environment, sweep, workers
    from fusebench.measure.selection import require_measured
    from fusebench.ops import OPS

    started = time.perf_counter()
    lost: list[str] = []
    if slots:
        job = workers.Job("fusebench.ops:configured", tuple(op.name for op in ops), tuple(backends),
                          tuple(dtypes), sweep.grid_name(torch.device("cuda"), args.quick), rounds,
                          case_file=str(args.config.resolve()) if args.config else None,
                          rule=stop_rule(args), energy_scope=args.energy)
        # Cases dealt to the GPUs by cost: as an earlier run of this grid on this model measured them.
        earlier = workers.newest_record(runrecord.records_dir(checked.results),
                                        workers.gpu_model(slots[0].visible), job.grid, read=runrecord.read)
        job = dataclasses.replace(job, costs=workers.costs_from_record(job.cases(), earlier, rounds))
        outcome = workers.run(job, slots, prebuild=build_cuda_extension if "cuda" in backends else None)
        measured, lost = sorted(outcome.machines.items()), outcome.failures + outcome.unstored
    else:
        result = sweep.run(ops, quick=args.quick, backend_names=backends, dtype_names=dtypes,
                           rounds=rounds, rule=stop_rule(args), energy_scope=args.energy,
                           verbose=args.verbose)
        measured = [(environment.machine_name(), result)]
    require_measured([r for _, result in measured for r in result.records])
    for path, render in ((args.json, runrecord.to_json), (args.csv, runrecord.to_csv)):
        if path is not None:
            for machine, result in measured:
                target = path if len(measured) == 1 else path.with_name(f"{path.stem}-{machine}{path.suffix}")
                runrecord.write_text(target, render(result))
                print(f"bench: run record written to {target}", file=sys.stderr)
    stored, not_stored = [], 0
    results = checked.results
    for machine, result in measured:
        results = checked.after(result.environment)
        ready(held, locked, results, len(result.records))
        if not any(r.status == "ok" for r in result.records):
            print(f"bench: nothing measured on {machine}; nothing of it stored", file=sys.stderr)
            continue
        if store_run(result, machine, commit, results, ops, args.config) == 0:
            stored.append(machine)
        else:
            not_stored += 1
    if not_stored:
        return 1
    if not args.no_publish and results == PROJECT_ROOT / "results":
        t = time.perf_counter()
        # cdn=True: without npm (an offline GPU host) the site still publishes, with a warning.
        if site.publish(results, args.html, OPS.values(), cdn=True) != 0:
            print("bench: publishing the site failed (the reason is above); the results are stored",
                  file=sys.stderr)
            return 1
        print(f"bench: site published in {args.html}/ ({serves(args.html)} serves it)", file=sys.stderr)
        # the site's PNGs of the same ops (the default case file's) are the repo's: copied, not drawn again
        written = plots.write_plots(results, args.plots, list(configured(args.config).values()), stored,
                                    reader=results_reader(results),
                                    drawn=(args.html / site.PLOTS, list(OPS.values())))
        print(f"bench: {len(written)} plots refreshed in {args.plots}/{', '.join(stored)}/", file=sys.stderr)
        for _, result in measured:
            result.phases["publish"] = round(time.perf_counter() - t, 1)
    elif not args.no_publish:  # a quick, partial or dirty run, or another --results: kept apart
        print(f"bench: no site published: this run's results are in {results}/, apart from results/ "
              "(make publish builds html/ from results/)", file=sys.stderr)
    total = time.perf_counter() - started
    for machine, result in measured:
        for line in workers.gpu_lines(result):
            print(f"bench: {machine}: {line}", file=sys.stderr)
        print(f"bench: phases{f' ({machine})' if len(measured) > 1 else ''}: "
              + ", ".join(f"{k} {v:.0f} s" for k, v in result.phases.items())
              + f"; total {duration(total)}", file=sys.stderr)
    failed = sum(r.status == "failed" for _, result in measured for r in result.records)
    if failed:
        print(f"bench: {failed} case(s) failed (listed above)", file=sys.stderr)
    for line in lost:
        print(f"bench: {line}", file=sys.stderr)
    return 1 if failed or lost else 0

