"""The CUDA backend's device side, on pycuda's driver API.

- Devices: every CUDA device, each through its primary context (made current around every
  driver call, on whichever thread makes it).
- Streams: a CUDA stream each; ``all_work`` records an event; ``will_wait_for`` makes the
  stream wait for another stream's event on the device.
- Memory: slab pools are ``mem_alloc`` allocations zeroed once; transfers are asynchronous
  copies on the stream (``memcpy_htod_async``/``memcpy_dtoh_async``; pageable host memory makes
  them synchronous with the host, which is correct, only slower); between devices,
  ``memcpy_peer_async``.
- Export (``Context.array``): a buffer is its device address on DLPack device ``(kDLCUDA,
  ordinal)``; a consumer's stream (a raw handle a library gave) waits for the writer's stream
  through an event recorded there and ``cuStreamWaitEvent``, driver calls made through ctypes
  (pycuda wraps only streams it made, and does not give its events' handles).
- Import (``ctx_arrays``): another library's array is an :class:`ExternalMemory` (its
  address, never freed here); the driver says which device an address is on
  (``cuPointerGetAttribute``), and our stream waits for a producer's stream the same way.
- Code: the recipe of :class:`~arrayjit_backends.gpu.devices.GpuDevices`: CUDA C from
  :class:`~arrayjit_backend_cuda.renderer.CudaSyntax`, compiled by ``nvcc --cubin``
  (:mod:`arrayjit_backend_cuda.compiler`) for every device's architecture at compile, through
  the shared compile cache; one module per device, loaded at the routine's first link on it
  and shared by every later link.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any, ClassVar

import numpy as np
import pycuda.driver as cuda

from arrayjit_backend_cuda.compiler import NVCC_FLAGS, compile_to, nvcc_path, nvcc_version
from arrayjit_backend_cuda.renderer import CudaSyntax
from arrayjit_backends.gpu.devices import GpuCode, GpuDevices
from arrayjit_backends.gpu.program import GpuKernel
from arrayjit_backends.impl.compile_cache import cache_key
from arrayjit_backends.impl.cpu_compiler import kernel_name
from arrayjit_backends.impl.device import Buf, DeviceInfo, ImmediateQueue
from arrayjit_backends.impl.stream_queue import Event, StreamQueue, poll_until
from arrayjit_backends.runtime.dlpack import KDL_CUDA
from arrayjit_backends.settings import gpu_cell_lanes
from arrayjit_tnode import Prec, UsageError

BLOCK = 256
"""Threads per block of element-parallel kernels."""

EVENT_FLAGS = 0x2
"""``CU_EVENT_DISABLE_TIMING``: the events an export records only order streams."""


POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9
"""``CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL``: the device an address's memory is on."""


class ExternalMemory:
    """Another library's device memory that a buffer is (an array given in ``ctx_arrays``):
    its address and size, used as a pool is (``int(mem)`` its address); never freed here, its
    producer owns it (the buffer holds the producer's array)."""

    __slots__ = ("address", "nbytes")

    def __init__(self, address: int, nbytes: int) -> None:
        self.address = address
        self.nbytes = nbytes

    def __int__(self) -> int:
        return self.address

    def __repr__(self) -> str:
        return f"<ExternalMemory {self.nbytes} bytes at {self.address:#x}>"


def probe() -> str | None:
    """None when a CUDA driver and a GPU exist, else which is missing."""
    try:
        cuda.init()
    except Exception as exc:  # pycuda raises its own LogicError/RuntimeError kinds
        return f"the CUDA driver could not be initialized ({exc})"
    if cuda.Device.count() == 0:
        return "no CUDA GPU found"
    if nvcc_path() is None:
        return "nvcc not found (set $NVCC or put the CUDA toolkit's bin on PATH)"
    return None


class CudaEvent(Event):
    """A CUDA event recorded on the stream named ``stream``."""

    def __init__(self, event: Any, devices: CudaDevices, ordinal: int, stream: str = "") -> None:
        self.event = event
        self.devices = devices
        self.ordinal = ordinal
        self.stream = stream

    def is_done(self) -> bool:
        if not self.devices.contexts:  # finalized: every stream was drained first
            return True
        with self.devices.current(self.ordinal):
            return bool(self.event.query())

    def sync(self) -> None:
        if not self.devices.contexts:
            return
        # Polled, not ``synchronize()``: a blocking driver wait holds Ctrl-C back.
        with self.devices.current(self.ordinal):
            poll_until(self.event.query)

    def where(self) -> str:
        return self.stream


class CudaQueue(ImmediateQueue):
    """A stream: a CUDA stream of one device."""

    def __init__(self, name: str, devices: CudaDevices, ordinal: int) -> None:
        super().__init__(name)
        self.devices = devices
        self.ordinal = ordinal
        with devices.current(ordinal):
            self.stream = cuda.Stream()

    def marker(self) -> Event:
        with self.devices.current(self.ordinal):
            event = cuda.Event(cuda.event_flags.DISABLE_TIMING)
            event.record(self.stream)
        return CudaEvent(event, self.devices, self.ordinal, self.name)

    def wait_device(self, event: Event) -> bool:
        if not isinstance(event, CudaEvent) or event.devices is not self.devices:
            return False
        with self.devices.current(self.ordinal):
            self.stream.wait_for_event(event.event)
        return True

    def finish(self) -> None:
        with self.devices.current(self.ordinal):
            self.stream.synchronize()

    def schedule(self, task: Callable[[], None]) -> None:
        with self.devices.current(self.ordinal):
            super().schedule(task)


class _Launch:
    """One kernel of one link: its function, prepared once (pycuda's struct format of the
    arguments: ``P`` for a device pointer, ``q`` for a static index) at the first launch, and the
    buffer arguments fixed at link, so a launch packs only its few dynamic arguments."""

    def __init__(self, function: Any, fixed: tuple[Any, ...]) -> None:
        self.function = function
        self.fixed = fixed
        self.prepared = False

    def __call__(self, stream: Any, args: list[Any], shape: Any) -> None:
        block, grid = shape
        every = (*self.fixed, *args)
        if not self.prepared:  # the same signature for every link of the module's kernel
            self.function.prepare("".join("P" if isinstance(a, np.uintp) else "q" for a in every))
            self.prepared = True
        self.function.prepared_async_call(grid, block, stream, *every)


class CudaDevices(GpuDevices):
    """The ``cuda`` backend's device side: the driver hooks of :class:`GpuDevices`."""

    name: ClassVar[str] = "cuda"
    most_streams: ClassVar[int] = 8

    def __init__(self) -> None:
        reason = probe()
        if reason is not None:
            raise RuntimeError(reason)
        super().__init__(CudaSyntax(group_size=BLOCK, cell_lanes=gpu_cell_lanes(BLOCK)))
        self.devices = [cuda.Device(k) for k in range(cuda.Device.count())]
        self.contexts = [d.retain_primary_context() for d in self.devices]
        self.nvcc = nvcc_path() or "nvcc"
        self.nvcc_version = nvcc_version(self.nvcc)
        self._local = threading.local()

    @contextlib.contextmanager
    def current(self, ordinal: int) -> Iterator[None]:
        """Make device ``ordinal``'s primary context current on this thread."""
        stack: list[int] = self._local.__dict__.setdefault("stack", [])
        if stack and stack[-1] == ordinal:
            yield
            return
        self.contexts[ordinal].push()
        stack.append(ordinal)
        try:
            yield
        finally:
            stack.pop()
            cuda.Context.pop()

    def arch(self, ordinal: int) -> str:
        major, minor = self.devices[ordinal].compute_capability()
        return f"sm_{major}{minor}"

    # ---- devices ----

    def supported_precs(self, ordinal: int) -> frozenset[Prec]:
        return CudaSyntax.supported_precs

    def device_info(self, ordinal: int) -> dict[str, Any]:
        d = self.devices[ordinal]
        return {"ordinal": ordinal, "name": d.name(), "arch": self.arch(ordinal)}

    def info(self, ordinal: int) -> DeviceInfo:
        d = self.devices[ordinal]
        attr = cuda.device_attribute

        def get(name: str) -> int:
            return int(d.get_attribute(getattr(attr, name)))

        return DeviceInfo(
            name=f"{d.name()} ({self.arch(ordinal)})",
            ordinal=ordinal,
            kind="gpu",
            # An integrated GPU shares the host's memory.
            unified_memory=bool(get("INTEGRATED")),
            supported_precs=self.supported_precs(ordinal),
            compute_units=get("MULTIPROCESSOR_COUNT"),
            global_memory=int(d.total_memory()),
            max_shared_memory=get("MAX_SHARED_MEMORY_PER_BLOCK"),
            max_workgroup_size=(
                get("MAX_BLOCK_DIM_X"),
                get("MAX_BLOCK_DIM_Y"),
                get("MAX_BLOCK_DIM_Z"),
            ),
            max_workgroup_total=get("MAX_THREADS_PER_BLOCK"),
            float4_type="float4",
            smem_prefix=CudaSyntax.local_qualifier,
            barrier=CudaSyntax.barrier,
        )

    def new_queue(self, ordinal: int, name: str) -> StreamQueue:
        return CudaQueue(name, self, ordinal)

    # ---- memory ----

    def alloc(self, ordinal: int, nbytes: int) -> Any:
        with self.current(ordinal):
            mem = cuda.mem_alloc(max(nbytes, 1))
            cuda.memset_d8(mem, 0, max(nbytes, 1))
        return mem

    def free(self, ordinal: int, mem: Any) -> None:
        if isinstance(mem, ExternalMemory):
            return  # another library's memory: its producer frees it
        with self.current(ordinal):
            mem.free()

    def to_device(self, queue: StreamQueue, dst: Buf, src: np.ndarray) -> None:
        assert isinstance(queue, CudaQueue)
        if src.nbytes:
            cuda.memcpy_htod_async(int(dst[0]) + dst[1], src, queue.stream)

    def to_host(self, queue: StreamQueue, dst: np.ndarray, src: Buf) -> None:
        assert isinstance(queue, CudaQueue)
        if dst.nbytes:
            cuda.memcpy_dtoh_async(dst, int(src[0]) + src[1], queue.stream)

    def copy(self, queue: StreamQueue, dst: Buf, src: Buf, nbytes: int, src_ordinal: int) -> None:
        assert isinstance(queue, CudaQueue)
        if not nbytes:
            return
        d, s = int(dst[0]) + dst[1], int(src[0]) + src[1]
        if src_ordinal == queue.ordinal:
            cuda.memcpy_dtod_async(d, s, nbytes, queue.stream)
        else:
            cuda.memcpy_peer_async(
                d,
                s,
                nbytes,
                self.contexts[queue.ordinal],
                self.contexts[src_ordinal],
                queue.stream,
            )

    # ---- export (Context.array) ----

    def device_pointer(self, ordinal: int, buf: Buf) -> tuple[tuple[int, int], int] | None:
        return (KDL_CUDA, ordinal), int(buf[0]) + buf[1]

    def native_stream(self, queue: StreamQueue) -> int | None:
        return int(queue.stream.handle) if isinstance(queue, CudaQueue) else None

    def stream_wait(self, stream: int, queue: StreamQueue) -> bool:
        if not isinstance(queue, CudaQueue) or queue.devices is not self:
            return False
        if not self.contexts:  # finalized: every stream was drained first
            return True
        # The consumer's stream may be one pycuda did not make (CuPy's, torch's, or a default
        # stream: handles 1 and 2), so the driver is called directly, with handles as they are.
        action = f"making the consumer's stream {stream:#x} wait for {queue.name}"
        self._event_wait(queue.ordinal, queue.stream.handle, stream, action)
        return True

    # ---- import (ctx_arrays given another library's device array) ----

    def dlpack_device(self, ordinal: int) -> tuple[int, int] | None:
        return (KDL_CUDA, ordinal)

    def device_buffer(
        self, ordinal: int, address: int, nbytes: int
    ) -> tuple[Any, tuple[int, int] | None]:
        on: tuple[int, int] | None = None
        if nbytes and self.contexts:
            # The CUDA array interface names no device: the driver knows each address's.
            lib = self.driver_api()
            found = ctypes.c_int(-1)
            with self.current(ordinal):
                status = lib.cuPointerGetAttribute(
                    ctypes.byref(found), POINTER_ATTRIBUTE_DEVICE_ORDINAL, address
                )
            if status == 0:
                on = (KDL_CUDA, found.value)
        return ExternalMemory(address, nbytes), on

    def queue_wait(self, queue: StreamQueue, stream: int) -> bool:
        if not isinstance(queue, CudaQueue) or queue.devices is not self or not self.contexts:
            return False
        action = f"making {queue.name} wait for the producer's stream {stream:#x}"
        self._event_wait(queue.ordinal, stream, queue.stream.handle, action)
        return True

    def _event_wait(self, ordinal: int, first: Any, then: Any, action: str) -> None:
        """Make stream ``then`` wait on the device for the work enqueued so far on stream
        ``first`` (raw handles, either possibly a stream pycuda did not make): an event
        recorded on ``first``, waited for by ``then``, released (the driver frees it once it
        has completed), with device ``ordinal``'s context current.

        Raises:
            UsageError: a driver call failed (``action`` says what was being done).
        """
        lib = self.driver_api()
        event = ctypes.c_void_p()
        with self.current(ordinal):
            steps = [
                ("cuEventCreate", lambda: lib.cuEventCreate(ctypes.byref(event), EVENT_FLAGS)),
                ("cuEventRecord", lambda: lib.cuEventRecord(event, first)),
                ("cuStreamWaitEvent", lambda: lib.cuStreamWaitEvent(then, event, 0)),
            ]
            try:
                for name, call in steps:
                    status = call()
                    if status != 0:
                        raise UsageError(
                            f"cuda: {action} failed ({name}: CUresult {status}; a stream of "
                            f"device {ordinal} was expected)"
                        )
            finally:
                if event.value:
                    lib.cuEventDestroy_v2(event)

    def driver_api(self) -> Any:
        """The CUDA driver library through ctypes (loaded once), for the calls pycuda does not
        offer on streams it did not make."""
        lib = getattr(self, "_driver_lib", None)
        if lib is None:
            lib = ctypes.CDLL(ctypes.util.find_library("cuda") or "libcuda.so.1")
            handle, flags = ctypes.c_void_p, ctypes.c_uint
            signatures = {
                "cuEventCreate": [ctypes.POINTER(handle), flags],
                "cuEventRecord": [handle, handle],
                "cuStreamWaitEvent": [handle, handle, flags],
                "cuEventDestroy_v2": [handle],
                "cuPointerGetAttribute": [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64],
            }
            for name, argtypes in signatures.items():
                function = getattr(lib, name)
                function.argtypes, function.restype = argtypes, ctypes.c_int
            self._driver_lib = lib
        return lib

    # ---- code (the recipe is GpuDevices'; these are its hooks) ----

    def prepare(self, code: GpuCode) -> None:
        # nvcc for every device's architecture at compile (its errors belong to compile);
        # each module is loaded at the routine's first link on its device.
        for ordinal in range(len(self.devices)):
            self.binary(code, ordinal)

    def binary_key(self, code: GpuCode, ordinal: int) -> str:
        return cache_key(
            source=code.source,
            backend="cuda",
            renderer="cuda-c",
            compiler=self.nvcc,
            compiler_version=self.nvcc_version,
            options=("--cubin", *NVCC_FLAGS),
            device=self.arch(ordinal),
        )

    def build(self, code: GpuCode, ordinal: int) -> bytes:
        arch = self.arch(ordinal)
        return compile_to(code.source, self.nvcc, arch, "cubin", kernel_name(code.name))

    def load(self, code: GpuCode, binary: bytes, ordinal: int, from_cache: bool) -> Any:
        with self.current(ordinal):
            return cuda.module_from_buffer(binary)

    def kernel(self, module: Any, name: str, fixed: list[Any]) -> Any:
        return _Launch(module.get_function(name), tuple(fixed))

    def launch_shape(self, spec: GpuKernel) -> Any:
        block = spec.local_size or BLOCK
        return (block, 1, 1), (max(1, -(-spec.global_size // block)), 1)

    def native_queue(self, queue: StreamQueue) -> Any:
        assert isinstance(queue, CudaQueue)
        return queue.stream

    def launch(self, queue: Any, kernel: Any, args: list[Any], shape: Any) -> None:
        kernel(queue, args, shape)

    def buffer_arg(self, mem: Any, offset: int) -> list[Any]:
        return [np.uintp(int(mem) + offset)]

    def absent_merge(self, ordinal: int, scratch: list[Any]) -> tuple[list[Any], int]:
        return [np.uintp(0)], 0  # a null pointer: the kernel does not read it

    def on_device(self, ordinal: int) -> AbstractContextManager[None]:
        return self.current(ordinal)  # module loads and allocations belong to the device

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "nvcc": self.nvcc, "nvcc_version": self.nvcc_version}

    def finalize(self) -> None:
        for ctx in self.contexts:
            ctx.detach()
        self.contexts = []


__all__ = ["CudaDevices", "CudaEvent", "CudaQueue", "ExternalMemory", "probe"]
