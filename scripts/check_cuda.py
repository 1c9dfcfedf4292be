#!/usr/bin/env python3
"""Compile every kernels/cuda/*.cu for sm_90 with nvcc (no GPU needed) and fail on
compile errors, warnings or register spills. Usage: scripts/check_cuda.py [-q] [--arch sm_90] [files]."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernels.cuda_check import main

if __name__ == "__main__":
    sys.exit(main())
