"""The OpenCL backend: every device of one platform, one command queue per stream.

- Devices: those of the first platform that has any (``$ARRAYJIT_OPENCL_PLATFORM`` is not a
  setting; pyopencl's ``PYOPENCL_CTX`` is not read either: one context spans the platform's
  devices, so buffers of one device can be copied to another with one ``enqueue_copy``).
- Streams: an in-order command queue each; ``all_work`` is a marker event, ``will_wait_for`` a
  barrier waiting for another queue's marker, so cross-stream order costs the host nothing; a
  host gate (:class:`OpenclGate`) is a user event the queue waits for on the device.
- Memory: slab pools are ``cl.Buffer`` objects, zero-filled when created; transfers are
  non-blocking ``enqueue_copy`` calls with byte offsets; the stream keeps each transfer's event
  (and so its host array) until the copy is done (:class:`OpenclQueue`), and the generic layer keeps
  host reads and writes waiting for it.
- Precisions: all but uint4x32; double only with ``cl_khr_fp64``; half, bfloat16 and fp8 are
  stored as bits and computed in float (see :mod:`arrayjit_backend_opencl.renderer`).
- Code: the recipe of :class:`~arrayjit_backends.gpu.devices.GpuDevices`: one program per
  routine and device (device 0's built by ``compile``, another's at the routine's first link on
  it), built by :mod:`arrayjit_backend_opencl.compiler` through the shared compile cache
  (program binaries keyed by the device's identity, so identical devices share them; pyopencl's
  own cache is bypassed); kernel objects are made once per link, from the program of the
  context's device, with their buffer arguments set once; a run sets the merge buffer and
  static indices and enqueues the kernels.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any, ClassVar

import numpy as np
import pyopencl as cl

from arrayjit_backend_opencl.compiler import (
    BUILD_OPTIONS,
    build_binary,
    build_program,
    load_binary,
)
from arrayjit_backend_opencl.renderer import OpenclSyntax
from arrayjit_backends.gpu.devices import GpuCode, GpuDevices
from arrayjit_backends.gpu.program import GpuKernel
from arrayjit_backends.impl.compile_cache import cache_key
from arrayjit_backends.impl.device import Buf, DeviceInfo, ImmediateQueue
from arrayjit_backends.impl.stream_queue import Event, HostGate, StreamQueue, poll_until
from arrayjit_backends.settings import gpu_cell_lanes
from arrayjit_tnode import Prec

SOURCE_BUILT = b"arrayjit-opencl: built from source by a source-only driver (PoCL)\n"
"""What the compile cache keeps for a routine on a driver whose binaries save nothing (PoCL):
a warm hit builds the source again (PoCL's own kernel cache serves its kernels)."""


def find_platform() -> tuple[Any, list[Any]] | str:
    """The first OpenCL platform with devices and its devices, or why there is none."""
    try:
        platforms = cl.get_platforms()
    except cl.Error as exc:
        return f"no OpenCL platform found ({exc})"
    for p in platforms:
        try:
            devices = p.get_devices()
        except cl.Error:
            continue
        if devices:
            return p, devices
    return "no OpenCL platform with a device found"


class OpenclEvent(Event):
    """An OpenCL event (a queue marker) of the stream named ``stream``."""

    def __init__(self, event: Any, queue: Any, stream: str = "") -> None:
        self.event = event
        self.queue = queue
        self.stream = stream

    def is_done(self) -> bool:
        self.queue.flush()  # an unflushed marker may never complete
        return _complete(self.event)

    def sync(self) -> None:
        # Not ``event.wait()``: it holds Ctrl-C back until the device is done (seconds).
        self.queue.flush()
        poll_until(lambda: _complete(self.event))

    def where(self) -> str:
        return self.stream

    def status(self) -> str:
        self.queue.flush()  # as in is_done: an unflushed marker stays pending
        status = self.event.command_execution_status
        if status < 0:
            return f"failed (OpenCL status {status})"
        return "done" if status == cl.command_execution_status.COMPLETE else "pending"


class OpenclGate(HostGate):
    """The host gate of an OpenCL queue: a user event, which the queue waits for on the device
    (``wait_for`` enqueues a barrier on it), so neither the caller nor any thread blocks;
    :meth:`open` completes it."""

    def __init__(self, queue: Any, stream: str = "") -> None:
        self._user = cl.UserEvent(queue.context)
        where = f"{stream} (a host gate)" if stream else "a host gate"
        self.event = OpenclEvent(self._user, queue, where)

    def open(self) -> None:
        self._user.set_status(cl.command_execution_status.COMPLETE)


class OpenclQueue(ImmediateQueue):
    """A stream: an in-order command queue, and the events of its host transfers in flight.

    pyopencl returns a host transfer's event as a "nanny" event that holds the host array and,
    when garbage collected, *waits for the transfer*: dropping it would turn every
    ``enqueue_copy(..., is_blocking=False)`` into a blocking one (measured: a copy enqueued
    behind a long kernel returned only when the kernel was done). The queue keeps those events
    until they complete, pruning done ones from the front (the queue runs in order).
    """

    def __init__(self, name: str, queue: Any) -> None:
        super().__init__(name)
        self.queue = queue
        self._in_flight: deque[Any] = deque()

    def keep(self, event: Any) -> None:
        """Keep a transfer's event (and so its host array) alive until it completes."""
        in_flight = self._in_flight
        while in_flight and _complete(in_flight[0]):
            in_flight.popleft()
        in_flight.append(event)

    def marker(self) -> Event:
        return OpenclEvent(cl.enqueue_marker(self.queue), self.queue, self.name)

    def wait_device(self, event: Event) -> bool:
        # Another backend instance's event belongs to another OpenCL context: the host waits.
        if not isinstance(event, OpenclEvent) or event.queue.context != self.queue.context:
            return False
        cl.enqueue_barrier(self.queue, wait_for=[event.event])
        return True

    def finish(self) -> None:
        self.queue.finish()
        self._in_flight.clear()

    def host_gate(self) -> HostGate:
        """A user event of this queue's context: the device waits for it, no thread does."""
        return OpenclGate(self.queue, self.name)

    def hold(self, seconds: float) -> None:
        self._check()
        gate = cl.UserEvent(self.queue.context)
        cl.enqueue_barrier(self.queue, wait_for=[gate])
        # The timer holds this queue until it opens the gate: a queue collected while held
        # (its backend dropped) would wait, in the collector and holding the GIL, for copies
        # behind a gate that only this Python thread can open.
        timer = threading.Timer(seconds, self._open, (gate,))
        timer.daemon = True
        timer.start()

    def _open(self, gate: Any) -> None:
        gate.set_status(cl.command_execution_status.COMPLETE)

    def debug_info(self) -> dict[str, Any]:
        info = super().debug_info()
        info["transfers_in_flight"] = len(self._in_flight)
        return info


def _complete(event: Any) -> bool:
    status = event.command_execution_status
    return bool(status == cl.command_execution_status.COMPLETE or status < 0)


class OpenclDevices(GpuDevices):
    """The ``opencl`` backend's device side: the driver hooks of :class:`GpuDevices`."""

    name: ClassVar[str] = "opencl"
    most_streams: ClassVar[int] = 4

    def __init__(self) -> None:
        found = find_platform()
        if isinstance(found, str):
            raise RuntimeError(found)
        self.platform, self.devices = found
        super().__init__(
            OpenclSyntax(
                group_size=min(256, min(d.max_work_group_size for d in self.devices)),
                fp64=all(self._has(d, "cl_khr_fp64") for d in self.devices),
                # A work group per cell of a long row reduction: 256 lanes on GPUs. CPU devices
                # (PoCL) run a group's lanes as a loop on one core, where one work item per
                # row measured fastest (4096x4096 row sum, medians: 1.0x, 64 lanes 1.15-1.2x,
                # 256 lanes 1.7x); ARRAYJIT_GPU_CELL_LANES chooses (the tests run PoCL both ways).
                cell_lanes=gpu_cell_lanes(
                    1 if all(d.type & cl.device_type.CPU for d in self.devices) else 256
                ),
            )
        )
        self.context = cl.Context(self.devices)
        self._alloc_queues = [cl.CommandQueue(self.context, d) for d in self.devices]
        self._lock = threading.Lock()
        dev0 = self.devices[0]
        self._identity = (
            f"{self.platform.name} {self.platform.version}",
            f"{dev0.driver_version}",
            ";".join(d.name for d in self.devices),
        )
        # What a program binary depends on, per device: not the ordinal, so identical devices
        # (two GPUs of one model, PoCL's devices) share their cache entries.
        self._device_ids = [f"{d.name} | {d.version} | {d.driver_version}" for d in self.devices]
        # Sources are built in a context of their device alone: a program of the shared
        # context would belong to every device, and drivers disagree on what its binaries
        # query returns for devices it was not built for (PoCL omits them).
        self._build_contexts: dict[int, Any] = {}
        # PoCL compiles every kernel of a program when its binaries are asked for (about 0.1 s
        # a kernel), and again at each kernel's first launch, for the launch's work-group size:
        # its binary saves no launch-time build, so programs are built from source alone (in
        # the shared context, for their device), and the compile cache keeps only a marker.
        self._source_only = "Portable Computing Language" in self.platform.name

    @staticmethod
    def _has(device: Any, extension: str) -> bool:
        return extension in device.extensions.split()

    # ---- devices ----

    def supported_precs(self, ordinal: int) -> frozenset[Prec]:
        d = self.devices[ordinal]
        # half is stored as bits and converted by core builtins: no cl_khr_fp16 needed.
        precs = set(OpenclSyntax.supported_precs)
        if not self._has(d, "cl_khr_fp64"):
            precs.discard(Prec.double)
        return frozenset(precs)

    def device_info(self, ordinal: int) -> dict[str, Any]:
        d = self.devices[ordinal]
        return {
            "ordinal": ordinal,
            "name": d.name,
            "platform": self.platform.name,
            "driver": d.driver_version,
            "compute_units": d.max_compute_units,
            "max_work_group_size": d.max_work_group_size,
        }

    def info(self, ordinal: int) -> DeviceInfo:
        d = self.devices[ordinal]
        kinds = cl.device_type
        kind = (
            "gpu"
            if d.type & kinds.GPU
            else "cpu"
            if d.type & kinds.CPU
            else "accelerator"
            if d.type & kinds.ACCELERATOR
            else "unknown"
        )
        try:  # deprecated since OpenCL 2.0; some drivers no longer answer
            unified = bool(d.host_unified_memory)
        except cl.Error:
            unified = False
        return DeviceInfo(
            name=d.name,
            ordinal=ordinal,
            kind=kind,
            unified_memory=unified,
            supported_precs=self.supported_precs(ordinal),
            compute_units=int(d.max_compute_units),
            global_memory=int(d.global_mem_size),
            max_shared_memory=int(d.local_mem_size),
            max_workgroup_size=tuple(int(n) for n in d.max_work_item_sizes),
            max_workgroup_total=int(d.max_work_group_size),
            float4_type="float4",
            smem_prefix=OpenclSyntax.local_qualifier,
            barrier=OpenclSyntax.barrier,
        )

    def new_queue(self, ordinal: int, name: str) -> StreamQueue:
        return OpenclQueue(name, cl.CommandQueue(self.context, self.devices[ordinal]))

    # ---- memory ----

    def alloc(self, ordinal: int, nbytes: int) -> Any:
        buf = cl.Buffer(self.context, cl.mem_flags.READ_WRITE, max(nbytes, 1))
        queue = self._alloc_queues[ordinal]
        with self._lock:
            cl.enqueue_fill_buffer(queue, buf, np.zeros(1, np.uint8), 0, max(nbytes, 1))
            queue.finish()
        return buf

    def free(self, ordinal: int, mem: Any) -> None:
        mem.release()

    def max_alloc(self, ordinal: int) -> int | None:
        return int(self.devices[ordinal].max_mem_alloc_size)

    def to_device(self, queue: StreamQueue, dst: Buf, src: np.ndarray) -> None:
        if src.nbytes:
            assert isinstance(queue, OpenclQueue)
            queue.keep(
                cl.enqueue_copy(queue.queue, dst[0], src, dst_offset=dst[1], is_blocking=False)
            )

    def to_host(self, queue: StreamQueue, dst: np.ndarray, src: Buf) -> None:
        if dst.nbytes:
            assert isinstance(queue, OpenclQueue)
            queue.keep(
                cl.enqueue_copy(queue.queue, dst, src[0], src_offset=src[1], is_blocking=False)
            )

    def copy(self, queue: StreamQueue, dst: Buf, src: Buf, nbytes: int, src_ordinal: int) -> None:
        if nbytes:
            assert isinstance(queue, OpenclQueue)
            cl.enqueue_copy(
                queue.queue,
                dst[0],
                src[0],
                byte_count=nbytes,
                src_offset=src[1],
                dst_offset=dst[1],
            )

    # ---- code (the recipe is GpuDevices'; these are its hooks) ----

    def binary_key(self, code: GpuCode, ordinal: int) -> str:
        return cache_key(
            source=code.source,
            backend="opencl",
            renderer="opencl-c",
            compiler=self._identity[0],
            compiler_version=self._identity[1],
            options=(BUILD_OPTIONS, *(("source only",) if self._source_only else ())),
            device=self._device_ids[ordinal],
        )

    def build(self, code: GpuCode, ordinal: int) -> bytes:
        device = self.devices[ordinal]
        if self._source_only:  # the program itself is the module: no binary to load
            program = build_program(
                self.context, device, code.source, code.name, self.cache.directory
            )
            code.modules.setdefault(ordinal, program)
            return SOURCE_BUILT
        context = self._build_contexts.get(ordinal)
        if context is None:
            context = self._build_contexts[ordinal] = cl.Context([device])
        return build_binary(context, device, code.source, code.name, self.cache.directory)

    def load(self, code: GpuCode, binary: bytes, ordinal: int, from_cache: bool) -> Any:
        if binary == SOURCE_BUILT:  # a warm entry of a source-only driver: build the source
            built = code.modules.get(ordinal)
            if built is not None:
                return built
            device = self.devices[ordinal]
            return build_program(self.context, device, code.source, code.name, self.cache.directory)
        # A program from a binary, for the device alone.
        return load_binary(self.context, self.devices[ordinal], binary, code.name, from_cache)

    def kernel(self, module: Any, name: str, fixed: list[Any]) -> Any:
        # Buffer arguments are set once per link; a launch sets only the dynamic ones.
        kernel = cl.Kernel(module, name)
        for pos, arg in enumerate(fixed):
            kernel.set_arg(pos, arg)
        return kernel, len(fixed)

    def launch_shape(self, spec: GpuKernel) -> Any:
        local = spec.local_size
        global_size = -(-spec.global_size // (local or 1)) * (local or 1)  # whole groups
        return (global_size,), (local,) if local else None

    def native_queue(self, queue: StreamQueue) -> Any:
        assert isinstance(queue, OpenclQueue)
        return queue.queue

    def launch(self, queue: Any, kernel: Any, args: list[Any], shape: Any) -> None:
        kern, first_dynamic = kernel
        for pos, arg in enumerate(args, first_dynamic):
            kern.set_arg(pos, arg)
        cl.enqueue_nd_range_kernel(queue, kern, *shape)

    def buffer_arg(self, mem: Any, offset: int) -> list[Any]:
        return [mem, np.uint64(offset)]

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "platform": self._identity[0],
            "driver": self._identity[1],
            "devices": self._identity[2],
        }


__all__ = ["OpenclDevices", "OpenclEvent", "OpenclGate", "OpenclQueue", "find_platform"]
