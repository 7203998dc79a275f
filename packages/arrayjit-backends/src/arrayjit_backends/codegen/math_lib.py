"""arrayjit's own math library: the float32 transcendentals (``exp``, ``exp2``, ``log``,
``log2``, ``tanh``, ``sin``, ``cos``, ``pow``, ``recip_sqrt``) as branch-free range reduction
and polynomials, defined once here as straight-line steps and printed by every renderer: as C
functions (cc, OpenCL C, CUDA C: :func:`c_functions`) and as LLVM IR functions (llvm:
:func:`llvm_function`). The steps are IEEE operations (``+ - * /``, ``fma``, ``rint``,
conversions, bit casts, comparisons and selections), each rounded once, in the same order on
every target, so every backend computes the same bits; no call, no branch, so loops holding
them vectorize.

The algorithms (coefficients fitted by ``tools/fit_math.py``; bounds proved by
``tools/math_accuracy.py``, see arrayjit-ir's README, "Semantics decided here"):

- ``exp``: ``n = rint(x log2 e)``, ``r = x - n ln2`` (Cody-Waite, two parts, the first exact by
  ``fma``), ``e^r = 1 + r + r^2 Q(r)`` (degree 5) summed in double-float, times ``2^n`` in two
  exact-exponent steps (one rounding into the subnormals).
- ``exp2``: ``n = rint(x)``, ``r = x - n`` (exact), ``2^r = 1 + r P(r)`` (degree 6), ``2^n``.
- ``log``, ``log2``: ``x = 2^e m`` with ``m`` in ``[sqrt(1/2), sqrt(2))`` by integer arithmetic
  on the bits (subnormals scaled first), ``f = m - 1`` (exact), ``log1p(f) = f + f^2 T(f)``
  (degree 8), the sum with ``e ln2`` (or ``e``) in double-float.
- ``recip_sqrt``: the bit-trick seed, two Newton steps, one last step from the residual
  ``1 - x y^2`` computed exactly with ``fma`` (no division, no ``sqrt``).
- ``tanh``: below 0.55, ``a + a^3 P(a^2)`` (degree 5); above, ``1 - 2u / (1 + u)`` with
  ``u = e^(-2|x|)`` from ``exp``'s reduction as a double-float, the quotient by Newton's
  iteration (a linear seed, two steps) and its exact remainder (``fma``), no division; the
  sign of ``x``.
- ``sin``, ``cos``: ``x 2/pi`` reduced modulo 4 for every float, in double (Payne-Hanek without
  tables: 2/pi in 28-bit chunks, the four that matter for x's exponent chosen by selection,
  each product exact, reduced mod 4 exactly, summed with two-sums), ``r`` in
  ``[-pi/4, pi/4]``, the quadrant selecting ``+-sin r`` or ``+-cos r`` (double polynomials of
  degree 5 in ``r^2``), rounded once.
- ``pow``: in double: ``log2 |x|`` (``s = f / (2 + f)``, ``log m = s B(s^2)``), ``t = y log2|x|``,
  ``2^t`` (degree 9), rounded once; the C99 Annex F special cases by selection.

The double-based ones (``sin``, ``cos``, ``pow``) need fp64: an OpenCL device
without it keeps its builtins for them (:data:`NEEDS_FP64`).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field

from arrayjit_ir import ops

# ---- the steps ----

TYPES = ("f", "d", "u", "U", "b")
"""float32, float64, uint32, uint64, and a condition."""


@dataclass(frozen=True)
class V:
    """A value of a helper: a parameter or the result of a step."""

    name: str
    ty: str


Arg = V | float | int


@dataclass(frozen=True)
class Step:
    """``out = op(args)``; constants (Python numbers) take the type the op gives them."""

    out: V
    op: str
    args: tuple[Arg, ...]


@dataclass
class MathFn:
    """A helper function: its parameters, steps and result."""

    name: str
    params: tuple[V, ...]
    ret_ty: str
    steps: list[Step] = field(default_factory=list)
    result: V | None = None
    uses_double: bool = False

    # -- building --

    def _new(self, op: str, ty: str, *args: Arg) -> V:
        v = V(f"t{len(self.steps) + 1}", ty)
        self.steps.append(Step(v, op, args))
        if ty in ("d", "U"):
            self.uses_double = True
        return v

    @staticmethod
    def _ty(*args: Arg) -> str:
        for a in args:
            if isinstance(a, V):
                return a.ty
        raise ValueError("an op of constants only")

    def add(self, a: Arg, b: Arg) -> V:
        return self._new("add", self._ty(a, b), a, b)

    def sub(self, a: Arg, b: Arg) -> V:
        return self._new("sub", self._ty(a, b), a, b)

    def mul(self, a: Arg, b: Arg) -> V:
        return self._new("mul", self._ty(a, b), a, b)

    def div(self, a: Arg, b: Arg) -> V:
        return self._new("div", self._ty(a, b), a, b)

    def fma(self, a: Arg, b: Arg, c: Arg) -> V:
        return self._new("fma", self._ty(a, b, c), a, b, c)

    def neg(self, a: V) -> V:
        return self._new("neg", a.ty, a)

    def abs(self, a: V) -> V:
        return self._new("abs", a.ty, a)

    def rint(self, a: V) -> V:
        return self._new("rint", a.ty, a)

    def cmp(self, rel: str, a: Arg, b: Arg) -> V:
        """``a rel b`` for ``rel`` in lt, le, gt, ge, eq (ordered: false with NaN), ne
        (unordered: true with NaN); ``ult``/``ueq`` compare integers, unsigned."""
        return self._new(rel, "b", a, b)

    def isnan(self, a: V) -> V:
        return self._new("isnan", "b", a)

    def and_(self, a: V, b: V) -> V:
        return self._new("and", "b", a, b)

    def or_(self, a: V, b: V) -> V:
        return self._new("or", "b", a, b)

    def not_(self, a: V) -> V:
        return self._new("not", "b", a)

    def sel(self, c: V, a: Arg, b: Arg, ty: str = "f") -> V:
        """``c ? a : b``; ``ty`` types it when both are constants."""
        both_const = not isinstance(a, V) and not isinstance(b, V)
        return self._new("sel", ty if both_const else self._ty(a, b), c, a, b)

    def bits(self, a: V) -> V:
        """The bits of a float as an unsigned integer of its width."""
        return self._new("bits", "u" if a.ty == "f" else "U", a)

    def from_bits(self, a: V) -> V:
        return self._new("from_bits", "f" if a.ty == "u" else "d", a)

    def to_int(self, a: V) -> V:
        """A float holding an integer in range, as a (two's complement) integer of its width."""
        return self._new("to_int", "u" if a.ty == "f" else "U", a)

    def to_float(self, a: V) -> V:
        """A (two's complement, signed) integer as a float of its width."""
        return self._new("to_float", "f" if a.ty == "u" else "d", a)

    def widen(self, a: V) -> V:
        return self._new("widen", "d", a)

    def narrow(self, a: V) -> V:
        return self._new("narrow", "f", a)

    def iadd(self, a: Arg, b: Arg) -> V:
        return self._new("iadd", self._ty(a, b), a, b)

    def isub(self, a: Arg, b: Arg) -> V:
        return self._new("isub", self._ty(a, b), a, b)

    def iand(self, a: Arg, b: Arg) -> V:
        return self._new("iand", self._ty(a, b), a, b)

    def ior(self, a: Arg, b: Arg) -> V:
        return self._new("ior", self._ty(a, b), a, b)

    def shl(self, a: V, k: int) -> V:
        return self._new("shl", a.ty, a, k)

    def lshr(self, a: V, k: int) -> V:
        return self._new("lshr", a.ty, a, k)

    def poly(self, x: V, coeffs: tuple[float, ...]) -> V:
        """Horner's scheme with ``fma``: ``c0 + x (c1 + x (c2 + ...))``."""
        acc: Arg = coeffs[-1]
        for c in reversed(coeffs[:-1]):
            acc = self.fma(acc, x, c) if isinstance(acc, V) else self.fma(x, acc, c)
        assert isinstance(acc, V)
        return acc

    def two_sum_fast(self, a: V, b: Arg) -> tuple[V, V]:
        """``s + e = a + b`` exactly, for ``|a| >= |b|`` (or ``a`` zero)."""
        s = self.add(a, b)
        return s, self.sub(b, self.sub(s, a))

    def two_sum(self, a: V, b: V) -> tuple[V, V]:
        """``s + e = a + b`` exactly, whatever the magnitudes (Knuth)."""
        s = self.add(a, b)
        bb = self.sub(s, a)
        return s, self.add(self.sub(a, self.sub(s, bb)), self.sub(b, bb))

    def ret(self, v: V) -> None:
        """Make ``v`` the result; steps it does not depend on are dropped, and the others
        numbered in order (so the printed functions declare nothing unused)."""
        needed = {v.name}
        kept: list[Step] = []
        for step in reversed(self.steps):
            if step.out.name in needed:
                kept.append(step)
                needed |= {a.name for a in step.args if isinstance(a, V)}
        kept.reverse()
        names = {s.out.name: V(f"t{k + 1}", s.out.ty) for k, s in enumerate(kept)}

        def rename(a: Arg) -> Arg:
            return names.get(a.name, a) if isinstance(a, V) else a

        self.steps = [Step(names[s.out.name], s.op, tuple(map(rename, s.args))) for s in kept]
        result = rename(v)
        assert isinstance(result, V)
        self.result = result
        self.uses_double = any(s.out.ty in ("d", "U") for s in self.steps)


# ---- constants ----

_h = float.fromhex

COEFFS: dict[str, tuple[float, ...]] = {
    # tools/fit_math.py; the comment is the largest error the polynomial adds, relative to the
    # function's value, before any rounding of the evaluation
    # 2^-33.2
    "exp_f32": (
        0.5,
        _h("0x1.555554p-3"),
        _h("0x1.5554E8p-5"),
        _h("0x1.111312p-7"),
        _h("0x1.6D4CFEp-10"),
        _h("0x1.9DF468p-13"),
    ),
    # 2^-32.5
    "exp2_f32": (
        _h("0x1.62E430p-1"),
        _h("0x1.EBFBE0p-3"),
        _h("0x1.C6B06Ep-5"),
        _h("0x1.3B2A5Cp-7"),
        _h("0x1.5DA594p-10"),
        _h("0x1.440DE4p-13"),
        _h("0x1.E09586p-17"),
    ),
    # 2^-27.8
    "log_f32": (
        -_h("0x1.FFFFF8p-2"),
        _h("0x1.555550p-2"),
        -_h("0x1.000432p-2"),
        _h("0x1.99A416p-3"),
        -_h("0x1.5425C0p-3"),
        _h("0x1.226E6Ep-3"),
        -_h("0x1.0F4050p-3"),
        _h("0x1.085DB6p-3"),
        -_h("0x1.383B80p-4"),
    ),
    # 2^-27.7
    "log2_f32": (
        -_h("0x1.715470p-1"),
        _h("0x1.EC7094p-2"),
        -_h("0x1.715AFCp-2"),
        _h("0x1.277F42p-2"),
        -_h("0x1.EAA2DCp-3"),
        _h("0x1.A2CAAAp-3"),
        -_h("0x1.87F2EEp-3"),
        _h("0x1.7F1FCAp-3"),
        -_h("0x1.C3A1B8p-4"),
    ),
    # 2^-33.0
    "tanh_f32": (
        _h("-0x1.555554p-2"),
        _h("0x1.111082p-3"),
        _h("-0x1.b9f38ep-5"),
        _h("0x1.63b7bcp-6"),
        _h("-0x1.0c7e86p-7"),
        _h("0x1.19191cp-9"),
    ),
    # 2^-44.1
    "log_f64": (
        _h("0x1.FFFFFFFFFFF10p0"),
        _h("0x1.5555555664BA1p-1"),
        _h("0x1.9999965DFAC5Ep-2"),
        _h("0x1.249415F62CC1Ap-2"),
        _h("0x1.C63544A658048p-3"),
        _h("0x1.8EDA79A2242B6p-3"),
        _h("0x1.1209BFC61C51Ap-6"),
        _h("0x1.ED163C8D5A3F2p-11"),
    ),
    # 2^-48.2
    "exp2_f64": (
        _h("0x1.62E42FEFA3A0Bp-1"),
        _h("0x1.EBFBDFF82C6ADp-3"),
        _h("0x1.C6B08D7040580p-5"),
        _h("0x1.3B2AB6FB724D8p-7"),
        _h("0x1.5D87FE96F0150p-10"),
        _h("0x1.430913C54C200p-13"),
        _h("0x1.FFCB674E3B400p-17"),
        _h("0x1.62BD9E76A3800p-20"),
        _h("0x1.B6626501D4000p-24"),
        _h("0x1.EA6CDA72C0000p-28"),
    ),
    # 2^-48.0
    "sin_f64": (
        -_h("0x1.5555555555559p-3"),
        _h("0x1.11111111112F0p-7"),
        -_h("0x1.A01A01A08E700p-13"),
        _h("0x1.71DE3AC719400p-19"),
        -_h("0x1.AE6416C39C000p-26"),
        _h("0x1.5FD68EC000000p-33"),
    ),
    # 2^-53.7
    "cos_f64": (
        _h("0x1.55555555547BBp-5"),
        -_h("0x1.6C16C16AD8457p-10"),
        _h("0x1.A01A00388C9A0p-16"),
        -_h("0x1.27E435AA15800p-22"),
        _h("0x1.1E824911C0000p-29"),
        -_h("0x1.6451F29000000p-37"),
    ),
}

LOG2E_F = _h("0x1.715476p0")
LN2_HI_F = _h("0x1.62E430p-1")  # RN(ln 2): x - n LN2_HI_F is exact for |r| < 1/2
LN2_LO_F = -_h("0x1.05C610p-29")
LN2_H15 = _h("0x1.62E4p-1")  # 15 bits: e LN2_H15 is exact for |e| < 2^9
LN2_L15 = _h("0x1.7F7D1Cp-20")
IL_HI = _h("0x1.715476p0")  # 1/ln 2 = IL_HI + IL_LO
IL_LO = _h("0x1.4AE0C0p-26")
LOG2E_D = _h("0x1.71547652B82FEp0")
PIO2_HI = _h("0x1.921FB54442D18p0")
PIO2_LO = _h("0x1.1A62633145C07p-54")
TWO_OVER_PI_28 = (
    _h("0x1.45F306Cp-1"),
    _h("0x1.C9C882Ap-29"),
    _h("0x1.4FE13A8p-59"),
    _h("0x1.F47D4D0p-86"),
    _h("0x1.BB81B6Cp-113"),
    _h("0x1.4ACC9E0p-143"),
    _h("0x1.0E4107Cp-170"),
)
"""2/pi in seven chunks of 28 bits (``tools/fit_math.py``, from Machin's formula):
a float32 times a chunk is exact in double."""
SINCOS_WINDOWS = (2.0**53, 2.0**81, 2.0**109)
"""From these ``|x|`` on, ``sin`` and ``cos`` use the chunks of 2/pi from the next one on: for
``|x| >= 2^(28 w + 25)`` (the last bit of x at least ``2^(28 w + 2)``) the first ``w`` chunks
give multiples of 4; four chunks from there leave less than 2^-59."""
INF = float("inf")
NAN = float("nan")


# ---- the algorithms ----


def _scale2(fn: MathFn, p: V, n: V) -> V:
    """``p * 2^n`` for an integer-valued float ``n`` in ``[-151, 129]``: two exact-exponent
    multiplications, so only the last one rounds (into the subnormals)."""
    n1 = fn.to_int(fn.mul(n, 0.5))  # truncated toward zero
    n2 = fn.isub(fn.to_int(n), n1)
    s1 = fn.from_bits(fn.shl(fn.iadd(n1, 127), 23))
    s2 = fn.from_bits(fn.shl(fn.iadd(n2, 127), 23))
    return fn.mul(fn.mul(p, s1), s2)


def _exp_core(fn: MathFn, t: V) -> tuple[V, V, V]:
    """``e^t = 2^n (h + lo)`` for a finite ``t`` in ``[-104, 89]``: ``n`` (an integer-valued
    float), ``h + lo`` in about ``[sqrt(1/2), sqrt(2)]`` as a double-float (``h`` the rounded
    sum, relative error about 2^-30)."""
    n = fn.rint(fn.mul(t, LOG2E_F))
    nn = fn.neg(n)
    rh = fn.fma(nn, LN2_HI_F, t)  # exact
    rl = fn.mul(nn, LN2_LO_F)
    r = fn.add(rh, rl)
    q = fn.poly(r, COEFFS["exp_f32"])
    u = fn.fma(fn.mul(r, r), q, rl)
    h, lo = _one_plus(fn, rh)
    return n, *fn.two_sum_fast(h, fn.add(lo, u))


def _expf() -> MathFn:
    fn = MathFn("aj_expf", (V("x", "f"),), "f")
    x = fn.params[0]
    nan = fn.isnan(x)
    xc = fn.sel(fn.cmp("gt", x, 89.0), 89.0, x)
    xc = fn.sel(fn.cmp("lt", xc, -104.0), -104.0, xc)
    xc = fn.sel(nan, 0.0, xc)
    n, h, _ = _exp_core(fn, xc)
    fn.ret(fn.sel(nan, x, _scale2(fn, h, n)))
    return fn


def _one_plus(fn: MathFn, a: V) -> tuple[V, V]:
    """``1 + a`` as a double-float (``|a| <= 1``)."""
    s = fn.add(a, 1.0)
    return s, fn.sub(a, fn.sub(s, 1.0))


def _exp2f() -> MathFn:
    fn = MathFn("aj_exp2f", (V("x", "f"),), "f")
    x = fn.params[0]
    nan = fn.isnan(x)
    xc = fn.sel(fn.cmp("gt", x, 129.0), 129.0, x)
    xc = fn.sel(fn.cmp("lt", xc, -151.0), -151.0, xc)
    xc = fn.sel(nan, 0.0, xc)
    n = fn.rint(xc)
    r = fn.sub(xc, n)  # exact
    p = fn.fma(r, fn.poly(r, COEFFS["exp2_f32"]), 1.0)
    fn.ret(fn.sel(nan, x, _scale2(fn, p, n)))
    return fn


def _log_reduce(fn: MathFn, x: V) -> tuple[V, V]:
    """``x = 2^e (1 + f)`` with ``1 + f`` in ``[sqrt(1/2), sqrt(2))``, for positive finite
    ``x`` (subnormals included): ``e`` as a float, ``f`` (exact)."""
    sub = fn.cmp("lt", x, _h("0x1p-126"))
    xs = fn.sel(sub, fn.mul(x, _h("0x1p23")), x)
    # Adding 1 - sqrt(1/2) in the bits carries into the exponent exactly when the
    # significand is at least sqrt(1/2)'s.
    ix = fn.iadd(fn.bits(xs), 0x3F800000 - 0x3F3504F3)
    e = fn.isub(fn.lshr(ix, 23), 127)
    m = fn.from_bits(fn.iadd(fn.iand(ix, 0x007FFFFF), 0x3F3504F3))
    ef = fn.sub(fn.to_float(e), fn.sel(sub, 23.0, 0.0))
    return ef, fn.sub(m, 1.0)


def _log_specials(fn: MathFn, x: V, res: V) -> V:
    res = fn.sel(fn.cmp("eq", x, INF), INF, res)
    res = fn.sel(fn.cmp("eq", x, 0.0), -INF, res)
    return fn.sel(fn.not_(fn.cmp("ge", x, 0.0)), NAN, res)


def _logf() -> MathFn:
    fn = MathFn("aj_logf", (V("x", "f"),), "f")
    x = fn.params[0]
    ef, f = _log_reduce(fn, x)
    t = fn.poly(f, COEFFS["log_f32"])
    f2h = fn.mul(f, f)
    f2l = fn.fma(f, f, fn.neg(f2h))
    hi = fn.mul(ef, LN2_H15)  # exact
    s, err = fn.two_sum_fast(hi, f)
    lo = fn.fma(f2h, t, fn.fma(f2l, t, err))
    lo = fn.fma(ef, LN2_L15, lo)
    fn.ret(_log_specials(fn, x, fn.add(s, lo)))
    return fn


def _log2f() -> MathFn:
    fn = MathFn("aj_log2f", (V("x", "f"),), "f")
    x = fn.params[0]
    ef, f = _log_reduce(fn, x)
    t = fn.poly(f, COEFFS["log2_f32"])
    f2h = fn.mul(f, f)
    f2l = fn.fma(f, f, fn.neg(f2h))
    hi = fn.mul(f, IL_HI)
    lo = fn.fma(f, IL_HI, fn.neg(hi))  # exact
    lo = fn.fma(f, IL_LO, lo)
    lo = fn.fma(f2h, t, fn.fma(f2l, t, lo))
    s, err = fn.two_sum_fast(ef, hi)
    fn.ret(_log_specials(fn, x, fn.add(s, fn.add(err, lo))))
    return fn


def _rsqrtf() -> MathFn:
    fn = MathFn("aj_rsqrtf", (V("x", "f"),), "f")
    x = fn.params[0]
    sub = fn.cmp("lt", x, _h("0x1p-126"))
    xs = fn.sel(sub, fn.mul(x, _h("0x1p24")), x)
    y = fn.from_bits(fn.isub(0x5F375A86, fn.lshr(fn.bits(xs), 1)))
    hx = fn.mul(xs, 0.5)
    for _ in range(2):  # Newton: y (3/2 - x y^2 / 2)
        y = fn.mul(y, fn.fma(fn.neg(hx), fn.mul(y, y), 1.5))
    ph = fn.mul(xs, y)
    pl = fn.fma(xs, y, fn.neg(ph))  # x y = ph + pl exactly
    r = fn.fma(fn.neg(pl), y, fn.fma(fn.neg(ph), y, 1.0))  # 1 - x y^2
    y = fn.fma(fn.mul(y, 0.5), r, y)
    res = fn.sel(sub, fn.mul(y, _h("0x1p12")), y)
    res = fn.sel(fn.cmp("eq", x, INF), 0.0, res)
    signed_inf = fn.from_bits(fn.ior(fn.iand(fn.bits(x), 0x80000000), 0x7F800000))
    res = fn.sel(fn.cmp("eq", x, 0.0), signed_inf, res)
    fn.ret(fn.sel(fn.not_(fn.cmp("ge", x, 0.0)), NAN, res))
    return fn


def _with_sign_of(fn: MathFn, mag: V, x: V) -> V:
    """The float ``mag`` (not negative) with the sign bit of ``x``."""
    return fn.from_bits(fn.ior(fn.bits(mag), fn.iand(fn.bits(x), 0x80000000)))


def _pow2_d(fn: MathFn, n: V) -> V:
    """``2^n`` in double for an integer-valued double ``n`` of the normal range."""
    return fn.from_bits(fn.shl(fn.iadd(fn.to_int(n), 1023), 52))


TANH_SMALL = _h("0x1.19999ap-1")  # 0.55 in float32
"""Below this ``|x|``, ``tanh`` is an odd polynomial; from it on, ``1 - 2u/(1 + u)`` with
``u = e^(-2|x|)``."""
RECIP_SEED = (_h("0x1.bb61a6p0"), _h("0x1.7c0a8ep-1"))
"""``1/d`` for ``d`` in ``[1, 4/3]`` is ``a - b d`` within 2^-6.6 (relative minimax)."""


def _tanhf() -> MathFn:
    fn = MathFn("aj_tanhf", (V("x", "f"),), "f")
    x = fn.params[0]
    a = fn.abs(x)
    # |x| < 0.55: a + a^3 P(a^2) (NaN passes)
    z = fn.mul(a, a)
    small = fn.fma(fn.mul(a, z), fn.poly(z, COEFFS["tanh_f32"]), a)
    # |x| >= 0.55: 1 - q, q = 2u / (1 + u), u = e^(-2a) in (2^-29, 1/3], all as double-floats
    al = fn.sel(fn.cmp("gt", a, TANH_SMALL), a, TANH_SMALL)
    al = fn.sel(fn.cmp("gt", al, 10.0), 10.0, al)  # tanh is 1 in float32 from 9.01 on
    n, h, lo = _exp_core(fn, fn.mul(al, -2.0))
    scale = fn.from_bits(fn.shl(fn.iadd(fn.to_int(n), 127), 23))
    v = fn.mul(h, scale)
    vl = fn.mul(lo, scale)
    d, dl = _one_plus(fn, v)
    dl = fn.add(dl, vl)
    y = fn.fma(d, -RECIP_SEED[1], RECIP_SEED[0])
    for _ in range(2):  # Newton: y (2 - d y)
        y = fn.fma(y, fn.fma(fn.neg(d), y, 1.0), y)
    v2 = fn.mul(v, 2.0)
    q0 = fn.mul(v2, y)
    rho = fn.fma(fn.neg(q0), d, v2)  # exact remainder of 2v / d
    rho = fn.add(rho, fn.fma(fn.neg(q0), dl, fn.mul(vl, 2.0)))
    q1 = fn.mul(rho, y)
    s = fn.sub(1.0, q0)
    e = fn.sub(fn.sub(1.0, s), q0)  # 1 - q0 = s + e exactly
    large = fn.add(s, fn.sub(e, q1))
    res = fn.sel(fn.not_(fn.cmp("ge", a, TANH_SMALL)), small, large)
    fn.ret(_with_sign_of(fn, res, x))
    return fn


def _sincosf(name: str, cos: bool) -> MathFn:
    fn = MathFn(name, (V("x", "f"),), "f")
    x = fn.params[0]
    ax = fn.abs(x)
    finite = fn.cmp("lt", ax, INF)
    xd = fn.widen(fn.sel(finite, x, 0.0))
    # x 2/pi modulo 4, as hi + lo, from the four chunks of 2/pi that matter for x's exponent
    # (a window chosen by selection: the chunks before it give multiples of 4, those after it
    # less than 2^-59): each product is exact, the first two are reduced modulo 4 exactly, and
    # all are summed exactly (two-sums) into hi, the rounding errors into lo.
    chunks: list[Arg] = list(TWO_OVER_PI_28[:4])
    for w, bound in enumerate(SINCOS_WINDOWS, start=1):
        wide = fn.cmp("ge", ax, bound)
        chunks = [fn.sel(wide, TWO_OVER_PI_28[w + k], c, ty="d") for k, c in enumerate(chunks)]
    p = [fn.mul(xd, c) for c in chunks]
    for k in (0, 1):
        p[k] = fn.fma(fn.rint(fn.mul(p[k], 0.25)), -4.0, p[k])
    hi, lo = fn.two_sum(p[0], p[1])
    hi, e = fn.two_sum(hi, p[2])
    lo = fn.add(fn.add(lo, e), p[3])
    q = fn.rint(hi)
    f = fn.sub(hi, q)  # exact; the quadrant's fraction is f + lo
    r = fn.fma(f, PIO2_HI, fn.fma(f, PIO2_LO, fn.mul(lo, PIO2_HI)))
    z = fn.mul(r, r)
    s = fn.fma(fn.mul(r, z), fn.poly(z, COEFFS["sin_f64"]), r)
    c = fn.fma(fn.mul(z, z), fn.poly(z, COEFFS["cos_f64"]), fn.fma(z, -0.5, 1.0))
    quadrant = fn.to_int(q)
    if cos:
        quadrant = fn.iadd(quadrant, 1)
    odd = fn.cmp("ueq", fn.iand(quadrant, 1), 1)
    neg = fn.cmp("ueq", fn.iand(quadrant, 2), 2)
    v = fn.sel(odd, c, s)
    v = fn.sel(neg, fn.neg(v), v)
    res = fn.narrow(v)
    if not cos:
        res = fn.sel(fn.cmp("eq", x, 0.0), x, res)  # sin(-0) = -0
    fn.ret(fn.sel(finite, res, fn.sub(x, x)))  # NaN for infinities and NaN
    return fn


def _powf() -> MathFn:
    fn = MathFn("aj_powf", (V("x", "f"), V("y", "f")), "f")
    x, y = fn.params
    ax = fn.abs(x)
    ay = fn.abs(y)
    y_finite = fn.cmp("lt", ay, INF)
    y_int = fn.and_(fn.cmp("eq", fn.rint(y), y), y_finite)
    half = fn.mul(y, 0.5)
    y_odd = fn.and_(y_int, fn.cmp("ne", fn.rint(half), half))
    # the core, on finite positive values (others are special cases below)
    ok = fn.and_(fn.cmp("gt", ax, 0.0), fn.cmp("lt", ax, INF))
    xd = fn.widen(fn.sel(ok, ax, 1.0))
    ix = fn.iadd(fn.bits(xd), 0x3FF0000000000000 - 0x3FE6A09E667F3BCD)
    e = fn.to_float(fn.isub(fn.lshr(ix, 52), 1023))
    m = fn.from_bits(fn.iadd(fn.iand(ix, 0x000FFFFFFFFFFFFF), 0x3FE6A09E667F3BCD))
    f = fn.sub(m, 1.0)
    s = fn.div(f, fn.add(f, 2.0))
    lg = fn.mul(s, fn.poly(fn.mul(s, s), COEFFS["log_f64"]))  # log m
    l2 = fn.fma(lg, LOG2E_D, e)
    t = fn.mul(fn.widen(fn.sel(y_finite, y, 0.0)), l2)
    t = fn.sel(fn.cmp("gt", t, 140.0), 140.0, t)
    t = fn.sel(fn.cmp("lt", t, -160.0), -160.0, t)
    n = fn.rint(t)
    r = fn.sub(t, n)
    p = fn.fma(r, fn.poly(r, COEFFS["exp2_f64"]), 1.0)
    res = fn.narrow(fn.mul(p, _pow2_d(fn, n)))
    x_neg = fn.cmp("lt", x, 0.0)
    res = fn.sel(fn.and_(x_neg, y_odd), fn.neg(res), res)
    res = fn.sel(fn.and_(x_neg, fn.not_(y_int)), NAN, res)
    # x = +-0: +-inf or +-0 for odd integers y, else +inf or +0
    y_neg = fn.cmp("lt", y, 0.0)
    zero_inf = fn.sel(y_odd, fn.from_bits(fn.ior(fn.iand(fn.bits(x), 0x80000000), 0x7F800000)), INF)
    zero = fn.sel(y_neg, zero_inf, fn.sel(y_odd, x, 0.0))
    res = fn.sel(fn.cmp("eq", x, 0.0), zero, res)
    # x = +-inf: like +-0 to the power -y
    odd_neg = fn.and_(x_neg, y_odd)
    big = fn.sel(odd_neg, -INF, INF)
    small = fn.sel(odd_neg, -0.0, 0.0)
    res = fn.sel(fn.cmp("eq", ax, INF), fn.sel(y_neg, small, big), res)
    # y = +-inf
    grows = fn.cmp("eq", fn.sel(fn.cmp("gt", ax, 1.0), 1.0, 0.0), fn.sel(y_neg, 0.0, 1.0))
    yinf = fn.sel(fn.cmp("eq", ax, 1.0), 1.0, fn.sel(grows, INF, 0.0))
    res = fn.sel(fn.cmp("eq", ay, INF), yinf, res)
    res = fn.sel(fn.or_(fn.isnan(x), fn.isnan(y)), NAN, res)
    res = fn.sel(fn.or_(fn.cmp("eq", y, 0.0), fn.cmp("eq", x, 1.0)), 1.0, res)
    fn.ret(res)
    return fn


BUILDERS: dict[str, Callable[[], MathFn]] = {
    "aj_expf": _expf,
    "aj_exp2f": _exp2f,
    "aj_logf": _logf,
    "aj_log2f": _log2f,
    "aj_rsqrtf": _rsqrtf,
    "aj_tanhf": _tanhf,
    "aj_sinf": lambda: _sincosf("aj_sinf", False),
    "aj_cosf": lambda: _sincosf("aj_cosf", True),
    "aj_powf": _powf,
}

FUNCTIONS: dict[str, MathFn] = {name: build() for name, build in BUILDERS.items()}
"""Every helper, by name."""

UNOP_FUNCTIONS: dict[ops.Unop, str] = {
    ops.Unop.exp: "aj_expf",
    ops.Unop.exp2: "aj_exp2f",
    ops.Unop.log: "aj_logf",
    ops.Unop.log2: "aj_log2f",
    ops.Unop.recip_sqrt: "aj_rsqrtf",
    ops.Unop.tanh: "aj_tanhf",
    ops.Unop.sin: "aj_sinf",
    ops.Unop.cos: "aj_cosf",
}
"""The float32 unary ops computed by this library (half, bfloat16 and fp8 compute in float32,
so they use them too)."""

BINOP_FUNCTIONS: dict[ops.Binop, str] = {ops.Binop.pow: "aj_powf"}
"""The float32 binary ops computed by this library."""

NEEDS_FP64: frozenset[str] = frozenset(n for n, f in FUNCTIONS.items() if f.uses_double)
"""The helpers that compute in double."""


# ---- C ----


@dataclass(frozen=True)
class CDialect:
    """How a C-like dialect spells what the steps need."""

    qualifier: str = "static inline"
    f32_bits: str = "aj_f32_bits({})"
    f32_from_bits: str = "aj_f32_from_bits({})"
    f64_bits: str = "aj_f64_bits({})"
    f64_from_bits: str = "aj_f64_from_bits({})"
    casts: str = ""
    """Definitions the bit casts need (C: union-based functions)."""


C_CASTS = "".join(
    f"{{q}} {ret} aj_{name}({arg} x) {{{{ union {{{{ {fl} f; {ui} u; }}}} v; "
    f"v.{put} = x; return v.{get}; }}}}\n"
    for name, ret, arg, fl, ui, put, get in (
        ("f32_bits", "uint32_t", "float", "float", "uint32_t", "f", "u"),
        ("f32_from_bits", "float", "uint32_t", "float", "uint32_t", "u", "f"),
        ("f64_bits", "uint64_t", "double", "double", "uint64_t", "f", "u"),
        ("f64_from_bits", "double", "uint64_t", "double", "uint64_t", "u", "f"),
    )
)
"""C's bit casts (through a union, which compilers keep in registers), with the qualifier
``{q}``."""

C_DIALECT = CDialect(casts=C_CASTS.format(q="static inline"))
OPENCL_DIALECT = CDialect(
    qualifier="inline",
    f32_bits="as_uint({})",
    f32_from_bits="as_float({})",
    f64_bits="as_ulong({})",
    f64_from_bits="as_double({})",
)
CUDA_DIALECT = CDialect(
    qualifier="__device__ inline",
    f32_bits="__float_as_uint({})",
    f32_from_bits="__uint_as_float({})",
    f64_bits="((uint64_t)__double_as_longlong({}))",
    f64_from_bits="__longlong_as_double((long long)({}))",
)

_CTYPE = {"f": "float", "d": "double", "u": "uint32_t", "U": "uint64_t", "b": "int"}
_SIGNED = {"u": "int32_t", "U": "int64_t"}


def _exact_f32(v: float) -> float:
    """``v``, which must be a float32 value (or not finite): a constant is never rounded by
    the compiler that reads it."""
    if v == v and v not in (INF, -INF) and struct.unpack("<f", struct.pack("<f", v))[0] != v:
        raise ValueError(f"the float32 constant {v!r} is not a float32 value")
    return v


def _c_const(v: float | int, ty: str) -> str:
    if ty == "f":
        _exact_f32(float(v))
    if ty in ("u", "U"):
        return f"{int(v)}u" if ty == "u" else f"{int(v)}ull"
    v = float(v)
    if v != v:
        return f"(({_CTYPE[ty]})NAN)"
    if v in (INF, -INF):
        return f"(({_CTYPE[ty]})({'-' if v < 0 else ''}INFINITY))"
    text = v.hex()
    mant, exp = text.split("p")
    mant = mant.rstrip("0").rstrip(".") if "." in mant else mant
    return f"{mant}p{exp}{'f' if ty == 'f' else ''}"


def _c_expr(step: Step, d: CDialect, ty_of: Callable[[Arg, str], str]) -> str:
    op, args, t = step.op, step.args, step.out.ty
    a = [ty_of(x, t) for x in args]
    f = "f" if (args and isinstance(args[0], V) and args[0].ty == "f") or t == "f" else ""
    match op:
        case "add" | "iadd":
            return f"{a[0]} + {a[1]}"
        case "sub" | "isub":
            return f"{a[0]} - {a[1]}"
        case "mul":
            return f"{a[0]} * {a[1]}"
        case "div":
            return f"{a[0]} / {a[1]}"
        case "fma":
            return f"fma{f}({a[0]}, {a[1]}, {a[2]})"
        case "neg":
            return f"-{a[0]}"
        case "abs":
            return f"fabs{f}({a[0]})"
        case "rint":
            return f"rint{f}({a[0]})"
        case "lt" | "le" | "gt" | "ge" | "eq" | "ne" | "ueq":
            sym = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}
            return f"{a[0]} {sym.get(op, '==')} {a[1]}"
        case "isnan":
            return f"{a[0]} != {a[0]}"
        case "and":
            return f"{a[0]} && {a[1]}"
        case "or":
            return f"{a[0]} || {a[1]}"
        case "not":
            return f"!{a[0]}"
        case "sel":
            return f"{a[0]} ? {a[1]} : {a[2]}"
        case "bits":
            return (d.f32_bits if args[0].ty == "f" else d.f64_bits).format(a[0])  # type: ignore[union-attr]
        case "from_bits":
            return (d.f32_from_bits if t == "f" else d.f64_from_bits).format(a[0])
        case "to_int":
            return f"({_CTYPE[t]})({_SIGNED[t]}){a[0]}"
        case "to_float":
            return f"({_CTYPE[t]})({_SIGNED[args[0].ty]}){a[0]}"  # type: ignore[union-attr]
        case "widen":
            return f"(double){a[0]}"
        case "narrow":
            return f"(float){a[0]}"
        case "iand":
            return f"{a[0]} & {a[1]}"
        case "ior":
            return f"{a[0]} | {a[1]}"
        case "shl":
            return f"{a[0]} << {int(args[1])}"  # type: ignore[arg-type]
        case "lshr":
            return f"{a[0]} >> {int(args[1])}"  # type: ignore[arg-type]
    raise ValueError(f"unknown math step {op}")


def _const_ty(step: Step) -> str:
    """The type constants of ``step`` take: its operands' (a select's arms, a comparison's
    operands), else its result's."""
    if step.op in ("shl", "lshr"):
        return step.out.ty
    for a in step.args[1:] if step.op == "sel" else step.args:
        if isinstance(a, V):
            return a.ty
    return step.out.ty


def c_function(fn: MathFn, d: CDialect) -> str:
    """The C definition of ``fn`` in dialect ``d``: one ``const`` local per step."""
    params = ", ".join(f"{_CTYPE[p.ty]} {p.name}" for p in fn.params)
    lines = [f"{d.qualifier} {_CTYPE[fn.ret_ty]} {fn.name}({params}) {{"]
    for step in fn.steps:
        cty = _const_ty(step)

        def text(a: Arg, _t: str, cty: str = cty) -> str:
            return a.name if isinstance(a, V) else _c_const(a, cty)

        lines.append(f"  const {_CTYPE[step.out.ty]} {step.out.name} = {_c_expr(step, d, text)};")
    assert fn.result is not None
    lines.append(f"  return {fn.result.name};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def c_functions(names: list[str] | tuple[str, ...], d: CDialect) -> str:
    """The C definitions of the helpers ``names`` (in this module's order), with the bit-cast
    definitions of the dialect first; empty when ``names`` is."""
    asked = set(names)
    wanted = [n for n in FUNCTIONS if n in asked]
    if not wanted:
        return ""
    return d.casts + "".join(c_function(FUNCTIONS[n], d) for n in wanted)


# ---- LLVM ----

_LLTYPE = {"f": "float", "d": "double", "u": "i32", "U": "i64", "b": "i1"}
_SUFFIX = {"f": "f32", "d": "f64"}


def _ll_const(v: float | int, ty: str) -> str:
    if ty in ("u", "U"):
        bits = 32 if ty == "u" else 64
        v = int(v) & ((1 << bits) - 1)
        return str(v - (1 << bits) if v >= 1 << (bits - 1) else v)
    if ty == "f":
        _exact_f32(float(v))
    return f"0x{struct.unpack('<Q', struct.pack('<d', float(v)))[0]:016X}"


_FCMP = {"lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge", "eq": "oeq", "ne": "une"}


def llvm_function(fn: MathFn) -> tuple[str, tuple[str, ...]]:
    """The LLVM IR definition of ``fn`` (internal, attribute group ``#1``: always inlined) and
    the intrinsic declarations it needs."""
    decls: dict[str, None] = {}

    def val(a: Arg, ty: str) -> str:
        return f"%{a.name}" if isinstance(a, V) else _ll_const(a, ty)

    def intrinsic(name: str, ty: str, n: int) -> str:
        lt = _LLTYPE[ty]
        fn_name = f"llvm.{name}.{_SUFFIX[ty]}"
        decls[f"declare {lt} @{fn_name}({', '.join([lt] * n)})"] = None
        return f"call {lt} @{fn_name}"

    params = ", ".join(f"{_LLTYPE[p.ty]} %{p.name}" for p in fn.params)
    lines = [f"define internal {_LLTYPE[fn.ret_ty]} @{fn.name}({params}) #1 {{"]
    for step in fn.steps:
        op, t = step.op, step.out.ty
        cty = _const_ty(step)
        a = [val(x, cty) for x in step.args]
        lt, ct = _LLTYPE[t], _LLTYPE[cty]
        match op:
            case "add" | "sub" | "mul" | "div":
                text = f"f{'div' if op == 'div' else op} {lt} {a[0]}, {a[1]}"
            case "iadd" | "isub":
                text = f"{op[1:]} {lt} {a[0]}, {a[1]}"
            case "iand" | "ior":
                text = f"{op[1:]} {lt} {a[0]}, {a[1]}"
            case "shl" | "lshr":
                text = f"{op} {lt} {a[0]}, {int(step.args[1])}"  # type: ignore[arg-type]
            case "fma":
                text = f"{intrinsic('fma', t, 3)}({lt} {a[0]}, {lt} {a[1]}, {lt} {a[2]})"
            case "abs" | "rint":
                name = "fabs" if op == "abs" else "rint"
                text = f"{intrinsic(name, t, 1)}({lt} {a[0]})"
            case "neg":
                text = f"fneg {lt} {a[0]}"
            case "lt" | "le" | "gt" | "ge" | "eq" | "ne":
                text = f"fcmp {_FCMP[op]} {ct} {a[0]}, {a[1]}"
            case "ueq":
                text = f"icmp eq {ct} {a[0]}, {a[1]}"
            case "isnan":
                text = f"fcmp uno {ct} {a[0]}, {a[0]}"
            case "and" | "or":
                text = f"{op} i1 {a[0]}, {a[1]}"
            case "not":
                text = f"xor i1 {a[0]}, true"
            case "sel":
                text = f"select i1 {a[0]}, {lt} {a[1]}, {lt} {a[2]}"
            case "bits" | "from_bits":
                text = f"bitcast {ct} {a[0]} to {lt}"
            case "to_int":
                text = f"fptosi {ct} {a[0]} to {lt}"
            case "to_float":
                text = f"sitofp {ct} {a[0]} to {lt}"
            case "widen":
                text = f"fpext float {a[0]} to double"
            case "narrow":
                text = f"fptrunc double {a[0]} to float"
            case _:
                raise ValueError(f"unknown math step {op}")
        lines.append(f"  %{step.out.name} = {text}")
    assert fn.result is not None
    lines.append(f"  ret {_LLTYPE[fn.ret_ty]} %{fn.result.name}")
    lines.append("}")
    return "\n" + "\n".join(lines), tuple(decls)


__all__ = [
    "BINOP_FUNCTIONS",
    "CUDA_DIALECT",
    "C_DIALECT",
    "FUNCTIONS",
    "NEEDS_FP64",
    "OPENCL_DIALECT",
    "UNOP_FUNCTIONS",
    "CDialect",
    "MathFn",
    "c_function",
    "c_functions",
    "llvm_function",
]
