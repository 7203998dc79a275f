"""arrayjit_backends."""

from arrayjit_backends.__about__ import __version__

__all__ = ["__version__"]
