"""arrayjit_backend_c: the CPU backends ``cc`` (C source, system C compiler, ctypes) and ``llvm``
(LLVM IR, llvmlite's in-process JIT, ctypes).

Each is a :class:`~arrayjit_backends.impl.cpu_compiler.CpuCompiler` that the shared layer runs
under its ``sync_`` and ``multicore_`` schedulers. ``cpu/``, what both share: ``segments.py`` (a
routine as one native function per segment; linking and running them), ``crew.py`` (the native
helper threads of parallel loops, and the futex bell of ``multicore_`` workers),
``llvm_jit.py`` (the process's llvmlite JIT, which the crew's module and the ``llvm`` compiler
use), ``matmul.py`` (the packed matmul: which loop nests are one, its layout and C source),
``work.py`` (which routines are short enough to run on the scheduling thread). ``cc/``:
``renderer.py`` (the C dialect), ``toolchain.py`` (finding and running the system C compiler),
``compiler.py`` (compile), ``stream_baseline.py`` (the benchmarks' hand-written STREAM-style
bandwidth baseline). ``llvm/``: ``renderer.py`` (the IR generator, over ``ir_types.py``,
``scalar.py``, ``helpers.py`` and ``matmul.py``, the packed matmul as IR), ``compiler.py``
(compile). ``cpu/`` imports neither ``cc/`` nor ``llvm/``, which never import each other. This
module holds the two entry points.
"""

import ctypes
import functools

from arrayjit_backend_c.__about__ import __version__
from arrayjit_backend_c.cc.compiler import CcCompiler
from arrayjit_backend_c.cc.toolchain import compiler_problem
from arrayjit_backends.impl.cpu_compiler import CpuCompiler
from arrayjit_backends.registry import no_device_entry


def _probe_cc() -> str | None:
    return compiler_problem()


# The probe compiles this and runs it: it uses the syntax the generated IR uses (opaque
# pointers, ``noalias``), which llvmlite releases before 0.45 (LLVM 15) reject, so an llvmlite
# too old to compile our IR is reported as unusable instead of failing on the first compile.
PROBE_IR = """
define i32 @aj_probe(ptr noalias %p) {
entry:
  %v = load i32, ptr %p
  %r = add i32 %v, 1
  store i32 %r, ptr %p
  ret i32 %r
}
"""


@functools.cache
def _probe_llvm() -> str | None:
    """None when llvmlite compiles and runs a tiny module in our IR's syntax, else why not
    (computed once per process: it costs a few milliseconds)."""
    try:
        import llvmlite
        import llvmlite.binding as llvm
    except ImportError as e:
        return f"llvmlite is not importable ({e})"
    try:
        llvm.check_jit_execution()
    except OSError as e:
        return f"llvmlite cannot run JIT-compiled code here ({e})"
    from arrayjit_backend_c.cpu import llvm_jit

    try:
        with llvm_jit.LLVM_LOCK:
            target = llvm_jit.host_target()
            engine = llvm_jit.load_object(
                llvm_jit.compile_object(PROBE_IR, "aj_probe", target), target
            )
            address = engine.get_function_address("aj_probe")
            cell = ctypes.c_int32(41)
            result = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.POINTER(ctypes.c_int32))(address)(
                ctypes.byref(cell)
            )
            llvm_jit.close_engine(engine)
    except Exception as e:
        return (
            f"llvmlite {llvmlite.__version__} cannot compile arrayjit's LLVM IR "
            f"(needs llvmlite>=0.45): {str(e).splitlines()[0]}"
        )
    if result != 42 or cell.value != 42:
        return f"llvmlite {llvmlite.__version__} miscompiled the probe module ({result})"
    return None


def _make_llvm() -> CpuCompiler:
    # Imported on use: loading LLVM costs time that users of cc alone should not pay.
    from arrayjit_backend_c.llvm.compiler import LlvmCompiler

    return LlvmCompiler()


cc_entry = no_device_entry(
    "cc",
    CcCompiler,
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

__all__ = ["CcCompiler", "__version__", "cc_entry", "llvm_entry"]
