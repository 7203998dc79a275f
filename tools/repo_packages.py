"""The repository's distributions, as folders below its root, for the scripts in this folder
(each script is run as ``python tools/<script>.py``, so this folder is on its import path)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CPU_PACKAGES = (
    "packages/arrayjit-tnode",
    "packages/arrayjit-ir",
    "packages/arrayjit-backends",
    "packages/arrayjit-backend-c",
    "conformance",
)
"""The CPU stack and the conformance suite: what runs without a GPU or MPI."""
ALL_PACKAGES = (
    *CPU_PACKAGES,
    "packages/arrayjit-backend-opencl",
    "packages/arrayjit-backend-cuda",
    "packages/arrayjit-distributed",
)
"""Every distribution the repository publishes."""
