"""Measure the opencl backend against pyopencl.array, multicore_cc and raw pyopencl launches.

Run from the repository root::

    .venv/bin/python packages/arrayjit-backend-opencl/bench_opencl.py [--log2n 24] [--repeat 7]

Prints, for fused ``relu(a * b + c)`` on ``2**log2n`` float32 values:

- ``opencl``: one arrayjit routine (one fused kernel) on the first OpenCL platform;
- ``pyopencl.array``: ``a * b + c`` then ``maximum(..., 0)`` on the same device (three kernels,
  two temporaries);
- ``multicore_cc``: the same arrayjit routine on the C backend;

and the launch overhead of a one-cell routine (``routine()`` then waiting for its stream)
against a raw ``enqueue_nd_range_kernel`` of the very same kernel object followed by
``queue.finish()``; also the cost of enqueueing alone (no wait). Every timing is the median of
``--repeat`` runs after a warm-up; inputs are on the device before timing starts.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pyopencl as cl
import pyopencl.array as cla

from arrayjit_backends import fresh_backend
from arrayjit_ir import ir
from arrayjit_tnode import Tnode


def median_time(fn: Callable[[], Any], repeat: int, inner: int = 1) -> float:
    """Median seconds of one call of ``fn`` (each sample averages ``inner`` calls)."""
    fn()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter() - start) / inner)
    return statistics.median(samples)


def fused_routine(backend: Any, n: int, values: dict[str, np.ndarray]) -> Callable[[], None]:
    """A linked routine computing ``y = relu(a * b + c)``; returns a synchronized runner."""
    a, b, c = (Tnode.create((n,), label=x, hosted=True) for x in "abc")
    y = Tnode.create((n,), label="y", hosted=True)
    for tn in (a, b, c):
        tn.set_values(values[tn.label[-1]])
    ab, abc = Tnode.create((n,), label="ab"), Tnode.create((n,), label="abc")
    # ab and abc become virtual: one kernel computes each cell of y from a, b and c.
    comp = ir.block(ir.binop(ab, "mul", a, b), ir.binop(abc, "add", ab, c), ir.unop(y, "relu", abc))
    routine = backend.link(
        backend.make_context(backend.new_stream(backend.get_device(0))),
        backend.compile(comp, name="fused_relu"),
    )
    stream = routine.context.stream

    def run() -> None:
        routine()
        backend.await_stream(stream)

    run()
    backend.to_host(routine.context, y)
    expected = np.maximum(values["a"] * values["b"] + values["c"], 0)
    np.testing.assert_allclose(y.get_values(), expected, rtol=1e-5, atol=1e-6)
    return run


def pyopencl_array_runner(n: int, values: dict[str, np.ndarray]) -> Callable[[], None]:
    ctx = cl.Context(cl.get_platforms()[0].get_devices())
    queue = cl.CommandQueue(ctx)
    a, b, c = (cla.to_device(queue, values[x]) for x in "abc")

    def run() -> None:
        cla.maximum(a * b + c, np.float32(0)).finish()

    run()
    got = cla.maximum(a * b + c, np.float32(0)).get()
    np.testing.assert_allclose(got, np.maximum(values["a"] * values["b"] + values["c"], 0))
    return run


def launch_overhead(backend: Any, repeat: int) -> dict[str, float]:
    """Seconds per call of a one-cell routine and of the raw pyopencl launch of its kernel."""
    x = Tnode.create((1,), label="x", hosted=True)
    y = Tnode.create((1,), label="y", hosted=True)
    x.set_values(np.ones(1))
    compiled = backend.compile(ir.unop(y, "neg", x), name="tiny")
    routine = backend.link(
        backend.make_context(backend.new_stream(backend.get_device(0))), compiled
    )
    stream = routine.context.stream
    code = compiled.native
    assert len(code.rendered.kernels) == 1
    runtime = backend.runtime
    ctx_bufs = routine.context
    queue = cl.CommandQueue(runtime.context, runtime.devices[0])
    kernel = cl.Kernel(code.program, code.rendered.kernels[0].name)
    for pos, tn in enumerate(code.rendered.params.buffers):
        mem, off = ctx_bufs.buf(tn)
        kernel.set_arg(2 * pos, mem)
        kernel.set_arg(2 * pos + 1, np.uint64(off))

    def arrayjit_sync() -> None:
        routine()
        backend.await_stream(stream)

    def raw_sync() -> None:
        cl.enqueue_nd_range_kernel(queue, kernel, (1,), (1,))
        queue.finish()

    def arrayjit_enqueue() -> None:
        routine()

    def raw_enqueue() -> None:
        cl.enqueue_nd_range_kernel(queue, kernel, (1,), (1,))

    inner = 200
    result = {
        "arrayjit_sync": median_time(arrayjit_sync, repeat, inner),
        "raw_sync": median_time(raw_sync, repeat, inner),
        "arrayjit_enqueue": median_time(arrayjit_enqueue, repeat, inner),
        "raw_enqueue": median_time(raw_enqueue, repeat, inner),
    }
    backend.await_stream(stream)
    queue.finish()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log2n", type=int, default=24)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    n = 1 << args.log2n
    rng = np.random.default_rng(0)
    values = {x: rng.standard_normal(n).astype(np.float32) for x in "abc"}

    opencl = fresh_backend("opencl")
    opencl.initialize()
    cc = fresh_backend("multicore_cc")
    cc.initialize()
    device = opencl.runtime.devices[0]
    print(
        f"device: {device.name} ({opencl.runtime.platform.name} {opencl.runtime.platform.version})"
    )
    print(f"fused relu(a*b+c), n = 2**{args.log2n} float32, median of {args.repeat}:")
    times = {
        "opencl": median_time(fused_routine(opencl, n, values), args.repeat),
        "pyopencl.array": median_time(pyopencl_array_runner(n, values), args.repeat),
        "multicore_cc": median_time(fused_routine(cc, n, values), args.repeat),
    }
    gbytes = 16 * n / 1e9  # three inputs read, one output written
    for name, t in times.items():
        ratio = t / times["opencl"]
        print(
            f"  {name:15s} {t * 1e3:9.2f} ms  {gbytes / t:7.2f} GB/s  {ratio:5.2f}x opencl's time"
        )
    print("launch overhead of a one-cell routine (per call):")
    lo = launch_overhead(opencl, args.repeat)
    print(
        f"  synchronized: arrayjit {lo['arrayjit_sync'] * 1e6:8.1f} us, raw pyopencl "
        f"{lo['raw_sync'] * 1e6:8.1f} us ({lo['arrayjit_sync'] / lo['raw_sync']:.2f}x)"
    )
    print(
        f"  enqueue only: arrayjit {lo['arrayjit_enqueue'] * 1e6:8.1f} us, raw pyopencl "
        f"{lo['raw_enqueue'] * 1e6:8.1f} us ({lo['arrayjit_enqueue'] / lo['raw_enqueue']:.2f}x)"
    )
    opencl.finalize()
    cc.finalize()


if __name__ == "__main__":
    main()
