"""Benchmarks: every backend under test next to numpy (and numba where installed), in the same
pytest-benchmark groups, so the table reads as ratios.

Run: ``tox -e bench`` (writes ``bench-results/bench.json``, then prints the table), or
``pytest conformance/benchmarks --benchmark-only [--arrayjit-backend NAME]`` and ``arrayjit bench``.
Each measured call includes waiting for the device (``await_stream``), so asynchronous backends
are timed for the work, not for queueing it.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from arrayjit_backends import CpuDevices, MergeMode, fresh_backend, trace
from arrayjit_conformance.benchmarking import (
    ELEMENTWISE_SIZES,
    FUSED_BYTES,
    HAVE_PYOPENCL,
    MATMUL_SIZES,
    SUM_SIZES,
    TRANSFER_SIZES,
    cl_queue,
    elementwise_rounds,
    handwritten,
    measure,
    runner,
)
from arrayjit_conformance.harness import hosted, new_context
from arrayjit_conformance.plugin import fresh_or_skip
from arrayjit_conformance.workloads import mlp_step_numpy, mlp_training_step, row_centring
from arrayjit_ir import ir
from arrayjit_tnode import Tnode
from arrayjit_tnode import memory_mode as mm

HAVE_NUMBA = importlib.util.find_spec("numba") is not None
RNG = np.random.default_rng(0)


# ---- fused elementwise: relu(a*b + c) ----


def _fused(n: int) -> tuple[Any, tuple[Tnode, ...], tuple[np.ndarray, ...]]:
    a, b, c, y = (hosted((n,), name) for name in ("a", "b", "c", "y"))
    t1, t2 = Tnode.create((n,), label="t1"), Tnode.create((n,), label="t2")
    vals = tuple(RNG.standard_normal(n).astype(np.float32) for _ in range(3))
    for tn, v in zip((a, b, c), vals):
        tn.set_values(v)
    comp = ir.block(ir.binop(t1, "mul", a, b), ir.binop(t2, "add", t1, c), ir.unop(y, "relu", t2))
    return comp, (a, b, c, y), vals


@pytest.mark.parametrize("k", ELEMENTWISE_SIZES)
def test_fused_relu(benchmark: Any, backend: Any, k: int) -> None:
    benchmark.group = f"fused relu(a*b+c) 2^{k} f32"
    comp, (_, _, _, y), vals = _fused(1 << k)
    routine = backend.link(new_context(backend), backend.compile(comp, name="fused"))
    rounds = elementwise_rounds(k)
    measure(benchmark, runner(backend, routine), backend.name, rounds, FUSED_BYTES << k)
    backend.to_host(routine.context, y)
    np.testing.assert_allclose(
        y.get_values(), np.maximum(vals[0] * vals[1] + vals[2], 0), rtol=1e-5, atol=1e-5
    )


@pytest.mark.parametrize("k", ELEMENTWISE_SIZES)
def test_fused_relu_numpy(benchmark: Any, k: int) -> None:
    benchmark.group = f"fused relu(a*b+c) 2^{k} f32"
    a, b, c = (RNG.standard_normal(1 << k).astype(np.float32) for _ in range(3))
    fused = (lambda: np.maximum(a * b + c, 0), "numpy", elementwise_rounds(k), FUSED_BYTES << k)
    measure(benchmark, *fused)


def _numba_fused() -> Any:
    import numba

    @numba.njit(parallel=True, fastmath=False, cache=False)
    def kernel(a: Any, b: Any, c: Any, y: Any) -> None:
        for i in numba.prange(a.shape[0]):
            v = a[i] * b[i] + c[i]
            y[i] = v if v > 0 else 0.0

    return kernel


@pytest.mark.skipif(not HAVE_NUMBA, reason="numba is not installed")
@pytest.mark.parametrize("k", ELEMENTWISE_SIZES)
def test_fused_relu_numba(benchmark: Any, k: int) -> None:
    kernel = _numba_fused()
    benchmark.group = f"fused relu(a*b+c) 2^{k} f32"
    a, b, c = (RNG.standard_normal(1 << k).astype(np.float32) for _ in range(3))
    y = np.empty_like(a)
    rounds = elementwise_rounds(k)
    measure(benchmark, lambda: kernel(a, b, c, y), "numba prange", rounds, FUSED_BYTES << k)


HAVE_CC = importlib.util.find_spec("arrayjit_backend_c") is not None


@pytest.mark.skipif(not HAVE_CC, reason="arrayjit-backend-c is not installed")
@pytest.mark.parametrize("threads", [0, 1])
@pytest.mark.parametrize("kind", ["copy", "triad"])
@pytest.mark.parametrize("k", ELEMENTWISE_SIZES)
def test_stream_baseline(benchmark: Any, k: int, kind: str, threads: int) -> None:
    """The machine's own limit in the same run: a hand-written STREAM-style C loop (not
    generated code) on arrays of the group's size, on all cores and on one thread; the table
    shows each row's GB/s as a fraction of the fastest of the four."""
    from arrayjit_backend_c.cc import stream_baseline, toolchain

    if toolchain.find_compiler() is None:
        pytest.skip("no C compiler")
    benchmark.group = f"fused relu(a*b+c) 2^{k} f32"
    benchmark.extra_info["bandwidth_baseline"] = True
    a, b = (RNG.standard_normal(1 << k).astype(np.float32) for _ in range(2))
    y = np.empty_like(a)
    nbytes = stream_baseline.BYTES_PER_ELEMENT[kind] << k
    measure(
        benchmark,
        stream_baseline.kernel(kind, y, a, b, threads),
        f"C STREAM {kind}{', 1 thread' if threads else ''} (bandwidth)",
        elementwise_rounds(k),
        nbytes,
    )
    np.testing.assert_array_equal(y, a if kind == "copy" else a + np.float32(3) * b)


# ---- the same, called every 2 ms from a Python loop, idle and next to a busy process ----

PACED_K = 20
PACE_S = 0.002
LOADS = ["idle", "busy"]


@pytest.fixture
def load(request: pytest.FixtureRequest) -> Iterator[str]:
    """``busy``: another process spinning on one core for the duration of the benchmark (a
    shared laptop or CI box), started and stopped here; ``idle``: nothing else."""
    if request.param == "idle":
        yield "idle"
        return
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.1)  # let it take its core
        yield "busy"
    finally:
        busy.kill()
        busy.wait()


def _paced(benchmark: Any, fn: Callable[[], Any], impl: str, load: str) -> None:
    """Rounds 2 ms apart (untimed sleeps): team threads go idle between calls, as in a
    training loop, so wake-ups and wait policies count."""
    benchmark.group = f"fused relu(a*b+c) 2^{PACED_K} f32 every 2 ms, {load}"
    benchmark.extra_info["impl"] = impl
    fn()
    benchmark.pedantic(
        fn, setup=lambda: time.sleep(PACE_S), rounds=100, iterations=1, warmup_rounds=5
    )


@pytest.mark.parametrize("load", LOADS, indirect=True)
def test_fused_relu_paced(benchmark: Any, backend: Any, load: str) -> None:
    comp, (_, _, _, y), vals = _fused(1 << PACED_K)
    routine = backend.link(new_context(backend), backend.compile(comp, name="fused"))
    _paced(benchmark, runner(backend, routine), backend.name, load)
    backend.to_host(routine.context, y)
    np.testing.assert_allclose(
        y.get_values(), np.maximum(vals[0] * vals[1] + vals[2], 0), rtol=1e-5, atol=1e-5
    )


@pytest.mark.parametrize("load", LOADS, indirect=True)
def test_fused_relu_paced_numpy(benchmark: Any, load: str) -> None:
    a, b, c = (RNG.standard_normal(1 << PACED_K).astype(np.float32) for _ in range(3))
    _paced(benchmark, lambda: np.maximum(a * b + c, 0), "numpy", load)


@pytest.mark.skipif(not HAVE_NUMBA, reason="numba is not installed")
@pytest.mark.parametrize("load", LOADS, indirect=True)
def test_fused_relu_paced_numba(benchmark: Any, load: str) -> None:
    kernel = _numba_fused()
    a, b, c = (RNG.standard_normal(1 << PACED_K).astype(np.float32) for _ in range(3))
    y = np.empty_like(a)
    _paced(benchmark, lambda: kernel(a, b, c, y), "numba prange", load)


@pytest.mark.skipif(not HAVE_PYOPENCL, reason="pyopencl is not installed")
@pytest.mark.parametrize("k", ELEMENTWISE_SIZES)
def test_fused_relu_pyopencl_array(benchmark: Any, k: int) -> None:
    """The same three operations with pyopencl.array: one kernel each, unfused."""
    import pyopencl.array as cla

    benchmark.group = f"fused relu(a*b+c) 2^{k} f32"
    queue = cl_queue()
    a, b, c = (cla.to_device(queue, RNG.standard_normal(1 << k).astype(np.float32)) for _ in "abc")
    zero = cla.zeros(queue, 1 << k, np.float32)

    def run() -> None:
        cla.maximum(a * b + c, zero)
        queue.finish()

    measure(benchmark, run, "pyopencl.array")


@pytest.mark.skipif(not HAVE_PYOPENCL, reason="pyopencl is not installed")
def test_launch_overhead_raw_pyopencl(benchmark: Any) -> None:
    """A raw pyopencl launch of a one-cell kernel, synchronized, for the opencl row."""
    import pyopencl as cl

    benchmark.group = "launch overhead (tiny routine, synchronized)"
    queue = cl_queue()
    prg = cl.Program(queue.context, "__kernel void k(__global float* x) { x[0] = 1.0f; }").build()
    buf = cl.Buffer(queue.context, cl.mem_flags.READ_WRITE, 4)
    kernel = cl.Kernel(prg, "k")
    kernel.set_arg(0, buf)

    def run() -> None:
        cl.enqueue_nd_range_kernel(queue, kernel, (1,), None)
        queue.finish()

    benchmark.extra_info["impl"] = "raw pyopencl"
    handwritten(benchmark, "opencl")
    benchmark.pedantic(run, rounds=2000, iterations=1, warmup_rounds=100)


# ---- two streams of one device against one stream ----

TWO_STREAM_SIZES = [18, 20]


@pytest.mark.parametrize("streams", [1, 2])
@pytest.mark.parametrize("k", TWO_STREAM_SIZES)
def test_two_streams(benchmark: Any, backend: Any, k: int, streams: int) -> None:
    """Two routines (each its own fused relu(a*b+c) on arrays of its own) run many times
    without waiting, on two streams of one device or both on one stream. The one-stream row is
    the two-stream row's baseline: its ``vs hand`` column is one stream's time over two
    streams', the throughput gained by the second stream."""
    if not backend.name.startswith("multicore_"):
        pytest.skip(f"{backend.name}: no worker thread per stream to run two at once")
    runs = max(4, (1 << 22) >> k)
    benchmark.group = (
        f"two streams vs one: fused relu(a*b+c) 2^{k} f32, {runs} runs of each of two routines"
        " (vs hand: one stream's time / two streams')"
    )
    device = backend.get_device(0)
    shared = backend.new_stream(device)
    outputs, routines = [], []
    for _ in range(2):
        comp, (_, _, _, y), vals = _fused(1 << k)
        stream = shared if streams == 1 else backend.new_stream(device)
        routine = backend.link(backend.make_context(stream), backend.compile(comp, name="fused"))
        routines.append(routine)
        outputs.append((routine.context, y, np.maximum(vals[0] * vals[1] + vals[2], 0)))
    waits = [shared] if streams == 1 else [r.context.stream for r in routines]

    def run() -> None:
        for _ in range(runs):
            for routine in routines:
                routine()
        for stream in waits:
            backend.await_stream(stream)

    if streams == 1:
        handwritten(benchmark, backend.name)
    impl = f"{backend.name}, one stream" if streams == 1 else backend.name
    measure(benchmark, run, impl, rounds=20)
    for context, y, want in outputs:
        assert backend.to_host(context, y)
        np.testing.assert_allclose(y.get_values(), want, rtol=1e-5, atol=1e-5)


# ---- reductions ----


@pytest.mark.parametrize("k", SUM_SIZES)
def test_sum(benchmark: Any, backend: Any, k: int) -> None:
    benchmark.group = f"sum 2^{k} f32"
    x, s = hosted((1 << k,), "x"), hosted((), "s")
    vx = RNG.uniform(0, 1, 1 << k).astype(np.float32)
    x.set_values(vx)
    routine = backend.link(
        new_context(backend), backend.compile(ir.accum(s, "add", x, spec="i->"), name="sum")
    )
    measure(benchmark, runner(backend, routine), backend.name, nbytes=4 << k)
    backend.to_host(routine.context, s)
    np.testing.assert_allclose(s.get_values(), vx.sum(dtype=np.float64), rtol=1e-3)


@pytest.mark.parametrize("k", SUM_SIZES)
def test_sum_numpy(benchmark: Any, k: int) -> None:
    benchmark.group = f"sum 2^{k} f32"
    x = RNG.uniform(0, 1, 1 << k).astype(np.float32)
    measure(benchmark, lambda: x.sum(), "numpy", nbytes=4 << k)


# ---- matmul ----


def matmul_rounds(n: int) -> int:
    """5 rounds of a 1024 matmul (tens of milliseconds each), 50 of smaller ones."""
    return 5 if n >= 1024 else 50


MLP_ROUNDS = 30
"""Rounds of an MLP training step (1-3 ms on the CPU backends): 5 left the order of the rows
to chance on a shared machine."""


@pytest.mark.parametrize("n", MATMUL_SIZES)
def test_matmul(benchmark: Any, backend: Any, n: int) -> None:
    benchmark.group = f"matmul {n}x{n} f32"
    x, w, h = hosted((n, n), "x"), hosted((n, n), "w"), hosted((n, n), "h")
    vx, vw = (RNG.standard_normal((n, n)).astype(np.float32) for _ in range(2))
    x.set_values(vx)
    w.set_values(vw)
    comp = ir.accum(h, "add", x, w, op="mul", spec="ik,kj->ij")
    routine = backend.link(new_context(backend), backend.compile(comp, name="matmul"))
    benchmark.extra_info["flops"] = 2 * n**3
    measure(benchmark, runner(backend, routine), backend.name, matmul_rounds(n))
    backend.to_host(routine.context, h)
    np.testing.assert_allclose(h.get_values(), vx @ vw, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("n", MATMUL_SIZES)
def test_matmul_numpy(benchmark: Any, n: int) -> None:
    benchmark.group = f"matmul {n}x{n} f32"
    x, w = (RNG.standard_normal((n, n)).astype(np.float32) for _ in range(2))
    benchmark.extra_info["flops"] = 2 * n**3
    measure(benchmark, lambda: x @ w, "numpy", matmul_rounds(n))


# ---- whole programs: row centring, one-routine MLP training step ----

CENTRING_N = 1024
MLP_BENCH_DIMS = (256, 784, 128, 10)


def test_row_centring(benchmark: Any, backend: Any) -> None:
    """``y = x - rowmean(x)``: the row sums must be computed once per row, not per cell."""
    n = CENTRING_N
    benchmark.group = f"row centring {n}x{n} f32"
    built = row_centring(n, n, seed=7)
    built.set_host_values()
    routine = backend.link(new_context(backend), backend.compile(built.comp, name="centre"))
    measure(benchmark, runner(backend, routine), backend.name)
    y = built.tns["y"]
    backend.to_host(routine.context, y)
    x = built.values["x"]
    np.testing.assert_allclose(y.get_values(), x - x.mean(1, keepdims=True), rtol=1e-4, atol=1e-4)


def test_row_centring_numpy(benchmark: Any) -> None:
    n = CENTRING_N
    benchmark.group = f"row centring {n}x{n} f32"
    x = RNG.uniform(-2, 2, (n, n)).astype(np.float32)
    measure(benchmark, lambda: x - x.mean(1, keepdims=True), "numpy")


def _mlp_group() -> str:
    b, i, h, o = MLP_BENCH_DIMS
    return f"MLP training step (one routine) batch {b}, {i}-{h}-{o} f32"


def test_mlp_training_step(benchmark: Any, backend: Any) -> None:
    """Forward, MSE loss, backward and the in-place SGD update of a 784-128-10 MLP in one
    routine; the first step is checked against numpy before timing."""
    benchmark.group = _mlp_group()
    built = mlp_training_step("mse", MLP_BENCH_DIMS, lr=0.01)
    built.set_host_values()
    routine = backend.link(new_context(backend), backend.compile(built.comp, name="train"))
    run = runner(backend, routine)
    run()
    want = mlp_step_numpy("mse")(dict(built.values))
    for name in ("loss", "w2", "b1"):
        backend.to_host(routine.context, built.tns[name])
        np.testing.assert_allclose(
            built.tns[name].get_values(), want[name], rtol=2e-3, atol=2e-4, err_msg=name
        )
    measure(benchmark, run, backend.name, MLP_ROUNDS)


def test_mlp_training_step_numpy(benchmark: Any) -> None:
    benchmark.group = _mlp_group()
    b, i, h, o = MLP_BENCH_DIMS
    rng = np.random.default_rng(8)
    x, t = (rng.uniform(-1, 1, s).astype(np.float32) for s in ((b, i), (b, o)))
    w1 = (rng.uniform(-1.2, 1.2, (i, h)) / np.sqrt(i)).astype(np.float32)
    w2 = (rng.uniform(-1.2, 1.2, (h, o)) / np.sqrt(h)).astype(np.float32)
    b1, b2 = np.zeros(h, np.float32), np.zeros(o, np.float32)
    lr, loss = np.float32(0.01), np.zeros((), np.float32)

    def step() -> None:
        z = x @ w1 + b1
        hh = np.maximum(z, 0)
        d = hh @ w2 + b2 - t
        loss[()] = 0.5 * (d * d).sum() / b
        dy = d / np.float32(b)
        dz = np.where(z > 0, dy @ w2.T, np.float32(0))
        # In place, as the routine does.
        np.subtract(w2, lr * (hh.T @ dy), out=w2)
        np.subtract(b2, lr * dy.sum(0), out=b2)
        np.subtract(w1, lr * (x.T @ dz), out=w1)
        np.subtract(b1, lr * dz.sum(0), out=b1)

    measure(benchmark, step, "numpy", MLP_ROUNDS)


# ---- transfers ----


@pytest.mark.parametrize("k", TRANSFER_SIZES)
def test_host_to_device(benchmark: Any, backend: Any, k: int) -> None:
    benchmark.group = f"host->device 2^{k} f32"
    x, y = hosted((1 << k,), "x"), hosted((), "y")
    x.set_values(RNG.standard_normal(1 << k))
    code = backend.compile(ir.accum(y, "max", x, spec="i->"), name="use")
    ctx = backend.link(new_context(backend), code).context

    def upload() -> None:
        x.devices_not_lagging_host.clear()  # force the copy
        backend.from_host(ctx, x)
        backend.await_stream(ctx.stream)

    benchmark.extra_info["bytes"] = 4 << k
    measure(benchmark, upload, backend.name)


@pytest.mark.parametrize("k", TRANSFER_SIZES)
def test_host_to_host_numpy(benchmark: Any, k: int) -> None:
    benchmark.group = f"host->device 2^{k} f32"
    src = RNG.standard_normal(1 << k).astype(np.float32)
    dst = np.empty_like(src)
    benchmark.extra_info["bytes"] = 4 << k
    measure(benchmark, lambda: np.copyto(dst, src), "numpy")


@pytest.mark.parametrize("k", TRANSFER_SIZES)
def test_device_to_device(benchmark: Any, backend: Any, k: int) -> None:
    benchmark.group = f"device_to_device 2^{k} f32"
    n = 1 << k
    g = Tnode.create((n,), label="g", memory_mode=(mm.Materialized(), 1))
    dev = backend.get_device(0)
    s1, s2 = backend.new_stream(dev), backend.new_stream(dev)
    fill = backend.compile(ir.fetch(g, ir.Constant(1.0)), name="fill")
    src = backend.link(backend.make_context(s1), fill)
    dst = backend.link(backend.make_context(s2), fill)
    src()
    dst()

    def copy() -> None:
        backend.device_to_device(g, MergeMode.No, dst.context, src.context)
        backend.await_stream(s2)

    benchmark.extra_info["bytes"] = 4 * n
    measure(benchmark, copy, backend.name)


@pytest.mark.parametrize("k", TRANSFER_SIZES)
def test_device_to_device_numpy(benchmark: Any, k: int) -> None:
    benchmark.group = f"device_to_device 2^{k} f32"
    src = np.ones(1 << k, np.float32)
    dst = np.empty_like(src)
    benchmark.extra_info["bytes"] = 4 << k
    measure(benchmark, lambda: np.copyto(dst, src), "numpy")


# ---- export (DLPack, array interface) ----

EXPORT_LOG2 = 24


def test_export_dlpack(benchmark: Any, backend: Any) -> None:
    benchmark.group = f"export 2^{EXPORT_LOG2} f32 (DLPack, no copy)"
    if not isinstance(backend.runtime, CpuDevices):
        pytest.skip(f"backend {backend.name} keeps buffers in device memory (no export)")
    n = 1 << EXPORT_LOG2
    x, y = hosted((n,), "x"), hosted((n,), "y")
    x.set_values(RNG.standard_normal(n))
    routine = backend.link(new_context(backend), backend.compile(ir.unop(y, "neg", x), name="neg"))
    routine()
    backend.await_stream(routine.context.stream)
    ctx = routine.context
    measure(benchmark, lambda: np.from_dlpack(ctx.array(y)), backend.name, rounds=200)


def test_export_copy_numpy(benchmark: Any) -> None:
    benchmark.group = f"export 2^{EXPORT_LOG2} f32 (DLPack, no copy)"
    src = RNG.standard_normal(1 << EXPORT_LOG2).astype(np.float32)
    benchmark.extra_info["bytes"] = 8 << EXPORT_LOG2
    measure(benchmark, src.copy, "numpy")


# ---- launch overhead ----


def test_launch_overhead(benchmark: Any, backend: Any) -> None:
    benchmark.group = "launch overhead (tiny routine, synchronized)"
    x = Tnode.create((1,), label="x", memory_mode=(mm.Materialized(), 1))
    routine = backend.link(
        new_context(backend), backend.compile(ir.fetch(x, ir.Constant(1.0)), name="tiny")
    )
    run = runner(backend, routine)
    benchmark.extra_info["impl"] = backend.name
    benchmark.pedantic(run, rounds=2000, iterations=1, warmup_rounds=100)


def test_launch_overhead_traced(benchmark: Any, backend: Any, tmp_path: Any) -> None:
    """The row above with tracing on (``arrayjit_backends.trace``): the two rows' ratio is what
    recording a routine's run costs (the issue's target: at most 5%)."""
    benchmark.group = "launch overhead (tiny routine, synchronized)"
    x = Tnode.create((1,), label="x", memory_mode=(mm.Materialized(), 1))
    routine = backend.link(
        new_context(backend), backend.compile(ir.fetch(x, ir.Constant(1.0)), name="tiny")
    )
    run = runner(backend, routine)
    benchmark.extra_info["impl"] = f"{backend.name} traced"
    with trace(tmp_path / "trace.json") as tracer:
        benchmark.pedantic(run, rounds=2000, iterations=1, warmup_rounds=100)
    runs = [e for e in tracer.events() if e["name"] == "routine tiny"]
    assert len(runs) == 2100  # every run was recorded


def test_launch_overhead_numpy(benchmark: Any) -> None:
    benchmark.group = "launch overhead (tiny routine, synchronized)"
    x = np.zeros(1, np.float32)
    benchmark.extra_info["impl"] = "numpy"
    benchmark.pedantic(lambda: x.fill(1.0), rounds=2000, iterations=1, warmup_rounds=100)


# ---- compile latency ----


def _small_comp() -> Any:
    a, b, c, y = (hosted((1000,), n) for n in ("a", "b", "c", "y"))
    t = Tnode.create((1000,), label="t")
    return ir.block(ir.binop(t, "mul", a, b), ir.binop(y, "add", t, c))


def test_compile_cold(benchmark: Any, backend_name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fresh cache directory every round: the native compiler runs each time."""
    benchmark.group = "compile latency (small routine)"
    be = fresh_or_skip(backend_name)

    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        monkeypatch.setenv("ARRAYJIT_CACHE_DIR", tempfile.mkdtemp(prefix="aj-bench-"))
        fresh = fresh_backend(backend_name)
        return (fresh, _small_comp()), {}

    benchmark.extra_info["impl"] = f"{backend_name} cold"
    benchmark.pedantic(lambda fb, comp: fb.compile(comp, name="small"), setup=setup, rounds=8)
    be.finalize()


def test_compile_cached(benchmark: Any, backend: Any) -> None:
    benchmark.group = "compile latency (small routine)"
    comp = _small_comp()
    backend.compile(comp, name="small")
    benchmark.extra_info["impl"] = f"{backend.name} cached"
    benchmark.pedantic(lambda: backend.compile(comp, name="small"), rounds=20, warmup_rounds=1)


def test_numpy_baseline_for_compile(benchmark: Any) -> None:
    """numpy compiles nothing: its row is the same computation run once, for scale."""
    benchmark.group = "compile latency (small routine)"
    a, b, c = (np.ones(1000, np.float32) for _ in range(3))
    measure(benchmark, lambda: a * b + c, "numpy", rounds=200)


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc (Linux)")
def test_link_run_cycles_memory(benchmark: Any, backend: Any) -> None:
    """10,000 link-and-run cycles of a small routine: resident memory must grow < 20 MB."""
    import gc

    benchmark.group = "10k link+run cycles (small routine)"
    a, y = hosted((256,), "a"), hosted((256,), "y")
    a.set_values(np.arange(256.0))
    code = backend.compile(ir.unop(y, "neg", a), name="cycle")
    parent = new_context(backend)

    def cycles(count: int) -> None:
        for _ in range(count):
            r = backend.link(parent, code)
            r()
        backend.await_stream(parent.stream)

    # Warm-up at full size: on multicore schedulers the caller runs ahead of the stream, and the
    # peak backlog of queued runs stays with the allocator (measured: no growth after it).
    cycles(10_000)
    gc.collect()
    before = _rss_bytes()
    benchmark.extra_info["impl"] = backend.name
    benchmark.pedantic(cycles, args=(10_000,), rounds=1, iterations=1)
    gc.collect()
    growth = _rss_bytes() - before
    benchmark.extra_info["rss_growth_mb"] = growth / 2**20
    assert growth < 20 * 2**20, f"resident memory grew by {growth / 2**20:.1f} MB"
