"""arrayjit_backend_c: the ``cc`` CPU backend (C source, system C compiler, ctypes).

The ``llvm`` backend (llvmlite) is not built yet.
"""

from arrayjit_backend_c.__about__ import __version__
from arrayjit_backend_c.compiler import find_compiler
from arrayjit_backend_c.no_device import CcBackend
from arrayjit_backends.registry import no_device_entry


def _probe_cc() -> str | None:
    return None if find_compiler() else "no C compiler found ($CC, cc, gcc or clang on PATH)"


cc_entry = no_device_entry(
    "cc",
    CcBackend,
    priority=20,
    probe=_probe_cc,
    install_hint="install a C compiler (e.g. apt-get install gcc) or set $CC",
    description="C through the system compiler",
)

__all__ = ["CcBackend", "__version__", "cc_entry"]
