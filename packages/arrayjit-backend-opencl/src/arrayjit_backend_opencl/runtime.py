"""The OpenCL backend: every device of one platform, one command queue per stream.

- Devices: those of the first platform that has any (``$ARRAYJIT_OPENCL_PLATFORM`` is not a
  setting; pyopencl's ``PYOPENCL_CTX`` is not read either: one context spans the platform's
  devices, so buffers of one device can be copied to another with one ``enqueue_copy``).
- Streams: an in-order command queue each; ``all_work`` is a marker event, ``will_wait_for`` a
  barrier waiting for another queue's marker, so cross-stream order costs the host nothing.
- Memory: slab pools are ``cl.Buffer`` objects, zero-filled when created; transfers are
  non-blocking ``enqueue_copy`` calls with byte offsets; the stream keeps each transfer's event
  (and so its host array) until the copy is done (:class:`ClQueue`), and the generic layer keeps
  host reads and writes waiting for it.
- Precisions: all but uint4x32; double only with ``cl_khr_fp64``; half, bfloat16 and fp8 are
  stored as bits and computed in float (see :mod:`arrayjit_backend_opencl.render`).
- Code: one program per routine and device (device 0's built by ``compile``, another's at the
  routine's first link on it), through the shared compile cache (program binaries keyed by the
  device's identity, so identical devices share them; pyopencl's own cache is bypassed);
  kernel objects are made once per link, from the program of the context's device, with their
  buffer arguments set once; a run sets the merge buffer and static indices and enqueues the
  kernels.
"""

from __future__ import annotations

import hashlib
import tempfile
import threading
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pyopencl as cl

from arrayjit_backend_opencl.render import OpenclSyntax
from arrayjit_backends.backend_impl import Run
from arrayjit_backends.compile_cache import CompileCache, cache_key
from arrayjit_backends.device_impl import (
    Buf,
    DeviceBackend,
    DeviceInfo,
    ImmediateQueue,
    ScratchAccount,
)
from arrayjit_backends.gpu_syntax import GpuProgram
from arrayjit_backends.scheduler import Event, StreamQueue, poll_until
from arrayjit_ir.indexing import StaticSymbol
from arrayjit_ir.optimized import Optimized
from arrayjit_tnode import CompileError, Prec, Tnode

BUILD_OPTIONS = "-cl-std=CL1.2"


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


class ClEvent(Event):
    """An OpenCL event (a queue marker)."""

    def __init__(self, event: Any, queue: Any) -> None:
        self.event = event
        self.queue = queue

    def is_done(self) -> bool:
        self.queue.flush()  # an unflushed marker may never complete
        return _complete(self.event)

    def sync(self) -> None:
        # Not ``event.wait()``: it holds Ctrl-C back until the device is done (seconds).
        self.queue.flush()
        poll_until(lambda: _complete(self.event))


class ClQueue(ImmediateQueue):
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
        return ClEvent(cl.enqueue_marker(self.queue), self.queue)

    def wait_device(self, event: Event) -> bool:
        # Another backend instance's event belongs to another OpenCL context: the host waits.
        if not isinstance(event, ClEvent) or event.queue.context != self.queue.context:
            return False
        cl.enqueue_barrier(self.queue, wait_for=[event.event])
        return True

    def finish(self) -> None:
        self.queue.finish()
        self._in_flight.clear()

    def hold(self, seconds: float) -> None:
        self._check()
        gate = cl.UserEvent(self.queue.context)
        cl.enqueue_barrier(self.queue, wait_for=[gate])
        timer = threading.Timer(seconds, gate.set_status, (cl.command_execution_status.COMPLETE,))
        timer.daemon = True
        timer.start()

    def debug_info(self) -> dict[str, Any]:
        info = super().debug_info()
        info["transfers_in_flight"] = len(self._in_flight)
        return info


def _complete(event: Any) -> bool:
    status = event.command_execution_status
    return bool(status == cl.command_execution_status.COMPLETE or status < 0)


@dataclass
class ClCode:
    """A compiled routine: its rendered source and launches, and a program per device.

    The program of device 0 is built by ``compile`` (so a source that does not build raises
    there); another device's program is built the first time the routine is linked on it, so
    a machine with several devices pays the builds of the devices it uses only.
    """

    name: str
    rendered: GpuProgram
    programs: dict[int, Any] = field(default_factory=dict)
    """Device ordinal -> the program built for that device alone."""

    @property
    def source(self) -> str:
        return self.rendered.source


class OpenclDevices(DeviceBackend):
    """The ``opencl`` backend's device side."""

    name: ClassVar[str] = "opencl"

    def __init__(self) -> None:
        found = find_platform()
        if isinstance(found, str):
            raise RuntimeError(found)
        self.platform, self.devices = found
        self.context = cl.Context(self.devices)
        self._alloc_queues = [cl.CommandQueue(self.context, d) for d in self.devices]
        self._lock = threading.Lock()
        self.cache = CompileCache()
        self.scratch_account = ScratchAccount()
        dev0 = self.devices[0]
        self.renderer = OpenclSyntax(
            group_size=min(256, min(d.max_work_group_size for d in self.devices)),
            fp64=all(self._has(d, "cl_khr_fp64") for d in self.devices),
        )
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
        self._build_lock = threading.Lock()

    @staticmethod
    def _has(device: Any, extension: str) -> bool:
        return extension in device.extensions.split()

    # ---- devices ----

    def num_devices(self) -> int:
        return len(self.devices)

    def supported_precs(self, ordinal: int) -> frozenset[Prec]:
        d = self.devices[ordinal]
        # half is stored as bits and converted by core builtins: no cl_khr_fp16 needed.
        precs = set(OpenclSyntax.supported_precs)
        if not self._has(d, "cl_khr_fp64"):
            precs.discard(Prec.double)
        return frozenset(precs)

    def suggested_num_streams(self, ordinal: int, config: str) -> int:
        return {"only_devices_parallel": 1, "for_parallel_copying": 2}.get(config, 4)

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
        return ClQueue(name, cl.CommandQueue(self.context, self.devices[ordinal]))

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

    def to_device(self, queue: StreamQueue, dst: Buf, src: np.ndarray) -> None:
        if src.nbytes:
            assert isinstance(queue, ClQueue)
            queue.keep(
                cl.enqueue_copy(queue.queue, dst[0], src, dst_offset=dst[1], is_blocking=False)
            )

    def to_host(self, queue: StreamQueue, dst: np.ndarray, src: Buf) -> None:
        if dst.nbytes:
            assert isinstance(queue, ClQueue)
            queue.keep(
                cl.enqueue_copy(queue.queue, dst, src[0], src_offset=src[1], is_blocking=False)
            )

    def copy(self, queue: StreamQueue, dst: Buf, src: Buf, nbytes: int, src_ordinal: int) -> None:
        if nbytes:
            assert isinstance(queue, ClQueue)
            cl.enqueue_copy(
                queue.queue,
                dst[0],
                src[0],
                byte_count=nbytes,
                src_offset=src[1],
                dst_offset=dst[1],
            )

    # ---- code ----

    def compile(self, optimized: Optimized) -> ClCode:
        prefix = "aj_" + "".join(c if c.isalnum() else "_" for c in optimized.name)
        code = ClCode(optimized.name, self.renderer.render_program(optimized, prefix))
        self.program(code, 0)
        return code

    def program(self, code: ClCode, ordinal: int) -> Any:
        """``code``'s program for device ``ordinal``, built (or loaded from the compile cache)
        the first time it is asked for.

        Raises:
            CompileError: the source does not build on that device.
        """
        with self._build_lock:
            program = code.programs.get(ordinal)
            if program is None:
                program = code.programs[ordinal] = self._load_program(code, ordinal)
            return program

    def _load_program(self, code: ClCode, ordinal: int) -> Any:
        device = self.devices[ordinal]
        key = cache_key(
            source=code.source,
            backend="opencl",
            renderer="opencl-c",
            compiler=self._identity[0],
            compiler_version=self._identity[1],
            options=(BUILD_OPTIONS,),
            device=self._device_ids[ordinal],
        )

        def load(binary: bytes, from_cache: bool) -> Any:
            # A program from a binary: pyopencl builds it without its own cache.
            try:
                return cl.Program(self.context, [device], [binary]).build(BUILD_OPTIONS)
            except cl.Error as exc:
                if from_cache:  # the cache discards it with a warning and builds from source
                    raise ValueError(f"the OpenCL driver rejects its binary: {exc}") from exc
                raise CompileError(
                    f"OpenCL rejects the binary it built for routine {code.name} on {device.name}",
                    str(exc),
                ) from exc

        return self.cache.load_or_build(key, lambda: self._build(code, ordinal), load)

    def _build(self, code: ClCode, ordinal: int) -> bytes:
        device = self.devices[ordinal]
        context = self._build_contexts.get(ordinal)
        if context is None:
            context = self._build_contexts[ordinal] = cl.Context([device])
        # pyopencl's Program(context, source) would consult its own on-disk cache; the raw
        # program object builds the source as it is (our compile cache keeps the binary).
        raw = cl._cl._Program(context, code.source)
        try:
            raw.build(BUILD_OPTIONS.encode(), [device])
        except cl.Error as exc:
            log = str(raw.get_build_info(device, cl.program_build_info.LOG))
            path = _keep_source(self.cache.directory, code.source)
            raise CompileError(
                f"OpenCL failed to build routine {code.name} on {device.name}", log, str(path)
            ) from exc
        binaries: list[bytes] = raw.get_info(cl.program_info.BINARIES)  # type: ignore[assignment]
        return bytes(binaries[0])

    def link(
        self,
        code: Any,
        queue: StreamQueue,
        ordinal: int,
        buffers: Mapping[Tnode, Buf],
        merge_buffer: Callable[[], Buf | None],
        merge_node: Tnode | None,
    ) -> Run:
        c: ClCode = code
        assert isinstance(queue, ClQueue)
        rendered = c.rendered
        scratch = [self.alloc(ordinal, nbytes) for _, nbytes in rendered.scratch]
        fixed: list[Any] = []
        for tn in rendered.params.buffers:
            mem, off = buffers[tn]
            fixed += [mem, np.uint64(off)]
        for mem in scratch:
            fixed += [mem, np.uint64(0)]
        has_merge = rendered.params.merge_node is not None
        symbols = rendered.params.static_symbols
        program = self.program(c, ordinal)
        kernels = [cl.Kernel(program, k.name) for k in rendered.kernels]
        for kernel in kernels:
            for pos, arg in enumerate(fixed):
                kernel.set_arg(pos, arg)
        # An empty merge buffer still needs a buffer argument; only then is one allocated.
        dummy = scratch[0] if scratch else self.alloc(ordinal, 1) if has_merge else None
        launches = [
            (
                kernel,
                (_round_up(k.global_size, k.local_size or 1),),
                (k.local_size,) if k.local_size else None,
            )
            for kernel, k in zip(kernels, rendered.kernels)
        ]
        first_dynamic = len(fixed)
        q = queue.queue

        def run(bindings: Mapping[StaticSymbol, int]) -> None:
            if has_merge or symbols:
                args: list[Any] = []
                if has_merge:
                    where = merge_buffer()
                    args += [where[0], np.uint64(where[1])] if where else [dummy, np.uint64(0)]
                args += [np.int64(bindings[s]) for s in symbols]
                for kernel in kernels:
                    for pos, arg in enumerate(args, first_dynamic):
                        kernel.set_arg(pos, arg)
            for kernel, global_size, local_size in launches:
                cl.enqueue_nd_range_kernel(q, kernel, global_size, local_size)

        run.keep_alive = (scratch, dummy, c)  # type: ignore[attr-defined]
        held = sum(max(n, 1) for _, n in rendered.scratch) + (1 if has_merge and not scratch else 0)
        self.scratch_account.hold(run, ordinal, held)  # freed with the run
        return run

    def scratch_bytes(self, ordinal: int) -> int:
        return self.scratch_account.bytes(ordinal)

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "platform": self._identity[0],
            "driver": self._identity[1],
            "devices": self._identity[2],
        }


def _round_up(n: int, m: int) -> int:
    return -(-n // m) * m


def _keep_source(directory: Path, source: str) -> Path:
    name = f"{hashlib.sha256(source.encode()).hexdigest()[:16]}.cl"
    try:
        folder = directory / "failed"
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:  # an unusable cache folder must not hide the compile error
        folder = Path(tempfile.mkdtemp(prefix="arrayjit-failed-"))
    path = folder / name
    path.write_text(source)
    return path


__all__ = ["ClCode", "ClEvent", "ClQueue", "OpenclDevices", "find_platform"]
