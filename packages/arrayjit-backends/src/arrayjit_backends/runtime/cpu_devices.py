"""CPU compilers as device backends: one device whose memory is host memory, and a scheduler
(``sync_`` or ``multicore_``, :mod:`arrayjit_backends.runtime.schedulers`) whose tasks run the
copies and procedures themselves.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from arrayjit_backends import settings
from arrayjit_backends.impl.cpu_compiler import CpuCompiler, Run
from arrayjit_backends.impl.device import Buf, DeviceBackend, DeviceInfo, cpu_name
from arrayjit_backends.impl.stream_queue import StreamQueue, ThreadBudget
from arrayjit_backends.runtime.schedulers import SCHEDULERS, ThreadQueue
from arrayjit_backends.runtime.slab import aligned_bytes, typed_view
from arrayjit_tnode import Prec, UsageError

if TYPE_CHECKING:
    from arrayjit_ir.optimized import Optimized
    from arrayjit_tnode import Tnode


class CpuDevices(DeviceBackend):
    """A CPU compiler seen as a device backend: one device whose memory is host memory, and a
    scheduler (``sync`` or ``multicore``) whose tasks do the copies and runs themselves."""

    unified_memory: ClassVar[bool] = True

    def __init__(self, name: str, scheduler: str, compiler: CpuCompiler) -> None:
        if scheduler not in SCHEDULERS:
            raise UsageError(
                f"unknown scheduler {scheduler!r} for backend {name}; valid: {sorted(SCHEDULERS)}"
            )
        self.name = name  # type: ignore[misc]
        self.scheduler = scheduler
        self.compiler = compiler
        self.budget = ThreadBudget(settings.num_threads())
        """The device's cores, shared among its busy streams (``ARRAYJIT_NUM_THREADS`` caps
        them)."""

    def num_devices(self) -> int:
        return 1

    def supported_precs(self, ordinal: int) -> frozenset[Prec]:
        return frozenset(self.compiler.supported_precs)

    def suggested_num_streams(self, ordinal: int, config: str) -> int:
        if self.scheduler == "sync" or config == "only_devices_parallel":
            return 1
        if config == "for_parallel_copying":
            return 2
        return max(1, os.cpu_count() or 1)

    def device_info(self, ordinal: int) -> dict[str, Any]:
        return {"ordinal": ordinal, "kind": "host CPU", "cpus": os.cpu_count()}

    def info(self, ordinal: int) -> DeviceInfo:
        # A routine runs as one native call on its stream's thread: a launch is one work item
        # with no work-group memory (loops may still use the cores through OpenMP, in cc).
        try:
            memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError, AttributeError):
            memory = 0
        return DeviceInfo(
            name=cpu_name(),
            ordinal=ordinal,
            kind="cpu",
            unified_memory=True,
            supported_precs=self.supported_precs(ordinal),
            compute_units=os.cpu_count() or 1,
            global_memory=memory,
            max_shared_memory=0,
            max_workgroup_size=(1,),
            max_workgroup_total=1,
        )

    def new_queue(self, ordinal: int, name: str) -> StreamQueue:
        if SCHEDULERS[self.scheduler] is ThreadQueue:
            return ThreadQueue(name, self.budget, self.compiler.new_bell())
        return SCHEDULERS[self.scheduler](name, self.budget)

    def alloc(self, ordinal: int, nbytes: int) -> np.ndarray:
        return aligned_bytes(max(nbytes, 1))

    def host_buffer(self, ordinal: int, array: np.ndarray) -> np.ndarray:
        # The bytes of the host array itself: typed views of it are the array's memory.
        return array.reshape(-1).view(np.uint8)

    def host_view(self, ordinal: int, buf: Buf, tn: Tnode) -> np.ndarray:
        # Pools (and adopted host arrays) are numpy byte arrays: a typed view is the buffer.
        return typed_view(buf[0], buf[1], tn)

    def to_device(self, queue: StreamQueue, dst: Buf, src: np.ndarray) -> None:
        mem, off = dst
        mem[off : off + src.nbytes] = src.reshape(-1).view(np.uint8)

    def to_host(self, queue: StreamQueue, dst: np.ndarray, src: Buf) -> None:
        mem, off = src
        dst.reshape(-1).view(np.uint8)[...] = mem[off : off + dst.nbytes]

    def copy(self, queue: StreamQueue, dst: Buf, src: Buf, nbytes: int, src_ordinal: int) -> None:
        (dmem, doff), (smem, soff) = dst, src
        dmem[doff : doff + nbytes] = smem[soff : soff + nbytes]

    def compile(self, optimized: Optimized) -> Any:
        return self.compiler.compile(optimized)

    def compile_batch(self, optimized: Sequence[Optimized]) -> list[Any]:
        return self.compiler.compile_batch(optimized)

    def link(
        self,
        code: Any,
        queue: StreamQueue,
        ordinal: int,
        buffers: Mapping[Tnode, Buf],
        merge_buffer: Callable[[], Buf | None],
        merge_node: Tnode | None,
    ) -> Run:
        views = {tn: typed_view(mem, off, tn) for tn, (mem, off) in buffers.items()}

        def merge_view() -> np.ndarray | None:
            where = merge_buffer()
            if where is None or merge_node is None:
                return None
            return typed_view(where[0], where[1], merge_node)

        return self.compiler.link(code, views, merge_view)

    def scratch_bytes(self, ordinal: int) -> int:
        return self.compiler.scratch_bytes()

    def code_kind(self) -> str:
        # Native CPU code runs on host memory under any scheduler: cc code links into any cc
        # backend, never into llvm or interp.
        return self.compiler.name

    def finalize(self) -> None:
        self.compiler.finalize()

    def describe(self) -> dict[str, Any]:
        return {"scheduler": self.scheduler, **self.compiler.describe()}


__all__ = ["CpuDevices"]
