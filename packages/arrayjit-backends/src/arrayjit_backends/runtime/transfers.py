"""Transfers: the copies of the generic Backend, each ordered by the hazard rules.

- ``from_host`` (:func:`from_host`, :func:`upload`): a host array into a context's buffer,
  after the buffer's users and after the copies into the host array requested before it;
- ``to_host`` (:func:`to_host`): a buffer into its host array, after the buffer's writer and
  the transfers of that host array requested before it; ``get_values()`` waits for it;
- ``device_to_device`` (:func:`device_to_device`): into the destination's buffer, or its
  stream's merge buffer (:class:`MergeMode`);
- :func:`before_write`: what every write of a buffer (a routine, an upload, a copy, a task)
  does first: merge buffers viewing that buffer (``Streaming``) get their own copy
  (:func:`merge_copy`), then the write waits for other streams' readers and writer;
- host memory (the seed's ``use_host_memory``): :func:`host_memory_loc` makes a node's host
  array its buffer on a device, and :func:`on_host` tells whether a context's buffer is one.

The tables these consult live in :mod:`arrayjit_backends.runtime.hazards`; this module schedules the
copies. :class:`~arrayjit_backends.backend.Backend` checks its arguments, then calls these.
"""

from __future__ import annotations

import enum
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from arrayjit_backends.impl.stream_queue import Event
from arrayjit_backends.runtime import hazards, trace
from arrayjit_backends.runtime.hazards import Key
from arrayjit_backends.runtime.interop import Mismatch, host_layout, layout_mismatch
from arrayjit_backends.runtime.slab import BufferLoc
from arrayjit_tnode import Tnode, UsageError
from arrayjit_tnode import memory_mode as mm

if TYPE_CHECKING:
    from arrayjit_backends.runtime.values import Context, Device, Stream


class MergeMode(enum.Enum):
    """How ``device_to_device`` delivers a value."""

    No = "No"
    """Copy into the destination's own buffer of the node."""
    Streaming = "Streaming"
    """The destination's merge buffer reads the source's buffer directly (one memory)."""
    Copy = "Copy"
    """Copy into the destination stream's merge buffer (growing it when needed)."""


def traced(
    stream: str, what: str, tn: Tnode, nbytes: int, copy: Callable[[], None], note: str = ""
) -> Callable[[], None]:
    """``copy`` as a traced transfer when a tracer is installed (else ``copy`` itself)."""
    tracer = trace.tracer
    if tracer is None:
        return copy
    args: dict[str, object] = {"node": tn.debug_label, "bytes": nbytes}
    if note:
        args["note"] = note
    return tracer.task((stream, f"{what} {tn.debug_label}", "transfer", args), copy)


# ---- host memory (the seed's use_host_memory) ----


def host_memory_loc(dev: Device, tn: Tnode, what: str) -> BufferLoc:
    """The buffer on ``dev`` that is ``tn``'s host array (made on first use, and fresh).

    Raises:
        UsageError: ``tn`` now has sharing ``Per_stream``, its host array does not match it,
            or the device cannot compute on that array.
    """
    backend = dev.backend
    loc = dev.host_memory.get(tn)
    if loc is not None:
        return loc
    if tn.sharing is mm.Sharing.Per_stream:
        raise UsageError(
            f"{what}: node {tn.debug_label} was declared use_host_memory but now has "
            f"sharing Per_stream (backend {backend.name})"
        )
    arr = check_host_array(tn, what, backend.name)
    mem = backend.runtime.host_buffer(dev.ordinal, arr)
    if mem is None:
        raise UsageError(
            f"{what}: device {dev.ordinal} of backend {backend.name} cannot compute on the "
            f"host array of node {tn.debug_label}"
        )
    with dev.lock:
        loc = dev.host_memory.get(tn)
        if loc is None:
            loc = dev.host_memory[tn] = BufferLoc(dev.slab.adopt_pool(mem), 0)
    hazards.mark_fresh(tn, dev.id, loc)
    return loc


def on_host(ctx: Context, tn: Tnode) -> bool:
    """Whether ``tn``'s buffer in ``ctx`` is its host array."""
    loc = ctx.device.host_memory.get(tn)
    return loc is not None and ctx.buffers.get(tn) == loc


# ---- ordering writes, merge buffers ----


def before_write(stream: Stream, key: Key) -> None:
    """Order a write of buffer ``key`` of ``stream``'s device (scheduled next on
    ``stream``): merge buffers reading that buffer directly get their own copy of the
    value they were sent, then the write waits for other streams' readers and writer."""
    table = stream.device.hazards
    if table.views:
        for viewer, tn in table.viewers(key):
            merge_copy(viewer, tn, key[1], stream.device)
            stream.device.drop_view(viewer)
    table.order_write(stream, key)


def merge_copy(stream: Stream, tn: Tnode, loc: BufferLoc, src_dev: Device) -> Event:
    """Schedule on ``stream`` a copy of ``tn``'s buffer ``loc`` on ``src_dev`` into the
    stream's own merge buffer, ordered after that buffer's writer; later writers of the
    buffer wait for it."""
    backend = stream.device.backend
    key = (tn.id, loc)
    src_dev.hazards.order_read(stream, key)
    queue, runtime = stream.queue, backend.runtime
    src_buf, src_ordinal, nbytes = src_dev.slab.buf(loc), src_dev.ordinal, tn.size_in_bytes
    merge_buf = stream.merge_buffer_for(tn)

    def copy_merge() -> None:
        runtime.copy(queue, merge_buf, src_buf, nbytes, src_ordinal)
        stream.merge_src = merge_buf

    queue.schedule(traced(queue.name, "device_to_device", tn, nbytes, copy_merge, "merge buffer"))
    backend.copies += 1
    event = queue.all_work()
    src_dev.hazards.record(stream, event, reads=[key])
    return event


# ---- host <-> device ----


def check_host_array(tn: Tnode, what: str, backend: str, *, writable: bool = False) -> np.ndarray:
    """``tn``'s host array, checked to match the node (shape, dtype, C order) and, with
    ``writable`` (a copy into it), to be writable: checked here, a bad array is the caller's
    error instead of a failure of the stream the copy was queued on.

    Raises:
        UsageError: it does not (the message names ``what`` and the ``backend``).
    """
    arr = tn.array
    if not isinstance(arr, np.ndarray):
        raise UsageError(
            f"{what}: node {tn.debug_label}'s host array is {type(arr).__name__}, not a numpy "
            f"array (backend {backend})"
        )
    c_order = arr.flags.c_contiguous
    fits = c_order and (arr.dtype, arr.shape) == host_layout(tn.prec, tn.dims)
    if fits and (not writable or arr.flags.writeable):  # the common case, accepted at once
        return arr
    # numpy's own flag spares the stride arithmetic on this per-transfer path (the same rule).
    strides = None if c_order else arr.strides
    kind = layout_mismatch(tn, arr.dtype, arr.shape, strides, None)
    if kind in (Mismatch.DTYPE, Mismatch.SHAPE):
        shape = tn.prec.host_shape(tn.dims)
        raise UsageError(
            f"{what}: node {tn.debug_label} has a host array of shape {list(arr.shape)} and "
            f"dtype {arr.dtype}, expected shape {list(shape)} and dtype {tn.prec.numpy_dtype}"
            f" (backend {backend})"
        )
    if kind is Mismatch.STRIDES:
        raise UsageError(
            f"{what}: node {tn.debug_label}'s host array is not C-contiguous (backend {backend})"
        )
    if writable and not arr.flags.writeable:
        raise UsageError(
            f"{what}: node {tn.debug_label}'s host array is read-only, so the copy cannot "
            f"land in it (backend {backend})"
        )
    return arr


def upload(ctx: Context, tn: Tnode) -> None:
    """Schedule a copy of ``tn``'s host array into its buffer in ``ctx`` (whether or not the
    buffer is fresh)."""
    backend = ctx.backend
    arr = check_host_array(tn, "from_host", backend.name)
    stream, dev, loc = ctx.stream, ctx.device, ctx.buffers[tn]
    key = (tn.id, loc)
    before_write(stream, key)
    hazards.order_upload(tn, stream)  # after copies into the host array requested before
    buf, runtime, queue = ctx.buf(tn), backend.runtime, stream.queue
    queue.schedule(
        traced(queue.name, "from_host", tn, arr.nbytes, lambda: runtime.to_device(queue, buf, arr))
    )
    backend.copies += 1
    event = queue.all_work()
    hazards.record_upload(tn, stream, event)  # set_values waits for it
    dev.hazards.record(stream, event, writes=[key])
    hazards.mark_fresh(tn, dev.id, loc)


def _absent(ctx: Context, tn: Tnode, what: str) -> bool:
    """False, for a hosted node without a buffer in ``ctx``; a warning first where a context
    linked from ``ctx`` holds it (the user most likely meant that one)."""
    holder = ctx.descendant_holding(tn)
    if holder is not None:
        warnings.warn(
            f"{what}: node {tn.debug_label} has no buffer in {ctx!r}, so nothing is copied; "
            f"{holder.origin}, linked from it, holds it: call {what} with that context "
            f"(routine.context) (backend {ctx.backend.name})",
            UserWarning,
            stacklevel=4,
        )
    return False


def from_host(ctx: Context, tn: Tnode) -> bool:
    """:meth:`Backend.from_host <arrayjit_backends.backend.Backend.from_host>` once ``ctx``
    is checked."""
    if not tn.is_hosted():
        return False
    if tn not in ctx.buffers:
        return _absent(ctx, tn, "from_host")
    check_host_array(tn, "from_host", ctx.backend.name)
    if hazards.is_fresh(tn, ctx.device.id, ctx.buffers[tn]):
        return True
    if on_host(ctx, tn):  # the buffer is the host array: nothing to copy
        hazards.mark_fresh(tn, ctx.device.id, ctx.buffers[tn])
        return True
    upload(ctx, tn)
    return True


def to_host(ctx: Context, tn: Tnode) -> bool:
    """:meth:`Backend.to_host <arrayjit_backends.backend.Backend.to_host>` once ``ctx`` is
    checked."""
    if not tn.is_hosted():
        return False
    if tn not in ctx.buffers:
        return _absent(ctx, tn, "to_host")
    backend = ctx.backend
    arr = check_host_array(tn, "to_host", backend.name, writable=True)
    stream, dev, loc = ctx.stream, ctx.device, ctx.buffers[tn]
    if on_host(ctx, tn):  # the buffer is the host array: get_values waits for it
        return True
    key = (tn.id, loc)
    dev.hazards.order_read(stream, key)
    hazards.order_download(tn, stream)  # transfers of the host array land in request order
    buf, runtime, queue = ctx.buf(tn), backend.runtime, stream.queue
    queue.schedule(
        traced(queue.name, "to_host", tn, arr.nbytes, lambda: runtime.to_host(queue, arr, buf))
    )
    backend.copies += 1
    event = queue.all_work()
    hazards.record_download(tn, stream, event)  # get_values waits for it
    dev.hazards.record(stream, event, reads=[key])
    hazards.mark_only_fresh(tn, dev.id, loc)  # other buffers may hold other values
    return True


# ---- device <-> device ----


def device_to_device(tn: Tnode, into_merge_buffer: MergeMode, dst: Context, src: Context) -> bool:
    """:meth:`Backend.device_to_device
    <arrayjit_backends.backend.Backend.device_to_device>` once both contexts are checked."""
    if tn not in src.buffers:
        return False
    backend = dst.backend
    stream, queue, runtime = dst.stream, dst.stream.queue, backend.runtime
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
        before_write(stream, dst_key)
        src_buf, src_ordinal, nbytes = src.buf(tn), src_dev.ordinal, tn.size_in_bytes
        dst_buf = dst.buf(tn)
        queue.schedule(
            traced(
                queue.name,
                "device_to_device",
                tn,
                nbytes,
                lambda: runtime.copy(queue, dst_buf, src_buf, nbytes, src_ordinal),
                f"from {src.stream.name}",
            )
        )
        backend.copies += 1
        event = queue.all_work()
        dst.device.hazards.record(stream, event, writes=[dst_key])
        src_dev.hazards.record(stream, event, reads=[src_key])
        if on_host(src, tn):
            hazards.record_host_access(tn, stream, event, writes=False)
        if on_host(dst, tn):
            hazards.record_host_access(tn, stream, event, writes=True)
        if tn.is_hosted():  # the destination now holds what the source held
            if hazards.is_fresh(tn, src_dev.id, src_loc):
                hazards.mark_fresh(tn, dst.device.id, dst_loc)
            else:
                hazards.mark_stale(tn, dst.device.id, dst_loc)
        return True
    stream.merge_node = tn
    dst.device.drop_view(stream)
    # A host array (use_host_memory) can change under a view: its merge is a copy.
    if into_merge_buffer is MergeMode.Copy or dst.device is not src_dev or on_host(src, tn):
        event = merge_copy(stream, tn, src_loc, src_dev)
        if on_host(src, tn):
            hazards.record_host_access(tn, stream, event, writes=False)
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


__all__ = [
    "MergeMode",
    "before_write",
    "check_host_array",
    "device_to_device",
    "from_host",
    "host_memory_loc",
    "merge_copy",
    "on_host",
    "to_host",
    "upload",
]
