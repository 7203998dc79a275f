"""Slab memory: buffers addressed as ``(pool_id, offset)``.

The nodes a link adds are packed into pools by aligned bump allocation, with a cap on the size of
one pool; a node larger than the cap gets an error naming it. Pools are the backend's memory
handles: 64-byte-aligned numpy byte arrays for CPU backends (typed views of them are what native
code and the interpreter read and write), device allocations otherwise. A buffer of at least
:data:`LINE_ALIGN_MIN_BYTES` starts on a 64-byte boundary of its pool (so, on CPU backends, at a
cache-line and widest-vector boundary of memory); smaller ones are aligned to their element
only, so packing many small nodes wastes nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from arrayjit_tnode import Tnode, UsageError

POOL_ALIGNMENT = 64
LINE_ALIGN_MIN_BYTES = 4096
"""Buffers this large or larger start at a multiple of :data:`POOL_ALIGNMENT` in their pool:
a vector loop over them then never splits a load or store across cache lines (the padding
before one, at most 63 bytes, is under 1.6% of it). Pools are counted with their padding by
``get_used_memory``."""
DEFAULT_POOL_CAP = 1 << 32


class BufferLoc(NamedTuple):
    """Where a buffer lives on a device: a pool and a byte offset in it. (A named tuple: it keys
    the writer and reader maps that every routine run consults, and tuples hash in C.)"""

    pool_id: int
    offset: int


@dataclass(frozen=True)
class PoolPlan:
    """Result of :func:`plan_pool_segments`: the segment and offset of each item, and the byte
    size of each segment."""

    placements: tuple[tuple[int, int], ...]
    sizes: tuple[int, ...]


def plan_pool_segments(
    items: Sequence[tuple[int, int]], cap: int, names: Sequence[str] | None = None
) -> PoolPlan:
    """Bump-allocate ``(size, alignment)`` items in order into segments of at most ``cap`` bytes.

    Each offset is rounded up to the item's alignment, and to :data:`POOL_ALIGNMENT` for items
    of at least :data:`LINE_ALIGN_MIN_BYTES`; an item that would cross the cap opens a new
    segment at offset 0.

    Raises:
        UsageError: an item is larger than the cap (the message names it when ``names`` is
            given).
    """
    placements: list[tuple[int, int]] = []
    sizes: list[int] = []
    offset = 0
    for k, (size, align) in enumerate(items):
        if size > cap:
            what = names[k] if names else f"item {k}"
            raise UsageError(f"{what} needs {size} bytes, over the {cap}-byte per-pool cap")
        if size >= LINE_ALIGN_MIN_BYTES:
            align = max(align, POOL_ALIGNMENT)
        start = -(-offset // align) * align if align > 1 else offset
        if not sizes or start + size > cap:
            sizes.append(0)
            start = 0
        placements.append((len(sizes) - 1, start))
        offset = start + size
        sizes[-1] = offset
    return PoolPlan(tuple(placements), tuple(sizes))


def aligned_bytes(nbytes: int, alignment: int = POOL_ALIGNMENT) -> np.ndarray:
    """A zero-filled byte array of ``nbytes`` whose address is a multiple of ``alignment``."""
    raw = np.zeros(nbytes + alignment, dtype=np.uint8)
    shift = (-raw.ctypes.data) % alignment
    return raw[shift : shift + nbytes]


def typed_view(pool: np.ndarray, offset: int, tn: Tnode) -> np.ndarray:
    """The view of ``tn``'s buffer at ``offset`` in a byte pool: the node's numpy dtype and
    full (padded) host shape."""
    nbytes = tn.size_in_bytes
    raw = pool[offset : offset + nbytes]
    return raw.view(tn.prec.numpy_dtype).reshape(tn.prec.host_shape(tn.dims))


class Slab:
    """The pools of one device, with exact accounting of live bytes.

    ``alloc(nbytes)`` returns a backend's memory handle (a numpy byte array for CPU backends, a
    device allocation otherwise); ``free(handle)`` releases it.
    """

    def __init__(self, alloc: Callable[[int], Any], free: Callable[[Any], None]) -> None:
        self._alloc = alloc
        self._free = free
        self._pools: dict[int, tuple[Any, int]] = {}
        self._next = 1
        self._lock = threading.Lock()
        self.used_bytes = 0

    def alloc_pool(self, nbytes: int) -> int:
        """A new zero-filled pool; returns its id."""
        mem = self._alloc(max(nbytes, 1))
        with self._lock:
            pool_id = self._next
            self._next += 1
            self._pools[pool_id] = (mem, nbytes)
            self.used_bytes += nbytes
            return pool_id

    def adopt_pool(self, mem: Any) -> int:
        """Address memory the backend did not allocate (a host array a CPU backend computes on
        directly, see ``Backend.use_host_memory``) like a pool; returns its id. It is not
        counted in :attr:`used_bytes` (the user owns it)."""
        with self._lock:
            pool_id = self._next
            self._next += 1
            self._pools[pool_id] = (mem, 0)
            return pool_id

    def free_pool(self, pool_id: int) -> None:
        """Release a pool (idempotent)."""
        with self._lock:
            entry = self._pools.pop(pool_id, None)
            if entry is None:
                return
            self.used_bytes -= entry[1]
        self._free(entry[0])

    def pool(self, pool_id: int) -> Any:
        """The memory handle of a live pool."""
        return self._pools[pool_id][0]

    def buf(self, loc: BufferLoc) -> tuple[Any, int]:
        """``(memory handle, offset)`` of a buffer."""
        return self._pools[loc.pool_id][0], loc.offset

    def free_all(self) -> None:
        """Release every pool."""
        with self._lock:
            pools = list(self._pools.values())
            self._pools.clear()
            self.used_bytes = 0
        for mem, _ in pools:
            self._free(mem)

    def debug_info(self) -> dict[str, Any]:
        """Pools and bytes."""
        return {"pools": len(self._pools), "used_bytes": self.used_bytes}
