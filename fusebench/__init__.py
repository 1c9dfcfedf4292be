"""fusebench: how much kernel fusion buys, measured the way GPU work must be measured.

The package holds the measurement method shared by the asv suite (``benchmarks/``) and the
``fusebench`` command (``fusebench.commands``): the op/backend registry types, the case file,
seeded inputs, the correctness gate, device and wall timing, traffic and bandwidth metrics,
environment capture, and the sweep that runs every case. The kernels themselves live in ``fusebench/ops/``.
"""

__version__ = "0.1.0"
