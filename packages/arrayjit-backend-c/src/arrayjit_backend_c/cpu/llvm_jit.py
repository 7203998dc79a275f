"""llvmlite's in-process JIT, as this process uses it: the lock over LLVM's global context, the
host target (described once), compiling LLVM IR to object code for it, and loading object code
into an MCJIT execution engine.

Both the native crew (:mod:`arrayjit_backend_c.cpu.crew`, whose module every CPU backend runs)
and the ``llvm`` compiler (:mod:`arrayjit_backend_c.llvm.compiler`) build on it; it imports
neither.
"""

from __future__ import annotations

import functools
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

import llvmlite
import llvmlite.binding as llvm

from arrayjit_backends.impl.compile_cache import cache_key
from arrayjit_tnode import CompileError

OPT_LEVEL = 3
# Static relocations and the large code model (llvmlite's "jitdefault" on 64-bit hosts):
# absolute 64-bit addresses, since the JIT's sections and the C math library may lie more than
# 2 GiB apart, out of reach of the small model's 32-bit relative addresses.
RELOC = "static"
CODE_MODEL = "jitdefault"

LLVM_LOCK = threading.RLock()
"""Serializes use of llvmlite's global LLVM context (initializing the native target, parsing,
optimizing, loading, disposing an engine's modules), which is not thread-safe. Modules live in
that context, which is never disposed: per-backend contexts could be garbage-collected before
the execution engines whose modules they hold. Reentrant, because the garbage collector may
dispose an engine on a thread that holds it."""


def close_engine(engine: llvm.ExecutionEngine) -> None:
    """Dispose of ``engine`` (and the code it holds) under :data:`LLVM_LOCK`."""
    with LLVM_LOCK:
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


def host_target() -> HostTarget:
    """The host, described once per process (initializing LLVM's native target the first
    time); safe to call from several threads at once."""
    with LLVM_LOCK:  # the first call initializes LLVM: once, on one thread
        return _describe_host()


@functools.cache
def _describe_host() -> HostTarget:
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
    :data:`LLVM_LOCK`.

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


_BUNDLE = b"AJOBJS1\0"
_OBJECT_MAGICS = (b"\x7fELF", b"\xcf\xfa\xed\xfe", b"\xca\xfe\xba\xbe")


def bundle(objects: list[bytes]) -> bytes:
    """Several objects as one artifact (the compile units of one routine, cached as one entry
    so that a warm cache loads them at once): a magic, the count, each length, then each."""
    head = _BUNDLE + len(objects).to_bytes(8, "little")
    return head + b"".join(len(o).to_bytes(8, "little") for o in objects) + b"".join(objects)


def unbundle(data: bytes) -> list[bytes]:
    """The objects of :func:`bundle`'s artifact, or ``[data]`` for a single object.

    Raises:
        ValueError: the bundle is truncated, or an object in it is not object code.
    """
    if not data.startswith(_BUNDLE):
        return [data]
    at = len(_BUNDLE)
    count = int.from_bytes(data[at : at + 8], "little")
    lengths = [
        int.from_bytes(data[at + 8 * (k + 1) : at + 8 * (k + 2)], "little") for k in range(count)
    ]
    at += 8 * (count + 1)
    if at + sum(lengths) != len(data):
        raise ValueError(f"a bundle of {count} objects of {len(data)} bytes is truncated")
    objects = []
    for n in lengths:
        objects.append(data[at : at + n])
        at += n
    if not all(is_object(o) for o in objects):
        raise ValueError("a bundled object is not object code")
    return objects


def is_object(data: bytes) -> bool:
    """Whether ``data`` starts like object code of a platform we run on (ELF or Mach-O)."""
    return data.startswith(_OBJECT_MAGICS)


def load_object(data: bytes, target: HostTarget) -> llvm.ExecutionEngine:
    """An execution engine holding the object code ``data`` (one object, or a :func:`bundle`
    of several, whose symbols resolve between them), relocated and ready to run. The caller
    holds :data:`LLVM_LOCK`, and keeps the engine alive as long as any of its functions may be
    called (a collected engine frees its code).

    Raises:
        ValueError: a bundle that is truncated or holds something else than object code.
    """
    objects = unbundle(data)
    machine = target.machine()
    empty = llvm.parse_assembly("")
    empty.triple = machine.triple
    engine = llvm.create_mcjit_compiler(empty, machine)
    for obj in objects:
        engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
    engine.finalize_object()
    return engine


__all__ = [
    "CODE_MODEL",
    "LLVM_LOCK",
    "OPT_LEVEL",
    "RELOC",
    "HostTarget",
    "bundle",
    "close_engine",
    "compile_object",
    "host_target",
    "is_object",
    "llvm_version",
    "load_object",
    "object_key",
    "optimize",
    "unbundle",
]
