"""What backend authors implement (the implementation-facing layer).

Two forms exist (ARCHITECTURE.md §4.1):

* :class:`CpuCompiler` (the seeds' ``Lowered_no_device_backend``) — a CPU compiler whose
  procedures run on host memory, synchronously, on the calling thread. A scheduler
  (:mod:`arrayjit_backends.runtime.schedulers`) adds devices, streams and events, and the generic
  :class:`~arrayjit_backends.backend.Backend` adds contexts, buffers and synchronization.
  ``cc``, ``llvm`` and the reference ``interp`` backend use it.
* the device form (for OpenCL and CUDA) — see :mod:`arrayjit_backends.impl.device`.

Every backend names its kernels with :func:`kernel_name`. Compilers whose kernels are native
functions called through ctypes (``cc``, ``llvm``) share :func:`native_argtypes`,
:class:`NativeArgs` and :meth:`CpuCompiler.load_or_build`: the argument order every C-like
renderer declares (buffers, the merge buffer, extra pointers, static symbols) is written here
once.
"""

from __future__ import annotations

import abc
import ctypes
import hashlib
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import numpy as np

from arrayjit_tnode import CompileError, Prec, precision

if TYPE_CHECKING:
    from arrayjit_backends.codegen.kernel_plan import KernelParams
    from arrayjit_backends.impl.compile_cache import CompileCache
    from arrayjit_backends.impl.stream_queue import Bell
    from arrayjit_ir.indexing import StaticSymbol
    from arrayjit_ir.optimized import Optimized
    from arrayjit_tnode import Tnode

T = TypeVar("T")

Run = Callable[[Mapping["StaticSymbol", int]], None]
"""A linked procedure: ``run(bindings)`` executes it once, synchronously, on the calling thread.

``bindings`` maps each static symbol of the procedure to its value for this run."""

NodeViews = Mapping["Tnode", np.ndarray]
"""What :meth:`CpuCompiler.link` binds a routine to: a typed numpy view per node."""

GetMergeView = Callable[[], "np.ndarray | None"]
"""Returns, when a routine runs, a typed view of its stream's merge buffer, or ``None``."""


def kernel_name(routine: str) -> str:
    """The symbol of a routine's kernel in generated code: ``aj_`` and the routine's name with
    every character other than an ASCII letter or digit replaced by ``_`` (C, OpenCL C, CUDA
    and LLVM identifiers all accept it; the prefix keeps it clear of the C library's names).
    Backends that emit several kernels per routine append ``_0``, ``_1``... to it.

    A name longer than :data:`KERNEL_NAME_MAX` is cut there, ending in a digest of the whole
    name (so that long names stay distinct): a 300-character routine name made file names of
    cc's build folder too long and PoCL's kernel link fail."""
    name = "aj_" + "".join(c if c.isascii() and c.isalnum() else "_" for c in routine)
    return shortened(name, KERNEL_NAME_MAX, routine)


def shortened(name: str, limit: int, whole: str) -> str:
    """``name`` when it has at most ``limit`` characters; else its start and ``_`` and a digest
    of ``whole`` (the text ``name`` was made from), ``limit`` characters in all, so that
    different long texts keep different names."""
    if len(name) <= limit:
        return name
    digest = hashlib.sha256(whole.encode()).hexdigest()[:12]
    return f"{name[: limit - len(digest) - 1]}_{digest}"


KERNEL_NAME_MAX = 64
"""The longest kernel symbol :func:`kernel_name` makes (before per-kernel suffixes)."""


class CpuCompiler(abc.ABC):
    """A CPU compiler: optimized low-level code in, host procedures out (seed 002's
    ``Lowered_no_device_backend``).

    Implementations must be usable from several threads at once for *running* linked
    procedures (each stream of a multicore scheduler runs on its own worker thread); compiling
    and linking happen on the caller's thread.
    """

    name: ClassVar[str]
    """Base name of the backend, e.g. ``"cc"``; schedulers prefix it (``"multicore_cc"``)."""

    supported_precs: ClassVar[frozenset[Prec]] = frozenset(precision.ALL)
    """Precisions whose nodes this backend can compute with."""

    @abc.abstractmethod
    def compile(self, optimized: Optimized) -> Any:
        """Compile one routine; returns an opaque code object for :meth:`link`.

        Raises:
            CompileError: the generated code failed to compile (with the compiler's output and
                the path of the kept source).
        """

    def new_bell(self) -> Bell | None:
        """How the worker thread of a ``multicore_`` stream of this compiler's backend sleeps
        (:class:`~arrayjit_backends.impl.stream_queue.Bell`); None: the scheduler's default, a
        :class:`~arrayjit_backends.runtime.schedulers.LockBell`."""
        return None

    def compile_batch(self, optimized: Sequence[Optimized]) -> list[Any]:
        """Compile several routines, possibly into one artifact; one code object each.

        The default compiles each routine on its own."""
        return [self.compile(o) for o in optimized]

    @abc.abstractmethod
    def link(self, code: Any, buffers: NodeViews, merge_buffer: GetMergeView) -> Run:
        """Bind a compiled routine to memory.

        Args:
            code: a result of :meth:`compile`.
            buffers: for every node of ``optimized.context_nodes``, a typed numpy view into slab
                memory (dtype ``tn.prec.numpy_dtype``, shape ``tn.prec.host_shape(tn.dims)``,
                C-contiguous). The views stay valid as long as the returned ``Run`` lives.
            merge_buffer: returns, when the routine runs, a typed view of the stream's merge
                buffer (holding ``optimized.merge_node``), or ``None`` if it holds nothing.

        Returns:
            ``run(bindings)``. It does no per-call work beyond reading the bindings and
            calling the native procedure.
        """

    def scratch_bytes(self) -> int:
        """Bytes of memory the compiler's linked procedures hold outside the buffers they were
        given (scratch arrays allocated at link); ``get_used_memory`` adds it. 0 by
        default."""
        return 0

    def describe(self) -> dict[str, Any]:
        """Backend-specific facts for debug output (compiler, version, flags...)."""
        return {"name": self.name}

    def finalize(self) -> None:  # noqa: B027 (nothing to release by default)
        """Release what the compiler holds (helper threads...) once every stream is closed."""

    def load_or_build(
        self,
        cache: CompileCache,
        key: str,
        routine: str,
        build: Callable[[], bytes],
        load: Callable[[bytes, bool], T],
    ) -> T:
        """The loaded artifact of ``key`` from ``cache``, or ``build()``'s, loaded and cached
        (:meth:`~arrayjit_backends.impl.compile_cache.CompileCache.load_or_build`: a cached entry
        that does not load is discarded and rebuilt).

        Raises:
            CompileError: ``build`` failed, or a fresh artifact of ``routine`` does not load
                (``load`` raised ``OSError`` or ``ValueError``).
        """
        try:
            return cache.load_or_build(key, build, load)
        except (OSError, ValueError) as exc:  # a fresh build that does not load
            raise CompileError(
                f"{self.name}: the library built for routine {routine} does not load: {exc}",
                output=str(exc),
            ) from exc


def native_argtypes(params: KernelParams, extra_pointers: int = 0) -> list[Any]:
    """The ctypes argument types of a native kernel with ``params``: a pointer per buffer, one
    for the merge buffer when the kernel reads it, ``extra_pointers`` more (a compiler's
    scratch), then an ``int64`` per static symbol."""
    pointers = len(params.buffers) + (params.merge_node is not None) + extra_pointers
    return [ctypes.c_void_p] * pointers + [ctypes.c_int64] * len(params.static_symbols)


class NativeArgs:
    """The arguments of one linked native kernel, in :func:`native_argtypes`' order.

    The buffer and extra addresses are fixed at link; the merge buffer's address (``None`` when
    the stream's merge buffer holds nothing) and the static symbols' values are read at each
    run. :attr:`fixed` is the whole argument tuple when nothing varies, so the run can skip the
    per-call assembly."""

    def __init__(
        self,
        params: KernelParams,
        buffers: NodeViews,
        merge_buffer: GetMergeView,
        extra: Sequence[int] = (),
    ) -> None:
        self.pointers = [buffers[tn].ctypes.data for tn in params.buffers]
        self.extra = list(extra)
        self.symbols = params.static_symbols
        self.merge_buffer = merge_buffer if params.merge_node is not None else None
        self.fixed: tuple[Any, ...] | None = (
            (*self.pointers, *self.extra)
            if self.merge_buffer is None and not self.symbols
            else None
        )

    def __call__(self, bindings: Mapping[StaticSymbol, int]) -> list[Any]:
        """The argument list of one run with ``bindings``."""
        args: list[Any] = list(self.pointers)
        if self.merge_buffer is not None:
            mb = self.merge_buffer()
            args.append(mb.ctypes.data if mb is not None else None)
        args += self.extra
        args += [bindings[s] for s in self.symbols]
        return args
