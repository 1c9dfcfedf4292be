"""Time the candidate configurations of the hand-written kernels on a GPU (fusebench tune cuda|triton).

    fusebench tune cuda   [--dtypes ...] [--budget 0.05] [--no-gelu] [--shapes ...] [--compact]
    fusebench tune triton [--only SUBSTRING] [--budget 0.03]

``cuda``: every forced variant of the CUDA softmax (and gelu) against auto and Triton
(``fusebench/commands/tune_cuda.py``); ``triton``: the launch configurations of the Triton GELU
and softmax kernels (``fusebench/commands/tune_triton.py``). Both need a CUDA GPU. Exit status:
0, 1 when a correctness gate failed, 2 on bad input or without a GPU.
"""

from __future__ import annotations

import argparse
import importlib

from fusebench.cli import add_config

#: The tuners: ``fusebench tune <name>`` runs ``fusebench.commands.tune_<name>``.
TUNERS = ("cuda", "triton")


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """One subcommand per tuner, with its options."""
    sub = ap.add_subparsers(dest="tuner", required=True, metavar="<tuner>", parser_class=type(ap))
    for name in TUNERS:
        module = importlib.import_module(f"fusebench.commands.tune_{name}")
        p = sub.add_parser(name, help=module.__doc__.strip().splitlines()[0], description=module.__doc__,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        module.add_arguments(p)
        add_config(p)
        p.set_defaults(tune=module.run)


def run(args: argparse.Namespace) -> int:
    """Run the chosen tuner (it reads its ops from ``args.config``); returns its exit status."""
    return args.tune(args)
