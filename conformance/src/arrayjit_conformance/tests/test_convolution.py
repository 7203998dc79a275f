"""Convolutions and pooling written with affine axis expressions, on every backend.

Random convolutions (1-D and 2-D, strides 1-3, dilations 1-2, paddings 0-2 on either side, odd
sizes, size-1 and empty axes): the forward pass, both gradients and a max pooling of one padded
input, in one block, against plain numpy (``arrayjit_conformance.convolution``: one kernel
offset at a time over a padded copy) and against the oracle. The gradient specs are checked
against finite differences of the forward pass too; chains (a pointwise node the optimizer may
inline read through a window, a pooling of a convolution, a padded intermediate written by one
routine and read by another) and a convolution large enough for threads and GPU grids.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from arrayjit_conformance.convolution import (
    ConvShape,
    conv_input_grad_numpy,
    conv_numpy,
    conv_weight_grad_numpy,
    pool_numpy,
)
from arrayjit_conformance.harness import (
    assert_close,
    check_against_numpy,
    hosted,
    new_context,
    on_interpreter,
    require_precs,
    run_once,
)
from arrayjit_ir import ir
from arrayjit_tnode import Padding, Tnode


def random_shape(seed: int) -> ConvShape:
    """A random convolution: rank 1 or 2, stride 1-3, dilation 1-2, margins 0-2, kernel 1-3,
    odd and even sizes; every fifth case has an empty axis (batch, channels or spatial), and
    size-1 axes come up often."""
    rng = np.random.default_rng(seed)
    rank = 1 + seed % 2
    kernel = tuple(int(k) for k in rng.integers(1, 4, rank))
    stride = tuple(int(s) for s in rng.integers(1, 4, rank))
    dilation = tuple(int(d) for d in rng.integers(1, 3, rank))
    pads = tuple((int(lo), int(hi)) for lo, hi in rng.integers(0, 3, (rank, 2)))
    spatial = tuple(
        max(1, d * (k - 1) + 1 - lo - hi) + int(rng.integers(0, 6))
        for k, d, (lo, hi) in zip(kernel, dilation, pads)
    )
    batch, channels, out_channels = (int(n) for n in rng.integers(1, 4, 3))
    if seed % 5 == 4:
        which = seed // 5 % 3
        if which == 0:
            batch = 0
        elif which == 1:
            channels = 0
        else:
            spatial = (0, *spatial[1:])
    return ConvShape(batch, spatial, channels, out_channels, kernel, stride, dilation, pads)


SEEDS = list(range(30))


@pytest.mark.parametrize("seed", SEEDS)
def test_random_convolution_forward_gradients_and_pooling(backend: Any, seed: int) -> None:
    shape = random_shape(seed)
    rng = np.random.default_rng(1000 + seed)
    # Half the cases declare zero margins (the pooling then sees zeros there); the other half
    # leave the value unset, so the convolution fills the margins with 0 and the pooling with
    # -inf before reading them.
    value = 0.0 if seed % 2 else None
    x = hosted(shape.x_dims, "x", padding=Padding(shape.padding_axes, value))
    w, dy = hosted(shape.w_dims, "w"), hosted(shape.y_dims, "dy")
    y, dw, p = hosted(shape.y_dims, "y"), hosted(shape.w_dims, "dw"), hosted(shape.pool_dims, "p")
    dx = hosted(shape.x_dims, "dx", padding=Padding(shape.padding_axes, 0.0))
    comp = ir.block(
        ir.accum(y, "add", x, w, op="mul", spec=shape.forward_spec()),
        ir.accum(p, "max", x, spec=shape.pool_spec(), sizes=shape.pool_sizes()),
        ir.accum(dx, "add", dy, w, op="mul", spec=shape.input_grad_spec()),
        ir.accum(dw, "add", x, dy, op="mul", spec=shape.weight_grad_spec()),
    )
    vx, vw, vdy = (rng.uniform(-2, 2, d) for d in (shape.x_dims, shape.w_dims, shape.y_dims))
    margin = 0.0 if value == 0.0 else -np.inf
    expected = {
        y: conv_numpy(vx, vw, shape),
        p: pool_numpy(vx, shape, margin),
        dx: conv_input_grad_numpy(vdy, vw, shape),
        dw: conv_weight_grad_numpy(vx, vdy, shape),
    }
    check_against_numpy(backend, comp, {x: vx, w: vw, dy: vdy}, expected)


FD_SHAPES = [
    ConvShape(2, (7,), 3, 2, (3,), (2,), (1,), ((1, 2),)),
    ConvShape(1, (6, 5), 2, 3, (2, 3), (1, 2), (2, 1), ((0, 1), (2, 0))),
]


@pytest.mark.parametrize("shape", FD_SHAPES, ids=["1d", "2d"])
def test_gradient_specs_match_finite_differences(backend: Any, shape: ConvShape) -> None:
    """``loss = sum(y * g)``: the input and weight gradient specs, run with ``dy = g``, equal
    central differences of the loss at a few cells of ``x`` and ``w``, in double precision."""
    rng = np.random.default_rng(7)
    pad_axes = Padding(shape.padding_axes, 0.0)
    x = hosted(shape.x_dims, "x", "double", padding=pad_axes)
    w, g = hosted(shape.w_dims, "w", "double"), hosted(shape.y_dims, "g", "double")
    y = Tnode.create(shape.y_dims, prec="double", label="y")
    loss = hosted((), "loss", "double")
    dx = hosted(shape.x_dims, "dx", "double", padding=pad_axes)
    dw = hosted(shape.w_dims, "dw", "double")
    letters = "bopqd"[: shape.rank + 1] + "d"
    comp = ir.block(
        ir.accum(y, "add", x, w, op="mul", spec=shape.forward_spec()),
        ir.accum(loss, "add", y, g, op="mul", spec=f"{letters},{letters}->"),
        ir.accum(dx, "add", g, w, op="mul", spec=shape.input_grad_spec()),
        ir.accum(dw, "add", x, g, op="mul", spec=shape.weight_grad_spec()),
    )
    vx, vw, vg = (rng.uniform(-1, 1, d) for d in (shape.x_dims, shape.w_dims, shape.y_dims))
    for tn, v in ((x, vx), (w, vw), (g, vg)):
        tn.set_values(v)
    routine = backend.link(new_context(backend), backend.compile(comp, name="fd"))

    def run() -> float:
        routine()
        backend.to_host(routine.context, loss)
        return float(loss.get_values())

    run()
    for tn in (dx, dw):
        backend.to_host(routine.context, tn)
    grads = {x: dx.get_values().copy(), w: dw.get_values().copy()}
    np.testing.assert_allclose(grads[x], conv_input_grad_numpy(vg, vw, shape), atol=1e-12)
    np.testing.assert_allclose(grads[w], conv_weight_grad_numpy(vx, vg, shape), atol=1e-12)
    eps = 1e-6
    for tn, base in ((x, vx), (w, vw)):
        for cell in [tuple(int(rng.integers(0, n)) for n in base.shape) for _ in range(4)]:
            values = []
            for delta in (eps, -eps):
                moved = base.copy()
                moved[cell] += delta
                tn.set_values(moved)
                backend.from_host(routine.context, tn)
                values.append(run())
            tn.set_values(base)
            backend.from_host(routine.context, tn)
            fd = (values[0] - values[1]) / (2 * eps)
            assert abs(fd - grads[tn][cell]) < 1e-7, (
                f"{backend.name}: d loss / d {tn.debug_label}{list(cell)}: finite differences "
                f"{fd}, gradient spec {grads[tn][cell]}"
            )


def test_window_read_of_an_inlined_node_and_pooling_of_a_convolution(backend: Any) -> None:
    """``a = relu(x)`` (a candidate for inlining) read through a strided window, the
    convolution's result (not hosted) max-pooled 2x2 and the pooling's relu stored: the
    optimizer's choices must not change the values."""
    shape = ConvShape(2, (9, 8), 3, 4, (3, 2), (1, 1), (1, 1), ((1, 1), (0, 1)))
    rng = np.random.default_rng(11)
    x, w = hosted(shape.x_dims, "x"), hosted(shape.w_dims, "w")
    a = Tnode.create(shape.x_dims, label="a", padding=Padding(shape.padding_axes, 0.0))
    y = Tnode.create(shape.y_dims, label="y")
    ob, oh, ow, od = shape.y_dims
    pooled = ConvShape(ob, (oh, ow), od, od, (2, 2), (2, 2), (1, 1), ((0, 0), (0, 0)))
    p = Tnode.create(pooled.pool_dims, label="p")
    out = hosted(pooled.pool_dims, "out")
    comp = ir.block(
        ir.unop(a, "relu", x),
        ir.accum(y, "add", a, w, op="mul", spec=shape.forward_spec()),
        ir.accum(p, "max", y, spec=pooled.pool_spec(), sizes=pooled.pool_sizes()),
        ir.unop(out, "relu", p),
    )
    vx, vw = rng.uniform(-2, 2, shape.x_dims), rng.uniform(-1, 1, shape.w_dims)
    want = np.maximum(pool_numpy(conv_numpy(np.maximum(vx, 0), vw, shape), pooled, 0.0), 0)
    check_against_numpy(backend, comp, {x: vx, w: vw}, {out: want})


def test_padded_intermediates_between_two_routines(backend: Any) -> None:
    """Padded nodes computed by one routine and read through their margins by another,
    compiled together: ``h`` with zero margins (a "same" convolution, its result the input's
    size) and ``m`` with -inf margins (a max pooling of negative values, which zero margins
    would change). The second routine sees the margins the first one's writes restored."""
    shape = ConvShape(2, (5, 6), 2, 3, (3, 3), (1, 1), (1, 1), ((1, 1), (1, 1)))
    rng = np.random.default_rng(12)
    x, w = hosted(shape.x_dims, "x"), hosted(shape.w_dims, "w")
    h = Tnode.create(shape.x_dims, label="h", padding=Padding(shape.padding_axes, 0.0))
    m = Tnode.create(shape.x_dims, label="m", padding=Padding(shape.padding_axes, -np.inf))
    y, p = hosted(shape.y_dims, "y"), hosted(shape.pool_dims, "p")
    assert shape.out == shape.spatial
    first = ir.block(ir.unop(h, "neg", x), ir.binop(m, "sub", h, x))
    second = ir.block(
        ir.accum(y, "add", h, w, op="mul", spec=shape.forward_spec()),
        ir.accum(p, "max", m, spec=shape.pool_spec(), sizes=shape.pool_sizes()),
    )
    vx, vw = rng.uniform(0.5, 2, shape.x_dims), rng.uniform(-1, 1, shape.w_dims)
    x.set_values(vx)
    w.set_values(vw)
    codes = backend.compile_batch([first, second], ["produce", "convolve"])
    r1 = backend.link(new_context(backend), codes[0])
    r2 = backend.link(r1.context, codes[1])
    for _ in range(2):
        r1()
        r2()
        backend.to_host(r2.context, y)
        backend.to_host(r2.context, p)
        assert_close(y.get_values(), conv_numpy(-vx, vw, shape), "single")
        assert_close(p.get_values(), pool_numpy(-2 * vx, shape, -np.inf), "single")


@pytest.mark.parametrize("prec", ["single", "double", "half", "bfloat16", "int32"])
def test_strided_convolution_precisions(backend: Any, prec: str) -> None:
    """A strided, dilated, padded 1-D convolution in each precision family (small floats
    accumulate in float32, integers exactly), against the oracle."""
    require_precs(backend, prec)
    shape = ConvShape(2, (9,), 3, 2, (3,), (2,), (2,), ((2, 1),))
    rng = np.random.default_rng(13)
    x = hosted(shape.x_dims, "x", prec, padding=Padding(shape.padding_axes, 0.0))
    w, y = hosted(shape.w_dims, "w", prec), hosted(shape.y_dims, "y", prec)
    ints = prec == "int32"
    vx = rng.integers(-4, 5, shape.x_dims) if ints else rng.uniform(-2, 2, shape.x_dims)
    vw = rng.integers(-3, 4, shape.w_dims) if ints else rng.uniform(-1, 1, shape.w_dims)
    comp = ir.accum(y, "add", x, w, op="mul", spec=shape.forward_spec())
    x.set_values(vx)
    w.set_values(vw)
    want = conv_numpy(x.get_values(), w.get_values(), shape)
    if ints:
        check_against_numpy(backend, comp, {x: vx, w: vw}, {y: want}, prec)
    else:
        [got] = run_once(backend, comp, {x: vx, w: vw}, [y])
        tol = {"single": 1e-5, "double": 1e-12, "half": 4e-3, "bfloat16": 3e-2}[prec]
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * 4)


def test_large_convolution_and_gradients_in_parallel(backend: Any) -> None:
    """Big enough for threads and GPU grids: a 3x3 "same" convolution of 8 channels over a
    batch of 16x16 images and its gradients (the input gradient's result is indexed by a
    window, so its parallel loops are the batch and channels only), against numpy."""
    if on_interpreter(backend):
        pytest.skip("the interpreter runs a few million steps in minutes")
    shape = ConvShape(4, (16, 16), 8, 8, (3, 3), (1, 1), (1, 1), ((1, 1), (1, 1)))
    rng = np.random.default_rng(14)
    x = hosted(shape.x_dims, "x", padding=Padding(shape.padding_axes, 0.0))
    w, dy = hosted(shape.w_dims, "w"), hosted(shape.y_dims, "dy")
    y, dw = hosted(shape.y_dims, "y"), hosted(shape.w_dims, "dw")
    dx = hosted(shape.x_dims, "dx", padding=Padding(shape.padding_axes, 0.0))
    comp = ir.block(
        ir.accum(y, "add", x, w, op="mul", spec=shape.forward_spec()),
        ir.accum(dx, "add", dy, w, op="mul", spec=shape.input_grad_spec()),
        ir.accum(dw, "add", x, dy, op="mul", spec=shape.weight_grad_spec()),
    )
    vx, vw, vdy = (rng.uniform(-1, 1, d) for d in (shape.x_dims, shape.w_dims, shape.y_dims))
    got = run_once(backend, comp, {x: vx, w: vw, dy: vdy}, [y, dx, dw])
    wants = [
        conv_numpy(vx, vw, shape),
        conv_input_grad_numpy(vdy, vw, shape),
        conv_weight_grad_numpy(vx, vdy, shape),
    ]
    for g, want in zip(got, wants):
        np.testing.assert_allclose(g, want, rtol=1e-4, atol=1e-4)
