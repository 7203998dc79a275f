"""Helpers of the benchmark modules (``conformance/benchmarks``): timing one call the same way
for every implementation, and the GPU libraries that give the hand-written baselines."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable
from typing import Any

import pytest

HAVE_PYOPENCL = importlib.util.find_spec("pyopencl") is not None
HAVE_CUPY = importlib.util.find_spec("cupy") is not None

QUICK = os.environ.get("ARRAYJIT_BENCH_QUICK", "0") not in ("", "0")
"""A smoke run: the smallest elementwise size only."""
ELEMENTWISE_SIZES = [16] if QUICK else [16, 20, 24]
SUM_SIZES = [20, 24]
MATMUL_SIZES = [256, 1024]
TRANSFER_SIZES = [20, 24]
ROWS = 4096
"""Rows and columns of the row-wise groups (row sum, softmax)."""
FUSED_BYTES = 16
"""Bytes one element of the fused kernel reads and writes: three float32 inputs, one output."""


def elementwise_rounds(k: int) -> int:
    """Rounds for an elementwise group of 2^k elements: 10 at 2^24, more at smaller sizes (at
    most 200), so that each row is timed over tens of milliseconds, not over the few milliseconds
    in which thread pools of the previous test (numba's, numpy's BLAS) may still spin on the
    cores and slow whichever row runs first."""
    return max(10, min(200, (10 << 24) >> k >> 2))


def measure(
    benchmark: Any, fn: Callable[[], Any], impl: str, rounds: int = 10, nbytes: int = 0
) -> None:
    """Time ``fn``; ``nbytes`` (bytes read plus written, as STREAM counts them) makes the table
    show GB/s and the fraction of the measured bandwidth."""
    benchmark.extra_info["impl"] = impl
    if nbytes:
        benchmark.extra_info["bytes"] = nbytes
    fn()  # warm up: first-touch of memory, lazy initialization, kernel compilation
    # A quarter more rounds untimed: on a virtual machine the first runs over freshly mapped
    # buffers (a new context's) take 2-4x the steady time for ten runs or so.
    benchmark.pedantic(fn, rounds=rounds, iterations=1, warmup_rounds=max(1, rounds // 4))


def handwritten(benchmark: Any, backend: str) -> None:
    """Mark the row as a hand-written baseline of ``backend``'s row in its group (a kernel
    written directly against the backend's driver library, or that library's own routine for
    the work): ``arrayjit bench`` prints each backend row's speed relative to the fastest such
    row of its group (column ``vs hand``)."""
    benchmark.extra_info["baseline_of"] = backend


def runner(backend: Any, routine: Any) -> Callable[[], None]:
    """Run ``routine`` and wait for its stream: asynchronous backends are timed for the work,
    not for queueing it."""
    stream = routine.context.stream

    def run() -> None:
        routine()
        backend.await_stream(stream)

    return run


def cl_queue() -> Any:
    """A command queue on the first device of the first OpenCL platform that has one (skips the
    test where none has)."""
    import pyopencl as cl

    for platform in cl.get_platforms():
        devices = platform.get_devices()
        if devices:
            return cl.CommandQueue(cl.Context(devices[:1]))
    pytest.skip("no OpenCL platform")


def cupy_or_skip() -> Any:
    """CuPy, where it is installed and sees a GPU (skips the test otherwise)."""
    if not HAVE_CUPY:
        pytest.skip("cupy is not installed")
    import cupy

    try:
        if cupy.cuda.runtime.getDeviceCount() == 0:
            pytest.skip("cupy sees no GPU")
    except Exception as exc:  # CuPy raises its own runtime-error kinds without a driver
        pytest.skip(f"cupy sees no GPU: {exc}")
    return cupy


def cupy_timed(cupy: Any, fn: Callable[[], Any]) -> Callable[[], None]:
    """``fn`` then a wait for the device: CuPy's calls return before the GPU finishes."""

    def run() -> None:
        fn()
        cupy.cuda.get_current_stream().synchronize()

    return run
