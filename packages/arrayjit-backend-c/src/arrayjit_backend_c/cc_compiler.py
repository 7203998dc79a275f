"""The ``cc`` compiler: C source (:mod:`arrayjit_backend_c.cc_renderer`) compiled by the system
C compiler (:mod:`arrayjit_backend_c.toolchain`) into a shared object, cached, loaded and called
through ctypes."""

from __future__ import annotations

import atexit
import ctypes
import hashlib
import itertools
import os
import shutil
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from arrayjit_backend_c import toolchain
from arrayjit_backend_c.cc_renderer import CcSyntax
from arrayjit_backend_c.work import is_short
from arrayjit_backends.backend_impl import (
    CpuCompiler,
    GetMergeView,
    NativeArgs,
    NodeViews,
    Run,
    kernel_name,
    native_argtypes,
)
from arrayjit_backends.c_syntax import CSyntax
from arrayjit_backends.compile_cache import CompileCache, cache_key
from arrayjit_backends.kernel_plan import KernelParams
from arrayjit_backends.scheduler import thread_share
from arrayjit_ir.indexing import StaticSymbol
from arrayjit_ir.optimized import Optimized
from arrayjit_tnode import Prec


@dataclass
class CcCode:
    """A compiled routine: the loaded library and its function."""

    name: str
    library: ctypes.CDLL
    function: Any
    params: KernelParams
    source: str
    short: bool = False
    """Short enough to run on the scheduling thread (:func:`~arrayjit_backend_c.work.is_short`)."""


_lib_dir: Path | None = None
_lib_names = itertools.count()
_lib_lock = threading.Lock()
_loaded: dict[tuple[str, bytes], ctypes.CDLL] = {}
"""Libraries loaded by this process, by key and SHA-256 of their bytes (ctypes never unloads
one, so loading the same artifact again would only map another copy)."""


WAIT_POLICY_VARIABLES = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME")
"""Variables by which a user chooses how idle OpenMP threads wait; with none of them set,
kernels get a passive wait policy (see :func:`_prefer_passive_wait`)."""

_passive_set = False
"""Whether this module set ``OMP_WAIT_POLICY`` and has not yet seen the runtime load."""


def _prefer_passive_wait() -> None:
    """Give the OpenMP runtime a passive wait policy (idle team threads sleep at once instead
    of spinning), unless the user chose one.

    OpenMP runtimes read ``OMP_WAIT_POLICY`` once, when they are loaded, so it is set in this
    process's environment at import, before the first kernel library pulls the runtime in, and
    removed again once one has (see :func:`load_library`), so that child processes and other
    libraries see the user's environment. Measured on a 2-core machine with another busy
    process, the default spinning made a 2^20 fused kernel called every 2 ms take 6-10 ms
    instead of 0.4-0.7 ms: the spinning threads use up their time slices, and the region's
    end waits for whichever was descheduled. A runtime already loaded by another library keeps
    its own policy.
    """
    global _passive_set
    if not any(v in os.environ for v in WAIT_POLICY_VARIABLES):
        os.environ["OMP_WAIT_POLICY"] = "passive"
        _passive_set = True


_prefer_passive_wait()


def _runtime_loaded(lib: ctypes.CDLL) -> None:
    """Once a library with the OpenMP runtime has loaded, the runtime has read its settings:
    the environment goes back to what the user had."""
    global _passive_set
    if _passive_set and omp_team_setter(lib) is not None:
        _passive_set = False
        if os.environ.get("OMP_WAIT_POLICY") == "passive":
            del os.environ["OMP_WAIT_POLICY"]


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
    _runtime_loaded(lib)
    with _lib_lock:
        return _loaded.setdefault(ident, lib)


_team = threading.local()
"""``size``: the OpenMP team size last set on this thread (``omp_set_num_threads`` sets the
calling thread's own value, so each stream's worker keeps its own)."""


def omp_team_setter(lib: ctypes.CDLL) -> Any:
    """The OpenMP runtime's ``omp_set_num_threads`` as the kernel library ``lib`` sees it (the
    runtime it was linked with), or None where the library has no OpenMP runtime."""
    try:
        fn = lib.omp_set_num_threads
    except AttributeError:
        return None
    fn.restype = None
    fn.argtypes = [ctypes.c_int]
    return fn


class CcCompiler(CpuCompiler):
    """Renders C, compiles it with the system C compiler (cached), calls it through ctypes."""

    name: ClassVar[str] = "cc"
    supported_precs: ClassVar[frozenset[Prec]] = CSyntax.supported_precs

    def __init__(self) -> None:
        cc = toolchain.find_compiler()
        if cc is None:
            raise RuntimeError("no C compiler found")
        self.cc = cc
        self.renderer = CcSyntax()
        self.cache = CompileCache()

    def compile(self, optimized: Optimized) -> CcCode:
        fn_name = kernel_name(optimized.name)
        source, params = self.renderer.render(optimized, fn_name)
        key = cache_key(
            source=source,
            backend="cc",
            renderer="c",
            compiler=self.cc,
            compiler_version=toolchain.compiler_version(self.cc),
            options=toolchain.flags(self.cc),
            device=toolchain.cpu_identity(),
        )
        argtypes = native_argtypes(params)

        def load(data: bytes, from_cache: bool) -> tuple[ctypes.CDLL, Any]:
            lib = load_library(data, key)
            try:
                fn = getattr(lib, fn_name)
            except AttributeError as exc:
                raise ValueError(f"the library has no function {fn_name}") from exc
            fn.restype = None
            fn.argtypes = argtypes
            return lib, fn

        lib, fn = self.load_or_build(
            self.cache,
            key,
            optimized.name,
            lambda: toolchain.compile_shared_object(self.cc, source, fn_name),
            load,
        )
        return CcCode(optimized.name, lib, fn, params, source, is_short(optimized))

    def link(self, code: Any, buffers: NodeViews, merge_buffer: GetMergeView) -> Run:
        c: CcCode = code
        fn = c.function
        args = NativeArgs(c.params, buffers, merge_buffer)
        set_team = omp_team_setter(c.library) if "#pragma omp parallel" in c.source else None
        if set_team is not None:
            # Kernels with a parallel region take their stream's share of the cores (see
            # ThreadBudget), set on the calling thread only when it changes.
            fixed_or_none = args.fixed

            def run(bindings: Mapping[StaticSymbol, int]) -> None:
                n = thread_share()
                if getattr(_team, "size", 0) != n:
                    set_team(n)
                    _team.size = n
                fn(*(fixed_or_none if fixed_or_none is not None else args(bindings)))

        elif args.fixed is not None:
            fixed = args.fixed

            def run(bindings: Mapping[StaticSymbol, int]) -> None:
                fn(*fixed)

        else:

            def run(bindings: Mapping[StaticSymbol, int]) -> None:
                fn(*args(bindings))

        run.keep_alive = (list(buffers.values()), c)  # type: ignore[attr-defined]
        run.short = c.short  # type: ignore[attr-defined]
        return run

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "compiler": self.cc,
            "version": toolchain.compiler_version(self.cc),
            "flags": toolchain.flags(self.cc),
        }
