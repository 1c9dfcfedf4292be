"""Measuring: what builds, checks and times cases on a GPU (the sweep, its timing, inputs,
correctness gate, metrics, launch counts, environment, provenance, progress, worker processes)."""
