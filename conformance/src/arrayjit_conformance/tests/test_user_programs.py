"""Programs written from the READMEs as a user would, that once computed wrong values or failed:
each on every backend against numpy and against the oracle (the interpreter over the
unoptimized lowered code; the harness checks the optimized interpretation against it too)."""

from __future__ import annotations

from typing import Any

import numpy as np

from arrayjit_conformance.harness import (
    check_against_numpy,
    hosted,
)
from arrayjit_ir import ir
from arrayjit_tnode import Tnode


def test_integer_quotient_inlined_into_a_where_condition(backend: Any) -> None:
    """``q`` (int32) ``= a / b`` truncates (7 / 2 = 3); ``c`` (double) ``= q - z``;
    ``y = where(c, 1, 2)``. Both ``q`` and ``c`` are inlined into the condition, which is
    evaluated in its own (double) precision: ``q`` must still be the int32 quotient there, not
    the double one (3.5 - 3 would select 1)."""
    a, b = hosted((4,), "a", "int32"), hosted((4,), "b", "int32")
    z = hosted((4,), "z", "double")
    one, two = hosted((4,), "one"), hosted((4,), "two")
    q = Tnode.create((4,), prec="int32", label="q")
    c = Tnode.create((4,), prec="double", label="c")
    y = hosted((4,), "y")
    comp = ir.block(
        ir.binop(q, "div", a, b), ir.binop(c, "sub", q, z), ir.ternop(y, "where", c, one, two)
    )
    va, vb = np.array([7, -7, 9, 1]), np.array([2, 2, 4, 3])
    vz = np.array([3.0, -3.0, 2.0, 0.0])  # the truncated quotients: every condition is 0
    inputs = {a: va, b: vb, z: vz, one: np.ones(4), two: np.full(4, 2.0)}
    check_against_numpy(backend, comp, inputs, {y: np.full(4, 2.0)})


def test_integer_tanh_inlined_into_a_where_condition(backend: Any) -> None:
    """The shape the random-program search found: ``t`` (int32) ``= tanh(x)`` with ``x`` int32
    is computed in double and truncated (0 for every finite x but the saturating ones), and an
    inlined double ``t + z`` is a condition."""
    x = hosted((5,), "x", "int32")
    z = hosted((5,), "z", "double")
    one, two = hosted((5,), "one"), hosted((5,), "two")
    t = Tnode.create((5,), prec="int32", label="t")
    c = Tnode.create((5,), prec="double", label="c")
    y = hosted((5,), "y")
    comp = ir.block(
        ir.unop(t, "tanh", x), ir.binop(c, "add", t, z), ir.ternop(y, "where", c, one, two)
    )
    vx = np.array([1, -1, 2, 0, 5])
    inputs = {x: vx, z: np.zeros(5), one: np.ones(5), two: np.full(5, 2.0)}
    check_against_numpy(backend, comp, inputs, {y: np.full(5, 2.0)})


def test_unrolled_newton_iteration_compiles_and_converges(backend: Any) -> None:
    """Newton's iteration for a square root, unrolled over 12 steps in one block: each step
    ``x = x - (x * x - a) / (x + x)`` reads the previous one four times. Inlining every step at
    each of its reads copied the code 4**12 times (the compile never ended); a computation
    copied to several reads is bounded in size, so steps are stored every few links."""
    a = hosted((6,), "a", "double")
    y = hosted((6,), "y", "double")
    xs = [a]
    stmts: list[Any] = []
    for k in range(12):
        sq = Tnode.create((6,), prec="double", label=f"sq{k}")
        num = Tnode.create((6,), prec="double", label=f"num{k}")
        den = Tnode.create((6,), prec="double", label=f"den{k}")
        step = Tnode.create((6,), prec="double", label=f"step{k}")
        nxt = y if k == 11 else Tnode.create((6,), prec="double", label=f"x{k + 1}")
        x = xs[-1]
        stmts += [
            ir.binop(sq, "mul", x, x),
            ir.binop(num, "sub", sq, a),
            ir.binop(den, "add", x, x),
            ir.binop(step, "div", num, den),
            ir.binop(nxt, "sub", x, step),
        ]
        xs.append(nxt)
    va = np.array([2.0, 9.0, 0.25, 100.0, 3.0, 1.0])
    check_against_numpy(backend, ir.block(*stmts), {a: va}, {y: np.sqrt(va)}, "double")


def test_a_long_chain_of_single_reads_compiles(backend: Any) -> None:
    """A recurrence unrolled over 200 statements, each reading the previous node once
    (``t[k+1] = t[k] * c + x``): inlined whole it nested 200 deep, past Python's recursion
    limit in the optimizer and clang's 256 brackets in OpenCL. Inlining is bounded in depth."""
    x = hosted((5,), "x", "double")
    c = hosted((5,), "c", "double")
    y = hosted((5,), "y", "double")
    cur: Tnode = x
    stmts: list[Any] = []
    for k in range(200):
        nxt = y if k == 199 else Tnode.create((5,), prec="double", label=f"t{k}")
        stmts.append(ir.ternop(nxt, "fma", cur, c, x))
        cur = nxt
    vx = np.array([1.0, -0.5, 0.25, 2.0, 0.0])
    vc = np.array([0.5, 0.5, -0.5, 0.0, 0.9])
    want = vx.copy()
    for _ in range(200):
        want = want * vc + vx
    check_against_numpy(backend, ir.block(*stmts), {x: vx, c: vc}, {y: want}, "double")
