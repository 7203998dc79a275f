"""arrayjit_backend_cuda."""

from arrayjit_backend_cuda.__about__ import __version__

__all__ = ["__version__"]
