"""Tensor nodes: named, shaped, typed arrays that computations read and write.

A node's identity is its integer ``id``; nodes live in a weak registry (:func:`find`). Its memory
mode (see :mod:`arrayjit_tnode.memory_mode`) records where it lives, with the *provenance* (an
integer naming the code path) of the decision. Hosted nodes have a host array; backends keep the
host array and the device copies consistent through ``devices_not_lagging_host`` and the
``prepare_read`` / ``prepare_write`` hooks, so that a user never sees a stale or torn host array.
That host-array half of a node is :mod:`arrayjit_tnode.host_array`, a base class of :class:`Tnode`.
"""

from __future__ import annotations

import itertools
import logging
import math
import re
import sys
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any, TextIO

import numpy as np

from arrayjit_tnode import memory_mode as mm
from arrayjit_tnode import precision
from arrayjit_tnode.errors import MemoryModeError, UsageError
from arrayjit_tnode.host_array import HostArrayMixin
from arrayjit_tnode.padding import Padding, buffer_dims, check_dims
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


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""What a ``code_name`` must match: a C identifier (renderers build buffer names from it)."""


def _check_label(label: object) -> list[str]:
    """``label`` as a list of components: a ``str`` is one component, ``None`` none.

    Raises:
        UsageError: ``label`` is neither ``None``, a ``str`` nor a sequence of ``str``.
    """
    if label is None:
        return []
    if isinstance(label, str):
        return [str(label)]
    if isinstance(label, (bytes, bytearray)) or not isinstance(label, Sequence):
        raise UsageError(
            f"Tnode.create: label must be a str, a sequence of str or None, got {label!r} "
            f"({type(label).__name__})"
        )
    for comp in label:
        if not isinstance(comp, str):
            raise UsageError(
                f"Tnode.create: label components must be str, got {comp!r} "
                f"({type(comp).__name__}) in {list(label)!r}"
            )
    return [str(comp) for comp in label]


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


class Tnode(HostArrayMixin):
    """A tensor node. Create nodes with :meth:`create`.

    The host-array half (``array``, ``get_values``, ``set_values``, ``prepare_read``, ``do_read``,
    ...) lives in :class:`~arrayjit_tnode.host_array.HostArrayMixin`.

    Attributes:
        id: unique, positive; identity, equality, hashing and ordering use only this.
        label: display components, most specific last.
        devices_not_lagging_host: ids of devices holding the host's latest value or having
            produced the latest value themselves.
        host_version: how many times the host array was written (``set_values``,
            ``set_value``); a device buffer defined before the latest host write lags the host.
        backend_info: free-form annotations a backend or tool may write (printed by
            :meth:`log_debug_info`; nothing acts on it, and no backend of this project writes
            it).
    """

    __slots__ = (
        "__weakref__",
        "_code_name",
        "_dims",
        "_dims_thunk",
        "_dims_without_padding",
        "_lock",
        "_pending_sharing",
        "_prec",
        "_prec_forced",
        "_prec_inferred",
        "_prec_specified",
        "_sharing_provenance",
        "backend_info",
        "devices_not_lagging_host",
        "host_version",
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
    host_version: int
    backend_info: dict[str, Any]
    _code_name: str | None
    _lock: threading.Lock
    _dims: tuple[int, ...] | None
    _dims_without_padding: tuple[int, ...] | None
    _dims_thunk: Callable[[], Sequence[int]] | None
    _prec: Prec
    _prec_specified: bool
    _prec_inferred: bool
    _prec_forced: bool
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
        label: str | Sequence[str] | None = (),
        hosted: bool = False,
        padding: Padding | None = None,
        memory_mode: mm.MemoryMode | tuple[mm.MemoryMode, int] | None = None,
    ) -> Tnode:
        """Create and register a node.

        Args:
            dims: the logical (unpadded) dims, or a zero-argument callable giving them later
                (forced on first use of ``dims``).
            prec: the precision; ``None`` means the default (single) that :meth:`update_prec`
                may still replace.
            label: display components, a string or a sequence of strings, most specific
                last; ``None`` for no label.
            hosted: give the node a host array (mode ``Hosted(Unset_hosted)``).
            padding: margins added around the logical dims.
            memory_mode: an initial mode (``Virtual()``, provenance 0) or ``(mode, provenance)``.

        Raises:
            UsageError: a negative dim, a label that is not a string or a sequence of strings,
                a padding that is not a :class:`Padding` or has the wrong rank, an unknown
                precision, a memory mode that is not a mode instance.
        """
        tn = object.__new__(cls)
        tn.id = _fresh_id()
        tn.label = _check_label(label)
        if padding is not None and not isinstance(padding, Padding):
            raise UsageError(
                f"Tnode.create: node {tn.debug_label}: padding must be a Padding or None, got "
                f"{padding!r} ({type(padding).__name__})"
            )
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
        tn._init_host_array()
        tn._pending_sharing = mm.Sharing.Unset
        tn._sharing_provenance = None
        tn.memory_mode = None
        tn.memory_mode_provenance = None
        tn.devices_not_lagging_host = set()
        tn.host_version = 0
        tn.backend_info = {}
        tn._code_name = None
        if memory_mode is not None:
            if isinstance(memory_mode, tuple) and len(memory_mode) == 2:
                tn.update_memory_mode(*memory_mode)
            else:
                tn.update_memory_mode(memory_mode, 0)
        if hosted:
            tn.update_memory_mode(mm.Hosted(), 0)
        with _registry_lock:
            _registry[tn.id] = tn
        return tn

    def _set_dims(self, dims: Sequence[int]) -> None:
        logical = check_dims(self.debug_label, "dims", dims)
        padded = buffer_dims(self.debug_label, logical, self.padding)
        self._dims_without_padding = logical
        self._dims = padded

    # ---- identity ----

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Tnode) and other.id == self.id

    def __hash__(self) -> int:
        # Ids are positive ints below 2**61, which hash to themselves: the same value as
        # hash(self.id) (so sets of nodes iterate in the same order), one call fewer. The
        # optimizer hashes nodes some hundred thousand times per routine.
        return self.id

    def __lt__(self, other: Tnode) -> bool:
        return self.id < other.id

    @property
    def debug_label(self) -> str:
        """``label#id``, the way error messages name a node."""
        text = ".".join(self.label) if self.label else "node"
        return f"{text}#{self.id}"

    @property
    def code_name(self) -> str | None:
        """The identifier chosen for generated code, or ``None``: :attr:`debug_name` returns it
        when set."""
        return self._code_name

    @code_name.setter
    def code_name(self, name: str | None) -> None:
        """Set (or, with ``None``, unset) the identifier for generated code.

        Raises:
            UsageError: ``name`` is not ``None`` nor a C identifier (ASCII letters, digits and
                underscores, not starting with a digit); the message names the node.
        """
        if name is not None and not (isinstance(name, str) and _IDENTIFIER.fullmatch(name)):
            raise UsageError(
                f"node {self.debug_label}: code_name must be a C identifier (ASCII letters, "
                f"digits and underscores, not starting with a digit) or None, got {name!r} "
                f"({type(name).__name__})"
            )
        self._code_name = name

    @property
    def debug_name(self) -> str:
        """An identifier for generated code: ``code_name`` if set, else built from the label
        (non-identifier characters dropped, repeated components collapsed), else ``n<id>``."""
        if self._code_name is not None:
            return self._code_name
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

        A specified precision (given to :meth:`create` or by an earlier ``update_prec``) cannot
        change to another one; a default or inferred one can, until it is read (:attr:`prec`).

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
        return math.prod(self.dims)  # exact: dims are Python ints (see padding.buffer_dims)

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
            UsageError: ``mode`` is not a mode instance or ``provenance`` not an int.
        """
        if not isinstance(mode, mm.ALL_MODE_KINDS) or type(provenance) is not int:
            # Only a suspect argument pays for the message naming the node (the optimizer
            # settles every node of every routine through here).
            mm.check_mode(f"node {self.debug_label}", mode, provenance)
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
        if new != old and logger.isEnabledFor(logging.DEBUG):
            logger.debug("%s: memory mode %s -> %s (%d)", self.debug_label, old, new, provenance)

    def update_memory_sharing(self, sharing: mm.Sharing, provenance: int) -> None:
        """Refine only the sharing part of the mode; ``Hosted(Nonconstant)`` specializes to
        ``Hosted(Changed_on_devices(sharing))``. Where the mode has no place for sharing yet, the
        sharing is kept and applied once it does.

        Raises:
            MemoryModeError: the node already has a contradicting sharing.
            UsageError: ``sharing`` is not a :class:`~arrayjit_tnode.memory_mode.Sharing` member
                or ``provenance`` not an int.
        """
        mm.check_sharing(f"node {self.debug_label}", sharing, provenance)
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
