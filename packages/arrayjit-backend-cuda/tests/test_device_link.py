"""``CudaDevices.compile`` and ``link`` without a GPU: the device module imported over a
stand-in ``pycuda.driver`` that records allocations, module loads and launches, and a stand-in
nvcc. It checks what the CUDA side of the shared GPU recipe (``GpuDevices``) hands the driver:
one cubin per device at compile, the module loaded at first link, device pointers with the
buffers' offsets added, a null merge pointer, the static indices, the grid, the stream, and
the kernel scratch counted until the run is dropped."""

from __future__ import annotations

import gc
import threading
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from arrayjit_backend_cuda.renderer import CudaSyntax
from arrayjit_backends.gpu.devices import GpuDevices
from arrayjit_ir import ir, lower, optimize
from arrayjit_ir.indexing import StaticSymbol
from arrayjit_tnode import Tnode


class FakeMem:
    def __init__(self, address: int) -> None:
        self.address = address

    def __int__(self) -> int:
        return self.address


class FakeFunction:
    def __init__(self, name: str, calls: list[Any]) -> None:
        self.name, self.calls = name, calls
        self.format: str | None = None

    def prepare(self, arg_format: str) -> None:
        self.format = arg_format

    def prepared_async_call(self, grid: Any, block: Any, stream: Any, *args: Any) -> None:
        # pycuda packs the arguments by the prepared format: one letter per argument.
        assert self.format is not None and len(self.format) == len(args)
        assert all((f == "P") == isinstance(a, np.uintp) for f, a in zip(self.format, args))
        self.calls.append((self.name, args, block, grid, stream))


class FakeModule:
    def __init__(self, cubin: bytes, calls: list[Any]) -> None:
        self.cubin, self.calls = cubin, calls

    def get_function(self, name: str) -> FakeFunction:
        return FakeFunction(name, self.calls)


class FakeDevice:
    def compute_capability(self) -> tuple[int, int]:
        return (8, 0)


class FakeContext:
    def push(self) -> None:
        pass


@pytest.fixture
def cuda_device(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, device_module_over: Any
) -> Iterator[Any]:
    """A ``CudaDevices`` over one stand-in device, with the module's recorders attached."""
    monkeypatch.setenv("ARRAYJIT_CACHE_DIR", str(tmp_path / "cache"))
    calls: list[Any] = []
    loads: list[bytes] = []
    allocs: list[int] = []

    def module_from_buffer(cubin: bytes) -> FakeModule:
        loads.append(cubin)
        return FakeModule(cubin, calls)

    def mem_alloc(nbytes: int) -> FakeMem:
        allocs.append(nbytes)
        return FakeMem(0x10000 * len(allocs))

    driver = types.ModuleType("pycuda.driver")
    driver.module_from_buffer = module_from_buffer  # type: ignore[attr-defined]
    driver.mem_alloc = mem_alloc  # type: ignore[attr-defined]
    driver.memset_d8 = lambda mem, value, nbytes: None  # type: ignore[attr-defined]
    driver.Stream = lambda: "stream-0"  # type: ignore[attr-defined]
    driver.Context = types.SimpleNamespace(pop=lambda: None)  # type: ignore[attr-defined]
    device = device_module_over(driver)
    builds: list[tuple[str, str]] = []

    def compile_to(source: str, nvcc: str, arch: str, target: str, name: str) -> bytes:
        builds.append((arch, name))
        return f"{target} of {name} for {arch}".encode()

    monkeypatch.setattr(device, "compile_to", compile_to)
    devices = object.__new__(device.CudaDevices)  # no driver to initialize
    GpuDevices.__init__(devices, CudaSyntax(group_size=device.BLOCK))
    devices.devices = [FakeDevice()]
    devices.contexts = [FakeContext()]
    devices.nvcc, devices.nvcc_version = "nvcc", "test"
    devices._local = threading.local()
    devices.recorded = types.SimpleNamespace(calls=calls, loads=loads, allocs=allocs, builds=builds)
    devices.lib = device
    yield devices


def test_compile_builds_a_cubin_and_link_loads_it_once(cuda_device: Any) -> None:
    x = Tnode.create((10,), label="x", hosted=True)
    y = Tnode.create((10,), label="y", hosted=True)
    code = cuda_device.compile(optimize(lower(ir.unop(y, "exp", x)), name="e x"))
    assert cuda_device.recorded.builds == [("sm_80", "aj_e_x")]
    assert code.binaries == {0: b"cubin of aj_e_x for sm_80"} and code.modules == {}
    queue = cuda_device.lib.CudaQueue("cuda:0:0", cuda_device, 0)
    buffers = {x: (FakeMem(0x1000), 16), y: (FakeMem(0x2000), 0)}
    run = cuda_device.link(code, queue, 0, buffers, lambda: None, None)
    cuda_device.link(code, queue, 0, buffers, lambda: None, None)
    assert cuda_device.recorded.loads == [b"cubin of aj_e_x for sm_80"]  # one module, shared
    run({})
    [(name, args, block, grid, stream)] = cuda_device.recorded.calls
    assert name == code.rendered.kernels[0].name and stream == "stream-0"
    pointers = {x: 0x1000 + 16, y: 0x2000}
    taken = code.rendered.kernels[0].buffers  # the kernel's own, in its parameters' order
    assert sorted(taken) == list(range(len(code.rendered.params.buffers)))
    assert list(args) == [pointers[code.rendered.params.buffers[k]] for k in taken]
    assert all(isinstance(a, np.uintp) for a in args)
    assert block == (256, 1, 1) and grid == (1, 1)
    assert cuda_device.scratch_bytes(0) == 0


def test_link_passes_scratch_merge_and_static_indices(cuda_device: Any) -> None:
    i = StaticSymbol("i")
    a = Tnode.create((4, 300), label="a", hosted=True)
    tot = Tnode.create((), label="tot", hosted=True)
    comp = ir.accum(tot, "add", a, spec="ij->")
    code = cuda_device.compile(optimize(lower(comp), name="sum", static_symbols=(i,)))
    rendered = code.rendered
    assert rendered.scratch, "a tree reduction keeps its partials in scratch"
    queue = cuda_device.lib.CudaQueue("cuda:0:0", cuda_device, 0)
    buffers = {a: (FakeMem(0x1000), 8), tot: (FakeMem(0x1000), 4808)}
    run = cuda_device.link(code, queue, 0, buffers, lambda: None, None)
    assert cuda_device.recorded.allocs == [n for _, n in rendered.scratch]
    assert cuda_device.scratch_bytes(0) == sum(max(n, 1) for _, n in rendered.scratch)
    run({i: 3})
    assert [c[0] for c in cuda_device.recorded.calls] == [k.name for k in rendered.kernels]
    scratch = [0x10000 * (k + 1) for k in range(len(rendered.scratch))]
    pointers = {a: 0x1000 + 8, tot: 0x1000 + 4808}
    every = [pointers[tn] for tn in rendered.params.buffers] + scratch
    merge = [0] if rendered.params.merge_node is not None else []
    for (_, args, block, grid, _), k in zip(cuda_device.recorded.calls, rendered.kernels):
        # Each kernel takes the buffers its body names (the partials: both kernels).
        assert k.buffers is not None and len(every) - 1 in k.buffers
        fixed = [every[b] for b in k.buffers]
        assert list(args) == [*fixed, *merge, *[3] * len(rendered.params.static_symbols)]
        assert block == (k.local_size or 256, 1, 1)
        assert grid == (max(1, -(-k.global_size // block[0])), 1)
    del run
    gc.collect()
    assert cuda_device.scratch_bytes(0) == 0


def test_merge_pointer_is_null_until_a_merge_buffer_exists(cuda_device: Any) -> None:
    g = Tnode.create((4,), label="g", hosted=True)
    acc = Tnode.create((4,), label="acc", hosted=True)
    comp = ir.accum(acc, "add", ir.merge_buffer(g), initialize_neutral=False)
    code = cuda_device.compile(optimize(lower(comp), name="use"))
    assert code.rendered.params.merge_node is g
    queue = cuda_device.lib.CudaQueue("cuda:0:0", cuda_device, 0)
    where: list[Any] = [None]
    run = cuda_device.link(code, queue, 0, {acc: (FakeMem(0x1000), 32)}, lambda: where[0], g)
    assert cuda_device.recorded.allocs == [] and cuda_device.scratch_bytes(0) == 0
    run({})
    where[0] = (FakeMem(0x3000), 64)
    run({})
    first, second = cuda_device.recorded.calls
    assert list(first[1]) == [0x1000 + 32, 0] and list(second[1]) == [0x1000 + 32, 0x3000 + 64]
