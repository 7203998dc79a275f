"""The implicit-GEMM plan (:mod:`arrayjit_backends.codegen.conv_plan`): which lowered loop nests
are one, and, at every loop point of random convolutions and their gradients, the element each
operand's walks give is the one the IR's index expressions read (evaluated here directly, from
the loops' values and the buffers' dims)."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

import pytest

from arrayjit_backends.codegen.conv_plan import GemmPlan, ScatterPlan, Walk, gemm_plan, scatter_plan
from arrayjit_backends.codegen.kernel_plan import parallel_order, scalar_reduction
from arrayjit_conformance.convolution import ConvShape
from arrayjit_conformance.harness import hosted
from arrayjit_conformance.tests.test_convolution import random_shape
from arrayjit_ir import ir, lower
from arrayjit_ir import low_level as L
from arrayjit_ir.indexing import Affine, AxisIndex, Fixed_idx, Iterator, Symbol
from arrayjit_ir.optimize import optimize
from arrayjit_tnode import Padding


def _plans(comp: ir.Assignment) -> list[tuple[GemmPlan | None, L.For_loop]]:
    """Per top-level loop of the optimized code, its plan (or None) and the loop."""
    code = optimize(lower(comp), name="conv").code
    out = []
    for s in code.stmts if isinstance(code, L.Seq) else (code,):
        if isinstance(s, L.For_loop):
            nest, rest = parallel_order(s)
            out.append((gemm_plan(nest, rest), s))
    return out


def _flat(indices: tuple[AxisIndex, ...], dims: tuple[int, ...], env: dict[Symbol, int]) -> int:
    """The buffer element ``indices`` reads at the loop point ``env`` (row-major)."""
    at = 0
    for i, d in zip(indices, dims, strict=True):
        match i:
            case Fixed_idx(value=v):
                pos = v
            case Iterator(symbol=s):
                pos = env[s]  # type: ignore[index]
            case Affine(terms=terms, offset=o):
                pos = o + sum(c * env[s] for c, s in terms)  # type: ignore[index]
        assert 0 <= pos < d
        at = at * d + pos
    return at


def _point(loops: tuple[L.For_loop, ...], env: dict[Symbol, int]) -> int:
    """The mixed-radix number of the loops' values (outermost digit first)."""
    t = 0
    for lp in loops:
        t = t * (lp.to_inclusive - lp.from_ + 1) + env[lp.index] - lp.from_
    return t


def _check_every_point(plan: GemmPlan, loop: L.For_loop) -> None:
    nest, rest = parallel_order(loop)
    assert isinstance(rest, L.For_loop)
    red = scalar_reduction(rest)
    assert red is not None and isinstance(red.term, L.Binop)
    x, w = red.term.a, red.term.b
    assert isinstance(x, L.Get) and isinstance(w, L.Get)
    a, b = (x, w) if plan.x_is_a else (w, x)
    assert plan.steps == red.loops  # the serial order of the steps
    loops = [*nest, *red.loops]
    assert {lp.index for lp in (*plan.rows, *plan.cols)} == {lp.index for lp in nest}
    assert (plan.m, plan.n, plan.k) == tuple(
        math.prod(lp.to_inclusive - lp.from_ + 1 for lp in side)
        for side in (plan.rows, plan.cols, plan.steps)
    )
    ranges = [range(lp.from_, lp.to_inclusive + 1) for lp in loops]
    for values in itertools.product(*ranges):
        env = {lp.index: v for lp, v in zip(loops, values, strict=True)}
        r, j, p = (_point(side, env) for side in (plan.rows, plan.cols, plan.steps))
        assert plan.a.offset + plan.a.lanes.offset(r) + plan.a.steps.offset(p) == _flat(
            a.indices, a.tn.dims, env
        )
        assert plan.b.offset + plan.b.lanes.offset(j) + plan.b.steps.offset(p) == _flat(
            b.indices, b.tn.dims, env
        )
        t = red.target
        assert plan.c_offset + r * plan.c_rs + j * plan.c_cs == _flat(t.indices, t.tn.dims, env)


def _conv(shape: ConvShape, which: str) -> ir.Assignment:
    pad = Padding(shape.padding_axes, 0.0)
    if which == "forward":
        x, w, y = hosted(shape.x_dims, "x", padding=pad), hosted(shape.w_dims, "w"), None
        y = hosted(shape.y_dims, "y")
        return ir.accum(y, "add", x, w, op="mul", spec=shape.forward_spec())
    if which == "weight_grad":
        x, dy = hosted(shape.x_dims, "x", padding=pad), hosted(shape.y_dims, "dy")
        dw = hosted(shape.w_dims, "dw")
        return ir.accum(dw, "add", x, dy, op="mul", spec=shape.weight_grad_spec())
    # The input gradient in gather form (stride 1, "same" margins): a forward convolution of
    # the padded dy with the flipped kernel.
    dy = hosted(shape.y_dims, "dy", padding=Padding(shape.padding_axes, 0.0))
    w, dx = hosted(shape.w_dims, "w"), hosted(shape.x_dims, "dx")
    return ir.accum(dx, "add", dy, w, op="mul", spec="b(h-i+1)(w-j+1)d,ijcd->bhwc")


@pytest.mark.parametrize("seed", range(30))
@pytest.mark.parametrize("which", ["forward", "weight_grad"])
def test_random_convolutions_are_implicit_gemms(seed: int, which: str) -> None:
    """The conformance suite's random convolutions (strides, dilations, margins), with batch
    and channels of two or more (a size-1 axis has no loop)."""
    shape = random_shape(seed)
    shape = replace(
        shape,
        batch=max(2, shape.batch),
        channels=max(2, shape.channels),
        out_channels=max(2, shape.out_channels),
        spatial=tuple(max(1, n) for n in shape.spatial),
    )
    plans = _plans(_conv(shape, which))
    found = [(p, s) for p, s in plans if p is not None]
    if min(shape.out) < 2:
        # An output axis of one point: a fixed index for y; still a GEMM unless that leaves a
        # side without loops.
        assert len(found) <= 1
    else:
        assert len(found) == 1, plans
    for plan, loop in found:
        assert plan is not None
        _check_every_point(plan, loop)


def test_gather_input_gradient_is_an_implicit_gemm_with_negative_strides() -> None:
    shape = ConvShape(2, (5, 4), 3, 4, (3, 3), (1, 1), (1, 1), ((1, 1), (1, 1)))
    [(plan, loop)] = [(p, s) for p, s in _plans(_conv(shape, "input_grad")) if p is not None]
    assert plan is not None
    assert any(s < 0 for _, s in plan.a.steps.dims)
    _check_every_point(plan, loop)


def test_forward_walks() -> None:
    """3x3 "same" over 32x32 NHWC, 64 -> 64: the rows of ``x`` skip the margins (three dims),
    its steps are the kernel rows of 192 contiguous elements; ``w`` and ``y`` are plain."""
    shape = ConvShape(2, (32, 32), 64, 64, (3, 3), (1, 1), (1, 1), ((1, 1), (1, 1)))
    [(plan, _)] = [(p, s) for p, s in _plans(_conv(shape, "forward")) if p is not None]
    assert plan is not None and plan.x_is_a
    assert (plan.m, plan.n, plan.k) == (2 * 32 * 32, 64, 9 * 64)
    assert plan.a.lanes == Walk(((2, 34 * 34 * 64), (32, 34 * 64), (32, 64)))
    assert plan.a.steps == Walk(((3, 34 * 64), (192, 1)))
    assert plan.b.steps.stride == 64 and plan.b.lanes.stride == 1
    assert (plan.c_rs, plan.c_cs) == (64, 1)


def _scatters(comp: ir.Assignment) -> list[tuple[ScatterPlan, L.For_loop]]:
    """The scatter plans of the optimized code's top-level loops."""
    code = optimize(lower(comp), name="dconv").code
    out = []
    for s in code.stmts if isinstance(code, L.Seq) else (code,):
        if isinstance(s, L.For_loop) and (plan := scatter_plan(s)) is not None:
            out.append((plan, s))
    return out


def _check_scatter(plan: ScatterPlan, loop: L.For_loop) -> None:
    """Every cell of ``C`` receives, in the plan's order (runs, then shifts, then the GEMM's
    steps), the same ``(A element, B element)`` products as in the serial nest's order,
    evaluated here from the IR's index expressions."""
    loops = [loop]
    while isinstance(loops[-1].body, L.For_loop):
        loops.append(loops[-1].body)  # type: ignore[arg-type]
    body = loops[-1].body
    assert isinstance(body, L.Set) and isinstance(body.value, L.Ternop)
    x, w = body.value.a, body.value.b
    assert isinstance(x, L.Get) and isinstance(w, L.Get)
    g = plan.gemm
    a, b = (x, w) if g.x_is_a else (w, x)
    serial: dict[int, list[tuple[int, int]]] = {}
    ranges = [range(lp.from_, lp.to_inclusive + 1) for lp in loops]
    for values in itertools.product(*ranges):
        env = {lp.index: v for lp, v in zip(loops, values, strict=True)}
        cell = _flat(body.indices, body.tn.dims, env)
        pair = (_flat(a.indices, a.tn.dims, env), _flat(b.indices, b.tn.dims, env))
        serial.setdefault(cell, []).append(pair)
    planned: dict[int, list[tuple[int, int]]] = {}
    for u in range(plan.runs):
        for da, db, dc in plan.shifts:
            for r, j, p in itertools.product(range(g.m), range(g.n), range(g.k)):
                cell = g.c_offset + plan.c_units.offset(u) + dc + plan.c_rows.offset(r) + j * g.c_cs
                pa = g.a.offset + plan.a_units.offset(u) + da + g.a.lanes.offset(r)
                pb = g.b.offset + db + g.b.lanes.offset(j) + g.b.steps.offset(p)
                planned.setdefault(cell, []).append((pa + g.a.steps.offset(p), pb))
    assert planned == serial
    # Threads share batches of runs: no two batches write one cell.
    per = plan.runs // plan.batches
    owner: dict[int, int] = {}
    for u in range(plan.runs):
        for _, _, dc in plan.shifts:
            for r, j in itertools.product(range(g.m), range(g.n)):
                cell = g.c_offset + plan.c_units.offset(u) + dc + plan.c_rows.offset(r) + j * g.c_cs
                assert owner.setdefault(cell, u // per) == u // per


def test_scatter_input_gradient_runs_and_shifts() -> None:
    """``"bhwd,ijcd->b(h+i-1)(w+j-1)c"`` into a padded ``dx``: runs over ``b`` (the rows
    ``h, w`` pair with the offsets ``i, j``), GEMM rows ``h, w`` (in ``dx``, two strides),
    shifts ``i`` and ``j`` decreasing (the nest runs ``h`` outside ``i`` and ``w`` outside
    ``j``: a cell's contributions come with ``i``, then ``j``, decreasing); one batch of
    runs per ``b`` for threads."""
    shape = ConvShape(2, (6, 5), 3, 4, (3, 3), (1, 1), (1, 1), ((1, 1), (1, 1)))
    dy, w = hosted(shape.y_dims, "dy"), hosted(shape.w_dims, "w")
    dx = hosted(shape.x_dims, "dx", padding=Padding(shape.padding_axes, 0.0))
    [(plan, loop)] = _scatters(ir.accum(dx, "add", dy, w, op="mul", spec=shape.input_grad_spec()))
    assert (plan.gemm.m, plan.gemm.n, plan.gemm.k) == (30, 3, 4)
    assert (plan.runs, plan.batches, len(plan.shifts)) == (2, 2, 9)
    assert [d for _, d in plan.offsets] == [-1, -1]
    assert plan.c_rows == Walk(((6, 7 * 3), (5, 3)))
    _check_scatter(plan, loop)


@pytest.mark.parametrize("seed", range(20))
def test_random_scatter_input_gradients(seed: int) -> None:
    """The conformance suite's random shapes (strides, dilations, margins, 1-D and 2-D)."""
    shape = random_shape(seed)
    shape = replace(
        shape,
        batch=max(2, shape.batch),
        channels=max(2, shape.channels),
        out_channels=max(2, shape.out_channels),
        spatial=tuple(max(1, n) for n in shape.spatial),
    )
    dy, w = hosted(shape.y_dims, "dy"), hosted(shape.w_dims, "w")
    dx = hosted(shape.x_dims, "dx", padding=Padding(shape.padding_axes, 0.0))
    found = _scatters(ir.accum(dx, "add", dy, w, op="mul", spec=shape.input_grad_spec()))
    if min(shape.out) >= 2 and max(shape.kernel) >= 2:
        assert found
    for plan, loop in found:
        _check_scatter(plan, loop)


def test_what_is_not_an_implicit_gemm() -> None:
    shape = ConvShape(2, (6, 6), 3, 4, (3, 3), (1, 1), (1, 1), ((1, 1), (1, 1)))
    # The input gradient indexed by the window (scatter form): its result is affine.
    dy, w = hosted(shape.y_dims, "dy"), hosted(shape.w_dims, "w")
    dx = hosted(shape.x_dims, "dx", padding=Padding(shape.padding_axes, 0.0))
    scatter = ir.accum(dx, "add", dy, w, op="mul", spec=shape.input_grad_spec())
    assert all(p is None for p, _ in _plans(scatter))
    # A batch loop both operands read; a product that is not a multiply-accumulate.
    a, b, c = hosted((3, 5, 6), "a"), hosted((3, 6, 7), "b"), hosted((3, 5, 7), "c")
    assert all(
        p is None for p, _ in _plans(ir.accum(c, "add", a, b, op="mul", spec="bik,bkj->bij"))
    )
    m = hosted((5, 7), "m")
    maxed = ir.accum(m, "max", a, b, op="add", spec="bik,bkj->ij")
    assert all(p is None for p, _ in _plans(maxed))


def test_walks_simplify() -> None:
    assert Walk.of([(2, 12), (3, 4), (4, 1)]) == Walk(((24, 1),))
    assert Walk.of([(2, 100), (1, 7), (3, 4), (4, 1)]) == Walk(((2, 100), (12, 1)))
    w = Walk.of([(2, 100), (3, -5), (4, 1)])
    assert w.stride is None and w.extent == 24
    assert [w.offset(t) for t in (0, 1, 4, 5, 12, 23)] == [0, 1, -5, -4, 100, 100 - 10 + 3]
    assert Walk.of([(1, 9)]).stride == 0
