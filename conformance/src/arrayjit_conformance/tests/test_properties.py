"""Property-based cases: random elementwise chains, reductions and broadcasts agree with the
reference interpreter and with numpy (fixed-seed ``ci`` profile under tox)."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from arrayjit_conformance.harness import assert_close, hosted, run_against_interpreter
from arrayjit_ir import ir
from arrayjit_tnode import Tnode

SAFE_UNOPS = {
    "neg": np.negative,
    "relu": lambda v: np.maximum(v, 0),
    "tanh": np.tanh,
    "sin": np.sin,
    "identity": lambda v: v,
}
SAFE_BINOPS = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "max": np.maximum,
    "min": np.minimum,
}

shapes = st.lists(st.integers(1, 6), min_size=1, max_size=3).map(tuple)


@given(
    shape=shapes,
    chain=st.lists(
        st.one_of(
            st.tuples(st.just(1), st.sampled_from(sorted(SAFE_UNOPS))),
            st.tuples(st.just(2), st.sampled_from(sorted(SAFE_BINOPS))),
        ),
        min_size=1,
        max_size=6,
    ),
    seed=st.integers(0, 2**16),
)
def test_elementwise_chains(backend: Any, shape: tuple[int, ...], chain: list, seed: int) -> None:  # type: ignore[type-arg]
    rng = np.random.default_rng(seed)
    a, b = hosted(shape, "a", "double"), hosted(shape, "b", "double")
    va, vb = rng.standard_normal(shape), rng.standard_normal(shape)
    cur, expected, steps = a, va, []
    for k, (arity, op) in enumerate(chain):
        out = Tnode.create(shape, label=f"t{k}", prec="double")
        if arity == 1:
            steps.append(ir.unop(out, op, cur))
            expected = SAFE_UNOPS[op](expected)
        else:
            steps.append(ir.binop(out, op, cur, b))
            expected = SAFE_BINOPS[op](expected, vb)
        cur = out
    y = hosted(shape, "y", "double")
    steps.append(ir.unop(y, "identity", cur))
    [(got, ref)] = run_against_interpreter(backend, ir.block(*steps), {a: va, b: vb}, [y])
    assert_close(got, ref, "double")
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


@given(
    dims=st.lists(st.integers(1, 5), min_size=1, max_size=3),
    data=st.data(),
    accum=st.sampled_from(["add", "max", "min"]),
)
def test_reductions_over_any_axes(backend: Any, dims: list[int], data: Any, accum: str) -> None:
    letters = "ijk"[: len(dims)]
    keep = data.draw(st.lists(st.booleans(), min_size=len(dims), max_size=len(dims)))
    out_axes = "".join(ax for ax, k in zip(letters, keep) if k)
    x = hosted(tuple(dims), "x", "double")
    s = hosted(tuple(d for d, k in zip(dims, keep) if k), "s", "double")
    vx = np.random.default_rng(len(dims)).uniform(-1, 1, dims)
    comp = ir.accum(s, accum, x, spec=f"{letters}->{out_axes}")
    [(got, ref)] = run_against_interpreter(backend, comp, {x: vx}, [s])
    assert_close(got, ref, "double")
    reduced = tuple(k for k, kept in enumerate(keep) if not kept)
    fn = {"add": np.sum, "max": np.max, "min": np.min}[accum]
    np.testing.assert_allclose(got, fn(vx, axis=reduced) if reduced else vx, rtol=1e-12)


@given(rows=st.integers(1, 6), cols=st.integers(1, 6), seed=st.integers(0, 1000))
def test_outer_products(backend: Any, rows: int, cols: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    u, v, out = (
        hosted((rows,), "u", "double"),
        hosted((cols,), "v", "double"),
        hosted((rows, cols), "o", "double"),
    )
    vu, vv = rng.standard_normal(rows), rng.standard_normal(cols)
    comp = ir.binop(out, "mul", u, v, spec="i,j->ij")
    [(got, ref)] = run_against_interpreter(backend, comp, {u: vu, v: vv}, [out])
    assert_close(got, ref, "double")
    np.testing.assert_allclose(got, np.outer(vu, vv), rtol=1e-12)
