"""arrayjit_ir."""

from arrayjit_ir.__about__ import __version__

__all__ = ["__version__"]
