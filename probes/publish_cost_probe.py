"""Where ``make bench``'s publish phase spends its time (issue 26's cost; docs/gate.md), without a GPU.

Runs what ``fusebench/commands/bench.py`` runs after storing, into scratch folders instead of
``html/`` and ``plots/``: ``site.publish`` of ``results/`` (its parts timed: ``asv publish``, the
plots, the verdicts page; the three overlap since the plots and verdicts are built while asv
publishes), then the repo's plots of the machines named (default every one with results),
copied from the site's where the ops are the same. Prints the seconds of each, then the CPUs the
plot workers had. Run from the project root:

    PYTHONPATH=. python probes/publish_cost_probe.py [machine,machine]
"""

import functools
import inspect
import sys
import tempfile
import time
from pathlib import Path

from fusebench.asv import store
from fusebench.ops import OPS, configured
from fusebench.paths import PROJECT_ROOT
from fusebench.report import plots
from fusebench.site import site, verdicts
from fusebench.storage import results

parts: dict[str, float] = {}


def timed(module, name: str) -> None:
    """Wrap ``module.name`` so that its wall time adds up in ``parts`` (under ``module.name``)."""
    f = getattr(module, name)

    @functools.wraps(f)  # keeps the signature (write_plots' drawn= is looked up)
    def wrapper(*args, **kwargs):
        t = time.perf_counter()
        try:
            return f(*args, **kwargs)
        finally:
            key = f"{module.__name__.rsplit('.', 1)[-1]}.{name}"
            parts[key] = parts.get(key, 0.0) + time.perf_counter() - t

    setattr(module, name, wrapper)


def main() -> int:
    res = PROJECT_ROOT / "results"
    machines = sys.argv[1].split(",") if len(sys.argv) > 1 else results.machines(res)
    for module, name in ((store, "publish"), (plots, "write_plots"), (verdicts, "write_page")):
        timed(module, name)
    with tempfile.TemporaryDirectory() as tmp:
        html, out = Path(tmp) / "html", Path(tmp) / "plots"
        t = time.perf_counter()
        status = site.publish(res, html, OPS.values(), cdn=True)
        site_s = time.perf_counter() - t
        site_parts = dict(parts)
        parts.clear()
        reuse = "drawn" in inspect.signature(plots.write_plots).parameters  # an older tree draws again
        t = time.perf_counter()
        written = plots.write_plots(res, out, list(configured(None).values()), machines,
                                    reader=results.Reader(res),
                                    **({"drawn": (html / site.PLOTS, list(OPS.values()))} if reuse else {}))
        repo_s = time.perf_counter() - t
    print(f"publish phase: {site_s + repo_s:.1f} s = site {site_s:.1f} s (status {status}; "
          + ", ".join(f"{k} {v:.1f} s" for k, v in site_parts.items())
          + f") + repo plots {repo_s:.2f} s ({len(written)} files, {'copied' if reuse else 'drawn'})")
    print(f"plot workers: {plots.cpus()} CPUs" if hasattr(plots, "cpus") else "plots drawn one at a time")
    return 0 if status == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
