"""The computation catalogue: every op, reductions, matmul, broadcasting, accumulation, fetch ops,
node kinds, static bindings and padding, each compared with the oracle, the reference interpreter
over the unoptimized lowered code (``run_against_interpreter`` also checks the interpreter over
the optimized code against it), and with numpy where numpy says the same thing."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from arrayjit_conformance import math_oracle
from arrayjit_conformance.harness import (
    ALL_PRECS,
    FLOAT_PRECS,
    assert_close,
    hosted,
    require_precs,
    run_against_interpreter,
    run_once,
    sample,
)
from arrayjit_ir import ir, ops
from arrayjit_ir.indexing import StaticSymbol
from arrayjit_ir.ops import Binop, Unop
from arrayjit_tnode import Padding, Tnode
from arrayjit_tnode import memory_mode as mm

RNG = np.random.default_rng(20261122)
UNOPS = [op.value for op in Unop if op is not Unop.uint4x32_to_prec_uniform]
BINOPS = [op.value for op in Binop if op not in (Binop.threefry4x32, Binop.arg1, Binop.arg2)]
POSITIVE_DOMAIN = {"log", "log2", "sqrt", "recip_sqrt"}


@pytest.mark.parametrize("op", UNOPS)
@pytest.mark.parametrize("prec", FLOAT_PRECS)
def test_unop_floats(backend: Any, op: str, prec: str) -> None:
    require_precs(backend, prec)
    x, y = hosted((3, 7), "x", prec), hosted((3, 7), "y", prec)
    lo = 0.1 if op in POSITIVE_DOMAIN else -3.0
    vals = sample(RNG, prec, (3, 7), lo=lo)
    vals[0, :3] = [0.0, 1.0, 0.5] if op not in POSITIVE_DOMAIN else [1.0, 2.0, 0.25]
    [(got, ref)] = run_against_interpreter(backend, ir.unop(y, op, x), {x: vals}, [y])
    if _bounded(backend, op, prec):  # the math library's documented bound, not a tolerance
        math_oracle.assert_within_bound(got, prec, op, x.get_values())
    else:
        assert_close(got, ref, prec)


def _bounded(backend: Any, op: str, prec: str) -> bool:
    """Whether the float ``op`` is a transcendental of the math library that ``backend``
    computes with it, in a precision the library bounds (not double)."""
    return prec in math_oracle.MATH_ULPS and math_oracle.uses_library(backend, op)


@pytest.mark.parametrize("op", ["identity", "relu", "neg", "not", "satur01"])
@pytest.mark.parametrize("prec", ["int32", "int64", "byte"])
def test_unop_integers(backend: Any, op: str, prec: str) -> None:
    require_precs(backend, prec)
    x, y = hosted((9,), "x", prec), hosted((9,), "y", prec)
    vals = np.arange(9) if prec == "byte" else np.arange(-4, 5)
    [(got, ref)] = run_against_interpreter(backend, ir.unop(y, op, x), {x: vals}, [y])
    assert_close(got, ref, prec)


@pytest.mark.parametrize("op", BINOPS)
@pytest.mark.parametrize("prec", ALL_PRECS)
def test_binop_with_broadcast(backend: Any, op: str, prec: str) -> None:
    require_precs(backend, prec)
    a, b, y = hosted((3, 5), "a", prec), hosted((5,), "b", prec), hosted((3, 5), "y", prec)
    va = sample(RNG, prec, (3, 5))
    vb = sample(RNG, prec, (5,), lo=0.5)
    if prec in FLOAT_PRECS and op == "pow":
        va = np.abs(va)
    if prec not in FLOAT_PRECS and op == "pow":
        vb = vb % 3
    va[0] = vb  # equal operands for the comparisons
    if prec not in FLOAT_PRECS:
        vb[0] = 0  # integer division and remainder by zero give 0
    [(got, ref)] = run_against_interpreter(backend, ir.binop(y, op, a, b), {a: va, b: vb}, [y])
    if _bounded(backend, op, prec):
        math_oracle.assert_within_bound(got, prec, op, a.get_values(), b.get_values()[None, :])
    else:
        assert_close(got, ref, prec)
    if op in ("add", "mul", "max", "min") and prec in ("single", "double", "int32", "int64"):
        expected = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}[op]
        dt = a.prec.numpy_dtype
        assert_close(got, expected(va.astype(dt), vb.astype(dt)), prec)


@pytest.mark.parametrize("prec", FLOAT_PRECS)
def test_ternops(backend: Any, prec: str) -> None:
    require_precs(backend, prec)
    c, a, b = (hosted((4, 6), n, prec) for n in ("c", "a", "b"))
    w, f = hosted((4, 6), "w", prec), hosted((4, 6), "f", prec)
    vals = {
        c: RNG.integers(0, 2, (4, 6)).astype(float),
        a: sample(RNG, prec, (4, 6)),
        b: sample(RNG, prec, (4, 6)),
    }
    comp = ir.block(ir.ternop(w, "where", c, a, b), ir.ternop(f, "fma", a, b, c))
    (gw, rw), (gf, rf) = run_against_interpreter(backend, comp, vals, [w, f])
    assert_close(gw, rw, prec)
    assert_close(gf, rf, prec)
    if prec == "double":
        np.testing.assert_array_equal(gw, np.where(vals[c] != 0, vals[a], vals[b]))


@pytest.mark.parametrize("prec", ["single", "double", "half", "int32", "uint64"])
def test_random_bits_and_uniform(backend: Any, prec: str) -> None:
    """threefry4x32 from a key and counters, then uint4x32_to_prec_uniform: bit for bit against
    arrayjit_ir.ops (random numbers must not depend on the backend)."""
    require_precs(backend, "uint4x32", prec)
    key, ctr = hosted((), "key", "uint4x32"), hosted((257,), "ctr", "uint4x32")
    bits, u = hosted((257,), "bits", "uint4x32"), hosted((257,), "u", prec)
    vk = np.array([7, 0xDEADBEEF, 0, 42], dtype=np.uint32)
    vc = np.zeros((257, 4), dtype=np.uint32)
    vc[:, 0], vc[:, 3] = np.arange(257), 5
    comp = ir.block(
        ir.binop(bits, "threefry4x32", key, ctr), ir.unop(u, "uint4x32_to_prec_uniform", bits)
    )
    (gb, rb), (gu, ru) = run_against_interpreter(backend, comp, {key: vk, ctr: vc}, [bits, u])
    expected_bits = ops.threefry4x32(vk, vc)
    np.testing.assert_array_equal(gb, expected_bits)
    np.testing.assert_array_equal(gb, rb)
    np.testing.assert_array_equal(gu, ru)
    if prec in ("single", "double"):
        dt = np.dtype(np.float32 if prec == "single" else np.float64)
        np.testing.assert_array_equal(gu, ops.uint4x32_to_uniform(expected_bits, dt, prec))
        assert gu.min() >= 0 and gu.max() < 1


@pytest.mark.parametrize("accum", ["add", "max", "min", "mul"])
@pytest.mark.parametrize("spec", ["ij->i", "ij->j", "ij->"])
def test_reductions(backend: Any, accum: str, spec: str) -> None:
    x = hosted((6, 11), "x", "double")
    out_dims = {"ij->i": (6,), "ij->j": (11,), "ij->": ()}[spec]
    s = hosted(out_dims, "s", "double")
    vx = RNG.uniform(0.5, 1.5, (6, 11))
    [(got, ref)] = run_against_interpreter(backend, ir.accum(s, accum, x, spec=spec), {x: vx}, [s])
    assert_close(got, ref, "double")
    axis = {"ij->i": 1, "ij->j": 0, "ij->": None}[spec]
    fn = {"add": np.sum, "max": np.max, "min": np.min, "mul": np.prod}[accum]
    np.testing.assert_allclose(got, fn(vx, axis=axis), rtol=1e-12)


@pytest.mark.parametrize("n", [1, 1000, 1 << 18])
def test_full_sum_sizes(backend: Any, n: int) -> None:
    x, s = hosted((n,), "x", "single"), hosted((), "s", "single")
    vx = RNG.uniform(0.0, 1.0, n)
    comp = ir.accum(s, "add", x, spec="i->")
    if n > 1000:  # against numpy only: the interpreters would take seconds
        [got] = run_once(backend, comp, {x: vx}, [s])
    else:
        [(got, _)] = run_against_interpreter(backend, comp, {x: vx}, [s])
    np.testing.assert_allclose(got, vx.astype(np.float32).sum(dtype=np.float64), rtol=1e-4)


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (5, 7, 3), (33, 17, 65), (64, 64, 64)])
def test_matmul(backend: Any, m: int, k: int, n: int) -> None:
    x, w, h = (
        hosted((m, k), "x", "double"),
        hosted((k, n), "w", "double"),
        hosted((m, n), "h", "double"),
    )
    vx, vw = RNG.standard_normal((m, k)), RNG.standard_normal((k, n))
    comp = ir.accum(h, "add", x, w, op="mul", spec="ik,kj->ij")
    if m * k * n > 40000:  # against numpy only: the interpreters would take seconds
        [got] = run_once(backend, comp, {x: vx, w: vw}, [h])
    else:
        [(got, ref)] = run_against_interpreter(backend, comp, {x: vx, w: vw}, [h])
        assert_close(got, ref, "double")
    np.testing.assert_allclose(got, vx @ vw, rtol=1e-10, atol=1e-10)


def test_batched_matmul_then_relu(backend: Any) -> None:
    x, w = hosted((3, 4, 5), "x"), hosted((3, 5, 2), "w")
    h, y = Tnode.create((3, 4, 2), label="h"), hosted((3, 4, 2), "y")
    vx, vw = RNG.standard_normal((3, 4, 5)), RNG.standard_normal((3, 5, 2))
    comp = ir.block(ir.accum(h, "add", x, w, op="mul", spec="bik,bkj->bij"), ir.unop(y, "relu", h))
    [(got, ref)] = run_against_interpreter(backend, comp, {x: vx, w: vw}, [y])
    assert_close(got, ref, "single")
    np.testing.assert_allclose(got, np.maximum(vx @ vw, 0), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "dims_a,dims_b,dims_y",
    [((), (4,), (4,)), ((3, 1), (1, 4), (3, 4)), ((2, 3, 4), (4,), (2, 3, 4)), ((4,), (), (4,))],
)
def test_broadcasting(backend: Any, dims_a: tuple, dims_b: tuple, dims_y: tuple) -> None:  # type: ignore[type-arg]
    a, b, y = hosted(dims_a, "a"), hosted(dims_b, "b"), hosted(dims_y, "y")
    va, vb = RNG.standard_normal(dims_a), RNG.standard_normal(dims_b)
    [(got, ref)] = run_against_interpreter(backend, ir.binop(y, "sub", a, b), {a: va, b: vb}, [y])
    assert_close(got, ref, "single")
    np.testing.assert_allclose(got, np.float32(va) - np.float32(vb), rtol=1e-6)


@pytest.mark.parametrize("init", [True, False])
@pytest.mark.parametrize("accum", ["add", "max"])
def test_accumulation_with_and_without_neutral_init(backend: Any, init: bool, accum: str) -> None:
    x, acc = hosted((4, 3), "x", "double"), hosted((4,), "acc", "double")
    vx, start = RNG.standard_normal((4, 3)), RNG.standard_normal(4)
    comp = ir.accum(acc, accum, x, spec="ij->i", initialize_neutral=init)
    [(got, ref)] = run_against_interpreter(backend, comp, {x: vx, acc: start}, [acc])
    assert_close(got, ref, "double")
    fn = np.sum if accum == "add" else np.max
    expected = fn(vx, axis=1)
    if not init:
        expected = start + expected if accum == "add" else np.maximum(start, expected)
    np.testing.assert_allclose(got, expected, rtol=1e-12)


@pytest.mark.parametrize("prec", ALL_PRECS)
def test_fetch_constant_every_precision(backend: Any, prec: str) -> None:
    require_precs(backend, prec)
    y = hosted((2, 3), "y", prec)
    [(got, ref)] = run_against_interpreter(backend, ir.fetch(y, ir.Constant(5.0)), {}, [y])
    assert_close(got, ref, prec)
    assert (got.astype(np.float64) == 5.0).all()


def test_fetch_range_and_constant_fill(backend: Any) -> None:
    r, f = hosted((2, 3), "r", "int32"), hosted((2, 2), "f", "double")
    comp = ir.block(
        ir.fetch(r, ir.Range_over_offsets()), ir.fetch(f, ir.Constant_fill((1.5, -2.0, 3.25, 0.0)))
    )
    (gr, rr), (gf, rf) = run_against_interpreter(backend, comp, {}, [r, f])
    np.testing.assert_array_equal(gr, np.arange(6).reshape(2, 3))
    np.testing.assert_array_equal(gf, [[1.5, -2.0], [3.25, 0.0]])
    assert_close(gr, rr, "int32")
    assert_close(gf, rf, "double")


@pytest.mark.parametrize("batch", [0, 2, 3])
def test_fetch_slice_and_embed_symbol(backend: Any, batch: int) -> None:
    i = StaticSymbol("i", range=4)
    data, row, e = hosted((4, 3), "data"), hosted((3,), "row"), hosted((2,), "e", "int32")
    vd = RNG.standard_normal((4, 3))
    comp = ir.block(ir.fetch(row, ir.Slice(i, data)), ir.fetch(e, ir.Embed_symbol(i)))
    (gr, rr), (ge, re) = run_against_interpreter(
        backend, comp, {data: vd}, [row, e], {"i": batch}, (i,)
    )
    np.testing.assert_array_equal(gr, vd[batch].astype(np.float32))
    np.testing.assert_array_equal(ge, [batch, batch])
    assert_close(gr, rr, "single")
    assert_close(ge, re, "int32")


def test_static_binding_changes_between_runs(backend: Any) -> None:
    from arrayjit_conformance.harness import new_context

    i = StaticSymbol("i", range=5)
    data, row = hosted((5, 4), "data"), hosted((4,), "row")
    vd = RNG.standard_normal((5, 4))
    data.set_values(vd)
    r = backend.link(
        new_context(backend),
        backend.compile(ir.fetch(row, ir.Slice(i, data)), name="pick", bindings=(i,)),
    )
    for k in (4, 0, 2, 2, 1):
        r.bindings["i"] = k
        r()
        backend.to_host(r.context, row)
        np.testing.assert_array_equal(row.get_values(), vd[k].astype(np.float32))


def test_virtual_local_and_materialized_nodes(backend: Any) -> None:
    n = 32
    a, b, c = hosted((n,), "a"), hosted((n,), "b"), hosted((n,), "c")
    t1, t2 = Tnode.create((n,), label="t1"), Tnode.create((n,), label="t2")
    kept = Tnode.create((n,), label="kept", memory_mode=(mm.Materialized(), 1))
    y, z = hosted((n,), "y"), hosted((n,), "z")
    comp = ir.block(
        ir.binop(t1, "mul", a, b),
        ir.binop(t2, "add", t1, c),
        ir.unop(kept, "relu", t2),
        ir.binop(y, "mul", kept, kept),
        ir.unop(z, "neg", kept),
    )
    va, vb, vc = (RNG.standard_normal(n) for _ in range(3))
    (gy, ry), (gz, rz) = run_against_interpreter(backend, comp, {a: va, b: vb, c: vc}, [y, z])
    assert t1.known_virtual() and t2.known_virtual() and not kept.known_virtual()
    relu = np.maximum(np.float32(va) * np.float32(vb) + np.float32(vc), 0)
    np.testing.assert_allclose(gy, relu * relu, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gz, -relu, rtol=1e-5, atol=1e-6)
    assert_close(gy, ry, "single")
    assert_close(gz, rz, "single")


def test_local_reduction_feeding_an_output(backend: Any) -> None:
    x, y = hosted((5, 8), "x", "double"), hosted((5,), "y", "double")
    s = Tnode.create((5,), label="s", prec="double")
    comp = ir.block(ir.accum(s, "add", x, spec="ij->i"), ir.unop(y, "sqrt", s))
    vx = RNG.uniform(0, 1, (5, 8))
    [(got, ref)] = run_against_interpreter(backend, comp, {x: vx}, [y])
    assert_close(got, ref, "double")
    np.testing.assert_allclose(got, np.sqrt(vx.sum(1)), rtol=1e-12)


@pytest.mark.parametrize("value", [0.0, 1.0])
def test_padding(backend: Any, value: float) -> None:
    x = hosted((3,), "x", padding=Padding(((1, 2),), value))
    y = hosted((3,), "y")
    vx = np.array([1.0, 2.0, 3.0])
    [(got, ref)] = run_against_interpreter(backend, ir.binop(y, "mul", x, x), {x: vx}, [y])
    np.testing.assert_allclose(got, vx * vx)
    assert_close(got, ref, "single")


def test_empty_nodes(backend: Any) -> None:
    a, y = hosted((0,), "a"), hosted((0,), "y")
    [(got, ref)] = run_against_interpreter(backend, ir.unop(y, "neg", a), {a: np.zeros(0)}, [y])
    assert got.shape == (0,) and ref.shape == (0,)


@pytest.mark.parametrize("op", ["log", "log2", "sqrt", "exp", "recip_sqrt"])
@pytest.mark.parametrize("prec", ["int32", "int64"])
def test_integer_math_through_floats(backend: Any, op: str, prec: str) -> None:
    """Results convert by the saturating rule: log 0 (-inf) gives the smallest integer, 1/sqrt 0
    (+inf) the largest; others truncate."""
    require_precs(backend, prec)
    x, y = hosted((5,), "x", prec), hosted((5,), "y", prec)
    [(got, ref)] = run_against_interpreter(
        backend, ir.unop(y, op, x), {x: np.array([0, 1, 2, 8, 20])}, [y]
    )
    assert_close(got, ref, prec)
    if op == "log":
        np.testing.assert_array_equal(got, [np.iinfo(got.dtype).min, 0, 0, 2, 2])
    if op == "recip_sqrt":
        np.testing.assert_array_equal(got, [np.iinfo(got.dtype).max, 1, 0, 0, 0])
