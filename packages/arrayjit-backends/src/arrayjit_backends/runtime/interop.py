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
  and host shape, C-contiguous, aligned to the element size.

Below :mod:`~arrayjit_backends.runtime.values` (which builds exports and buffers from these):
imports numpy, arrayjit_tnode, :mod:`~arrayjit_backends.runtime.dlpack` and the stream API's
:class:`~arrayjit_backends.impl.stream_queue.Event`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from arrayjit_backends.impl.stream_queue import Event, StreamQueue
from arrayjit_backends.runtime import dlpack
from arrayjit_tnode import Tnode, UsageError

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


ExternalArray = SupportsDLPack | SupportsArrayInterface
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


def external_host_array(obj: object, tn: Tnode, what: str, where: str) -> np.ndarray:
    """The host memory of ``obj`` as a numpy array (no copy), checked to be a buffer of
    ``tn``: its dtype, host shape (padding included), C-contiguous, and its address a multiple
    of the element size. ``where`` names the stream for messages.

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
    else:
        raise UsageError(
            f"{what}: ctx_arrays must map nodes to Buffers (from alloc_buffer or a context's "
            f"ctx_arrays) or arrays with __dlpack__ or __array_interface__; got "
            f"{type(obj).__name__} for {label} ({where})"
        )
    want_dtype = np.dtype(tn.prec.numpy_dtype)
    want_shape = tuple(tn.prec.host_shape(tn.dims))
    if arr.dtype != want_dtype:
        raise UsageError(
            f"{what}: {label} has precision {tn.prec} (dtype {want_dtype}); the given array "
            f"has dtype {arr.dtype} ({where})"
        )
    if tuple(arr.shape) != want_shape:
        raise UsageError(
            f"{what}: {label} has host shape {want_shape}; the given array has shape "
            f"{tuple(arr.shape)} ({where})"
        )
    if not arr.flags.c_contiguous:
        raise UsageError(
            f"{what}: the array given for {label} has strides {arr.strides}, not C-contiguous "
            f"(expected {np.empty(want_shape, want_dtype).strides}); pass a C-contiguous copy "
            f"(np.ascontiguousarray) ({where})"
        )
    align = max(tn.prec.byte_size, 1)
    if arr.nbytes and arr.ctypes.data % align:
        raise UsageError(
            f"{what}: the array given for {label} starts at address {arr.ctypes.data:#x}, not "
            f"a multiple of its element size {align} ({where})"
        )
    return arr


__all__ = [
    "DLPACK_CPU",
    "ArrayExport",
    "DeviceArrayExport",
    "DeviceExporter",
    "ExportError",
    "ExternalArray",
    "SupportsArrayInterface",
    "SupportsDLPack",
    "external_host_array",
]
