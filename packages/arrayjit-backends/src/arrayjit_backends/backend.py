"""The generic Backend: devices, streams, contexts, routines, memory and synchronization.

One implementation serves every backend: it speaks only the device form
(:class:`~arrayjit_backends.device_impl.DeviceBackend`), and CPU compilers reach that form
through :class:`~arrayjit_backends.device_impl.CpuDevices`. It keeps, per device and buffer, the
last writer's event and the streams reading it (:mod:`arrayjit_backends.hazards`), and inserts
the waits itself, so users never need ``will_wait_for`` for correctness:

- a routine reading a buffer that another stream is writing waits for that writer's event;
- ``from_host`` into a buffer waits for the streams still reading or writing it, and for
  copies into the host array requested before it;
- ``to_host`` runs after the buffer's writer and after the transfers of the host array requested
  before it, and installs ``prepare_read`` on the node, so ``get_values()`` waits for the copy;
- ``device_to_device`` orders the copy after the source's writer and before the destination's
  next reader; a ``Streaming`` merge buffer is a reader of the source's buffer, and a write to
  that buffer first gives the merge buffer its own copy.
"""

from __future__ import annotations

import contextlib
import enum
import itertools
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np

from arrayjit_backends import hazards, settings
from arrayjit_backends.backend_impl import NoDeviceBackend, Run
from arrayjit_backends.bindings import (
    Bindings,
    check_code_kind,
    check_compile_args,
    with_static_ranges,
)
from arrayjit_backends.device_impl import Buf, CpuDevices, DeviceBackend
from arrayjit_backends.hazards import BufferHazards, Key
from arrayjit_backends.scheduler import Event, StreamQueue
from arrayjit_backends.slab import DEFAULT_POOL_CAP, BufferLoc, Slab, plan_pool_segments
from arrayjit_ir import lower, optimize, optimize_batch, pretty
from arrayjit_ir.assignments import Assignment, Comp
from arrayjit_ir.indexing import StaticSymbol
from arrayjit_ir.optimized import Optimized
from arrayjit_tnode import Prec, Tnode, UsageError

_device_ids = itertools.count()
_ids_lock = threading.Lock()


class Config(enum.Enum):
    """How many streams a device should be used with."""

    ONLY_DEVICES_PARALLEL = "only_devices_parallel"
    FOR_PARALLEL_COPYING = "for_parallel_copying"
    MOST_PARALLEL_STREAMS = "most_parallel_streams"


class MergeMode(enum.Enum):
    """How ``device_to_device`` delivers a value."""

    No = "No"
    """Copy into the destination's own buffer of the node."""
    Streaming = "Streaming"
    """The destination's merge buffer reads the source's buffer directly (one memory)."""
    Copy = "Copy"
    """Copy into the destination stream's merge buffer (growing it when needed)."""


@dataclass(frozen=True)
class Capabilities:
    """What a backend supports; the conformance suite skips the rest with these reasons."""

    supported_precs: frozenset[Prec]
    max_devices: int
    multiple_streams: bool
    unified_memory: bool


class Device:
    """A device of a backend, with its memory and synchronization bookkeeping."""

    def __init__(self, backend: Backend, ordinal: int) -> None:
        with _ids_lock:
            self.id = next(_device_ids)
        self.ordinal = ordinal
        self.backend = backend
        runtime = backend.runtime
        self.slab = Slab(
            lambda nbytes: runtime.alloc(ordinal, nbytes), lambda mem: runtime.free(ordinal, mem)
        )
        self.lock = threading.RLock()
        self.hazards = BufferHazards()
        """Writers, readers and merge-buffer views of this device's buffers."""
        self.shared: dict[Tnode, BufferLoc] = {}
        self.streams: list[Stream] = []

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
        use it to force a schedule in which one stream lags behind the others."""
        self.queue.hold(seconds)

    def __repr__(self) -> str:
        return f"<Stream {self.name}>"


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
    ) -> None:
        self.backend = backend
        self.stream = stream
        self.parent = parent
        self.buffers: Mapping[Tnode, BufferLoc] = MappingProxyType(dict(buffers))
        if own_pools:
            weakref.finalize(self, _free_pools, stream.device, frozenset(own_pools))

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


def _free_pools(device: Device, pools: frozenset[int]) -> None:
    """Release a context's pools and forget the synchronization state of their buffers."""
    device.hazards.forget_pools(pools)
    for p in pools:
        device.slab.free_pool(p)


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
        locs = context.buffers
        self._reads: list[Key] = [
            (tn.id, locs[tn])
            for tn in opt.context_nodes
            if opt.traced[tn].read_only or opt.traced[tn].read_before_write
        ]
        self._writes: list[Key] = [(tn.id, locs[tn]) for tn in self.outputs]
        self._hosted_outputs = [(tn, locs[tn]) for tn in self.outputs if tn.is_hosted()]

    def schedule(self) -> None:
        """Schedule one run on the context's stream (what calling the routine does).

        Raises:
            UsageError: the backend was finalized, or the stream's merge buffer holds another
                node than the one this routine reads.
            StreamError: an earlier task on the stream failed.
        """
        backend = self.backend
        backend._check_live()
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
        for key in self._writes:  # write after other streams' reads and write
            backend._before_write(stream, key)
        reads = self._reads
        if want is not None and (view := table.view_of(stream)) is not None:
            reads = [*reads, view]  # a Streaming merge buffer reads the source's buffer
        for key in reads:
            table.order_read(stream, key)
        values = {s: self._bindings[s.name] for s in self._symbols}
        run = self._run
        queue.schedule(lambda: run(values))
        if self._writes or reads:
            table.record(stream, queue.all_work(), reads, self._writes)
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


class Backend:
    """A backend: a :class:`DeviceBackend` with contexts, buffers and synchronization.

    See ARCHITECTURE.md §4.2 for the interface; every method documents its errors.
    """

    def __init__(self, runtime: DeviceBackend) -> None:
        self.runtime = runtime
        self.name = runtime.name
        self.scheduler: str | None = getattr(runtime, "scheduler", None)
        """``"sync"`` or ``"multicore"`` for CPU backends, else None."""
        self.config = Config.MOST_PARALLEL_STREAMS
        self._initialized = False
        self._finalized = False
        self._devices = [Device(self, k) for k in range(runtime.num_devices())]
        self._capabilities = Capabilities(  # checked at every compile: computed once
            supported_precs=frozenset.intersection(
                *(runtime.supported_precs(d.ordinal) for d in self._devices)
            ),
            max_devices=len(self._devices),
            multiple_streams=True,
            unified_memory=runtime.unified_memory,
        )
        self._stream_ids = itertools.count()
        self.copies = 0
        """Host<->device and device<->device copies scheduled so far (for tests and debugging)."""

    # ---- life cycle ----

    def initialize(self, config: Config = Config.MOST_PARALLEL_STREAMS) -> None:
        """Set the stream strategy; safe to call again."""
        self._check_live()
        self.config = config
        self._initialized = True

    def is_initialized(self) -> bool:
        """Whether :meth:`initialize` was called."""
        return self._initialized

    def finalize(self) -> None:
        """Wait for all streams, stop their workers and release all memory. Later use raises
        :class:`UsageError`."""
        if self._finalized:
            return
        for dev in self._devices:
            for s in dev.streams:
                with contextlib.suppress(Exception):  # a failed stream must still be closed
                    s.queue.await_idle()
                s.queue.close()
            dev.slab.free_all()
        self.runtime.finalize()
        self._finalized = True

    def _check_live(self) -> None:
        if self._finalized:
            raise UsageError(f"backend {self.name} was finalized; create a fresh one")

    @property
    def capabilities(self) -> Capabilities:
        """What this backend supports (precisions: those every device supports)."""
        return self._capabilities

    # ---- devices and streams ----

    def num_devices(self) -> int:
        """Number of devices."""
        return len(self._devices)

    def get_device(self, ordinal: int = 0) -> Device:
        """The device with this ordinal.

        Raises:
            UsageError: ``ordinal`` is not an integer, or no such device.
        """
        self._check_live()
        if isinstance(ordinal, bool) or not isinstance(ordinal, (int, np.integer)):
            raise UsageError(
                f"get_device: ordinal must be an integer, got {ordinal!r} "
                f"({type(ordinal).__name__}) (backend {self.name})"
            )
        if not 0 <= ordinal < len(self._devices):
            raise UsageError(
                f"backend {self.name} has {len(self._devices)} device(s), so ordinal must be in "
                f"0..{len(self._devices) - 1}, got {ordinal}"
            )
        return self._devices[ordinal]

    def suggested_num_streams(self, device: Device) -> int:
        """The number of streams that suits the configured strategy."""
        self._check_device(device)
        return self.runtime.suggested_num_streams(device.ordinal, self.config.value)

    def new_stream(self, device: Device) -> Stream:
        """A new stream of ``device``."""
        self._check_device(device)
        index = next(self._stream_ids)
        queue = self.runtime.new_queue(device.ordinal, f"{self.name}:{device.ordinal}:{index}")
        stream = Stream(device, index, queue)
        device.streams.append(stream)
        return stream

    def get_name(self, stream: Stream) -> str:
        """``<backend>:<device ordinal>:<stream index>``."""
        return stream.name

    def _check_device(self, device: Device) -> None:
        self._check_live()
        if not isinstance(device, Device):
            raise UsageError(
                f"expected a Device of backend {self.name}, got {device!r} "
                f"({type(device).__name__})"
            )
        if device.backend is not self:
            raise UsageError(f"device {device!r} does not belong to backend {self.name}")

    def _check_context(self, ctx: Context, what: str) -> None:
        self._check_live()
        if not isinstance(ctx, Context):
            raise UsageError(
                f"{what}: expected a Context of backend {self.name}, got {ctx!r} "
                f"({type(ctx).__name__})"
            )
        if ctx.backend is not self:
            raise UsageError(
                f"{what}: the context belongs to backend {ctx.backend.name} "
                f"(stream {ctx.stream.name}), not to this {self.name} backend"
            )

    # ---- contexts ----

    def make_context(self, stream: Stream) -> Context:
        """A context on ``stream`` without a parent."""
        self._check_device(stream.device)
        return Context(self, stream, None, {})

    def make_child(self, ctx: Context) -> Context:
        """A context with ``ctx``'s stream and buffers, and ``ctx`` as its parent."""
        self._check_context(ctx, "make_child")
        return Context(self, ctx.stream, ctx, ctx.buffers)

    # ---- compiling and linking ----

    def compile(
        self,
        comp: Comp | Assignment,
        name: str = "routine",
        bindings: Sequence[StaticSymbol] = (),
    ) -> Code:
        """Lower, optimize and compile a computation.

        Raises:
            UsageError: unbound static symbols, a precision the backend does not support, or
                other invalid computations.
            CompileError: the native compiler failed.
        """
        self._check_live()
        check_compile_args(comp, name, bindings)
        c = Comp.of(comp)
        llc = lower(c)
        opt = optimize(llc, name=name, static_symbols=tuple(bindings))
        opt = with_static_ranges(opt, llc, tuple(bindings))
        self._check_precs(opt)
        kind = self.runtime.code_kind()
        code = Code(name, opt, self.runtime.compile(opt), c.embedded_nodes, kind)
        self._write_debug(code)
        return code

    def compile_batch(
        self,
        comps: Sequence[Comp | Assignment],
        names: Sequence[str],
        bindings: Sequence[StaticSymbol] = (),
    ) -> list[Code]:
        """Compile several computations that will run in one context lineage: nodes several of
        them touch are never virtual or local."""
        self._check_live()
        if len(comps) != len(names):
            raise UsageError(f"compile_batch: {len(comps)} computations but {len(names)} names")
        for comp, name in zip(comps, names):
            check_compile_args(comp, name, bindings)
        cs = [Comp.of(c) for c in comps]
        llcs = [lower(c) for c in cs]
        opts = optimize_batch(llcs, list(names), tuple(bindings))
        opts = [with_static_ranges(o, llc, tuple(bindings)) for o, llc in zip(opts, llcs)]
        for o in opts:
            self._check_precs(o)
        natives = self.runtime.compile_batch(opts)
        kind = self.runtime.code_kind()
        codes = [
            Code(n, o, nat, c.embedded_nodes, kind)
            for n, o, nat, c in zip(names, opts, natives, cs)
        ]
        for code in codes:
            self._write_debug(code)
        return codes

    def _write_debug(self, code: Code) -> None:
        """With ``ARRAYJIT_DEBUG_DIR`` set: the routine's optimized IR and generated source."""
        directory = settings.debug_dir()
        if directory is None:
            return
        directory.mkdir(parents=True, exist_ok=True)
        stem = directory / f"{self.name}-{code.name}"
        stem.with_suffix(".ir.txt").write_text(pretty(code.optimized.code) + "\n")
        source = self.runtime.source_of(code.native)
        if source is not None:
            stem.with_suffix(".src.txt").write_text(source)

    def _check_precs(self, opt: Optimized) -> None:
        supported = self.capabilities.supported_precs
        for tn in opt.traced:
            if tn.prec not in supported:
                raise UsageError(
                    f"compile {opt.name}: node {tn.debug_label} has precision {tn.prec.name}, "
                    f"which backend {self.name} does not support (it supports "
                    f"{', '.join(sorted(p.name for p in supported))})"
                )

    def link(self, ctx: Context, code: Code) -> Routine:
        """Bind compiled code to a child of ``ctx`` that has buffers for every node the code
        keeps in context; hosted nodes are uploaded when first linked.

        Raises:
            UsageError: ``ctx`` belongs to another backend, the code was compiled by another
                kind of backend, or the code reads a node that is neither hosted nor computed
                by an earlier routine of this context lineage.
        """
        if not isinstance(code, Code):
            raise UsageError(f"link: expected the Code of a compile, got {code!r}")
        self._check_context(ctx, f"link {code.name}")
        check_code_kind(code.kind, self.runtime.code_kind(), code.name, self.name)
        child = self._extend(ctx, code)
        stream = child.stream
        bufs = {tn: child.buf(tn) for tn in code.optimized.context_nodes}

        def merge() -> Buf | None:
            return stream.merge_src

        run = self.runtime.link(
            code.native,
            stream.queue,
            child.device.ordinal,
            bufs,
            merge,
            code.optimized.merge_node,
        )
        return Routine(self, child, code, run)

    def link_batch(self, ctx: Context, codes: Sequence[Code]) -> list[Routine]:
        """Link several codes in a chain: each routine's context is the child of the previous
        one's, so later routines see earlier routines' buffers."""
        routines = []
        for code in codes:
            r = self.link(ctx, code)
            routines.append(r)
            ctx = r.context
        return routines

    def _extend(self, ctx: Context, code: Code) -> Context:
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
        shared = [tn for tn in new if tn.potentially_cross_stream()]
        private = [tn for tn in new if not tn.potentially_cross_stream()]
        pools: list[int] = []
        with dev.lock:
            missing_shared = [tn for tn in shared if tn not in dev.shared]
            for tn, loc in zip(missing_shared, self._pack(dev, missing_shared, pools=None)):
                dev.shared[tn] = loc
            for tn in shared:
                buffers[tn] = dev.shared[tn]
        for tn, loc in zip(private, self._pack(dev, private, pools)):
            buffers[tn] = loc
        child = Context(self, ctx.stream, ctx, buffers, pools)
        for tn in new:
            if tn.is_hosted() and (tn in private or tn in missing_shared):
                self._upload(child, tn)
        return child

    def _pack(self, dev: Device, nodes: list[Tnode], pools: list[int] | None) -> list[BufferLoc]:
        if not nodes:
            return []
        items = [(tn.size_in_bytes, tn.prec.byte_size) for tn in nodes]
        plan = plan_pool_segments(items, DEFAULT_POOL_CAP, [tn.debug_label for tn in nodes])
        ids = [dev.slab.alloc_pool(size) for size in plan.sizes]
        if pools is not None:
            pools.extend(ids)
        return [BufferLoc(ids[seg], off) for seg, off in plan.placements]

    # ---- transfers ----

    def _before_write(self, stream: Stream, key: Key) -> None:
        """Order a write of buffer ``key`` of ``stream``'s device (scheduled next on
        ``stream``): merge buffers reading that buffer directly get their own copy of the
        value they were sent, then the write waits for other streams' readers and writer."""
        table = stream.device.hazards
        if table.views:
            for viewer, tn in table.viewers(key):
                self._merge_copy(viewer, tn, key[1], stream.device)
                table.drop_view(viewer)
        table.order_write(stream, key)

    def _merge_copy(self, stream: Stream, tn: Tnode, loc: BufferLoc, src_dev: Device) -> Event:
        """Schedule on ``stream`` a copy of ``tn``'s buffer ``loc`` on ``src_dev`` into the
        stream's own merge buffer, ordered after that buffer's writer; later writers of the
        buffer wait for it."""
        key = (tn.id, loc)
        src_dev.hazards.order_read(stream, key)
        queue, runtime = stream.queue, self.runtime
        src_buf, src_ordinal, nbytes = src_dev.slab.buf(loc), src_dev.ordinal, tn.size_in_bytes
        merge_buf = stream.merge_buffer_for(tn)

        def copy_merge() -> None:
            runtime.copy(queue, merge_buf, src_buf, nbytes, src_ordinal)
            stream.merge_src = merge_buf

        queue.schedule(copy_merge)
        self.copies += 1
        event = queue.all_work()
        src_dev.hazards.record(stream, event, reads=[key])
        return event

    def _check_host_array(self, tn: Tnode, what: str) -> np.ndarray:
        arr = tn.array
        assert arr is not None
        shape = tn.prec.host_shape(tn.dims)
        if arr.shape != shape or arr.dtype != tn.prec.numpy_dtype:
            raise UsageError(
                f"{what}: node {tn.debug_label} has a host array of shape {list(arr.shape)} and "
                f"dtype {arr.dtype}, expected shape {list(shape)} and dtype {tn.prec.numpy_dtype}"
                f" (backend {self.name})"
            )
        if not arr.flags.c_contiguous:
            raise UsageError(
                f"{what}: node {tn.debug_label}'s host array is not C-contiguous "
                f"(backend {self.name})"
            )
        return arr

    def _upload(self, ctx: Context, tn: Tnode) -> None:
        arr = self._check_host_array(tn, "from_host")
        stream, dev, loc = ctx.stream, ctx.device, ctx.buffers[tn]
        key = (tn.id, loc)
        self._before_write(stream, key)
        hazards.order_upload(tn, stream)  # after copies into the host array requested before
        buf, runtime, queue = ctx.buf(tn), self.runtime, stream.queue
        queue.schedule(lambda: runtime.to_device(queue, buf, arr))
        self.copies += 1
        event = queue.all_work()
        hazards.record_upload(tn, stream, event)  # set_values waits for it
        dev.hazards.record(stream, event, writes=[key])
        hazards.mark_fresh(tn, dev.id, loc)

    def from_host(self, ctx: Context, tn: Tnode) -> bool:
        """Schedule a copy of ``tn``'s host array into its buffer in ``ctx``. No copy is made
        when that buffer already holds the node's latest value: it read the host array since
        the host array last changed, or it computed the node's latest value itself.

        Returns:
            False where ``tn`` is not hosted or has no buffer in ``ctx``.

        Raises:
            UsageError: the host array's shape or dtype does not match the node.
        """
        self._check_context(ctx, "from_host")
        if not tn.is_hosted() or tn not in ctx.buffers:
            return False
        self._check_host_array(tn, "from_host")
        if hazards.is_fresh(tn, ctx.device.id, ctx.buffers[tn]):
            return True
        self._upload(ctx, tn)
        return True

    def to_host(self, ctx: Context, tn: Tnode) -> bool:
        """Schedule a copy of ``tn``'s buffer in ``ctx`` to its host array; ``get_values()``
        waits for it.

        Returns:
            False where ``tn`` is not hosted or has no buffer in ``ctx``.
        """
        self._check_context(ctx, "to_host")
        if not tn.is_hosted() or tn not in ctx.buffers:
            return False
        arr = self._check_host_array(tn, "to_host")
        stream, dev, loc = ctx.stream, ctx.device, ctx.buffers[tn]
        key = (tn.id, loc)
        dev.hazards.order_read(stream, key)
        hazards.order_download(tn, stream)  # transfers of the host array land in request order
        buf, runtime, queue = ctx.buf(tn), self.runtime, stream.queue
        queue.schedule(lambda: runtime.to_host(queue, arr, buf))
        self.copies += 1
        event = queue.all_work()
        hazards.record_download(tn, stream, event)  # get_values waits for it
        dev.hazards.record(stream, event, reads=[key])
        hazards.mark_only_fresh(tn, dev.id, loc)  # other buffers may hold other values
        return True

    def device_to_device(
        self, tn: Tnode, into_merge_buffer: MergeMode, dst: Context, src: Context
    ) -> bool:
        """Send ``src``'s value of ``tn`` to ``dst``: into ``dst``'s own buffer (``No``), into
        ``dst``'s stream's merge buffer (``Copy``), or letting that merge buffer read ``src``'s
        buffer directly (``Streaming``; a copy where the devices differ). Ordered after
        ``src``'s writer and before ``dst``'s next reader.

        Returns:
            False where ``tn`` is not in ``src`` (or, for ``No``, not in ``dst``).
        """
        self._check_context(dst, "device_to_device (dst)")
        self._check_context(src, "device_to_device (src)")
        if tn not in src.buffers:
            return False
        stream, queue, runtime = dst.stream, dst.stream.queue, self.runtime
        src_dev, src_loc = src.device, src.buffers[tn]
        src_key = (tn.id, src_loc)
        if into_merge_buffer is MergeMode.No:
            if tn not in dst.buffers:
                return False
            if dst.device is src_dev and dst.buffers[tn] == src_loc:
                return True  # one buffer shared by both streams
            dst_loc = dst.buffers[tn]
            dst_key = (tn.id, dst_loc)
            src_dev.hazards.order_read(stream, src_key)
            self._before_write(stream, dst_key)
            src_buf, src_ordinal, nbytes = src.buf(tn), src_dev.ordinal, tn.size_in_bytes
            dst_buf = dst.buf(tn)
            queue.schedule(lambda: runtime.copy(queue, dst_buf, src_buf, nbytes, src_ordinal))
            self.copies += 1
            event = queue.all_work()
            dst.device.hazards.record(stream, event, writes=[dst_key])
            src_dev.hazards.record(stream, event, reads=[src_key])
            if tn.is_hosted():  # the destination now holds what the source held
                if hazards.is_fresh(tn, src_dev.id, src_loc):
                    hazards.mark_fresh(tn, dst.device.id, dst_loc)
                else:
                    hazards.mark_stale(tn, dst.device.id, dst_loc)
            return True
        stream.merge_node = tn
        dst.device.hazards.drop_view(stream)
        if into_merge_buffer is MergeMode.Copy or dst.device is not src_dev:
            self._merge_copy(stream, tn, src_loc, src_dev)
            return True
        # Streaming: the merge buffer is the source's buffer. Routines reading it count as
        # readers of that buffer, and a write to it first gives the merge buffer a copy.
        src_dev.hazards.order_read(stream, src_key)
        src_buf = src.buf(tn)

        def stream_merge() -> None:
            stream.merge_src = src_buf

        queue.schedule(stream_merge)
        src_dev.hazards.record(stream, queue.all_work(), reads=[src_key])
        src_dev.hazards.set_view(stream, tn, src_key)
        return True

    # ---- events ----

    def all_work(self, stream: Stream) -> Event:
        """An event done once everything scheduled on ``stream`` so far has run."""
        self._check_live()
        return stream.queue.all_work()

    def is_done(self, event: Event) -> bool:
        """Whether ``event`` is done."""
        return event.is_done()

    def sync(self, event: Event) -> None:
        """Block until ``event`` is done."""
        event.sync()

    def will_wait_for(self, ctx: Context, event: Event) -> None:
        """Make ``ctx``'s stream wait for ``event`` before its later work."""
        self._check_context(ctx, "will_wait_for")
        ctx.stream.queue.wait_for(event)

    def await_stream(self, stream: Stream) -> None:
        """Block until ``stream`` is idle; re-raises a failed task as :class:`StreamError`."""
        self._check_live()
        stream.queue.await_idle()

    def is_idle(self, stream: Stream) -> bool:
        """Whether ``stream`` has no queued or running work."""
        return stream.queue.is_idle()

    # ---- tasks of other packages (arrayjit-distributed's collectives) ----

    def schedule_task(
        self,
        ctx: Context,
        task: Callable[[], None],
        *,
        reads: Sequence[Tnode] = (),
        writes: Sequence[Tnode] = (),
    ) -> Event:
        """Schedule ``task`` on ``ctx``'s stream, ordered like a routine that reads the buffers
        of ``reads`` and writes (in place) those of ``writes`` in ``ctx``: it waits for their
        writers (and, for ``writes``, their readers) on other streams, and later readers and
        writers on any stream wait for it. Written hosted nodes count as changed on this
        device (``from_host``/``to_host`` see that). For a device backend the task runs at
        once and enqueues device work (see :class:`ImmediateQueue`).

        Returns:
            The event done once the task (and its device work) has run.

        Raises:
            UsageError: a node has no buffer in ``ctx``, or ``ctx`` belongs to another backend.
            StreamError: an earlier task on the stream failed.
        """
        self._check_context(ctx, "schedule_task")
        for tn in (*reads, *writes):
            if tn not in ctx.buffers:
                raise UsageError(
                    f"schedule_task: node {tn.debug_label} has no buffer in the context on "
                    f"{ctx.stream.name} (backend {self.name})"
                )
        stream, dev = ctx.stream, ctx.device
        read_keys = [(tn.id, ctx.buffers[tn]) for tn in reads]
        write_keys = [(tn.id, ctx.buffers[tn]) for tn in writes]
        for key in write_keys:
            self._before_write(stream, key)
        for key in read_keys:
            dev.hazards.order_read(stream, key)
        stream.queue.schedule(task)
        event = stream.queue.all_work()
        dev.hazards.record(stream, event, read_keys, write_keys)
        for tn in writes:
            if tn.is_hosted():
                hazards.mark_only_fresh(tn, dev.id, ctx.buffers[tn])
        return event

    # ---- memory and debugging ----

    def get_used_memory(self, device: Device) -> int:
        """Bytes of live buffers on ``device`` (pools and merge buffers)."""
        return device.slab.used_bytes + sum(s.merge_capacity for s in device.streams)

    def get_debug_info(self, stream: Stream) -> dict[str, Any]:
        """Per-stream state."""
        info = stream.queue.debug_info()
        info["merge_node"] = stream.merge_node.debug_label if stream.merge_node else None
        return info

    def get_global_debug_info(self) -> dict[str, Any]:
        """Backend-wide state."""
        return {
            "backend": self.name,
            "runtime": self.runtime.describe(),
            "devices": [self.runtime.device_info(d.ordinal) for d in self._devices],
            "streams": sum(len(d.streams) for d in self._devices),
            "memory": [d.slab.debug_info() for d in self._devices],
            "copies": self.copies,
            "finalized": self._finalized,
        }

    def __repr__(self) -> str:
        return f"<Backend {self.name}>"


def make_cpu_backend(full_name: str, scheduler_prefix: str, no_device: NoDeviceBackend) -> Backend:
    """The Backend of a CPU compiler under a scheduler (``"sync"`` or ``"multicore"``)."""
    return Backend(CpuDevices(full_name, scheduler_prefix, no_device))


__all__ = [
    "Backend",
    "Bindings",
    "Capabilities",
    "Code",
    "Config",
    "Context",
    "Device",
    "MergeMode",
    "Routine",
    "Stream",
    "make_cpu_backend",
]
