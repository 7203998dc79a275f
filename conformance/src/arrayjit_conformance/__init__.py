"""arrayjit_conformance."""

from arrayjit_conformance.__about__ import __version__

__all__ = ["__version__"]
