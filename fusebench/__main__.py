"""``python -m fusebench``: the ``fusebench`` command (``fusebench.commands``), from a checkout too."""

from fusebench.commands import main

main()
