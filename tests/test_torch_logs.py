"""A torch.compile refusal is the one-line skip, not torch's ~25-line logged traceback before it
(issue 13, item 8)."""

import logging
import os
import subprocess
import sys

import pytest

from fusebench.measure.torch_logs import REPEATED_TRACEBACKS, quiet_compile
from fusebench.paths import PROJECT_ROOT

REFUSAL = """
import torch
from fusebench.kernels.softmax import softmax_eager
from fusebench.backends import compiled
from fusebench.errors import SkipCase
try:
    compiled(softmax_eager, torch.randn(4, 0))  # amax over an empty row: Dynamo refuses
except SkipCase as exc:
    print(exc)
"""


def _refuse(**env):
    env = {**{k: v for k, v in os.environ.items() if k != "TORCH_LOGS"}, **env}
    return subprocess.run([sys.executable, "-c", REFUSAL], cwd=PROJECT_ROOT, capture_output=True, text=True,
                          env=env, timeout=300)


@pytest.mark.slow
def test_a_compile_refusal_prints_only_the_skip():
    out = _refuse()
    assert out.stdout.strip() == ("torch.compile failed: TorchRuntimeError: RuntimeError when making "
                                  "fake tensor call")
    assert "Traceback" not in out.stderr and "fake_tensor.py" not in out.stderr, out.stderr[-3000:]


@pytest.mark.slow
def test_torch_logs_asked_for_are_left_alone():
    out = _refuse(TORCH_LOGS="fake_tensor")
    assert "failed while attempting to run meta for aten.amax.default" in out.stderr


def test_levels_are_restored(monkeypatch):
    monkeypatch.delenv("TORCH_LOGS", raising=False)
    logger = logging.getLogger(REPEATED_TRACEBACKS[0])
    before = logger.level
    with quiet_compile():
        assert logger.level > logging.CRITICAL
    assert logger.level == before
    monkeypatch.setenv("TORCH_LOGS", "dynamo")
    with quiet_compile():
        assert logger.level == before
