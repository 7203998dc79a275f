"""Hazard tracking: what every cross-stream wait of the generic Backend is derived from.

Two tables, both filled in program order (when work is *scheduled*, on the caller's thread):

- :class:`BufferHazards`, one per device: for each buffer, the last writer's event and each
  stream's latest read of it, and which streams' merge buffers are views of it (``Streaming``
  merges). A reader waits for another stream's writer; a writer waits for other streams'
  readers and writer. A write to a buffer that some merge buffer views first gives that merge
  buffer its own copy (the Backend does the copy; this table says which streams need one), so
  a merge buffer always holds the value sent, as with ``Copy``.
- Per hosted node (module functions taking the node): which device buffers hold the node's
  latest value (*freshness is per buffer*: each stream's context has its own buffer of a
  private hosted node, so a device-wide flag cannot tell whether this buffer was refreshed),
  and the transfers still reading (uploads) or writing (downloads) the host array. Transfers
  touching one host array are ordered among themselves in request order, and the node's
  ``prepare_read`` / ``prepare_write`` hooks wait for every one still pending.

``Tnode.devices_not_lagging_host`` (the seeds' device-level view) is kept consistent: a device
is in it exactly while one of its buffers is fresh. ``set_values`` clears it, which makes every
buffer stale; the per-buffer set is only believed for devices still in it.

The tables see a stream only as :class:`Queued` (its queue, to insert waits), so they sit
below the value types of :mod:`~arrayjit_backends.runtime.values` that hold them.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from arrayjit_backends.impl.stream_queue import Event
from arrayjit_backends.runtime import trace
from arrayjit_backends.runtime.slab import BufferLoc

if TYPE_CHECKING:
    from arrayjit_backends.impl.stream_queue import StreamQueue
    from arrayjit_tnode import Tnode


class Queued(Protocol):
    """A stream as the tables see it: its queue, to insert waits into (streams are also the
    tables' keys, and the hosted-node state holds them weakly)."""

    @property
    def queue(self) -> StreamQueue: ...


S = TypeVar("S", bound=Queued)
"""The stream type of a table (:class:`~arrayjit_backends.runtime.values.Stream`)."""

Key = tuple[int, BufferLoc]
"""A buffer on one device: the node's id and where the buffer lives. The tables below go by
where it lives only: two nodes given one buffer (``ctx_arrays``) share its memory, so a write
of one is ordered with reads of the other."""


def order_after(stream: Queued, other: Queued, event: Event, *, reads: bool = True) -> None:
    """Make ``stream``'s later work wait for ``event`` of ``other`` (nothing when both are one
    stream: a stream runs in order). A queue takes any backend's events (a device queue blocks
    the caller on another backend's, a ``multicore_`` worker waits for them in order).

    ``reads``: the work reads what ``other``'s work before ``event`` wrote, so if that failed
    (what it orders never happened) ``stream`` fails too, even when the event has already
    passed. Otherwise (a write after another stream's read or write) it only waits for the
    event to pass: an earlier write that failed is replaced, not read."""
    if other is stream or (event.succeeded() if reads else event.is_done()):
        return
    if trace.tracer is not None:  # the wait recorded is the one made, asked of the event once
        trace.tracer.wait(other.queue.name, stream.queue.name)
    if reads:
        stream.queue.wait_for(event)
    else:
        stream.queue.wait_past(event)


class BufferHazards(Generic[S]):
    """The synchronization state of one device's buffers, on streams of type ``S``."""

    def __init__(self) -> None:
        self.writers: dict[BufferLoc, tuple[S, Event]] = {}
        self.readers: dict[BufferLoc, dict[S, Event]] = {}
        self.views: dict[S, tuple[Tnode, Key]] = {}
        """Streams whose merge buffer is (for now) the buffer ``Key`` of the node."""
        self.lock = threading.RLock()  # reentrant: a collection may free pools under it
        self.deferred: set[int] = set()
        """Pools of collected contexts kept while a merge buffer views them
        (:meth:`hold_viewed`); :meth:`drop_view` hands them back for release."""

    def order_read(self, stream: S, key: Key) -> None:
        """Make ``stream``'s next task wait for another stream's pending write of ``key``."""
        w = self.writers.get(key[1])
        if w is not None and w[0] is not stream:  # a stream runs in order
            order_after(stream, *w)

    def order_write(self, stream: S, key: Key) -> None:
        """Make ``stream``'s next task wait for other streams' pending reads and write of
        ``key`` (to pass, failed or not: see :func:`order_after`)."""
        w = self.writers.get(key[1])
        if w is not None and w[0] is not stream:
            order_after(stream, *w, reads=False)
        readers = self.readers.get(key[1])
        if readers:
            for other, event in list(readers.items()):
                if other is not stream:
                    order_after(stream, other, event, reads=False)

    def record(
        self, stream: S, event: Event, reads: Iterable[Key] = (), writes: Iterable[Key] = ()
    ) -> None:
        """``stream``'s task ending at ``event`` read ``reads`` and wrote ``writes``."""
        for key in writes:
            self.writers[key[1]] = (stream, event)
        for key in reads:
            self.readers.setdefault(key[1], {})[stream] = event

    def set_view(self, stream: S, tn: Tnode, key: Key) -> None:
        """``stream``'s merge buffer now reads buffer ``key`` of ``tn`` directly."""
        self.views[stream] = (tn, key)

    def drop_view(self, stream: S) -> frozenset[int]:
        """``stream``'s merge buffer no longer reads another buffer. Returns the pools that
        waited for views only (see :meth:`hold_viewed`) and none reads now: free them."""
        with self.lock:
            self.views.pop(stream, None)
            if not self.deferred:
                return frozenset()
            released = frozenset(self.deferred - self._viewed_pools())
            self.deferred -= released
            return released

    def _viewed_pools(self) -> set[int]:
        return {k[1].pool_id for _, k in list(self.views.values())}

    def hold_viewed(self, pools: frozenset[int]) -> frozenset[int]:
        """Of ``pools`` (a collected context's), keep those a merge buffer views until the
        view goes (:meth:`drop_view`); returns the others, to free now."""
        with self.lock:
            viewed = pools & self._viewed_pools() if self.views else set()
            self.deferred |= viewed
            return pools - viewed

    def view_of(self, stream: S) -> Key | None:
        """The buffer ``stream``'s merge buffer reads directly, if any."""
        view = self.views.get(stream)
        return None if view is None else view[1]

    def viewers(self, key: Key) -> list[tuple[S, Tnode]]:
        """Streams whose merge buffer reads ``key`` directly (they need their own copy before
        ``key`` changes)."""
        if not self.views:
            return []
        return [(s, tn) for s, (tn, k) in list(self.views.items()) if k[1] == key[1]]

    def forget_pools(self, pools: frozenset[int]) -> None:
        """Forget the buffers of released pools."""
        with self.lock:
            for table in (self.writers, self.readers):
                for loc in [loc for loc in list(table) if loc.pool_id in pools]:
                    table.pop(loc, None)
            self.deferred -= pools


# ---- hosted nodes ----


@dataclass
class _HostState:
    fresh: set[tuple[int, BufferLoc]] = field(default_factory=set)
    """``(device id, buffer)`` of the buffers holding the node's latest value: read from the
    host array since its last change, or computed by the last write of the node."""
    defined_at: dict[tuple[int, BufferLoc], int] = field(default_factory=dict)
    """``(device id, buffer)`` -> the node's ``host_version`` when the buffer's value was last
    defined (an upload, a write, a copy into it or from it to the host): a buffer defined before
    the latest host write lags the host (:func:`lags_host`)."""
    uploads: list[tuple[weakref.ref[Queued], Event]] = field(default_factory=list)
    """Pending copies reading the host array."""
    downloads: list[tuple[weakref.ref[Queued], Event]] = field(default_factory=list)
    """Pending copies into the host array, in request order. Streams are held weakly: a node
    outliving its backend must not keep the backend alive (a transfer whose stream is gone
    has run or never will)."""


def _pending(
    transfers: list[tuple[weakref.ref[Queued], Event]],
) -> list[tuple[weakref.ref[Queued], Event]]:
    return [(s, e) for s, e in transfers if not e.is_done() and s() is not None]


def _outstanding(
    transfers: list[tuple[weakref.ref[Queued], Event]],
) -> list[tuple[weakref.ref[Queued], Event]]:
    """Transfers still to land, and those that never will (failed: until the host array is
    written or the next ``to_host`` replaces them, a copy from the host array ordered after
    one fails too)."""
    return [(s, e) for s, e in transfers if not e.succeeded() and s() is not None]


def _order_after_all(
    stream: Queued, transfers: list[tuple[weakref.ref[Queued], Event]], *, reads: bool
) -> None:
    for ref, event in transfers:
        other = ref()
        if other is not None:
            order_after(stream, other, event, reads=reads)


_states: dict[int, _HostState] = {}
"""By node id (ids are never reused); an entry goes when its node is collected."""
_states_lock = threading.Lock()


def _state(tn: Tnode) -> _HostState:
    st = _states.get(tn.id)  # routines look this up at every run: no lock on the fast path
    if st is None:
        with _states_lock:
            st = _states.get(tn.id)
            if st is None:
                st = _states[tn.id] = _HostState()
                weakref.finalize(tn, _states.pop, tn.id, None)
    return st


def is_fresh(tn: Tnode, device_id: int, loc: BufferLoc) -> bool:
    """Whether the buffer ``loc`` of ``tn`` on the device holds the node's latest value (so
    ``from_host`` has nothing to copy)."""
    return device_id in tn.devices_not_lagging_host and (device_id, loc) in _state(tn).fresh


def lags_host(tn: Tnode, device_id: int, loc: BufferLoc) -> bool:
    """Whether the host array was written (``set_values``, ``set_value``) since the buffer's
    value was last defined: a routine reading the node must upload it first (the backends
    README, "A run never reads a stale hosted input")."""
    return _state(tn).defined_at.get((device_id, loc)) != tn.host_version


def mark_fresh(tn: Tnode, device_id: int, loc: BufferLoc) -> None:
    """The buffer now holds the node's latest value too (it was uploaded, or copied from a
    fresh buffer)."""
    st = _state(tn)
    st.defined_at[device_id, loc] = tn.host_version
    if device_id not in tn.devices_not_lagging_host:  # set_values made its buffers stale
        st.fresh = {f for f in st.fresh if f[0] != device_id}
        tn.devices_not_lagging_host.add(device_id)
    st.fresh.add((device_id, loc))


def mark_only_fresh(tn: Tnode, device_id: int, loc: BufferLoc) -> None:
    """The buffer holds the node's latest value and no other buffer does: a routine wrote it,
    or it was just copied to the host (other buffers may hold older values)."""
    st, key, devices = _state(tn), (device_id, loc), tn.devices_not_lagging_host
    st.defined_at[key] = tn.host_version
    if len(st.fresh) != 1 or key not in st.fresh:  # a routine run again: nothing changes
        st.fresh = {key}
    if len(devices) != 1 or device_id not in devices:
        devices.clear()
        devices.add(device_id)


def mark_stale(tn: Tnode, device_id: int, loc: BufferLoc) -> None:
    """The buffer no longer holds the node's latest value (a stale buffer was copied in)."""
    st = _state(tn)
    st.defined_at[device_id, loc] = tn.host_version  # defined by the copy, stale or not
    st.fresh.discard((device_id, loc))
    if not any(f[0] == device_id for f in st.fresh):
        tn.devices_not_lagging_host.discard(device_id)


def order_upload(tn: Tnode, stream: Queued) -> None:
    """Order a copy from ``tn``'s host array (scheduled next on ``stream``) after the copies
    into the host array requested before it."""
    st = _state(tn)
    # A failed copy to the host counts until the host array is written (set_values): the
    # array then holds the user's values, and nothing stale is left to upload.
    st.downloads = (_outstanding if tn.copy_to_host_pending else _pending)(st.downloads)
    _order_after_all(stream, st.downloads, reads=True)


def order_download(tn: Tnode, stream: Queued) -> None:
    """Order a copy into ``tn``'s host array (scheduled next on ``stream``) after the copies
    from and into the host array requested before it, so transfers land in request order (a
    copy into it that failed never lands: it replaces that one)."""
    st = _state(tn)
    st.downloads = _pending(st.downloads)
    _order_after_all(stream, st.downloads, reads=False)
    st.uploads = _pending(st.uploads)
    _order_after_all(stream, st.uploads, reads=False)


def record_upload(tn: Tnode, stream: Queued, event: Event) -> None:
    """A copy from the host array on ``stream`` ends at ``event``: ``set_values`` waits for it
    and every other one still pending before changing the host array."""
    st = _state(tn)
    st.uploads = _pending(st.uploads)
    st.uploads.append((weakref.ref(stream), event))
    pending = [e for _, e in st.uploads]

    def done() -> bool:
        return all(e.is_done() for e in pending)

    def wait() -> None:  # a failed upload reads nothing any more: never raise
        for e in pending:
            e.wait()

    tn.prepare_write(done, wait)


def record_download(tn: Tnode, stream: Queued, event: Event) -> None:
    """A copy into the host array on ``stream`` ends at ``event``: ``get_values`` waits for it
    and every other one still pending, and raises if one can no longer happen."""
    st = _state(tn)
    # A copy that finished, even one that failed, is dropped: as before a later request
    # replaced the hook, a failure is reported until the next ``to_host`` of the node.
    st.downloads = _pending(st.downloads)
    st.downloads.append((weakref.ref(stream), event))
    pending = [e for _, e in st.downloads]

    def done() -> bool:
        return all(e.succeeded() for e in pending)

    def sync() -> None:  # a copy skipped after a failure raises: never a stale host array
        for e in pending:  # every copy has landed (or never will) before anything raises
            e.wait()
        for e in pending:
            e.sync()

    tn.prepare_read(done, sync)


def record_host_access(tn: Tnode, stream: Queued, event: Event, *, writes: bool) -> None:
    """A task on ``stream`` ending at ``event`` computed on ``tn``'s host array itself (the
    node's buffer is its host array: ``use_host_memory``): a write is waited for like a copy
    into the host array (``get_values`` waits), a read like a copy from it (``set_values``
    waits)."""
    if writes:
        record_download(tn, stream, event)
    else:
        record_upload(tn, stream, event)


__all__ = [
    "BufferHazards",
    "Key",
    "Queued",
    "is_fresh",
    "lags_host",
    "mark_fresh",
    "mark_only_fresh",
    "mark_stale",
    "order_after",
    "order_download",
    "order_upload",
    "record_download",
    "record_host_access",
    "record_upload",
]
