"""Helpers of the benchmark modules (``conformance/benchmarks``): timing one call the same way
for every implementation, the GPU libraries that give the hand-written baselines, and
``jax.jit`` on the CPU, the compiled baseline of the whole programs."""

from __future__ import annotations

import importlib.util
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

import pytest

HAVE_PYOPENCL = importlib.util.find_spec("pyopencl") is not None
HAVE_CUPY = importlib.util.find_spec("cupy") is not None
HAVE_JAX = importlib.util.find_spec("jax") is not None
JAX_IMPL = "jax.jit (cpu)"
"""The ``impl`` of jax rows: ``arrayjit bench`` reads rows whose impl starts with ``jax`` as
the group's jax baseline (column ``vs jax``)."""

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


SETTLE_S = 0.2
"""Seconds :func:`measure` waits between its warm-up call and the timed rounds."""


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
    # Let other thread pools fall asleep first: numpy's OpenBLAS threads spin for about 0.1 s
    # after a call (a reference check's matmul, the previous row), and while they spin on both
    # cores a parallel row took 3.5x its time (attention on multicore_cc: 0.99 ms against 0.28).
    time.sleep(SETTLE_S)
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


def jax_or_skip() -> Any:
    """jax, where it is installed and has a CPU device (skips the test with the reason
    otherwise: the extra ``jax-baseline`` of arrayjit-conformance installs it)."""
    if not HAVE_JAX:
        pytest.skip("jax is not installed (pip install 'arrayjit-conformance[jax-baseline]')")
    try:
        # The type environment has no jax (and typed jaxlibs need no ignore): both cases pass.
        import jax  # type: ignore[import-not-found, unused-ignore]
    except (ImportError, RuntimeError) as exc:  # a jax without a matching jaxlib, say
        pytest.skip(f"jax is installed but does not import: {exc}")
    try:
        jax.devices("cpu")
    except RuntimeError as exc:  # a jaxlib built without its CPU client, or one that fails
        pytest.skip(f"jax has no CPU device: {exc}")
    return jax


def jax_timed(
    jax: Any,
    fn: Callable[[dict[str, Any]], dict[str, Any]],
    inputs: Mapping[str, Any],
    carried: tuple[str, ...] = (),
) -> Callable[[], dict[str, Any]]:
    """``jax.jit(fn)`` over ``inputs`` (a dict of arrays, placed on jax's CPU device first, so a
    jaxlib that also sees a GPU still runs on the CPU), compiled before this returns: a call of
    the result runs it once, blocks until every output is computed (``jax.block_until_ready``:
    jax dispatches asynchronously) and returns the outputs. ``carried`` names inputs that each
    call replaces with the output of the same name (the parameters of a training step, as in
    ``params = step(params, batch)``)."""
    cpu = jax.devices("cpu")[0]
    state = dict(jax.device_put(dict(inputs), cpu))
    compiled = jax.jit(fn).lower(state).compile()

    def run() -> dict[str, Any]:
        out: dict[str, Any] = jax.block_until_ready(compiled(state))
        for name in carried:
            state[name] = out[name]
        return out

    return run
