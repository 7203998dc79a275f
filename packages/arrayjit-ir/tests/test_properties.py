"""Property tests: optimized and unoptimized code agree with a direct numpy computation."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from ir_helpers import run

from arrayjit_ir import ir
from arrayjit_tnode import Tnode

SHAPES = st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple)
UNARY = {
    "neg": np.negative,
    "relu": lambda x: np.maximum(x, 0),
    "tanh": np.tanh,
    "exp": lambda x: np.exp(np.clip(x, -5, 5)),
    "identity": lambda x: x,
}
BINARY = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "max": np.maximum,
    "min": np.minimum,
}
PRECS = {
    "single": (1e-5, 1e-5),
    "double": (1e-12, 1e-12),
    "half": (3e-3, 3e-3),
    "bfloat16": (2e-2, 2e-2),
}


@st.composite
def chains(draw: st.DrawFn) -> tuple[tuple[int, ...], str, list[tuple[str, str]]]:
    shape = draw(SHAPES)
    prec = draw(st.sampled_from(sorted(PRECS)))
    steps = draw(
        st.lists(
            st.tuples(st.sampled_from(sorted(UNARY)), st.sampled_from(sorted(BINARY))),
            min_size=1,
            max_size=4,
        )
    )
    return shape, prec, steps


@given(chains(), st.integers(0, 2**31 - 1))
def test_elementwise_chains(case: tuple, seed: int) -> None:  # type: ignore[type-arg]
    shape, prec, steps = case
    rng = np.random.default_rng(seed)
    a = Tnode.create(shape, label="a", hosted=True, prec=prec)
    b = Tnode.create(shape, label="b", hosted=True, prec=prec)
    va = rng.uniform(-2, 2, shape).astype(a.prec.numpy_dtype)
    vb = rng.uniform(-2, 2, shape).astype(b.prec.numpy_dtype)
    items = []
    cur, ref = a, va.astype(np.float64)
    for k, (u, bop) in enumerate(steps):
        t1 = Tnode.create(shape, label=f"u{k}", prec=prec)
        t2 = Tnode.create(shape, label=f"b{k}", prec=prec)
        op_u = "exp" if u == "exp" else u
        items += [ir.unop(t1, op_u, cur), ir.binop(t2, bop, t1, b)]
        fn = UNARY[u] if u != "exp" else np.exp
        ref = BINARY[bop](fn(ref), vb.astype(np.float64))
        cur = t2
    out = Tnode.create(shape, label="out", hosted=True, prec=prec)
    items.append(ir.unop(out, "identity", cur))
    comp = ir.block(*items)
    rtol, atol = PRECS[prec]
    plain = run(comp, {a: va, b: vb}, [out], optimized=False)[out].astype(np.float64)
    opt = run(comp, {a: va, b: vb}, [out])[out].astype(np.float64)
    if prec in ("single", "double"):
        np.testing.assert_allclose(opt, plain, rtol=rtol, atol=atol)
        # numpy's chain runs in double: where it leaves the node's range, single is inf.
        fits = ~(np.abs(ref) > np.finfo(a.prec.numpy_dtype).max / 2)
        np.testing.assert_allclose(opt[fits], ref[fits], rtol=rtol * 10, atol=atol * 10)
    else:
        # Small floats round every stored intermediate: compare loosely with the exact chain.
        finite = np.isfinite(ref) & (np.abs(ref) < 1e3)
        np.testing.assert_allclose(opt[finite], plain[finite], rtol=0.1, atol=0.1)


@given(SHAPES, st.sampled_from(["add", "max", "min"]), st.integers(0, 2**31 - 1))
def test_reductions_over_last_axis(shape: tuple, op: str, seed: int) -> None:  # type: ignore[type-arg]
    rng = np.random.default_rng(seed)
    x = Tnode.create(shape, label="x", hosted=True, prec="double")
    r = Tnode.create(shape[:-1], label="r", hosted=True, prec="double")
    y = Tnode.create(shape[:-1], label="y", hosted=True, prec="double")
    letters = "abc"[: len(shape)]
    comp = ir.block(ir.accum(r, op, x, spec=f"{letters}->{letters[:-1]}"), ir.unop(y, "neg", r))
    vx = rng.standard_normal(shape)
    fn = {"add": np.sum, "max": np.max, "min": np.min}[op]
    expected = -fn(vx, axis=-1)
    for optimized in (False, True):
        got = run(comp, {x: vx}, [y], optimized=optimized)[y]
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


@given(st.integers(1, 4), st.integers(1, 4), st.integers(1, 4), st.integers(0, 2**31 - 1))
def test_matmul_shapes(m: int, k: int, n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = Tnode.create((m, k), label="x", hosted=True, prec="double")
    w = Tnode.create((k, n), label="w", hosted=True, prec="double")
    h = Tnode.create((m, n), label="h", prec="double")
    y = Tnode.create((m, n), label="y", hosted=True, prec="double")
    comp = ir.block(ir.accum(h, "add", x, w, op="mul", spec="mk,kn->mn"), ir.unop(y, "tanh", h))
    vx, vw = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    np.testing.assert_allclose(run(comp, {x: vx, w: vw}, [y])[y], np.tanh(vx @ vw), rtol=1e-12)
