"""What a backend's work runs on and with: devices, streams, contexts, buffers, code, routines.

- :class:`Device`: one device of a backend, with its slab of memory and its hazard table
  (:class:`~arrayjit_backends.runtime.hazards.BufferHazards`).
- :class:`Stream`: work on one stream runs in order; each stream has its own merge buffer.
- :class:`Context`: maps nodes to buffers on one stream; persistent (linking twice from one
  parent gives two independent children).
- :class:`Buffer`: device memory held by the user, given to contexts as ``ctx_arrays``.
- :class:`Code` and :class:`Routine`: compiled code, and code linked into a context; calling a
  routine schedules it, with the waits the hazard rules ask for.

These are made by the generic :class:`~arrayjit_backends.backend.Backend` (the facade users
call), which checks its arguments before building them.
"""

from __future__ import annotations

import functools
import itertools
import math
import threading
import weakref
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from arrayjit_backends.impl.cpu_compiler import Run
from arrayjit_backends.impl.device import Buf, DeviceInfo
from arrayjit_backends.impl.stream_queue import DONE, StreamQueue
from arrayjit_backends.runtime import hazards, transfers
from arrayjit_backends.runtime.bindings import Bindings
from arrayjit_backends.runtime.hazards import BufferHazards, Key
from arrayjit_backends.runtime.slab import DEFAULT_POOL_CAP, BufferLoc, Slab, plan_pool_segments
from arrayjit_ir.optimized import Optimized
from arrayjit_tnode import Tnode, UsageError

if TYPE_CHECKING:
    from arrayjit_backends.backend import Backend

_device_ids = itertools.count()
_ids_lock = threading.Lock()


class Device:
    """A device of a backend, with its memory and synchronization bookkeeping."""

    def __init__(self, backend: Backend, ordinal: int) -> None:
        with _ids_lock:
            self.id = next(_device_ids)
        self.ordinal = ordinal
        self.backend = backend
        runtime = backend.runtime
        self.slab = Slab(self._alloc, lambda mem: runtime.free(ordinal, mem))
        self.lock = threading.RLock()
        self.hazards = BufferHazards()
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
        backend: Backend,
        stream: Stream,
        parent: Context | None,
        buffers: Mapping[Tnode, BufferLoc],
        own_pools: Sequence[int] = (),
        given: Sequence[Buffer] = (),
    ) -> None:
        self.backend = backend
        self.stream = stream
        self.parent = parent
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

    def buf(self, tn: Tnode) -> Buf:
        """``(memory handle, offset)`` of ``tn``'s buffer."""
        return self.device.slab.buf(self.buffers[tn])

    def __repr__(self) -> str:
        return f"<Context on {self.stream.name}, {len(self.buffers)} nodes>"


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


class Routine:
    """A linked routine: calling it schedules its work on its context's stream."""

    def __init__(
        self,
        backend: Backend,
        context: Context,
        code: Code,
        run: Run,
    ) -> None:
        self.backend = backend
        self.context = context
        self.name = code.name
        opt = code.optimized
        self.inputs: tuple[Tnode, ...] = opt.inputs
        self.outputs: tuple[Tnode, ...] = opt.outputs
        self.merge_buffer_input: Tnode | None = opt.merge_node
        self._bindings = Bindings(opt.static_symbols, code.name)
        self._symbols = opt.static_symbols
        self._run = run
        self._short: bool = getattr(run, "short", False)
        """The compiler marked the run as a few microseconds of work (a ``short`` attribute):
        see :meth:`~arrayjit_backends.impl.stream_queue.StreamQueue.schedule_short`."""
        locs = context.buffers
        self._reads: list[Key] = [
            (tn.id, locs[tn])
            for tn in opt.context_nodes
            if opt.traced[tn].read_only or opt.traced[tn].read_before_write
        ]
        self._writes: list[Key] = [(tn.id, locs[tn]) for tn in self.outputs]
        self._hosted_outputs = [(tn, locs[tn]) for tn in self.outputs if tn.is_hosted()]
        host_memory = context.device.host_memory
        self._on_host = [
            (tn, tn in self.outputs)
            for tn in opt.context_nodes
            if host_memory and host_memory.get(tn) == locs[tn]
        ]
        """Nodes whose buffer is their host array (``use_host_memory``), and whether the
        routine writes them."""

    def schedule(self) -> None:
        """Schedule one run on the context's stream (what calling the routine does).

        Raises:
            UsageError: the backend was finalized, or the stream's merge buffer holds another
                node than the one this routine reads.
            StreamError: an earlier task on the stream failed.
        """
        backend = self.backend
        backend.check_live()
        stream = self.context.stream
        dev = stream.device
        want = self.merge_buffer_input
        if want is not None and stream.merge_node != want:
            have = stream.merge_node.debug_label if stream.merge_node is not None else "nothing"
            raise UsageError(
                f"routine {self.name} on {stream.name} reads the merge buffer as "
                f"{want.debug_label}, but it holds {have}"
            )
        queue, table = stream.queue, dev.hazards
        reads = self._reads
        if table.views:  # merge buffers that read a buffer this run writes get their copy first
            for key in self._writes:
                transfers.before_write(stream, key)
            if want is not None and (view := table.view_of(stream)) is not None:
                reads = [*reads, view]  # a Streaming merge buffer reads the source's buffer
        else:
            for key in self._writes:  # write after other streams' reads and write
                table.order_write(stream, key)
        for key in reads:
            table.order_read(stream, key)
        for tn, writes in self._on_host:  # its buffer is its host array: ordered as a copy
            # into it (a write) or from it (a read), with every backend's transfers of it
            (hazards.order_download if writes else hazards.order_upload)(tn, stream)
        values = {s: self._bindings[s.name] for s in self._symbols} if self._symbols else {}
        run = self._run
        if self._short:  # a few microseconds: an idle multicore stream runs it right here
            queue.schedule_short(lambda: run(values))
        else:
            queue.schedule(lambda: run(values))
        if self._writes or reads:
            event = queue.all_work()
            if event is not DONE:  # a run already done (sync_) orders nothing after it
                table.record(stream, event, reads, self._writes)
                for tn, writes in self._on_host:
                    hazards.record_host_access(tn, stream, event, writes=writes)
        for tn, loc in self._hosted_outputs:
            hazards.mark_only_fresh(tn, dev.id, loc)

    __call__ = schedule

    @property
    def bindings(self) -> Bindings:
        """The static-index values the next runs use (checked against their ranges)."""
        return self._bindings

    @bindings.setter
    def bindings(self, values: Mapping[str, int]) -> None:
        # Assigning a mapping sets each value through the checks; it never replaces them.
        self._bindings.update(values)

    def __repr__(self) -> str:
        return f"<Routine {self.name} on {self.context.stream.name}>"


# ---- building contexts (for Backend.make_context, make_child and link) ----


def given_buffers(
    stream: Stream, ctx_arrays: Mapping[Tnode, Buffer] | None, what: str
) -> tuple[dict[Tnode, BufferLoc], list[Buffer]]:
    """The buffers ``ctx_arrays`` gives a new context on ``stream``: where each node's buffer
    is, and the :class:`Buffer` values (kept alive by the context).

    Raises:
        UsageError: ``ctx_arrays`` is not a mapping of nodes to :class:`Buffer` values, or a
            buffer is on another device, smaller than its node, or misaligned for it.
    """
    if ctx_arrays is None:
        return {}, []
    if not isinstance(ctx_arrays, Mapping):
        raise UsageError(
            f"{what}: ctx_arrays must map nodes to Buffers, got {type(ctx_arrays).__name__}"
        )
    locs: dict[Tnode, BufferLoc] = {}
    for tn, buf in ctx_arrays.items():
        if not isinstance(tn, Tnode) or not isinstance(buf, Buffer):
            raise UsageError(
                f"{what}: ctx_arrays must map Tnodes to Buffers (from alloc_buffer or a "
                f"context's ctx_arrays), got {tn!r}: {buf!r}"
            )
        if buf.device is not stream.device:
            raise UsageError(
                f"{what}: the buffer of node {tn.debug_label} is on {buf.device!r}, not on "
                f"the stream's device {stream.device!r} ({stream.name})"
            )
        if buf.size_in_bytes < tn.size_in_bytes:
            raise UsageError(
                f"{what}: node {tn.debug_label} needs {tn.size_in_bytes} bytes, its buffer "
                f"has {buf.size_in_bytes} ({stream.name})"
            )
        if buf.loc.offset % max(tn.prec.byte_size, 1):
            raise UsageError(
                f"{what}: the buffer of node {tn.debug_label} starts at byte offset "
                f"{buf.loc.offset}, not a multiple of its element size {tn.prec.byte_size}"
            )
        locs[tn] = buf.loc
    return locs, list(ctx_arrays.values())


def extend(
    ctx: Context, code: Code, host_memory_nodes: AbstractSet[Tnode], placed: weakref.WeakSet[Tnode]
) -> Context:
    """The child of ``ctx`` that ``code`` links into: ``ctx``'s buffers, plus one for each node
    the code keeps in context that ``ctx`` lacks. Nodes shared across streams (and constants)
    get one buffer per device, others a buffer in new pools of the child; nodes in
    ``host_memory_nodes`` get their host array. Hosted nodes whose buffer is new are uploaded.
    The new nodes are added to ``placed`` (too late for ``use_host_memory``).

    Raises:
        UsageError: the code reads a node that is neither hosted, embedded, shared, nor in
            ``ctx`` (it would read uninitialized memory), or a host array cannot be used.
    """
    opt = code.optimized
    dev = ctx.device
    new = [tn for tn in opt.context_nodes if tn not in ctx.buffers]
    for tn in new:
        hosted_source = tn.is_hosted() or tn in code.embedded
        if tn in opt.inputs and not hosted_source and tn not in dev.shared:
            raise UsageError(
                f"link {code.name}: the context on {ctx.stream.name} lacks node "
                f"{tn.debug_label}, which the routine reads; compute it in an earlier "
                f"routine of this context, or make it hosted"
            )
    buffers = dict(ctx.buffers)
    on_host = [tn for tn in new if tn in host_memory_nodes]
    for tn in on_host:
        buffers[tn] = transfers.host_memory_loc(dev, tn, f"link {code.name}")
    placed.update(new)
    new = [tn for tn in new if tn not in host_memory_nodes]
    shared = [tn for tn in new if tn.potentially_cross_stream()]
    private = [tn for tn in new if not tn.potentially_cross_stream()]
    pools: list[int] = []
    try:  # a node over the pool cap, or memory the device refuses
        with dev.lock:
            missing_shared = [tn for tn in shared if tn not in dev.shared]
            for tn, loc in zip(missing_shared, dev.pack(missing_shared, pools=None)):
                dev.shared[tn] = loc
            for tn in shared:
                buffers[tn] = dev.shared[tn]
        for tn, loc in zip(private, dev.pack(private, pools)):
            buffers[tn] = loc
    except UsageError as exc:  # (pack released what it allocated for the failed request)
        raise UsageError(f"link {code.name} on {ctx.stream.name}: {exc}") from exc
    child = Context(ctx.backend, ctx.stream, ctx, buffers, pools)
    for tn in new:
        if tn.is_hosted() and (tn in private or tn in missing_shared):
            transfers.upload(child, tn)
    return child


__all__ = [
    "Buffer",
    "Code",
    "Context",
    "Device",
    "Routine",
    "Stream",
    "extend",
    "free_pools",
    "given_buffers",
]
