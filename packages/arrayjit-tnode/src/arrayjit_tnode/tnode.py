"""Tensor nodes: named, shaped, typed arrays that computations read and write.

A node's identity is its integer ``id``; nodes live in a weak registry (:func:`find`). Its memory
mode (see :mod:`arrayjit_tnode.memory_mode`) records where it lives, with the *provenance* (an
integer naming the code path) of the decision. Hosted nodes have a host array; backends keep the
host array and the device copies consistent through ``devices_not_lagging_host`` and the
``prepare_read`` / ``prepare_write`` hooks, so that a user never sees a stale or torn host array.
"""

from __future__ import annotations

import itertools
import logging
import math
import operator
import re
import sys
import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, SupportsIndex, TextIO

import numpy as np

from arrayjit_tnode import memory_mode as mm
from arrayjit_tnode import precision
from arrayjit_tnode.errors import MemoryModeError, UsageError
from arrayjit_tnode.precision import Prec

logger = logging.getLogger(__name__)

DEFAULT_PREC = Prec.single
"""The precision of a node created without one, unless ``update_prec`` replaces it first."""

STACK_THRESHOLD_BYTES = 16384
"""Undecided non-virtual nodes up to this size default to ``Local`` (a kernel-local array);
larger ones to ``On_device``."""

_ids = itertools.count(1)
_ids_lock = threading.Lock()
_registry: weakref.WeakValueDictionary[int, Tnode] = weakref.WeakValueDictionary()
_registry_lock = threading.Lock()


@dataclass(frozen=True)
class Padding:
    """Per-axis ``(left, right)`` margins and the value the margins hold (``None``: unspecified,
    so code that relies on the margins resets them itself)."""

    axes: tuple[tuple[int, int], ...]
    value: float | None = 0.0


@dataclass
class _Hook:
    is_done: Callable[[], bool]
    sync: Callable[[], None]
    transfer: Callable[[], None] | None = None


MAX_BYTES = (1 << 63) - 1
"""The largest buffer a node may have: generated code indexes with 64-bit signed integers."""


def _check_dims(label: str, what: str, dims: object) -> tuple[int, ...]:
    """``dims`` as a tuple of Python ints, each a non-negative integer (a Python ``int`` or a
    numpy integer; ``bool`` and floats are refused, never truncated).

    Raises:
        UsageError: ``dims`` is not a sequence of non-negative integers (names the node).
    """
    if isinstance(dims, (str, bytes)) or not isinstance(dims, Sequence | np.ndarray):
        raise UsageError(f"node {label}: {what} must be a sequence of integers, got {dims!r}")
    out = []
    for d in dims:
        if isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, np.integer)):
            raise UsageError(
                f"node {label}: {what} must be non-negative integers, got {d!r} "
                f"({type(d).__name__}) in {list(dims)!r}"
            )
        if d < 0:
            raise UsageError(f"node {label}: {what} must be non-negative, got {tuple(dims)}")
        out.append(int(d))
    return tuple(out)


def _check_size(label: str, dims: tuple[int, ...]) -> None:
    """Refuse buffers whose size in elements overflows 64-bit indexing (exact arithmetic)."""
    n = math.prod(dims)
    if n * 16 > MAX_BYTES:  # 16: the widest precision (uint4x32)
        raise UsageError(
            f"node {label}: dims {list(dims)} give {n} elements, more than 64-bit indexing "
            f"can address"
        )


def _fresh_id() -> int:
    with _ids_lock:
        return next(_ids)


def find(id: int) -> Tnode | None:
    """The live node with this id, or ``None``."""
    with _registry_lock:
        return _registry.get(id)


def registered_nodes() -> list[Tnode]:
    """All live nodes, by increasing id."""
    with _registry_lock:
        nodes = list(_registry.values())
    return sorted(nodes, key=lambda tn: tn.id)


all_nodes = registered_nodes
"""Alias of :func:`registered_nodes`."""


def print_accessible_headers(
    pred: Callable[[Tnode], bool] | None = None, file: TextIO | None = None
) -> None:
    """Print the :meth:`Tnode.header` of every live node (by id) for which ``pred`` holds
    (default: all) to ``file`` (default: standard output): what is in memory, while debugging."""
    for tn in registered_nodes():
        if pred is None or pred(tn):
            print(tn.header(), file=file if file is not None else sys.stdout)


def log_accessible_headers(
    pred: Callable[[Tnode], bool] | None = None, level: int = logging.DEBUG
) -> None:
    """Log, at ``level``, the header of every live node for which ``pred`` holds, one record
    each (nothing when the logger is off for ``level``)."""
    if logger.isEnabledFor(level):
        for tn in registered_nodes():
            if pred is None or pred(tn):
                logger.log(level, "%s", tn.header())


class Tnode:
    """A tensor node. Create nodes with :meth:`create`.

    Attributes:
        id: unique, positive; identity, equality, hashing and ordering use only this.
        label: display components, most specific last.
        devices_not_lagging_host: ids of devices holding the host's latest value or having
            produced the latest value themselves.
        backend_info: free-form annotations of backends (e.g. how a routine uses the node).
        code_name: the identifier last chosen for generated code, or ``None``.
    """

    __slots__ = (
        "__weakref__",
        "_array",
        "_dims",
        "_dims_thunk",
        "_dims_without_padding",
        "_lock",
        "_pending_sharing",
        "_prec",
        "_prec_forced",
        "_prec_inferred",
        "_prec_specified",
        "_prepare_read",
        "_prepare_write",
        "_sharing_provenance",
        "backend_info",
        "code_name",
        "devices_not_lagging_host",
        "id",
        "label",
        "memory_mode",
        "memory_mode_provenance",
        "padding",
    )

    id: int
    label: list[str]
    padding: Padding | None
    memory_mode: mm.MemoryMode | None
    memory_mode_provenance: int | None
    devices_not_lagging_host: set[int]
    backend_info: dict[str, Any]
    code_name: str | None
    _lock: threading.Lock
    _array: np.ndarray | None
    _dims: tuple[int, ...] | None
    _dims_without_padding: tuple[int, ...] | None
    _dims_thunk: Callable[[], Sequence[int]] | None
    _prec: Prec
    _prec_specified: bool
    _prec_inferred: bool
    _prec_forced: bool
    _prepare_read: _Hook | None
    _prepare_write: _Hook | None
    _pending_sharing: mm.Sharing
    _sharing_provenance: int | None

    def __init__(self) -> None:
        raise TypeError("create tensor nodes with Tnode.create(...)")

    # ---- construction ----

    @classmethod
    def create(
        cls,
        dims: Sequence[int] | Callable[[], Sequence[int]],
        *,
        prec: Prec | str | None = None,
        label: str | Sequence[str] = (),
        hosted: bool = False,
        padding: Padding | None = None,
        memory_mode: tuple[mm.MemoryMode, int] | None = None,
    ) -> Tnode:
        """Create and register a node.

        Args:
            dims: the logical (unpadded) dims, or a zero-argument callable giving them later
                (forced on first use of ``dims``).
            prec: the precision; ``None`` means the default (single) that :meth:`update_prec`
                may still replace.
            label: display components, a string or a list, most specific last.
            hosted: give the node a host array (mode ``Hosted(Unset_hosted)``).
            padding: margins added around the logical dims.
            memory_mode: an initial ``(mode, provenance)``.

        Raises:
            UsageError: a negative dim, a padding of the wrong rank, an unknown precision.
        """
        tn = object.__new__(cls)
        tn.id = _fresh_id()
        tn.label = [label] if isinstance(label, str) else [str(s) for s in label]
        tn._lock = threading.Lock()
        tn.padding = padding
        tn._dims = None
        tn._dims_without_padding = None
        tn._dims_thunk = None
        if callable(dims):
            tn._dims_thunk = dims
        else:
            tn._set_dims(dims)
        tn._prec = DEFAULT_PREC if prec is None else precision.parse(prec)
        tn._prec_specified = prec is not None
        tn._prec_inferred = False
        tn._prec_forced = False
        tn._array = None
        tn._prepare_read = None
        tn._prepare_write = None
        tn._pending_sharing = mm.Sharing.Unset
        tn._sharing_provenance = None
        tn.memory_mode = None
        tn.memory_mode_provenance = None
        tn.devices_not_lagging_host = set()
        tn.backend_info = {}
        tn.code_name = None
        if memory_mode is not None:
            tn.update_memory_mode(*memory_mode)
        if hosted:
            tn.update_memory_mode(mm.Hosted(), 0)
        with _registry_lock:
            _registry[tn.id] = tn
        return tn

    def _set_dims(self, dims: Sequence[int]) -> None:
        logical = _check_dims(self.debug_label, "dims", dims)
        if self.padding is not None:
            axes = self.padding.axes
            if not isinstance(axes, (tuple, list)) or len(axes) != len(logical):
                raise UsageError(
                    f"node {self.debug_label}: padding has "
                    f"{len(axes) if isinstance(axes, (tuple, list)) else axes!r} axes but the "
                    f"node has {len(logical)} dims {logical}"
                )
            margins = [_check_dims(self.debug_label, "padding", lr) for lr in axes]
            # (_check_dims says "padding must be non-negative" for a negative margin)
            if any(len(lr) != 2 for lr in margins):
                raise UsageError(
                    f"node {self.debug_label}: padding must be (left, right) pairs, got {axes}"
                )
            padded = tuple(d + lr[0] + lr[1] for d, lr in zip(logical, margins))
        else:
            padded = logical
        _check_size(self.debug_label, padded)
        self._dims_without_padding = logical
        self._dims = padded

    # ---- identity ----

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Tnode) and other.id == self.id

    def __hash__(self) -> int:
        return hash(self.id)

    def __lt__(self, other: Tnode) -> bool:
        return self.id < other.id

    @property
    def debug_label(self) -> str:
        """``label#id``, the way error messages name a node."""
        text = ".".join(self.label) if self.label else "node"
        return f"{text}#{self.id}"

    @property
    def debug_name(self) -> str:
        """An identifier for generated code: ``code_name`` if set, else built from the label
        (non-identifier characters dropped, repeated components collapsed), else ``n<id>``."""
        if self.code_name:
            return self.code_name
        parts: list[str] = []
        for comp in self.label:
            clean = re.sub(r"[^0-9A-Za-z_]", "", comp)
            if clean and (not parts or parts[-1] != clean):
                parts.append(clean)
        if not parts:
            return f"n{self.id}"
        name = "_".join(parts)
        if name[0].isdigit():
            name = "n" + name
        return name

    # ---- shape and precision ----

    @property
    def dims(self) -> tuple[int, ...]:
        """Buffer dims, padding included (forces lazy dims)."""
        if self._dims is None:
            with self._lock:
                if self._dims is None:
                    assert self._dims_thunk is not None
                    self._set_dims(self._dims_thunk())
        assert self._dims is not None
        return self._dims

    @property
    def dims_without_padding(self) -> tuple[int, ...]:
        """Logical dims (forces lazy dims)."""
        self.dims  # noqa: B018  (forces)
        assert self._dims_without_padding is not None
        return self._dims_without_padding

    @property
    def dims_known(self) -> bool:
        """Whether the dims are already forced (not lazy any more)."""
        return self._dims is not None

    @property
    def prec(self) -> Prec:
        """The precision; reading it forces a delayed default."""
        self._prec_forced = True
        return self._prec

    @property
    def prec_specified(self) -> bool:
        """Whether the precision was given explicitly (not the default)."""
        return self._prec_specified

    @property
    def prec_state(self) -> str:
        """``"specified"`` (given explicitly), ``"inferred"`` (by :meth:`update_infer_prec`) or
        ``"default"``."""
        if self._prec_specified:
            return "specified"
        return "inferred" if self._prec_inferred else "default"

    def update_prec(
        self, prec: Prec | str, *, only_if: Callable[[Prec], bool] | None = None
    ) -> None:
        """Specify the precision. With ``only_if``, only when ``only_if(current precision)``
        holds.

        Raises:
            UsageError: the precision was already specified, or already read, as another one.
        """
        new = precision.parse(prec)
        with self._lock:
            if only_if is not None and not only_if(self._prec):
                return
            if new != self._prec:
                if self._prec_specified:
                    raise UsageError(
                        f"node {self.debug_label}: precision already specified as {self._prec}, "
                        f"cannot change it to {new}"
                    )
                if self._prec_forced:
                    raise UsageError(
                        f"node {self.debug_label}: precision {self._prec} was already used, "
                        f"cannot change it to {new}"
                    )
            self._prec = new
            self._prec_specified = True
            self._prec_inferred = False

    def update_infer_prec(
        self, prec: Prec | str, *, only_if: Callable[[Prec], bool] | None = None
    ) -> None:
        """Record an inferred precision: a specified precision wins (no-op); a default becomes
        ``prec``; an earlier inference becomes ``promote(earlier, prec)``. With ``only_if``,
        only when ``only_if(current precision)`` holds.

        Raises:
            UsageError: the precision was already read and the inference would change it.
        """
        new = precision.parse(prec)
        with self._lock:
            if self._prec_specified:
                return
            if only_if is not None and not only_if(self._prec):
                return
            result = precision.promote(self._prec, new) if self._prec_inferred else new
            if self._prec_forced and result != self._prec:
                raise UsageError(
                    f"node {self.debug_label}: precision {self._prec} was already used, "
                    f"cannot infer {result} for it"
                )
            self._prec = result
            self._prec_inferred = True

    @property
    def num_elems(self) -> int:
        """Number of elements of the buffer (padding included)."""
        return math.prod(self.dims)  # exact: dims are Python ints (see _check_size)

    @property
    def size_in_bytes(self) -> int:
        """Bytes of the buffer (padding included)."""
        return self.num_elems * self.prec.byte_size

    def logical_slices(self) -> tuple[slice, ...]:
        """Slices selecting the logical (unpadded) region of the buffer."""
        if self.padding is None:
            return tuple(slice(None) for _ in self.dims)
        return tuple(
            slice(left, left + d)
            for (left, _), d in zip(self.padding.axes, self.dims_without_padding)
        )

    # ---- memory modes ----

    def update_memory_mode(self, mode: mm.MemoryMode, provenance: int) -> None:
        """Refine the memory mode towards ``mode``.

        A refinement that changes nothing keeps the earlier provenance.

        Raises:
            MemoryModeError: ``mode`` contradicts the current decision; the message names the
                node and both provenances.
        """
        with self._lock:
            old = self.memory_mode
            try:
                new = mm.apply_sharing(mm.refine(old, mode), self._pending_sharing)
            except mm.Conflict as exc:
                raise MemoryModeError(
                    f"node {self.debug_label}: memory mode {mode} (provenance {provenance}) "
                    f"contradicts {self._decisions()}: {exc}"
                ) from None
            assert new is not None
            if new != old:
                self.memory_mode = new
                self.memory_mode_provenance = provenance
        if new != old:
            logger.debug("%s: memory mode %s -> %s (%d)", self.debug_label, old, new, provenance)

    def update_memory_sharing(self, sharing: mm.Sharing, provenance: int) -> None:
        """Refine only the sharing part of the mode; ``Hosted(Nonconstant)`` specializes to
        ``Hosted(Changed_on_devices(sharing))``. Where the mode has no place for sharing yet, the
        sharing is kept and applied once it does.

        Raises:
            MemoryModeError: the node already has a contradicting sharing.
        """
        with self._lock:
            old = self.memory_mode
            try:
                pending = mm.refine_sharing(self._pending_sharing, sharing)
                new = mm.apply_sharing(old, sharing)
            except mm.Conflict as exc:
                raise MemoryModeError(
                    f"node {self.debug_label}: sharing {sharing.value} (provenance {provenance}) "
                    f"contradicts {self._decisions()}: {exc}"
                ) from None
            if pending is not self._pending_sharing:
                self._pending_sharing = pending
                self._sharing_provenance = provenance
            if new != old:
                self.memory_mode = new
                self.memory_mode_provenance = provenance

    def _decisions(self) -> str:
        text = f"{self.memory_mode} (provenance {self.memory_mode_provenance})"
        if self._pending_sharing is not mm.Sharing.Unset:
            text += (
                f" and sharing {self._pending_sharing.value} "
                f"(provenance {self._sharing_provenance})"
            )
        return text

    @property
    def sharing(self) -> mm.Sharing:
        """The node's cross-stream sharing (possibly still ``Unset``)."""
        return mm.refine_sharing(self._pending_sharing, mm.sharing_of(self.memory_mode))

    def _leaves(self) -> frozenset[str]:
        return frozenset("VLDH") if self.memory_mode is None else mm.leaves(self.memory_mode)

    def known_virtual(self) -> bool:
        """Whether the node is decided ``Virtual``."""
        return isinstance(self.memory_mode, mm.Virtual)

    def known_non_virtual(self) -> bool:
        """Whether the node can no longer become virtual."""
        return "V" not in self._leaves()

    def known_not_materialized(self) -> bool:
        """Whether the node is ``Virtual`` or ``Local`` (never in a persistent buffer)."""
        return isinstance(self.memory_mode, (mm.Virtual, mm.Local))

    def known_constant(self) -> bool:
        """``Effectively_constant`` or ``Hosted(Constant)``."""
        mode = self.memory_mode
        return isinstance(mode, mm.Effectively_constant) or mode == mm.Hosted(mm.Constant())

    def known_volatile(self) -> bool:
        """``Hosted(Volatile)``: changes on the host."""
        return self.memory_mode == mm.Hosted(mm.Volatile())

    def known_non_cross_stream(self) -> bool:
        """Never shared between streams: ``Virtual``, ``Local``, or sharing ``Per_stream``."""
        return self.known_not_materialized() or self.sharing is mm.Sharing.Per_stream

    def potentially_cross_stream(self) -> bool:
        """One buffer per device shared by its streams: sharing ``Shared_cross_streams``, or a
        constant whose sharing is not ``Per_stream`` (constants never change, so streams can
        share them)."""
        if self.known_not_materialized():
            return False
        sharing = self.sharing
        if sharing is not mm.Sharing.Unset:
            return sharing is mm.Sharing.Shared_cross_streams
        return self.known_constant()

    def mode_is_unspecified(self) -> bool:
        """No decision yet, or only ``Never_virtual`` / ``Effectively_constant``."""
        return self.memory_mode is None or isinstance(
            self.memory_mode, (mm.Never_virtual, mm.Effectively_constant)
        )

    def is_hosted(self) -> bool:
        """Whether the node is decided ``Hosted`` (has a host array)."""
        return isinstance(self.memory_mode, mm.Hosted)

    def default_to_most_local(self, provenance: int) -> None:
        """Settle an undecided mode to its most local choice: undecided or
        ``Effectively_constant`` -> ``Virtual``; ``Never_virtual`` / ``Device_only`` -> ``Local``
        when the buffer fits :data:`STACK_THRESHOLD_BYTES`, else ``On_device``;
        ``Materialized`` -> ``On_device``. A node already declared ``Shared_cross_streams``
        needs a persistent buffer, so it settles to ``On_device`` instead of Virtual or Local.
        Sharing is left as it is. The provenance recorded is ``1000 * old + provenance``."""
        mode = self.memory_mode
        old_prov = self.memory_mode_provenance or 0
        prov = 1000 * old_prov + provenance
        shared = self.sharing is mm.Sharing.Shared_cross_streams
        match mode:
            case None | mm.Effectively_constant():
                self.update_memory_mode(self._settled_constant(), prov)
            case mm.Never_virtual() | mm.Device_only():
                if not shared and self.size_in_bytes <= STACK_THRESHOLD_BYTES:
                    self.update_memory_mode(mm.Local(), prov)
                else:
                    self.update_memory_mode(mm.On_device(), prov)
            case mm.Materialized():
                self.update_memory_mode(mm.On_device(), prov)
            case _:
                pass

    def is_virtual_force(self, provenance: int) -> bool:
        """Settle an undecided mode (undecided or ``Effectively_constant`` become ``Virtual``,
        or ``On_device`` if declared ``Shared_cross_streams``) and tell whether the node is
        virtual."""
        if self.memory_mode is None or isinstance(self.memory_mode, mm.Effectively_constant):
            self.update_memory_mode(self._settled_constant(), provenance)
        return self.known_virtual()

    def _settled_constant(self) -> mm.MemoryMode:
        # What an undecided or Effectively_constant node settles to.
        if self.sharing is mm.Sharing.Shared_cross_streams:
            return mm.On_device()
        return mm.Virtual()

    def is_hosted_force(self, provenance: int) -> bool:
        """Settle the mode to its most local choice and tell whether the node is hosted."""
        self.default_to_most_local(provenance)
        return self.is_hosted()

    def is_materialized_force(self, provenance: int) -> bool:
        """Settle the mode and tell whether the node has a persistent buffer
        (``On_device`` or ``Hosted``)."""
        self.default_to_most_local(provenance)
        return isinstance(self.memory_mode, (mm.On_device, mm.Hosted))

    def is_in_context_force(self, provenance: int) -> bool:
        """Settle the mode and tell whether the node needs a buffer in a device context
        (``On_device`` or ``Hosted``; ``Virtual`` and ``Local`` nodes do not)."""
        return self.is_materialized_force(provenance)

    # ---- host array and synchronization ----

    @property
    def array(self) -> np.ndarray | None:
        """The host array of a hosted node (created, zero-filled, on first use), else ``None``.

        Its dtype is ``prec.numpy_dtype`` and its shape ``prec.host_shape(dims)`` (padding
        included). Reading it directly bypasses :meth:`do_read`; prefer :meth:`get_values`."""
        if self._array is None and self.is_hosted():
            with self._lock:
                if self._array is None:
                    arr = np.zeros(self.prec.host_shape(self.dims), dtype=self.prec.numpy_dtype)
                    if self.padding is not None and self.padding.value is not None:
                        arr[...] = self.padding.value
                        arr[self.logical_slices()] = 0
                    self._array = arr
        return self._array

    @array.setter
    def array(self, value: np.ndarray | None) -> None:
        self._array = value

    def prepare_read(
        self,
        is_done: Callable[[], bool],
        sync: Callable[[], None],
        transfer: Callable[[], None] | None = None,
    ) -> None:
        """Install the hook a device-to-host copy needs: :meth:`do_read` will wait for it (if
        ``is_done()`` is false, ``sync()``), then run ``transfer()`` if given."""
        self._prepare_read = _Hook(is_done, sync, transfer)

    def prepare_write(self, is_done: Callable[[], bool], sync: Callable[[], None]) -> None:
        """Install the hook of an asynchronous read of the host array (a host-to-device copy in
        flight): :meth:`do_write` waits for it before the host array changes."""
        self._prepare_write = _Hook(is_done, sync)

    def do_read(self) -> None:
        """Wait until the host array holds the latest value scheduled for it.

        Raises:
            StreamError: the copy scheduled for it can no longer happen (a task before it on
                its stream failed): the hook's ``sync`` raises it, at every read until another
                copy's hook replaces it.
        """
        hook = self._prepare_read
        if hook is not None:
            if not hook.is_done():
                # A copy that can no longer happen raises here (StreamError); the hook then
                # stays, so every later read reports it too instead of returning stale values.
                hook.sync()
            hook, self._prepare_read = self._prepare_read, None
            if hook is not None and hook.transfer is not None:
                hook.transfer()

    def do_write(self) -> None:
        """Wait until no transfer still reads the host array (the write hook) or is about to
        overwrite it (the read hook: a copy to the host requested earlier), so that what the
        caller writes next is not overwritten by an older value. The read hook is then spent:
        the host array holds the caller's values, and a copy that failed, which can never
        land, is no reason for later reads to raise (its stream reports the failure)."""
        hook, self._prepare_write = self._prepare_write, None
        if hook is not None and not hook.is_done():
            hook.sync()
        read, self._prepare_read = self._prepare_read, None
        if read is None:
            return
        try:
            if not read.is_done():
                read.sync()
        except Exception:  # a failed copy never lands: nothing more to wait for
            return
        if read.transfer is not None:
            read.transfer()

    # ---- host values ----

    def _host_array(self, what: str) -> np.ndarray:
        arr = self.array
        if arr is None:
            raise UsageError(
                f"{what}: node {self.debug_label} is not hosted (memory mode {self.memory_mode}); "
                f"create it with hosted=True or mark it Hosted before linking"
            )
        return arr

    def _check_index(self, index: Sequence[SupportsIndex]) -> tuple[int, ...]:
        dims = self.dims_without_padding
        try:
            idx = tuple(operator.index(i) for i in index)
        except TypeError:
            raise UsageError(
                f"node {self.debug_label}: index {index!r} is not a sequence of integers"
            ) from None
        if len(idx) != len(dims) or any(not 0 <= i < d for i, d in zip(idx, dims)):
            raise UsageError(
                f"node {self.debug_label}: index {list(idx)} is out of bounds for dims {list(dims)}"
            )
        if self.padding is not None:
            idx = tuple(i + left for i, (left, _) in zip(idx, self.padding.axes))
        return idx

    def get_values(self) -> np.ndarray:
        """A copy of the logical (unpadded) values, in the node's numpy dtype.

        Raises:
            UsageError: the node is not hosted.
        """
        arr = self._host_array("get_values")
        self.do_read()
        return arr[self.logical_slices()].copy()

    def set_values(self, values: Any) -> None:
        """Overwrite the logical values on the host; devices then lag the host.

        ``values`` must have exactly the logical shape (``dims_without_padding``; plus a trailing
        4 for uint4x32) and a dtype that casts to the node's precision within its kind (floats
        into float nodes, integers into integer or float nodes).

        Raises:
            UsageError: the node is not hosted, ``values`` is not an array of numbers (a ragged
                list), the shape differs, or the dtype does not cast.
        """
        arr = self._host_array("set_values")
        try:
            vals = np.asarray(values)
        except (ValueError, TypeError) as exc:  # ragged nested lists, odd objects
            raise UsageError(
                f"set_values: node {self.debug_label}: values are not an array of numbers ({exc})"
            ) from None
        if vals.dtype == object:
            raise UsageError(
                f"set_values: node {self.debug_label}: values are not an array of numbers "
                f"(numpy sees objects of dtype object)"
            )
        expected = self.prec.host_shape(self.dims_without_padding)
        if vals.shape != expected:
            raise UsageError(
                f"set_values: node {self.debug_label} expects values of shape {list(expected)}, "
                f"got {list(vals.shape)}"
            )
        try:
            converted = precision.to_host_dtype(vals, self.prec)
        except UsageError as exc:
            raise UsageError(f"set_values: node {self.debug_label}: {exc}") from None
        self.do_write()
        arr[self.logical_slices()] = converted
        self.devices_not_lagging_host.clear()

    def get_value(self, index: Sequence[SupportsIndex]) -> float | int:
        """One logical value (as a Python number).

        Raises:
            UsageError: the node is not hosted, or ``index`` is out of bounds.
        """
        arr = self._host_array("get_value")
        if self.prec is Prec.uint4x32:
            raise UsageError(f"get_value: node {self.debug_label} is uint4x32; use get_values")
        idx = self._check_index(index)
        self.do_read()
        value = arr[idx]
        return value.item() if not self.prec.is_float else float(value)

    def set_value(self, index: Sequence[SupportsIndex], value: float | np.generic) -> None:
        """Overwrite one logical value on the host; devices then lag the host.

        Raises:
            UsageError: the node is not hosted or is uint4x32 (use :meth:`set_values`),
                ``index`` is out of bounds, or ``value`` is not a number that converts to the
                node's precision (a float into an integer node, an integer out of range).
        """
        arr = self._host_array("set_value")
        if self.prec is Prec.uint4x32:
            raise UsageError(f"set_value: node {self.debug_label} is uint4x32; use set_values")
        idx = self._check_index(index)
        try:
            v = np.asarray(value)
            if v.shape != ():
                raise UsageError(f"expected one number, got an array of shape {list(v.shape)}")
            converted = precision.to_host_dtype(v, self.prec)
        except UsageError as exc:
            raise UsageError(f"set_value: node {self.debug_label}: {exc}") from None
        self.do_write()
        arr[idx] = converted
        self.devices_not_lagging_host.clear()

    def points_1d(self, xdim: int, from_axis: int = -1) -> np.ndarray:
        """For plotting: the coordinate ``xdim`` of every point, where axis ``from_axis`` holds
        the coordinates and the other axes enumerate the points (row-major). Returns float64.

        Raises:
            UsageError: not hosted, or ``xdim`` out of range of that axis.
        """
        vals = self._coords(from_axis, (xdim,))
        return vals[:, 0]

    def points_2d(self, xdim: int, ydim: int, from_axis: int = -1) -> np.ndarray:
        """For plotting: ``(x, y)`` pairs, an array of shape ``(points, 2)`` in float64, where
        axis ``from_axis`` holds the coordinates and the other axes enumerate the points."""
        return self._coords(from_axis, (xdim, ydim))

    def _coords(self, from_axis: int, coords: tuple[int, ...]) -> np.ndarray:
        vals = self.get_values().astype(np.float64)
        if vals.ndim == 0:
            raise UsageError(f"points: node {self.debug_label} is a scalar")
        axis = from_axis % vals.ndim
        size = vals.shape[axis]
        for c in coords:
            if not 0 <= c < size:
                raise UsageError(
                    f"points: node {self.debug_label} axis {axis} has {size} entries, "
                    f"coordinate {c} is out of range"
                )
        moved = np.moveaxis(vals, axis, -1).reshape(-1, size)
        return moved[:, list(coords)]

    # ---- display ----

    def header(self) -> str:
        """A one-line summary: id, label, memory mode and provenance, dims, precision, bytes."""
        if self.memory_mode is None:
            mode = "mode undecided"
        else:
            mode = f"{self.memory_mode}/{self.memory_mode_provenance}"
        dims = "x".join(map(str, self.dims)) if self.dims_known else "(lazy)"
        if self.dims_known and self.padding is not None:
            dims += f" (logical {'x'.join(map(str, self.dims_without_padding))})"
        size = f"{self.size_in_bytes} bytes" if self.dims_known else "? bytes"
        return f"#{self.id} {self.debug_name} [{mode}] {dims or 'scalar'} {self._prec} {size}"

    @property
    def debug_memory_mode(self) -> str:
        """The mode and its provenance as text: ``Virtual/29``, or ``undecided``."""
        if self.memory_mode is None:
            return "undecided"
        return f"{self.memory_mode}/{self.memory_mode_provenance}"

    def log_debug_info(self, level: int = logging.DEBUG) -> None:
        """Log, at ``level`` on this module's logger, the header, the sharing, the devices not
        lagging the host and the backend annotations (nothing if the logger is off for it)."""
        if logger.isEnabledFor(level):
            logger.log(
                level,
                "%s; sharing %s; devices not lagging host %s; backend info %s",
                self.header(),
                self.sharing.value,
                sorted(self.devices_not_lagging_host),
                self.backend_info,
            )

    def __repr__(self) -> str:
        return f"<Tnode {self.debug_label} {self.dims if self.dims_known else '(lazy)'}>"

    def __str__(self) -> str:
        if self._array is None and not self.is_hosted():
            return f"{self.header()}\n(not hosted)"
        vals = self.get_values()
        body = np.array2string(vals, threshold=200, edgeitems=3, precision=4)
        return f"{self.header()}\n{body}"


__all__ = [
    "DEFAULT_PREC",
    "STACK_THRESHOLD_BYTES",
    "Padding",
    "Tnode",
    "all_nodes",
    "find",
    "log_accessible_headers",
    "print_accessible_headers",
    "registered_nodes",
]
