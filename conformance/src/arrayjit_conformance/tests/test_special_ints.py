"""Integer edge cases and float-to-integer conversions, bit for bit on every backend.

The rules are the IR's (``packages/arrayjit-ir/README.md``, "Semantics decided here"):

- integer ``add``, ``sub``, ``mul``, ``neg`` wrap around (two's complement);
- ``div`` truncates toward zero, ``mod`` takes the sign of the dividend (C), ``x / 0 = 0`` and
  ``x % 0 = 0``; ``INT_MIN / -1 = INT_MIN`` (it wraps) and ``INT_MIN % -1 = 0``;
- a float converted to an integer precision saturates: NaN gives 0, values above the largest
  integer give it, values below the smallest give it, others truncate toward zero (WebAssembly's
  ``trunc_sat``, Rust's ``as``);
- integer ops computed through floating point (``pow``, ``exp``, ``log``, ``sqrt``, ...) compute
  in double and convert the result by that rule;
- an integer converted to another integer precision wraps (C's conversion).

The oracle is written here from these rules with plain Python integers and the ``math`` module
(not numpy's float-to-integer cast, undefined out of range, and nothing from ``arrayjit_ir``).
Inputs of an op go in arrays, so each test compiles one routine per precision.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from arrayjit_conformance.harness import FLOAT_PRECS, INT_PRECS, hosted, require_precs, run_once
from arrayjit_ir import ir
from arrayjit_ir.assignments import Constant_fill
from arrayjit_tnode import Tnode

# ---- the oracle: Python integers ----------------------------------------------------------------

INT_BITS: dict[str, tuple[int, bool]] = {
    "byte": (8, False),
    "uint16": (16, False),
    "int32": (32, True),
    "uint32": (32, False),
    "int64": (64, True),
    "uint64": (64, False),
}
"""Width and signedness of each integer precision."""

HOST_DTYPES: dict[str, Any] = {
    "byte": np.uint8,
    "uint16": np.uint16,
    "int32": np.int32,
    "uint32": np.uint32,
    "int64": np.int64,
    "uint64": np.uint64,
    "single": np.float32,
    "double": np.float64,
    "half": np.float16,
    "bfloat16": ml_dtypes.bfloat16,
    "fp8": ml_dtypes.float8_e5m2,
}


def limits(prec: str) -> tuple[int, int]:
    """The smallest and largest integer of ``prec``."""
    bits, signed = INT_BITS[prec]
    return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)


def wrap(v: int, prec: str) -> int:
    """``v`` modulo 2**bits, in ``prec``'s range."""
    bits, signed = INT_BITS[prec]
    v &= (1 << bits) - 1
    return v - (1 << bits) if signed and v >> (bits - 1) else v


def saturate(x: float, prec: str) -> int:
    """The saturating conversion of the float ``x`` to ``prec``."""
    lo, hi = limits(prec)
    if math.isnan(x):
        return 0
    if math.isinf(x):
        return hi if x > 0 else lo
    return min(max(math.trunc(x), lo), hi)


def trunc_div(a: int, b: int) -> int:
    """The exact quotient of ``a / b`` truncated toward zero (0 when ``b`` is 0)."""
    if b == 0:
        return 0
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def trunc_mod(a: int, b: int) -> int:
    """The remainder of the truncated division, with the sign of ``a`` (0 when ``b`` is 0)."""
    return 0 if b == 0 else a - b * trunc_div(a, b)


def int_pow(a: int, b: int) -> float:
    """``a ** b`` computed in double, as the rule says."""
    x, y = float(a), float(b)
    if x == 0 and y < 0:
        return math.inf
    try:
        return math.pow(x, y)
    except OverflowError:
        return math.inf if x > 0 or y % 2 == 0 else -math.inf


def _exp(x: float) -> float:
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf


def _exp2(x: float) -> float:
    try:
        return math.pow(2.0, x)
    except OverflowError:
        return math.inf


def _log_of(fn: Callable[[float], float]) -> Callable[[float], float]:
    def log(x: float) -> float:
        if x == 0:
            return -math.inf
        return math.nan if x < 0 else fn(x)

    return log


def _sqrt(x: float) -> float:
    return math.nan if x < 0 else math.sqrt(x)


def _recip_sqrt(x: float) -> float:
    if x == 0:
        return math.inf
    return math.nan if x < 0 else 1.0 / math.sqrt(x)


FLOAT_UNOPS: dict[str, tuple[Callable[[float], float], tuple[int, ...]]] = {
    # Inputs whose double results are exact or not within rounding of an integer, so any
    # faithful library function gives the same integer.
    "exp": (_exp, (0, 1, 2, 3, 10, 20, 50, 100, 1000, -1, -5, -1000)),
    "exp2": (_exp2, (0, 1, 10, 31, 32, 63, 64, 100, -1, -3)),
    "log": (_log_of(math.log), (0, 1, 2, 3, 100, 1000, -1, -100)),
    "log2": (_log_of(math.log2), (0, 1, 2, 3, 8, 1024, -1, -8)),
    "sqrt": (_sqrt, (0, 1, 2, 4, 9, 1000000, -1, -4)),
    "recip_sqrt": (_recip_sqrt, (0, 1, 4, 2, -1, -4)),
}
"""Integer unary ops computed in double: the double function and inputs (the precision's
extremes are added)."""


def int_values(prec: str) -> list[int]:
    """Small values, signs, and the precision's extremes and their neighbours, wrapped."""
    lo, hi = limits(prec)
    raw = [0, 1, 2, 3, 7, 100, -1, -2, -3, -7, -100, lo, lo + 1, lo + 2, hi, hi - 1, hi // 2]
    return sorted({wrap(v, prec) for v in raw})


def float_table() -> list[float]:
    """Float inputs of the conversion: specials, halves, and every integer precision's bounds
    and their neighbours (each then rounds to the source precision)."""
    vals = [math.nan, -math.nan, math.inf, -math.inf, 0.0, -0.0, 0.5, -0.5, 0.75, -0.999]
    vals += [1.0, -1.0, 1.5, -1.5, 2.5, -2.5, 3.99, -3.99, 100.7, -100.7, 3e9, -3e9]
    vals += [1e20, -1e20, 1e300, -1e300, 5e-324, -5e-324, 1e-40]
    for p in INT_BITS:
        lo, hi = limits(p)
        for b in (lo, hi + 1):
            vals += [float(b), float(b - 1), float(b + 1), b - 0.5, b + 0.5]
            # The neighbours of a bound in double and single (below and above).
            vals += [math.nextafter(float(b), -math.inf), math.nextafter(float(b), math.inf)]
            f32 = np.float32(b)
            vals += [float(np.nextafter(f32, np.float32(-np.inf)))]
            vals += [float(np.nextafter(f32, np.float32(np.inf)))]
    return vals


def stored(values: Sequence[float], prec: str) -> np.ndarray:
    """``values`` rounded to the float precision ``prec`` (a host array of its dtype)."""
    with np.errstate(all="ignore"):
        return np.array(values, dtype=np.float64).astype(HOST_DTYPES[prec])


# ---- running ------------------------------------------------------------------------------------


def run(
    backend: Any, comp: Any, inputs: dict[Tnode, np.ndarray], outputs: Sequence[Tnode]
) -> list[list[Any]]:
    """Set ``inputs``, compile, link and run ``comp`` once; the outputs' values as Python
    numbers."""
    return [got.tolist() for got in run_once(backend, comp, inputs, outputs)]


def mismatches(
    what: str, args: Sequence[Any], got: Sequence[Any], want: Sequence[Any]
) -> list[str]:
    """Lines naming every input whose result differs (at most five)."""
    bad = [
        f"{what}{a} = {g}, expected {w}"
        for a, g, w in zip(args, got, want)
        if g != w or type(g) is not type(w)
    ]
    return bad[:5] + ([f"... and {len(bad) - 5} more"] if len(bad) > 5 else [])


def check(failures: list[str]) -> None:
    assert not failures, "\n".join(failures)


def int_array(values: Sequence[int], prec: str) -> np.ndarray:
    return np.array(values, dtype=HOST_DTYPES[prec])


# ---- tests -------------------------------------------------------------------------------------

BINOPS: dict[str, Callable[[int, int], int]] = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": trunc_div,
    "mod": trunc_mod,
    "max": max,
    "min": min,
}


@pytest.mark.parametrize("prec", INT_PRECS)
def test_integer_binops(backend: Any, prec: str) -> None:
    """Wrapping add, sub, mul and fma; truncating div and mod with INT_MIN / -1 and x / 0; max,
    min; over every pair of special values."""
    require_precs(backend, prec)
    vals = int_values(prec)
    pairs = [(a, b) for a in vals for b in vals]
    n = len(pairs)
    a, b = hosted((n,), "a", prec), hosted((n,), "b", prec)
    outs = {op: hosted((n,), f"y_{op}", prec) for op in BINOPS}
    fma = hosted((n,), "y_fma", prec)
    comp = ir.block(
        *(ir.binop(y, op, a, b) for op, y in outs.items()), ir.ternop(fma, "fma", a, b, a)
    )
    inputs = {a: int_array([p[0] for p in pairs], prec), b: int_array([p[1] for p in pairs], prec)}
    *got, got_fma = run(backend, comp, inputs, [*outs.values(), fma])
    failures: list[str] = []
    for (op, fn), g in zip(BINOPS.items(), got):
        want = [wrap(fn(x, y), prec) for x, y in pairs]
        failures += mismatches(f"{prec} {op}", pairs, g, want)
    want = [wrap(x * y + x, prec) for x, y in pairs]
    failures += mismatches(f"{prec} fma(a, b, a) of ", pairs, got_fma, want)
    check(failures)


@pytest.mark.parametrize("prec", INT_PRECS)
def test_integer_pow(backend: Any, prec: str) -> None:
    """Integer pow: computed in double, the result converted by the saturating rule (0 ** -1 is
    +inf, so the largest integer; 2 ** 63 saturates in int64 and is exact in uint64)."""
    require_precs(backend, prec)
    lo, hi = limits(prec)
    bases = sorted({wrap(v, prec) for v in (0, 1, -1, 2, -2, 3, -3, 7, 10, lo, hi)})
    exps = sorted({wrap(v, prec) for v in (0, 1, 2, 3, 7, 10, 31, 32, 62, 63, 64, 100, -1, -2)})
    pairs = [(x, e) for x in bases for e in exps]
    n = len(pairs)
    a, b, y = hosted((n,), "a", prec), hosted((n,), "b", prec), hosted((n,), "y", prec)
    inputs = {a: int_array([p[0] for p in pairs], prec), b: int_array([p[1] for p in pairs], prec)}
    [got] = run(backend, ir.binop(y, "pow", a, b), inputs, [y])
    want = [saturate(int_pow(x, e), prec) for x, e in pairs]
    check(mismatches(f"{prec} pow", pairs, got, want))


INT_UNOPS: dict[str, Callable[[int], int]] = {
    "neg": lambda a: -a,
    "relu": lambda a: max(a, 0),
    "recip": lambda a: trunc_div(1, a),
    "not": lambda a: int(a == 0),
    "identity": lambda a: a,
    "trunc": lambda a: a,
}


@pytest.mark.parametrize("prec", INT_PRECS)
def test_integer_unops(backend: Any, prec: str) -> None:
    """neg (INT_MIN stays INT_MIN), relu, recip (1 / INT_MIN is 0, 1 / 0 is 0), not; and the
    ops computed in double (exp, log, sqrt...), their results converted by the saturating
    rule (log 0 gives the smallest integer, sqrt -1 gives 0)."""
    require_precs(backend, prec)
    lo, hi = limits(prec)
    vals = int_values(prec)
    x = hosted((len(vals),), "x", prec)
    outs = {op: hosted((len(vals),), f"y_{op}", prec) for op in INT_UNOPS}
    stmts = [ir.unop(y, op, x) for op, y in outs.items()]
    inputs = {x: int_array(vals, prec)}
    cases: dict[str, tuple[Tnode, list[int]]] = {}
    for op, (_, raw) in FLOAT_UNOPS.items():
        args = sorted({wrap(v, prec) for v in (*raw, lo, hi)})
        xi, yi = hosted((len(args),), f"x_{op}", prec), hosted((len(args),), f"y_{op}", prec)
        inputs[xi] = int_array(args, prec)
        stmts.append(ir.unop(yi, op, xi))
        cases[op] = (yi, args)
    results = run(
        backend, ir.block(*stmts), inputs, [*outs.values(), *(c[0] for c in cases.values())]
    )
    failures: list[str] = []
    for (op, fn), g in zip(INT_UNOPS.items(), results):
        failures += mismatches(
            f"{prec} {op}", [(v,) for v in vals], g, [wrap(fn(v), prec) for v in vals]
        )
    for (op, (_, args)), g in zip(cases.items(), results[len(INT_UNOPS) :]):
        fn = FLOAT_UNOPS[op][0]
        want = [saturate(fn(float(v)), prec) for v in args]
        failures += mismatches(f"{prec} {op}", [(v,) for v in args], g, want)
    check(failures)


@pytest.mark.parametrize("src", FLOAT_PRECS)
def test_float_to_int_conversion(backend: Any, src: str) -> None:
    """A float node read into every integer precision: saturating, NaN to 0, truncation toward
    zero, at and around every bound (2**63 and 2**64 included)."""
    require_precs(backend, src, *INT_PRECS)
    held = stored(float_table(), src)
    vals = [float(v) for v in held]
    n = len(vals)
    x = hosted((n,), "x", src)
    outs = {p: hosted((n,), f"y_{p}", p) for p in INT_PRECS}
    comp = ir.block(*(ir.unop(y, "identity", x) for y in outs.values()))
    got = run(backend, comp, {x: held}, list(outs.values()))
    failures: list[str] = []
    for p, g in zip(outs, got):
        want = [saturate(v, p) for v in vals]
        failures += mismatches(f"{src} -> {p} of ", [(v,) for v in vals], g, want)
    check(failures)


def test_float_constants_to_int(backend: Any) -> None:
    """Float constants (``Constant_fill``) stored into integer nodes follow the same rule."""
    require_precs(backend, *INT_PRECS)
    vals = float_table()
    outs = {p: hosted((len(vals),), f"c_{p}", p) for p in INT_PRECS}
    comp = ir.block(*(ir.fetch(y, Constant_fill(tuple(vals))) for y in outs.values()))
    got = run(backend, comp, {}, list(outs.values()))
    failures: list[str] = []
    for p, g in zip(outs, got):
        failures += mismatches(
            f"constant -> {p} of ", [(v,) for v in vals], g, [saturate(v, p) for v in vals]
        )
    check(failures)


@pytest.mark.parametrize("src", INT_PRECS)
def test_int_to_int_conversion(backend: Any, src: str) -> None:
    """An integer node read into every integer precision wraps (sign-extends when widening a
    signed value)."""
    require_precs(backend, *INT_PRECS)
    vals = int_values(src)
    x = hosted((len(vals),), "x", src)
    outs = {p: hosted((len(vals),), f"y_{p}", p) for p in INT_PRECS}
    comp = ir.block(*(ir.unop(y, "identity", x) for y in outs.values()))
    got = run(backend, comp, {x: int_array(vals, src)}, list(outs.values()))
    failures: list[str] = []
    for p, g in zip(outs, got):
        failures += mismatches(
            f"{src} -> {p} of ", [(v,) for v in vals], g, [wrap(v, p) for v in vals]
        )
    check(failures)


@pytest.mark.parametrize("prec", ["int32", "int64", "uint64"])
def test_integer_reductions_wrap(backend: Any, prec: str) -> None:
    """Integer sums and products over a row wrap, whatever order a backend adds in (wrapping
    arithmetic is associative); max and min over the extremes."""
    require_precs(backend, prec)
    lo, hi = limits(prec)
    rng = np.random.default_rng(7)
    rows, cols = 2, 1 << 12  # vectorized reduction loops (the interpreter is slow)
    dtype = np.int64 if lo < 0 else np.uint64
    # Odd values, so that products do not become 0 after 64 factors.
    vals = [
        [int(v) | 1 for v in rng.integers(lo // 2, hi // 2, cols, dtype=dtype)] for _ in range(rows)
    ]
    vals[0][:3] = [hi, hi, lo | 1]
    x = hosted((rows, cols), "x", prec)
    outs = {op: hosted((rows,), f"r_{op}", prec) for op in ("add", "mul", "max", "min")}
    comp = ir.block(*(ir.accum(y, op, x, spec="ij->i") for op, y in outs.items()))
    got = run(backend, comp, {x: np.array(vals, dtype=HOST_DTYPES[prec])}, list(outs.values()))

    def wrapping_product(row: list[int]) -> int:
        p = 1
        for v in row:
            p = wrap(p * v, prec)
        return p

    folds: dict[str, Callable[[list[int]], int]] = {
        "add": sum,
        "mul": wrapping_product,
        "max": max,
        "min": min,
    }
    failures: list[str] = []
    for (op, fn), g in zip(folds.items(), got):
        failures += mismatches(
            f"{prec} {op}-reduction of row ",
            list(range(rows)),
            g,
            [wrap(fn(r), prec) for r in vals],
        )
    check(failures)
