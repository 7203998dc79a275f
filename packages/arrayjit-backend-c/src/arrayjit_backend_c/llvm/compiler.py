"""The ``llvm`` compiler: LLVM IR optimized for the host CPU and JIT-compiled in process by
llvmlite; no C compiler needed.

``compile`` generates the routine's module (:mod:`arrayjit_backend_c.llvm.renderer`), then gets its
object code from the shared compile cache or builds it (parse, verify, the ``O3`` pipeline with
the loop and SLP vectorizers for the host CPU and its features, code generation: the process's
JIT, :mod:`arrayjit_backend_c.cpu.llvm_jit`) and stores it;
either way the object is loaded into an MCJIT execution engine of its own, so a warm cache runs
neither the optimizer nor code generation. Functions are called through ctypes (argument types
set once per kernel; ctypes releases the GIL). Parallel segments run on the compiler's crew of
helper threads (:mod:`arrayjit_backend_c.cpu.segments`).
"""

from __future__ import annotations

import ctypes
import threading
import weakref
from typing import Any, ClassVar

import llvmlite
import llvmlite.binding as llvm

from arrayjit_backend_c.cpu.llvm_jit import (
    LLVM_LOCK,
    OPT_LEVEL,
    bundle,
    close_engine,
    compile_object,
    host_target,
    is_object,
    llvm_version,
    load_object,
    object_key,
)
from arrayjit_backend_c.cpu.segments import SegmentedCode, SegmentedCompiler
from arrayjit_backend_c.cpu.units import SplitRoutine, library_objects, split_llvm, unit_objects
from arrayjit_backend_c.llvm.renderer import LlvmGen
from arrayjit_backends.impl.compile_cache import CompileCache
from arrayjit_backends.impl.cpu_compiler import kernel_name
from arrayjit_ir.optimized import Optimized
from arrayjit_tnode import Prec


class LlvmCompiler(SegmentedCompiler):
    """Generates LLVM IR, optimizes and JIT-compiles it with llvmlite (cached), calls it through
    ctypes."""

    name: ClassVar[str] = "llvm"
    supported_precs: ClassVar[frozenset[Prec]] = LlvmGen.supported_precs

    def __init__(self, workers: int | None = None) -> None:
        """``workers``: threads a parallel loop is split across (default: the CPU count)."""
        super().__init__(workers)
        self.target = host_target()
        features = self.target.features.split(",")
        # x86 with FMA; AArch64 always fuses (its features do not say "+fma").
        fuses = "+fma" in features or self.target.triple.startswith(("aarch64", "arm64"))
        self.generator = LlvmGen(
            self.target.cpu,
            self.target.features,
            native_half="+f16c" in features,
            fused_mul_add=fuses,
        )
        self.cache = CompileCache()
        self._lock = threading.Lock()

    def compile(self, optimized: Optimized) -> SegmentedCode:
        fn_name = kernel_name(optimized.name)
        with self._lock:
            kernel = self.generator.generate(optimized, fn_name)
        key = object_key(kernel.source, self.target)
        split = split_llvm(kernel.source)

        def load(data: bytes, from_cache: bool) -> llvm.ExecutionEngine:
            try:
                return load_object(data, self.target)
            except RuntimeError as exc:  # llvmlite's error for an object it cannot load
                raise ValueError(str(exc)) from exc

        with LLVM_LOCK:
            engine = self.load_or_build(
                self.cache,
                key,
                optimized.name,
                lambda: self.build(split, fn_name),
                load,
            )

        def function(name: str, argtypes: list[Any]) -> Any:
            address = engine.get_function_address(split.symbols.get(name, name))
            return ctypes.CFUNCTYPE(None, *argtypes)(address)

        code = self.code(optimized, kernel, function, engine)
        weakref.finalize(code, close_engine, engine)
        return code

    def build(self, split: SplitRoutine, fn_name: str) -> bytes:
        """The object code of a routine's compile units (:mod:`arrayjit_backend_c.cpu.units`)
        and its kernel library (built once per process): one unit's object, or a
        :func:`~arrayjit_backend_c.cpu.llvm_jit.bundle` of each unit's, each cached on its own
        (so an edit recompiles only the units it changed). The caller holds
        :data:`~arrayjit_backend_c.cpu.llvm_jit.LLVM_LOCK` (LLVM's context is not thread-safe:
        the units compile one after another)."""

        def key(unit: str) -> str:
            return object_key(unit, self.target, "llvm-unit")

        def build(unit: str, k: int) -> bytes:
            return compile_object(unit, f"{fn_name}_u{k}", self.target)

        library = library_objects(split, self.cache, key, build, is_object)
        if len(split.units) == 1 and not library:
            return compile_object(split.units[0], fn_name, self.target)
        return bundle([*library, *unit_objects(split.units, self.cache, key, build, is_object, 1)])

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "llvmlite": llvmlite.__version__,
            "llvm": llvm_version(),
            "cpu": self.target.cpu,
            "opt_level": OPT_LEVEL,
            "threads": self.workers,
        }
