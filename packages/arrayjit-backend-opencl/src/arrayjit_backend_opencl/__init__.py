"""arrayjit_backend_opencl: the ``opencl`` backend (pyopencl; PoCL runs it on any CPU)."""

from typing import TYPE_CHECKING

from arrayjit_backend_opencl.__about__ import __version__
from arrayjit_backends.registry import device_entry

if TYPE_CHECKING:
    from arrayjit_backend_opencl.device import OpenclDevices

INSTALL_HINT = 'pip install "arrayjit-backend-opencl[pocl]" (a CPU OpenCL runtime), or a GPU driver'


def _probe() -> str | None:
    try:
        from arrayjit_backend_opencl.device import find_platform
    except ImportError as exc:  # pyopencl itself or its ICD loader is absent
        return f"pyopencl cannot be imported: {exc}"
    found = find_platform()
    return found if isinstance(found, str) else None


def _make() -> "OpenclDevices":  # imported lazily: pyopencl may be absent
    from arrayjit_backend_opencl.device import OpenclDevices

    return OpenclDevices()


opencl_entry = device_entry(
    "opencl",
    _make,
    priority=5,
    probe=_probe,
    install_hint=INSTALL_HINT,
    description="OpenCL devices through pyopencl",
)

__all__ = ["__version__", "opencl_entry"]
