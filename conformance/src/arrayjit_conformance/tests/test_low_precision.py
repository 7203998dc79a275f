"""Half, bfloat16 and fp8 values are rounded alike wherever they live, on every backend.

- A small-float intermediate that the optimizer inlines (virtual) rounds to its precision
  where it is computed, exactly as when it is stored (hosted): both give the same bits, and
  they equal a numpy/ml_dtypes oracle that rounds every node's value to its precision (float32
  arithmetic, one rounding per node; a reduction accumulates in float32 and rounds once).
- A reduction into a small float (sum, product, multiply-accumulate) accumulates in float32 and
  rounds once, at the end; max and min give the same bits as rounding at every step would;
  elementwise ops still round at every node.
- Host ``set_values`` of float64 data into bfloat16 and fp8 rounds once, from the value given
  (ml_dtypes' own cast from float64 goes through float32 and rounds twice): checked at the
  midpoints between neighbouring values of the format and one float64 ulp either side, where
  a double rounding goes wrong, and on a large random sample against an exact oracle.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from arrayjit_conformance.harness import hosted, require_precs, run_once
from arrayjit_ir import ir
from arrayjit_tnode import Prec, Tnode

SMALL = ("half", "bfloat16", "fp8")


def _dtype(prec: str) -> Any:
    return Prec[prec].numpy_dtype


def _round(v: np.ndarray, prec: str) -> np.ndarray:
    """float32 values rounded to ``prec`` (ties to even), back as float32."""
    return np.asarray(v, np.float32).astype(_dtype(prec)).astype(np.float32)


def _run(backend: Any, comp: Any, outs: list[Tnode]) -> list[np.ndarray]:
    return [got.astype(np.float32) for got in run_once(backend, comp, {}, outs)]


def _chain(backend: Any, prec: str, materialize: bool, vals: dict[str, np.ndarray]) -> np.ndarray:
    """``t = a * b`` (prec), ``u = t + c`` (prec), ``s = sum_j u`` (prec), ``y = s * 1.5 + u``
    (single): t, u and s inlined unless ``materialize``."""
    n, m = vals["a"].shape
    a, b, c = (hosted((n, m), k) for k in "abc")
    for tn, k in zip((a, b, c), "abc"):
        tn.set_values(vals[k])

    def node(dims: tuple[int, ...], label: str) -> Tnode:
        if materialize:
            return hosted(dims, label, prec)
        return Tnode.create(dims, prec=prec, label=label)

    t, u, s = node((n, m), "t"), node((n, m), "u"), node((n,), "s")
    k = hosted((), "k")
    k.set_values(np.array(1.5))
    y = hosted((n, m), "y")
    comp = ir.block(
        ir.binop(t, "mul", a, b),
        ir.binop(u, "add", t, c),
        ir.accum(s, "add", u, spec="ij->i"),
        ir.ternop(y, "fma", s, k, u, spec="i,,ij->ij"),
    )
    [got] = _run(backend, comp, [y])
    if not materialize:
        assert all(tn.memory_mode is not None and "Virtual" in str(tn.memory_mode) for tn in (t, u))
    return got


def _oracle(prec: str, vals: dict[str, np.ndarray]) -> np.ndarray:
    a, b, c = (vals[k].astype(np.float32) for k in "abc")
    t = _round(a * b, prec)
    u = _round(t + c, prec)
    s = np.zeros(a.shape[0], np.float32)
    for j in range(a.shape[1]):  # a reduction accumulates in float32 (24 terms: in order) ...
        s = s + u[:, j]
    s = _round(s, prec)  # ... and rounds once
    out = np.empty_like(u)
    for i in range(u.shape[0]):
        for j in range(u.shape[1]):
            exact = Fraction(float(s[i])) * Fraction(1.5) + Fraction(float(u[i, j]))
            out[i, j] = np.float32(float(exact))  # fma: one rounding (float64 holds it exactly)
    return out


@pytest.mark.parametrize("prec", SMALL)
def test_virtual_and_stored_small_floats_round_alike(backend: Any, prec: str) -> None:
    require_precs(backend, prec)
    rng = np.random.default_rng(7)
    n, m = 8, 24
    vals = {k: rng.uniform(-3, 3, (n, m)).astype(np.float32) for k in "abc"}
    expect = _oracle(prec, vals)
    virtual = _chain(backend, prec, False, vals)
    stored = _chain(backend, prec, True, vals)
    np.testing.assert_array_equal(virtual.view(np.uint32), stored.view(np.uint32))
    np.testing.assert_array_equal(virtual, expect)


@pytest.mark.parametrize("prec", SMALL)
def test_inlined_small_float_rounds_before_a_wider_reader(backend: Any, prec: str) -> None:
    """``t = a / b`` in prec, inlined into ``y = t * 3`` of single precision."""
    require_precs(backend, prec)
    rng = np.random.default_rng(11)
    av, bv = rng.uniform(0.5, 4, (2, 64)).astype(np.float32)
    a, b, y = hosted((64,), "a"), hosted((64,), "b"), hosted((64,), "y")
    a.set_values(av)
    b.set_values(bv)
    t = Tnode.create((64,), prec=prec, label="t")
    three = hosted((), "three")
    three.set_values(np.array(3.0))
    [got] = _run(backend, ir.block(ir.binop(t, "div", a, b), ir.binop(y, "mul", t, three)), [y])
    np.testing.assert_array_equal(got, _round(av / bv, prec) * np.float32(3))


def _reduce(backend: Any, prec: str, op: str, vals: np.ndarray, **kw: Any) -> np.ndarray:
    """Row reductions ``accum(y, op, x, spec="ij->i")`` of ``vals`` in ``prec``, hosted."""
    rows, n = vals.shape
    x, y = hosted((rows, n), "x", prec), hosted((rows,), "y", prec)
    x.set_values(vals)
    if "start" in kw:
        y.set_values(kw.pop("start"))
    [got] = _run(backend, ir.accum(y, op, x, spec="ij->i", **kw), [y])
    return got


@pytest.mark.parametrize("prec", SMALL)
def test_small_float_reductions_accumulate_in_float32_and_round_once(
    backend: Any, prec: str
) -> None:
    """Sums (from neutral and onto an existing value) and products of short rows (in order:
    fewer terms than a summation block) are the float32 fold rounded once; a per-step rounding
    would stall (half an ulp of 4 added to 4 rounds back to 4, a tie to even) and differ."""
    require_precs(backend, prec)
    rng = np.random.default_rng(13)
    n = 48
    vals = _round(rng.uniform(0.0, 0.25, (3, n)), prec)
    half_ulp = float(np.spacing(_dtype(prec).type(4.0))) / 2
    vals[0] = half_ulp  # many small equal terms: the stalling case
    start = _round(rng.uniform(2, 6, 3), prec)
    start[0] = 4.0
    prods = _round(rng.uniform(0.9, 1.1, (3, n)), prec)

    def fold(init: np.ndarray, v: np.ndarray, mul: bool) -> np.ndarray:
        acc = init.astype(np.float32)
        for j in range(v.shape[1]):
            acc = acc * v[:, j] if mul else acc + v[:, j]
        return _round(acc, prec)

    sums = _reduce(backend, prec, "add", vals)
    np.testing.assert_array_equal(sums, fold(np.zeros(3), vals, False))
    onto = _reduce(backend, prec, "add", vals, start=start, initialize_neutral=False)
    np.testing.assert_array_equal(onto, fold(start, vals, False))
    stepwise = np.float32(4.0)
    for _ in range(n):
        stepwise = _round(stepwise + vals[0, 0], prec)[()]
    assert float(stepwise) == 4.0
    assert float(onto[0]) == float(_round(np.float32(4.0 + n * half_ulp), prec)) > 4.0
    got_p = _reduce(backend, prec, "mul", prods)
    np.testing.assert_array_equal(got_p, fold(np.ones(3), prods, True))


@pytest.mark.parametrize("prec", SMALL)
def test_small_float_multiply_accumulate_rounds_once(backend: Any, prec: str) -> None:
    """``d =+ x * v`` over a reduced axis of 16, onto existing values: each step is a float32
    ``fma`` of the stored operands into the float32 accumulator, and only the end rounds."""
    require_precs(backend, prec)
    rng = np.random.default_rng(17)
    rows, k = 5, 16
    xv = _round(rng.uniform(-2, 2, (rows, k)), prec)
    vv = _round(rng.uniform(-2, 2, k), prec)
    dv = _round(rng.uniform(-2, 2, rows), prec)
    x, v, d = hosted((rows, k), "x", prec), hosted((k,), "v", prec), hosted((rows,), "d", prec)
    x.set_values(xv)
    v.set_values(vv)
    d.set_values(dv)
    comp = ir.accum(d, "add", x, v, op="mul", spec="ik,k->i", initialize_neutral=False)
    [got] = _run(backend, comp, [d])
    want = np.empty(rows, np.float32)
    for i in range(rows):
        acc = Fraction(float(dv[i]))
        for j in range(k):  # float32 fma: the product of two small floats is exact in float32
            acc = Fraction(float(np.float32(float(acc + Fraction(float(xv[i, j] * vv[j]))))))
        want[i] = np.float32(float(acc))
    np.testing.assert_array_equal(got, _round(want, prec))


@pytest.mark.parametrize("prec", SMALL)
def test_small_float_max_min_reductions_are_unchanged(backend: Any, prec: str) -> None:
    """max and min are exact: the float32 accumulator gives the stored values' extremes."""
    require_precs(backend, prec)
    vals = _round(np.random.default_rng(19).uniform(-50, 50, (4, 100)), prec)
    np.testing.assert_array_equal(_reduce(backend, prec, "max", vals), vals.max(axis=1))
    np.testing.assert_array_equal(_reduce(backend, prec, "min", vals), vals.min(axis=1))


@pytest.mark.parametrize("prec", SMALL)
def test_small_float_elementwise_ops_round_at_every_node(backend: Any, prec: str) -> None:
    """``t = a + b``, ``y = t + b`` (both stored in prec, t inlined): two roundings, not one.
    With ``b`` half an ulp of ``a = 4``, each rounding is a tie back to 4; once, it would be
    ``4 + ulp``."""
    require_precs(backend, prec)
    av = np.full(8, 4.0, np.float32)
    bv = np.full(8, float(np.spacing(_dtype(prec).type(4.0))) / 2, np.float32)
    a, b, y = hosted((8,), "a", prec), hosted((8,), "b", prec), hosted((8,), "y", prec)
    a.set_values(av)
    b.set_values(bv)
    t = Tnode.create((8,), prec=prec, label="t")
    [got] = _run(backend, ir.block(ir.binop(t, "add", a, b), ir.binop(y, "add", t, b)), [y])
    np.testing.assert_array_equal(got, _round(_round(av + bv, prec) + bv, prec))
    assert float(got[0]) == 4.0


# ---- host conversions from float64 ----


def _grid(prec: str) -> np.ndarray:
    """Every finite non-negative value of ``prec``, ascending, as float64."""
    bits = np.arange(1 << (8 * Prec[prec].byte_size), dtype=np.uint64)
    raw = bits.astype(np.uint16 if prec == "bfloat16" else np.uint8)
    with np.errstate(invalid="ignore"):  # NaN patterns
        vals = raw.view(_dtype(prec)).astype(np.float64)
    vals = vals[np.isfinite(vals) & ~np.signbit(vals)]
    return np.unique(vals)


def _nearest_even(x: np.ndarray, grid: np.ndarray, prec: str) -> np.ndarray:
    """float64 ``x`` rounded to ``prec`` exactly (ties to even; at or beyond the midpoint
    above the largest finite value, infinity), as ``prec``'s dtype. Distances to the two
    neighbours are exact in float64 (Sterbenz: neighbours within a factor 2)."""
    mag = np.abs(x)
    k = np.clip(np.searchsorted(grid, mag, side="right"), 1, len(grid) - 1)
    lo, hi = grid[k - 1], grid[k]
    d_lo, d_hi = mag - lo, hi - mag
    lo_even = np.asarray(lo).astype(_dtype(prec)).view(_raw(prec)) % 2 == 0
    pick = np.where(d_lo < d_hi, lo, np.where(d_hi < d_lo, hi, np.where(lo_even, lo, hi)))
    pick = np.where(mag >= grid[-1], grid[-1], pick)
    overflow = mag >= grid[-1] + (grid[-1] - grid[-2]) / 2
    pick = np.where(overflow, np.inf, pick)
    return np.copysign(pick, x).astype(_dtype(prec))


def _raw(prec: str) -> Any:
    return np.uint16 if prec == "bfloat16" else np.uint8


def _set_and_get(values: np.ndarray, prec: str) -> np.ndarray:
    tn = hosted(values.shape, "h", prec)
    tn.set_values(values)
    return np.asarray(tn.get_values())


@pytest.mark.parametrize("prec", ["bfloat16", "fp8"])
def test_set_values_from_float64_rounds_once_at_every_midpoint(prec: str) -> None:
    grid = _grid(prec)
    mid = (grid[:-1] + grid[1:]) / 2  # exact in float64
    probes = np.concatenate(
        [mid, np.nextafter(mid, np.inf), np.nextafter(mid, -np.inf), grid, 2 * grid[-1:]]
    )
    probes = np.concatenate([probes, -probes])
    got = _set_and_get(probes, prec)
    expect = _nearest_even(probes, grid, prec)
    assert got.dtype == _dtype(prec)
    bad = got.view(_raw(prec)) != expect.view(_raw(prec))
    assert not bad.any(), f"{bad.sum()} of {probes.size} wrong, e.g. {probes[bad][:4]}"
    # ml_dtypes' own cast from float64 rounds twice (through float32): these probes catch it.
    with np.errstate(over="ignore"):
        naive = probes.astype(_dtype(prec)).view(_raw(prec))
    assert (naive != expect.view(_raw(prec))).sum() > 0


@pytest.mark.parametrize("prec", ["bfloat16", "fp8"])
def test_set_values_from_float64_matches_exact_rounding_on_random_data(prec: str) -> None:
    rng = np.random.default_rng(5)
    grid = _grid(prec)
    scale = np.exp2(rng.integers(-20, 20, 20000).astype(np.float64))
    probes = rng.standard_normal(20000) * scale
    got = _set_and_get(probes, prec)
    expect = _nearest_even(probes, grid, prec)
    np.testing.assert_array_equal(got.view(_raw(prec)), expect.view(_raw(prec)))


def test_set_values_nan_and_infinities_into_small_floats() -> None:
    vals = np.array([np.nan, np.inf, -np.inf, -0.0, 1e300, -1e-300])
    got = _set_and_get(vals, "bfloat16").astype(np.float64)
    assert np.isnan(got[0]) and got[1] == np.inf and got[2] == -np.inf
    assert got[3] == 0 and np.signbit(got[3]) and got[4] == np.inf
    assert got[5] == 0 and np.signbit(got[5])
    assert ml_dtypes.bfloat16 == _dtype("bfloat16")
