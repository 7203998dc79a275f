"""The first-party backends and how to install them.

The registry only knows the backends whose packages are installed. This table names the ones
this project publishes, so that the ``arrayjit`` command and the conformance plugin can say what
to install when a user asks for a backend that is not there (``sync_llvm`` without
``arrayjit-backend-c``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FirstParty:
    """One first-party backend entry: its base name, every full name, its distribution and the
    command that installs it."""

    name: str
    full_names: tuple[str, ...]
    distribution: str
    install: str


FIRST_PARTY: tuple[FirstParty, ...] = (
    FirstParty(
        "cc",
        ("sync_cc", "multicore_cc", "cc"),
        "arrayjit-backend-c",
        "pip install arrayjit-backend-c",
    ),
    FirstParty(
        "llvm",
        ("sync_llvm", "multicore_llvm", "llvm"),
        "arrayjit-backend-c",
        "pip install arrayjit-backend-c",
    ),
    FirstParty(
        "opencl",
        ("opencl",),
        "arrayjit-backend-opencl",
        'pip install "arrayjit-backend-opencl[pocl]"  (the pocl extra adds a CPU OpenCL runtime)',
    ),
    FirstParty(
        "cuda",
        ("cuda",),
        "arrayjit-backend-cuda",
        'pip install "arrayjit-backend-cuda[pycuda]"',
    ),
)


def providing(name: str) -> FirstParty | None:
    """The first-party entry that answers to ``name`` (any full name), or None."""
    key = name.strip().lower()
    return next((fp for fp in FIRST_PARTY if key in fp.full_names), None)


def not_installed(registered: set[str]) -> list[FirstParty]:
    """The first-party entries whose base name is not among ``registered`` entry names."""
    return [fp for fp in FIRST_PARTY if fp.name not in registered]


__all__ = ["FIRST_PARTY", "FirstParty", "not_installed", "providing"]
