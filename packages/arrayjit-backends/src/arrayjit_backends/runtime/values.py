"""What a backend's work runs on and with: devices, streams, contexts, buffers, code.

- :class:`Device`: one device of a backend, with its slab of memory and its hazard table
  (:class:`~arrayjit_backends.runtime.hazards.BufferHazards`).
- :class:`Stream`: work on one stream runs in order; each stream has its own merge buffer.
- :class:`Context`: maps nodes to buffers on one stream; persistent (linking twice from one
  parent gives two independent children).
- :class:`Buffer`: device memory held by the user, given to contexts as ``ctx_arrays``
  (:func:`external_buffer`: an array of another library, host memory on CPU backends, device
  memory on CUDA).
- :class:`Code`: compiled code; linked into a context it is a
  :class:`~arrayjit_backends.runtime.routine.Routine`.

These are made by the generic :class:`~arrayjit_backends.backend.Backend` (the facade users
call), which checks its arguments before building them; they know it only as an
:class:`~arrayjit_backends.runtime.owner.Owner`. Nothing here schedules work, so this module
sits below the hazard rules' users (:mod:`~arrayjit_backends.runtime.transfers`,
:mod:`~arrayjit_backends.runtime.routine`).
"""

from __future__ import annotations

import functools
import itertools
import math
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from arrayjit_backends.impl.device import Buf, DeviceInfo
from arrayjit_backends.impl.stream_queue import Event, StreamQueue
from arrayjit_backends.runtime import hazards
from arrayjit_backends.runtime.hazards import BufferHazards
from arrayjit_backends.runtime.interop import (
    ArrayExport,
    DeviceArrayExport,
    external_device_array,
    external_host_array,
    is_device_array,
)
from arrayjit_backends.runtime.slab import DEFAULT_POOL_CAP, BufferLoc, Slab, plan_pool_segments
from arrayjit_ir.optimized import Optimized
from arrayjit_tnode import Tnode, UsageError

if TYPE_CHECKING:
    from arrayjit_backends.runtime.owner import Owner

_device_ids = itertools.count()
_ids_lock = threading.Lock()


class Device:
    """A device of a backend, with its memory and synchronization bookkeeping."""

    def __init__(self, backend: Owner, ordinal: int) -> None:
        with _ids_lock:
            self.id = next(_device_ids)
        self.ordinal = ordinal
        self.backend = backend
        runtime = backend.runtime
        self.slab = Slab(self._alloc, lambda mem: runtime.free(ordinal, mem))
        self.lock = threading.RLock()
        self.hazards: BufferHazards[Stream] = BufferHazards()
        """Writers, readers and merge-buffer views of this device's buffers."""
        self.shared: dict[Tnode, BufferLoc] = {}
        self.host_memory: dict[Tnode, BufferLoc] = {}
        """Buffers that are nodes' host arrays (:meth:`Backend.use_host_memory`)."""
        self.streams: list[Stream] = []

    def _alloc(self, nbytes: int) -> Any:
        """Device memory for a pool; a refusal of the runtime (``MemoryError`` on the CPU, a
        driver error such as OpenCL's ``INVALID_BUFFER_SIZE``) is one documented error that
        names the size, the device and the backend."""
        try:
            return self.backend.runtime.alloc(self.ordinal, nbytes)
        except Exception as exc:
            raise UsageError(
                f"cannot allocate {nbytes} bytes on {self!r} (backend {self.backend.name}): "
                f"{type(exc).__name__}: {exc}"
            ) from exc

    def release_pools(self, pools: frozenset[int]) -> None:
        """Free ``pools`` and forget the synchronization state of their buffers."""
        if pools:
            self.hazards.forget_pools(pools)
            for p in pools:
                self.slab.free_pool(p)

    def drop_view(self, stream: Stream) -> None:
        """``stream``'s merge buffer no longer reads a buffer of this device directly; pools
        of collected contexts that were kept only for that view are freed."""
        self.release_pools(self.hazards.drop_view(stream))

    @functools.cached_property
    def info(self) -> DeviceInfo:
        """What the device is and its limits (seed 004's ``Device_info``): name, kind,
        precisions, unified memory, compute units, memory, ``max_shared_memory``,
        ``max_workgroup_size`` (per dimension) and the renderer's strings."""
        return self.backend.runtime.info(self.ordinal)

    def pack(self, nodes: list[Tnode], pools: list[int] | None) -> list[BufferLoc]:
        """Buffers for ``nodes`` in new pools of this device, packed (aligned, each pool
        capped); the new pools' ids are added to ``pools`` when given."""
        if not nodes:
            return []
        items = [(tn.size_in_bytes, tn.prec.byte_size) for tn in nodes]
        limit = self.backend.runtime.max_alloc(self.ordinal)
        cap = DEFAULT_POOL_CAP if limit is None else min(DEFAULT_POOL_CAP, limit)
        plan = plan_pool_segments(items, cap, [tn.debug_label for tn in nodes])
        ids: list[int] = []
        try:
            for size in plan.sizes:
                ids.append(self.slab.alloc_pool(size))
        except UsageError:  # the device refused one: release the others of this request
            for p in ids:
                self.slab.free_pool(p)
            raise
        if pools is not None:
            pools.extend(ids)
        return [BufferLoc(ids[seg], off) for seg, off in plan.placements]

    def __repr__(self) -> str:
        return f"<Device {self.backend.name}:{self.ordinal} id={self.id}>"


class Stream:
    """A stream of a device: work on one stream runs in order."""

    def __init__(self, device: Device, index: int, queue: StreamQueue) -> None:
        self.device = device
        self.index = index
        self.queue = queue
        self.name = queue.name
        self.merge_node: Tnode | None = None
        """The node the merge buffer will hold once the stream reaches its last transfer."""
        self.merge_src: Buf | None = None
        """Where the merge buffer's value is now (set by the stream's own tasks)."""
        self._merge_mem: Any = None
        self.merge_capacity = 0
        """Bytes of the stream's own merge buffer (grown when a larger node arrives)."""

    def merge_buffer_for(self, tn: Tnode) -> Buf:
        """The stream's own merge buffer, grown when ``tn`` is larger than it."""
        if self._merge_mem is None or self.merge_capacity < tn.size_in_bytes:
            dev = self.device
            self._merge_mem = dev.backend.runtime.alloc(dev.ordinal, max(tn.size_in_bytes, 1))
            self.merge_capacity = tn.size_in_bytes
        return (self._merge_mem, 0)

    def hold(self, seconds: float) -> None:
        """Test hook: delay this stream's next task by ``seconds`` without blocking the caller
        (a no-op on ``sync_`` streams, whose tasks run at once on the caller's thread). Tests
        use it to force a schedule in which one stream lags behind the others.

        Raises:
            UsageError: ``seconds`` is not a finite number >= 0.
        """
        if (
            isinstance(seconds, bool)
            or not isinstance(seconds, (int, float))
            or not math.isfinite(seconds)
            or seconds < 0
        ):
            raise UsageError(
                f"hold on stream {self.name}: expected a finite number of seconds >= 0, "
                f"got {seconds!r}"
            )
        self.queue.hold(seconds)

    def __repr__(self) -> str:
        return f"<Stream {self.name}>"


class Buffer:
    """A buffer of device memory held by the user (the seed's ``buffer``: a pointer and its
    size): made by :meth:`Backend.alloc_buffer`, or taken from a context's
    :attr:`Context.ctx_arrays`, and given to :meth:`Backend.make_context` or
    :meth:`Backend.make_child` as ``ctx_arrays``. The memory stays allocated while a
    ``Buffer`` or a context using it lives (there is no explicit free: it could leave a
    context pointing at released memory)."""

    __slots__ = ("__weakref__", "_owner", "device", "loc", "size_in_bytes")

    def __init__(self, device: Device, loc: BufferLoc, size_in_bytes: int, owner: Any) -> None:
        self.device = device
        self.loc = loc
        self.size_in_bytes = size_in_bytes
        self._owner = owner  # what keeps the memory alive (a context), or None: the buffer

    def __repr__(self) -> str:
        return f"<Buffer {self.size_in_bytes} bytes on {self.device!r} at {tuple(self.loc)}>"


class Context:
    """Maps nodes to buffers on one stream. Contexts are persistent: linking twice from one
    parent gives two independent children. Pools a context added are freed when it (and every
    child and routine using it) is gone."""

    def __init__(
        self,
        backend: Owner,
        stream: Stream,
        parent: Context | None,
        buffers: Mapping[Tnode, BufferLoc],
        own_pools: Sequence[int] = (),
        given: Sequence[Buffer] = (),
        origin: str = "a child context",
    ) -> None:
        self.backend = backend
        self.stream = stream
        self.parent = parent
        self.origin = origin
        """What made the context, for messages (``the context of routine step``)."""
        self._children: weakref.WeakSet[Context] = weakref.WeakSet()
        if parent is not None:
            parent._children.add(self)
        self.buffers: Mapping[Tnode, BufferLoc] = MappingProxyType(dict(buffers))
        self._given = tuple(given)  # buffers passed as ctx_arrays stay allocated with us
        if own_pools:
            weakref.finalize(self, free_pools, stream.device, frozenset(own_pools))

    @property
    def ctx_arrays(self) -> dict[Tnode, Buffer]:
        """The context's buffers as :class:`Buffer` values (the seed's ``ctx_arrays``), to
        give to another context on the same device; each keeps this context's memory
        allocated."""
        return {
            tn: Buffer(self.device, loc, tn.size_in_bytes, self) for tn, loc in self.buffers.items()
        }

    @property
    def device(self) -> Device:
        """The stream's device."""
        return self.stream.device

    @property
    def nodes(self) -> list[Tnode]:
        """Nodes with a buffer in this context."""
        return list(self.buffers)

    def descendant_holding(self, tn: Tnode) -> Context | None:
        """A live context linked or made from this one (at any depth) that has a buffer of
        ``tn``, nearest first; None when there is none."""
        level = list(self._children)
        while level:
            for child in level:
                if tn in child.buffers:
                    return child
            level = [grandchild for child in level for grandchild in child._children]
        return None

    def buf(self, tn: Tnode) -> Buf:
        """``(memory handle, offset)`` of ``tn``'s buffer."""
        return self.device.slab.buf(self.buffers[tn])

    def array(self, tn: Tnode) -> ArrayExport | DeviceArrayExport:
        """``tn``'s buffer in this context for other array libraries, without a copy.

        Host memory (CPU backends): an :class:`~arrayjit_backends.runtime.interop.ArrayExport`,
        DLPack (``np.from_dlpack``, ``jax.dlpack.from_dlpack``, ``torch.from_dlpack``) and
        numpy's ``__array_interface__`` (``np.asarray``). It waits for the buffer's writer
        scheduled so far before it returns, and again each time a consumer takes it.
        Device memory another library can use (CUDA): a
        :class:`~arrayjit_backends.runtime.interop.DeviceArrayExport`, DLPack and
        ``__cuda_array_interface__``, ordered on the device (the consumer's stream waits for
        the writer). Either way the consumer's array aliases the buffer (a later run writes
        into it: take it again after that run) and keeps this context's memory alive.

        Raises:
            UsageError: ``tn`` has no buffer here, the backend is finalized, or the buffer is
                device memory no other library can use (OpenCL): copy it with
                ``backend.to_host(ctx, tn)`` and read ``tn.get_values()`` instead.
            StreamError: the buffer's writer failed.
        """
        self.backend.check_live()
        if not isinstance(tn, Tnode):
            raise UsageError(f"Context.array: expected a Tnode, got {tn!r} ({self!r})")
        if tn not in self.buffers:
            holder = self.descendant_holding(tn)
            hint = "" if holder is None else f"; {holder.origin} holds it"
            raise UsageError(
                f"Context.array: node {tn.debug_label} has no buffer in {self!r}{hint}"
            )
        dev, loc = self.device, self.buffers[tn]
        runtime = dev.backend.runtime
        view = runtime.host_view(dev.ordinal, self.buf(tn), tn)
        if view is None and (found := runtime.device_pointer(dev.ordinal, self.buf(tn))):

            def writer() -> tuple[StreamQueue, Event] | None:
                pending = dev.hazards.writers.get(loc)
                if pending is None or pending[1].is_done():
                    return None
                return pending[0].queue, pending[1]

            what = (
                f"Context.array: node {tn.debug_label} (backend {self.backend.name}, device "
                f"{dev.ordinal}, {self.stream.name})"
            )
            return DeviceArrayExport(tn, self, found[1], found[0], writer, runtime, what)
        if view is None:
            raise UsageError(
                f"Context.array: backend {self.backend.name} keeps node {tn.debug_label} in "
                f"device memory ({self.stream.name}) that it cannot export through DLPack or "
                f"an array interface; copy it with backend.to_host(ctx, node) (a hosted node) "
                f"and read node.get_values()"
            )

        def settle() -> None:
            writer = dev.hazards.writers.get(loc)
            if writer is not None:
                writer[1].sync()

        settle()
        return ArrayExport(view, settle, tn, self)

    def __repr__(self) -> str:
        return f"<Context on {self.stream.name}, {len(self.buffers)} nodes>"


def external_buffer(stream: Stream, tn: Tnode, obj: object, what: str) -> Buffer:
    """An array of another library as a :class:`Buffer` of ``tn`` on ``stream``'s device,
    without a copy: the buffer is the array's memory, and keeps the array alive. Host memory
    (``__dlpack__`` or ``__array_interface__``, CPU backends:
    :func:`~arrayjit_backends.runtime.interop.external_host_array` checks it) or device memory
    (DLPack on the device, ``__cuda_array_interface__``, backends whose runtime has a
    ``dlpack_device``: :func:`external_device_buffer`). For a hosted node the array's value
    counts as defined now: a run uploads the host array over it only after a later host write
    (``set_values``).

    Raises:
        UsageError: the device's memory is not host memory, or the array does not fit the
            node (device, dtype, shape, strides, alignment).
    """
    device = stream.device
    if is_device_array(obj) and device.backend.runtime.dlpack_device(device.ordinal):
        return external_device_buffer(stream, tn, obj, what)
    where = stream.name
    arr = external_host_array(obj, tn, what, where)
    mem = device.backend.runtime.host_buffer(device.ordinal, arr)
    if mem is None:
        raise UsageError(
            f"{what}: backend {device.backend.name} computes on device memory and cannot use "
            f"an external array as the buffer of node {tn.debug_label} ({where}); pass a "
            f"Buffer, or set the node's values (set_values) and upload them (from_host)"
        )
    return _adopted(device, tn, mem, arr.nbytes, (obj, arr), None)


def external_device_buffer(stream: Stream, tn: Tnode, obj: object, what: str) -> Buffer:
    """Another library's device array as a :class:`Buffer` of ``tn`` on ``stream``'s device,
    without a copy (:func:`~arrayjit_backends.runtime.interop.external_device_array` reads
    and checks it). Ordered before the buffer's first use: through DLPack the producer makes
    ``stream``'s native stream wait for its work on the array; the CUDA array interface's
    ``stream`` is waited for by ``stream`` on the device. The buffer's writer is then
    ``stream`` (its work so far), so contexts on other streams given the buffer wait too.
    The buffer holds the array (and a DLPack tensor, handed back once the buffer is gone).

    Raises:
        UsageError: the array is on another device (by the producer or the driver), does not
            fit the node, or its producer's stream cannot be waited for; the message names the
            node, backend, device and stream.
    """
    device, queue = stream.device, stream.queue
    runtime = device.backend.runtime
    where = f"backend {device.backend.name}, device {device.ordinal}, {stream.name}"
    ours = runtime.dlpack_device(device.ordinal)
    handle = runtime.native_stream(queue)
    if ours is None or handle is None:
        raise UsageError(
            f"{what}: backend {device.backend.name} cannot compute on another library's "
            f"device memory as the buffer of node {tn.debug_label} ({where})"
        )
    ext = external_device_array(obj, tn, ours, handle, what, where)
    try:
        mem, on = runtime.device_buffer(device.ordinal, ext.address, ext.nbytes)
        if ext.nbytes and on != ours:
            found = "memory its driver does not know" if on is None else f"DLPack device {on}"
            raise UsageError(
                f"{what}: the array given for node {tn.debug_label} ({ext.protocol}) is at "
                f"address {ext.address:#x}, which is {found}; the context's device is {ours} "
                f"({where})"
            )
        # The producer's pending work on the array comes before our first use of it.
        if ext.stream is not None and ext.stream != handle:
            producer = f"the producer's stream {ext.stream:#x} of the array given for node"
            try:
                waited = runtime.queue_wait(queue, ext.stream)
            except UsageError as exc:
                raise UsageError(
                    f"{what}: {producer} {tn.debug_label} cannot be waited for: {exc} ({where})"
                ) from exc
            if not waited:
                raise UsageError(
                    f"{what}: {producer} {tn.debug_label} cannot be waited for on the device "
                    f"({where})"
                )
    except BaseException:
        ext.release()
        raise
    return _adopted(device, tn, mem, ext.nbytes, (obj, ext), (stream, ext.release))


def _adopted(
    device: Device,
    tn: Tnode,
    mem: Any,
    nbytes: int,
    keep: object,
    ordered: tuple[Stream, Callable[[], None]] | None,
) -> Buffer:
    """A :class:`Buffer` of ``tn`` that is memory ``mem`` the user owns (``keep`` holds it).
    ``ordered``: the stream the memory's producer was ordered before (recorded as the buffer's
    writer) and what hands the memory back once the buffer is gone."""
    with device.lock:
        pool = device.slab.adopt_pool(mem)
    loc = BufferLoc(pool, 0)
    if ordered is not None:
        stream = ordered[0]
        device.hazards.record(stream, stream.queue.all_work(), writes=[(tn.id, loc)])
    if tn.is_hosted():
        # The array defines the node's value here: a run must not upload the host array over
        # it (it lags no host write made so far), though it is not the host array's value.
        hazards.mark_stale(tn, device.id, loc)
    buf = Buffer(device, loc, nbytes, keep)
    release = None if ordered is None else ordered[1]
    weakref.finalize(buf, _free_adopted, device, pool, release)
    return buf


def _free_adopted(device: Device, pool: int, release: Callable[[], None] | None) -> None:
    # The pool first (the runtime leaves adopted memory alone), then the producer's tensor.
    free_pools(device, frozenset([pool]))
    if release is not None:
        release()


def free_pools(device: Device, pools: frozenset[int]) -> None:
    """Release a context's pools and forget the synchronization state of their buffers. A
    pool that a stream's merge buffer still views (``Streaming``) is released once no view
    reads it (:meth:`Device.release_pools`): device backends free memory explicitly, and the
    view would read released memory."""
    device.release_pools(device.hazards.hold_viewed(pools))


@dataclass
class Code:
    """A compiled routine: its optimized IR and the native code."""

    name: str
    optimized: Optimized
    native: Any
    embedded: frozenset[Tnode] = frozenset()
    kind: str = ""
    """Which backends can link it (:meth:`DeviceBackend.code_kind`)."""

    def __repr__(self) -> str:
        # The dataclass repr printed the whole optimized IR and the native handle.
        nodes = len(self.optimized.context_nodes)
        return f"<Code {self.name} ({self.kind or 'any kind'}), {nodes} context nodes>"


__all__ = [
    "Buffer",
    "Code",
    "Context",
    "Device",
    "Stream",
    "external_buffer",
    "external_device_buffer",
    "free_pools",
]
