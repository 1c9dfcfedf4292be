"""fusebench: how much kernel fusion buys, measured the way GPU work must be measured.

The package is the harness: the measurement method shared by the asv suite (``benchmarks/``) and
the ``fusebench`` command (``fusebench.commands``): the op/backend contract, the case file, seeded
inputs, the correctness gate, device and wall timing, traffic and bandwidth metrics, environment
capture, the sweep, the history and the site. What it measures, the kernels, lives in ``kernels/``
at the project root, one folder per op, and is imported as ``fusebench.kernels``: installed, pip
puts it there (``setup.py``); in a checkout the lines below point ``fusebench.kernels`` at the
root's ``kernels/``, so both import it by one name (a top-level ``kernels`` would clash with
another project on PyPI).
"""

import importlib.util as _util
import sys as _sys
from pathlib import Path as _Path

__version__ = "0.1.0"

_installed = _Path(__file__).resolve().parent / "kernels"
_checkout = _Path(__file__).resolve().parent.parent / "kernels"
if "fusebench.kernels" not in _sys.modules and not _installed.is_dir() \
        and (_checkout / "__init__.py").is_file():
    _spec = _util.spec_from_file_location("fusebench.kernels", _checkout / "__init__.py",
                                          submodule_search_locations=[str(_checkout)])
    kernels = _util.module_from_spec(_spec)
    _sys.modules["fusebench.kernels"] = kernels
    _spec.loader.exec_module(kernels)
