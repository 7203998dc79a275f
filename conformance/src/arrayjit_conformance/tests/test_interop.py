"""Zero-copy exchange through the standard array protocols (ARCHITECTURE.md §4.12).

On CPU backends (the interpreters included) ``Context.array(node)`` aliases the node's buffer
through DLPack and numpy's array interface, ordered after the buffer's writer; an external
array given in ``ctx_arrays`` is a node's buffer without a copy, checked against the node.
On CUDA it exports device memory (DLPack ``kDLCUDA`` and ``__cuda_array_interface__``, ordered
on the device), and imports CuPy's and torch's device arrays as buffers the same two ways (the
producer's pending work ordered before the first use): the round trips run with CuPy and torch
where a GPU and they are present.
Backends whose buffers are device memory no other library reads (OpenCL) refuse both with a
``UsageError`` that says what to do instead.
"""

from __future__ import annotations

import gc
import importlib
import importlib.util
from typing import Any

import numpy as np
import pytest

from arrayjit_backends import CpuDevices
from arrayjit_backends.impl.device import DeviceMemory
from arrayjit_conformance.harness import hosted, new_context
from arrayjit_ir import ir
from arrayjit_tnode import Tnode, UsageError

N = 1 << 12
RNG = np.random.default_rng(37)


def host_memory(backend: Any) -> bool:
    """Whether the backend's buffers are host memory (the CPU backends)."""
    return isinstance(backend.runtime, CpuDevices)


def device_export(backend: Any) -> bool:
    """Whether the backend exports device memory (CUDA) rather than refusing to."""
    return type(backend.runtime).device_pointer is not DeviceMemory.device_pointer


def _host_export_or_skip(backend: Any) -> None:
    if device_export(backend):
        pytest.skip(f"backend {backend.name} exports device memory: see the CuPy and torch tests")
    if not host_memory(backend):
        pytest.skip(f"backend {backend.name} keeps buffers in device memory (no export)")


def _neg_routine(backend: Any, ctx: Any | None = None) -> tuple[Any, Tnode, Tnode, np.ndarray]:
    a, y = hosted((N,), "a"), hosted((N,), "y")
    values = RNG.standard_normal(N).astype(np.float32)
    a.set_values(values)
    code = backend.compile(ir.unop(y, "neg", a), name="neg")
    return backend.link(new_context(backend) if ctx is None else ctx, code), a, y, values


def test_export_aliases_the_buffer(backend: Any) -> None:
    r, a, y, values = _neg_routine(backend)
    r()
    if device_export(backend):  # its values are read back by the CuPy and torch tests below
        exported = r.context.array(y)
        assert exported.__dlpack_device__() == (2, r.context.device.ordinal)
        assert exported.shape == (N,) and exported.dtype == np.float32
        return
    if not host_memory(backend):
        with pytest.raises(UsageError, match=r"to_host.*get_values"):
            r.context.array(y)
        return
    exported = r.context.array(y)
    assert exported.__dlpack_device__() == (1, 0)
    assert exported.shape == (N,) and exported.dtype == np.float32
    via_dlpack = np.from_dlpack(exported)
    via_interface = np.asarray(exported)
    np.testing.assert_array_equal(via_dlpack, -values)
    assert np.shares_memory(via_dlpack, via_interface)
    assert via_dlpack.ctypes.data == via_interface.ctypes.data  # no copy: the buffer itself
    # Taken again after the next run: the same memory, with that run's values.
    a.set_values(values * 2)
    r()
    again = np.asarray(r.context.array(y))
    assert again.ctypes.data == via_dlpack.ctypes.data
    np.testing.assert_array_equal(again, -2 * values)


def test_export_waits_for_the_writer(backend: Any) -> None:
    _host_export_or_skip(backend)
    r, _, y, values = _neg_routine(backend)
    r.context.stream.hold(0.2)  # the run lags (a no-op on sync_ streams)
    r()
    np.testing.assert_array_equal(np.from_dlpack(r.context.array(y)), -values)
    # A consumer taking an export made before a later run waits for that run too.
    exported = r.context.array(y)
    r.context.stream.hold(0.2)
    r()
    np.testing.assert_array_equal(np.asarray(exported), -values)


def test_export_keeps_the_memory_alive(backend: Any) -> None:
    _host_export_or_skip(backend)
    r, _, y, values = _neg_routine(backend)
    r()
    held = np.from_dlpack(r.context.array(y))
    device = r.context.device
    used = backend.get_used_memory(device)
    del r
    gc.collect()
    assert backend.get_used_memory(device) == used  # the context's pools are still held
    np.testing.assert_array_equal(held, -values)
    del held
    gc.collect()
    assert backend.get_used_memory(device) < used  # released with the last consumer


def test_export_refuses_a_stream_and_absent_nodes(backend: Any) -> None:
    _host_export_or_skip(backend)
    r, _, y, _ = _neg_routine(backend)
    r()
    with pytest.raises(BufferError, match="stream=None"):
        r.context.array(y).__dlpack__(stream=1)
    absent = hosted((4,), "absent")
    with pytest.raises(UsageError, match=r"absent.*no buffer"):
        r.context.array(absent)


def test_import_computes_on_the_external_array(backend: Any) -> None:
    stream = backend.new_stream(backend.get_device(0))
    a = Tnode.create((N,), label="a_ext")
    y = Tnode.create((N,), label="y_ext")
    ext_a = RNG.standard_normal(N).astype(np.float32)
    ext_y = np.zeros(N, np.float32)
    if not host_memory(backend):
        with pytest.raises(UsageError, match="device memory"):
            backend.make_context(stream, ctx_arrays={a: ext_a})
        return
    ctx = backend.make_context(stream, ctx_arrays={a: ext_a, y: ext_y})
    r = backend.link(ctx, backend.compile(ir.unop(y, "neg", a), name="neg_ext"))
    r()
    backend.await_stream(stream)
    np.testing.assert_array_equal(ext_y, -ext_a)  # written in place: no copy out
    ext_a[:] = 1.0  # the array is the buffer: the next run reads the new values
    r()
    backend.await_stream(stream)
    np.testing.assert_array_equal(ext_y, -np.ones(N, np.float32))
    # An export of an imported buffer is the array itself.
    assert np.from_dlpack(r.context.array(y)).ctypes.data == ext_y.ctypes.data


def test_import_of_a_hosted_node_keeps_the_array_value(backend: Any) -> None:
    if not host_memory(backend):
        pytest.skip(f"backend {backend.name} keeps buffers in device memory (no import)")
    a, y = hosted((8,), "a"), hosted((8,), "y")
    a.set_values(np.zeros(8))
    ext = np.arange(8, dtype=np.float32)
    ctx = backend.make_context(backend.new_stream(backend.get_device(0)), ctx_arrays={a: ext})
    r = backend.link(ctx, backend.compile(ir.unop(y, "neg", a), name="neg_hosted"))
    r()  # the host array's zeros, set before, are not uploaded over the given array
    assert backend.to_host(r.context, y)
    np.testing.assert_array_equal(y.get_values(), -ext)


def test_import_checks_the_array_against_the_node(backend: Any) -> None:
    if not host_memory(backend):
        pytest.skip(f"backend {backend.name} keeps buffers in device memory (no import)")
    stream = backend.new_stream(backend.get_device(0))
    a = Tnode.create((4, 6), label="a_checked")
    cases = [
        (np.zeros((4, 6), np.float64), r"a_checked.*dtype float32.*float64"),
        (np.zeros((6, 4), np.float32), r"a_checked.*\(4, 6\).*\(6, 4\)"),
        (np.zeros((6, 4), np.float32).T, r"a_checked.*not C-contiguous"),
        (np.zeros(4 * 6 * 4 + 1, np.uint8)[1:].view(np.float32).reshape(4, 6), "address"),
        (object(), r"arrays \(__dlpack__, __array_interface__\)"),
    ]
    for given, message in cases:
        with pytest.raises(UsageError, match=message):
            backend.make_context(stream, ctx_arrays={a: given})


def test_round_trips_with_jax(backend: Any) -> None:
    if importlib.util.find_spec("jax") is None:
        pytest.skip("jax is not installed")
    _host_export_or_skip(backend)
    import jax
    import jax.numpy as jnp

    r, _, y, values = _neg_routine(backend)
    r()
    from_us = jax.dlpack.from_dlpack(r.context.array(y))
    np.testing.assert_array_equal(np.asarray(from_us), -values)
    # A jax array as the input buffer of a routine (jax arrays are read-only: an input only).
    a, z = Tnode.create((N,), label="a_jax"), hosted((N,), "z")
    ctx = backend.make_context(
        backend.new_stream(backend.get_device(0)), ctx_arrays={a: jnp.asarray(-values)}
    )
    r2 = backend.link(ctx, backend.compile(ir.unop(z, "neg", a), name="neg_jax"))
    r2()
    assert backend.to_host(r2.context, z)
    np.testing.assert_array_equal(z.get_values(), values)


# ---- CUDA: CuPy and torch (where a GPU and they are present) ----


def _cuda_export_or_skip(backend: Any, library: str) -> None:
    if not device_export(backend):
        pytest.skip(f"backend {backend.name} does not export device memory (CUDA only)")
    if importlib.util.find_spec(library) is None:
        pytest.skip(f"{library} is not installed")


def _slow_neg(backend: Any) -> tuple[Any, Tnode, Tnode, np.ndarray]:
    """A routine long enough on a GPU (2^24 cells through exp and sin) that a consumer not
    made to wait for it would read its output before it is written."""
    n = 1 << 24
    a, y = hosted((n,), "a_big"), hosted((n,), "y_big")
    t = Tnode.create((n,), label="t_big")
    values = RNG.uniform(-1, 1, n).astype(np.float32)  # exp in [1/e, e]: sin well conditioned
    a.set_values(values)
    comp = ir.block(ir.unop(t, "exp", a), ir.unop(y, "sin", t))
    return backend.link(new_context(backend), backend.compile(comp, name="slow")), a, y, values


def test_round_trips_with_cupy_on_cuda(backend: Any) -> None:
    _cuda_export_or_skip(backend, "cupy")
    import cupy

    r, a, y, values = _slow_neg(backend)
    r()
    exported = r.context.array(y)
    via_interface = cupy.asarray(exported)  # __cuda_array_interface__, its stream the run's
    expected = np.sin(np.exp(values))
    np.testing.assert_allclose(cupy.asnumpy(via_interface), expected, rtol=1e-5, atol=1e-5)
    a.set_values(-values)
    r()  # a new value, not waited for on the host
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        via_dlpack = cupy.from_dlpack(exported)  # CuPy's stream waits for the run
        doubled = via_dlpack * 2  # computed on CuPy's stream, after the wait
        got = cupy.asnumpy(doubled, stream=stream)
    np.testing.assert_allclose(got, 2 * np.sin(np.exp(-values)), rtol=1e-5, atol=2e-5)
    assert via_dlpack.data.ptr == via_interface.data.ptr == exported.address  # no copy
    # The consumer's array keeps the context's memory alive.
    device = r.context.device
    used = backend.get_used_memory(device)
    del r, exported, via_interface
    gc.collect()
    assert backend.get_used_memory(device) == used
    np.testing.assert_allclose(
        cupy.asnumpy(via_dlpack), np.sin(np.exp(-values)), rtol=1e-5, atol=1e-5
    )
    del via_dlpack, doubled
    gc.collect()
    assert backend.get_used_memory(device) < used


def test_round_trips_with_torch_on_cuda(backend: Any) -> None:
    _cuda_export_or_skip(backend, "torch")
    torch: Any = importlib.import_module("torch")  # untyped here: no stubs needed
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    r, a, y, values = _slow_neg(backend)
    r()
    exported = r.context.array(y)
    via_dlpack = torch.from_dlpack(exported)  # torch's current stream waits for the run
    assert via_dlpack.device.type == "cuda" and via_dlpack.data_ptr() == exported.address
    expected = np.sin(np.exp(values))
    np.testing.assert_allclose(via_dlpack.cpu().numpy(), expected, rtol=1e-5, atol=1e-5)
    a.set_values(-values)
    r()
    via_interface = torch.as_tensor(exported, device=f"cuda:{r.context.device.ordinal}")
    assert via_interface.data_ptr() == exported.address  # __cuda_array_interface__: no copy
    np.testing.assert_allclose(
        (via_interface * 2).cpu().numpy(), 2 * np.sin(np.exp(-values)), rtol=1e-5, atol=2e-5
    )
    with pytest.raises(UsageError, match=r"y_big.*ambiguous"):
        exported.__dlpack__(stream=0)


# ---- CUDA import: CuPy and torch arrays as buffers (where a GPU and they are present) ----


def device_import(backend: Any) -> bool:
    """Whether the backend computes on other libraries' device memory (CUDA)."""
    return backend.runtime.dlpack_device(0) is not None


def _cuda_import_or_skip(backend: Any, library: str) -> None:
    if not device_import(backend):
        pytest.skip(f"backend {backend.name} imports no device memory (CUDA only)")
    if importlib.util.find_spec(library) is None:
        pytest.skip(f"{library} is not installed")


class CudaInterfaceOnly:
    """A device array seen only through its CUDA array interface (no DLPack), so that the
    import reads the interface and waits for the stream it names."""

    def __init__(self, arr: Any) -> None:
        self.arr = arr

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        return dict(self.arr.__cuda_array_interface__)


def _neg_of(backend: Any, stream: Any, given_a: Any, given_y: Any, n: int, name: str) -> Any:
    a, y = Tnode.create((n,), label=f"a_{name}"), Tnode.create((n,), label=f"y_{name}")
    ctx = backend.make_context(stream, ctx_arrays={a: given_a, y: given_y})
    return backend.link(ctx, backend.compile(ir.unop(y, "neg", a), name=f"neg_{name}")), y


def test_import_from_cupy_on_cuda(backend: Any) -> None:
    _cuda_import_or_skip(backend, "cupy")
    import cupy

    n = 1 << 24  # long enough on a GPU that a run not ordered after CuPy's would read early
    values = RNG.uniform(-1, 1, n).astype(np.float32)
    expected = -np.sin(np.exp(values))
    stream = backend.new_stream(backend.get_device(0))
    side = cupy.cuda.Stream(non_blocking=True)
    with cupy.cuda.Device(0), side:
        src = cupy.asarray(values)
        # CUDA array interface: its stream is CuPy's, which ours waits for on the device.
        slow, out = cupy.sin(cupy.exp(src)), cupy.zeros(n, cupy.float32)
        r, y = _neg_of(backend, stream, CudaInterfaceOnly(slow), CudaInterfaceOnly(out), n, "cai")
        # DLPack: CuPy makes our stream wait for its own.
        slow2, out2 = cupy.sin(cupy.exp(src)), cupy.zeros(n, cupy.float32)
        r2, y2 = _neg_of(backend, stream, slow2, out2, n, "cupy_dl")
    r()
    r2()
    backend.await_stream(stream)
    np.testing.assert_allclose(cupy.asnumpy(out), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(cupy.asnumpy(out2), expected, rtol=1e-5, atol=1e-5)
    assert r.context.array(y).address == out.data.ptr  # the array is the buffer: no copy
    assert r2.context.array(y2).address == out2.data.ptr
    # The context keeps CuPy's arrays alive: their memory is not reused while it lives.
    del slow, out, slow2, out2, src
    gc.collect()
    with cupy.cuda.Device(0):
        cupy.zeros(4 * n, cupy.float32)  # would take freed memory, were it freed
    r()
    backend.await_stream(stream)
    got = r.context.array(y)
    np.testing.assert_allclose(cupy.asnumpy(cupy.asarray(got)), expected, rtol=1e-5, atol=1e-5)
    a = Tnode.create((n,), label="a_cupy_checked")
    with cupy.cuda.Device(0):
        cases = [
            (cupy.zeros(2 * n, cupy.float32)[::2], r"a_cupy_checked.*not C-contiguous"),
            (cupy.zeros(n, cupy.float64), r"a_cupy_checked.*dtype float32.*float64"),
            (CudaInterfaceOnly(cupy.zeros(n + 1, cupy.float32)), r"\(16777216,\).*16777217"),
        ]
    for given, message in cases:
        with pytest.raises(UsageError, match=message):
            backend.make_context(stream, ctx_arrays={a: given})


def test_import_from_torch_on_cuda(backend: Any) -> None:
    _cuda_import_or_skip(backend, "torch")
    torch: Any = importlib.import_module("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    n = 1 << 24
    values = RNG.uniform(-1, 1, n).astype(np.float32)
    stream = backend.new_stream(backend.get_device(0))
    side = torch.cuda.Stream(device="cuda:0")
    with torch.cuda.stream(side):
        src = torch.from_numpy(values).to("cuda:0")
        slow, out = torch.sin(torch.exp(src)), torch.zeros(n, device="cuda:0")
        # DLPack: torch makes our stream wait for its current one (side).
        r, y = _neg_of(backend, stream, slow, out, n, "torch")
    r()
    backend.await_stream(stream)
    np.testing.assert_allclose(out.cpu().numpy(), -np.sin(np.exp(values)), rtol=1e-5, atol=1e-5)
    assert r.context.array(y).address == out.data_ptr()
    a = Tnode.create((4, 6), label="a_torch_checked")
    cases = [
        (torch.zeros(6, 4, device="cuda:0").T, r"a_torch_checked.*not C-contiguous"),
        (torch.zeros(4, 6, device="cuda:0", dtype=torch.float64), r"dtype float32.*float64"),
        (torch.zeros(4, 6), r"a_torch_checked.*computes on device memory"),  # host memory
    ]
    if torch.cuda.device_count() > 1:
        cases.append((torch.zeros(4, 6, device="cuda:1"), r"DLPack device \(2, 1\)"))
    for given, message in cases:
        with pytest.raises(UsageError, match=message):
            backend.make_context(stream, ctx_arrays={a: given})
