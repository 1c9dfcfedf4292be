"""The GPU probes of probes/ on a host without a GPU or with bad arguments: one line and exit 1,
never a traceback or a run on the CPU."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
PATCH = "docs/ab/cuda-gelu-proportional.patch"


@pytest.mark.slow
@pytest.mark.parametrize("argv, start", [
    (["placement_probe.py", "x"], "usage: PYTHONPATH=. python probes/placement_probe.py"),
    (["placement_probe.py", "2", "1"], "usage: PYTHONPATH=. python probes/placement_probe.py"),
    (["placement_probe.py", "2", "2"], "placement_probe: needs a CUDA GPU"),
    (["round_cost_probe.py", "gelu", "2"], "round_cost_probe: needs a CUDA GPU"),
    (["round_cost_probe.py", "nope", "2"], "round_cost_probe: "),
    (["ab_probe.py", PATCH, "gelu", "cuda"], "ab_probe: needs a CUDA GPU"),
    (["ab_probe.py", PATCH, "gelu", "nope"], "ab_probe: gelu has no backend"),
])
def test_probe_refuses_in_one_line(argv, start):
    if torch.cuda.is_available() and "GPU" in start:
        pytest.skip("this host has a GPU")
    p = subprocess.run([sys.executable, str(ROOT / "probes" / argv[0]), *argv[1:]], cwd=ROOT, text=True,
                       capture_output=True, env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=120)
    assert p.returncode == 1
    assert p.stderr.startswith(start), p.stderr
    assert p.stderr.strip().count("\n") == 0 and "Traceback" not in p.stderr
