"""Serve the published site (html/) on http://localhost:PORT (fusebench preview; run publish first).

    fusebench preview [--port 8080] [--html DIR]

Python's own ``http.server``, bound to 127.0.0.1, until Ctrl-C; ``--port 0`` takes any free port
(the line it prints names it). Exit status: 0 when stopped, 2 on bad input: no site in the folder
(run ``fusebench publish`` first), a port outside 0-65535, in use or not this user's to bind.
"""

from __future__ import annotations

import argparse
import errno
import functools
import http.server
import sys
from pathlib import Path

from fusebench.cli import command, whole_number
from fusebench.errors import UsageError
from fusebench.paths import PROJECT_ROOT

#: The site's folder ``make publish`` writes and ``make preview`` serves (the Makefile gives neither
#: ``--html``).
DEFAULT_HTML = PROJECT_ROOT / "html"


def serves(html: Path, port: int | None = None) -> str:
    """The command that serves the site in ``html`` (on ``port``, when given), as a message prints
    it: ``make preview`` for :data:`DEFAULT_HTML`, else ``<python> -m fusebench preview --html DIR``
    (``cli.command``)."""
    if Path(html).resolve() == DEFAULT_HTML.resolve():
        return "make preview" + (f" PORT={port}" if port is not None else "")
    return command("preview", "--html", html, *(("--port", port) if port is not None else ()))


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The options of ``fusebench preview``."""
    ap.add_argument("--port", type=whole_number(0, 65535), default=8080,
                    help="port on 127.0.0.1 (default 8080; 0: any free one, printed)")
    ap.add_argument("--html", type=Path, default=DEFAULT_HTML,
                    help="the site's folder (default html/)")


def run(args: argparse.Namespace) -> int:
    """Serve ``args.html`` until interrupted; returns 0."""
    if not (args.html / "index.json").is_file():
        publish = ("make publish" if args.html.resolve() == DEFAULT_HTML.resolve()
                   else command("publish", "--html", args.html))
        raise UsageError(f"{args.html}/ has no site; run {publish} first")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(args.html))
    try:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", args.port), handler)
    except OSError as exc:
        # the port is the user's choice, like a results folder another run holds: exit 2
        if exc.errno not in (errno.EADDRINUSE, errno.EACCES):
            raise
        why = "is in use" if exc.errno == errno.EADDRINUSE else "is refused to this user (below 1024: root's)"
        raise UsageError(f"port {args.port} of 127.0.0.1 {why}; give another, or 0 for any free one: "
                         f"{serves(args.html, 0)}") from None
    with server:
        port = server.server_address[1]  # the one bound: --port 0 takes any free port
        print(f"preview: serving {args.html}/ on http://127.0.0.1:{port}/ (Ctrl-C stops)",
              file=sys.stderr, flush=True)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
    return 0
