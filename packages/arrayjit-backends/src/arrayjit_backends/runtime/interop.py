"""Zero-copy exchange with other array libraries through the standard array protocols.

- Export: :class:`ArrayExport`, what :meth:`Context.array
  <arrayjit_backends.runtime.values.Context.array>` returns: a node's buffer as DLPack
  (``__dlpack__`` / ``__dlpack_device__``) and numpy's ``__array_interface__``, aliasing the
  buffer. On CPU backends the buffer is host memory and the export is a numpy view of it (numpy
  makes the DLPack capsule: no hand-written DLPack struct), ordered after the buffer's writer
  each time a consumer takes it (there is no device stream to hand to the consumer).
- Device export: :class:`DeviceArrayExport`, what it returns where the buffer is device memory
  another library can use (CUDA): ``__cuda_array_interface__`` (version 3, its ``stream`` the
  writer's) and DLPack (a capsule of :mod:`~arrayjit_backends.runtime.dlpack`), the consumer's
  stream made to wait for the buffer's writer on the device, not the host.
- Import: :func:`external_host_array`, the checks an external array (anything with
  ``__dlpack__`` or ``__array_interface__``) passes before it becomes a node's buffer in a new
  context (``make_context(stream, ctx_arrays={node: array})``): host memory, the node's dtype
  and host shape, C-contiguous, aligned to the element size (:func:`layout_mismatch`, the one
  checker of these, which host transfers use too).
- Device import: :func:`external_device_array`, the same for device memory (DLPack on
  ``kDLCUDA``, taken with :func:`~arrayjit_backends.runtime.dlpack.take` and ordered on the
  consumer's stream by the producer, or ``__cuda_array_interface__``, whose ``stream`` the
  caller makes its stream wait for): the context's device, then the same checks.

Below :mod:`~arrayjit_backends.runtime.values` (which builds exports and buffers from these):
imports numpy, arrayjit_tnode, :mod:`~arrayjit_backends.runtime.dlpack` and the stream API's
:class:`~arrayjit_backends.impl.stream_queue.Event`.
"""

from __future__ import annotations

import enum
import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from arrayjit_backends.impl.stream_queue import Event, StreamQueue
from arrayjit_backends.runtime import dlpack
from arrayjit_tnode import Prec, Tnode, UsageError

DLPACK_CPU = dlpack.KDL_CPU
"""DLPack's ``kDLCPU`` device type."""
DLPACK_CUDA_HOST = dlpack.KDL_CUDA_HOST
"""DLPack's ``kDLCUDAHost`` (pinned host memory: also readable by the CPU)."""


class SupportsDLPack(Protocol):
    """An array exported through DLPack (numpy, jax, torch, CuPy arrays, :class:`ArrayExport`)."""

    def __dlpack__(self, *, stream: Any = ...) -> Any: ...

    def __dlpack_device__(self) -> Any: ...


class SupportsArrayInterface(Protocol):
    """An array exported through numpy's array interface."""

    @property
    def __array_interface__(self) -> dict[str, Any]: ...


class SupportsCudaArrayInterface(Protocol):
    """An array of CUDA memory exported through the CUDA array interface (CuPy, Numba, torch)."""

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]: ...


ExternalArray = SupportsDLPack | SupportsArrayInterface | SupportsCudaArrayInterface
"""What a context takes as a node's buffer besides a
:class:`~arrayjit_backends.runtime.values.Buffer`."""


class _Keeper:
    """The base of an export's numpy view: holds what must outlive every consumer (the
    context, hence its pools), since a consumer keeps the view alive, not the export."""

    def __init__(self, view: np.ndarray, keep: object) -> None:
        self.__array_interface__ = view.__array_interface__
        self.view = view
        self.keep = keep


class ArrayExport:
    """A node's buffer in a context, for other array libraries: ``np.from_dlpack(e)``,
    ``np.asarray(e)``, ``jax.dlpack.from_dlpack(e)``, ``torch.from_dlpack(e)`` take it without
    a copy (where the consumer can alias memory of this alignment).

    Each time a consumer takes it (``__dlpack__``, ``__array_interface__``), it first waits for
    the buffer's last writer scheduled so far (the routine, upload or copy that wrote it, on
    any stream), so the consumer sees the value that work left. What the consumer got is the
    buffer itself, not a snapshot: a routine run scheduled later writes into it while the
    consumer may read it. Take the array again after the next run (that waits for it), and do
    not schedule work writing the node while a consumer still reads the earlier one.
    Writes through it (where the consumer allows them) are not tracked: make them while no
    scheduled work uses the node (after :meth:`Backend.await_stream`).

    Attributes:
        node: the exported node.
        context: the context whose buffer this is (kept alive by every consumer's array).
        shape, dtype: the node's host shape and numpy dtype.
    """

    __slots__ = ("__weakref__", "_settle", "_view", "context", "node")

    def __init__(self, view: np.ndarray, settle: Callable[[], None], node: Tnode, context: Any):
        self._view = np.asarray(_Keeper(view, context))
        self._settle = settle
        self.node = node
        self.context = context

    @property
    def shape(self) -> tuple[int, ...]:
        """The node's host shape."""
        return tuple(self._view.shape)

    @property
    def dtype(self) -> np.dtype[Any]:
        """The node's numpy dtype."""
        return self._view.dtype

    def __dlpack__(
        self,
        *,
        stream: Any = None,
        max_version: tuple[int, int] | None = None,
        dl_device: Any = None,
        copy: bool | None = None,
    ) -> Any:
        """A DLPack capsule of the buffer, once its writer is done.

        ``stream``: must be None, as the array API prescribes for CPU memory (there is no
        device stream to order the consumer on, so the export waits for the writer on the
        host instead).

        Raises:
            BufferError: ``stream`` is not None, or the consumer asks for what numpy cannot
                give (a copy to another device).
            StreamError: the writer failed.
        """
        if stream is not None:
            raise BufferError(
                f"node {self.node.debug_label}: its buffer is CPU memory, which has no stream; "
                f"__dlpack__ takes stream=None, got {stream!r}"
            )
        self._settle()
        kwargs: dict[str, Any] = {}
        if max_version is not None:
            kwargs["max_version"] = max_version
        if dl_device is not None:
            kwargs["dl_device"] = dl_device
        if copy is not None:
            kwargs["copy"] = copy
        return self._view.__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        """``(kDLCPU, 0)``: host memory."""
        return (DLPACK_CPU, 0)

    @property
    def __array_interface__(self) -> dict[str, Any]:
        """numpy's array interface of the buffer, once its writer is done (the ``data``
        pointer aliases the buffer)."""
        self._settle()
        return self._view.__array_interface__

    def __repr__(self) -> str:
        return (
            f"<ArrayExport of node {self.node.debug_label} {self.shape} {self.dtype} "
            f"in {self.context!r}>"
        )


class ExportError(UsageError, BufferError):
    """A consumer asked an export for what it cannot give (a :class:`UsageError`, and the
    ``BufferError`` the DLPack protocol names for it)."""


class DeviceExporter(Protocol):
    """What a :class:`DeviceArrayExport` needs of its device backend (the hooks of
    :class:`~arrayjit_backends.impl.device.DeviceMemory`)."""

    def native_stream(self, queue: StreamQueue) -> int | None: ...

    def stream_wait(self, stream: int, queue: StreamQueue) -> bool: ...


class DeviceArrayExport:
    """A node's buffer in device memory, for other array libraries on that device:
    ``cupy.asarray(e)`` (``__cuda_array_interface__``), ``cupy.from_dlpack(e)``,
    ``torch.from_dlpack(e)``, ``jax.dlpack.from_dlpack(e)`` take it without a copy.

    Ordered on the device, never on the host: ``__cuda_array_interface__`` names the stream of
    the buffer's pending writer as its ``stream`` (None once the writer is done), which the
    consumer synchronizes with; ``__dlpack__(stream=S)`` makes the consumer's stream ``S`` wait
    for the writer's event through the driver (``-1``: no wait, as the protocol says). As on the
    CPU, what the consumer gets is the buffer itself: a run scheduled later writes into it.
    Every consumer's array keeps the export, hence the context's memory, alive.

    Attributes:
        node: the exported node.
        context: the context whose buffer this is.
        shape, dtype: the node's host shape and numpy dtype.
        address: the buffer's device address.
        device: DLPack's ``(device type, device id)``.
    """

    __slots__ = (
        "__weakref__", "_exporter", "_what", "_writer", "address", "context", "device",
        "dtype", "node", "shape",
    )  # fmt: skip

    def __init__(
        self,
        node: Tnode,
        context: Any,
        address: int,
        device: tuple[int, int],
        writer: Callable[[], tuple[StreamQueue, Event] | None],
        exporter: DeviceExporter,
        what: str,
    ) -> None:
        """``writer()``: the buffer's pending writer now, as its stream's queue and its event;
        None once no write is pending. ``exporter``: the device backend (its stream hooks).
        ``what``: the node, backend and device for messages."""
        self.node = node
        self.context = context
        self.address = address
        self.device = device
        self.shape: tuple[int, ...] = tuple(node.prec.host_shape(node.dims))
        self.dtype: np.dtype[Any] = np.dtype(node.prec.numpy_dtype)
        self._writer = writer
        self._exporter = exporter
        self._what = what

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        """The CUDA array interface (version 3) of the buffer: ``data`` its device address,
        ``stream`` the pending writer's stream (the consumer synchronizes with it), or None
        when no write is pending.

        Raises:
            AttributeError: the buffer is not CUDA memory (so ``hasattr`` is false).
            UsageError: the precision has no typestr of the interface (bfloat16, fp8).
            StreamError: the writer failed, where it has no stream to name.
        """
        if self.device[0] not in (dlpack.KDL_CUDA, dlpack.KDL_CUDA_MANAGED):
            raise AttributeError(f"{self._what}: not CUDA memory (DLPack device {self.device})")
        if not dlpack.is_standard(self.dtype):
            raise UsageError(
                f"{self._what}: the CUDA array interface has no type for precision "
                f"{self.node.prec} (numpy dtype {self.dtype}); use DLPack (__dlpack__)"
            )
        stream: int | None = None
        pending = self._writer()
        if pending is not None:
            queue, event = pending
            handle = self._exporter.native_stream(queue)
            if handle is None or handle in (0, 1, 2):
                event.sync()  # no stream of its own to name: the consumer finds it done
            else:
                stream = handle
        return {
            "shape": self.shape,
            "typestr": self.dtype.str,
            "data": (self.address, False),
            "strides": None,
            "version": 3,
            "stream": stream,
        }

    def __dlpack__(
        self,
        *,
        stream: Any = None,
        max_version: tuple[int, int] | None = None,
        dl_device: Any = None,
        copy: bool | None = None,
    ) -> Any:
        """A DLPack capsule of the buffer (versioned where ``max_version`` allows it), the
        consumer's ``stream`` made to wait for the buffer's pending writer.

        Raises:
            UsageError: ``stream`` is not a stream of the protocol (see
                :func:`~arrayjit_backends.runtime.dlpack.consumer_stream`), the consumer asks
                for another device or for a copy (also a ``BufferError``), or DLPack has no
                type of the precision.
            StreamError: the writer failed, where the wait falls back to the host.
        """
        if dl_device is not None and tuple(dl_device) != self.device:
            raise ExportError(
                f"{self._what}: the buffer is on DLPack device {self.device}; a copy to "
                f"{tuple(dl_device)} was asked, which an export does not make"
            )
        if copy:
            raise ExportError(f"{self._what}: an export aliases the buffer; it never copies")
        consumer = dlpack.consumer_stream(stream, self._what)
        pending = self._writer()
        if pending is not None and consumer is not None:
            queue, event = pending
            # The consumer's stream waits for the writer's stream on the device; where that
            # is no stream of the device's driver, the host waits for the writer instead.
            exporter = self._exporter
            if exporter.native_stream(queue) != consumer and not exporter.stream_wait(
                consumer, queue
            ):
                event.sync()
        versioned = max_version is not None and tuple(max_version) >= dlpack.VERSION
        return dlpack.capsule(
            self.address, self.shape, self.dtype, self.device, self, versioned=versioned
        )

    def __dlpack_device__(self) -> tuple[int, int]:
        """DLPack's ``(device type, device id)`` of the buffer (``(2, ordinal)``: CUDA)."""
        return self.device

    def __repr__(self) -> str:
        return (
            f"<DeviceArrayExport of node {self.node.debug_label} {self.shape} {self.dtype} "
            f"at {self.address:#x} on DLPack device {self.device} in {self.context!r}>"
        )


class Mismatch(enum.Enum):
    """The first way an array's layout differs from a node's buffer (:func:`layout_mismatch`)."""

    DTYPE = "dtype"
    SHAPE = "shape"
    STRIDES = "strides"
    ALIGNMENT = "alignment"


def c_strides(shape: Sequence[int], itemsize: int) -> tuple[int, ...]:
    """The byte strides of a C-contiguous (row-major) array of ``shape``."""
    strides: list[int] = []
    step = itemsize
    for n in reversed(shape):
        strides.append(step)
        step *= int(n)
    return tuple(reversed(strides))


def is_c_contiguous(shape: Sequence[int], strides: Sequence[int] | None, itemsize: int) -> bool:
    """Whether byte ``strides`` (None: row-major) lay ``shape`` out row-major without gaps,
    as numpy's ``C_CONTIGUOUS`` flag says: the stride of an axis of length 1 does not matter,
    and an array without elements is contiguous."""
    if strides is None or 0 in shape:
        return True
    if len(strides) != len(shape):  # a malformed interface: not this layout
        return False
    want = c_strides(shape, itemsize)
    return all(n == 1 or s == w for n, s, w in zip(shape, strides, want, strict=True))


@functools.lru_cache(maxsize=4096)  # bounded: shapes are the user's
def host_layout(prec: Prec, dims: tuple[int, ...]) -> tuple[np.dtype[Any], tuple[int, ...]]:
    """The numpy dtype and host shape (padding included) of a node of ``prec`` and ``dims``:
    what :func:`layout_mismatch` checks first, remembered for the per-transfer checks."""
    return np.dtype(prec.numpy_dtype), tuple(prec.host_shape(dims))


def layout_mismatch(
    tn: Tnode,
    dtype: np.dtype[Any] | None,
    shape: Sequence[int],
    strides: Sequence[int] | None,
    address: int | None,
) -> Mismatch | None:
    """The first way an array (``dtype``, None where it has no numpy dtype; ``shape``; byte
    ``strides``, None for row-major; ``address``, None to leave it unchecked) cannot be
    ``tn``'s buffer, checked in this order: the node's numpy dtype, its host shape (padding
    included), C-contiguous, the address a multiple of the element size (where the array has
    elements); None where it can be. The one checker of host arrays, imported host arrays and
    imported device arrays: each caller words its own message."""
    want_dtype, want = host_layout(tn.prec, tuple(tn.dims))
    if dtype is None or dtype != want_dtype:
        return Mismatch.DTYPE
    if tuple(shape) != want:
        return Mismatch.SHAPE
    if not is_c_contiguous(want, strides, dtype.itemsize):
        return Mismatch.STRIDES
    if address is not None and address % max(tn.prec.byte_size, 1) and math.prod(want):
        return Mismatch.ALIGNMENT
    return None


def _import_error(
    kind: Mismatch,
    tn: Tnode,
    found: tuple[Any, tuple[int, ...], tuple[int, ...], int],
    what: str,
    where: str,
    copy_hint: str,
) -> UsageError:
    """The error of an imported array (``found``: its dtype, shape, byte strides, address)
    that cannot be ``tn``'s buffer for reason ``kind``."""
    label = f"node {tn.debug_label}"
    dtype, shape, strides, address = found
    want_dtype = np.dtype(tn.prec.numpy_dtype)
    want_shape = tuple(tn.prec.host_shape(tn.dims))
    match kind:
        case Mismatch.DTYPE:
            text = (
                f"{label} has precision {tn.prec} (dtype {want_dtype}); the given array has "
                f"dtype {dtype}"
            )
        case Mismatch.SHAPE:
            text = f"{label} has host shape {want_shape}; the given array has shape {shape}"
        case Mismatch.STRIDES:
            text = (
                f"the array given for {label} has strides {strides}, not C-contiguous "
                f"(expected {c_strides(want_shape, want_dtype.itemsize)}); pass a C-contiguous "
                f"copy ({copy_hint})"
            )
        case Mismatch.ALIGNMENT:
            text = (
                f"the array given for {label} starts at address {address:#x}, not a multiple "
                f"of its element size {max(tn.prec.byte_size, 1)}"
            )
    return UsageError(f"{what}: {text} ({where})")


def external_host_array(obj: object, tn: Tnode, what: str, where: str) -> np.ndarray:
    """The host memory of ``obj`` as a numpy array (no copy), checked to be a buffer of
    ``tn`` (:func:`layout_mismatch`): its dtype, host shape (padding included), C-contiguous,
    and its address a multiple of the element size. ``where`` names the stream for messages.

    Raises:
        UsageError: ``obj`` is neither an array of the protocols nor host memory, or one of
            the checks fails (the message names the node, what was expected and found).
    """
    label = f"node {tn.debug_label}"
    if isinstance(obj, np.ndarray):
        arr = obj
    elif hasattr(obj, "__dlpack__"):
        device = getattr(obj, "__dlpack_device__", lambda: (DLPACK_CPU, 0))()
        if int(device[0]) not in (DLPACK_CPU, DLPACK_CUDA_HOST):
            raise UsageError(
                f"{what}: the array given for {label} is on DLPack device {tuple(device)}, not "
                f"in host memory; this backend computes on host memory ({where})"
            )
        try:
            arr = np.from_dlpack(obj)
        except (BufferError, TypeError, ValueError, RuntimeError) as exc:
            raise UsageError(
                f"{what}: the array given for {label} cannot be read through DLPack without a "
                f"copy ({type(exc).__name__}: {exc}; {where})"
            ) from exc
    elif hasattr(obj, "__array_interface__"):
        arr = np.asarray(obj)
    elif hasattr(obj, "__cuda_array_interface__"):
        raise UsageError(
            f"{what}: the array given for {label} is CUDA memory (__cuda_array_interface__), "
            f"not in host memory; this backend computes on host memory ({where})"
        )
    else:
        raise UsageError(
            f"{what}: ctx_arrays must map nodes to Buffers (from alloc_buffer or a context's "
            f"ctx_arrays) or arrays with __dlpack__, __array_interface__ or "
            f"__cuda_array_interface__; got {type(obj).__name__} for {label} ({where})"
        )
    address = arr.ctypes.data
    strides = None if arr.flags.c_contiguous else arr.strides  # numpy's flag: the same rule
    kind = layout_mismatch(tn, arr.dtype, arr.shape, strides, address)
    if kind is not None:
        found = (arr.dtype, tuple(arr.shape), tuple(arr.strides), address)
        raise _import_error(kind, tn, found, what, where, "np.ascontiguousarray")
    return arr


# ---- import of device memory (CUDA) ----


def is_device_array(obj: object) -> bool:
    """Whether ``obj`` is an array of device memory by the protocols: DLPack on a device
    other than host memory (``kDLCPU``, ``kDLCUDAHost``), or the CUDA array interface without
    a DLPack of host memory. False where its ``__dlpack_device__`` fails: the host import's
    checks then say what is wrong."""
    if hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
        try:
            kind = int(obj.__dlpack_device__()[0])
        except Exception:  # a producer's failure: reported where the array is read
            return False
        return kind not in (DLPACK_CPU, DLPACK_CUDA_HOST)
    return hasattr(obj, "__cuda_array_interface__") and not hasattr(obj, "__array_interface__")


@dataclass
class ExternalDeviceArray:
    """Another library's device array, read and checked to be a node's buffer
    (:func:`external_device_array`).

    Attributes:
        address: its first element's device address.
        nbytes: its size in bytes.
        device: DLPack's ``(device type, id)`` the producer gave (DLPack), None where it gave
            none (the CUDA array interface: the driver tells).
        stream: the producer's stream that the consumer must wait for before its first use
            (the CUDA array interface's ``stream``: 1 and 2 the default streams), None for no
            wait (DLPack: the producer ordered the consumer's stream itself).
        protocol: how it was read, for messages.
        keep: what holds the memory (the object).
        taken: the DLPack tensor taken from the producer (None for the CUDA array interface),
            handed back by :meth:`release`.
    """

    address: int
    nbytes: int
    device: tuple[int, int] | None
    stream: int | None
    protocol: str
    keep: tuple[object, ...]
    taken: dlpack.Taken | None = None

    def release(self) -> None:
        """Hand a taken DLPack tensor back to its producer (idempotent; nothing for the CUDA
        array interface, whose memory the object holds)."""
        if self.taken is not None:
            self.taken.release()


def external_device_array(
    obj: object,
    tn: Tnode,
    device: tuple[int, int],
    stream: int,
    what: str,
    where: str,
) -> ExternalDeviceArray:
    """The device memory of ``obj`` (DLPack, preferred, or ``__cuda_array_interface__``),
    without a copy, checked to be a buffer of ``tn`` on DLPack device ``device``
    (:func:`layout_mismatch`: dtype, host shape, C-contiguous, alignment). Through DLPack the
    producer is asked to order ``stream`` (the consumer's native stream) after its work on the
    array; the CUDA array interface names the producer's stream in the result instead. The
    caller owns the result: :meth:`ExternalDeviceArray.release` once the buffer is gone.
    ``what`` and ``where`` name the call, node, backend and stream for messages.

    Raises:
        UsageError: the array is on another device, its producer refuses it, or a check fails
            (the message names the node, what was expected and found).
    """
    label = f"node {tn.debug_label}"
    if hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
        given = tuple(int(v) for v in obj.__dlpack_device__())
        if given != device:
            raise UsageError(
                f"{what}: the array given for {label} is on DLPack device {given}; the "
                f"context's device is {device} ({where})"
            )
        capsule = _device_capsule(obj, stream, label, what, where)
        taken = dlpack.take(capsule)
        ext = ExternalDeviceArray(
            taken.address,
            math.prod(taken.shape) * (taken.bits * taken.lanes // 8),
            taken.device,
            None,
            "DLPack",
            (obj,),
            taken,
        )
        try:
            if taken.device != device:
                raise UsageError(
                    f"{what}: the DLPack tensor given for {label} is on device {taken.device}, "
                    f"though its producer said {given} ({where})"
                )
            itemsize = max(taken.bits * taken.lanes // 8, 1)
            strides = None if taken.strides is None else tuple(s * itemsize for s in taken.strides)
            _check_device_layout(tn, taken.dtype, taken.shape, strides, ext, what, where)
        except BaseException:
            ext.release()
            raise
        return ext
    cai = getattr(obj, "__cuda_array_interface__", None)
    if not isinstance(cai, dict):
        raise UsageError(
            f"{what}: the array given for {label} has neither DLPack nor a CUDA array "
            f"interface dict ({where})"
        )
    try:
        shape = tuple(int(n) for n in cai["shape"])
        dtype = np.dtype(cai["typestr"])
        address = int(cai["data"][0] or 0)
        strides = None if cai.get("strides") is None else tuple(int(s) for s in cai["strides"])
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise UsageError(
            f"{what}: the CUDA array interface given for {label} is malformed "
            f"({type(exc).__name__}: {exc}; {where})"
        ) from exc
    if cai.get("mask") is not None:
        raise UsageError(
            f"{what}: the CUDA array interface given for {label} has a mask; a node's buffer "
            f"has none ({where})"
        )
    producer = cai.get("stream") if int(cai.get("version", 0)) >= 3 else None
    if producer is not None and (
        isinstance(producer, bool) or not isinstance(producer, int) or producer <= 0
    ):
        raise UsageError(
            f"{what}: the CUDA array interface given for {label} has stream {producer!r}; "
            f"the interface allows None, 1 (legacy default), 2 (per-thread default) or a "
            f"stream handle, never 0 ({where})"
        )
    ext = ExternalDeviceArray(
        address, math.prod(shape) * dtype.itemsize, None, producer, "CUDA array interface", (obj,)
    )
    _check_device_layout(tn, dtype, shape, strides, ext, what, where)
    return ext


def _device_capsule(obj: Any, stream: int, label: str, what: str, where: str) -> object:
    """``obj.__dlpack__`` asked for a versioned capsule ordered on the consumer's ``stream``
    (a producer older than DLPack 1.0 is asked again without ``max_version``)."""
    try:
        try:
            return obj.__dlpack__(stream=stream, max_version=dlpack.VERSION)
        except TypeError:
            return obj.__dlpack__(stream=stream)
    except Exception as exc:
        raise UsageError(
            f"{what}: the producer of the array given for {label} refused __dlpack__(stream="
            f"{stream:#x}) ({type(exc).__name__}: {exc}; {where})"
        ) from exc


def _check_device_layout(
    tn: Tnode,
    dtype: np.dtype[Any] | None,
    shape: tuple[int, ...],
    strides: tuple[int, ...] | None,
    ext: ExternalDeviceArray,
    what: str,
    where: str,
) -> None:
    """Raise the import error of the first mismatch of a device array with ``tn``."""
    kind = layout_mismatch(tn, dtype, shape, strides, ext.address)
    if kind is not None:
        itemsize = 0 if dtype is None else dtype.itemsize
        found_strides = strides if strides is not None else c_strides(shape, itemsize)
        found = (
            dtype if dtype is not None else "of no numpy type",
            shape,
            found_strides,
            ext.address,
        )
        hint = "cupy.ascontiguousarray, torch's .contiguous()"
        raise _import_error(kind, tn, found, what, f"{ext.protocol}; {where}", hint)


__all__ = [
    "DLPACK_CPU",
    "ArrayExport",
    "DeviceArrayExport",
    "DeviceExporter",
    "ExportError",
    "ExternalArray",
    "ExternalDeviceArray",
    "Mismatch",
    "SupportsArrayInterface",
    "SupportsCudaArrayInterface",
    "SupportsDLPack",
    "c_strides",
    "external_device_array",
    "external_host_array",
    "is_c_contiguous",
    "is_device_array",
    "layout_mismatch",
]
