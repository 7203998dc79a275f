"""What backend authors implement (the implementation-facing layer).

Two forms exist (ARCHITECTURE.md §4.1):

* :class:`NoDeviceBackend` — a CPU compiler whose procedures run on host memory, synchronously,
  on the calling thread. A scheduler (:mod:`arrayjit_backends.scheduler`) adds devices, streams
  and events, and the generic :class:`~arrayjit_backends.backend.Backend` adds contexts,
  buffers and synchronization. ``cc``, ``llvm`` and the reference ``interp`` backend use it.
* the device form (for OpenCL and CUDA) — see :mod:`arrayjit_backends.device_impl`.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from arrayjit_tnode import Prec, precision

if TYPE_CHECKING:
    from arrayjit_ir.indexing import StaticSymbol
    from arrayjit_ir.optimized import Optimized
    from arrayjit_tnode import Tnode

Run = Callable[[Mapping["StaticSymbol", int]], None]
"""A linked procedure: ``run(bindings)`` executes it once, synchronously, on the calling thread.

``bindings`` maps each static symbol of the procedure to its value for this run."""


class NoDeviceBackend(abc.ABC):
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

    def compile_batch(self, optimized: Sequence[Optimized]) -> list[Any]:
        """Compile several routines, possibly into one artifact; one code object each.

        The default compiles each routine on its own."""
        return [self.compile(o) for o in optimized]

    @abc.abstractmethod
    def link(
        self,
        code: Any,
        buffers: Mapping[Tnode, np.ndarray],
        merge_buffer: Callable[[], np.ndarray | None],
    ) -> Run:
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
