"""The CUDA backend's device side, on pycuda's driver API.

- Devices: every CUDA device, each through its primary context (made current around every
  driver call, on whichever thread makes it).
- Streams: a CUDA stream each; ``all_work`` records an event; ``will_wait_for`` makes the
  stream wait for another stream's event on the device.
- Memory: slab pools are ``mem_alloc`` allocations zeroed once; transfers are asynchronous
  copies on the stream (``memcpy_htod_async``/``memcpy_dtoh_async``; pageable host memory makes
  them synchronous with the host, which is correct, only slower); between devices,
  ``memcpy_peer_async``.
- Code: CUDA C from :class:`~arrayjit_backend_cuda.render.CudaSyntax`, compiled by ``nvcc
  --cubin`` for the device's architecture through the shared compile cache, one module per
  device loaded once per compiled routine and shared by every link of it.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any, ClassVar

import numpy as np
import pycuda.driver as cuda

from arrayjit_backend_cuda.render import (
    NVCC_FLAGS,
    CudaSyntax,
    compile_to,
    nvcc_path,
    nvcc_version,
)
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
from arrayjit_tnode import Prec, Tnode

BLOCK = 256
"""Threads per block of element-parallel kernels."""


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


class CuEvent(Event):
    """A CUDA event recorded on a stream."""

    def __init__(self, event: Any, devices: CudaDevices, ordinal: int) -> None:
        self.event = event
        self.devices = devices
        self.ordinal = ordinal

    def is_done(self) -> bool:
        with self.devices.current(self.ordinal):
            return bool(self.event.query())

    def sync(self) -> None:
        # Polled, not ``synchronize()``: a blocking driver wait holds Ctrl-C back.
        with self.devices.current(self.ordinal):
            poll_until(self.event.query)


class CuQueue(ImmediateQueue):
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
        return CuEvent(event, self.devices, self.ordinal)

    def wait_device(self, event: Event) -> bool:
        if not isinstance(event, CuEvent) or event.devices is not self.devices:
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


@dataclass
class CuCode:
    """A compiled routine: its rendering, cubin per device, and modules loaded lazily."""

    name: str
    rendered: GpuProgram
    cubins: list[bytes]
    modules: dict[int, Any] = field(default_factory=dict)

    @property
    def source(self) -> str:
        return self.rendered.source


class CudaDevices(DeviceBackend):
    """The ``cuda`` backend's device side."""

    name: ClassVar[str] = "cuda"

    def __init__(self) -> None:
        reason = probe()
        if reason is not None:
            raise RuntimeError(reason)
        self.devices = [cuda.Device(k) for k in range(cuda.Device.count())]
        self.contexts = [d.retain_primary_context() for d in self.devices]
        self.nvcc = nvcc_path() or "nvcc"
        self.nvcc_version = nvcc_version(self.nvcc)
        self.cache = CompileCache()
        self.renderer = CudaSyntax(group_size=BLOCK)
        self.scratch_account = ScratchAccount()
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

    def num_devices(self) -> int:
        return len(self.devices)

    def supported_precs(self, ordinal: int) -> frozenset[Prec]:
        return CudaSyntax.supported_precs

    def suggested_num_streams(self, ordinal: int, config: str) -> int:
        return {"only_devices_parallel": 1, "for_parallel_copying": 2}.get(config, 8)

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
        return CuQueue(name, self, ordinal)

    # ---- memory ----

    def alloc(self, ordinal: int, nbytes: int) -> Any:
        with self.current(ordinal):
            mem = cuda.mem_alloc(max(nbytes, 1))
            cuda.memset_d8(mem, 0, max(nbytes, 1))
        return mem

    def free(self, ordinal: int, mem: Any) -> None:
        with self.current(ordinal):
            mem.free()

    def to_device(self, queue: StreamQueue, dst: Buf, src: np.ndarray) -> None:
        assert isinstance(queue, CuQueue)
        if src.nbytes:
            cuda.memcpy_htod_async(int(dst[0]) + dst[1], src, queue.stream)

    def to_host(self, queue: StreamQueue, dst: np.ndarray, src: Buf) -> None:
        assert isinstance(queue, CuQueue)
        if dst.nbytes:
            cuda.memcpy_dtoh_async(dst, int(src[0]) + src[1], queue.stream)

    def copy(self, queue: StreamQueue, dst: Buf, src: Buf, nbytes: int, src_ordinal: int) -> None:
        assert isinstance(queue, CuQueue)
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

    # ---- code ----

    def compile(self, optimized: Optimized) -> CuCode:
        prefix = "aj_" + "".join(c if c.isalnum() else "_" for c in optimized.name)
        rendered = self.renderer.render_program(optimized, prefix)
        cubins = []
        for k in range(len(self.devices)):
            arch = self.arch(k)
            key = cache_key(
                source=rendered.source,
                backend="cuda",
                renderer="cuda-c",
                compiler=self.nvcc,
                compiler_version=self.nvcc_version,
                options=("--cubin", *NVCC_FLAGS),
                device=arch,
            )
            build: Callable[[], bytes] = partial(
                compile_to, rendered.source, self.nvcc, arch, "cubin", prefix
            )
            cubins.append(self.cache.get_or_build(key, build))
        return CuCode(optimized.name, rendered, cubins)

    def _module(self, code: CuCode, ordinal: int) -> Any:
        module = code.modules.get(ordinal)
        if module is None:
            with self.current(ordinal):
                module = cuda.module_from_buffer(code.cubins[ordinal])
            code.modules[ordinal] = module
        return module

    def link(
        self,
        code: Any,
        queue: StreamQueue,
        ordinal: int,
        buffers: Mapping[Tnode, Buf],
        merge_buffer: Callable[[], Buf | None],
        merge_node: Tnode | None,
    ) -> Run:
        c: CuCode = code
        assert isinstance(queue, CuQueue)
        with self.current(ordinal):
            return self._link(c, queue, ordinal, buffers, merge_buffer)

    def _link(
        self,
        c: CuCode,
        queue: CuQueue,
        ordinal: int,
        buffers: Mapping[Tnode, Buf],
        merge_buffer: Callable[[], Buf | None],
    ) -> Run:
        rendered = c.rendered
        module = self._module(c, ordinal)
        scratch = [self.alloc(ordinal, nbytes) for _, nbytes in rendered.scratch]
        fixed = [np.uintp(int(buffers[tn][0]) + buffers[tn][1]) for tn in rendered.params.buffers]
        fixed += [np.uintp(int(mem)) for mem in scratch]
        has_merge = rendered.params.merge_node is not None
        symbols = rendered.params.static_symbols
        launches = []
        for k in rendered.kernels:
            block = k.local_size or BLOCK
            grid = max(1, -(-k.global_size // block))
            launches.append((module.get_function(k.name), (block, 1, 1), (grid, 1)))
        stream = queue.stream

        def run(bindings: Mapping[StaticSymbol, int]) -> None:
            args: list[Any] = list(fixed)
            if has_merge:
                where = merge_buffer()
                args.append(np.uintp(int(where[0]) + where[1]) if where else np.uintp(0))
            args += [np.int64(bindings[s]) for s in symbols]
            for function, block, grid in launches:
                function(*args, block=block, grid=grid, stream=stream)

        run.keep_alive = (scratch, c)  # type: ignore[attr-defined]
        held = sum(max(n, 1) for _, n in rendered.scratch)
        self.scratch_account.hold(run, ordinal, held)  # freed with the run
        return run

    def scratch_bytes(self, ordinal: int) -> int:
        return self.scratch_account.bytes(ordinal)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "nvcc": self.nvcc, "nvcc_version": self.nvcc_version}

    def finalize(self) -> None:
        for ctx in self.contexts:
            ctx.detach()
        self.contexts = []


__all__ = ["CuCode", "CuEvent", "CuQueue", "CudaDevices", "probe"]
