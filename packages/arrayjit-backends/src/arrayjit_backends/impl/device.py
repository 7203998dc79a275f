"""The device contract: what a device backend (OpenCL, CUDA) implements, and what the CPU
compilers are adapted to (:class:`~arrayjit_backends.runtime.cpu_devices.CpuDevices`).

The generic :class:`~arrayjit_backends.backend.Backend` speaks only :class:`DeviceBackend`:
devices and stream queues whose tasks enqueue work, plus three roles, each a base class:
:class:`DeviceMemory` (device memory addressed as ``(memory handle, byte offset)``, copies),
:class:`DeviceCompiler` (compiling) and :class:`DeviceLauncher` (linking compiled code into a
run that launches it). Contexts, slab packing, merge buffers, hosted nodes and every
cross-stream wait live in the generic layer, so every backend behaves the same.

A :class:`~arrayjit_backends.impl.cpu_compiler.CpuCompiler` becomes a :class:`DeviceBackend`
through :class:`~arrayjit_backends.runtime.cpu_devices.CpuDevices`: one device whose memory is
host memory, and a scheduler (``sync_`` or ``multicore_``) whose tasks run the copies and
procedures themselves.
"""

from __future__ import annotations

import abc
import platform
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from arrayjit_backends.impl.cpu_compiler import Run
from arrayjit_backends.impl.stream_queue import Event, StreamQueue
from arrayjit_tnode import Prec, StreamError

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


@dataclass(frozen=True)
class DeviceInfo:
    """What a device is and what kernels may use on it: seed 004's ``Device_info``.

    Read it as ``backend.get_device(k).info``. Limits a device does not have are 0 (a CPU
    backend has no work-group shared memory); limits unknown to a third-party backend that
    keeps :meth:`DeviceBackend.info`'s default are 0 too, so code that sizes launches from them
    must treat 0 as "no such resource".
    """

    name: str
    """The driver's name of the device (the CPU model for CPU backends)."""
    ordinal: int
    kind: str
    """``"cpu"``, ``"gpu"``, ``"accelerator"`` or ``"unknown"``."""
    unified_memory: bool
    """Whether the device shares the host's memory (as its driver says; which backends run
    routines on host arrays directly is ``Capabilities.use_host_memory``)."""
    supported_precs: frozenset[Prec]
    compute_units: int
    """Cores (CPU), compute units (OpenCL) or multiprocessors (CUDA)."""
    global_memory: int
    """Bytes of device memory (host memory for CPU backends)."""
    max_shared_memory: int
    """Bytes of memory one work group (CUDA block) can share (seed: ``max_shared_memory``)."""
    max_workgroup_size: tuple[int, ...]
    """Most work items of one group along each launch dimension (seed:
    ``max_workgroup_size``, an array)."""
    max_workgroup_total: int
    """Most work items of one group in all (OpenCL ``max_work_group_size``, CUDA
    ``MAX_THREADS_PER_BLOCK``)."""
    float4_type: str | None = None
    """The renderer's 4-float vector type, if its language has one (seed:
    ``renderer_float4_str``)."""
    smem_prefix: str = ""
    """The qualifier of work-group shared arrays (seed: ``renderer_smem_prefix``)."""
    barrier: str = ""
    """The statement that synchronizes a work group (seed: ``renderer_barrier_str``)."""

    def supports_dtype(self, prec: Prec) -> bool:
        """Whether the device computes with ``prec`` (seed: ``supports_dtype``)."""
        return prec in self.supported_precs


def cpu_name() -> str:
    """The host CPU's model name (Linux ``/proc/cpuinfo``), else the machine type."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "cpu model", "Processor") and value.strip():
                    return value.strip()
    except OSError:
        pass
    return platform.machine() or "host CPU"


class ScratchAccount:
    """Bytes of device memory a runtime holds outside the slab (kernel scratch: reduction
    partials, local nodes that outlive one kernel), per device, for as long as the run that
    uses them lives; :meth:`DeviceBackend.scratch_bytes` reports it so that
    ``get_used_memory`` stays an upper bound."""

    def __init__(self) -> None:
        self._bytes: dict[int, int] = {}
        self._lock = threading.Lock()

    def hold(self, owner: object, ordinal: int, nbytes: int) -> None:
        """Count ``nbytes`` on device ``ordinal`` until ``owner`` is garbage collected."""
        if nbytes <= 0:
            return
        self._add(ordinal, nbytes)
        weakref.finalize(owner, self._add, ordinal, -nbytes)

    def _add(self, ordinal: int, nbytes: int) -> None:
        with self._lock:
            self._bytes[ordinal] = self._bytes.get(ordinal, 0) + nbytes

    def bytes(self, ordinal: int) -> int:
        """Bytes held on device ``ordinal`` now."""
        return self._bytes.get(ordinal, 0)


class DeviceMemory(abc.ABC):
    """Allocation and copies, one role of a device backend (tinygrad's ``Allocator`` has the
    same role): pools of device memory, addressed by the generic layer as ``(memory handle,
    byte offset)``, and copies host<->device and device<->device enqueued on a stream's
    queue (each called from a task of that queue)."""

    @abc.abstractmethod
    def alloc(self, ordinal: int, nbytes: int) -> Mem:
        """A zero-filled allocation of ``nbytes`` (at least 1) on device ``ordinal``."""

    def free(self, ordinal: int, mem: Mem) -> None:  # noqa: B027 (a no-op is a valid default)
        """Release an allocation (the default leaves it to garbage collection)."""

    def max_alloc(self, ordinal: int) -> int | None:
        """The largest single allocation device ``ordinal`` accepts (OpenCL's
        ``CL_DEVICE_MAX_MEM_ALLOC_SIZE``), or None for no limit of its own: slab pools are
        capped by it, so that nodes which each fit are never packed into a pool the device
        refuses."""
        return None

    def scratch_bytes(self, ordinal: int) -> int:
        """Bytes of device memory held outside the slab on device ``ordinal`` (kernel scratch
        of linked routines; see :class:`ScratchAccount`); 0 by default."""
        return 0

    def host_buffer(self, ordinal: int, array: np.ndarray) -> Mem | None:
        """A memory handle that *is* the C-contiguous host ``array`` (its bytes, not a copy),
        for backends whose device memory is host memory; ``None`` (the default) where device
        ``ordinal`` cannot compute on host memory directly. ``Backend.use_host_memory``
        relies on it; it is freed with :meth:`free`, which must leave it alone."""
        return None

    def host_view(self, ordinal: int, buf: Buf, tn: Tnode) -> np.ndarray | None:
        """The numpy array that *is* ``tn``'s buffer ``buf`` on device ``ordinal`` (its dtype
        and host shape, no copy), for backends whose device memory is host memory; ``None``
        (the default) where the buffer is device memory the host cannot read directly.
        ``Context.array`` (DLPack and array-interface export) relies on it."""
        return None

    def device_pointer(self, ordinal: int, buf: Buf) -> tuple[tuple[int, int], int] | None:
        """Where other libraries of the device find buffer ``buf`` of device ``ordinal``:
        DLPack's ``(device type, device id)`` and the buffer's device address; ``None`` (the
        default) where the device's memory cannot be handed to them (or is host memory,
        exported through :meth:`host_view`). ``Context.array`` exports device memory through
        it (:class:`~arrayjit_backends.runtime.interop.DeviceArrayExport`)."""
        return None

    def native_stream(self, queue: StreamQueue) -> int | None:
        """The handle of ``queue``'s native stream as the array protocols pass streams (a
        CUDA stream's address), or ``None`` (the default) where it has none."""
        return None

    def stream_wait(self, stream: int, queue: StreamQueue) -> bool:
        """Make the native stream of handle ``stream`` (a consumer's: the array protocols'
        numbering, 1 and 2 the default streams) wait on the device for the work scheduled so
        far on ``queue`` (say, by recording an event there that ``stream`` waits for); False
        (nothing done) where ``queue`` is not of this backend's devices or the backend has no
        such streams (the default), and the caller waits on the host instead."""
        return False

    def dlpack_device(self, ordinal: int) -> tuple[int, int] | None:
        """DLPack's ``(device type, device id)`` of device ``ordinal``'s memory where it can
        compute on other libraries' device memory (CUDA: ``(2, ordinal)``); ``None`` (the
        default) where it cannot. A context's ``ctx_arrays`` import device arrays through it,
        :meth:`device_buffer` and :meth:`queue_wait`."""
        return None

    def device_buffer(
        self, ordinal: int, address: int, nbytes: int
    ) -> tuple[Mem, tuple[int, int] | None]:
        """A memory handle that *is* another library's ``nbytes`` of device memory at
        ``address`` (not a copy; :meth:`free` must leave it alone), and the DLPack device the
        driver says ``address`` belongs to (None: memory the driver does not know). Called only
        where :meth:`dlpack_device` is not None.

        Raises:
            NotImplementedError: the backend imports no device memory (the default).
        """
        raise NotImplementedError(f"{type(self).__name__} imports no device memory")

    def queue_wait(self, queue: StreamQueue, stream: int) -> bool:
        """Make ``queue`` wait on the device for the work scheduled so far on the native
        stream of handle ``stream`` (a producer's: the array protocols' numbering, 1 and 2 the
        default streams), the reverse of :meth:`stream_wait`; False (nothing done, the
        default) where the backend has no such streams."""
        return False

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


class DeviceCompiler(abc.ABC):
    """Build, one role of a device backend (tinygrad's ``Compiler``): optimized IR to an opaque
    code object, which backends can link it, and its source for reading."""

    name: ClassVar[str]

    @abc.abstractmethod
    def compile(self, optimized: Optimized) -> Any:
        """Compile one routine for every device; an opaque code object for
        :meth:`DeviceLauncher.link`.

        Raises:
            CompileError: the generated code failed to compile.
        """

    def compile_batch(self, optimized: Sequence[Optimized]) -> list[Any]:
        """Compile several routines; the default compiles each on its own."""
        return [self.compile(o) for o in optimized]

    def code_kind(self) -> str:
        """Which backends can link code this one compiles: backends with the same kind. By
        default only this backend itself (device programs belong to its driver context)."""
        return f"{self.name} (instance {id(self):#x})"

    def source_of(self, code: Any) -> str | None:
        """The generated source of a compiled routine, for reading (debug output)."""
        source = getattr(code, "source", None)
        return source if isinstance(source, str) else None


class DeviceLauncher(abc.ABC):
    """Load and launch, one role of a device backend (tinygrad's ``Program``): compiled code
    bound to buffers and a stream's queue, as a run that launches its kernels."""

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

        Launching is the run's business (seed 004's ``get_kernel`` and ``launch_kernel`` live
        here): the generic layer never sees kernels. The shared GPU renderer gives each kernel
        a one-dimensional global size and a group size
        (:class:`~arrayjit_backends.gpu.program.GpuKernel`), flattening parallel loop nests of
        any depth into one index space; a backend that wants multi-dimensional launches can
        shape them from :attr:`DeviceInfo.max_workgroup_size`. Kernel scratch allocated here
        must be reported by :meth:`DeviceMemory.scratch_bytes`.
        """


class DeviceBackend(DeviceMemory, DeviceCompiler, DeviceLauncher):
    """What a device backend implements (seed 002's ``Lowered_backend``): its devices and
    stream queues (below), and the roles :class:`DeviceMemory` (allocation and copies),
    :class:`DeviceCompiler` (build) and :class:`DeviceLauncher` (load and launch).

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

    def info(self, ordinal: int) -> DeviceInfo:
        """Device ``ordinal``'s :class:`DeviceInfo`. Backends override it with the driver's
        values; this default knows only the name, precisions and memory kind (limits 0)."""
        return DeviceInfo(
            name=f"{self.name}:{ordinal}",
            ordinal=ordinal,
            kind="unknown",
            unified_memory=self.unified_memory,
            supported_precs=self.supported_precs(ordinal),
            compute_units=0,
            global_memory=0,
            max_shared_memory=0,
            max_workgroup_size=(),
            max_workgroup_total=0,
        )

    @abc.abstractmethod
    def new_queue(self, ordinal: int, name: str) -> StreamQueue:
        """The executor of a new stream of device ``ordinal``.

        For a device backend the queue's tasks run at once on the caller's thread and enqueue
        device work (see :class:`ImmediateQueue`); its events are the device's events, so
        :meth:`StreamQueue.wait_for` on another stream's event makes the device wait, not the
        host.
        """

    def describe(self) -> dict[str, Any]:
        """Backend-specific facts for debug output."""
        return {"name": self.name}

    def finalize(self) -> None:
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
            if event.succeeded():
                return
            if event.is_done() or not self.wait_device(event):
                event.sync()  # a failed event raises here
        except BaseException as exc:  # as a multicore stream does: the stream fails
            self.error = exc
            raise StreamError(self.name, f"the event it waited for failed: {exc!r}") from exc

    def wait_past(self, event: Event) -> None:
        self._check()
        if not event.is_done() and not self.wait_device(event):
            event.wait()

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


__all__ = [
    "CONFIGS",
    "Buf",
    "DeviceBackend",
    "DeviceCompiler",
    "DeviceInfo",
    "DeviceLauncher",
    "DeviceMemory",
    "ImmediateQueue",
    "Mem",
    "ScratchAccount",
    "cpu_name",
]
