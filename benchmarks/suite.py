"""The asv suite, generated from the op registry: one class per op, no per-backend code.

Each class is parametrized over the full fixed backend axis × the op's default shapes × the
dtypes; a combination this machine or run does not cover is skipped with its reason. The numbers
come from one sweep (``fusebench.sweep``), run once per asv run in ``setup_cache`` or read from
the file ``make bench`` just measured (``FUSEBENCH_SWEEP``), so each of asv's per-combination
processes only reads a record: a full run stays within minutes.
"""

import sys
from pathlib import Path

# asv runs benchmarks with PYTHONPATH removed and the project is not installed: import it from
# the checkout that holds this suite.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fusebench import asvsuite  # noqa: E402
from kernels import OPS  # noqa: E402

for _op in OPS.values():
    _cls = asvsuite.suite_class(_op)
    globals()[_cls.__name__] = _cls
del _op, _cls
