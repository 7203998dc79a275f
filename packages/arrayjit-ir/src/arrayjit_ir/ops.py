"""Operations of the IR: binary, unary and ternary ops with their neutral elements.

Reference semantics (numpy) and C spellings are attached to each op in this module; the
renderers and the reference interpreter read them from here.
"""

from __future__ import annotations

import enum
import math
import struct
from fractions import Fraction
from typing import Any

import numpy as np


class Binop(enum.Enum):
    """Binary ops. ``arg1``/``arg2`` return their first/second argument."""

    arg1 = "arg1"
    arg2 = "arg2"
    add = "add"
    sub = "sub"
    mul = "mul"
    div = "div"
    pow = "pow"
    relu_gate = "relu_gate"  # v1 > 0 ? v2 : 0
    satur01_gate = "satur01_gate"  # 0 < v1 < 1 ? v2 : 0
    max = "max"
    min = "min"
    mod = "mod"
    cmplt = "cmplt"
    cmpeq = "cmpeq"
    cmpne = "cmpne"
    or_ = "or"
    and_ = "and"
    threefry4x32 = "threefry4x32"  # (key, counter) -> random bits, on uint4x32


class Unop(enum.Enum):
    """Unary ops."""

    identity = "identity"
    relu = "relu"
    satur01 = "satur01"
    exp = "exp"
    log = "log"
    exp2 = "exp2"
    log2 = "log2"
    sin = "sin"
    cos = "cos"
    sqrt = "sqrt"
    recip = "recip"
    recip_sqrt = "recip_sqrt"
    neg = "neg"
    trunc = "trunc"
    tanh = "tanh"
    not_ = "not"
    uint4x32_to_prec_uniform = "uint4x32_to_prec_uniform"


class Ternop(enum.Enum):
    """Ternary ops: ``where(c, a, b)`` is ``c != 0 ? a : b``; ``fma(a, b, c)`` is ``a*b + c``."""

    where = "where"
    fma = "fma"


# Neutral elements for accumulation: the value `x` with accum(x, v) == v.
NEUTRAL: dict[Binop, float] = {
    Binop.add: 0.0,
    Binop.sub: 0.0,
    Binop.mul: 1.0,
    Binop.div: 1.0,
    Binop.max: -math.inf,
    Binop.min: math.inf,
    Binop.or_: 0.0,
    Binop.and_: 1.0,
    Binop.arg2: 0.0,
}


def neutral(op: Binop) -> float:
    """The neutral element of ``op`` used to initialize accumulations (0 when it has none)."""
    return NEUTRAL.get(op, 0.0)


def partial_start(op: Binop, is_float: bool) -> float:
    """The value a partial accumulation with ``op`` starts from when nothing sets it first:
    a local without an explicit start, a block, chunk, thread, vector lane or work-group
    partial, an empty slot of a combining tree. It is :func:`neutral`, except for float
    ``add``: -0.0, the exact identity of IEEE addition (``x + -0.0`` is ``x`` for every ``x``,
    both zeros included), where +0.0 would turn a sum of -0.0 terms into +0.0. Explicit fills
    (``Zero_out``, a neutral start of ``accum``) stay +0.0."""
    return -0.0 if op is Binop.add and is_float else neutral(op)


# ---- the optimizer's work cost model ----

COSTLY_UNOPS: frozenset[Unop] = frozenset(
    {Unop.exp, Unop.log, Unop.exp2, Unop.log2, Unop.sin, Unop.cos, Unop.tanh}
    | {Unop.sqrt, Unop.recip_sqrt, Unop.recip}
)
"""Unary ops the optimizer never evaluates more often than the unoptimized program does:
transcendentals (math-library calls), square roots and reciprocals (divisions)."""

COSTLY_BINOPS: frozenset[Binop] = frozenset({Binop.div, Binop.mod, Binop.pow, Binop.threefry4x32})
"""Binary ops the optimizer never evaluates more often than the unoptimized program does:
division and remainder, ``pow`` (a math-library call) and ``threefry4x32`` (20 rounds)."""

FREE_OPS: frozenset[Binop | Unop] = frozenset({Unop.identity, Binop.arg1, Binop.arg2})
"""Ops that compute nothing (they pick or convert an operand): not arithmetic to the cost
model."""


def is_costly(op: Binop | Unop | Ternop) -> bool:
    """Whether the work rule counts ``op`` as costly (:data:`COSTLY_UNOPS`,
    :data:`COSTLY_BINOPS`; no ternary op is)."""
    return op in COSTLY_UNOPS or op in COSTLY_BINOPS


def parse_binop(name: str | Binop) -> Binop:
    """Look up a binary op by name (``"add"``, ``"or"``, ...)."""
    if isinstance(name, Binop):
        return name
    return Binop(name)


def parse_unop(name: str | Unop) -> Unop:
    """Look up a unary op by name (``"relu"``, ``"not"``, ...)."""
    if isinstance(name, Unop):
        return name
    return Unop(name)


def parse_ternop(name: str | Ternop) -> Ternop:
    """Look up a ternary op by name (``"where"``, ``"fma"``)."""
    if isinstance(name, Ternop):
        return name
    return Ternop(name)


# ---- reference semantics (numpy) ----
# Each function takes numpy arrays (or scalars) already converted to the *computation dtype*
# and returns a value of that dtype. Integers wrap. Integer division and remainder follow C: the
# quotient truncates toward zero and the remainder takes the sign of the dividend; where C is
# undefined or traps, arrayjit pins a result so that every backend agrees: division by zero gives
# 0 (quotient and remainder), and for signed types x / -1 is -x (INT_MIN / -1 wraps to INT_MIN)
# and x % -1 is 0. Integer ops computed through floating point (pow, exp, log...) compute in
# float64 and convert by the saturating rule of `float_to_int`.

_ONE_ZERO = (1, 0)


def _as(dtype: np.dtype[Any], value: Any) -> Any:
    return np.asarray(value).astype(dtype)


def float_to_int(x: Any, dtype: np.dtype[Any]) -> Any:
    """Floats ``x`` converted to the integer ``dtype`` by the saturating rule: NaN gives 0, a
    value above the largest integer gives it (infinity included), one below the smallest gives
    it, any other truncates toward zero. The rule of WebAssembly's ``trunc_sat``, Rust's ``as``
    and Java: C leaves out-of-range conversions undefined, and numpy's cast inherits that."""
    dtype = np.dtype(dtype)
    info = np.iinfo(dtype)
    f = np.asarray(x).astype(np.float64)  # exact for every float precision
    t = np.trunc(np.where(np.isnan(f), 0.0, f))
    lo, hi = float(info.min), 2.0 ** (info.bits - (info.min < 0))  # both exact powers of two
    inside = np.where((t >= lo) & (t < hi), t, 0.0).astype(dtype)
    top, bottom = dtype.type(info.max), dtype.type(info.min)
    return np.where(t >= hi, top, np.where(t < lo, bottom, inside))


def _int_divmod(a: Any, b: Any) -> tuple[Any, Any]:
    """Quotient truncated toward zero and remainder with the sign of ``a``, of integer arrays of
    one dtype; ``b == 0`` gives 0 and 0, and for signed types ``b == -1`` gives ``-a`` (wrapping)
    and 0. Computed from numpy's floor division with a divisor that is never 0 or -1 (numpy's
    ``INT_MIN // -1`` overflows, and ``abs(INT_MIN)`` is negative)."""
    a, b = np.asarray(a), np.asarray(b)
    one, zero = a.dtype.type(1), a.dtype.type(0)
    special = b == 0
    minus_one = (b == -1) if a.dtype.kind == "i" else np.zeros_like(special)
    safe = np.where(special | minus_one, one, b)
    q, r = np.divmod(a, safe)
    inexact_negative = (r != 0) & ((a < 0) != (safe < 0))  # floor went one below truncation
    q = np.where(inexact_negative, q + one, q)
    r = np.where(inexact_negative, r - safe, r)
    q = np.where(minus_one, np.negative(a), np.where(special, zero, q))
    return q, np.where(special | minus_one, zero, r)


def _int_div(a: Any, b: Any) -> Any:
    return _int_divmod(a, b)[0]


def _int_mod(a: Any, b: Any) -> Any:
    return _int_divmod(a, b)[1]


def apply_binop(op: Binop, a: Any, b: Any, dtype: np.dtype[Any]) -> Any:
    """``op(a, b)`` computed in ``dtype`` (a numpy float or integer dtype)."""
    a = _as(dtype, a)
    b = _as(dtype, b)
    is_int = dtype.kind in "iu"
    with np.errstate(all="ignore"):
        match op:
            case Binop.arg1:
                r = a
            case Binop.arg2:
                r = b
            case Binop.add:
                r = a + b
            case Binop.sub:
                r = a - b
            case Binop.mul:
                r = a * b
            case Binop.div:
                r = _int_div(a, b) if is_int else a / b
            case Binop.pow:
                if is_int:
                    r = float_to_int(np.power(a.astype(np.float64), b.astype(np.float64)), dtype)
                else:
                    r = ieee_pow(a, b)
            case Binop.relu_gate:
                r = np.where(a > 0, b, 0)
            case Binop.satur01_gate:
                r = np.where((a > 0) & (a < 1), b, 0)
            case Binop.max:
                r = np.maximum(a, b) if is_int else _ieee_max(a, b)
            case Binop.min:
                r = np.minimum(a, b) if is_int else _ieee_min(a, b)
            case Binop.mod:
                r = _int_mod(a, b) if is_int else np.fmod(a, b)
            case Binop.cmplt:
                r = np.where(a < b, *_ONE_ZERO)
            case Binop.cmpeq:
                r = np.where(a == b, *_ONE_ZERO)
            case Binop.cmpne:
                r = np.where(a != b, *_ONE_ZERO)
            case Binop.or_:
                r = np.where((a != 0) | (b != 0), *_ONE_ZERO)
            case Binop.and_:
                r = np.where((a != 0) & (b != 0), *_ONE_ZERO)
            case Binop.threefry4x32:
                raise TypeError("threefry4x32 works on uint4x32 values: use threefry4x32()")
        return _as(dtype, r)


def apply_unop(op: Unop, a: Any, dtype: np.dtype[Any]) -> Any:
    """``op(a)`` computed in ``dtype``."""
    a = _as(dtype, a)
    is_int = dtype.kind in "iu"
    with np.errstate(all="ignore"):
        match op:
            case Unop.identity:
                r = a
            case Unop.relu if is_int:
                r = np.maximum(a, 0)
            case Unop.relu:  # max(a, +0): NaN stays, -0 becomes +0
                r = np.where((a > 0) | np.isnan(a), a, 0)
            case Unop.satur01 if is_int:
                r = np.clip(a, 0, 1)
            case Unop.satur01:  # min(max(a, +0), 1)
                r = np.where(a > 1, 1, np.where((a > 0) | np.isnan(a), a, 0))
            case Unop.neg:
                r = -a
            case Unop.trunc:
                r = a if is_int else np.trunc(a)
            case Unop.not_:
                r = np.where(a == 0, *_ONE_ZERO)
            case Unop.recip:
                r = _int_div(np.ones_like(a), a) if is_int else 1 / a
            case Unop.uint4x32_to_prec_uniform:
                raise TypeError("uint4x32_to_prec_uniform works on uint4x32 values")
            case _:
                fn = _FLOAT_UNOPS[op]
                src = a.astype(np.float64) if is_int else a
                r = fn(src)
                if is_int:
                    r = float_to_int(r, dtype)
        return _as(dtype, r)


_FLOAT_UNOPS: dict[Unop, Any] = {
    Unop.exp: np.exp,
    Unop.log: np.log,
    Unop.exp2: np.exp2,
    Unop.log2: np.log2,
    Unop.sin: np.sin,
    Unop.cos: np.cos,
    Unop.sqrt: np.sqrt,
    Unop.recip_sqrt: lambda x: 1 / np.sqrt(x),
    Unop.tanh: np.tanh,
}


def apply_ternop(op: Ternop, a: Any, b: Any, c: Any, dtype: np.dtype[Any]) -> Any:
    """``op(a, b, c)`` computed in ``dtype``; for ``where``, ``a`` is the condition (any dtype)."""
    with np.errstate(all="ignore"):
        match op:
            case Ternop.where:
                return _as(dtype, np.where(np.asarray(a) != 0, _as(dtype, b), _as(dtype, c)))
            case Ternop.fma:
                return exact_fma(a, b, c, dtype)
    raise TypeError(f"unknown ternary op {op}")


# ---- float semantics pinned down (see the package README, "Semantics decided here") ----


def _ieee_max(a: Any, b: Any) -> Any:
    """IEEE 754-2019 ``maximum``: a NaN operand gives NaN, and ``-0 < +0``."""
    return np.where(a == b, np.where(np.signbit(a), b, a), np.maximum(a, b))


def _ieee_min(a: Any, b: Any) -> Any:
    """IEEE 754-2019 ``minimum``: a NaN operand gives NaN, and ``-0 < +0``."""
    return np.where(a == b, np.where(np.signbit(a), a, b), np.minimum(a, b))


def ieee_pow(a: Any, b: Any) -> Any:
    """``a ** b`` with every special case of C99 Annex F / IEEE 754 ``pow`` (numpy's own rule
    differs: ``pow(-inf, 0.5)`` is NaN there, ``+inf`` here). Finite ordinary cases are numpy's
    ``power`` (a transcendental: within a few ulps, not bit-exact across backends)."""
    a, b = np.asarray(a), np.asarray(b)
    with np.errstate(all="ignore"):
        generic = np.power(a, b)
        b_int = np.isfinite(b) & (np.trunc(b) == b)
        b_odd = b_int & (np.fmod(b, 2) != 0)
        zero, inf = np.zeros_like(generic), np.full_like(generic, np.inf)
        big = np.abs(a) > 1
        r = np.select(
            [
                b == 0,  # pow(x, ±0) = 1, even for NaN
                a == 1,  # pow(+1, y) = 1, even for NaN
                np.isnan(a) | np.isnan(b),
                (a == -1) & np.isinf(b),  # pow(-1, ±inf) = 1
                np.isinf(b) & ((b > 0) == big),  # |a| > 1 to +inf, |a| < 1 to -inf
                np.isinf(b),
                (a == 0) & (b < 0),  # pow(±0, y<0): ±inf for odd y, else +inf
                a == 0,  # pow(±0, y>0): ±0 for odd y, else +0
                np.isneginf(a),  # pow(-inf, y) = pow(-0, -y)
                np.isposinf(a),
                (a < 0) & ~b_int,  # a negative finite base to a non-integer power
            ],
            [
                np.ones_like(generic),
                np.ones_like(generic),
                np.full_like(generic, np.nan),
                np.ones_like(generic),
                inf,
                zero,
                np.where(b_odd, np.copysign(inf, a), inf),
                np.where(b_odd, a, zero),
                np.where(b > 0, np.where(b_odd, -inf, inf), np.where(b_odd, -zero, zero)),
                np.where(b > 0, inf, zero),
                np.full_like(generic, np.nan),
            ],
            generic,
        )
    return r


def _bits_odd(x: float) -> bool:
    return bool(struct.unpack("<q", struct.pack("<d", x))[0] & 1)


def _fma_narrow(a: float, b: float, c: float) -> float:
    """``a*b + c`` for values of a format of at most 24 significant bits, rounded once to that
    format by the caller. The product is exact in double; the sum is rounded to double *to
    odd* (from its exact error, TwoSum), which makes the later rounding to the narrow format
    correct (no double rounding: double keeps more than two extra bits)."""
    p = a * b
    s = p + c
    if not math.isfinite(s):
        return s  # infinite or NaN operands: the exact result, as fma gives it
    bv = s - p
    err = (p - (s - bv)) + (c - bv)
    if err != 0 and not _bits_odd(s):
        s = math.nextafter(s, math.inf if err > 0 else -math.inf)
    return s


def _fma_double(a: float, b: float, c: float) -> float:
    """``a*b + c`` for doubles, rounded once: exact in rationals, then correctly rounded
    (``int / int`` in Python rounds correctly, subnormals included)."""
    if not (math.isfinite(a) and math.isfinite(b)):
        return a * b + c  # an infinite or NaN factor: the rounding of a*b does not matter
    if not math.isfinite(c):
        return c  # the exact product is finite, even where a*b would overflow
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    if exact == 0:  # the sign of an exact zero follows IEEE addition of the product and c
        return a * b + c
    try:
        return float(exact)
    except OverflowError:
        return math.inf if exact > 0 else -math.inf


def exact_fma(a: Any, b: Any, c: Any, dtype: np.dtype[Any]) -> Any:
    """``fma(a, b, c)`` in ``dtype``: ``a*b + c`` with one rounding (IEEE 754
    ``fusedMultiplyAdd``) for floats; wrapping ``a*b + c`` for integers."""
    a, b, c = _as(dtype, a), _as(dtype, b), _as(dtype, c)
    if dtype.kind in "iu":
        return _as(dtype, a * b + c)
    one = _fma_double if dtype.itemsize > 4 else _fma_narrow
    if a.ndim == b.ndim == c.ndim == 0:
        return _as(dtype, one(float(a), float(b), float(c)))
    a, b, c = np.broadcast_arrays(a, b, c)
    out = np.empty(a.shape, dtype)
    for i in np.ndindex(a.shape):
        out[i] = one(float(a[i]), float(b[i]), float(c[i]))
    return out


# ---- random bits ----
# Threefry-4x32 with 20 rounds (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3"):
# the Random123 rotation constants, key-schedule parity 0x1BD11BDA and a key injection every four
# rounds. Values are uint32 arrays whose last axis holds the four lanes.

_ROTATIONS = ((10, 26), (11, 21), (13, 27), (23, 5), (6, 20), (17, 11), (25, 10), (18, 20))
_PARITY = 0x1BD11BDA
THREEFRY_ROUNDS = 20


def _rotl(x: Any, r: int) -> Any:
    return ((x << np.uint32(r)) | (x >> np.uint32(32 - r))).astype(np.uint32)


def threefry4x32(key: Any, counter: Any) -> Any:
    """Random bits from ``key`` and ``counter`` (uint32 arrays of shape ``(..., 4)``)."""
    k = np.asarray(key, dtype=np.uint32)
    x = np.array(
        np.broadcast_to(
            np.asarray(counter, dtype=np.uint32), np.broadcast_shapes(k.shape, np.shape(counter))
        ),
        dtype=np.uint32,
    )
    ks = [k[..., i] for i in range(4)]
    ks.append(np.bitwise_xor.reduce(np.stack(ks), axis=0) ^ np.uint32(_PARITY))
    with np.errstate(over="ignore"):
        lanes = [x[..., i] + ks[i] for i in range(4)]
        for rnd in range(THREEFRY_ROUNDS):
            r0, r1 = _ROTATIONS[rnd % 8]
            if rnd % 2 == 0:
                lanes[0] = lanes[0] + lanes[1]
                lanes[1] = _rotl(lanes[1], r0) ^ lanes[0]
                lanes[2] = lanes[2] + lanes[3]
                lanes[3] = _rotl(lanes[3], r1) ^ lanes[2]
            else:
                lanes[0] = lanes[0] + lanes[3]
                lanes[3] = _rotl(lanes[3], r0) ^ lanes[0]
                lanes[2] = lanes[2] + lanes[1]
                lanes[1] = _rotl(lanes[1], r1) ^ lanes[2]
            if rnd % 4 == 3:
                inject = rnd // 4 + 1
                for i in range(4):
                    lanes[i] = lanes[i] + ks[(inject + i) % 5]
                lanes[3] = lanes[3] + np.uint32(inject)
    return np.stack([np.asarray(v, dtype=np.uint32) for v in lanes], axis=-1)


# Mantissa bits (with the implicit one) used by the uniform conversion of each float precision.
UNIFORM_BITS = {"double": 53, "single": 24, "bfloat16": 8, "half": 11, "fp8": 3}


def uint4x32_to_uniform(bits: Any, dtype: np.dtype[Any], prec_name: str) -> Any:
    """Convert random bits to ``dtype``: floats uniform in ``[0, 1)`` from the top mantissa-width
    bits of lane 0 (lanes 1:0 for double); integers take lane 0 (lanes 1:0 when 64-bit)."""
    b = np.asarray(bits, dtype=np.uint32)
    lo = b[..., 0].astype(np.uint64)
    wide = lo | (b[..., 1].astype(np.uint64) << np.uint64(32))
    if prec_name in UNIFORM_BITS:
        m = UNIFORM_BITS[prec_name]
        if m > 32:
            v = (wide >> np.uint64(64 - m)).astype(np.float64) * 2.0**-m
        else:
            v = (lo >> np.uint64(32 - m)).astype(np.float64) * 2.0**-m
        return v.astype(dtype)
    if dtype.itemsize == 8:
        return wide.astype(dtype)
    return lo.astype(np.uint32).astype(dtype)


# ---- C spellings ----
# Templates over the argument strings; renderers may override per precision (e.g. float vs
# double math functions: the ``{f}`` placeholder becomes ``f`` for float and empty for double).

C_BINOP: dict[Binop, str] = {
    Binop.add: "({0} + {1})",
    Binop.sub: "({0} - {1})",
    Binop.mul: "({0} * {1})",
    Binop.div: "({0} / {1})",
    Binop.pow: "pow{f}({0}, {1})",
    Binop.relu_gate: "({0} > 0 ? {1} : 0)",
    Binop.satur01_gate: "(({0} > 0 && {0} < 1) ? {1} : 0)",
    Binop.max: "aj_fmax{f}({0}, {1})",
    Binop.min: "aj_fmin{f}({0}, {1})",
    Binop.mod: "fmod{f}({0}, {1})",
    Binop.cmplt: "({0} < {1})",
    Binop.cmpeq: "({0} == {1})",
    Binop.cmpne: "({0} != {1})",
    Binop.or_: "({0} || {1})",
    Binop.and_: "({0} && {1})",
}

C_UNOP: dict[Unop, str] = {
    Unop.identity: "{0}",
    # !(x <= 0) holds for x > 0 and for NaN: NaN passes through, -0 becomes +0.
    Unop.relu: "(!({0} <= 0) ? {0} : 0)",
    Unop.satur01: "({0} > 1 ? 1 : (!({0} <= 0) ? {0} : 0))",
    Unop.exp: "exp{f}({0})",
    Unop.log: "log{f}({0})",
    Unop.exp2: "exp2{f}({0})",
    Unop.log2: "log2{f}({0})",
    Unop.sin: "sin{f}({0})",
    Unop.cos: "cos{f}({0})",
    Unop.sqrt: "sqrt{f}({0})",
    Unop.recip: "(1 / {0})",
    Unop.recip_sqrt: "(1 / sqrt{f}({0}))",
    Unop.neg: "(-{0})",
    Unop.trunc: "trunc{f}({0})",
    Unop.tanh: "tanh{f}({0})",
    Unop.not_: "({0} == 0)",
}

C_MINMAX = """{q} {t} aj_fmax{f}({t} a, {t} b) {{
  return (a > b || a != a) ? a : ((b > a || b != b) ? b : (signbit(a) ? b : a));
}}
{q} {t} aj_fmin{f}({t} a, {t} b) {{
  return (a < b || a != a) ? a : ((b < a || b != b) ? b : (signbit(a) ? a : b));
}}
"""
"""Float ``max`` and ``min`` in C-like languages (IEEE 754-2019 ``maximum``/``minimum``: a NaN
operand gives NaN, ``-0 < +0``), formatted with the function qualifier ``q``, the type ``t``
and its math-function suffix ``f`` (``f`` for float, empty for double). C's ``fmax`` drops
NaN."""


def c_minmax(qualifier: str, types: tuple[str, ...] = ("float", "double")) -> str:
    """The definitions of ``aj_fmax``/``aj_fmin`` (:data:`C_MINMAX`) for each C type named."""
    return "".join(C_MINMAX.format(q=qualifier, t=t, f="f" if t == "float" else "") for t in types)


C_INT_MATH = """{q} {t} aj_ipow{f}({t} x, {t} y) {{
  {t} r = pow{f}(x, y);
  return y >= 0 ? rint{f}(r) : r;
}}
{q} {t} aj_ilog2{f}({t} x) {{
  int e;
  return frexp{f}(x, &e) == ({t})0.5 ? ({t})(e - 1) : log2{f}(x);
}}
"""
"""Integer ``pow`` and ``log2`` computed in floating point (type ``t``, suffix ``f``), exact
where the true result is an integer: a non-negative power of integers (rounded to the nearest
integer) and the logarithm of a power of two (read off its exponent). GPU math libraries are
within an ulp or two there (CUDA's ``pow(3.0, 1.0)`` is ``2.9999999999999996``, its
``log2(8.0)`` below 3), which truncation to an integer turns into an off-by-one; host libms
are exact there, as is the interpreter."""


def c_int_math(qualifier: str, types: tuple[str, ...] = ("float", "double")) -> str:
    """The definitions of ``aj_ipow``/``aj_ilog2`` (:data:`C_INT_MATH`) for each C type named."""
    return "".join(
        C_INT_MATH.format(q=qualifier, t=t, f="f" if t == "float" else "") for t in types
    )


C_TERNOP: dict[Ternop, str] = {
    Ternop.where: "({0} ? {1} : {2})",
    Ternop.fma: "fma{f}({0}, {1}, {2})",
}

# Short infix names for the pretty printer.
INFIX: dict[Binop, str] = {
    Binop.add: "+",
    Binop.sub: "-",
    Binop.mul: "*",
    Binop.div: "/",
    Binop.pow: "**",
    Binop.mod: "%",
    Binop.cmplt: "<",
    Binop.cmpeq: "==",
    Binop.cmpne: "!=",
    Binop.or_: "||",
    Binop.and_: "&&",
}
