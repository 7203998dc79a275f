"""The host-array half of a tensor node: its host array, the hooks that keep it consistent with
device copies, and checked reads and writes of its values.

A backend that copies a node's buffer to or from the host cannot make the copy synchronous without
stalling its stream, so it installs hooks instead: ``prepare_read`` (a copy into the host array is
in flight) and ``prepare_write`` (a copy out of it is in flight). Every host read (:meth:`do_read`)
and write (:meth:`do_write`) waits for them, so a user never sees a stale or torn host array.
Writes check the values (shape, and a dtype conversion within its kind) before touching the array.

:class:`HostArrayMixin` is a base of :class:`arrayjit_tnode.tnode.Tnode`, which it reads for the
node's dims, precision, padding and mode; the methods are used as ``tn.get_values()`` etc.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, SupportsIndex

import numpy as np

from arrayjit_tnode import memory_mode as mm
from arrayjit_tnode import precision
from arrayjit_tnode.errors import UsageError
from arrayjit_tnode.precision import Prec

if TYPE_CHECKING:
    import threading

    from arrayjit_tnode.padding import Padding

_CONSTANT = mm.Hosted(mm.Constant())


@dataclass
class _Hook:
    is_done: Callable[[], bool]
    sync: Callable[[], None]
    transfer: Callable[[], None] | None = None


class HostArrayMixin:
    """Host array, synchronization hooks and host values of a :class:`~arrayjit_tnode.Tnode`."""

    __slots__ = ("_array", "_prepare_read", "_prepare_write")

    _array: np.ndarray | None
    _prepare_read: _Hook | None
    _prepare_write: _Hook | None

    if TYPE_CHECKING:
        # What this half reads of the node; Tnode defines them.
        _lock: threading.Lock
        padding: Padding | None
        memory_mode: mm.MemoryMode | None
        devices_not_lagging_host: set[int]

        # A property to mypy: the slot is Tnode's, and mypy checks assignments in this class
        # against this class's own __slots__.
        @property
        def host_version(self) -> int: ...
        @host_version.setter
        def host_version(self, value: int) -> None: ...

        @property
        def prec(self) -> Prec: ...
        @property
        def dims(self) -> tuple[int, ...]: ...
        @property
        def dims_without_padding(self) -> tuple[int, ...]: ...
        @property
        def debug_label(self) -> str: ...
        def is_hosted(self) -> bool: ...
        def logical_slices(self) -> tuple[slice, ...]: ...

    def _init_host_array(self) -> None:
        """No host array yet (it is created on first use) and no transfer in flight."""
        self._array = None
        self._prepare_read = None
        self._prepare_write = None

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
                        arr[...] = margin_value(self.padding.value, arr.dtype)
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

    @property
    def copy_to_host_pending(self) -> bool:
        """Whether a copy to the host array was requested that no read or write of the host
        array has passed yet (its read hook is installed: it stays after a copy that failed,
        until the next write of the host array or the next copy's hook)."""
        return self._prepare_read is not None

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
            if any(isinstance(i, (bool, np.bool_)) for i in index):
                raise TypeError("a bool is not an index")  # as dims refuse them
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

    def _refuse_constant_rewrite(self, what: str) -> None:
        """A ``Hosted(Constant)`` node gets its values on the host before any device holds it
        (``devices_not_lagging_host`` is empty until an upload); once one does, the constant
        is initialized and a host write is refused."""
        if self.devices_not_lagging_host and self.memory_mode == _CONSTANT:
            raise UsageError(
                f"{what}: node {self.debug_label} is a constant already on a device (memory "
                f"mode {self.memory_mode}: it never changes after initialization); set its "
                f"values before a routine using it is linked, or use a node that is not "
                f"Constant"
            )

    def set_values(self, values: Any) -> None:
        """Overwrite the logical values on the host; devices then lag the host.

        ``values`` must have exactly the logical shape (``dims_without_padding``; plus a trailing
        4 for uint4x32) and a dtype that casts to the node's precision within its kind (floats
        into float nodes, integers into integer or float nodes).

        Raises:
            UsageError: the node is not hosted, ``values`` is not an array of numbers (a ragged
                list), the shape differs, or the dtype does not cast; or the node is
                ``Hosted(Constant)`` and a device already holds it (a constant's values are
                set before it is uploaded).
        """
        arr = self._host_array("set_values")
        self._refuse_constant_rewrite("set_values")
        try:
            vals = np.asarray(values)
        except (ValueError, TypeError) as exc:  # ragged nested lists, odd objects
            raise UsageError(
                f"set_values: node {self.debug_label}: values are not an array of numbers ({exc})"
            ) from None
        if vals.dtype.kind in "fO" and not isinstance(values, np.ndarray):
            vals = _python_ints(values, self.prec, self.debug_label, vals)
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
        self.host_version += 1

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
                node's precision (a float into an integer node, an integer out of range); or
                the node is ``Hosted(Constant)`` and a device already holds it.
        """
        arr = self._host_array("set_value")
        self._refuse_constant_rewrite("set_value")
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
        self.host_version += 1

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


__all__ = ["HostArrayMixin"]


def _python_ints(values: Any, prec: Prec, label: str, inferred: np.ndarray) -> np.ndarray:
    """Nested lists of Python ints for an integer node, read exactly: numpy infers float64
    (or objects) for ints beyond int64 mixed with others (``[2**64 - 1, 0]``), which would
    refuse or round values that the precision holds. Anything else: ``inferred`` unchanged."""
    if prec.is_float or prec is Prec.uint4x32:
        return inferred
    try:
        objs = np.asarray(values, dtype=object)
    except (ValueError, TypeError):
        return inferred
    if objs.size == 0 or not all(type(v) is int for v in objs.flat):
        return inferred
    info = np.iinfo(prec.numpy_dtype)
    for v in objs.flat:
        if not info.min <= v <= info.max:
            raise UsageError(
                f"set_values: node {label}: value {v} is out of the range "
                f"[{info.min}, {info.max}] of precision {prec}"
            )
    return np.array(objs.tolist(), dtype=prec.numpy_dtype)


def margin_value(value: float, dtype: np.dtype[Any]) -> float | int:
    """The padding value as the margins of an array of ``dtype`` hold it: for an integer dtype,
    converted by the IR's float-to-integer rule (truncation toward zero, saturating at the
    type's bounds, NaN gives 0), where numpy would raise or wrap (-1 into a byte, NaN)."""
    if dtype.kind not in "iu":
        return value
    info = np.iinfo(dtype)
    if np.isnan(value):
        return 0
    if np.isinf(value):
        return int(info.max) if value > 0 else int(info.min)
    return min(max(int(value), int(info.min)), int(info.max))
