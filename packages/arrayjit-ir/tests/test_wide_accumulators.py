"""Reductions into half, bfloat16 and fp8 accumulate in a float32 local and round once
(arrayjit_ir.lower), in the lowered code (the reference interpreter's) and through every pass."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

from arrayjit_ir import interpret, ir, lower, ops, optimize
from arrayjit_ir import low_level as L
from arrayjit_tnode import Prec, Tnode

SMALL = ("half", "bfloat16", "fp8")


def _scopes(s: L.Stmt) -> list[L.ScopeId]:
    """The scope of every local scope in ``s``."""
    return [x.scope for e in L.exprs_of(s) for x in L.sub_exprs(e) if isinstance(x, L.Local_scope)]


def _round(v: Any, prec: str) -> np.ndarray:
    return np.asarray(v, np.float32).astype(Prec[prec].numpy_dtype).astype(np.float32)


def _row_sum(prec: str, n: int) -> tuple[Tnode, Tnode, Any]:
    x = Tnode.create((3, n), prec=prec, label="x", hosted=True)
    y = Tnode.create((3,), prec=prec, label="y", hosted=True)
    return x, y, ir.accum(y, "add", x, spec="ij->i")


@pytest.mark.parametrize("prec", SMALL)
def test_lowering_accumulates_in_a_float32_local_stored_once(prec: str) -> None:
    x, y, comp = _row_sum(prec, 40)
    code = lower(comp)
    stores = [w for w in L.writes(code) if isinstance(w, L.Set)]
    assert len(stores) == 1 and isinstance(stores[0].value, L.Local_scope)
    acc = stores[0].value.scope
    assert acc.acc_prec is Prec.single and acc.prec is Prec.single and acc.tn is y
    vals = _round(np.random.default_rng(1).uniform(0, 0.3, (3, 40)), prec)
    bufs = {x: vals.astype(x.prec.numpy_dtype), y: np.zeros(3, y.prec.numpy_dtype)}
    got = interpret(code, bufs)[y].astype(np.float32)
    want = np.zeros(3, np.float32)
    for j in range(40):  # fewer terms than a block: in order, in float32
        want = want + vals[:, j]
    np.testing.assert_array_equal(got, _round(want, prec))


def test_single_and_double_reductions_keep_the_cell_form() -> None:
    for prec in ("single", "double"):
        _, y, comp = _row_sum(prec, 40)
        code = lower(comp)
        assert not _scopes(code)
        (store,) = [w for w in L.writes(code) if isinstance(w, L.Set)]
        assert isinstance(store.value, L.Binop) and store.value.op is ops.Binop.add
        assert store.value.a == L.Get(y, store.indices)


def test_a_term_reading_its_own_node_keeps_the_per_step_form() -> None:
    h = Tnode.create((4,), prec="half", label="h", hosted=True)
    code = lower(ir.accum(h, "add", h, spec="j->i", initialize_neutral=False))
    assert not _scopes(code)


@pytest.mark.parametrize("prec", SMALL)
def test_blocked_partials_are_float32(prec: str) -> None:
    x, y, comp = _row_sum(prec, 1000)
    code = lower(comp)
    opt = optimize(code, name="r")
    scopes = _scopes(opt.code)
    assert len(scopes) >= 3  # the accumulator, block and leftover partials
    assert all(sc.prec is Prec.single for sc in scopes)
    vals = _round(np.random.default_rng(2).uniform(0, 0.01, (3, 1000)), prec)
    args = {x: vals.astype(x.prec.numpy_dtype), y: np.zeros(3, y.prec.numpy_dtype)}
    ref = interpret(code, {k: v.copy() for k, v in args.items()})[y]
    got = interpret(opt, {k: v.copy() for k, v in args.items()})[y]
    exact = vals.astype(np.float64).sum(axis=1)
    ulp = float(ml_dtypes.finfo(Prec[prec].numpy_dtype).eps)  # rounded once: within half of it
    np.testing.assert_allclose(got.astype(np.float64), exact, rtol=ulp / 2 + 1e-6)
    np.testing.assert_allclose(ref.astype(np.float64), exact, rtol=ulp / 2 + 1e-6)


@pytest.mark.parametrize("prec", SMALL)
def test_an_inlined_small_float_sum_rounds_once_then_as_its_node(prec: str) -> None:
    """``s = sum x`` (prec) inlined into ``y = s * 3`` (single): the float32 sum is rounded to
    prec once (the node's value), then read in float32."""
    x = Tnode.create((4, 30), prec=prec, label="x", hosted=True)
    s = Tnode.create((4,), prec=prec, label="s")
    three = Tnode.create((), label="three", hosted=True)
    y = Tnode.create((4,), label="y", hosted=True)
    comp = ir.block(ir.accum(s, "add", x, spec="ij->i"), ir.binop(y, "mul", s, three))
    code = lower(comp)
    opt = optimize(code, name="r")
    assert s.memory_mode is not None and "Virtual" in str(s.memory_mode)
    assert not any(isinstance(w, L.Set) and w.tn is s for w in L.writes(opt.code))
    vals = _round(np.random.default_rng(3).uniform(0, 0.2, (4, 30)), prec)

    def run(c: Any) -> np.ndarray:
        bufs = {x: vals.astype(x.prec.numpy_dtype), three: np.array(3.0, np.float32)}
        return interpret(c, {**bufs, y: np.zeros(4, np.float32)})[y]

    want = np.zeros(4, np.float32)
    for j in range(30):
        want = want + vals[:, j]
    expect = _round(want, prec) * np.float32(3)
    np.testing.assert_array_equal(run(code), expect)
    np.testing.assert_array_equal(run(opt), expect)


@pytest.mark.parametrize("op", ["max", "min"])
def test_small_float_max_min_are_those_of_the_stored_values(op: str) -> None:
    x, y = Tnode.create((2, 50), prec="fp8", label="x"), Tnode.create((2,), prec="fp8", label="y")
    vals = _round(np.random.default_rng(4).uniform(-20, 20, (2, 50)), "fp8")
    code = lower(ir.accum(y, op, x, spec="ij->i"))
    got = interpret(code, {x: vals.astype(x.prec.numpy_dtype)})[y].astype(np.float32)
    np.testing.assert_array_equal(got, vals.max(axis=1) if op == "max" else vals.min(axis=1))
