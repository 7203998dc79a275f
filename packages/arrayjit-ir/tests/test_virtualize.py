"""The optimizer keeps the meaning of a block and never repeats reduction work.

Every expected value here is numpy written plainly, statement by statement; the optimized code
runs on the reference interpreter.
"""

from __future__ import annotations

import numpy as np
import pytest

from arrayjit_ir import ir
from arrayjit_ir import low_level as L
from arrayjit_tnode import Tnode


def _hosted(dims: tuple[int, ...], label: str) -> Tnode:
    return Tnode.create(dims, label=label, hosted=True)


def _run(comp: object, values: dict[Tnode, np.ndarray], runs: int = 1) -> dict[Tnode, np.ndarray]:
    """Optimize ``comp`` and interpret it ``runs`` times over copies of ``values``."""
    opt = ir.optimize(ir.lower(comp), name="t")  # type: ignore[arg-type]
    bufs = {tn: np.array(v, dtype=np.float32) for tn, v in values.items()}
    for _ in range(runs):
        ir.interpret(opt, bufs)
    return bufs


def accumulating_steps(s: L.Stmt) -> int:
    """How many times reduction bodies execute: stores whose value accumulates into the cell or
    local they write (``c := c op x``), counted with their loops, inlined scopes included."""

    def expr(e: L.Expr) -> int:
        if isinstance(e, L.Local_scope):
            return stmt(e.body)
        return sum(expr(x) for x in L.children(e))

    def stmt(st: L.Stmt) -> int:
        match st:
            case L.Seq(stmts=stmts):
                return sum(stmt(x) for x in stmts)
            case L.For_loop(from_=lo, to_inclusive=hi, body=body):
                return max(hi - lo + 1, 0) * stmt(body)
            case L.Set(tn=tn, indices=idx, value=v):
                own = isinstance(v, L.Binop) and v.a == L.Get(tn, idx)
                return int(own) + expr(v)
            case L.Set_local(scope=sc, value=v):
                own = isinstance(v, L.Binop) and v.a == L.Get_local(sc)
                return int(own) + expr(v)
        return 0

    return stmt(s)


def test_definition_is_not_inlined_past_a_write_to_its_input() -> None:
    p, one, y = _hosted((3,), "p"), _hosted((), "one"), _hosted((3,), "y")
    t = Tnode.create((3,), label="t")
    comp = ir.block(ir.unop(t, "relu", p), ir.binop(p, "sub", p, one), ir.unop(y, "identity", t))
    p0 = np.array([1.0, -2.0, 3.0])
    out = _run(comp, {p: p0, one: np.array(1.0), y: np.zeros(3)})
    np.testing.assert_array_equal(out[y], np.maximum(p0, 0))
    np.testing.assert_array_equal(out[p], p0 - 1)
    assert not t.known_virtual()


def test_reduction_is_not_inlined_into_the_statement_that_rewrites_its_input() -> None:
    p, q = _hosted((4,), "p"), _hosted((), "q")
    s, m = Tnode.create((), label="s"), Tnode.create((), label="m")
    comp = ir.block(
        ir.accum(s, "add", p, spec="i->"), ir.binop(m, "mul", s, q), ir.binop(p, "sub", p, m)
    )
    p0 = np.array([1.0, 2.0, 3.0, 6.0])
    out = _run(comp, {p: p0, q: np.array(0.25)}, runs=2)
    expect = p0 - p0.sum() * 0.25
    expect = expect - expect.sum() * 0.25
    np.testing.assert_allclose(out[p], expect, rtol=1e-6)
    assert s.known_virtual() and not m.known_virtual()  # the sum is inlined into m's statement


def test_row_reduction_read_at_broadcast_positions_is_computed_once_per_row() -> None:
    n = 8
    x, inv, y = _hosted((n, n), "x"), _hosted((), "inv"), _hosted((n, n), "y")
    s, m = Tnode.create((n,), label="s"), Tnode.create((n,), label="m")
    comp = ir.block(
        ir.accum(s, "add", x, spec="ij->i"),
        ir.binop(m, "mul", s, inv, spec="i,->i"),
        ir.binop(y, "sub", x, m, spec="ij,i->ij"),
    )
    low = ir.lower(comp)
    opt = ir.optimize(low, name="centre")
    assert accumulating_steps(opt.code) == accumulating_steps(low) == n * n
    xv = np.random.default_rng(0).standard_normal((n, n))
    bufs = {x: xv.astype(np.float32), inv: np.float32(1 / n), y: np.zeros((n, n), np.float32)}
    ir.interpret(opt, bufs)
    np.testing.assert_allclose(bufs[y], xv - xv.mean(1, keepdims=True), rtol=1e-5, atol=1e-6)
    assert s.known_virtual() and not m.known_virtual()


def test_reduction_read_through_a_pointwise_node_twice_is_not_repeated() -> None:
    x, y = _hosted((3, 4), "x"), _hosted((3, 3), "y")
    o, t = Tnode.create((3,), label="o"), Tnode.create((3,), label="t")
    comp = ir.block(
        ir.accum(o, "add", x, spec="ab->a"),
        ir.unop(t, "relu", o),
        ir.binop(y, "mul", t, t, spec="a,c->ac"),
    )
    low = ir.lower(comp)
    opt = ir.optimize(low, name="twice")
    assert accumulating_steps(opt.code) <= accumulating_steps(low)
    xv = np.arange(12.0).reshape(3, 4) - 5
    bufs = {x: xv.astype(np.float32), y: np.zeros((3, 3), np.float32)}
    ir.interpret(opt, bufs)
    r = np.maximum(xv.sum(1), 0)
    np.testing.assert_allclose(bufs[y], np.outer(r, r))


def _scopes(s: L.Stmt) -> list[L.ScopeId]:
    return [x.scope for e in L.exprs_of(s) for x in L.sub_exprs(e) if isinstance(x, L.Local_scope)]


def test_every_inlined_instance_declares_fresh_locals() -> None:
    # A pointwise node over a reduction, read at two positions of one statement: allowed to be
    # inlined only as long as the work rule holds, and never with a repeated scope id.
    x, y = _hosted((4, 4), "x"), _hosted((4,), "y")
    s, t = Tnode.create((4,), label="s"), Tnode.create((4,), label="t")
    u = Tnode.create((4,), label="u")
    comp = ir.block(
        ir.accum(s, "add", x, spec="ij->i"),
        ir.unop(t, "relu", s),
        ir.unop(u, "neg", t),
        ir.binop(y, "add", u, u),
    )
    opt = ir.optimize(ir.lower(comp), name="fresh")
    scopes = _scopes(opt.code)
    assert len(scopes) == len(set(scopes))
    xv = np.arange(16.0).reshape(4, 4) - 7
    bufs = {x: xv.astype(np.float32), y: np.zeros(4, np.float32)}
    ir.interpret(opt, bufs)
    np.testing.assert_allclose(bufs[y], 2 * -np.maximum(xv.sum(1), 0))


ACCUMULATIONS = {
    "add": lambda acc, x: acc + x.sum(1),
    "sub": lambda acc, x: acc - x.sum(1),
    "mul": lambda acc, x: acc * x.prod(1),
    "max": lambda acc, x: np.maximum(acc, x.max(1)),
    "min": lambda acc, x: np.minimum(acc, x.min(1)),
}


@pytest.mark.parametrize("op", sorted(ACCUMULATIONS))
@pytest.mark.parametrize("j", [1, 3])
@pytest.mark.parametrize("neutral", [True, False])
def test_accumulation_over_any_axis_size(op: str, j: int, neutral: bool) -> None:
    x, y = _hosted((3, j), "x"), _hosted((3,), "y")
    xv = np.random.default_rng(j).uniform(0.5, 2.0, (3, j))
    y0 = np.array([1.5, -2.0, 3.0])
    out = _run(
        ir.block(ir.accum(y, op, x, spec="ij->i", initialize_neutral=neutral)),  # type: ignore[arg-type]
        {x: xv, y: y0},
    )
    start = y0 if not neutral else {"add": 0.0, "sub": 0.0, "mul": 1.0}.get(op)
    if start is None:
        start = np.full(3, -np.inf if op == "max" else np.inf)
    expect = ACCUMULATIONS[op](np.broadcast_to(start, (3,)).astype(np.float64), xv)
    np.testing.assert_allclose(out[y], expect, rtol=1e-6)


def test_division_accumulation_of_one_term_is_its_reciprocal() -> None:
    x, y = _hosted((3, 1), "x"), _hosted((3,), "y")
    xv = np.array([[2.0], [4.0], [0.5]])
    out = _run(ir.block(ir.accum(y, "div", x, spec="ij->i")), {x: xv, y: np.zeros(3)})
    np.testing.assert_allclose(out[y], 1 / xv[:, 0])


@pytest.mark.parametrize(("op", "neutral"), [("add", 0.0), ("max", -np.inf), ("min", np.inf)])
def test_reduction_over_an_empty_axis_gives_the_neutral_element(op: str, neutral: float) -> None:
    x, y = _hosted((0,), "x"), _hosted((), "y")
    out = _run(ir.block(ir.accum(y, op, x, spec="i->")), {x: np.zeros(0), y: np.array(5.0)})  # type: ignore[arg-type]
    assert out[y] == neutral


def test_matmul_with_an_empty_inner_axis_is_zero() -> None:
    a, b, c = _hosted((2, 0), "a"), _hosted((0, 3), "b"), _hosted((2, 3), "c")
    out = _run(
        ir.block(ir.accum(c, "add", a, b, op="mul", spec="ik,kj->ij")),
        {a: np.zeros((2, 0)), b: np.zeros((0, 3)), c: np.full((2, 3), 7.0)},
    )
    np.testing.assert_array_equal(out[c], np.zeros((2, 3)))
