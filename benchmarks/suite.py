"""The asv suite, generated from the op registry: one class per op, no per-backend code.

Each class is parametrized over the full fixed backend axis × the op's default shapes × the
dtypes; a combination this machine or run does not cover is skipped with its reason. The numbers
come from one sweep (``fusebench.measure.sweep``), run once per asv run in ``setup_cache``, or
read from a run record or sweep file named by ``FUSEBENCH_SWEEP``, so each of asv's
per-combination processes only reads a record. ``make bench`` does not run asv: it writes asv's
files from its run record with asv's own classes (``fusebench/asv/store.py``), the values
``asv run`` of this suite stores (``tests/test_asv_store.py`` compares the two).

fusebench is imported from the environment asv runs in: the checkout (put it on
``ASV_PYTHONPATH``: asv drops ``PYTHONPATH``), or an install. The cases are the case file's:
``fusebench.yaml``, or the one ``$FUSEBENCH_CONFIG`` names.
"""

import os

from fusebench import config
from fusebench.asv import asvsuite
from fusebench.ops import configured

# asv starts this process with no argument of ours: the case file comes in its environment.
for _cls in asvsuite.suite_classes(configured(os.environ.get(config.CONFIG_ENV)).values()):
    globals()[_cls.__name__] = _cls
del _cls
