"""The export of device memory without a device: the DLPack capsules of ``runtime/dlpack.py``
(read back by numpy, which does not share their code, for host pointers; field by field for
CUDA pointers), the protocol's ``stream`` argument, and
:class:`~arrayjit_backends.runtime.interop.DeviceArrayExport` as ``Context.array`` builds it
over a device backend whose hooks say its memory is CUDA memory (the memory is a CPU
backend's, so its values can be checked through the capsule's address)."""

from __future__ import annotations

import ctypes
import gc
import weakref
from collections.abc import Iterator
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from arrayjit_backends import fresh_backend
from arrayjit_backends.impl.stream_queue import Event
from arrayjit_backends.runtime import dlpack
from arrayjit_backends.runtime.interop import DeviceArrayExport, ExportError
from arrayjit_ir import ir
from arrayjit_tnode import Tnode, UsageError
from arrayjit_tnode import memory_mode as mm


class Owner:
    """Stands for the context an export keeps alive."""


class Producer:
    """An array whose ``__dlpack__`` is a capsule of :func:`dlpack.capsule` (host memory)."""

    def __init__(self, arr: np.ndarray, owner: Owner) -> None:
        self.arr, self.owner = arr, owner
        self.asked: list[Any] = []

    def __dlpack__(self, **kwargs: Any) -> Any:
        self.asked.append(kwargs.get("max_version"))
        versioned = kwargs.get("max_version") is not None and kwargs["max_version"] >= (1, 0)
        a = self.arr
        return dlpack.capsule(
            a.ctypes.data, a.shape, a.dtype, (1, 0), self.owner, versioned=versioned
        )

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)


ARRAYS = [
    np.arange(24, dtype=np.float32).reshape(2, 3, 4),
    np.arange(-5, 5, dtype=np.int64),
    np.arange(7, dtype=np.uint8),
    np.array([True, False, True]),
    np.linspace(0, 1, 6, dtype=np.float16).reshape(3, 2),
    np.array(3.5, dtype=np.float64),  # zero dimensions
    np.zeros((0, 4), np.int32),  # no cells
]


@pytest.mark.parametrize("arr", ARRAYS, ids=lambda a: f"{a.dtype}{a.shape}")
def test_numpy_reads_the_capsule_in_place(arr: np.ndarray) -> None:
    owner = Owner()
    alive = weakref.ref(owner)
    producer = Producer(arr, owner)
    got = np.from_dlpack(producer)
    assert producer.asked[-1] is not None  # numpy asks for a versioned capsule
    np.testing.assert_array_equal(got, arr)
    assert got.shape == arr.shape and got.dtype == arr.dtype
    if arr.size:
        assert got.ctypes.data == arr.ctypes.data  # the memory itself, no copy
    del producer, owner
    gc.collect()
    assert alive() is not None  # numpy's array holds the tensor, hence its owner
    del got
    gc.collect()
    assert alive() is None  # numpy called the deleter


_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi)
)


def _tensor_of(capsule: Any, name: bytes) -> int:
    """The address of the managed tensor in ``capsule``."""
    return int(_get_pointer(capsule, name))


@pytest.mark.parametrize("versioned", [False, True])
def test_a_cuda_capsule_describes_the_device_pointer(versioned: bool) -> None:
    owner = Owner()
    alive = weakref.ref(owner)
    cap = dlpack.capsule(
        0x7F00_0000_1000, (3, 5), np.dtype(ml_dtypes.bfloat16), (2, 1), owner, versioned=versioned
    )
    del owner
    name = dlpack.VERSIONED_NAME if versioned else dlpack.NAME
    address = _tensor_of(cap, name)
    struct = dlpack.DLManagedTensorVersioned if versioned else dlpack.DLManagedTensor
    managed = struct.from_address(address)
    if versioned:
        assert (managed.version.major, managed.version.minor) == (1, 0)
        assert managed.flags == 0
    t = managed.dl_tensor
    assert t.data == 0x7F00_0000_1000 and t.byte_offset == 0
    assert (t.device.device_type, t.device.device_id) == (2, 1)  # kDLCUDA, device 1
    assert (t.dtype.code, t.dtype.bits, t.dtype.lanes) == (4, 16, 1)  # kDLBfloat
    assert t.ndim == 2 and [t.shape[0], t.shape[1]] == [3, 5]
    assert [t.strides[0], t.strides[1]] == [5, 1]  # in elements, row-major
    gc.collect()
    assert alive() is not None
    del cap, t, managed
    gc.collect()
    assert alive() is None  # the capsule died untaken: its destructor deleted the tensor


def test_a_capsule_refuses_a_type_dlpack_lacks() -> None:
    with pytest.raises(UsageError, match="float8_e5m2"):
        dlpack.capsule(0x1000, (4,), np.dtype(ml_dtypes.float8_e5m2), (2, 0), None)


def test_the_stream_argument_follows_the_protocol() -> None:
    assert dlpack.consumer_stream(None, "x") == 1  # the legacy default stream
    assert dlpack.consumer_stream(1, "x") == 1
    assert dlpack.consumer_stream(2, "x") == 2
    assert dlpack.consumer_stream(0x7F00_1234, "x") == 0x7F00_1234
    assert dlpack.consumer_stream(-1, "x") is None  # no synchronization asked
    for bad, message in [(0, "ambiguous"), (-2, "not a stream"), (True, "True"), ("s", "'s'")]:
        with pytest.raises(UsageError, match=message):
            dlpack.consumer_stream(bad, "node n#1")


# ---- DeviceArrayExport as Context.array builds it ----

WRITER_STREAM = 0x5000
"""The native stream handle the stand-in backend gives its streams."""


class PendingEvent(Event):
    """A writer's event that stays pending until released (records host waits)."""

    def __init__(self) -> None:
        self.done = False
        self.host_waits = 0

    def is_done(self) -> bool:
        return self.done

    def sync(self) -> None:
        self.host_waits += 1
        self.done = True


@pytest.fixture
def as_cuda(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, list[Any]]]:
    """A ``sync_interp`` backend whose device hooks call its memory CUDA memory of device 0,
    its streams native streams of handle :data:`WRITER_STREAM`, and record the device waits
    they are asked for (``stream_wait``: refused for a queue marked ``foreign``)."""
    backend: Any = fresh_backend("sync_interp")
    runtime = backend.runtime
    waits: list[Any] = []
    monkeypatch.setattr(runtime, "host_view", lambda ordinal, buf, tn: None)
    monkeypatch.setattr(
        runtime, "device_pointer", lambda ordinal, buf: ((2, ordinal), buf[0].ctypes.data + buf[1])
    )
    monkeypatch.setattr(runtime, "native_stream", lambda queue: WRITER_STREAM)

    def stream_wait(stream: int, queue: Any) -> bool:
        if getattr(queue, "foreign", False):
            return False
        waits.append((stream, queue))
        return True

    monkeypatch.setattr(runtime, "stream_wait", stream_wait)
    yield backend, waits
    backend.finalize()


def _written(backend: Any) -> tuple[Any, Tnode, np.ndarray]:
    y = Tnode.create((3, 4), label="y", memory_mode=(mm.Materialized(), 1))
    ctx = backend.make_context(backend.new_stream(backend.get_device(0)))
    routine = backend.link(ctx, backend.compile(ir.fetch(y, ir.Range_over_offsets()), name="r"))
    routine()
    return routine.context, y, np.arange(12, dtype=np.float32).reshape(3, 4)


def _pending_writer(ctx: Any, y: Tnode) -> PendingEvent:
    event = PendingEvent()
    dev = ctx.device
    dev.hazards.writers[ctx.buffers[y]] = (ctx.stream, event)
    return event


def _host_array(address: int, like: np.ndarray) -> np.ndarray:
    buf = (ctypes.c_byte * like.nbytes).from_address(address)
    return np.frombuffer(memoryview(buf), like.dtype).reshape(like.shape)


def test_the_cuda_array_interface_names_the_writers_stream(as_cuda: Any) -> None:
    backend, _ = as_cuda
    ctx, y, expected = _written(backend)
    e = ctx.array(y)
    assert isinstance(e, DeviceArrayExport) and e.__dlpack_device__() == (2, 0)
    cai = e.__cuda_array_interface__
    assert cai["version"] == 3 and cai["shape"] == (3, 4) and cai["typestr"] == "<f4"
    assert cai["strides"] is None and cai["data"] == (e.address, False)
    assert cai["stream"] is None  # the run is done: nothing to synchronize with
    np.testing.assert_array_equal(_host_array(cai["data"][0], expected), expected)
    event = _pending_writer(ctx, y)
    assert e.__cuda_array_interface__["stream"] == WRITER_STREAM
    assert event.host_waits == 0  # ordered on the device, not the host


def test_dlpack_makes_the_consumers_stream_wait(as_cuda: Any) -> None:
    backend, waits = as_cuda
    ctx, y, _ = _written(backend)
    e = ctx.array(y)
    e.__dlpack__(stream=7)
    assert waits == []  # no pending writer: no wait
    event = _pending_writer(ctx, y)
    for stream, waited in [(None, 1), (2, 2), (0x7000, 0x7000)]:
        e.__dlpack__(stream=stream)
        assert waits.pop() == (waited, ctx.stream.queue)  # waits for the writer's stream
    e.__dlpack__(stream=-1)  # the consumer asks for no synchronization
    e.__dlpack__(stream=WRITER_STREAM)  # the writer's own stream: in order already
    assert waits == [] and event.host_waits == 0
    ctx.stream.queue.foreign = True  # not a stream of this driver: the host waits
    e.__dlpack__(stream=5)
    assert event.host_waits == 1


def test_a_dlpack_capsule_keeps_the_context_alive(as_cuda: Any) -> None:
    backend, _ = as_cuda
    ctx, y, expected = _written(backend)
    device = ctx.device
    cap = ctx.array(y).__dlpack__(stream=-1, max_version=(1, 0))
    managed = dlpack.DLManagedTensorVersioned.from_address(_tensor_of(cap, dlpack.VERSIONED_NAME))
    address, used = managed.dl_tensor.data, backend.get_used_memory(device)
    del ctx, managed
    gc.collect()
    assert backend.get_used_memory(device) == used  # held by the capsule
    np.testing.assert_array_equal(_host_array(address, expected), expected)
    del cap
    gc.collect()
    assert backend.get_used_memory(device) < used  # released with it


def test_export_errors_name_node_backend_and_device(as_cuda: Any) -> None:
    backend, _ = as_cuda
    ctx, y, _ = _written(backend)
    e = ctx.array(y)
    where = rf"node y#{y.id} \(backend sync_interp, device 0, sync_interp:0:\d+\)"
    with pytest.raises(UsageError, match=where + r".*ambiguous"):
        e.__dlpack__(stream=0)
    with pytest.raises(UsageError, match=where + r".*\(1, 0\)"):
        e.__dlpack__(dl_device=(1, 0))
    with pytest.raises(BufferError, match=where + r".*never copies"):
        e.__dlpack__(copy=True)
    assert issubclass(ExportError, UsageError) and issubclass(ExportError, BufferError)
    e.__dlpack__(dl_device=(2, 0), copy=False)  # what it is: fine
    half = Tnode.create((2,), label="h", prec="bfloat16", memory_mode=(mm.Materialized(), 1))
    r = backend.link(ctx, backend.compile(ir.fetch(half, ir.Constant(1.0)), name="h"))
    r()
    with pytest.raises(UsageError, match=rf"h#{half.id}.*no type for precision bfloat16"):
        r.context.array(half).__cuda_array_interface__  # noqa: B018
    r.context.array(half).__dlpack__()  # DLPack has bfloat16


def test_a_host_memory_export_has_no_cuda_interface() -> None:
    e = DeviceArrayExport(
        Tnode.create((2,), label="z"),
        None,
        0x1000,
        (1, 0),
        lambda: None,
        None,  # type: ignore[arg-type]
        "z",
    )
    assert not hasattr(e, "__cuda_array_interface__")
