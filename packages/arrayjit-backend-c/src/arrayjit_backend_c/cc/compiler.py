"""The ``cc`` compiler: C source (:mod:`arrayjit_backend_c.cc.renderer`) compiled by the system
C compiler (:mod:`arrayjit_backend_c.cc.toolchain`) into a shared object, cached, loaded and called
through ctypes; parallel segments run on the compiler's crew of helper threads
(:mod:`arrayjit_backend_c.cpu.segments`)."""

from __future__ import annotations

import atexit
import ctypes
import hashlib
import itertools
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any, ClassVar

from arrayjit_backend_c.cc import toolchain
from arrayjit_backend_c.cc.renderer import CcSyntax
from arrayjit_backend_c.cpu.segments import SegmentedCode, SegmentedCompiler
from arrayjit_backend_c.cpu.units import SplitRoutine, library_objects, split_c, unit_objects
from arrayjit_backends.codegen.c_syntax import CSyntax
from arrayjit_backends.impl.compile_cache import CompileCache, cache_key
from arrayjit_backends.impl.cpu_compiler import kernel_name
from arrayjit_ir.optimized import Optimized
from arrayjit_tnode import Prec

_lib_dir: Path | None = None
_lib_names = itertools.count()
_lib_lock = threading.Lock()
_loaded: dict[tuple[str, bytes], ctypes.CDLL] = {}
"""Libraries loaded by this process, by key and SHA-256 of their bytes (ctypes never unloads
one, so loading the same artifact again would only map another copy)."""


def load_library(data: bytes, key: str) -> ctypes.CDLL:
    """Load a verified shared object. ctypes loads from a path, so the bytes are written to a
    fresh file in a private folder of this process, loaded, and unlinked at once: the code
    that runs is exactly the verified artifact, whatever happens to the cache folder, and
    nothing is written there (``ARRAYJIT_NO_CACHE=1`` writes nothing at all). Each file name is
    new, so the dynamic loader never returns an older library of the same name; an artifact
    already loaded by this process (same key, same bytes) is reused.

    Raises:
        ValueError: ``data`` is not a shared object.
        OSError: the loader rejected it.
    """
    global _lib_dir
    if not toolchain.is_shared_object(data):
        raise ValueError(f"not a shared object ({len(data)} bytes starting {data[:8]!r})")
    ident = (key, hashlib.sha256(data).digest())
    with _lib_lock:
        lib = _loaded.get(ident)
        if lib is not None:  # these very bytes are loaded already: the loader never unloads
            return lib
        if _lib_dir is None:
            _lib_dir = Path(tempfile.mkdtemp(prefix="arrayjit-lib-"))
            atexit.register(shutil.rmtree, _lib_dir, True)
        path = _lib_dir / f"{key[:16]}-{next(_lib_names)}.so"
    path.write_bytes(data)
    try:
        lib = ctypes.CDLL(str(path))
    finally:
        path.unlink(missing_ok=True)
    with _lib_lock:
        return _loaded.setdefault(ident, lib)


class CcCompiler(SegmentedCompiler):
    """Renders C, compiles it with the system C compiler (cached), calls it through ctypes."""

    name: ClassVar[str] = "cc"
    supported_precs: ClassVar[frozenset[Prec]] = CSyntax.supported_precs

    def __init__(self, workers: int | None = None) -> None:
        """``workers``: threads a parallel loop is split across (default: the CPU count)."""
        cc = toolchain.find_compiler()
        if cc is None:
            raise RuntimeError(toolchain.compiler_problem() or "no C compiler found")
        super().__init__(workers)
        self.cc = cc
        self.renderer = CcSyntax()
        self.cache = CompileCache()
        self._lock = threading.Lock()

    def compile(self, optimized: Optimized) -> SegmentedCode:
        fn_name = kernel_name(optimized.name)
        with self._lock:
            kernel = self.renderer.render_segments(optimized, fn_name)
        key = self.key(kernel.source, "c")
        split = split_c(kernel.source)

        def load(data: bytes, from_cache: bool) -> SegmentedCode:
            lib = load_library(data, key)

            def function(name: str, argtypes: list[Any]) -> Any:
                try:
                    fn = getattr(lib, split.symbols.get(name, name))
                except AttributeError as exc:
                    raise ValueError(f"the library has no function {name}") from exc
                fn.restype = None
                fn.argtypes = argtypes
                return fn

            return self.code(optimized, kernel, function, lib)

        return self.load_or_build(
            self.cache,
            key,
            optimized.name,
            lambda: self.build(split, fn_name),
            load,
        )

    def key(self, source: str, renderer: str, extra: tuple[str, ...] = ()) -> str:
        """The compile-cache key of ``source``: a routine (``renderer="c"``) or one of its
        units (``"c-unit"``, compiled with ``extra`` flags)."""
        return cache_key(
            source=source,
            backend="cc",
            renderer=renderer,
            compiler=self.cc,
            compiler_version=toolchain.compiler_version(self.cc),
            options=(*toolchain.flags(self.cc), *extra),
            device=toolchain.cpu_identity(),
        )

    def build(self, split: SplitRoutine, fn_name: str) -> bytes:
        """The shared object of a routine's compile units (:mod:`arrayjit_backend_c.cpu.
        units`) and its kernel library (built once per process): one unit is compiled to it at
        once; several are compiled to object code in parallel, each cached on its own (so an
        edit recompiles only the units it changed), and linked."""

        def key(unit: str) -> str:
            return self.key(unit, "c-unit", toolchain.UNIT_FLAGS)

        def build(unit: str, k: int) -> bytes:
            return toolchain.compile_object(self.cc, unit, f"{fn_name}_u{k}")

        check = toolchain.is_shared_object
        library = library_objects(split, self.cache, key, build, check)
        if len(split.units) == 1:
            return toolchain.compile_shared_object(self.cc, split.units[0], fn_name, library)
        objects = unit_objects(split.units, self.cache, key, build, check)
        return toolchain.link_shared_object(self.cc, [*library, *objects], fn_name)

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "compiler": self.cc,
            "version": toolchain.compiler_version(self.cc),
            "flags": toolchain.flags(self.cc),
            "threads": self.workers,
        }
