"""The bounds check of lowered code (:mod:`arrayjit_ir.bounds`), against a brute-force oracle:
every point of the loop box and of the static symbols' ranges enumerated with Python ints."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from arrayjit_ir import bounds, interpret, ir, lower, ops
from arrayjit_ir import low_level as L
from arrayjit_ir.assignments import Accum_op
from arrayjit_ir.indexing import Affine, Fixed_idx, Iterator, StaticSymbol, fresh_symbol
from arrayjit_ir.projections import Projections
from arrayjit_tnode import Padding, Tnode, UsageError


def _copy(dst: Tnode, src: Tnode, extents: tuple[int, ...], lhs: tuple, rhs: tuple) -> Accum_op:
    return Accum_op(
        dst,
        ops.Unop.identity,
        (src,),
        None,
        False,
        Projections(extents, _SYMS[: len(extents)], lhs, (rhs,)),
    )


_SYMS = (fresh_symbol(), fresh_symbol())


def test_slice_gets_the_sliced_nodes_range() -> None:
    data, row = Tnode.create((3, 4), label="data"), Tnode.create((4,), label="row")
    code = lower(ir.fetch(row, ir.Slice(StaticSymbol("i"), data)))
    assert bounds.static_ranges(code) == {"i": 3}
    assert bounds.static_ranges(code, [StaticSymbol("i", range=2)]) == {"i": 2}
    with pytest.raises(UsageError, match=r"node data#\d+ axis 0 is indexed by i, ranging over 0"):
        bounds.static_ranges(code, [StaticSymbol("i", range=4)])
    with pytest.raises(UsageError, match=r"declared with different ranges \[2, 3\]"):
        bounds.static_ranges(code, [StaticSymbol("i", range=2), StaticSymbol("i", range=3)])


def test_declared_range_too_large_fails_at_lowering() -> None:
    data, row = Tnode.create((3, 4), label="data"), Tnode.create((4,), label="row")
    with pytest.raises(UsageError, match=r"ranging over 0\.\.99 with i in 0\.\.100 .*size 3"):
        lower(ir.fetch(row, ir.Slice(StaticSymbol("i", range=100), data)))


def test_embedded_symbol_has_no_range() -> None:
    y = Tnode.create((2,), label="y")
    code = lower(ir.fetch(y, ir.Embed_symbol(StaticSymbol("k"))))
    assert bounds.static_ranges(code) == {"k": None}


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "3"])
def test_static_symbol_range_must_be_positive_int(bad: object) -> None:
    with pytest.raises(UsageError, match="range must be a positive integer"):
        StaticSymbol("i", range=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["", "a-b", "1x", 3])
def test_static_symbol_name_must_be_an_identifier(bad: object) -> None:
    with pytest.raises(UsageError, match="name must be an identifier"):
        StaticSymbol(bad)  # type: ignore[arg-type]


def test_padding_is_part_of_the_buffer() -> None:
    x = Tnode.create((4,), label="x", padding=Padding(((1, 2),)))  # buffer of 7 cells
    y = Tnode.create((7,), label="y")
    i = _SYMS[0]
    # logical index i - 1 is buffer index i (left margin 1): 0..6 reads both margins, in bounds
    lower(_copy(y, x, (7,), (Iterator(i),), (Affine(((1, i),), -1),)))
    with pytest.raises(
        UsageError,
        match=r"node x#\d+ axis 0 is indexed by i\d+ \+ 1, ranging over 1\.\.7, .*size 7",
    ):
        lower(_copy(y, x, (7,), (Iterator(i),), (Iterator(i),)))


def test_wrong_number_of_indices_and_unbound_loop_symbols() -> None:
    x, y = Tnode.create((4,), label="x"), Tnode.create((4,), label="y")
    with pytest.raises(UsageError, match=r"uses 2 indices .* has 1 axes"):
        bounds.check(L.Set(y, (Fixed_idx(0), Fixed_idx(0)), L.Constant(1.0)))
    with pytest.raises(UsageError, match=r"uses loop symbol i\d+ outside any loop"):
        bounds.check(L.Set(y, (Iterator(fresh_symbol()),), L.Get(x, (Fixed_idx(0),))))


def test_two_unranged_static_symbols_in_one_index_are_refused() -> None:
    x, y = Tnode.create((8,), label="x"), Tnode.create((1,), label="y")
    a, b = StaticSymbol("a"), StaticSymbol("b")
    code = L.Set(y, (Fixed_idx(0),), L.Get(x, (Affine(((1, a), (1, b)), 0),)))
    with pytest.raises(UsageError, match=r"several static symbols without a range \(a, b\)"):
        bounds.check(code)
    assert bounds.static_ranges(code, [StaticSymbol("a", range=3)]) == {"a": 3, "b": 6}


def test_empty_loops_are_not_checked() -> None:
    x = Tnode.create((0,), label="x")
    lower(ir.fetch(x, ir.Constant(1.0)))  # no access runs
    with pytest.raises(UsageError, match=r"ranging over 0\.\.0, but the axis has size 0"):
        bounds.check(L.Set(x, (Fixed_idx(0),), L.Constant(1.0)))


def test_interpreter_refuses_negative_indices() -> None:
    x = Tnode.create((4,), label="x")
    code = L.Set(x, (Fixed_idx(-1),), L.Constant(1.0))  # hand-built, never lowered
    buf = np.zeros(4, np.float32)
    with pytest.raises(UsageError, match=r"index \[-1\] is out of bounds \(negative\)"):
        interpret(code, {x: buf})
    assert not buf.any()


_axis = st.tuples(st.integers(-3, 3), st.integers(-6, 6))  # (coefficient, offset)


@given(
    extents=st.tuples(st.integers(0, 5), st.integers(1, 4)),
    dims=st.tuples(st.integers(0, 7), st.integers(1, 7)),
    coeffs=st.tuples(_axis, _axis),
    static=st.one_of(st.none(), st.tuples(st.integers(-2, 2), st.integers(1, 4))),
)
def test_interval_check_matches_brute_force(
    extents: tuple[int, int],
    dims: tuple[int, int],
    coeffs: tuple[tuple[int, int], tuple[int, int]],
    static: tuple[int, int] | None,
) -> None:
    """Reading ``x[c0*i0 + o0 (+ cs*s), c1*i1 + o1]`` over the loop box is refused exactly when
    some point of the box (and of ``s``'s declared range) is outside ``x``."""
    i0, i1 = _SYMS
    x, y = Tnode.create(dims, label="x"), Tnode.create((1,), label="y")
    terms0: list = [(coeffs[0][0], i0)]
    if static is not None:
        terms0.append((static[0], StaticSymbol("s", range=static[1])))
    idx = (Affine(tuple(terms0), coeffs[0][1]), Affine(((coeffs[1][0], i1),), coeffs[1][1]))
    body: L.Stmt = L.Set(y, (Fixed_idx(0),), L.Get(x, idx))
    code: L.Stmt = L.For_loop(i0, 0, extents[0] - 1, L.For_loop(i1, 0, extents[1] - 1, body))
    s_values = range(static[1]) if static is not None else [0]
    s_coeff = static[0] if static is not None else 0
    inside = all(
        0 <= coeffs[0][0] * a + coeffs[0][1] + s_coeff * s < dims[0]
        and 0 <= coeffs[1][0] * b + coeffs[1][1] < dims[1]
        for a, b, s in itertools.product(range(extents[0]), range(extents[1]), s_values)
    )
    if inside:
        bounds.check(code)
    else:
        with pytest.raises(UsageError, match=r"a read of node x#\d+ axis [01]"):
            bounds.check(code)


@given(
    rows=st.integers(1, 6),
    coeff=st.integers(-3, 3).filter(bool),
    offset=st.integers(-4, 8),
    extent=st.integers(1, 4),
)
def test_inferred_range_is_the_largest_safe_one(
    rows: int, coeff: int, offset: int, extent: int
) -> None:
    """``x[coeff*s + i + offset]`` over ``i < extent``: the inferred range of ``s`` is the
    largest ``n`` such that every ``s < n`` keeps every access inside (brute force)."""
    i = _SYMS[0]
    s = StaticSymbol("s")
    x, y = Tnode.create((rows,), label="x"), Tnode.create((1,), label="y")
    idx = (Affine(((coeff, s), (1, i)), offset),)
    code = L.For_loop(i, 0, extent - 1, L.Set(y, (Fixed_idx(0),), L.Get(x, idx)))

    def safe(v: int) -> bool:
        return all(0 <= coeff * v + a + offset < rows for a in range(extent))

    largest = 0
    while largest < 50 and all(safe(v) for v in range(largest + 1)):
        largest += 1
    if largest == 0:
        with pytest.raises(UsageError):
            bounds.static_ranges(code)
    else:
        assert bounds.static_ranges(code) == {"s": largest}
