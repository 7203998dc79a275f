"""Convolution benchmarks: a 3x3, stride-1, "same" convolution over NHWC images (batch 32,
32x32, 64 -> 64 channels), its two gradients and a 2x2 max pooling, written with affine axis
expressions, next to numpy (the windows gathered into one matrix, then one matmul: im2col) and,
where jax is installed, ``jax.lax.conv_general_dilated`` (and its gradients,
``lax.reduce_window``) under ``jax.jit`` on the CPU, in the same pytest-benchmark groups.

Run: ``pytest conformance/benchmarks/test_bench_conv.py --benchmark-only [--arrayjit-backend
NAME]`` (``tox -e bench`` runs it with the others). Each group's rows count the same FLOPs
(``extra_info["flops"]``: two per multiply-add of the direct convolution), so the table shows
GFLOP/s; ``test_blas`` times numpy's matmul of each group's GEMM shape with the im2col matrix
already built (the machine's BLAS at the same FLOPs).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from arrayjit_conformance.benchmarking import measure, runner
from arrayjit_conformance.convolution import (
    ConvShape,
    conv_input_grad_numpy,
    conv_weight_grad_numpy,
    im2col_conv_numpy,
)
from arrayjit_conformance.harness import hosted, new_context
from arrayjit_ir import ir
from arrayjit_tnode import Padding

HAVE_JAX = importlib.util.find_spec("jax") is not None
SHAPE = ConvShape(32, (32, 32), 64, 64, (3, 3), (1, 1), (1, 1), ((1, 1), (1, 1)))
"""The convolution of every group: batch 32, 32x32 images, 64 -> 64 channels, 3x3, "same"."""
FLOPS = 2 * SHAPE.batch * 32 * 32 * 9 * SHAPE.channels * SHAPE.out_channels
POOL = ConvShape(32, (32, 32), 64, 64, (2, 2), (2, 2), (1, 1), ((0, 0), (0, 0)))
ROUNDS = 10
RNG = np.random.default_rng(36)
X = RNG.standard_normal(SHAPE.x_dims).astype(np.float32)
W = (RNG.standard_normal(SHAPE.w_dims) / np.sqrt(9 * 64)).astype(np.float32)
DY = RNG.standard_normal(SHAPE.y_dims).astype(np.float32)

GROUPS = {
    "forward": "conv2d 3x3 fwd NHWC 32x32x32 64->64 f32",
    "input_grad": "conv2d 3x3 input grad NHWC 32x32x32 64->64 f32",
    "weight_grad": "conv2d 3x3 weight grad NHWC 32x32x32 64->64 f32",
    "pool": "max pool 2x2/2 NHWC 32x32x32x64 f32",
}


def _routine(backend: Any, comp: Any, name: str) -> Any:
    return backend.link(new_context(backend), backend.compile(comp, name=name))


def test_conv_forward(benchmark: Any, backend: Any) -> None:
    benchmark.group = GROUPS["forward"]
    benchmark.extra_info["flops"] = FLOPS
    x = hosted(SHAPE.x_dims, "x", padding=Padding(SHAPE.padding_axes, 0.0))
    w, y = hosted(SHAPE.w_dims, "w"), hosted(SHAPE.y_dims, "y")
    x.set_values(X)
    w.set_values(W)
    comp = ir.accum(y, "add", x, w, op="mul", spec=SHAPE.forward_spec())
    routine = _routine(backend, comp, "conv")
    measure(benchmark, runner(backend, routine), backend.name, ROUNDS)
    backend.to_host(routine.context, y)
    np.testing.assert_allclose(y.get_values(), im2col_conv_numpy(X, W, SHAPE), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("form", ["scatter", "gather"])
def test_conv_input_grad(benchmark: Any, backend: Any, form: str) -> None:
    """``scatter``: the result indexed by the window, ``"bhwd,ijcd->b(h+i-1)(w+j-1)c"`` (as
    written from the forward spec); ``gather``: ``dy`` padded by one cell on each side and the
    kernel flipped, ``"b(h-i+1)(w-j+1)d,ijcd->bhwc"`` (one plain output cell per loop point)."""
    benchmark.group = GROUPS["input_grad"]
    benchmark.extra_info["flops"] = FLOPS
    w = hosted(SHAPE.w_dims, "w")
    if form == "scatter":
        dy = hosted(SHAPE.y_dims, "dy")
        dx = hosted(SHAPE.x_dims, "dx", padding=Padding(SHAPE.padding_axes, 0.0))
        spec = SHAPE.input_grad_spec()
    else:
        dy = hosted(SHAPE.y_dims, "dy", padding=Padding(SHAPE.padding_axes, 0.0))
        dx = hosted(SHAPE.x_dims, "dx")
        spec = "b(h-i+1)(w-j+1)d,ijcd->bhwc"
    dy.set_values(DY)
    w.set_values(W)
    routine = _routine(backend, ir.accum(dx, "add", dy, w, op="mul", spec=spec), "dconv")
    measure(benchmark, runner(backend, routine), f"{backend.name} ({form})", ROUNDS)
    backend.to_host(routine.context, dx)
    want = conv_input_grad_numpy(DY, W, SHAPE)
    np.testing.assert_allclose(dx.get_values(), want, rtol=1e-3, atol=1e-3)


def test_conv_weight_grad(benchmark: Any, backend: Any) -> None:
    benchmark.group = GROUPS["weight_grad"]
    benchmark.extra_info["flops"] = FLOPS
    x = hosted(SHAPE.x_dims, "x", padding=Padding(SHAPE.padding_axes, 0.0))
    dy, dw = hosted(SHAPE.y_dims, "dy"), hosted(SHAPE.w_dims, "dw")
    x.set_values(X)
    dy.set_values(DY)
    comp = ir.accum(dw, "add", x, dy, op="mul", spec=SHAPE.weight_grad_spec())
    routine = _routine(backend, comp, "wconv")
    measure(benchmark, runner(backend, routine), backend.name, ROUNDS)
    backend.to_host(routine.context, dw)
    want = conv_weight_grad_numpy(X, DY, SHAPE)
    np.testing.assert_allclose(dw.get_values(), want, rtol=1e-3, atol=2e-2)


def test_max_pool(benchmark: Any, backend: Any) -> None:
    benchmark.group = GROUPS["pool"]
    x, p = hosted(POOL.x_dims, "x"), hosted(POOL.pool_dims, "p")
    x.set_values(X)
    comp = ir.accum(p, "max", x, spec=POOL.pool_spec(), sizes=POOL.pool_sizes())
    routine = _routine(backend, comp, "pool")
    measure(benchmark, runner(backend, routine), backend.name, ROUNDS, X.nbytes * 5 // 4)
    backend.to_host(routine.context, p)
    np.testing.assert_array_equal(p.get_values(), X.reshape(32, 16, 2, 16, 2, 64).max(axis=(2, 4)))


# ---- numpy: im2col + matmul ----


def _im2col(xp: np.ndarray) -> np.ndarray:
    """``(batch * 32 * 32, 9 * channels)``: each output cell's 3x3 window of the padded input."""
    windows = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(1, 2))
    return windows.transpose(0, 1, 2, 4, 5, 3).reshape(-1, 9 * SHAPE.channels)


def _numpy_input_grad() -> np.ndarray:
    """col2im: the gradient of the window matrix (``dy @ w^T``), added back window by window."""
    dcols = (DY.reshape(-1, 64) @ W.reshape(-1, 64).T).reshape(32, 32, 32, 3, 3, 64)
    dxp = np.zeros((32, 34, 34, 64), np.float32)
    for i in range(3):
        for j in range(3):
            dxp[:, i : i + 32, j : j + 32] += dcols[:, :, :, i, j]
    return dxp[:, 1:33, 1:33]


NUMPY: dict[str, Callable[[], Any]] = {
    "forward": lambda: im2col_conv_numpy(X, W, SHAPE),
    "input_grad": _numpy_input_grad,
    "weight_grad": lambda: (_im2col(np.pad(X, SHAPE.padding_axes)).T @ DY.reshape(-1, 64)).reshape(
        SHAPE.w_dims
    ),
    "pool": lambda: X.reshape(32, 16, 2, 16, 2, 64).max(axis=(2, 4)),
}


@pytest.mark.parametrize("what", list(GROUPS))
def test_numpy(benchmark: Any, what: str) -> None:
    benchmark.group = GROUPS[what]
    if what != "pool":
        benchmark.extra_info["flops"] = FLOPS
    nbytes = X.nbytes * 5 // 4 if what == "pool" else 0
    measure(benchmark, NUMPY[what], "numpy (im2col + matmul)", ROUNDS, nbytes)


# ---- the machine's BLAS at the same FLOPs: the GEMM of each group, operands given ----

GEMMS = {
    # (rows, steps, columns) of the implicit GEMM each group is
    "forward": (SHAPE.batch * 32 * 32, 9 * SHAPE.channels, SHAPE.out_channels),
    "input_grad": (SHAPE.batch * 32 * 32, 9 * SHAPE.out_channels, SHAPE.channels),
    "weight_grad": (9 * SHAPE.channels, SHAPE.batch * 32 * 32, SHAPE.out_channels),
}


@pytest.mark.parametrize("what", list(GEMMS))
def test_blas(benchmark: Any, what: str) -> None:
    """numpy's matmul (its BLAS) of the group's GEMM shape, the im2col matrix already built:
    the rate the issue's ">= 50% of BLAS GFLOP/s at the same FLOPs" compares with."""
    benchmark.group = GROUPS[what]
    benchmark.extra_info["flops"] = FLOPS
    m, k, n = GEMMS[what]
    a = RNG.standard_normal((m, k)).astype(np.float32)
    b = RNG.standard_normal((k, n)).astype(np.float32)
    measure(benchmark, lambda: a @ b, "numpy BLAS matmul, same FLOPs", ROUNDS)


# ---- jax.lax under jax.jit, on the CPU ----


def _jax_functions() -> dict[str, Callable[[], Any]]:
    import jax
    import jax.numpy as jnp
    from jax import lax

    cpu = jax.devices("cpu")[0]
    x, w, dy = (jax.device_put(a, cpu) for a in (X, W, DY))
    dims = ("NHWC", "HWIO", "NHWC")

    def conv(x: Any, w: Any) -> Any:
        return lax.conv_general_dilated(x, w, (1, 1), ((1, 1), (1, 1)), dimension_numbers=dims)

    def input_grad(dy: Any, w: Any) -> Any:
        return jax.vjp(lambda x: conv(x, w), x)[1](dy)[0]

    def weight_grad(x: Any, dy: Any) -> Any:
        return jax.vjp(lambda w: conv(x, w), w)[1](dy)[0]

    def pool(x: Any) -> Any:
        return lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")

    fwd, dgrad, wgrad, mp = (jax.jit(f) for f in (conv, input_grad, weight_grad, pool))
    return {
        "forward": lambda: fwd(x, w).block_until_ready(),
        "input_grad": lambda: dgrad(dy, w).block_until_ready(),
        "weight_grad": lambda: wgrad(x, dy).block_until_ready(),
        "pool": lambda: mp(x).block_until_ready(),
    }


@pytest.mark.skipif(not HAVE_JAX, reason="jax is not installed")
@pytest.mark.parametrize("what", list(GROUPS))
def test_jax(benchmark: Any, what: str) -> None:
    benchmark.group = GROUPS[what]
    if what != "pool":
        benchmark.extra_info["flops"] = FLOPS
    fn = _jax_functions()[what]
    want = np.asarray(fn())
    np.testing.assert_allclose(want, np.asarray(NUMPY[what]()), rtol=1e-3, atol=2e-2)
    nbytes = X.nbytes * 5 // 4 if what == "pool" else 0
    measure(benchmark, fn, "jax.jit (lax, CPU)", ROUNDS, nbytes)
