"""The A/B patches of docs/ab/ still apply to the kernels they slow down (docs/ab/README.md)."""

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PATCHES = sorted((ROOT / "docs" / "ab").glob("*.patch"))


def test_there_are_patches():
    assert {p.name for p in PATCHES} >= {"triton-gelu-slower.patch", "triton-gelu-proportional.patch",
                                      "cuda-gelu-proportional.patch"}


@pytest.mark.parametrize("patch", PATCHES, ids=lambda p: p.name)
def test_patch_applies_to_the_tree(patch):
    done = subprocess.run(["git", "apply", "--check", str(patch)], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
