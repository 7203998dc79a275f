"""arrayjit_backend_cuda: the ``cuda`` backend (pycuda for the driver, nvcc for code).

Without pycuda, a driver, a GPU or nvcc, the backend is a missing backend that says which.
The renderer (:mod:`arrayjit_backend_cuda.renderer`) needs none of them, so CUDA source can be
generated, and compiled to PTX with ``nvcc`` alone, on any machine.
"""

from typing import TYPE_CHECKING

from arrayjit_backend_cuda.__about__ import __version__
from arrayjit_backends.registry import device_entry

if TYPE_CHECKING:
    from arrayjit_backend_cuda.device import CudaDevices

INSTALL_HINT = 'pip install "arrayjit-backend-cuda[pycuda]" on a machine with an NVIDIA driver'


def _probe() -> str | None:
    try:
        import pycuda.driver  # noqa: F401
    except ImportError as exc:
        return f"pycuda is not installed ({exc})"
    from arrayjit_backend_cuda.device import probe

    return probe()


def _make() -> "CudaDevices":  # imported lazily: pycuda may be absent
    from arrayjit_backend_cuda.device import CudaDevices

    return CudaDevices()


cuda_entry = device_entry(
    "cuda",
    _make,
    priority=30,
    probe=_probe,
    install_hint=INSTALL_HINT,
    description="NVIDIA GPUs through pycuda and nvcc",
)

__all__ = ["__version__", "cuda_entry"]
