"""``make bench``: measure every case on this machine, store it with asv, print the summary, publish.

    python scripts/bench.py [--ops gelu,softmax] [--backends ...] [--dtypes ...] [--quick] [--dirty]
                            [--rounds 3] [--results DIR] [--html DIR] [--plots DIR] [--no-publish]

On a GPU the default grid runs; on the CPU a smaller grid with host clocks, GPU-only backends
skipped with their reason. ``--quick`` runs the quick grid into ``.asv/quick-results``, and a
run of some backends or dtypes goes to ``.asv/partial-results`` (``.asv/partial-quick-results``
with ``--quick``; never where the full runs are stored: asv would store n/a over the others);
a run of some ops keeps the other ops' stored results. Each case is timed in ``--rounds``
interleaved rounds (default 3); beside the asv results the run's full record (every round) is
kept in ``records/<machine>/<sha8>.json`` (``fusebench.runrecord``), written only once asv has
stored the results. The output ends with the time of each phase. A tree whose measured files
differ from HEAD, or a backend run emulated, is refused before measuring
(``fusebench/provenance.py``; ``--dirty`` measures a dirty tree into ``.asv/dirty-results``).
Exit status: 0 on success, 1 when a case failed or asv failed, 2 on bad input (a selection
that applies to none of the chosen ops included) or when nothing was measured (nothing stored).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fusebench import asvsuite, environment, plots, report, runrecord, site, store, sweep  # noqa: E402
from fusebench.cli import positive_int, run_main  # noqa: E402
from fusebench.errors import UsageError  # noqa: E402
from fusebench.provenance import DIRTY_RESULTS, before_sweep  # noqa: E402
from fusebench.registry import BACKENDS, PRECISIONS  # noqa: E402
from fusebench.selection import choose, require_measured  # noqa: E402
from kernels import OPS  # noqa: E402


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
    from fusebench.results import Reader

    return Reader(results)


def main() -> int:
    ap = argparse.ArgumentParser(prog="bench", description=__doc__.splitlines()[0])
    ap.add_argument("--ops", help=f"comma-separated, of: {', '.join(OPS)}")
    ap.add_argument("--backends", help=f"comma-separated, of: {', '.join(BACKENDS)}")
    ap.add_argument("--dtypes", help=f"comma-separated, of: {', '.join(PRECISIONS)}")
    ap.add_argument("--quick", action="store_true", help="quick grid, results kept apart")
    ap.add_argument("--rounds", type=positive_int, default=sweep.DEFAULT_ROUNDS,
                    help=f"interleaved rounds per case (default {sweep.DEFAULT_ROUNDS}); noise: their spread")
    ap.add_argument("--results", type=Path, help="asv results folder (default results/)")
    ap.add_argument("--html", type=Path, default=environment.ROOT / "html")
    ap.add_argument("--plots", type=Path, default=environment.ROOT / "plots", help="where plots go")
    ap.add_argument("--no-publish", action="store_true")
    ap.add_argument("--dirty", action="store_true", help="measure a tree whose measured files differ "
                    f"from HEAD anyway, into {DIRTY_RESULTS} (no effect on a clean tree)")
    args = ap.parse_args()

    ops, backends, dtypes = choose(OPS, args.ops, args.backends, args.dtypes)
    # A run of some backends or dtypes would replace the others' stored values of this commit
    # with n/a (asv stores a benchmark's whole parameter grid at once): keep it apart, like --quick.
    partial = len(backends) < len(BACKENDS) or len(dtypes) < len(PRECISIONS)
    results = args.results or environment.ROOT / results_folder(args.quick, partial)
    commit = environment.git_commit()
    if commit is None:
        raise UsageError("not a git checkout: asv stores results per commit (git rev-parse HEAD failed)")
    checked = before_sweep(results, backends, dirty=args.dirty)

    started = time.perf_counter()
    result = sweep.run(ops, quick=args.quick, backend_names=backends, dtype_names=dtypes,
                       rounds=args.rounds)
    require_measured(result.records)
    results = checked.after(result.environment)
    machine = environment.machine_name()
    sweep_file = environment.ROOT / ".asv" / "sweeps" / f"{machine}-{commit[:12]}-{result.grid}.json"
    result.save(sweep_file)
    print(f"bench: sweep saved to {sweep_file.relative_to(environment.ROOT)}", file=sys.stderr)

    store.register_machine(store.machine_info(machine, result.environment))
    t = time.perf_counter()
    status = store.run_asv(sweep_file, machine, commit, results,
                           classes=[asvsuite.class_name(op.name) for op in ops])
    result.phases["asv"] = round(time.perf_counter() - t, 1)
    print(report.summary(result))
    if status != 0:
        print(f"bench: asv run failed (exit {status}); {results} left as it was", file=sys.stderr)
        return 1
    record = runrecord.save(result, runrecord.records_dir(results), machine, commit)
    print(f"bench: results stored in {results}/{machine}/ for commit {commit[:12]}; its record "
          f"(every round) in {record}", file=sys.stderr)
    if not args.no_publish and results == environment.ROOT / "results":
        t = time.perf_counter()
        # cdn=True: without npm (an offline GPU host) the site still publishes, with a warning.
        if site.publish(results, args.html, cdn=True) != 0:
            print("bench: publishing the site failed (the reason is above); the results are stored",
                  file=sys.stderr)
            return 1
        print(f"bench: site published in {args.html}/ (make preview serves it)", file=sys.stderr)
        written = plots.write_plots(results, args.plots, list(OPS.values()), [machine],
                                    reader=results_reader(results))
        print(f"bench: {len(written)} plots refreshed in {args.plots}/{machine}/", file=sys.stderr)
        result.phases["publish"] = round(time.perf_counter() - t, 1)
    total = time.perf_counter() - started
    print("bench: phases: " + ", ".join(f"{k} {v:.0f} s" for k, v in result.phases.items())
          + f"; total {total // 60:.0f} min {total % 60:.0f} s", file=sys.stderr)
    failed = sum(r.status == "failed" for r in result.records)
    if failed:
        print(f"bench: {failed} case(s) failed (listed above)", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    run_main(main, "bench")
