"""The ``llvm`` compiler: LLVM IR optimized for the host CPU and JIT-compiled in process by
llvmlite; no C compiler needed.

``compile`` generates the routine's module (:mod:`arrayjit_backend_c.llvm.renderer`), then gets its
object code from the shared compile cache or builds it (parse, verify, the ``O3`` pipeline with
the loop and SLP vectorizers for the host CPU and its features, code generation) and stores it;
either way the object is loaded into an MCJIT execution engine of its own, so a warm cache runs
neither the optimizer nor code generation. Functions are called through ctypes (argument types
set once per kernel; ctypes releases the GIL). Parallel segments run on the compiler's crew of
helper threads (:mod:`arrayjit_backend_c.cpu.segments`).
"""

from __future__ import annotations

import ctypes
import functools
import tempfile
import threading
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import llvmlite
import llvmlite.binding as llvm

from arrayjit_backend_c.cpu.segments import SegmentedCode, SegmentedCompiler
from arrayjit_backend_c.llvm.renderer import LlvmGen
from arrayjit_backends.impl.compile_cache import CompileCache, cache_key
from arrayjit_backends.impl.cpu_compiler import (
    kernel_name,
)
from arrayjit_ir.optimized import Optimized
from arrayjit_tnode import CompileError, Prec

OPT_LEVEL = 3
# Static relocations and the large code model (llvmlite's "jitdefault" on 64-bit hosts):
# absolute 64-bit addresses, since the JIT's sections and the C math library may lie more than
# 2 GiB apart, out of reach of the small model's 32-bit relative addresses.
RELOC = "static"
CODE_MODEL = "jitdefault"

_LLVM_LOCK = threading.RLock()
"""Serializes use of llvmlite's global LLVM context (parsing, optimizing, loading, disposing an
engine's modules), which is not thread-safe. Modules live in that context, which is never
disposed: per-backend contexts could be garbage-collected before the execution engines whose
modules they hold. Reentrant, because the garbage collector may dispose an engine on a thread
that holds it."""


def _close_engine(engine: llvm.ExecutionEngine) -> None:
    with _LLVM_LOCK:
        engine.close()


@dataclass(frozen=True)
class HostTarget:
    """The host's triple, CPU name and CPU features (as LLVM reports them)."""

    triple: str
    cpu: str
    features: str

    def machine(self) -> llvm.TargetMachine:
        """A fresh target machine for the host (an execution engine takes one over)."""
        return llvm.Target.from_triple(self.triple).create_target_machine(
            cpu=self.cpu,
            features=self.features,
            opt=OPT_LEVEL,
            reloc=RELOC,
            codemodel=CODE_MODEL,
            jit=True,
        )


@functools.cache
def host_target() -> HostTarget:
    """Initialize LLVM's native target (once) and describe the host."""
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    for libm in ("libm.so.6", "libm.dylib"):
        # The math functions the generated code calls (expf, powf...) are looked up in the
        # process; make sure the C math library is part of it.
        try:
            llvm.load_library_permanently(libm)
            break
        except RuntimeError:
            continue
    return HostTarget(
        llvm.get_process_triple(), llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten()
    )


def llvm_version() -> str:
    """The version of the LLVM inside llvmlite, e.g. ``"20.1.8"``."""
    return ".".join(str(x) for x in llvm.llvm_version_info)


def optimize(module: llvm.ModuleRef, machine: llvm.TargetMachine) -> None:
    """Run the ``O3`` pipeline (loop and SLP vectorizers on) over ``module`` for ``machine``."""
    pto = llvm.create_pipeline_tuning_options(speed_level=OPT_LEVEL)
    pto.loop_vectorization = True
    pto.slp_vectorization = True
    pto.loop_unrolling = True
    builder = llvm.create_pass_builder(machine, pto)
    builder.getModulePassManager().run(module, builder)


def compile_object(ir: str, name: str, target: HostTarget) -> bytes:
    """Parse, verify, optimize and compile LLVM IR; returns the object code. The caller holds
    :data:`_LLVM_LOCK`.

    Raises:
        CompileError: LLVM rejected the IR; the message has LLVM's diagnostic and the path of
            the kept IR.
    """
    try:
        module = llvm.parse_assembly(ir)
        module.verify()
    except RuntimeError as e:
        workdir = Path(tempfile.mkdtemp(prefix=f"arrayjit-{name}-"))
        kept = workdir / f"{name}.ll"
        kept.write_text(ir)
        raise CompileError(
            f"llvm failed to compile routine {name}: LLVM {llvm_version()} rejected its IR",
            output=str(e),
            source_path=str(kept),
        ) from e
    machine = target.machine()
    module.triple = machine.triple
    module.data_layout = str(machine.target_data)
    optimize(module, machine)
    return bytes(machine.emit_object(module))


def object_key(ir: str, target: HostTarget, backend: str = "llvm") -> str:
    """The compile-cache key of the object code of ``ir`` for ``target``."""
    return cache_key(
        source=ir,
        backend=backend,
        renderer="llvm-ir",
        compiler=f"llvmlite {llvmlite.__version__}",
        compiler_version=f"LLVM {llvm_version()}",
        options={"opt": OPT_LEVEL, "reloc": RELOC, "codemodel": CODE_MODEL},
        device=f"{target.triple} {target.cpu} {target.features}",
    )


def load_object(data: bytes, target: HostTarget) -> llvm.ExecutionEngine:
    """An execution engine holding the object code ``data``, relocated and ready to run. The
    caller holds :data:`_LLVM_LOCK`."""
    machine = target.machine()
    empty = llvm.parse_assembly("")
    empty.triple = machine.triple
    engine = llvm.create_mcjit_compiler(empty, machine)
    engine.add_object_file(llvm.ObjectFileRef.from_data(data))
    engine.finalize_object()
    return engine


class LlvmCompiler(SegmentedCompiler):
    """Generates LLVM IR, optimizes and JIT-compiles it with llvmlite (cached), calls it through
    ctypes."""

    name: ClassVar[str] = "llvm"
    supported_precs: ClassVar[frozenset[Prec]] = LlvmGen.supported_precs

    def __init__(self, workers: int | None = None) -> None:
        """``workers``: threads a parallel loop is split across (default: the CPU count)."""
        super().__init__(workers)
        self.target = host_target()
        self.generator = LlvmGen(
            self.target.cpu, self.target.features, native_half="+f16c" in self.target.features
        )
        self.cache = CompileCache()
        self._lock = threading.Lock()

    def compile(self, optimized: Optimized) -> SegmentedCode:
        fn_name = kernel_name(optimized.name)
        with self._lock:
            kernel = self.generator.generate(optimized, fn_name)
        key = object_key(kernel.source, self.target)

        def load(data: bytes, from_cache: bool) -> llvm.ExecutionEngine:
            try:
                return load_object(data, self.target)
            except RuntimeError as exc:  # llvmlite's error for an object it cannot load
                raise ValueError(str(exc)) from exc

        with _LLVM_LOCK:
            engine = self.load_or_build(
                self.cache,
                key,
                optimized.name,
                lambda: compile_object(kernel.source, fn_name, self.target),
                load,
            )

        def function(name: str, argtypes: list[Any]) -> Any:
            return ctypes.CFUNCTYPE(None, *argtypes)(engine.get_function_address(name))

        code = self.code(optimized, kernel, function, engine)
        weakref.finalize(code, _close_engine, engine)
        return code

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "llvmlite": llvmlite.__version__,
            "llvm": llvm_version(),
            "cpu": self.target.cpu,
            "opt_level": OPT_LEVEL,
            "threads": self.workers,
        }
