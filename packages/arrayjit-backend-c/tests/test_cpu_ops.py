"""Every op on every precision, and a few compositions, on both CPU backends under both
schedulers, against the reference interpreter (and numpy)."""

from typing import Any

import numpy as np
import pytest
from cpu_helpers import BINOPS, FLOATS, INTS, UNOPS, compare, run_both

from arrayjit_ir import ir, ops
from arrayjit_tnode import Tnode

RNG = np.random.default_rng(0)


BACKENDS = ["sync_cc", "multicore_cc", "sync_llvm", "multicore_llvm"]
"""The backends every test taking the ``backend`` fixture runs on (see conftest.py)."""


def unop_inputs(op: str, prec: str, n: int) -> np.ndarray:
    if prec in INTS:
        lo = 0 if prec in ("byte", "uint16", "uint32", "uint64") else -5
        return RNG.integers(lo, 9, n)
    if op in ("log", "log2", "sqrt", "recip_sqrt"):
        return RNG.uniform(0.1, 3, n)
    return RNG.uniform(-3, 3, n)


@pytest.mark.parametrize("op", UNOPS)
@pytest.mark.parametrize("prec", FLOATS + INTS)
def test_unops(backend: Any, op: str, prec: str) -> None:
    x = Tnode.create((16,), prec=prec, label="x", hosted=True)
    y = Tnode.create((16,), prec=prec, label="y", hosted=True)
    got, ref = run_both(backend, ir.unop(y, op, x), {x: unop_inputs(op, prec, 16)}, y)
    compare(got, ref, prec)


@pytest.mark.parametrize("op", BINOPS)
@pytest.mark.parametrize("prec", FLOATS + INTS)
def test_binops(backend: Any, op: str, prec: str) -> None:
    a = Tnode.create((3, 5), prec=prec, label="a", hosted=True)
    b = Tnode.create((5,), prec=prec, label="b", hosted=True)
    y = Tnode.create((3, 5), prec=prec, label="y", hosted=True)
    va: np.ndarray
    vb: np.ndarray
    if prec in FLOATS:
        va, vb = RNG.uniform(-3, 3, (3, 5)), RNG.uniform(0.5, 3, 5)
        if op == "pow":
            va = np.abs(va)
    else:
        va, vb = RNG.integers(0, 9, (3, 5)), RNG.integers(0, 4, 5)
        if op == "pow":
            vb = vb % 3
    got, ref = run_both(backend, ir.binop(y, op, a, b), {a: va, b: vb}, y)
    compare(got, ref, prec)


def test_ternops_matmul_reductions(backend: Any) -> None:
    c, a, b = (Tnode.create((4, 6), label=n, hosted=True) for n in ("c", "a", "b"))
    w, f = (
        Tnode.create((4, 6), label="w", hosted=True),
        Tnode.create((4, 6), label="f", hosted=True),
    )
    vals = {
        c: RNG.integers(0, 2, (4, 6)).astype(float),
        a: RNG.standard_normal((4, 6)),
        b: RNG.standard_normal((4, 6)),
    }
    got, ref = run_both(backend, ir.ternop(w, "where", c, a, b), vals, w)
    compare(got, ref, "single")
    got, ref = run_both(backend, ir.ternop(f, "fma", a, b, c), vals, f)
    compare(got, ref, "single")
    x, m = (
        Tnode.create((5, 7), label="x", hosted=True),
        Tnode.create((7, 3), label="m", hosted=True),
    )
    h, out = Tnode.create((5, 3), label="h"), Tnode.create((5, 3), label="out", hosted=True)
    comp = ir.block(ir.accum(h, "add", x, m, op="mul", spec="ik,kj->ij"), ir.unop(out, "relu", h))
    vx, vm = RNG.standard_normal((5, 7)), RNG.standard_normal((7, 3))
    got, _ = run_both(backend, comp, {x: vx, m: vm}, out)
    np.testing.assert_allclose(got, np.maximum(vx @ vm, 0), rtol=1e-5, atol=1e-6)
    s = Tnode.create((5,), label="s", hosted=True)
    got, _ = run_both(backend, ir.accum(s, "max", x, spec="ij->i"), {x: vx}, s)
    np.testing.assert_allclose(got, vx.max(1).astype(np.float32))


# ---- uint4x32: random bits, checked bit for bit ----


def test_threefry_and_uniform_bits(backend: Any) -> None:
    key = Tnode.create((3,), prec="uint4x32", label="key", hosted=True)
    ctr = Tnode.create((3,), prec="uint4x32", label="ctr", hosted=True)
    bits = Tnode.create((3,), prec="uint4x32", label="bits", hosted=True)
    vk = RNG.integers(0, 2**32, (3, 4), dtype=np.uint64).astype(np.uint32)
    vc = np.arange(12, dtype=np.uint32).reshape(3, 4)
    got, ref = run_both(backend, ir.binop(bits, "threefry4x32", key, ctr), {key: vk, ctr: vc}, bits)
    np.testing.assert_array_equal(got, ops.threefry4x32(vk, vc))
    np.testing.assert_array_equal(got, ref)
    vb = RNG.integers(0, 2**32, (3, 4), dtype=np.uint64).astype(np.uint32)
    vb[0] = [0, 0, 5, 5]
    vb[1] = [0xFFFFFFFF, 0xFFFFFFFF, 1, 2]
    for prec in ("single", "double", "half", "bfloat16", "int32", "int64", "uint64", "byte"):
        u = Tnode.create((3,), prec=prec, label="u", hosted=True)
        got, ref = run_both(backend, ir.unop(u, "uint4x32_to_prec_uniform", bits), {bits: vb}, u)
        compare(got, ref, prec)
        np.testing.assert_array_equal(got, ref)


def test_uint4x32_arithmetic_and_conversions(backend: Any) -> None:
    a, b, y = (Tnode.create((4,), prec="uint4x32", label=n, hosted=True) for n in "aby")
    va = RNG.integers(0, 2**32, (4, 4), dtype=np.uint64).astype(np.uint32)
    vb = RNG.integers(0, 2**32, (4, 4), dtype=np.uint64).astype(np.uint32)
    vb[0] = 0
    for op in ("add", "mul", "div", "mod", "cmplt", "max"):
        got, ref = run_both(backend, ir.binop(y, op, a, b), {a: va, b: vb}, y)
        np.testing.assert_array_equal(got, ref)
    c = Tnode.create((4,), prec="single", label="c", hosted=True)
    got, ref = run_both(backend, ir.ternop(y, "where", a, a, b), {a: va, b: vb}, y)
    np.testing.assert_array_equal(got, ref)
    got, ref = run_both(backend, ir.ternop(c, "where", b, a, b), {a: va, b: vb}, c)
    np.testing.assert_array_equal(got, ref)
    for prec in ("int64", "int32", "single", "byte"):
        x = Tnode.create((4,), prec=prec, label="x", hosted=True)
        vx = np.array([-5, 0, 7, 2**31 - 1]) if prec != "byte" else np.array([0, 1, 200, 255])
        got, ref = run_both(backend, ir.unop(y, "identity", x), {x: vx}, y)
        np.testing.assert_array_equal(got, ref)
        got, ref = run_both(backend, ir.unop(x, "identity", a), {a: va}, x)
        np.testing.assert_array_equal(got, ref)


def test_random_uniform_on_a_large_node(backend: Any) -> None:
    """Threefry over a counter node big enough for the parallel paths, then uniform floats:
    bit for bit against the numpy reference, and plausibly uniform."""
    n = 1 << 16
    key = Tnode.create((), prec="uint4x32", label="key", hosted=True)
    ctr = Tnode.create((n,), prec="uint4x32", label="ctr", hosted=True)
    bits = Tnode.create((n,), prec="uint4x32", label="bits")
    u = Tnode.create((n,), prec="single", label="u", hosted=True)
    vk = np.array([1, 2, 3, 4], dtype=np.uint32)
    vc = np.zeros((n, 4), dtype=np.uint32)
    vc[:, 0] = np.arange(n)
    comp = ir.block(
        ir.binop(bits, "threefry4x32", key, ctr), ir.unop(u, "uint4x32_to_prec_uniform", bits)
    )
    got, _ = run_both(backend, comp, {key: vk, ctr: vc}, u, reference=False)
    expected = ops.uint4x32_to_uniform(ops.threefry4x32(vk, vc), np.dtype(np.float32), "single")
    np.testing.assert_array_equal(got, expected)
    assert got.min() >= 0.0 and got.max() < 1.0 and abs(got.mean() - 0.5) < 0.01
