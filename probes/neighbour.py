"""A GPU neighbour on purpose: a bfloat16 matmul loop in its own process, to check that
``make bench`` warns about another process on the GPU and marks the cases it slowed.

    python probes/neighbour.py [--seconds 120] [--n 8192]

Runs until ``--seconds`` have passed (or it is killed); prints its pid first. Needs a CUDA GPU.
Exit status: 0 when it ran its time, 2 when there is no GPU.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch


def main() -> int:
    ap = argparse.ArgumentParser(prog="neighbour", description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=120.0, help="how long to run (s)")
    ap.add_argument("--n", type=int, default=8192, help="matmul size (n x n x n)")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("neighbour: error: needs a CUDA GPU", file=sys.stderr)
        return 2
    a = torch.randn(args.n, args.n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn_like(a)
    print(f"neighbour: pid {os.getpid()}, {args.n}^3 bfloat16 matmuls for {args.seconds:g} s", flush=True)
    end = time.monotonic() + args.seconds
    while time.monotonic() < end:
        for _ in range(20):
            a @ b
        torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
