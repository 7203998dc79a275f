"""arrayjit_backend_opencl."""

from arrayjit_backend_opencl.__about__ import __version__

__all__ = ["__version__"]
