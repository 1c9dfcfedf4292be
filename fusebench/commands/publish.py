"""Build the asv site in ``html/`` from every stored result, working offline.

    fusebench publish [--results DIR] [--html DIR] [--cdn]

Runs ``asv publish``, serves jQuery/flot/bootstrap from ``html/vendor/`` (installed with
``npm ci`` from ``site/package-lock.json``) instead of CDNs, and adds the plots
(``html/plots/``). Without npm (or with ``npm ci`` failing) it stops with exit 1, unless
``--cdn`` is given: the site is then published with its CDN URLs and needs internet. Every stored
result asv will not draw (its commit off main's first-parent line, or missing) is named with the
reason and the fix; ``--strict`` (``make publish STRICT=1``) makes that exit 1.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from fusebench.commands.preview import DEFAULT_HTML, serves
from fusebench.errors import UsageError
from fusebench.ops import for_reports
from fusebench.paths import PROJECT_ROOT
from fusebench.site import site


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The options of ``fusebench publish``."""
    ap.add_argument("--results", type=Path, default=PROJECT_ROOT / "results", help="asv results folder")
    ap.add_argument("--html", type=Path, default=DEFAULT_HTML, help="where the site goes")
    ap.add_argument("--cdn", action="store_true", help="if npm is unavailable, keep the CDN URLs")
    ap.add_argument("--strict", action="store_true",
                    help="exit 1 when a stored result will not be drawn (commit off main's first parents)")


def run(args: argparse.Namespace) -> int:
    """Run ``fusebench publish`` with the parsed options; returns the exit status."""
    if not (args.results / "benchmarks.json").is_file():
        raise UsageError(f"no asv results in {args.results}/ (benchmarks.json missing): run make bench")
    ops = for_reports(None, args.results)  # from the case file and the records: no torch needed

    status = site.publish(args.results, args.html, ops, cdn=args.cdn, strict=args.strict)
    if status == 0:
        print(f"publish: site in {args.html}/ ({serves(args.html)} serves it)", file=sys.stderr)
    return status

