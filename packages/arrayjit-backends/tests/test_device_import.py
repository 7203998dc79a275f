"""The import of device memory without a device: another library's device array given in
``ctx_arrays`` (the CUDA array interface, or a DLPack capsule of ``kDLCUDA``), read by
:func:`~arrayjit_backends.runtime.interop.external_device_array` and made a buffer by
:func:`~arrayjit_backends.runtime.values.external_device_buffer`, over a ``sync_interp``
backend whose device hooks call its memory CUDA memory of device 0. The "device arrays" are
numpy arrays whose addresses a stand-in driver knows, so a routine's results are checked in
numpy (the oracle: numpy's own negation of the input). Also the one layout checker
(:func:`~arrayjit_backends.runtime.interop.layout_mismatch`) against numpy's flags, and
:func:`~arrayjit_backends.runtime.dlpack.take`."""

from __future__ import annotations

import ctypes
import gc
import re
import weakref
from collections.abc import Iterator
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from arrayjit_backends import fresh_backend
from arrayjit_backends.runtime import dlpack
from arrayjit_backends.runtime.interop import Mismatch, is_c_contiguous, layout_mismatch
from arrayjit_ir import ir
from arrayjit_tnode import Tnode, UsageError

OUR_STREAM = 0x5000
"""The native stream handle the stand-in backend gives its streams."""
PRODUCER_STREAM = 0x7000
N = 64


class Driver:
    """The stand-in driver: which device each registered address is on, the waits our streams
    were asked for (``queue_wait``), and a producer stream it cannot wait for."""

    def __init__(self) -> None:
        self.known: dict[int, tuple[np.ndarray, tuple[int, int]]] = {}
        self.waits: list[tuple[Any, int]] = []
        self.unwaitable = -1

    def register(self, arr: np.ndarray, device: tuple[int, int] = (2, 0)) -> None:
        self.known[arr.ctypes.data] = (arr, device)

    def device_buffer(self, ordinal: int, address: int, nbytes: int) -> tuple[Any, Any]:
        if address not in self.known:
            return np.zeros(nbytes, np.uint8), None
        arr, device = self.known[address]
        return arr.reshape(-1).view(np.uint8), device  # the array's memory itself

    def queue_wait(self, queue: Any, stream: int) -> bool:
        if stream == self.unwaitable:
            return False
        self.waits.append((queue, stream))
        return True


@pytest.fixture
def as_cuda(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, Driver]]:
    """A ``sync_interp`` backend whose hooks import device memory through :class:`Driver`."""
    backend: Any = fresh_backend("sync_interp")
    runtime = backend.runtime
    driver = Driver()
    monkeypatch.setattr(runtime, "host_view", lambda ordinal, buf, tn: None)
    monkeypatch.setattr(
        runtime, "device_pointer", lambda ordinal, buf: ((2, ordinal), buf[0].ctypes.data + buf[1])
    )
    monkeypatch.setattr(runtime, "dlpack_device", lambda ordinal: (2, ordinal))
    monkeypatch.setattr(runtime, "native_stream", lambda queue: OUR_STREAM)
    monkeypatch.setattr(runtime, "device_buffer", driver.device_buffer)
    monkeypatch.setattr(runtime, "queue_wait", driver.queue_wait)
    yield backend, driver
    backend.finalize()


class CudaArray:
    """An array exposing only the CUDA array interface (version 3), over ``arr``'s memory."""

    def __init__(self, arr: np.ndarray, stream: Any = PRODUCER_STREAM, **changes: Any) -> None:
        self.arr = arr
        self.cai: dict[str, Any] = {
            "shape": arr.shape,
            "typestr": arr.dtype.str,
            "data": (arr.ctypes.data, False),
            "strides": None if arr.flags.c_contiguous else arr.strides,
            "version": 3,
            "stream": stream,
            **changes,
        }

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        return self.cai


class Owner:
    """Stands for what a producer's tensor keeps alive."""


class DLPackArray:
    """A DLPack producer of ``kDLCUDA`` tensors over ``arr``'s memory: records the streams it
    was asked to order; ``old``: it predates ``max_version``; ``strides`` overwrites the
    tensor's (in elements); ``device`` what it says and puts in the tensor."""

    def __init__(
        self,
        arr: np.ndarray,
        *,
        old: bool = False,
        strides: tuple[int, ...] | None = None,
        device: tuple[int, int] = (2, 0),
        tensor_device: tuple[int, int] | None = None,
        dtype: Any = None,
    ) -> None:
        self.arr, self.old, self.strides = arr, old, strides
        self.device, self.tensor_device = device, tensor_device or device
        self.dtype = dtype
        self.owner = Owner()
        self.asked: list[dict[str, Any]] = []

    def __dlpack__(self, **kwargs: Any) -> Any:
        if self.old and "max_version" in kwargs:
            raise TypeError("__dlpack__() got an unexpected keyword argument 'max_version'")
        self.asked.append(kwargs)
        versioned = kwargs.get("max_version") is not None
        a = self.arr
        cap = dlpack.capsule(
            a.ctypes.data, a.shape, a.dtype, self.tensor_device, self.owner, versioned=versioned
        )
        name = dlpack.VERSIONED_NAME if versioned else dlpack.NAME
        struct = dlpack.DLManagedTensorVersioned if versioned else dlpack.DLManagedTensor
        tensor = struct.from_address(_pointer(cap, name)).dl_tensor
        if self.strides is not None:
            for k, s in enumerate(self.strides):
                tensor.strides[k] = s
        if self.dtype is not None:
            tensor.dtype = dlpack.DLDataType(*self.dtype)
        return cap

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.device


_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi)
)


def _neg(backend: Any, ctx: Any, a: Tnode, y: Tnode) -> Any:
    return backend.link(ctx, backend.compile(ir.unop(y, "neg", a), name="neg_import"))


def _nodes() -> tuple[Tnode, Tnode]:
    return Tnode.create((N,), label="a_dev"), Tnode.create((N,), label="y_dev")


def _registered(driver: Driver, values: np.ndarray) -> np.ndarray:
    driver.register(values)
    return values


def test_the_cuda_array_interface_is_the_buffer(as_cuda: Any) -> None:
    backend, driver = as_cuda
    a, y = _nodes()
    values = _registered(driver, np.random.default_rng(1).standard_normal(N).astype(np.float32))
    out = _registered(driver, np.zeros(N, np.float32))
    stream = backend.new_stream(backend.get_device(0))
    ctx = backend.make_context(stream, ctx_arrays={a: CudaArray(values), y: CudaArray(out)})
    # Our stream waits for the producer's stream (once per array) before its first use.
    assert driver.waits == [(stream.queue, PRODUCER_STREAM)] * 2
    r = _neg(backend, ctx, a, y)
    r()
    backend.await_stream(stream)
    np.testing.assert_array_equal(out, -values)  # written in place: no copy
    values[:] = 2.0  # the array is the buffer: the next run reads the new values
    r()
    backend.await_stream(stream)
    np.testing.assert_array_equal(out, np.full(N, -2.0, np.float32))
    # An export of an imported buffer is the array itself.
    assert r.context.array(y).address == out.ctypes.data
    # The import's writer is our stream (its work so far, after the wait), for other streams.
    loc = ctx.buffers[a]
    assert ctx.device.hazards.writers[loc][0] is stream


def test_no_wait_where_the_producer_names_no_other_stream(as_cuda: Any) -> None:
    backend, driver = as_cuda
    a, y = _nodes()
    stream = backend.new_stream(backend.get_device(0))
    given = {
        a: CudaArray(_registered(driver, np.ones(N, np.float32)), stream=None),
        y: CudaArray(_registered(driver, np.zeros(N, np.float32)), stream=OUR_STREAM),
    }
    old = CudaArray(_registered(driver, np.ones(N, np.float32)), stream=5, version=2)
    backend.make_context(stream, ctx_arrays=given)
    backend.make_context(stream, ctx_arrays={a: old})  # version 2 has no stream field
    assert driver.waits == []


def test_dlpack_asks_the_producer_to_order_our_stream(as_cuda: Any) -> None:
    backend, driver = as_cuda
    a, y = _nodes()
    values = _registered(driver, np.arange(N, dtype=np.float32))
    out = _registered(driver, np.zeros(N, np.float32))
    src, dst = DLPackArray(values), DLPackArray(out, old=True)
    alive = weakref.ref(src.owner)
    stream = backend.new_stream(backend.get_device(0))
    ctx = backend.make_context(stream, ctx_arrays={a: src, y: dst})
    assert src.asked == [{"stream": OUR_STREAM, "max_version": (1, 0)}]
    assert dst.asked == [{"stream": OUR_STREAM}]  # asked again without max_version
    assert driver.waits == []  # the producer ordered our stream itself
    r = _neg(backend, ctx, a, y)
    r()
    backend.await_stream(stream)
    np.testing.assert_array_equal(out, -values)
    # The context holds the producer's tensor; it is handed back once the buffer is gone.
    del src, dst, ctx
    gc.collect()
    assert alive() is not None
    del r
    gc.collect()
    assert alive() is None


def test_the_context_keeps_the_external_array_alive(as_cuda: Any) -> None:
    backend, driver = as_cuda
    a, _ = _nodes()
    given = CudaArray(_registered(driver, np.ones(N, np.float32)))
    alive = weakref.ref(given)
    ctx = backend.make_context(backend.new_stream(backend.get_device(0)), ctx_arrays={a: given})
    del given
    gc.collect()
    assert alive() is not None
    del ctx
    gc.collect()
    assert alive() is None


def test_a_hosted_node_keeps_the_arrays_value(as_cuda: Any) -> None:
    backend, driver = as_cuda
    a = Tnode.create((8,), label="a_host", hosted=True)
    a.set_values(np.zeros(8))  # not uploaded over the given array: it defines the value
    y = Tnode.create((8,), label="y_host")
    out = _registered(driver, np.zeros(8, np.float32))
    ext = _registered(driver, np.arange(8, dtype=np.float32))
    stream = backend.new_stream(backend.get_device(0))
    ctx = backend.make_context(stream, ctx_arrays={a: CudaArray(ext), y: CudaArray(out)})
    _neg(backend, ctx, a, y)()
    backend.await_stream(stream)
    np.testing.assert_array_equal(out, -ext)


def _refused(backend: Any, tn: Tnode, given: Any, message: str) -> None:
    stream = backend.new_stream(backend.get_device(0))
    with pytest.raises(UsageError) as info:
        backend.make_context(stream, ctx_arrays={tn: given})
    text = str(info.value)
    assert text.startswith("make_context: ") and f"node {tn.debug_label}" in text
    assert re.search(message, text), text
    assert re.search(rf"\(.*backend sync_interp, device 0, {stream.name}\)$", text), text


def test_every_refusal_names_node_backend_device_and_stream(as_cuda: Any) -> None:
    backend, driver = as_cuda
    a = Tnode.create((4, 6), label="a_checked")
    good = _registered(driver, np.zeros((4, 6), np.float32))
    wide = _registered(driver, np.zeros((4, 6), np.float64))
    other = _registered(driver, np.zeros((6, 4), np.float32))
    transposed = np.zeros((6, 4), np.float32).T
    driver.register(transposed)
    shifted = np.zeros(4 * 6 * 4 + 1, np.uint8)[1:].view(np.float32).reshape(4, 6)
    driver.register(shifted)
    elsewhere = np.zeros((4, 6), np.float32)
    driver.register(elsewhere, (2, 1))
    unknown = np.zeros((4, 6), np.float32)
    cases = [
        (CudaArray(wide), r"dtype float32.*float64"),
        (CudaArray(other), r"\(4, 6\).*\(6, 4\)"),
        (CudaArray(transposed), r"strides \(4, 16\), not C-contiguous.*\(24, 4\).*contiguous"),
        (CudaArray(shifted), r"address 0x[0-9a-f]+, not a multiple of its element size 4"),
        (CudaArray(elsewhere), r"is DLPack device \(2, 1\); the context's device is \(2, 0\)"),
        (CudaArray(unknown), r"memory its driver does not know"),
        (CudaArray(good, mask=object()), r"has a mask"),
        (CudaArray(good, stream=0), r"stream 0;.*never 0"),
        (CudaArray(good, data=None), r"malformed"),
        (CudaArray(good, strides=(24,)), r"strides \(24,\), not C-contiguous"),
        (DLPackArray(good, device=(2, 1)), r"DLPack device \(2, 1\); the context's.*\(2, 0\)"),
        (DLPackArray(good, tensor_device=(2, 1)), r"device \(2, 1\), though its producer said"),
        (DLPackArray(good, strides=(1, 4)), r"strides \(4, 16\), not C-contiguous"),
        (DLPackArray(good, dtype=(5, 64, 1)), r"float32\); the given array has dtype of no"),
        (DLPackArray(good, dtype=(2, 32, 4)), r"dtype of no numpy type"),  # 4 lanes
    ]
    for given, message in cases:
        _refused(backend, a, given, message)
    driver.unwaitable = PRODUCER_STREAM
    _refused(backend, a, CudaArray(good), r"producer's stream 0x7000.*cannot be waited for")


def test_a_refused_dlpack_tensor_is_handed_back(as_cuda: Any) -> None:
    backend, driver = as_cuda
    a = Tnode.create((4, 6), label="a_back")
    producer = DLPackArray(_registered(driver, np.zeros((4, 6), np.float64)))
    alive = weakref.ref(producer.owner)
    _refused(backend, a, producer, "float64")
    del producer
    gc.collect()
    assert alive() is None


def test_a_cpu_backend_refuses_cuda_memory() -> None:
    backend: Any = fresh_backend("sync_interp")
    try:
        a = Tnode.create((4,), label="a_cpu")
        stream = backend.new_stream(backend.get_device(0))
        with pytest.raises(UsageError, match=r"a_cpu#\d+ is CUDA memory.*computes on host memory"):
            backend.make_context(stream, ctx_arrays={a: CudaArray(np.zeros(4, np.float32))})
        with pytest.raises(UsageError, match=r"DLPack device \(2, 0\), not in host memory"):
            backend.make_context(stream, ctx_arrays={a: DLPackArray(np.zeros(4, np.float32))})
    finally:
        backend.finalize()


# ---- the one layout checker ----

LAYOUTS = [
    np.zeros((3, 4), np.float32),
    np.zeros((3, 4), np.float32).T,
    np.zeros((3, 4), np.float32)[:, ::2],
    np.zeros((3, 4), np.float32)[::2],
    np.zeros((1, 4), np.float32)[:, :],
    np.lib.stride_tricks.as_strided(np.zeros(4, np.float32), (1, 4), (999, 4)),  # any stride
    np.zeros((0, 4), np.float32)[:, ::2],  # no elements: contiguous
    np.zeros((2, 1, 3), np.float32)[:, :, ::-1],
    np.array(1.0, np.float32),
    np.zeros((5, 1), np.float32)[::2],
]


@pytest.mark.parametrize("arr", LAYOUTS, ids=lambda a: f"{a.shape}{a.strides}")
def test_contiguity_is_numpys(arr: np.ndarray) -> None:
    assert is_c_contiguous(arr.shape, arr.strides, arr.itemsize) == arr.flags.c_contiguous


def test_layout_mismatch_checks_in_order() -> None:
    tn = Tnode.create((4, 6), label="m")
    arr = np.zeros((4, 6), np.float32)
    assert layout_mismatch(tn, arr.dtype, arr.shape, None, arr.ctypes.data) is None
    assert layout_mismatch(tn, np.dtype(np.float64), (6, 4), (4, 24), 1) is Mismatch.DTYPE
    assert layout_mismatch(tn, None, arr.shape, None, 0) is Mismatch.DTYPE
    assert layout_mismatch(tn, arr.dtype, (6, 4), (4, 24), 1) is Mismatch.SHAPE
    assert layout_mismatch(tn, arr.dtype, (4, 6), (4, 16), 1) is Mismatch.STRIDES
    assert layout_mismatch(tn, arr.dtype, (4, 6), (24, 4), 6) is Mismatch.ALIGNMENT
    assert layout_mismatch(tn, arr.dtype, (4, 6), (24, 4), None) is None  # unchecked
    empty = Tnode.create((0,), label="e")
    assert layout_mismatch(empty, arr.dtype, (0,), None, 3) is None  # no elements to align


# ---- dlpack.take ----


@pytest.mark.parametrize("versioned", [False, True])
def test_take_reads_and_owns_a_capsule(versioned: bool) -> None:
    owner = Owner()
    alive = weakref.ref(owner)
    dtype = np.dtype(ml_dtypes.bfloat16)
    cap = dlpack.capsule(0x7F00_0000_1000, (3, 5), dtype, (2, 1), owner, versioned=versioned)
    del owner
    taken = dlpack.take(cap)
    assert taken.address == 0x7F00_0000_1000 and taken.device == (2, 1)
    assert taken.shape == (3, 5) and taken.strides == (5, 1) and taken.dtype == dtype
    assert (taken.code, taken.bits, taken.lanes) == (dlpack.KDL_BFLOAT, 16, 1)
    with pytest.raises(UsageError, match="not an untaken DLPack capsule"):
        dlpack.take(cap)  # renamed used_*: a second consumer cannot take it
    del cap
    gc.collect()
    assert alive() is not None  # the capsule's destructor left the taken tensor alone
    taken.release()
    taken.release()  # once only
    gc.collect()
    assert alive() is None
    with pytest.raises(UsageError, match="returned int"):
        dlpack.take(3)


def test_dlpack_types_read_back_as_numpys() -> None:
    for name in ["int8", "int64", "uint16", "float16", "float32", "float64", "bool"]:
        dtype = np.dtype(name)
        assert dlpack.numpy_dtype(*dlpack.dtype_code(dtype), 1) == dtype
    assert dlpack.numpy_dtype(dlpack.KDL_BFLOAT, 16, 1) == np.dtype(ml_dtypes.bfloat16)
    for code, bits, lanes in [(2, 32, 4), (5, 64, 1), (2, 8, 1), (0, 12, 1), (6, 16, 1)]:
        assert dlpack.numpy_dtype(code, bits, lanes) is None
