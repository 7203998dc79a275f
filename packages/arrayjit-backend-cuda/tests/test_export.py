"""The CUDA device's export hooks (``Context.array``) without a GPU: the device module imported
over a stand-in ``pycuda.driver``, the driver library's ``cuStreamWaitEvent`` a recorder. It
checks the DLPack device and address of a buffer, the native stream handle of a queue, and that
a consumer's stream is made to wait for a writer's event through the driver, with the device's
context current, and only for events of this backend."""

from __future__ import annotations

import threading
import types
from collections.abc import Iterator
from typing import Any

import pytest

from arrayjit_backend_cuda.renderer import CudaSyntax
from arrayjit_backends.gpu.devices import GpuDevices
from arrayjit_backends.impl.stream_queue import DONE
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
    """``cuStreamWaitEvent`` of the driver library: records its calls and whether a context
    was current."""

    def __init__(self, log: list[str]) -> None:
        self.log = log
        self.calls: list[tuple[int, int, int, bool]] = []
        self.status = 0

    def cuStreamWaitEvent(self, stream: int, event: int, flags: int) -> int:
        current = self.log.count("push") > self.log.count("pop")
        self.calls.append((stream, event, flags, current))
        return self.status


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
    event = cuda_device.lib.CudaEvent(
        types.SimpleNamespace(handle=0xE0), cuda_device, 0, "cuda:0:1"
    )
    lib = cuda_device._driver_lib
    assert cuda_device.stream_wait(1, event)  # the legacy default stream, by its handle
    assert cuda_device.stream_wait(0x7000, event)
    assert lib.calls == [(1, 0xE0, 0, True), (0x7000, 0xE0, 0, True)]  # with a context current
    assert cuda_device.log[-1] == "pop"
    assert not cuda_device.stream_wait(0x7000, DONE)  # not a CUDA event: the host waits
    other = object.__new__(type(cuda_device))
    assert not cuda_device.stream_wait(0x7000, cuda_device.lib.CudaEvent(None, other, 0))
    lib.status = 400  # CUDA_ERROR_INVALID_HANDLE
    with pytest.raises(UsageError, match=r"stream 0x7000 wait for cuda:0:1.*400.*device 0"):
        cuda_device.stream_wait(0x7000, event)
    cuda_device.contexts = []  # finalized: every stream was drained
    assert cuda_device.stream_wait(0x7000, event) and len(lib.calls) == 3
