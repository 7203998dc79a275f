"""arrayjit_backend_c."""

from arrayjit_backend_c.__about__ import __version__

__all__ = ["__version__"]
