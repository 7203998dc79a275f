"""arrayjit_backend_c: the CPU backends ``cc`` (C source, system C compiler, ctypes) and ``llvm``
(LLVM IR, llvmlite's in-process JIT, ctypes)."""

from arrayjit_backend_c.__about__ import __version__
from arrayjit_backend_c.compiler import find_compiler
from arrayjit_backend_c.no_device import CcBackend
from arrayjit_backends.backend_impl import NoDeviceBackend
from arrayjit_backends.registry import no_device_entry


def _probe_cc() -> str | None:
    return None if find_compiler() else "no C compiler found ($CC, cc, gcc or clang on PATH)"


def _probe_llvm() -> str | None:
    try:
        import llvmlite.binding as llvm
    except ImportError as e:
        return f"llvmlite is not importable ({e})"
    try:
        llvm.check_jit_execution()
    except OSError as e:
        return f"llvmlite cannot run JIT-compiled code here ({e})"
    return None


def _make_llvm() -> NoDeviceBackend:
    # Imported on use: loading LLVM costs time that users of cc alone should not pay.
    from arrayjit_backend_c.llvm_backend import LlvmBackend

    return LlvmBackend()


cc_entry = no_device_entry(
    "cc",
    CcBackend,
    priority=20,
    probe=_probe_cc,
    install_hint="install a C compiler (e.g. apt-get install gcc) or set $CC",
    description="C through the system compiler",
)

llvm_entry = no_device_entry(
    "llvm",
    _make_llvm,
    priority=10,
    probe=_probe_llvm,
    install_hint="pip install llvmlite",
    description="LLVM IR JIT-compiled in process by llvmlite",
)

__all__ = ["CcBackend", "__version__", "cc_entry", "llvm_entry"]
