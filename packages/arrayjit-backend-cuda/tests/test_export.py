"""The CUDA device's export hooks (``Context.array``) and import hooks (``ctx_arrays`` given
another library's device array) without a GPU: the device module imported over a stand-in
``pycuda.driver``, the driver library's event and pointer calls a recorder. It checks the
DLPack device and address of a buffer, the native stream handle of a queue, that a consumer's
stream is made to wait for a writer's stream (and our stream for a producer's) through an
event recorded there, with the device's context current, the event released whatever
happens, and only for streams of this backend; that an imported address is asked of the
driver for its device and never freed."""

from __future__ import annotations

import ctypes
import threading
import types
from collections.abc import Iterator
from typing import Any

import pytest

from arrayjit_backend_cuda.renderer import CudaSyntax
from arrayjit_backends.gpu.devices import GpuDevices
from arrayjit_backends.runtime.schedulers import SyncQueue
from arrayjit_tnode import UsageError


class FakeMem:
    def __init__(self, address: int) -> None:
        self.address = address

    def __int__(self) -> int:
        return self.address


class FakeContext:
    def __init__(self, log: list[str]) -> None:
        self.log = log

    def push(self) -> None:
        self.log.append("push")


class FakeDriverLib:
    """The event calls of the driver library: records them (events as numbers, flags, stream
    handles) and whether a context was current; ``fail`` names a call that returns 400
    (``CUDA_ERROR_INVALID_HANDLE``)."""

    def __init__(self, log: list[str]) -> None:
        self.log = log
        self.calls: list[tuple[Any, ...]] = []
        self.fail = ""
        self.made = 0

    def _call(self, *call: Any) -> int:
        current = self.log.count("push") > self.log.count("pop")
        self.calls.append((*call, current))
        return 400 if call[0] == self.fail else 0

    def cuEventCreate(self, out: Any, flags: int) -> int:
        status = self._call("create", flags)
        if status == 0:  # the handle is written back through byref(c_void_p)
            self.made += 1
            out._obj.value = 0xE0 + self.made
        return status

    def cuEventRecord(self, event: ctypes.c_void_p, stream: int) -> int:
        return self._call("record", event.value, stream)

    def cuStreamWaitEvent(self, stream: int, event: ctypes.c_void_p, flags: int) -> int:
        return self._call("wait", stream, event.value, flags)

    def cuEventDestroy_v2(self, event: ctypes.c_void_p) -> int:
        return self._call("destroy", event.value)

    def cuPointerGetAttribute(self, out: Any, attribute: int, address: int) -> int:
        status = self._call("pointer", attribute, address)
        if status == 0:  # device 0 owns every address below 0x9000 here, device 1 the rest
            out._obj.value = 0 if address < 0x9000 else 1
        return status


@pytest.fixture
def cuda_device(device_module_over: Any) -> Iterator[Any]:
    """A ``CudaDevices`` over one stand-in device; ``.log`` the context pushes and pops,
    ``.driver_lib`` the stand-in driver library."""
    log: list[str] = []
    driver = types.ModuleType("pycuda.driver")
    driver.Stream = lambda: types.SimpleNamespace(handle=0x5000)  # type: ignore[attr-defined]
    driver.Context = types.SimpleNamespace(pop=lambda: log.append("pop"))  # type: ignore[attr-defined]
    device = device_module_over(driver)
    devices = object.__new__(device.CudaDevices)  # no driver to initialize
    GpuDevices.__init__(devices, CudaSyntax(group_size=device.BLOCK))
    devices.devices = [object()]
    devices.contexts = [FakeContext(log)]
    devices._local = threading.local()
    devices._driver_lib = FakeDriverLib(log)
    devices.log = log
    devices.lib = device
    yield devices


def test_a_buffer_is_its_device_address_on_dlpack_device_cuda(cuda_device: Any) -> None:
    assert cuda_device.device_pointer(0, (FakeMem(0x2000), 64)) == ((2, 0), 0x2040)
    queue = cuda_device.lib.CudaQueue("cuda:0:1", cuda_device, 0)
    assert cuda_device.native_stream(queue) == 0x5000
    assert cuda_device.native_stream(object()) is None


def test_a_consumer_stream_waits_for_the_writer_through_the_driver(cuda_device: Any) -> None:
    queue = cuda_device.lib.CudaQueue("cuda:0:1", cuda_device, 0)
    lib = cuda_device._driver_lib
    assert cuda_device.stream_wait(1, queue)  # the legacy default stream, by its handle
    # An event recorded on the writer's stream, waited for by the consumer's, then released:
    # every call with the device's context current.
    assert lib.calls == [
        ("create", 0x2, True),  # CU_EVENT_DISABLE_TIMING
        ("record", 0xE1, 0x5000, True),
        ("wait", 1, 0xE1, 0, True),
        ("destroy", 0xE1, True),
    ]
    assert cuda_device.log[-1] == "pop"
    lib.calls.clear()
    assert not cuda_device.stream_wait(0x7000, SyncQueue("cc:0:0"))  # the host waits instead
    other = object.__new__(type(cuda_device))
    assert not cuda_device.stream_wait(0x7000, types.SimpleNamespace(devices=other))
    assert lib.calls == []
    lib.fail = "wait"
    with pytest.raises(UsageError, match=r"stream 0x7000 wait for cuda:0:1.*cuStreamWaitEvent"):
        cuda_device.stream_wait(0x7000, queue)
    assert lib.calls[-1] == ("destroy", 0xE2, True)  # released all the same
    lib.fail = "create"
    with pytest.raises(UsageError, match=r"cuEventCreate: CUresult 400.*device 0"):
        cuda_device.stream_wait(0x7000, queue)
    assert lib.calls[-1][0] == "create"  # nothing to release
    lib.calls.clear()
    cuda_device.contexts = []  # finalized: every stream was drained
    assert cuda_device.stream_wait(0x7000, queue) and lib.calls == []


def test_an_imported_address_is_a_buffer_the_driver_places(cuda_device: Any) -> None:
    lib = cuda_device._driver_lib
    assert cuda_device.dlpack_device(0) == (2, 0)
    mem, on = cuda_device.device_buffer(0, 0x2000, 64)
    assert int(mem) == 0x2000 and on == (2, 0)
    assert lib.calls == [("pointer", 9, 0x2000, True)]  # CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
    assert cuda_device.device_buffer(0, 0xA000, 64)[1] == (2, 1)  # another GPU's memory
    lib.fail = "pointer"
    assert cuda_device.device_buffer(0, 0x2000, 64)[1] is None  # the driver does not know it
    lib.calls.clear()
    assert cuda_device.device_buffer(0, 0, 0)[1] is None and lib.calls == []  # no elements
    # Freeing it (its buffer gone) leaves the producer's memory alone: no driver call at all.
    pushes = len(cuda_device.log)
    cuda_device.free(0, mem)
    assert len(cuda_device.log) == pushes
    assert cuda_device.device_pointer(0, (mem, 8)) == ((2, 0), 0x2008)  # exported as it is


def test_our_stream_waits_for_a_producers_stream(cuda_device: Any) -> None:
    queue = cuda_device.lib.CudaQueue("cuda:0:1", cuda_device, 0)
    lib = cuda_device._driver_lib
    assert cuda_device.queue_wait(queue, 0x7000)
    # The event recorded on the producer's stream, waited for by ours: the reverse of export.
    assert lib.calls == [
        ("create", 0x2, True),
        ("record", 0xE1, 0x7000, True),
        ("wait", 0x5000, 0xE1, 0, True),
        ("destroy", 0xE1, True),
    ]
    lib.calls.clear()
    assert not cuda_device.queue_wait(SyncQueue("cc:0:0"), 0x7000)
    assert lib.calls == []
    lib.fail = "record"
    with pytest.raises(
        UsageError, match=r"cuda:0:1 wait for the producer's stream 0x7000.*cuEventRecord"
    ):
        cuda_device.queue_wait(queue, 0x7000)
    assert lib.calls[-1] == ("destroy", 0xE2, True)
    cuda_device.contexts = []  # finalized: nothing to wait on
    assert not cuda_device.queue_wait(queue, 0x7000)
