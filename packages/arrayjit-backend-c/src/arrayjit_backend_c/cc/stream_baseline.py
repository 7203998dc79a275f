"""The machine's streaming-bandwidth limit, measured by a hand-written STREAM-style baseline.

Not generated code: two fixed C loops (``copy``: ``y[i] = a[i]``; ``triad``: ``y[i] = a[i] +
s * b[i]`` over a range of ``i``), compiled with the backend's own toolchain and flags
(``-O3 -march=native``) and called through ctypes, on all cores (one contiguous range per
thread, run by a :class:`~arrayjit_backend_c.cpu.crew.Crew` as the generated kernels' chunks are)
or on one thread (on a loaded machine, or at cache-resident sizes, one thread can be the
faster: starting a helper thread costs microseconds). The
benchmarks run them next to the generated kernels, on arrays of the same size, so the table can
show each kernel's bytes per second as a fraction of what a plain loop reaches on the same
machine in the same run. Bytes are counted as STREAM does: bytes read plus bytes written (no
write-allocate traffic), 8 per float32 element for copy, 12 for triad.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from arrayjit_backend_c.cc import compiler as cc_compiler
from arrayjit_backend_c.cc import toolchain
from arrayjit_backend_c.cpu.crew import Crew
from arrayjit_backends import settings

SOURCE = """\
#include <stdint.h>
void stream_copy(float *restrict y, const float *restrict a, long start, long stop) {
  for (long i = start; i < stop; i++) y[i] = a[i];
}
void stream_triad(float *restrict y, const float *restrict a, const float *restrict b, float s,
                  long start, long stop) {
  for (long i = start; i < stop; i++) y[i] = a[i] + s * b[i];
}
/* Crew tasks: common = {y, a, b, n, parts}; chunk c of the parts runs its contiguous range. */
void stream_copy_task(const int64_t *common, const int64_t *extra, int64_t c) {
  int64_t n = common[3], parts = common[4];
  stream_copy((float *)(intptr_t)common[0], (const float *)(intptr_t)common[1], n * c / parts,
              n * (c + 1) / parts);
}
void stream_triad_task(const int64_t *common, const int64_t *extra, int64_t c) {
  int64_t n = common[3], parts = common[4];
  stream_triad((float *)(intptr_t)common[0], (const float *)(intptr_t)common[1],
               (const float *)(intptr_t)common[2], 3.0f, n * c / parts, n * (c + 1) / parts);
}
"""

BYTES_PER_ELEMENT = {"copy": 8, "triad": 12}
"""STREAM's count of bytes moved per float32 element: reads plus writes."""


@functools.cache
def _library() -> ctypes.CDLL:
    cc = toolchain.find_compiler()
    if cc is None:
        raise RuntimeError("no C compiler: the streaming baseline cannot be built")
    lib = cc_compiler.load_library(
        toolchain.compile_shared_object(cc, SOURCE, "stream_baseline"), "stream_baseline"
    )
    ptr, long = ctypes.c_void_p, ctypes.c_long
    lib.stream_copy.argtypes = [ptr, ptr, long, long]
    lib.stream_copy.restype = None
    lib.stream_triad.argtypes = [ptr, ptr, ptr, ctypes.c_float, long, long]
    lib.stream_triad.restype = None
    return lib


@functools.cache
def _crew() -> Crew:
    return Crew(settings.num_threads() - 1, "arrayjit-stream")


def _check(*arrays: np.ndarray) -> int:
    n = arrays[0].size
    for arr in arrays:
        if arr.dtype != np.float32 or not arr.flags.c_contiguous or arr.size != n:
            raise ValueError("stream baseline: expected contiguous float32 arrays of one size")
    return n


def kernel(
    name: str, y: np.ndarray, a: np.ndarray, b: np.ndarray, threads: int = 0
) -> Callable[[], None]:
    """A no-argument call of the ``copy`` (``y = a``) or ``triad`` (``y = a + 3 * b``)
    baseline on these arrays (contiguous float32, all of one size), on ``threads`` threads
    (0: all, :func:`~arrayjit_backends.settings.num_threads`).

    Raises:
        ValueError: an unknown name, or arrays that are not contiguous float32 of one size.
        RuntimeError: there is no C compiler.
    """
    n = _check(y, a, b)
    lib = _library()
    py, pa, pb = (arr.ctypes.data for arr in (y, a, b))
    args: tuple[Any, ...]
    if name == "copy":
        fn, args = lib.stream_copy, (py, pa)
    elif name == "triad":
        fn, args = lib.stream_triad, (py, pa, pb, 3.0)
    else:
        raise ValueError(f"stream baseline: unknown kernel {name!r} (copy or triad)")
    team = max(1, min(threads or settings.num_threads(), n))
    if team == 1:
        return lambda: fn(*args, 0, n)
    task = ctypes.cast(getattr(lib, f"stream_{name}_task"), ctypes.c_void_p).value
    assert task is not None
    common = np.array([py, pa, pb, n, team], np.int64)
    crew, at = _crew(), common.ctypes.data

    def run() -> None:
        crew.run(task, at, 0, team, team)

    run.common = common  # type: ignore[attr-defined]  # kept with the call
    return run


__all__ = ["BYTES_PER_ELEMENT", "SOURCE", "kernel"]
