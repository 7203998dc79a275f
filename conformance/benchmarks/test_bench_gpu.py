"""Row-wise work (row sums, softmax over rows) next to numpy, and the hand-written GPU baselines
of every GPU-shaped group: kernels written by hand in pyopencl (OpenCL; PoCL in CI) and CuPy
(CUDA: cuBLAS matmul, CUB reductions, an ``ElementwiseKernel``, a device copy as the bandwidth
limit), in the same pytest-benchmark groups as ``test_bench.py``, so ``arrayjit bench`` prints
each backend's ratio to them. Rows whose library is missing skip with the reason."""

from __future__ import annotations

import importlib.util
from typing import Any

import numpy as np
import pytest

from arrayjit_conformance.benchmarking import (
    ELEMENTWISE_SIZES,
    FUSED_BYTES,
    HAVE_PYOPENCL,
    MATMUL_SIZES,
    ROWS,
    SUM_SIZES,
    TRANSFER_SIZES,
    cl_queue,
    cupy_or_skip,
    cupy_timed,
    handwritten,
    measure,
    runner,
)
from arrayjit_conformance.harness import hosted, new_context
from arrayjit_conformance.workloads import softmax_rows
from arrayjit_ir import ir

RNG = np.random.default_rng(1)
ROW_GROUP = f"row sum {ROWS}x{ROWS} f32"
SOFTMAX_GROUP = f"softmax over rows {ROWS}x{ROWS} f32"


def _rows() -> np.ndarray:
    return RNG.uniform(-4, 4, (ROWS, ROWS)).astype(np.float32)


def _softmax_np(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


# ---- row sums ----


def test_row_sum(benchmark: Any, backend: Any) -> None:
    benchmark.group = ROW_GROUP
    vx = _rows()
    x, s = hosted(vx.shape, "x"), hosted((ROWS,), "s")
    x.set_values(vx)
    code = backend.compile(ir.accum(s, "add", x, spec="ij->i"), name="row_sum")
    routine = backend.link(new_context(backend), code)
    measure(benchmark, runner(backend, routine), backend.name, nbytes=vx.nbytes)
    backend.to_host(routine.context, s)
    np.testing.assert_allclose(s.get_values(), vx.sum(1, dtype=np.float64), rtol=1e-4, atol=1e-3)


def test_row_sum_numpy(benchmark: Any) -> None:
    benchmark.group = ROW_GROUP
    vx = _rows()
    measure(benchmark, lambda: vx.sum(1), "numpy", nbytes=vx.nbytes)


_ROW_SUM_CL = """
__kernel void per_item(__global const float *x, __global float *s, const int n) {
    const int r = get_global_id(0);
    float acc = 0.0f;
    for (int j = 0; j < n; ++j) acc += x[(long)r * n + j];
    s[r] = acc;
}

__kernel void per_group(__global const float *x, __global float *s, const int n,
                        __local float *part) {
    const int r = get_group_id(0), l = get_local_id(0), lanes = get_local_size(0);
    float acc = 0.0f;
    for (int j = l; j < n; j += lanes) acc += x[(long)r * n + j];
    part[l] = acc;
    for (int step = lanes / 2; step > 0; step /= 2) {
        barrier(CLK_LOCAL_MEM_FENCE);
        if (l < step) part[l] += part[l + step];
    }
    if (l == 0) s[r] = part[0];
}
"""


@pytest.mark.skipif(not HAVE_PYOPENCL, reason="pyopencl is not installed")
@pytest.mark.parametrize("shape", ["work item per row", "work-group per row"])
def test_row_sum_pyopencl(benchmark: Any, shape: str) -> None:
    """The two hand-written shapes of the issue: the renderer may pick either by device."""
    import pyopencl as cl
    import pyopencl.array as cla

    benchmark.group = ROW_GROUP
    queue = cl_queue()
    vx = _rows()
    x, s = cla.to_device(queue, vx), cla.empty(queue, ROWS, np.float32)
    prg = cl.Program(queue.context, _ROW_SUM_CL).build()
    n = np.int32(ROWS)
    if shape == "work item per row":
        kernel = prg.per_item
        kernel.set_args(x.data, s.data, n)
        glob, local = (ROWS,), None
    else:
        lanes = min(256, queue.device.max_work_group_size)
        kernel = prg.per_group
        kernel.set_args(x.data, s.data, n, cl.LocalMemory(4 * lanes))
        glob, local = (ROWS * lanes,), (lanes,)

    def run() -> None:
        cl.enqueue_nd_range_kernel(queue, kernel, glob, local)
        queue.finish()

    handwritten(benchmark, "opencl")
    measure(benchmark, run, f"pyopencl, {shape}", nbytes=vx.nbytes)
    np.testing.assert_allclose(s.get(), vx.sum(1, dtype=np.float64), rtol=1e-4, atol=1e-3)


def test_row_sum_cupy(benchmark: Any) -> None:
    cp = cupy_or_skip()
    benchmark.group = ROW_GROUP
    vx = _rows()
    x = cp.asarray(vx)
    handwritten(benchmark, "cuda")
    measure(benchmark, cupy_timed(cp, lambda: x.sum(1)), "cupy", nbytes=vx.nbytes)


# ---- softmax over rows ----


@pytest.mark.parametrize("kernel_local", [False, True], ids=["e persisted", "e kernel-local"])
def test_softmax(benchmark: Any, backend: Any, kernel_local: bool) -> None:
    """Max, exp, sum and divide over each row, as users write it (five assignments). As
    written, ``e`` is persisted (``On_device``), so the kernel also writes it: three passes of
    memory where the group counts two. The second row declares the temporaries kernel-local
    (``softmax_rows(kernel_local=True)``): one read of ``x``, one write of ``y``."""
    benchmark.group = SOFTMAX_GROUP
    vx = _rows()
    x, y = hosted(vx.shape, "x"), hosted(vx.shape, "y")
    x.set_values(vx)
    comp = softmax_rows(x, y, kernel_local=kernel_local)
    routine = backend.link(new_context(backend), backend.compile(comp, name="softmax"))
    impl = f"{backend.name}, e kernel-local" if kernel_local else backend.name
    measure(benchmark, runner(backend, routine), impl, nbytes=2 * vx.nbytes)
    backend.to_host(routine.context, y)
    np.testing.assert_allclose(y.get_values(), _softmax_np(vx), rtol=1e-4, atol=1e-7)


def test_softmax_numpy(benchmark: Any) -> None:
    benchmark.group = SOFTMAX_GROUP
    vx = _rows()
    measure(benchmark, lambda: _softmax_np(vx), "numpy", nbytes=2 * vx.nbytes)


def test_softmax_cupy(benchmark: Any) -> None:
    cp = cupy_or_skip()
    benchmark.group = SOFTMAX_GROUP
    vx = _rows()
    x = cp.asarray(vx)

    def softmax() -> Any:
        e = cp.exp(x - x.max(1, keepdims=True))
        return e / e.sum(1, keepdims=True)

    handwritten(benchmark, "cuda")
    measure(benchmark, cupy_timed(cp, softmax), "cupy (composed)", nbytes=2 * vx.nbytes)


# ---- pyopencl rows of the groups of test_bench.py ----

_FUSED_CL = """
__kernel void fused(__global const float *a, __global const float *b, __global const float *c,
                    __global float *y) {
    const int i = get_global_id(0);
    y[i] = fmax(a[i] * b[i] + c[i], 0.0f);
}

__kernel void fused4(__global const float4 *a, __global const float4 *b,
                     __global const float4 *c, __global float4 *y) {
    const int i = get_global_id(0);
    y[i] = fmax(a[i] * b[i] + c[i], (float4)(0.0f));
}
"""


@pytest.mark.skipif(not HAVE_PYOPENCL, reason="pyopencl is not installed")
@pytest.mark.parametrize("width", [1, 4])
@pytest.mark.parametrize("k", ELEMENTWISE_SIZES)
def test_fused_relu_pyopencl(benchmark: Any, k: int, width: int) -> None:
    """The fused kernel as a user writes it in OpenCL: a work item per element (``width`` 1),
    or per four elements through ``float4`` (``width`` 4); the driver picks the group size."""
    import pyopencl as cl
    import pyopencl.array as cla

    benchmark.group = f"fused relu(a*b+c) 2^{k} f32"
    queue = cl_queue()
    vals = [RNG.standard_normal(1 << k).astype(np.float32) for _ in "abc"]
    a, b, c = (cla.to_device(queue, v) for v in vals)
    y = cla.empty(queue, 1 << k, np.float32)
    prg = cl.Program(queue.context, _FUSED_CL).build()
    kernel = prg.fused if width == 1 else prg.fused4
    kernel.set_args(a.data, b.data, c.data, y.data)

    def run() -> None:
        cl.enqueue_nd_range_kernel(queue, kernel, ((1 << k) // width,), None)
        queue.finish()

    handwritten(benchmark, "opencl")
    label = "pyopencl kernel" if width == 1 else "pyopencl kernel, float4"
    measure(benchmark, run, label, nbytes=FUSED_BYTES << k)
    want = np.maximum(vals[0] * vals[1] + vals[2], 0)
    np.testing.assert_allclose(y.get(), want, rtol=1e-5, atol=1e-5)


_SUM_CL = """
__kernel void partial_sums(__global const float *x, __global float *out, const int n,
                           __local float *part) {
    const int l = get_local_id(0), lanes = get_local_size(0);
    float acc = 0.0f;
    for (int i = get_global_id(0); i < n; i += get_global_size(0)) acc += x[i];
    part[l] = acc;
    for (int step = lanes / 2; step > 0; step /= 2) {
        barrier(CLK_LOCAL_MEM_FENCE);
        if (l < step) part[l] += part[l + step];
    }
    if (l == 0) out[get_group_id(0)] = part[0];
}
"""


@pytest.mark.skipif(not HAVE_PYOPENCL, reason="pyopencl is not installed")
@pytest.mark.parametrize("how", ["pyopencl.array.sum", "pyopencl kernel, two stages"])
@pytest.mark.parametrize("k", SUM_SIZES)
def test_sum_pyopencl(benchmark: Any, k: int, how: str) -> None:
    """The full sum with pyopencl's own reduction (``pyopencl.array.sum``), and as a user writes
    it by hand: 1024 groups of 256 work items (fewer on small devices) each reducing a strided
    share, then one group adding the partials."""
    import pyopencl as cl
    import pyopencl.array as cla

    benchmark.group = f"sum 2^{k} f32"
    queue = cl_queue()
    vx = RNG.uniform(0, 1, 1 << k).astype(np.float32)
    x = cla.to_device(queue, vx)
    result: list[Any] = []
    if how == "pyopencl.array.sum":
        if importlib.util.find_spec("mako") is None:
            pytest.skip("pyopencl.array.sum needs mako (its reduction kernels are templates)")

        def run() -> None:
            result[:] = [cla.sum(x, queue=queue)]
            queue.finish()

    else:
        lanes = min(256, queue.device.max_work_group_size)
        groups = 1024
        parts, total = cla.empty(queue, groups, np.float32), cla.empty(queue, 1, np.float32)
        prg = cl.Program(queue.context, _SUM_CL).build()
        # Two kernel objects of one function: each keeps its own arguments.
        first: Any = cl.Kernel(prg, "partial_sums")
        second: Any = cl.Kernel(prg, "partial_sums")
        first.set_args(x.data, parts.data, np.int32(1 << k), cl.LocalMemory(4 * lanes))
        second.set_args(parts.data, total.data, np.int32(groups), cl.LocalMemory(4 * lanes))

        def run() -> None:
            cl.enqueue_nd_range_kernel(queue, first, (groups * lanes,), (lanes,))
            cl.enqueue_nd_range_kernel(queue, second, (lanes,), (lanes,))
            queue.finish()

        result[:] = [total]
    handwritten(benchmark, "opencl")
    measure(benchmark, run, how, nbytes=4 << k)
    np.testing.assert_allclose(result[0].get(), vx.sum(dtype=np.float64), rtol=1e-3)


# ---- CuPy rows of the groups of test_bench.py ----


def _cupy_copy(benchmark: Any, group: str, n: int) -> None:
    """A device-to-device copy of ``n`` float32 (read plus write): the bandwidth limit."""
    cp = cupy_or_skip()
    benchmark.group = group
    benchmark.extra_info["bandwidth_baseline"] = True
    src, dst = cp.ones(n, cp.float32), cp.empty(n, cp.float32)
    measure(
        benchmark,
        cupy_timed(cp, lambda: cp.copyto(dst, src)),
        "cupy copy (bandwidth)",
        nbytes=8 * n,
    )


@pytest.mark.parametrize("k", ELEMENTWISE_SIZES)
def test_fused_relu_cupy(benchmark: Any, k: int) -> None:
    cp = cupy_or_skip()
    benchmark.group = f"fused relu(a*b+c) 2^{k} f32"
    kernel = cp.ElementwiseKernel(
        "float32 a, float32 b, float32 c", "float32 y", "y = fmaxf(a * b + c, 0.0f)", "aj_fused"
    )
    a, b, c = (cp.asarray(RNG.standard_normal(1 << k).astype(np.float32)) for _ in "abc")
    y = cp.empty_like(a)
    handwritten(benchmark, "cuda")
    measure(
        benchmark,
        cupy_timed(cp, lambda: kernel(a, b, c, y)),
        "cupy ElementwiseKernel",
        nbytes=FUSED_BYTES << k,
    )


@pytest.mark.parametrize("k", ELEMENTWISE_SIZES)
def test_fused_relu_bandwidth_cupy(benchmark: Any, k: int) -> None:
    _cupy_copy(benchmark, f"fused relu(a*b+c) 2^{k} f32", 1 << k)


def test_row_wise_bandwidth_cupy(benchmark: Any) -> None:
    _cupy_copy(benchmark, ROW_GROUP, ROWS * ROWS)


def test_softmax_bandwidth_cupy(benchmark: Any) -> None:
    _cupy_copy(benchmark, SOFTMAX_GROUP, ROWS * ROWS)


@pytest.mark.parametrize("k", SUM_SIZES)
def test_sum_cupy(benchmark: Any, k: int) -> None:
    cp = cupy_or_skip()
    benchmark.group = f"sum 2^{k} f32"
    x = cp.asarray(RNG.uniform(0, 1, 1 << k).astype(np.float32))
    handwritten(benchmark, "cuda")
    measure(benchmark, cupy_timed(cp, lambda: x.sum()), "cupy", nbytes=4 << k)


@pytest.mark.parametrize("n", MATMUL_SIZES)
def test_matmul_cupy(benchmark: Any, n: int) -> None:
    """cuBLAS SGEMM (CuPy keeps float32 math unless CUPY_TF32 is set)."""
    cp = cupy_or_skip()
    benchmark.group = f"matmul {n}x{n} f32"
    x, w = (cp.asarray(RNG.standard_normal((n, n)).astype(np.float32)) for _ in "xw")
    benchmark.extra_info["flops"] = 2 * n**3
    handwritten(benchmark, "cuda")
    measure(benchmark, cupy_timed(cp, lambda: x @ w), "cupy (cuBLAS)", rounds=20)


@pytest.mark.parametrize("k", TRANSFER_SIZES)
def test_device_to_device_cupy(benchmark: Any, k: int) -> None:
    cp = cupy_or_skip()
    benchmark.group = f"device_to_device 2^{k} f32"
    src, dst = cp.ones(1 << k, cp.float32), cp.empty(1 << k, cp.float32)
    handwritten(benchmark, "cuda")
    measure(benchmark, cupy_timed(cp, lambda: cp.copyto(dst, src)), "cupy", nbytes=4 << k)


def test_launch_overhead_cupy(benchmark: Any) -> None:
    """A one-cell CuPy kernel launch, synchronized, for the cuda row."""
    cp = cupy_or_skip()
    benchmark.group = "launch overhead (tiny routine, synchronized)"
    x = cp.zeros(1, cp.float32)
    handwritten(benchmark, "cuda")
    benchmark.extra_info["impl"] = "cupy"
    benchmark.pedantic(
        cupy_timed(cp, lambda: x.fill(1.0)), rounds=2000, iterations=1, warmup_rounds=100
    )
