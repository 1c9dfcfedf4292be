"""The package list, which pyproject.toml cannot compute: the harness (``fusebench/``) and the
kernels at the project root (``kernels/``), installed as ``fusebench.kernels`` (fusebench/__init__.py
says why); every op folder in ``kernels/`` is found, so adding an op edits nothing here."""

from setuptools import find_packages, setup

setup(
    packages=[*find_packages(include=["fusebench", "fusebench.*"]),
              *(f"fusebench.{p}" for p in find_packages(include=["kernels", "kernels.*"]))],
    package_dir={"fusebench.kernels": "kernels"},
)
