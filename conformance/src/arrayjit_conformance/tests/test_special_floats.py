"""Special float values, bit for bit: NaN, infinities, signed zeros, subnormals, the largest
finite value and rounding ties through ``max``, ``min`` (elementwise and as reductions),
``relu``, ``satur01``, ``pow``, ``fma``, a multiply-accumulate, and a product inlined into a sum
(no silent contraction), on every float precision the backend supports.

The oracles are independent of arrayjit: numpy and ml_dtypes written plainly for the rules of
the IR README ("Semantics decided here"), Python's ``fractions`` for exact products and fused
multiply-adds. Results compare bit for bit (every NaN equals every NaN); ``pow`` of ordinary
finite values is a transcendental: within the math library's documented bound of the exact
value (1 ulp; 4 for double, the platform's library, and on the reference interpreter, numpy's)
and, where the library computes it, bit for bit its helper compiled directly
(``math_oracle``; ``test_math_library`` does the same for every transcendental), its special
cases exactly.
Each op runs once per precision over one array batching every case.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from arrayjit_conformance import math_oracle
from arrayjit_conformance.harness import (
    FLOAT_PRECS,
    hosted,
    on_interpreter,
    require_precs,
    run_once,
)
from arrayjit_ir import ir
from arrayjit_tnode import Tnode

# The oracles overflow, divide by zero and make NaN on purpose.
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
RNG = np.random.default_rng(20261124)
STORAGE = {
    "single": np.dtype(np.float32),
    "double": np.dtype(np.float64),
    "half": np.dtype(np.float16),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "fp8": np.dtype(ml_dtypes.float8_e5m2),
}
"""How each precision is stored (fp8 is E5M2)."""


def compute_dtype(prec: str) -> np.dtype[Any]:
    """The dtype arithmetic runs in: float32 for the small floats (they round when stored)."""
    return STORAGE["double"] if prec == "double" else STORAGE["single"]


def specials(prec: str) -> np.ndarray:
    """The special and boundary values of ``prec``, both signs, in its storage dtype."""
    dt = STORAGE[prec]
    info = ml_dtypes.finfo(dt)
    tiny, sub = float(info.smallest_normal), float(info.smallest_subnormal)
    pos = [0.0, sub, 2 * sub, tiny, 0.5, 1.0, 1.5, 2.0, 3.0, float(info.max), math.inf]
    pos += [1.0 + float(info.eps), 1.0 - float(info.epsneg), float(info.eps) / 2]  # ties
    vals = [*pos, *(-v for v in pos), math.nan]
    return np.array(vals, dtype=np.float64).astype(dt)


def pairs(vals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every ordered pair of ``vals`` (as two flat arrays)."""
    a, b = np.meshgrid(vals, vals, indexing="ij")
    return a.ravel(), b.ravel()


def as_stored(values: np.ndarray, prec: str) -> np.ndarray:
    """Values computed in the compute dtype, rounded once to ``prec``'s storage."""
    return np.asarray(values).astype(STORAGE[prec])


def bits_equal(got: np.ndarray, want: np.ndarray, prec: str, what: str, *inputs: Any) -> None:
    """``got`` equals ``want`` bit for bit in ``prec``'s storage, any NaN matching any NaN."""
    dt = STORAGE[prec]
    g = np.asarray(got).astype(dt)
    w = np.asarray(want).astype(dt)
    assert g.shape == w.shape, f"{what}: shape {g.shape} != {w.shape}"
    uint = np.dtype(f"u{dt.itemsize}")
    gn, wn = np.isnan(g.astype(np.float64)), np.isnan(w.astype(np.float64))
    bad = (gn != wn) | (~gn & (g.view(uint) != w.view(uint)))
    if bad.any():
        rows = [
            f"  inputs {[float(np.ravel(x)[k]) for x in inputs]}: got {float(g.ravel()[k])!r}, "
            f"expected {float(w.ravel()[k])!r}"
            for k in np.flatnonzero(bad.ravel())[:12]
        ]
        raise AssertionError(
            f"{what} ({prec}): {int(bad.sum())} of {bad.size} cells differ\n" + "\n".join(rows)
        )


# ---- the oracles: the rules of the IR README, written plainly ----


def oracle_max(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IEEE 754-2019 maximum: NaN if either is NaN, -0 < +0."""
    out = np.where(a > b, a, b)
    out = np.where((a == b) & (a == 0), np.where(np.signbit(a), b, a), out)
    return np.where(np.isnan(a) | np.isnan(b), np.nan, out)


def oracle_min(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IEEE 754-2019 minimum: NaN if either is NaN, -0 < +0."""
    out = np.where(a < b, a, b)
    out = np.where((a == b) & (a == 0), np.where(np.signbit(a), a, b), out)
    return np.where(np.isnan(a) | np.isnan(b), np.nan, out)


def oracle_relu(a: np.ndarray) -> np.ndarray:
    """max(a, +0)."""
    return np.where(np.isnan(a), np.nan, np.where(a > 0, a, 0.0))


def oracle_satur01(a: np.ndarray) -> np.ndarray:
    """min(max(a, +0), 1)."""
    return np.where(np.isnan(a), np.nan, np.where(a > 1, 1.0, np.where(a > 0, a, 0.0)))


def exact_fma(a: float, b: float, c: float, dt: np.dtype[Any]) -> float:
    """``a*b + c`` rounded once to ``dt``: exact in fractions; infinities and NaN by IEEE
    (the product never overflows: ``max * max + inf`` is ``inf``)."""
    a, b, c = float(a), float(b), float(c)
    if math.isfinite(a) and math.isfinite(b) and not math.isfinite(c):
        return c
    if not all(math.isfinite(v) for v in (a, b, c)):
        with np.errstate(all="ignore"):
            return float(np.float64(a) * np.float64(b) + np.float64(c))
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    if exact == 0:  # the sign of a zero sum (product and c both -0: -0; else +0)
        neg = math.copysign(1.0, a) * math.copysign(1.0, b) < 0 and math.copysign(1.0, c) < 0
        return -0.0 if neg else 0.0
    return round_fraction(exact, dt)


def round_fraction(q: Fraction, dt: np.dtype[Any]) -> float:
    """The rational ``q`` rounded to nearest (ties to even) in ``dt`` (float32 or float64),
    overflowing to infinity; by scaling to an integer significand, no floats in between."""
    info = np.finfo(dt)
    mant, emin = info.nmant + 1, int(info.minexp)
    sign = -1 if q < 0 else 1
    q = abs(q)
    e = q.numerator.bit_length() - q.denominator.bit_length()
    if Fraction(2) ** e > q:
        e -= 1  # now 2**e <= q < 2**(e+1)
    e = max(e, emin)  # subnormals share the smallest exponent
    scaled = q / Fraction(2) ** (e - mant + 1)
    n = round(scaled)  # Python rounds Fractions half to even
    value = Fraction(n) * Fraction(2) ** (e - mant + 1)
    if value > Fraction(float(info.max)):
        return sign * math.inf
    return sign * float(value)


def oracle_pow_special(a: float, b: float) -> float | None:
    """C99 Annex F / IEEE 754 ``pow`` where a special case decides it, else ``None``."""
    b_int = math.isfinite(b) and b == math.floor(b)
    b_odd = b_int and abs(b) < 2**53 and int(b) % 2 == 1
    if b == 0 or a == 1:
        return 1.0
    if math.isnan(a) or math.isnan(b):
        return math.nan
    if math.isinf(b):
        if a == -1:
            return 1.0
        return math.inf if (abs(a) > 1) == (b > 0) else 0.0
    if a == 0:
        if b < 0:
            return math.copysign(math.inf, a) if b_odd else math.inf
        return a if b_odd else 0.0
    if math.isinf(a):
        mag = math.inf if b > 0 else 0.0
        return -mag if a < 0 and b_odd else mag
    if a < 0 and not b_int:
        return math.nan
    return None


# ---- the tests ----


def _binop_pair(
    backend: Any, prec: str, op1: str, op2: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``op1`` and ``op2`` over every pair of the precision's special values, in one routine:
    the operands ``va``, ``vb`` and the backend's two results."""
    require_precs(backend, prec)
    va, vb = pairs(specials(prec))
    n = va.size
    a, b = hosted((n,), "a", prec), hosted((n,), "b", prec)
    o1, o2 = hosted((n,), op1, prec), hosted((n,), op2, prec)
    comp = ir.block(ir.binop(o1, op1, a, b), ir.binop(o2, op2, a, b))
    got1, got2 = run_once(backend, comp, {a: va, b: vb}, [o1, o2])
    return va, vb, got1, got2


@pytest.mark.parametrize("prec", FLOAT_PRECS)
def test_max_min_elementwise(backend: Any, prec: str) -> None:
    va, vb, gx, gn = _binop_pair(backend, prec, "max", "min")
    wa, wb = va.astype(np.float64), vb.astype(np.float64)
    bits_equal(gx, oracle_max(wa, wb), prec, "max", va, vb)
    bits_equal(gn, oracle_min(wa, wb), prec, "min", va, vb)


@pytest.mark.parametrize("prec", FLOAT_PRECS)
def test_relu_satur01(backend: Any, prec: str) -> None:
    require_precs(backend, prec)
    va = specials(prec)
    n = va.size
    a, r, s = hosted((n,), "a", prec), hosted((n,), "r", prec), hosted((n,), "s", prec)
    comp = ir.block(ir.unop(r, "relu", a), ir.unop(s, "satur01", a))
    gr, gs = run_once(backend, comp, {a: va}, [r, s])
    w = va.astype(np.float64)
    bits_equal(gr, oracle_relu(w), prec, "relu", va)
    bits_equal(gs, oracle_satur01(w), prec, "satur01", va)


_INF, _NAN = math.inf, math.nan
EXACT_UNOPS: dict[str, tuple[Any, tuple[float, ...]]] = {
    "exp": (np.exp, (0.0, -0.0, _INF, -_INF, _NAN, 1e30, -1e30)),
    "exp2": (np.exp2, (0.0, -0.0, 1.0, -1.0, 3.0, _INF, -_INF, _NAN, 1e30, -1e30)),
    "log": (np.log, (0.0, -0.0, 1.0, -1.0, _INF, -_INF, _NAN)),
    "log2": (np.log2, (0.0, -0.0, 1.0, 2.0, 0.5, -1.0, _INF, -_INF, _NAN)),
    "sqrt": (np.sqrt, (0.0, -0.0, 1.0, 4.0, 0.25, -1.0, _INF, -_INF, _NAN)),
    "recip": (np.reciprocal, (0.0, -0.0, 1.0, -1.0, 2.0, -0.5, _INF, -_INF, _NAN)),
    "recip_sqrt": (lambda x: 1.0 / np.sqrt(x), (0.0, -0.0, 1.0, 4.0, -1.0, _INF, -_INF, _NAN)),
    "tanh": (np.tanh, (0.0, -0.0, 20.0, -20.0, 1e30, -1e30, _INF, -_INF, _NAN)),
    "sin": (np.sin, (0.0, -0.0, _INF, -_INF, _NAN)),
    "cos": (np.cos, (0.0, -0.0, _INF, -_INF, _NAN)),
    "neg": (np.negative, (0.0, -0.0, 1.5, _INF, -_INF, _NAN, 1e30)),
    "trunc": (np.trunc, (0.0, -0.0, 0.5, -0.5, 2.5, -2.5, -0.99, _INF, -_INF, _NAN)),
}
"""Float unary ops at inputs whose results are exact in every precision (IEEE special cases,
saturated tanh, powers of two), so every backend must give numpy's bits; 1e30 stands for a
huge value (it rounds to the largest finite value or to infinity in the small floats)."""


@pytest.mark.parametrize("prec", FLOAT_PRECS)
def test_unops_exact_special_values(backend: Any, prec: str) -> None:
    """exp, log, sqrt, recip, tanh, sin, cos... at signed zeros, infinities, NaN and values
    whose result is exact: tanh(+-inf) and tanh(20) are exactly +-1 (PoCL's float tanh gave
    1 - 2**-24), exp(-inf) is +0, log(-0) is -inf, sqrt(-0) is -0, recip(-0) is -inf."""
    require_precs(backend, prec)
    dt = STORAGE[prec]
    inputs: dict[Tnode, np.ndarray] = {}
    stmts, outs, cases = [], [], []
    for op, (fn, raw) in EXACT_UNOPS.items():
        v = np.array(raw, dtype=np.float64).astype(dt)
        x, y = hosted((v.size,), f"x_{op}", prec), hosted((v.size,), f"y_{op}", prec)
        inputs[x] = v
        stmts.append(ir.unop(y, op, x))
        outs.append(y)
        cases.append((op, fn, v))
    got = run_once(backend, ir.block(*stmts), inputs, outs)
    for (op, fn, v), g in zip(cases, got):
        bits_equal(g, fn(v.astype(np.float64)), prec, op, v)


@pytest.mark.parametrize("prec", FLOAT_PRECS)
def test_gates_keep_comparisons(backend: Any, prec: str) -> None:
    """``relu_gate`` and ``satur01_gate`` select by comparison: a NaN condition gives 0."""
    va, vb, r1, r2 = _binop_pair(backend, prec, "relu_gate", "satur01_gate")
    wa, wb = va.astype(np.float64), vb.astype(np.float64)
    bits_equal(r1, np.where(wa > 0, wb, 0.0), prec, "relu_gate", va, vb)
    bits_equal(r2, np.where((wa > 0) & (wa < 1), wb, 0.0), prec, "satur01_gate", va, vb)


def long_size(backend: Any) -> int:
    """A length reaching the parallel and vectorized reduction paths of the compiled backends
    (2**15 iterations and more); the interpreter has none and is slow."""
    return 1 << 10 if on_interpreter(backend) else 1 << 15


def _max_min(out_max: Tnode, out_min: Tnode, x: Tnode, spec: str) -> tuple[Any, Any]:
    """The max and the min reductions of ``x`` along ``spec``."""
    return ir.accum(out_max, "max", x, spec=spec), ir.accum(out_min, "min", x, spec=spec)


def _reduction_rows(prec: str) -> np.ndarray:
    """Rows of 8: a NaN among numbers (at each end too), all NaN, infinities, signed zeros."""
    info = ml_dtypes.finfo(STORAGE[prec])
    big, sub = float(info.max), float(info.smallest_subnormal)
    nan, inf = math.nan, math.inf
    rows = [
        [1, 2, nan, 3, -1, 0, 5, 4],
        [nan, 1, 2, 3, 4, 5, 6, 7],
        [1, 2, 3, 4, 5, 6, 7, nan],
        [nan] * 8,
        [-inf, -inf, -inf, -inf, -inf, -inf, -inf, -inf],
        [inf, inf, inf, inf, inf, inf, inf, inf],
        [-inf, inf, 0, 1, -1, 2, -2, 3],
        [-0.0, 0.0, -0.0, 0.0, -0.0, 0.0, -0.0, 0.0],
        [0.0, -0.0, 0.0, -0.0, 0.0, -0.0, 0.0, -0.0],
        [-0.0] * 8,
        [0.0] * 8,
        [-0.0, -sub, -big, -0.0, -1, -2, -3, -4],
        [sub, 0.0, -0.0, big, -big, 2 * sub, -sub, 1],
        [-inf, nan, inf, nan, 0, -0.0, 1, -1],
    ]
    return np.array(rows, dtype=np.float64).astype(STORAGE[prec])


@pytest.mark.parametrize("prec", FLOAT_PRECS)
def test_max_min_reductions(backend: Any, prec: str) -> None:
    """Row and column reductions, and a full reduction of a long vector with one NaN (large
    enough for the parallel and vectorized paths): NaN anywhere gives NaN, never -inf."""
    require_precs(backend, prec)
    vx = _reduction_rows(prec)
    rows, cols = vx.shape
    x = hosted((rows, cols), "x", prec)
    rmax, rmin = hosted((rows,), "rmax", prec), hosted((rows,), "rmin", prec)
    cmax, cmin = hosted((cols,), "cmax", prec), hosted((cols,), "cmin", prec)
    n = long_size(backend)
    vlong = np.linspace(-1000, 1000, n).astype(STORAGE[prec])
    vlong[n // 3] = np.nan
    big = hosted((n,), "big", prec)
    bmax, bmin = hosted((), "bmax", prec), hosted((), "bmin", prec)
    comp = ir.block(
        *_max_min(rmax, rmin, x, "ij->i"),
        *_max_min(cmax, cmin, x, "ij->j"),
        *_max_min(bmax, bmin, big, "i->"),
    )
    got = run_once(backend, comp, {x: vx, big: vlong}, [rmax, rmin, cmax, cmin, bmax, bmin])
    w = vx.astype(np.float64)

    def fold(fn: Any, m: np.ndarray, axis: int) -> np.ndarray:
        start = np.full(m.shape[1 - axis], -math.inf if fn is oracle_max else math.inf)
        for k in range(m.shape[axis]):
            start = fn(start, np.take(m, k, axis=axis))
        return start

    bits_equal(got[0], fold(oracle_max, w, 1), prec, "row max", vx)
    bits_equal(got[1], fold(oracle_min, w, 1), prec, "row min", vx)
    bits_equal(got[2], fold(oracle_max, w, 0), prec, "column max", vx.T)
    bits_equal(got[3], fold(oracle_min, w, 0), prec, "column min", vx.T)
    assert np.isnan(got[4].astype(np.float64)), f"max of a vector with a NaN gave {got[4]}"
    assert np.isnan(got[5].astype(np.float64)), f"min of a vector with a NaN gave {got[5]}"


@pytest.mark.parametrize("prec", FLOAT_PRECS)
def test_max_reduction_signed_zeros_long(backend: Any, prec: str) -> None:
    """A long row of zeros of both signs reduces to +0 (max) and -0 (min), whatever the
    order in which the backend combines partial results; and without NaN, the largest value."""
    require_precs(backend, prec)
    n = long_size(backend)
    vz = np.where(np.arange(n) % 3 == 0, -0.0, 0.0).astype(STORAGE[prec])
    vn = np.full(n, -0.0).astype(STORAGE[prec])
    vn[[5, n // 2]] = [-3.0, -0.0]
    z, m = hosted((n,), "z", prec), hosted((n,), "m", prec)
    zmax, zmin = hosted((), "zmax", prec), hosted((), "zmin", prec)
    mmax, mmin = hosted((), "mmax", prec), hosted((), "mmin", prec)
    comp = ir.block(*_max_min(zmax, zmin, z, "i->"), *_max_min(mmax, mmin, m, "i->"))
    got = run_once(backend, comp, {z: vz, m: vn}, [zmax, zmin, mmax, mmin])
    bits_equal(got[0], np.float64(0.0), prec, "max of signed zeros")
    bits_equal(got[1], np.float64(-0.0), prec, "min of signed zeros")
    bits_equal(got[2], np.float64(-0.0), prec, "max of negative zeros and -3")
    bits_equal(got[3], np.float64(-3.0), prec, "min of negative zeros and -3")


@pytest.mark.parametrize("k", [0, 1, 5])
@pytest.mark.parametrize("prec", ["single", "double"])
def test_negative_zero_cells_keep_their_sign(backend: Any, prec: str, k: int) -> None:
    """Accumulating ``k`` products that are -0.0 into cells holding -0.0 (no neutral fill)
    leaves -0.0, as the serial sum does (``-0 + -0 = -0``), also where the backend splits the
    cells over threads and vector lanes (OpenMP's ``+`` starts its private copies at +0.0)."""
    require_precs(backend, prec)
    n = long_size(backend)
    x, w, h = hosted((n, k), "x", prec), hosted((k,), "w", prec), hosted((n,), "h", prec)
    comp = ir.accum(h, "add", x, w, op="mul", spec="ik,k->i", initialize_neutral=False)
    vx = np.full((n, k), -0.0).astype(STORAGE[prec])
    vw = np.ones(k).astype(STORAGE[prec])
    [got] = run_once(backend, comp, {x: vx, w: vw, h: np.full(n, -0.0).astype(STORAGE[prec])}, [h])
    bits_equal(got, np.full(n, -0.0), prec, f"-0.0 cells after {k} -0.0 products")


@pytest.mark.parametrize("prec", FLOAT_PRECS)
def test_adding_an_inlined_zero_keeps_ieee_signs(backend: Any, prec: str) -> None:
    """``x + 0.0`` is +0.0 for ``x = -0.0``; only ``x + -0.0`` and ``x - 0.0`` are ``x`` for
    every ``x``. The zeros here are constant nodes the optimizer inlines into the sums, where
    folding ``x + 0`` to ``x`` would keep -0.0."""
    require_precs(backend, prec)
    vx = np.array([-0.0, 0.0, 1.5, -1.5, -0.0, 0.0]).astype(STORAGE[prec])
    x = hosted((6,), "x", prec)
    pz, nz = (Tnode.create((6,), prec=prec, label=name) for name in ("pz", "nz"))
    cases = [("add", x, pz), ("add", pz, x), ("sub", x, pz), ("add", x, nz), ("add", nz, x)]
    cases += [("sub", x, nz), ("sub", pz, x), ("sub", nz, x)]
    outs = [hosted((6,), f"y{k}", prec) for k in range(len(cases))]
    comp = ir.block(
        ir.fetch(pz, ir.Constant(0.0)),
        ir.fetch(nz, ir.Constant(-0.0)),
        *(ir.binop(y, op, a, b) for y, (op, a, b) in zip(outs, cases)),
    )
    got = run_once(backend, comp, {x: vx}, outs)
    value = {x: vx.astype(np.float64), pz: np.zeros(6), nz: np.full(6, -0.0)}
    for g, (op, a, b) in zip(got, cases):
        want = value[a] + value[b] if op == "add" else value[a] - value[b]
        what = f"{a.debug_label} {op} {b.debug_label}"
        bits_equal(g, as_stored(want, prec), prec, what, vx)


def _pow_cases(prec: str) -> tuple[np.ndarray, np.ndarray]:
    """The special-value grid, plus integer, half-integer and odd exponents of special bases."""
    base = specials(prec).astype(np.float64)
    exps = np.array([0.5, -0.5, 3.0, -3.0, 2.0, -2.0, 1.0, -1.0, 0.25, 5.0])
    extra_b = np.concatenate([specials(prec).astype(np.float64), exps])
    va, vb = pairs(np.unique(np.concatenate([base, [-1.0, 4.0, -2.0, 0.25]])))
    ga, gb = np.meshgrid(base, extra_b, indexing="ij")
    a = np.concatenate([va, ga.ravel()]).astype(STORAGE[prec])
    b = np.concatenate([vb, gb.ravel()]).astype(STORAGE[prec])
    return a, b


@pytest.mark.parametrize("prec", FLOAT_PRECS)
def test_pow_special_cases(backend: Any, prec: str) -> None:
    """Every IEEE special case of ``pow`` exactly; ordinary finite values within the math
    library's bound and with its helper's bits (see the module docstring)."""
    require_precs(backend, prec)
    va, vb = _pow_cases(prec)
    n = va.size
    a, b, y = hosted((n,), "a", prec), hosted((n,), "b", prec), hosted((n,), "y", prec)
    [got] = run_once(backend, ir.binop(y, "pow", a, b), {a: va, b: vb}, [y])
    g = got.astype(np.float64)
    special = [oracle_pow_special(float(x), float(e)) for x, e in zip(va, vb)]
    mask = np.array([s is not None for s in special])
    want = np.array([s if s is not None else 0.0 for s in special])
    bits_equal(g[mask], want[mask], prec, "pow special cases", va[mask], vb[mask])
    ordinary = (va[~mask], vb[~mask])
    bounded = prec in math_oracle.MATH_ULPS and math_oracle.uses_library(backend, "pow")
    ulps = None if bounded else 4.0
    math_oracle.assert_within_bound(got[~mask], prec, "pow", *ordinary, ulps=ulps)
    if bounded and math_oracle.compiler() is not None:
        want_bits = math_oracle.helper_bits("pow", prec, *ordinary)
        bits_equal(got[~mask], want_bits, prec, "pow of ordinary values", *ordinary)


@pytest.mark.parametrize("prec", ["single", "double"])
def test_pow_numpy_scalar_and_array_paths_agree(backend: Any, prec: str) -> None:
    """A 0-d node and a 1-d node computing the same ``pow(-inf, 0.5)`` (numpy's scalar and
    array paths differ from IEEE and may differ from each other): both ``+inf``."""
    require_precs(backend, prec)
    a0, b0, y0 = hosted((), "a0", prec), hosted((), "b0", prec), hosted((), "y0", prec)
    a1, b1, y1 = hosted((3,), "a1", prec), hosted((3,), "b1", prec), hosted((3,), "y1", prec)
    comp = ir.block(ir.binop(y0, "pow", a0, b0), ir.binop(y1, "pow", a1, b1))
    v1 = np.array([-np.inf, -np.inf, -0.0])
    w1 = np.array([0.5, -0.5, -3.0])
    inputs = {a0: np.array(-np.inf), b0: np.array(0.5), a1: v1, b1: w1}
    g0, g1 = run_once(backend, comp, inputs, [y0, y1])
    bits_equal(g0, np.float64(np.inf), prec, "pow(-inf, 0.5) on a 0-d node")
    bits_equal(g1, np.array([np.inf, 0.0, -np.inf]), prec, "pow on a 1-d node", v1, w1)


def _fma_inputs(prec: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Special triples, products that round differently fused and unfused (ties included),
    cancellations to zero of both signs, and random values."""
    dt = STORAGE[prec]
    cd = compute_dtype(prec)
    eps = float(np.finfo(cd).eps)
    sp = specials(prec).astype(np.float64)
    few = sp[[0, 1, 4, 5, 9, 10, 13, 14, 18, 23, 26]]  # ±0, a subnormal, 0.5, 1, max, ±inf, NaN
    tri = np.array(list(itertools.product(few, few, few)))
    one_p = 1.0 + eps
    hand = np.array(
        [
            [one_p, 1.0 - eps, -1.0],  # fused: -eps^2; unfused: 0
            [one_p, one_p, -1.0],
            [one_p, one_p, -(1.0 + 2 * eps)],
            [1.0 + 2 * eps, 1.0 + 2 * eps, 0.0],
            [3.0, 1.0 / 3.0, -1.0],
            [-1.0, 0.0, 0.0],  # -0 + +0 = +0
            [-1.0, 0.0, -0.0],  # -0 + -0 = -0
            [2.0, -1.0, 2.0],  # exact cancellation: +0
            [float(np.finfo(cd).max), 2.0, -float(np.finfo(cd).max)],  # the product overflows
            [float(np.finfo(cd).tiny), 0.5, 0.0],  # a subnormal result
        ]
    )
    rand = RNG.uniform(-4, 4, (300, 3))
    allv = np.concatenate([tri, hand, rand])
    if dt.itemsize < 4:  # the small floats compute in float32 from stored values
        allv = allv.astype(dt).astype(np.float64)
    elif prec == "single":
        allv = allv.astype(np.float32).astype(np.float64)
    return allv[:, 0], allv[:, 1], allv[:, 2]


@pytest.mark.parametrize("prec", FLOAT_PRECS)
def test_fma_and_multiply_accumulate_round_once(backend: Any, prec: str) -> None:
    """The ``fma`` op, and a multiply-accumulate step (``accum(g, "add", a, b, op="mul")`` onto
    existing values, elementwise and as a contraction over an axis of one), are ``a*b + c``
    rounded once."""
    require_precs(backend, prec)
    va, vb, vc = _fma_inputs(prec)
    n = va.size
    a, b, c, y = (hosted((n,), name, prec) for name in ("a", "b", "c", "y"))
    g, d = hosted((n,), "g", prec), hosted((n,), "d", prec)
    x, v = hosted((n, 1), "x", prec), hosted((1,), "v", prec)
    cd = compute_dtype(prec)
    v0 = float(STORAGE[prec].type(1.0 + float(ml_dtypes.finfo(STORAGE[prec]).eps)))
    comp = ir.block(
        ir.ternop(y, "fma", a, b, c),
        ir.accum(g, "add", a, b, op="mul", initialize_neutral=False),
        ir.accum(d, "add", x, v, op="mul", spec="ik,k->i", initialize_neutral=False),
    )
    inputs = {a: va, b: vb, c: vc, g: vc, x: va[:, None], d: vc, v: np.array([v0])}
    gy, gg, gd = run_once(backend, comp, inputs, [y, g, d])
    want = np.array([exact_fma(p, q, r, cd) for p, q, r in zip(va, vb, vc)])
    bits_equal(gy, as_stored(want.astype(cd), prec), prec, "fma", va, vb, vc)
    bits_equal(gg, as_stored(want.astype(cd), prec), prec, "g =+ a * b", va, vb, vc)
    want_d = np.array([exact_fma(p, v0, r, cd) for p, r in zip(va, vc)])
    bits_equal(gd, as_stored(want_d.astype(cd), prec), prec, "d =+ x * v over k", va, vc)


@pytest.mark.parametrize("prec", ["single", "double"])
def test_no_contraction_of_a_virtual_product(backend: Any, prec: str) -> None:
    """``t = a*b`` (inlined) then ``y = t + c`` rounds twice: exactly numpy's
    ``(a*b).astype(prec) + c``, never one fused multiply-add."""
    require_precs(backend, prec)
    dt = STORAGE[prec]
    n = 4096
    va, vb, vc = (RNG.standard_normal(n).astype(dt) for _ in range(3))
    a, b, c = hosted((n,), "a", prec), hosted((n,), "b", prec), hosted((n,), "c", prec)
    t = Tnode.create((n,), prec=prec, label="t")
    y, z = hosted((n,), "y", prec), hosted((n,), "z", prec)
    comp = ir.block(
        ir.binop(t, "mul", a, b),
        ir.binop(y, "add", t, c),
        ir.unop(z, "relu", y),
    )
    gy, gz = run_once(backend, comp, {a: va, b: vb, c: vc}, [y, z])
    want = (va * vb).astype(dt) + vc
    bits_equal(gy, want, prec, "a*b + c", va, vb, vc)
    bits_equal(gz, oracle_relu(want.astype(np.float64)), prec, "relu(a*b + c)", va, vb, vc)
    fused = np.array([exact_fma(x, w, z, dt) for x, w, z in zip(va, vb, vc)])
    assert (fused.astype(dt) != want).any(), "the data does not tell fused from unfused"


@pytest.mark.parametrize("prec", FLOAT_PRECS)
def test_add_mul_chains_round_at_every_node(backend: Any, prec: str) -> None:
    """Inlined products and sums of special values: ``t = a*b``, ``u = t*c`` (both virtual, in
    the compute precision), ``q = u + t`` stored in ``prec``; each node rounds once, as numpy
    computes it step by step; and ``fma`` over the same values rounds once in all."""
    require_precs(backend, prec)
    cd = compute_dtype(prec)
    inner = "double" if prec == "double" else "single"
    sp = specials(prec)
    va, vb = pairs(sp)
    vc = np.resize(sp[::-1], va.size)
    n = va.size
    a, b, c = hosted((n,), "a", prec), hosted((n,), "b", prec), hosted((n,), "c", prec)
    t, u = Tnode.create((n,), prec=inner, label="t"), Tnode.create((n,), prec=inner, label="u")
    p, q = hosted((n,), "p", prec), hosted((n,), "q", prec)
    comp = ir.block(
        ir.binop(t, "mul", a, b),
        ir.binop(u, "mul", t, c),
        ir.binop(q, "add", u, t),
        ir.ternop(p, "fma", a, b, c),
    )
    gp, gq = run_once(backend, comp, {a: va, b: vb, c: vc}, [p, q])
    with np.errstate(all="ignore"):
        wt = va.astype(cd) * vb.astype(cd)
        wq = as_stored(wt * vc.astype(cd) + wt, prec)
    bits_equal(gq, wq, prec, "(a*b)*c + a*b", va, vb, vc)
    fa, fb, fc = va.astype(np.float64), vb.astype(np.float64), vc.astype(np.float64)
    want_p = np.array([exact_fma(x, w, z, cd) for x, w, z in zip(fa, fb, fc)])
    bits_equal(gp, as_stored(want_p.astype(cd), prec), prec, "fma of specials", va, vb, vc)


def test_oracle_rounding_helper() -> None:
    """The rational rounding of the fma oracle against numpy's own conversions."""
    for v in RNG.standard_normal(200):
        q = Fraction(float(v))
        assert round_fraction(q, np.dtype(np.float64)) == float(v)
        assert round_fraction(q, np.dtype(np.float32)) == float(np.float32(v))
    tiny = Fraction(float(np.finfo(np.float32).smallest_subnormal)) * Fraction(3, 2)
    assert round_fraction(tiny, np.dtype(np.float32)) == float(
        2 * np.finfo(np.float32).smallest_subnormal
    )
    assert round_fraction(Fraction(2) ** 200, np.dtype(np.float32)) == math.inf
