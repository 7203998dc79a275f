"""The device form of a backend (OpenCL, CUDA), and the adapter that gives CPU compilers the same
form.

The generic :class:`~arrayjit_backends.backend.Backend` speaks only :class:`DeviceBackend`: device
memory addressed as ``(memory handle, byte offset)``, stream queues whose tasks enqueue work,
copies, compiling and linking. Contexts, slab packing, merge buffers, hosted nodes and every
cross-stream wait live in the generic layer, so every backend behaves the same.

A :class:`~arrayjit_backends.backend_impl.NoDeviceBackend` (a CPU compiler) becomes a
:class:`DeviceBackend` through :class:`CpuDevices`: one device whose memory is host memory, and
a scheduler (``sync_`` or ``multicore_``) whose tasks run the copies and procedures themselves.
"""

from __future__ import annotations

import abc
import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from arrayjit_backends.backend_impl import NoDeviceBackend, Run
from arrayjit_backends.scheduler import SCHEDULERS, Event, StreamQueue
from arrayjit_backends.slab import aligned_bytes, typed_view
from arrayjit_tnode import Prec, StreamError, UsageError

if TYPE_CHECKING:
    from arrayjit_ir.optimized import Optimized
    from arrayjit_tnode import Tnode

Mem = Any
"""A backend's handle of one allocation of device memory (a pool)."""

Buf = tuple[Any, int]
"""A buffer: a pool's memory handle and a byte offset into it."""

CONFIGS = ("only_devices_parallel", "for_parallel_copying", "most_parallel_streams")
"""Values of :class:`~arrayjit_backends.backend.Config`, as passed to
:meth:`DeviceBackend.suggested_num_streams`."""


class DeviceBackend(abc.ABC):
    """What a device backend implements (seed 002's ``Lowered_backend``).

    Every method that takes a ``queue`` is called from a task of that queue (see
    :meth:`new_queue`), so work it enqueues is ordered after everything scheduled on the
    stream before.
    """

    name: ClassVar[str]
    """Full backend name (``"opencl"``, ``"cuda"``, ``"multicore_cc"``)."""

    unified_memory: ClassVar[bool] = False
    """Whether device memory is host memory (CPU backends)."""

    # ---- devices ----

    @abc.abstractmethod
    def num_devices(self) -> int:
        """Number of devices (at least 1)."""

    @abc.abstractmethod
    def supported_precs(self, ordinal: int) -> frozenset[Prec]:
        """Precisions device ``ordinal`` computes with."""

    @abc.abstractmethod
    def suggested_num_streams(self, ordinal: int, config: str) -> int:
        """Streams that suit ``config`` (one of :data:`CONFIGS`) on device ``ordinal``."""

    def device_info(self, ordinal: int) -> dict[str, Any]:
        """Facts about a device for debug output."""
        return {"ordinal": ordinal}

    @abc.abstractmethod
    def new_queue(self, ordinal: int, name: str) -> StreamQueue:
        """The executor of a new stream of device ``ordinal``.

        For a device backend the queue's tasks run at once on the caller's thread and enqueue
        device work (see :class:`ImmediateQueue`); its events are the device's events, so
        :meth:`StreamQueue.wait_for` on another stream's event makes the device wait, not the
        host.
        """

    # ---- memory ----

    @abc.abstractmethod
    def alloc(self, ordinal: int, nbytes: int) -> Mem:
        """A zero-filled allocation of ``nbytes`` (at least 1) on device ``ordinal``."""

    def free(self, ordinal: int, mem: Mem) -> None:  # noqa: B027 (a no-op is a valid default)
        """Release an allocation (the default leaves it to garbage collection)."""

    @abc.abstractmethod
    def to_device(self, queue: StreamQueue, dst: Buf, src: np.ndarray) -> None:
        """Copy the C-contiguous host array ``src`` into ``dst``; ``src`` stays valid until the
        copy is done (the generic layer guarantees it)."""

    @abc.abstractmethod
    def to_host(self, queue: StreamQueue, dst: np.ndarray, src: Buf) -> None:
        """Copy ``dst.nbytes`` bytes of ``src`` into the C-contiguous host array ``dst``."""

    @abc.abstractmethod
    def copy(self, queue: StreamQueue, dst: Buf, src: Buf, nbytes: int, src_ordinal: int) -> None:
        """Copy ``nbytes`` from ``src`` (on device ``src_ordinal``, possibly another device)
        into ``dst`` (on ``queue``'s device)."""

    # ---- code ----

    @abc.abstractmethod
    def compile(self, optimized: Optimized) -> Any:
        """Compile one routine for every device; an opaque code object for :meth:`link`.

        Raises:
            CompileError: the generated code failed to compile.
        """

    def compile_batch(self, optimized: Sequence[Optimized]) -> list[Any]:
        """Compile several routines; the default compiles each on its own."""
        return [self.compile(o) for o in optimized]

    @abc.abstractmethod
    def link(
        self,
        code: Any,
        queue: StreamQueue,
        ordinal: int,
        buffers: Mapping[Tnode, Buf],
        merge_buffer: Callable[[], Buf | None],
        merge_node: Tnode | None,
    ) -> Run:
        """Bind a compiled routine to buffers of device ``ordinal`` and to ``queue``.

        ``buffers`` holds every node of ``optimized.context_nodes``; ``merge_buffer`` returns,
        when a run starts, where the stream's merge buffer is (or ``None``); it holds
        ``merge_node`` (the routine's ``optimized.merge_node``). The result is called from a
        task of ``queue`` with the static-index values.
        """

    def code_kind(self) -> str:
        """Which backends can link code this one compiles: backends with the same kind. By
        default only this backend itself (device programs belong to its driver context)."""
        return f"{self.name} (instance {id(self):#x})"

    def describe(self) -> dict[str, Any]:
        """Backend-specific facts for debug output."""
        return {"name": self.name}

    def source_of(self, code: Any) -> str | None:
        """The generated source of a compiled routine, for reading (debug output)."""
        source = getattr(code, "source", None)
        return source if isinstance(source, str) else None

    def finalize(self) -> None:  # noqa: B027 (nothing to release by default)
        """Release device resources once every stream is closed."""


class ImmediateQueue(StreamQueue):
    """A stream queue for device backends: tasks run at once on the caller's thread, and what
    they enqueue on the device keeps the stream's order.

    Subclasses provide the device side: :meth:`marker` (an event done once the device has run
    everything enqueued so far), :meth:`wait_device` (make the device wait for an event of the
    same backend) and :meth:`finish` (block until the device has run everything).
    """

    @abc.abstractmethod
    def marker(self) -> Event:
        """An event completed by the device after the work enqueued so far."""

    @abc.abstractmethod
    def wait_device(self, event: Event) -> bool:
        """Make later device work wait for ``event`` without blocking the host; False where
        ``event`` is not one of this backend's device events."""

    @abc.abstractmethod
    def finish(self) -> None:
        """Block until the device has run everything enqueued on this queue."""

    def schedule(self, task: Callable[[], None]) -> None:
        self._check()
        try:
            task()
        except BaseException as exc:
            self.error = exc
            raise StreamError(self.name, f"task failed: {exc!r}") from exc

    _last: Event | None = None

    def all_work(self) -> Event:
        self._check()
        self._last = self.marker()
        return self._last

    def wait_for(self, event: Event) -> None:
        self._check()
        try:
            if not event.is_done() and not self.wait_device(event):
                event.sync()
        except BaseException as exc:  # as a multicore stream does: the stream fails
            self.error = exc
            raise StreamError(self.name, f"the event it waited for failed: {exc!r}") from exc

    def await_idle(self) -> None:
        self._check()
        try:
            self.finish()
        except BaseException as exc:
            self.error = exc
            raise StreamError(self.name, f"device work failed: {exc!r}") from exc

    def is_idle(self) -> bool:
        # The generic layer takes an ``all_work`` event after everything it schedules.
        return self._last is None or self._last.is_done()


class CpuDevices(DeviceBackend):
    """A CPU compiler seen as a device backend: one device whose memory is host memory, and a
    scheduler (``sync`` or ``multicore``) whose tasks do the copies and runs themselves."""

    unified_memory: ClassVar[bool] = True

    def __init__(self, name: str, scheduler: str, compiler: NoDeviceBackend) -> None:
        if scheduler not in SCHEDULERS:
            raise UsageError(
                f"unknown scheduler {scheduler!r} for backend {name}; valid: {sorted(SCHEDULERS)}"
            )
        self.name = name  # type: ignore[misc]
        self.scheduler = scheduler
        self.compiler = compiler

    def num_devices(self) -> int:
        return 1

    def supported_precs(self, ordinal: int) -> frozenset[Prec]:
        return frozenset(self.compiler.supported_precs)

    def suggested_num_streams(self, ordinal: int, config: str) -> int:
        if self.scheduler == "sync" or config == "only_devices_parallel":
            return 1
        if config == "for_parallel_copying":
            return 2
        return max(1, os.cpu_count() or 1)

    def device_info(self, ordinal: int) -> dict[str, Any]:
        return {"ordinal": ordinal, "kind": "host CPU", "cpus": os.cpu_count()}

    def new_queue(self, ordinal: int, name: str) -> StreamQueue:
        return SCHEDULERS[self.scheduler](name)

    def alloc(self, ordinal: int, nbytes: int) -> np.ndarray:
        return aligned_bytes(max(nbytes, 1))

    def to_device(self, queue: StreamQueue, dst: Buf, src: np.ndarray) -> None:
        mem, off = dst
        mem[off : off + src.nbytes] = src.reshape(-1).view(np.uint8)

    def to_host(self, queue: StreamQueue, dst: np.ndarray, src: Buf) -> None:
        mem, off = src
        dst.reshape(-1).view(np.uint8)[...] = mem[off : off + dst.nbytes]

    def copy(self, queue: StreamQueue, dst: Buf, src: Buf, nbytes: int, src_ordinal: int) -> None:
        (dmem, doff), (smem, soff) = dst, src
        dmem[doff : doff + nbytes] = smem[soff : soff + nbytes]

    def compile(self, optimized: Optimized) -> Any:
        return self.compiler.compile(optimized)

    def compile_batch(self, optimized: Sequence[Optimized]) -> list[Any]:
        return self.compiler.compile_batch(optimized)

    def link(
        self,
        code: Any,
        queue: StreamQueue,
        ordinal: int,
        buffers: Mapping[Tnode, Buf],
        merge_buffer: Callable[[], Buf | None],
        merge_node: Tnode | None,
    ) -> Run:
        views = {tn: typed_view(mem, off, tn) for tn, (mem, off) in buffers.items()}

        def merge_view() -> np.ndarray | None:
            where = merge_buffer()
            if where is None or merge_node is None:
                return None
            return typed_view(where[0], where[1], merge_node)

        return self.compiler.link(code, views, merge_view)

    def code_kind(self) -> str:
        # Native CPU code runs on host memory under any scheduler: cc code links into any cc
        # backend, never into llvm or interp.
        return self.compiler.name

    def finalize(self) -> None:
        self.compiler.finalize()

    def describe(self) -> dict[str, Any]:
        return {"scheduler": self.scheduler, **self.compiler.describe()}


__all__ = ["CONFIGS", "Buf", "CpuDevices", "DeviceBackend", "ImmediateQueue", "Mem"]
