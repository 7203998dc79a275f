"""Routines: code linked into a context, and the contexts linking builds.

- :class:`Routine`: calling it schedules its run on its context's stream, with the waits the
  hazard rules ask for (:mod:`~arrayjit_backends.runtime.hazards`), after merge buffers viewing
  a buffer it writes got their copy (:mod:`~arrayjit_backends.runtime.transfers`).
- :func:`schedule_task`: a task of another package (``Backend.schedule_task``), ordered like
  a routine that reads and writes the given nodes' buffers.
- :func:`given_buffers` and :func:`extend`: the buffers of a new context (``make_context``,
  ``make_child``) and of the child a link creates (new pools, shared buffers, host arrays;
  hosted nodes uploaded).

The generic :class:`~arrayjit_backends.backend.Backend` checks its arguments, then calls
these; they know it only as an :class:`~arrayjit_backends.runtime.owner.Owner`.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING

from arrayjit_backends.impl.cpu_compiler import Run
from arrayjit_backends.impl.stream_queue import DONE, Event
from arrayjit_backends.runtime import hazards, trace, transfers
from arrayjit_backends.runtime.bindings import Bindings
from arrayjit_backends.runtime.hazards import Key
from arrayjit_backends.runtime.interop import ExternalArray
from arrayjit_backends.runtime.slab import BufferLoc
from arrayjit_backends.runtime.values import Buffer, Code, Context, Stream, external_buffer
from arrayjit_tnode import Tnode, UsageError

if TYPE_CHECKING:
    from arrayjit_backends.runtime.owner import Owner


class Routine:
    """A linked routine: calling it schedules its work on its context's stream."""

    def __init__(
        self,
        backend: Owner,
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
        on_host = {tn for tn, _ in self._on_host}
        self._hosted_inputs = [
            (tn, locs[tn])
            for tn in opt.context_nodes
            if tn.is_hosted()
            and tn not in on_host
            and (opt.traced[tn].read_only or opt.traced[tn].read_before_write)
        ]
        """Hosted nodes the routine reads from a device buffer: uploaded before a run when the
        host wrote them since (:func:`~arrayjit_backends.runtime.hazards.lags_host`)."""
        self._host_versions_seen = [-1] * len(self._hosted_inputs)
        """Per hosted input, its ``host_version`` when a run last made sure the buffer does not
        lag: a buffer's "defined at" only ever moves to the current version, so until the host
        writes again nothing is asked of the hazard tables."""
        self._trace_label: trace.Label | None = None
        """What the trace calls this routine's runs (made by the first traced run)."""

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
        seen = self._host_versions_seen
        for i, (tn, loc) in enumerate(self._hosted_inputs):  # never a run on replaced values
            version = tn.host_version
            if version != seen[i]:
                if hazards.lags_host(tn, dev.id, loc):
                    transfers.upload(self.context, tn)
                seen[i] = version
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
        tracer = trace.tracer
        task: Callable[[], None]
        if tracer is None:
            task = lambda: run(values)  # noqa: E731
        else:
            task = tracer.call(self._trace_label or self._make_trace_label(), run, values)
        if self._short:  # a few microseconds: an idle multicore stream runs it right here
            queue.schedule_short(task)
        else:
            queue.schedule(task)
        if self._writes or reads:
            event = queue.all_work()
            if event is not DONE:  # a run already done (sync_) orders nothing after it
                table.record(stream, event, reads, self._writes)
                for tn, writes in self._on_host:
                    hazards.record_host_access(tn, stream, event, writes=writes)
        for tn, loc in self._hosted_outputs:
            hazards.mark_only_fresh(tn, dev.id, loc)

    __call__ = schedule

    def _make_trace_label(self) -> trace.Label:
        # Once per routine: every traced run shares it (its stream is the context's, for good).
        self._trace_label = (
            self.context.stream.queue.name,
            f"routine {self.name}",
            "routine",
            {"routine": self.name, "writes": [tn.debug_label for tn in self.outputs]},
        )
        return self._trace_label

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


def schedule_task(
    ctx: Context, task: Callable[[], None], reads: Sequence[Tnode], writes: Sequence[Tnode]
) -> Event:
    """:meth:`Backend.schedule_task <arrayjit_backends.backend.Backend.schedule_task>` once its
    arguments are checked (every node has a buffer in ``ctx``): schedule ``task`` on ``ctx``'s
    stream after the writers of ``reads`` and ``writes`` and the readers of ``writes``; record
    it as their reader and writer; written hosted nodes count as changed on this device.

    Returns:
        The event done once the task has run.
    """
    stream, dev = ctx.stream, ctx.device
    read_keys = [(tn.id, ctx.buffers[tn]) for tn in reads]
    write_keys = [(tn.id, ctx.buffers[tn]) for tn in writes]
    for key in write_keys:
        transfers.before_write(stream, key)
    for key in read_keys:
        dev.hazards.order_read(stream, key)
    if trace.tracer is not None:
        labels = {
            "reads": [tn.debug_label for tn in reads],
            "writes": [tn.debug_label for tn in writes],
        }
        task = trace.tracer.task((stream.queue.name, "task", "task", labels), task)
    stream.queue.schedule(task)
    event = stream.queue.all_work()
    dev.hazards.record(stream, event, read_keys, write_keys)
    for tn in writes:
        if tn.is_hosted():
            hazards.mark_only_fresh(tn, dev.id, ctx.buffers[tn])
    for tn in {*reads, *writes}:
        if transfers.on_host(ctx, tn):
            hazards.record_host_access(tn, stream, event, writes=tn in writes)
    return event


# ---- building contexts (for Backend.make_context, make_child and link) ----


def given_buffers(
    stream: Stream, ctx_arrays: Mapping[Tnode, Buffer | ExternalArray] | None, what: str
) -> tuple[dict[Tnode, BufferLoc], list[Buffer]]:
    """The buffers ``ctx_arrays`` gives a new context on ``stream``: where each node's buffer
    is, and the :class:`Buffer` values (kept alive by the context). An array of another
    library (``__dlpack__``, ``__array_interface__``, ``__cuda_array_interface__``) becomes a
    buffer that is its memory (:func:`~arrayjit_backends.runtime.values.external_buffer`: host
    memory on CPU backends, device memory on CUDA).

    Raises:
        UsageError: ``ctx_arrays`` is not a mapping of nodes to :class:`Buffer` values or
            arrays, a buffer is on another device, smaller than its node, or misaligned for it,
            or an array does not fit its node.
    """
    if ctx_arrays is None:
        return {}, []
    if not isinstance(ctx_arrays, Mapping):
        raise UsageError(
            f"{what}: ctx_arrays must map nodes to Buffers, got {type(ctx_arrays).__name__}"
        )
    locs: dict[Tnode, BufferLoc] = {}
    bufs: list[Buffer] = []
    for tn, given in ctx_arrays.items():
        buf = given
        external = any(
            hasattr(given, name)
            for name in ("__dlpack__", "__array_interface__", "__cuda_array_interface__")
        )
        if isinstance(tn, Tnode) and not isinstance(given, Buffer) and external:
            buf = external_buffer(stream, tn, given, what)
        if not isinstance(tn, Tnode) or not isinstance(buf, Buffer):
            raise UsageError(
                f"{what}: ctx_arrays must map Tnodes to Buffers (from alloc_buffer or a "
                f"context's ctx_arrays) or arrays (__dlpack__, __array_interface__) or CUDA "
                f"arrays (__cuda_array_interface__), got {tn!r}: {given!r}"
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
        bufs.append(buf)
    return locs, bufs


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
    child = Context(
        ctx.backend, ctx.stream, ctx, buffers, pools, origin=f"the context of routine {code.name}"
    )
    for tn in new:
        if tn.is_hosted() and (tn in private or tn in missing_shared):
            transfers.upload(child, tn)
    return child


__all__ = ["Routine", "extend", "given_buffers", "schedule_task"]
