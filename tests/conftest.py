"""Shared test set-up: Triton runs under its interpreter where there is no GPU; ``gpu`` tests skip."""

import os

import pytest
import torch

HAS_CUDA = torch.cuda.is_available()
if not HAS_CUDA:
    os.environ.setdefault("TRITON_INTERPRET", "1")


def pytest_collection_modifyitems(config, items):
    if HAS_CUDA:
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def device() -> str:
    """Where backends run in tests: the GPU when there is one, else the CPU."""
    return "cuda" if HAS_CUDA else "cpu"
