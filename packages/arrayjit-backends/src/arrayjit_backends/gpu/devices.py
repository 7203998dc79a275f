"""The part every GPU backend shares: compiling a routine and linking it to a device's buffers.

A GPU backend (OpenCL, CUDA) renders each routine with a :class:`~arrayjit_backends.gpu.dialect.
GpuSyntax` dialect into one source of several kernels (:func:`~arrayjit_backends.gpu.program.
render_program`, a :class:`~arrayjit_backends.gpu.program.GpuProgram`). What happens next
is one recipe, written here once (:class:`GpuDevices`):

1. ``compile`` renders the routine and calls :meth:`GpuDevices.prepare` (by default: device 0's
   module, so that a source that does not build raises at compile);
2. a device's *module* is made the first time it is asked for: the binary for that device is
   taken from the shared compile cache (keyed by :meth:`~GpuDevices.binary_key`, which names
   what the binary depends on, not the ordinal, so identical devices share entries) or built
   (:meth:`~GpuDevices.build`), then loaded (:meth:`~GpuDevices.load`); a cached binary the
   driver rejects is discarded and rebuilt. A backend whose ``prepare`` builds binaries
   ahead (CUDA: every device's at compile, so nvcc errors belong to compile) has them loaded
   as they are at first link;
3. ``link`` allocates the routine's kernel scratch (counted by :class:`~arrayjit_backends.
   impl.device.ScratchAccount` for ``get_used_memory``), makes each kernel with its fixed
   arguments (every buffer, then every scratch buffer), and returns a run that passes the
   dynamic arguments (the merge buffer, then the static indices) and launches the kernels in
   order on the stream.

A backend is then its device list, allocator, copies, stream queue and events (the rest of
:class:`~arrayjit_backends.impl.device.DeviceBackend`) plus the hooks below.
"""

from __future__ import annotations

import abc
import contextlib
import hashlib
import tempfile
import threading
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from arrayjit_backends.gpu.dialect import GpuSyntax
from arrayjit_backends.gpu.program import GpuKernel, GpuProgram, render_program
from arrayjit_backends.impl.compile_cache import CompileCache
from arrayjit_backends.impl.cpu_compiler import kernel_name
from arrayjit_backends.impl.device import Buf, DeviceBackend, Mem, ScratchAccount
from arrayjit_backends.impl.stream_queue import StreamQueue

if TYPE_CHECKING:
    from arrayjit_backends.impl.cpu_compiler import Run
    from arrayjit_ir.indexing import StaticSymbol
    from arrayjit_ir.optimized import Optimized
    from arrayjit_tnode import Tnode


def keep_failed_source(directory: Path, source: str, suffix: str) -> Path:
    """Write a source that failed to build to ``directory/failed`` (a fresh temporary folder
    where that cannot be made), named by its hash; the path, for the ``CompileError``."""
    name = f"{hashlib.sha256(source.encode()).hexdigest()[:16]}{suffix}"
    try:
        folder = directory / "failed"
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:  # an unusable cache folder must not hide the compile error
        folder = Path(tempfile.mkdtemp(prefix="arrayjit-failed-"))
    path = folder / name
    path.write_text(source)
    return path


@dataclass
class GpuCode:
    """A compiled routine: its rendering, and per device the binary and the loaded module.

    Which devices have a module (or a binary) before the first link is the backend's
    :meth:`GpuDevices.prepare`; the others get theirs the first time the routine is linked on
    them, so a machine with several devices pays the builds of the devices it uses only.
    """

    name: str
    rendered: GpuProgram
    modules: dict[int, Any] = field(default_factory=dict)
    """Device ordinal -> the module (OpenCL program, CUDA module) loaded on that device."""
    binaries: dict[int, bytes] = field(default_factory=dict)
    """Device ordinal -> a binary built by :meth:`GpuDevices.prepare`, not loaded yet."""

    @property
    def source(self) -> str:
        return self.rendered.source


class GpuDevices(DeviceBackend):
    """A device backend whose routines are :class:`GpuCode`: compile, module cache and link.

    Subclasses set :attr:`devices` and call ``super().__init__(renderer)``; they implement the
    driver hooks :meth:`binary_key`, :meth:`build`, :meth:`load`, :meth:`kernel`,
    :meth:`launch_shape`, :meth:`native_queue`, :meth:`launch` and :meth:`buffer_arg`, and
    may override :meth:`absent_merge`, :meth:`on_device` and :meth:`prepare`.
    """

    devices: list[Any]
    """The driver's device objects, by ordinal."""

    most_streams: ClassVar[int] = 4
    """:meth:`suggested_num_streams` for ``most_parallel_streams``."""

    def __init__(self, renderer: GpuSyntax) -> None:
        self.renderer = renderer
        self.cache = CompileCache()
        self.scratch_account = ScratchAccount()
        self._build_lock = threading.Lock()
        self._render_lock = threading.Lock()
        """The renderer keeps the routine it prints (names, locals) on itself: one at a time,
        as the CPU compilers do (two threads compiling on one backend printed each other's
        buffer names)."""

    # ---- hooks ----

    @abc.abstractmethod
    def binary_key(self, code: GpuCode, ordinal: int) -> str:
        """The compile-cache key of ``code``'s binary for device ``ordinal`` (what the binary
        depends on: source, toolchain, options, the device's model)."""

    @abc.abstractmethod
    def build(self, code: GpuCode, ordinal: int) -> bytes:
        """Build ``code``'s source for device ``ordinal``; the binary.

        Raises:
            CompileError: the source does not build (with the toolchain's log).
        """

    @abc.abstractmethod
    def load(self, code: GpuCode, binary: bytes, ordinal: int, from_cache: bool) -> Any:
        """A module of ``binary`` on device ``ordinal``.

        Raises:
            ValueError: ``from_cache`` and the driver rejects the binary (the cache entry is
                then discarded and the source rebuilt).
            CompileError: the driver rejects a binary just built.
        """

    @abc.abstractmethod
    def kernel(self, module: Any, name: str, fixed: list[Any]) -> Any:
        """Kernel ``name`` of ``module`` with its first arguments ``fixed`` (the buffers and
        scratch of one link, as :meth:`buffer_arg` made them); an object for :meth:`launch`."""

    @abc.abstractmethod
    def launch_shape(self, spec: GpuKernel) -> Any:
        """The driver's launch geometry of ``spec`` (computed once per link)."""

    @abc.abstractmethod
    def native_queue(self, queue: StreamQueue) -> Any:
        """The driver's queue (command queue, stream) behind one of :meth:`new_queue`'s."""

    @abc.abstractmethod
    def launch(self, queue: Any, kernel: Any, args: list[Any], shape: Any) -> None:
        """Enqueue ``kernel`` on the native ``queue`` with its dynamic ``args`` after the fixed
        ones (empty: those of its previous launch, if any)."""

    @abc.abstractmethod
    def buffer_arg(self, mem: Mem, offset: int) -> list[Any]:
        """The kernel arguments that pass one buffer: ``offset`` bytes into ``mem``."""

    def absent_merge(self, ordinal: int, scratch: list[Mem]) -> tuple[list[Any], int]:
        """The arguments that stand for a merge buffer a run does not have, and the bytes of
        device memory allocated for them (held by the link, counted as scratch). The default
        passes a buffer at offset 0 of the first scratch buffer, else of a new 1-byte
        allocation (an OpenCL kernel's buffer argument may not be null)."""
        if scratch:
            return self.buffer_arg(scratch[0], 0), 0
        return self.buffer_arg(self.alloc(ordinal, 1), 0), 1

    def on_device(self, ordinal: int) -> AbstractContextManager[None]:
        """What ``link`` runs in (module loads, allocations, kernel lookups): whatever makes
        device ``ordinal`` the driver's current one; nothing by default."""
        return contextlib.nullcontext()

    def prepare(self, code: GpuCode) -> None:
        """What ``compile`` does after rendering: by default, make device 0's module (so a
        source that does not build raises at compile); the other devices' at first link."""
        self.module(code, 0)

    # ---- the recipe ----

    def num_devices(self) -> int:
        return len(self.devices)

    def suggested_num_streams(self, ordinal: int, config: str) -> int:
        fixed = {"only_devices_parallel": 1, "for_parallel_copying": 2}
        return fixed.get(config, self.most_streams)

    def compile(self, optimized: Optimized) -> GpuCode:
        with self._render_lock:
            program = render_program(self.renderer, optimized, kernel_name(optimized.name))
        code = GpuCode(optimized.name, program)
        self.prepare(code)
        return code

    def binary(self, code: GpuCode, ordinal: int) -> bytes:
        """``code``'s binary for device ``ordinal``, from the compile cache or built now, and
        kept on ``code``: :meth:`module` loads it instead of asking the cache again."""
        binary = code.binaries.get(ordinal)
        if binary is None:
            key = self.binary_key(code, ordinal)
            binary = self.cache.get_or_build(key, lambda: self.build(code, ordinal))
            code.binaries[ordinal] = binary
        return binary

    def module(self, code: GpuCode, ordinal: int) -> Any:
        """``code``'s module on device ``ordinal``, made the first time it is asked for.

        Raises:
            CompileError: the source does not build for that device.
        """
        with self._build_lock:
            module = code.modules.get(ordinal)
            if module is None:
                module = code.modules[ordinal] = self._make_module(code, ordinal)
            return module

    def _make_module(self, code: GpuCode, ordinal: int) -> Any:
        binary = code.binaries.get(ordinal)
        if binary is not None:  # built by ``prepare``
            return self.load(code, binary, ordinal, False)
        return self.cache.load_or_build(
            self.binary_key(code, ordinal),
            lambda: self.build(code, ordinal),
            lambda data, from_cache: self.load(code, data, ordinal, from_cache),
        )

    def link(
        self,
        code: Any,
        queue: StreamQueue,
        ordinal: int,
        buffers: Mapping[Tnode, Buf],
        merge_buffer: Callable[[], Buf | None],
        merge_node: Tnode | None,
    ) -> Run:
        c: GpuCode = code
        native = self.native_queue(queue)
        rendered = c.rendered
        with self.on_device(ordinal):
            module = self.module(c, ordinal)
            scratch = [self.alloc(ordinal, nbytes) for _, nbytes in rendered.scratch]
            each = [self.buffer_arg(*buffers[tn]) for tn in rendered.params.buffers]
            each += [self.buffer_arg(mem, 0) for mem in scratch]
            has_merge = rendered.params.merge_node is not None
            symbols = rendered.params.static_symbols
            absent, absent_bytes = self.absent_merge(ordinal, scratch) if has_merge else ([], 0)
            launches = [
                (self.kernel(module, k.name, _taken(each, k)), self.launch_shape(k))
                for k in rendered.kernels
            ]

        def run(bindings: Mapping[StaticSymbol, int]) -> None:
            args: list[Any] = []
            if has_merge:
                where = merge_buffer()
                args += self.buffer_arg(*where) if where else absent
            args += [np.int64(bindings[s]) for s in symbols]
            for kernel, shape in launches:
                self.launch(native, kernel, args, shape)

        run.keep_alive = (scratch, absent, c)  # type: ignore[attr-defined]
        held = sum(max(n, 1) for _, n in rendered.scratch) + absent_bytes
        self.scratch_account.hold(run, ordinal, held)  # freed with the run
        return run

    def scratch_bytes(self, ordinal: int) -> int:
        return self.scratch_account.bytes(ordinal)


def _taken(each: list[list[Any]], kernel: GpuKernel) -> list[Any]:
    """The arguments of the buffers ``kernel`` takes, from each buffer's (``each``)."""
    which = range(len(each)) if kernel.buffers is None else kernel.buffers
    return [arg for k in which for arg in each[k]]


__all__ = ["GpuCode", "GpuDevices", "keep_failed_source"]
