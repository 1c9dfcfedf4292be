"""Run fusebench commands in a Python where torch and triton cannot be imported.

    python tests/torchless.py '["compare", "--help"]' '["plots", "--out", "DIR"]' ...

A finder first on ``sys.meta_path`` refuses ``torch``, ``triton`` and their submodules as a Python
without them would (``ModuleNotFoundError``), before fusebench is imported; each argument is one
command line, run in turn through ``fusebench.commands.main``. Prints one JSON line per command:
``{"argv", "code", "out", "err"}``, then ``{"loaded": [...]}``, the refused modules found in
``sys.modules`` at the end (none: nothing got them another way). For ``tests/test_torch_free.py``.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's fusebench, first

#: The packages a reader of stored results must not need.
REFUSED = ("torch", "triton")


class Refuse:
    """A meta-path finder that finds the refused packages missing."""

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in REFUSED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


def main(argvs: list[str]) -> None:
    sys.meta_path.insert(0, Refuse())
    from fusebench.commands import main as fusebench

    for text in argvs:
        argv = json.loads(text)
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                fusebench(argv)
                code = 0
            except SystemExit as done:
                code = done.code if isinstance(done.code, int) else 1
        ran = {"argv": argv, "code": code, "out": out.getvalue(), "err": err.getvalue()}
        print(json.dumps(ran), flush=True)
    print(json.dumps({"loaded": sorted(m for m in sys.modules if m.partition(".")[0] in REFUSED)}))


if __name__ == "__main__":
    main(sys.argv[1:])
