"""The helpers every CPU compiler shares (:mod:`arrayjit_backends.impl.cpu_compiler`): kernel
names, native arguments and the compile-cache lookup."""

import ctypes
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from arrayjit_backends.codegen.kernel_plan import KernelParams
from arrayjit_backends.impl.compile_cache import CompileCache
from arrayjit_backends.impl.cpu_compiler import (
    CpuCompiler,
    GetMergeView,
    NativeArgs,
    NodeViews,
    Run,
    kernel_name,
    native_argtypes,
)
from arrayjit_ir.indexing import StaticSymbol
from arrayjit_tnode import CompileError, Tnode


@pytest.mark.parametrize(
    ("routine", "symbol"),
    [
        ("matmul", "aj_matmul"),
        ("grad.step-2", "aj_grad_step_2"),
        ("x 0", "aj_x_0"),
        ("café", "aj_caf_"),  # not ASCII: OpenCL C and older C compilers reject such names
        ("", "aj_"),
    ],
)
def test_kernel_name(routine: str, symbol: str) -> None:
    assert kernel_name(routine) == symbol


def _params(merge: bool, symbols: int) -> tuple[KernelParams, dict[Tnode, np.ndarray]]:
    a = Tnode.create((4,), label="a")
    b = Tnode.create((2,), label="b")
    m = Tnode.create((4,), label="m") if merge else None
    syms = tuple(StaticSymbol(f"i{k}", range=3) for k in range(symbols))
    views = {a: np.zeros(4, np.float32), b: np.zeros(2, np.float32)}
    return KernelParams((a, b), m, syms), views


def test_native_argtypes_order() -> None:
    params, _ = _params(merge=True, symbols=2)
    p, i64 = ctypes.c_void_p, ctypes.c_int64
    assert native_argtypes(params) == [p, p, p, i64, i64]
    assert native_argtypes(params, extra_pointers=2) == [p, p, p, p, p, i64, i64]
    assert native_argtypes(_params(merge=False, symbols=0)[0]) == [p, p]


def test_native_args_fixed_without_merge_or_symbols() -> None:
    params, views = _params(merge=False, symbols=0)
    args = NativeArgs(params, views, lambda: None, [1234])
    ptrs = [v.ctypes.data for v in views.values()]
    assert args.fixed == (*ptrs, 1234)
    assert args({}) == [*ptrs, 1234]


def test_native_args_read_merge_buffer_and_bindings_at_each_run() -> None:
    params, views = _params(merge=True, symbols=2)
    merge: list[np.ndarray | None] = [None]
    args = NativeArgs(params, views, lambda: merge[0], [77])
    assert args.fixed is None
    ptrs = [v.ctypes.data for v in views.values()]
    i0, i1 = params.static_symbols
    assert args({i0: 2, i1: 0}) == [*ptrs, None, 77, 2, 0]
    merge[0] = np.zeros(4, np.float32)
    assert args({i0: 1, i1: 2}) == [*ptrs, merge[0].ctypes.data, 77, 1, 2]


class _Loader(CpuCompiler):
    name = "loader"

    def compile(self, optimized: Any) -> Any:
        return optimized

    def link(self, code: Any, buffers: NodeViews, merge_buffer: GetMergeView) -> Run:
        raise NotImplementedError


def test_load_or_build_reports_a_fresh_artifact_that_does_not_load(tmp_path: Path) -> None:
    def load(data: bytes, from_cache: bool) -> bytes:
        raise ValueError(f"bad bytes {data!r}")

    cache = CompileCache(tmp_path, enabled=True)
    with pytest.raises(CompileError) as info:
        _Loader().load_or_build(cache, "k" * 64, "step", lambda: b"xyz", load)
    assert str(info.value).startswith(
        "loader: the library built for routine step does not load: bad bytes b'xyz'"
    )
    assert cache.builds == 1 and cache.entries() == []  # nothing unloadable is cached


def test_load_or_build_uses_the_cache(tmp_path: Path) -> None:
    cache = CompileCache(tmp_path, enabled=True)
    seen: list[tuple[bytes, bool]] = []

    def load(data: bytes, from_cache: bool) -> bytes:
        seen.append((data, from_cache))
        return data

    compiler = _Loader()
    assert compiler.load_or_build(cache, "a" * 64, "r", lambda: b"obj", load) == b"obj"
    assert compiler.load_or_build(cache, "a" * 64, "r", lambda: b"other", load) == b"obj"
    assert seen == [(b"obj", False), (b"obj", True)]
    assert (cache.builds, cache.hits) == (1, 1)
