"""The generic Backend: the facade users call (devices, streams, contexts, compiling,
linking, transfers, events, memory), one implementation for every backend.

It speaks only the device form (:class:`~arrayjit_backends.impl.device.DeviceBackend`), and CPU
compilers reach that form through :class:`~arrayjit_backends.runtime.cpu_devices.CpuDevices`. Each
method checks its arguments (errors name the node, backend and stream), then builds or uses:

- :mod:`~arrayjit_backends.runtime.values`: devices, streams, contexts, buffers and code;
- :mod:`~arrayjit_backends.runtime.routine`: routines (calling one schedules it), the contexts
  linking builds, and the tasks of other packages (``schedule_task``);
- :mod:`~arrayjit_backends.runtime.transfers`: ``from_host``, ``to_host`` and ``device_to_device``;
- :mod:`~arrayjit_backends.runtime.hazards`: per device and buffer, the last writer's event and the
  streams reading it, from which the waits are inserted, so users never need ``will_wait_for``
  for correctness:

  - a routine reading a buffer that another stream is writing waits for that writer's event;
  - ``from_host`` into a buffer waits for the streams still reading or writing it, and for
    copies into the host array requested before it;
  - ``to_host`` runs after the buffer's writer and after the transfers of the host array
    requested before it, and installs ``prepare_read`` on the node, so ``get_values()`` waits
    for the copy;
  - ``device_to_device`` orders the copy after the source's writer and before the
    destination's next reader; a ``Streaming`` merge buffer is a reader of the source's
    buffer, and a write to that buffer first gives the merge buffer its own copy.
"""

from __future__ import annotations

import contextlib
import enum
import itertools
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, overload

import numpy as np

from arrayjit_backends.impl.device import Buf, DeviceBackend
from arrayjit_backends.impl.stream_queue import DONE, Event, Passed
from arrayjit_backends.runtime import arg_checks as checks
from arrayjit_backends.runtime import routine, trace, transfers
from arrayjit_backends.runtime.bindings import (
    check_code_kind,
    check_compile_args,
    check_host_memory_types,
    with_static_ranges,
)
from arrayjit_backends.runtime.debug_output import write_debug
from arrayjit_backends.runtime.interop import ExternalArray
from arrayjit_backends.runtime.routine import Routine, extend, given_buffers
from arrayjit_backends.runtime.slab import BufferLoc
from arrayjit_backends.runtime.transfers import MergeMode
from arrayjit_backends.runtime.values import Buffer, Code, Context, Device, Stream, free_pools
from arrayjit_ir import lower, optimize, optimize_batch
from arrayjit_ir.assignments import Assignment, Comp
from arrayjit_ir.indexing import StaticSymbol
from arrayjit_ir.optimized import Optimized
from arrayjit_tnode import Prec, StreamError, Tnode, UsageError, precision
from arrayjit_tnode import memory_mode as mm


class Config(enum.Enum):
    """How many streams a device should be used with."""

    ONLY_DEVICES_PARALLEL = "only_devices_parallel"
    FOR_PARALLEL_COPYING = "for_parallel_copying"
    MOST_PARALLEL_STREAMS = "most_parallel_streams"


@dataclass(frozen=True)
class Capabilities:
    """What a backend supports; the conformance suite skips the rest with these reasons."""

    supported_precs: frozenset[Prec]
    max_devices: int
    multiple_streams: bool
    unified_memory: bool
    use_host_memory: bool = False
    """Whether :meth:`Backend.use_host_memory` is available: routines can run on the host
    arrays of hosted nodes directly (the seed's ``use_host_memory``, only on unified memory)."""


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
            use_host_memory=runtime.unified_memory,
        )
        self._host_memory_nodes: weakref.WeakSet[Tnode] = weakref.WeakSet()
        """Nodes declared by :meth:`use_host_memory`."""
        self._placed: weakref.WeakSet[Tnode] = weakref.WeakSet()
        """Nodes that got a buffer from this backend (too late to declare them)."""
        self._stream_ids = itertools.count()
        self.copies = 0
        """Host<->device and device<->device copies scheduled so far (for tests and debugging)."""

    # ---- life cycle ----

    def initialize(self, config: Config = Config.MOST_PARALLEL_STREAMS) -> None:
        """Set the stream strategy (a :class:`Config`, or its name as text, any case); safe
        to call again.

        Raises:
            UsageError: ``config`` names no strategy (the message lists them).
        """
        self.check_live()
        if not isinstance(config, Config):
            by_name = {c.value: c for c in Config} | {c.name.lower(): c for c in Config}
            found = by_name.get(config.strip().lower()) if isinstance(config, str) else None
            if found is None:
                raise UsageError(
                    f"initialize: config must be one of "
                    f"{', '.join(f'Config.{c.name}' for c in Config)}, got {config!r} "
                    f"(backend {self.name})"
                )
            config = found
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

    def check_live(self) -> None:
        """Raise :class:`UsageError` once the backend is finalized (the calls that do work,
        and running a routine, start with this)."""
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
        self.check_live()
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
        checks.check_device(self, device, "suggested_num_streams")
        return self.runtime.suggested_num_streams(device.ordinal, self.config.value)

    def new_stream(self, device: Device) -> Stream:
        """A new stream of ``device``."""
        checks.check_device(self, device, "new_stream")
        index = next(self._stream_ids)
        queue = self.runtime.new_queue(device.ordinal, f"{self.name}:{device.ordinal}:{index}")
        stream = Stream(device, index, queue)
        device.streams.append(stream)
        return stream

    def get_name(self, stream: Stream) -> str:
        """``<backend>:<device ordinal>:<stream index>``."""
        checks.check_stream(self, stream, "get_name", live=False)
        return stream.name

    # ---- contexts ----

    def make_context(
        self, stream: Stream, ctx_arrays: Mapping[Tnode, Buffer | ExternalArray] | None = None
    ) -> Context:
        """A context on ``stream`` without a parent, holding ``ctx_arrays`` (none by default).

        A given buffer is the node's buffer as it is (what the context it came from left in
        it, or zeros for a fresh one): linking uploads nothing into it, not even for a hosted
        node. Synchronization is tracked per node and buffer, so contexts sharing a buffer on
        different streams are ordered as usual.

        On CPU backends a given value may also be an array of another library (anything with
        ``__dlpack__`` or ``__array_interface__``: numpy, jax, torch, ``Context.array``): the
        node's buffer is then that array's memory, without a copy, and the context keeps the
        array alive. It must be host memory with the node's dtype and host shape,
        C-contiguous, aligned to the element size; routines that write the node write into
        it (give a read-only array, such as a jax array, only for nodes the routines read).
        On CUDA it may be an array of the stream's GPU (DLPack on ``kDLCUDA``, or
        ``__cuda_array_interface__``: CuPy, torch), checked the same way and ordered on the
        device: its producer's work on it comes before the context's first use.

        Raises:
            UsageError: ``stream`` is not a stream of this backend, or a given buffer is not a
                :class:`Buffer` of the stream's device, is smaller than its node, or is not
                aligned to the node's element size; or a given array is not host memory (on
                CUDA: not memory of the stream's GPU), the backend computes on device memory
                it cannot import, or the array's dtype, shape, strides or
                alignment do not fit the node (the message names the node, expected and found).
        """
        checks.check_stream(self, stream, "make_context")
        locs, given = given_buffers(stream, ctx_arrays, "make_context")
        self._placed.update(locs)
        return Context(self, stream, None, locs, given=given)

    def make_child(
        self, ctx: Context, ctx_arrays: Mapping[Tnode, Buffer | ExternalArray] | None = None
    ) -> Context:
        """A context with ``ctx``'s stream and ``ctx`` as its parent; its buffers are
        ``ctx_arrays`` when given (replacing the parent's, as in the seed), else the parent's.

        Raises:
            UsageError: as :meth:`make_context`.
        """
        checks.check_context(self, ctx, "make_child")
        if ctx_arrays is None:
            return Context(self, ctx.stream, ctx, ctx.buffers)
        locs, given = given_buffers(ctx.stream, ctx_arrays, "make_child")
        self._placed.update(locs)
        return Context(self, ctx.stream, ctx, locs, given=given)

    def alloc_buffer(
        self, size_in_bytes: int, stream: Stream, old_buffer: Buffer | None = None
    ) -> Buffer:
        """A buffer of at least ``size_in_bytes`` on ``stream``'s device: ``old_buffer``
        itself when it is on that device and large enough (its contents kept), else a new,
        zero-filled one (the old one is then released once nothing uses it). Counted by
        :meth:`get_used_memory` while it lives.

        Raises:
            UsageError: ``size_in_bytes`` is not a non-negative integer, ``stream`` is not a
                stream of this backend, or ``old_buffer`` is not a :class:`Buffer`.
        """
        checks.check_stream(self, stream, "alloc_buffer")
        if isinstance(size_in_bytes, bool) or not isinstance(size_in_bytes, (int, np.integer)):
            raise UsageError(
                f"alloc_buffer: size_in_bytes must be an integer, got {size_in_bytes!r}"
            )
        if size_in_bytes < 0:
            raise UsageError(f"alloc_buffer: size_in_bytes must be >= 0, got {size_in_bytes}")
        dev = stream.device
        if old_buffer is not None:
            if not isinstance(old_buffer, Buffer):
                raise UsageError(f"alloc_buffer: old_buffer must be a Buffer, got {old_buffer!r}")
            if old_buffer.device is dev and old_buffer.size_in_bytes >= size_in_bytes:
                return old_buffer
        pool = dev.slab.alloc_pool(int(size_in_bytes))
        buf = Buffer(dev, BufferLoc(pool, 0), int(size_in_bytes), None)
        weakref.finalize(buf, free_pools, dev, frozenset([pool]))
        return buf

    def alloc_zero_init_array(self, prec: Prec, dims: Sequence[int], stream: Stream) -> Buffer:
        """A new zero-filled buffer for an array of ``prec`` (a :class:`Prec` or its name, as
        ``Tnode.create`` takes) and ``dims`` (the seed's ``alloc_zero_init_array``).

        Raises:
            UsageError: as :meth:`alloc_buffer`, ``prec`` is not a precision, or ``dims`` is
                not a sequence of non-negative integers.
        """
        if not isinstance(prec, (Prec, str)):
            raise UsageError(f"alloc_zero_init_array: prec must be a Prec, got {prec!r}")
        prec = precision.parse(prec)
        if not isinstance(dims, Sequence) or any(
            isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 0 for d in dims
        ):
            raise UsageError(
                f"alloc_zero_init_array: dims must be a sequence of non-negative integers, "
                f"got {dims!r} (backend {self.name})"
            )
        nbytes = prec.byte_size * int(np.prod([int(d) for d in dims], dtype=np.int64))
        return self.alloc_buffer(nbytes, stream)

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
            MemoryModeError: the computation writes a ``Hosted(Constant)`` or
                ``Hosted(Volatile)`` node (see
                :func:`~arrayjit_backends.runtime.bindings.check_host_memory_types`).
            CompileError: the native compiler failed.
        """
        self.check_live()
        symbols = check_compile_args(comp, name, bindings)
        tracer = trace.tracer
        with (
            contextlib.nullcontext()
            if tracer is None
            else tracer.span(f"compile {name}", "compile", {"backend": self.name})
        ):
            c = Comp.of(comp)
            llc = lower(c)
            opt = optimize(llc, name=name, static_symbols=symbols)
            opt = with_static_ranges(opt, llc, symbols)
            self._check_precs(opt)
            check_host_memory_types(opt)
            kind = self.runtime.code_kind()
            code = Code(name, opt, self.runtime.compile(opt), c.embedded_nodes, kind)
        self._write_debug(code)
        return code

    @overload
    def compile_batch(
        self,
        comps: Sequence[Comp | Assignment],
        names: Sequence[str],
        bindings: Sequence[StaticSymbol] = ...,
    ) -> list[Code]: ...
    @overload
    def compile_batch(
        self,
        comps: Sequence[Comp | Assignment | None],
        names: Sequence[str | None],
        bindings: Sequence[StaticSymbol] = ...,
    ) -> list[Code | None]: ...
    def compile_batch(
        self,
        comps: Sequence[Comp | Assignment | None],
        names: Sequence[str | None],
        bindings: Sequence[StaticSymbol] = (),
    ) -> list[Code] | list[Code | None]:
        """Compile several computations that will run in one context lineage: nodes several of
        them touch are never virtual or local.

        As in the seed, entries are optional: a ``None`` computation gives a ``None`` code at
        its position (its name may be ``None`` too), so a batch keeps the positions of a
        caller's table; :meth:`link_batch` passes ``None`` codes through as ``None`` routines.

        Raises:
            UsageError: ``comps`` and ``names`` differ in length, a computation has no name,
                or any error of :meth:`compile`.
            MemoryModeError: a computation writes a hosted node that must not change on
                devices (see :func:`~arrayjit_backends.runtime.bindings.check_host_memory_types`).
        """
        self.check_live()
        for what, seq in (("comps", comps), ("names", names)):
            if isinstance(seq, str) or not isinstance(seq, Sequence):
                # a string of names would be taken letter by letter
                raise UsageError(
                    f"compile_batch: {what} must be a list, got {seq!r} "
                    f"({type(seq).__name__}) (backend {self.name})"
                )
        if len(comps) != len(names):
            raise UsageError(f"compile_batch: {len(comps)} computations but {len(names)} names")
        present = [k for k, comp in enumerate(comps) if comp is not None]
        symbols: tuple[StaticSymbol, ...] = ()
        for k in present:
            comp, name = comps[k], names[k]
            if name is None:
                raise UsageError(f"compile_batch: entry {k} has a computation but no name")
            symbols = check_compile_args(comp, name, bindings)
        cs = [Comp.of(comps[k]) for k in present]  # type: ignore[arg-type]
        llcs = [lower(c) for c in cs]
        given = [names[k] for k in present]
        opts = optimize_batch(llcs, given, symbols)  # type: ignore[arg-type]
        opts = [with_static_ranges(o, llc, symbols) for o, llc in zip(opts, llcs)]
        for o in opts:
            self._check_precs(o)
            check_host_memory_types(o)
        natives = self.runtime.compile_batch(opts) if opts else []
        kind = self.runtime.code_kind()
        codes: list[Code | None] = [None] * len(comps)
        for k, o, nat, c in zip(present, opts, natives, cs):
            code = Code(o.name, o, nat, c.embedded_nodes, kind)
            self._write_debug(code)
            codes[k] = code
        return codes

    def _write_debug(self, code: Code) -> None:
        """With ``ARRAYJIT_DEBUG_DIR`` set: the routine's optimized IR and generated source."""
        write_debug(self.name, code.name, code.optimized, self.runtime.source_of(code.native))

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
            StreamError: the context's stream failed (it refuses new work).
        """
        if not isinstance(code, Code):
            raise UsageError(f"link: expected the Code of a compile, got {code!r}")
        checks.check_context(self, ctx, f"link {code.name}")
        check_code_kind(code.kind, self.runtime.code_kind(), code.name, self.name)
        ctx.stream.queue.check()  # a failed stream refuses new routines
        child = extend(ctx, code, self._host_memory_nodes, self._placed)
        stream = child.stream
        bufs = {tn: child.buf(tn) for tn in code.optimized.context_nodes}

        def merge() -> Buf | None:
            return stream.merge_src

        tracer = trace.tracer
        with (
            contextlib.nullcontext()
            if tracer is None
            else tracer.span(f"link {code.name}", "link", {"stream": stream.name})
        ):
            run = self.runtime.link(
                code.native,
                stream.queue,
                child.device.ordinal,
                bufs,
                merge,
                code.optimized.merge_node,
            )
        return Routine(self, child, code, run)

    @overload
    def link_batch(self, ctx: Context, codes: Sequence[Code]) -> list[Routine]: ...
    @overload
    def link_batch(self, ctx: Context, codes: Sequence[Code | None]) -> list[Routine | None]: ...
    def link_batch(
        self, ctx: Context, codes: Sequence[Code | None]
    ) -> list[Routine] | list[Routine | None]:
        """Link several codes in a chain: each routine's context is the child of the previous
        one's, so later routines see earlier routines' buffers. A ``None`` code (an absent
        entry of :meth:`compile_batch`) gives a ``None`` routine and leaves the chain as it
        is."""
        if not isinstance(codes, Sequence) or isinstance(codes, (str, Code)):
            raise UsageError(
                f"link_batch: expected a list of Codes (from compile_batch), got {codes!r} "
                f"({type(codes).__name__}) (backend {self.name})"
            )
        routines: list[Routine | None] = []
        for code in codes:
            if code is None:
                routines.append(None)
                continue
            r = self.link(ctx, code)
            routines.append(r)
            ctx = r.context
        return routines

    # ---- host memory (the seed's use_host_memory) ----

    def use_host_memory(self, tn: Tnode) -> None:
        """Declare that routines of this backend compute on ``tn``'s host array directly: its
        buffer in every context is the host array itself, so nothing is copied in or out
        (``from_host`` and ``to_host`` copy nothing and return True). Ordering is kept as for
        any buffer: ``get_values()`` waits for the routines writing the node, ``set_values()``
        for those reading or writing it, and other streams wait as usual. Routines keep
        computing on the array that was the host array when the node was first linked.

        Raises:
            UsageError: the backend cannot (``capabilities.use_host_memory`` is False: its
                device memory is not host memory), ``tn`` is not hosted, its sharing is
                ``Per_stream`` (one host array cannot be a buffer per stream), or it already
                has a buffer from this backend (declare before linking).
        """
        self.check_live()
        if not isinstance(tn, Tnode):
            raise UsageError(f"use_host_memory: expected a Tnode, got {tn!r}")
        if not self.capabilities.use_host_memory:
            raise UsageError(
                f"use_host_memory: backend {self.name} cannot compute on host arrays directly "
                f"(its device memory is not host memory); node {tn.debug_label} is copied by "
                f"from_host and to_host"
            )
        if not tn.is_hosted():
            raise UsageError(
                f"use_host_memory: node {tn.debug_label} is not hosted (memory mode "
                f"{tn.memory_mode}); create it with hosted=True"
            )
        if tn.sharing is mm.Sharing.Per_stream:
            raise UsageError(
                f"use_host_memory: node {tn.debug_label} has sharing Per_stream, but its one "
                f"host array cannot be a buffer per stream"
            )
        if tn in self._placed and tn not in self._host_memory_nodes:
            raise UsageError(
                f"use_host_memory: node {tn.debug_label} already has a buffer on backend "
                f"{self.name}; declare it before linking a routine that uses it"
            )
        self._host_memory_nodes.add(tn)

    # ---- transfers (transfers.py) ----

    def from_host(self, ctx: Context, tn: Tnode) -> bool:
        """Schedule a copy of ``tn``'s host array into its buffer in ``ctx``. No copy is made
        when that buffer already holds the node's latest value: it read the host array since
        the host array last changed, or it computed the node's latest value itself.

        Returns:
            False where ``tn`` is not hosted or has no buffer in ``ctx``.

        Raises:
            UsageError: the host array's shape or dtype does not match the node.
        """
        checks.check_context(self, ctx, "from_host")
        checks.check_node(self, tn, "from_host")
        ctx.stream.queue.check()  # a failed stream refuses work, even work with nothing to do
        return transfers.from_host(ctx, tn)

    def to_host(self, ctx: Context, tn: Tnode) -> bool:
        """Schedule a copy of ``tn``'s buffer in ``ctx`` to its host array; ``get_values()``
        waits for it.

        Returns:
            False where ``tn`` is not hosted or has no buffer in ``ctx``.
        """
        checks.check_context(self, ctx, "to_host")
        checks.check_node(self, tn, "to_host")
        return transfers.to_host(ctx, tn)

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
        checks.check_context(self, dst, "device_to_device (dst)")
        checks.check_context(self, src, "device_to_device (src)")
        checks.check_node(self, tn, "device_to_device")
        checks.check_mode(self, into_merge_buffer, "device_to_device")
        dst.stream.queue.check()  # a failed stream refuses work, even work with nothing to do
        return transfers.device_to_device(tn, into_merge_buffer, dst, src)

    # ---- events ----

    def all_work(self, stream: Stream) -> Event:
        """An event done once everything scheduled on ``stream`` so far has run."""
        checks.check_stream(self, stream, "all_work")
        return self._named(stream, stream.queue.all_work())

    @staticmethod
    def _named(stream: Stream, event: Event) -> Event:
        """``event``, or for :data:`DONE` (a point of no stream) a passed point of ``stream``:
        the events users get name their stream."""
        return Passed(stream.name) if event is DONE else event

    def is_done(self, event: Event) -> bool:
        """Whether ``event`` is done."""
        checks.check_event(self, event, "is_done")
        return event.is_done()

    def sync(self, event: Event) -> None:
        """Block until ``event`` is done."""
        checks.check_event(self, event, "sync")
        event.sync()

    def will_wait_for(self, ctx: Context, event: Event) -> None:
        """Make ``ctx``'s stream wait for ``event`` before its later work."""
        checks.check_context(self, ctx, "will_wait_for")
        checks.check_event(self, event, "will_wait_for")
        ctx.stream.queue.wait_for(event)

    def await_stream(self, stream: Stream) -> None:
        """Block until ``stream`` is idle; re-raises a failed task as :class:`StreamError`."""
        checks.check_stream(self, stream, "await_stream")
        stream.queue.await_idle()

    def is_idle(self, stream: Stream) -> bool:
        """Whether ``stream`` has no queued or running work."""
        checks.check_stream(self, stream, "is_idle", live=False)
        return stream.queue.is_idle()

    def synchronize(self, device: Device) -> None:
        """Block until every stream of ``device`` is idle (seed 004's device-wide
        ``synchronize``). Every stream is waited for even when one has failed.

        Raises:
            UsageError: ``device`` is not a device of this backend.
            StreamError: a stream of the device failed (the first such error; the others are
                raised again by their streams' next calls).
        """
        checks.check_device(self, device, "synchronize")
        first: BaseException | None = None
        for stream in list(device.streams):
            try:
                stream.queue.await_idle()
            except StreamError as exc:
                first = first or exc
        if first is not None:
            raise first

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
            UsageError: a node has no buffer in ``ctx``, ``ctx`` belongs to another backend, or
                a node of ``writes`` is ``Hosted(Constant)`` (it never changes after
                initialization, so no task may write it; a routine writing one is refused at
                compile alike).
            StreamError: an earlier task on the stream failed.
        """
        checks.check_context(self, ctx, "schedule_task")
        checks.check_task(self, ctx, task, "schedule_task")
        for tn in (*reads, *writes):
            checks.check_node(self, tn, "schedule_task (reads/writes)")
            if tn not in ctx.buffers:
                raise UsageError(
                    f"schedule_task: node {tn.debug_label} has no buffer in the context on "
                    f"{ctx.stream.name} (backend {self.name})"
                )
        for tn in writes:
            if tn.memory_mode == mm.Hosted(mm.Constant()):
                raise UsageError(
                    f"schedule_task: the task writes node {tn.debug_label}, whose memory mode "
                    f"{tn.memory_mode} (provenance {tn.memory_mode_provenance}) says it never "
                    f"changes after initialization (on {ctx.stream.name}, backend {self.name})"
                )
        return self._named(ctx.stream, routine.schedule_task(ctx, task, reads, writes))

    # ---- memory and debugging ----

    def get_used_memory(self, device: Device) -> int:
        """Bytes of live buffers on ``device``: pools, buffers from :meth:`alloc_buffer`,
        merge buffers and the runtime's kernel scratch (an upper bound of the memory used
        for arrays, as the seed asks; host arrays used by :meth:`use_host_memory` are the
        user's and not counted)."""
        checks.check_device(self, device, "get_used_memory", live=False)
        return (
            device.slab.used_bytes
            + sum(s.merge_capacity for s in device.streams)
            + self.runtime.scratch_bytes(device.ordinal)
        )

    def get_debug_info(self, stream: Stream) -> dict[str, Any]:
        """Per-stream state."""
        checks.check_stream(self, stream, "get_debug_info", live=False)
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


__all__ = ["Backend", "Capabilities", "Config"]
