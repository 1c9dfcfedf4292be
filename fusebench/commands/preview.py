"""Serve the published site (html/) on http://localhost:PORT (fusebench preview; run publish first).

    fusebench preview [--port 8080] [--html DIR]

Python's own ``http.server``, bound to 127.0.0.1, until Ctrl-C. Exit status: 0 when stopped,
2 when there is no site in the folder (run ``fusebench publish`` first).
"""

from __future__ import annotations

import argparse
import functools
import http.server
import sys
from pathlib import Path

from fusebench.cli import whole_number
from fusebench.errors import UsageError
from fusebench.paths import PROJECT_ROOT


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The options of ``fusebench preview``."""
    ap.add_argument("--port", type=whole_number(0, 65535), default=8080,
                    help="port on 127.0.0.1 (default 8080)")
    ap.add_argument("--html", type=Path, default=PROJECT_ROOT / "html",
                    help="the site's folder (default html/)")


def run(args: argparse.Namespace) -> int:
    """Serve ``args.html`` until interrupted; returns 0."""
    if not (args.html / "index.json").is_file():
        raise UsageError(f"{args.html}/ has no site; run fusebench publish first")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(args.html))
    with http.server.ThreadingHTTPServer(("127.0.0.1", args.port), handler) as server:
        print(f"preview: serving {args.html}/ on http://127.0.0.1:{args.port}/ (Ctrl-C stops)",
              file=sys.stderr)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
    return 0
