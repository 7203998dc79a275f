"""The ``llvm`` compiler: LLVM IR optimized for the host CPU and JIT-compiled in process by
llvmlite; no C compiler needed.

``compile`` generates the routine's module (:mod:`arrayjit_backend_c.llvm_renderer`), then gets its
object code from the shared compile cache or builds it (parse, verify, the ``O3`` pipeline with
the loop and SLP vectorizers for the host CPU and its features, code generation) and stores it;
either way the object is loaded into an MCJIT execution engine of its own, so a warm cache runs
neither the optimizer nor code generation. Functions are called through ctypes (argument types
set once per kernel; ctypes releases the GIL). Parallel segments (large top-level loops writing
disjoint cells or reducing into one cell, see
:func:`arrayjit_backend_c.llvm_segments.split_segments`) are split into chunks (:func:`chunks`)
that the calling thread and the compiler's :class:`~arrayjit_backend_c.crew.Crew` of helper
threads run.
"""

from __future__ import annotations

import ctypes
import functools
import tempfile
import threading
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import llvmlite
import llvmlite.binding as llvm
import numpy as np

from arrayjit_backend_c.crew import Crew
from arrayjit_backend_c.llvm_matmul import buffer_bytes
from arrayjit_backend_c.llvm_renderer import LlvmGen, LlvmKernel
from arrayjit_backend_c.llvm_segments import Segment
from arrayjit_backend_c.work import is_short
from arrayjit_backends import settings
from arrayjit_backends.backend_impl import (
    CpuCompiler,
    GetMergeView,
    NativeArgs,
    NodeViews,
    Run,
    kernel_name,
    native_argtypes,
)
from arrayjit_backends.compile_cache import CompileCache, cache_key
from arrayjit_backends.device_impl import ScratchAccount
from arrayjit_backends.kernel_plan import worth_threads
from arrayjit_backends.scheduler import thread_share
from arrayjit_ir.indexing import StaticSymbol
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


@dataclass
class LlvmCode:
    """A compiled routine: its generated module, the engine holding its machine code, and per
    segment its ctypes function and, for a parallel reduction, its combining function."""

    name: str
    kernel: LlvmKernel
    engine: Any
    functions: tuple[tuple[Any, Any], ...]
    short: bool = False
    """Short enough to run on the scheduling thread (:func:`~arrayjit_backend_c.work.is_short`)."""

    @property
    def source(self) -> str:
        """The generated LLVM IR (before optimization)."""
        return self.kernel.ir


CHUNKS_PER_WORKER = 4
"""A parallel loop is split into up to this many chunks per worker (each still worth a thread,
:func:`~arrayjit_backends.kernel_plan.worth_threads`): threads take chunks as they come free
(:class:`~arrayjit_backend_c.crew.Crew`), so one that starts late, or is descheduled by another
process, leaves less of the loop for the others to wait on."""


def chunks(seg: Segment, workers: int) -> list[tuple[int, int]]:
    """The ``(start, stop)`` ranges a parallel segment's loop is split into: as many as the
    loop is worth (:func:`~arrayjit_backends.kernel_plan.worth_threads`), at most
    :data:`CHUNKS_PER_WORKER` per worker (one per worker for a matmul, each chunk packing into
    a buffer of its own), sizes within one iteration."""
    assert seg.loop is not None
    lo, trip = seg.loop.from_, seg.loop.to_inclusive - seg.loop.from_ + 1
    most = workers * CHUNKS_PER_WORKER if workers > 1 else 1
    if seg.matmul is not None:  # chunks of row or column panels
        lo, trip, most = 0, seg.matmul.units, workers
    n = max(1, min(most, trip, worth_threads(seg.loop)))
    bounds = [lo + trip * k // n for k in range(n + 1)]
    return [(bounds[k], bounds[k + 1]) for k in range(n)]


class LlvmCompiler(CpuCompiler):
    """Generates LLVM IR, optimizes and JIT-compiles it with llvmlite (cached), calls it through
    ctypes."""

    name: ClassVar[str] = "llvm"
    supported_precs: ClassVar[frozenset[Prec]] = LlvmGen.supported_precs

    def __init__(self, workers: int | None = None) -> None:
        """``workers``: threads a parallel loop is split across (default: the CPU count)."""
        self.target = host_target()
        self.generator = LlvmGen(
            self.target.cpu, self.target.features, native_half="+f16c" in self.target.features
        )
        self.cache = CompileCache()
        self.workers = workers or settings.num_threads()
        self._lock = threading.Lock()
        self.crew = Crew(self.workers - 1)
        self.scratch_account = ScratchAccount()

    def _key(self, ir: str) -> str:
        return cache_key(
            source=ir,
            backend="llvm",
            renderer="llvm-ir",
            compiler=f"llvmlite {llvmlite.__version__}",
            compiler_version=f"LLVM {llvm_version()}",
            options={"opt": OPT_LEVEL, "reloc": RELOC, "codemodel": CODE_MODEL},
            device=f"{self.target.triple} {self.target.cpu} {self.target.features}",
        )

    def compile(self, optimized: Optimized) -> LlvmCode:
        fn_name = kernel_name(optimized.name)
        with self._lock:
            kernel = self.generator.generate(optimized, fn_name)
        key = self._key(kernel.ir)

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
                lambda: compile_object(kernel.ir, fn_name, self.target),
                load,
            )
        common = native_argtypes(kernel.params, extra_pointers=len(kernel.scratch))
        i64, ptr = ctypes.c_int64, ctypes.c_void_p

        def function(name: str, *extra: Any) -> Any:
            return ctypes.CFUNCTYPE(None, *common, *extra)(engine.get_function_address(name))

        functions = []
        for seg in kernel.segments:
            if seg.matmul is not None:
                functions.append((function(seg.name, i64, i64, ptr), None))
            elif seg.reduction is not None:
                fn = function(seg.name, i64, i64, ptr, i64)
                functions.append((fn, function(seg.combine_name, ptr, i64)))
            else:
                functions.append((function(seg.name, *([i64, i64] * seg.parallel)), None))
        code = LlvmCode(optimized.name, kernel, engine, tuple(functions), is_short(optimized))
        weakref.finalize(code, _close_engine, engine)
        return code

    def link(self, code: Any, buffers: NodeViews, merge_buffer: GetMergeView) -> Run:
        c: LlvmCode = code
        scratch: list[np.ndarray] = [
            np.zeros(tn.num_elems * tn.prec.byte_size, np.uint8) for tn in c.kernel.scratch
        ]
        args = NativeArgs(c.kernel.params, buffers, merge_buffer, [a.ctypes.data for a in scratch])
        # Per segment: the function, the extra arguments of each of its calls (None: one call
        # with none), and for a reduction its combining function with its extra arguments.
        steps: list[tuple[Any, list[tuple[Any, ...]] | None, Any, tuple[Any, ...]]] = []
        for (fn, combine), seg in zip(c.functions, c.kernel.segments, strict=True):
            if not seg.parallel:
                steps.append((fn, None, None, ()))
                continue
            ranges = chunks(seg, self.workers)
            if seg.matmul is not None:  # each chunk packs into a buffer of its own
                size = sum(buffer_bytes(seg.matmul))
                packing: list[tuple[Any, ...]] = []
                for start, stop in ranges:
                    buf = np.zeros(size + 64, np.uint8)
                    scratch.append(buf)
                    packing.append((start, stop, buf.ctypes.data + (-buf.ctypes.data) % 64))
                steps.append((fn, packing, None, ()))
                continue
            if seg.reduction is None:
                steps.append((fn, ranges, None, ()))
                continue
            partials = np.zeros(len(ranges), np.uint64)
            scratch.append(partials)
            at = partials.ctypes.data
            calls = [(start, stop, at, k) for k, (start, stop) in enumerate(ranges)]
            steps.append((fn, calls, combine, (at, len(ranges))))
        keep_alive = (list(buffers.values()), scratch, c)

        if args.fixed is not None and len(steps) == 1 and steps[0][1] is None:
            fn, fixed = steps[0][0], args.fixed

            def run(bindings: Mapping[StaticSymbol, int]) -> None:
                fn(*fixed)

        else:
            parallel = self.crew.run

            def run(bindings: Mapping[StaticSymbol, int]) -> None:
                values = args(bindings)
                for fn, calls, combine, fold in steps:
                    if calls is None:
                        fn(*values)
                    else:
                        parallel(fn, values, calls, thread_share())
                    if combine is not None:
                        combine(*values, *fold)

        run.keep_alive = keep_alive  # type: ignore[attr-defined]
        run.short = c.short  # type: ignore[attr-defined]
        self.scratch_account.hold(run, 0, sum(a.nbytes for a in scratch))  # freed with the run
        return run

    def scratch_bytes(self) -> int:
        return self.scratch_account.bytes(0)

    def finalize(self) -> None:
        """Stop the helper threads (the backend is finalized: nothing runs any more)."""
        self.crew.stop()

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "llvmlite": llvmlite.__version__,
            "llvm": llvm_version(),
            "cpu": self.target.cpu,
            "opt_level": OPT_LEVEL,
            "threads": self.workers,
        }
