"""What fusebench measures: one folder per op, imported as ``fusebench.kernels``.

``kernels/<op>/`` holds an op: ``__init__.py`` builds its ``Op`` (the float64 reference, the
declared traffic, the backends), beside its Triton kernels (``triton.py``), its CUDA C++ sources
(``*.cu``) and its tuning space (``tuning.py``). Shared by every op: the CUDA extension's binding
and headers (``cuda/``), its builder and loader (``cuda_ext.py``), the check that compiles each
``.cu`` alone (``cuda_check.py``) and the adapters of the field's public kernels
(``reference_libs.py``). The harness (``fusebench/``) finds the ops through the case file
(``fusebench.ops``); nothing here imports the harness beyond its contract (``fusebench.registry``,
``fusebench.backends``, ``fusebench.tuning``). How to add an op or a backend: ``docs/extending.md``.
"""
