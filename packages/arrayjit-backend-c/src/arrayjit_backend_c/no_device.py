"""The ``cc`` backend: C source compiled by the system compiler, loaded with ctypes."""

from __future__ import annotations

import ctypes
import hashlib
import platform
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from arrayjit_backend_c import compiler
from arrayjit_backends.backend_impl import NoDeviceBackend, Run
from arrayjit_backends.c_syntax import CSyntax, KernelParams
from arrayjit_backends.compile_cache import CompileCache, cache_key
from arrayjit_ir.indexing import StaticSymbol
from arrayjit_ir.optimized import Optimized
from arrayjit_tnode import Prec, Tnode


class CcSyntax(CSyntax):
    """C for the system compiler: top-level loops writing disjoint cells, and reductions into
    one cell, run on all cores; reductions vectorize (reassociated, as OpenMP allows)."""

    parallel_pragma = "#pragma omp parallel for schedule(static)"
    reduction_pragma = "#pragma omp parallel for{simd} schedule(static) reduction({op}:{var})"
    simd_reduction_pragma = "#pragma omp simd reduction({op}:{var})"
    jam_factor = 4


@dataclass
class CcCode:
    """A compiled routine: the loaded library and its function."""

    name: str
    library: ctypes.CDLL
    function: Any
    params: KernelParams
    source: str


class CcBackend(NoDeviceBackend):
    """Renders C, compiles it with the system C compiler (cached), calls it through ctypes."""

    name: ClassVar[str] = "cc"
    supported_precs: ClassVar[frozenset[Prec]] = CSyntax.supported_precs

    def __init__(self) -> None:
        cc = compiler.find_compiler()
        if cc is None:
            raise RuntimeError("no C compiler found")
        self.cc = cc
        self.renderer = CcSyntax()
        self.cache = CompileCache()
        self._lock = threading.Lock()

    def compile(self, optimized: Optimized) -> CcCode:
        fn_name = "aj_" + "".join(c if c.isalnum() else "_" for c in optimized.name)
        source, params = self.renderer.render(optimized, fn_name)
        key = cache_key(
            source=source,
            backend="cc",
            renderer="c",
            compiler=self.cc,
            compiler_version=compiler.compiler_version(self.cc),
            options=compiler.flags(self.cc),
            device=platform.machine(),
        )
        data = self.cache.get_or_build(
            key, lambda: compiler.compile_shared_object(self.cc, source, fn_name)
        )
        lib_path = self._library_file(key, data)
        lib = ctypes.CDLL(str(lib_path))
        fn = getattr(lib, fn_name)
        fn.restype = None
        fn.argtypes = [ctypes.c_void_p] * (len(params.buffers) + (params.merge_node is not None))
        fn.argtypes += [ctypes.c_int64] * len(params.static_symbols)
        return CcCode(optimized.name, lib, fn, params, source)

    def _library_file(self, key: str, data: bytes) -> Path:
        # ctypes loads from a path: keep one file per artifact next to the cache.
        directory = self.cache.directory / "lib"
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{key}-{hashlib.sha256(data).hexdigest()[:8]}.so"
        if not path.exists():
            tmp = path.with_suffix(f".tmp{threading.get_ident()}")
            tmp.write_bytes(data)
            tmp.replace(path)
        return path

    def link(
        self,
        code: Any,
        buffers: Mapping[Tnode, np.ndarray],
        merge_buffer: Callable[[], np.ndarray | None],
    ) -> Run:
        c: CcCode = code
        ptrs = [buffers[tn].ctypes.data for tn in c.params.buffers]
        fn, symbols = c.function, c.params.static_symbols
        keep_alive = list(buffers.values())
        if c.params.merge_node is None and not symbols:
            args = tuple(ptrs)

            def run(bindings: Mapping[StaticSymbol, int]) -> None:
                fn(*args)

        else:
            has_merge = c.params.merge_node is not None

            def run(bindings: Mapping[StaticSymbol, int]) -> None:
                extra = []
                if has_merge:
                    mb = merge_buffer()
                    extra.append(mb.ctypes.data if mb is not None else None)
                fn(*ptrs, *extra, *(bindings[s] for s in symbols))

        run.keep_alive = (keep_alive, c)  # type: ignore[attr-defined]
        return run

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "compiler": self.cc,
            "version": compiler.compiler_version(self.cc),
            "flags": compiler.flags(self.cc),
        }
