"""Fit the polynomial coefficients of arrayjit's math library
(``arrayjit_backends.codegen.math_lib``): near-minimax polynomials by Lawson's iteratively
reweighted least squares on a dense Chebyshev grid, the target functions evaluated from their
Taylor series in long double (no cancellation), coefficients rounded to float32 one at a time
(lowest degree first), the rest refitted after each rounding.

Run ``python tools/fit_math.py`` and paste the printed table into ``math_lib.COEFFS``; each line
also prints the weighted maximum error of the rounded polynomial (the error it adds to the
function, relative to the function's value, before any rounding of the evaluation).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

LD = np.longdouble
LN2 = LD("0.693147180559945309417232121458176568")


def series(t: np.ndarray, terms: Callable[[int], LD], n: int = 60) -> np.ndarray:
    """sum_k terms(k) * t**k, in long double."""
    t = t.astype(LD)
    out = np.zeros_like(t)
    p = np.ones_like(t)
    for k in range(n):
        out += terms(k) * p
        p = p * t
    return out


def fact(k: int) -> LD:
    return LD(math.factorial(k))


def fit(
    target: np.ndarray,
    t: np.ndarray,
    weight: np.ndarray,
    degree: int,
    single: bool,
    iterations: int = 60,
) -> tuple[list[float], float]:
    """Coefficients c_0..c_degree of P(t) minimizing max |weight * (target - P)| (near minimax),
    rounded to float32 when ``single``; and that maximum."""
    fixed: list[float] = []
    for k in range(degree + 1):
        free = list(range(k, degree + 1))
        resid = target - sum(LD(c) * t.astype(LD) ** j for j, c in enumerate(fixed))
        a = np.stack([(t.astype(LD) ** j) for j in free], axis=1).astype(np.float64)
        w = weight.astype(np.float64)
        lw = np.ones_like(w)
        sol = None
        for _ in range(iterations):
            sw = np.sqrt(lw) * w
            sol, *_ = np.linalg.lstsq(a * sw[:, None], resid.astype(np.float64) * sw, rcond=None)
            err = np.abs(w * (resid.astype(np.float64) - a @ sol))
            lw = lw * err
            lw /= lw.sum()
        assert sol is not None
        c = float(np.float32(sol[0])) if single else float(sol[0])
        fixed.append(c)
        if not single:
            fixed = fixed[:-1] + [float(v) for v in sol]
            break
    poly = sum(LD(c) * t.astype(LD) ** j for j, c in enumerate(fixed))
    return fixed, float(np.max(np.abs(weight * (target - poly))))


def grid(a: float, b: float, n: int = 6000) -> np.ndarray:
    k = np.arange(n)
    return ((a + b) / 2 + (b - a) / 2 * np.cos(np.pi * (k + 0.5) / n)).astype(np.float64)


def fits() -> dict[str, tuple[list[float], float]]:
    out = {}
    # exp: e^r = 1 + r + r^2 Q(r), |r| <= ln2/2 (+ margin for the rounding of n)
    r = grid(-0.3466 * 1.002, 0.3466 * 1.002)
    q = series(r, lambda k: 1 / fact(k + 2))
    out["exp_f32"] = fit(q, r, r**2 / np.exp(r), 5, True)
    # exp2: 2^r = 1 + r P(r), |r| <= 1/2
    r = grid(-0.5, 0.5)
    q = series(r, lambda k: LN2 ** (k + 1) / fact(k + 1))
    out["exp2_f32"] = fit(q, r, np.abs(r) / 2**r, 6, True)
    # log: log(1+f) = f + f^2 T(f), f in [sqrt(1/2) - 1, sqrt(2) - 1]
    f = grid(math.sqrt(0.5) - 1, math.sqrt(2) - 1)
    t = series(f, lambda k: LD((-1) ** (k + 1)) / (k + 2), 120)
    out["log_f32"] = fit(t, f, f**2 / np.abs(np.log1p(f)), 8, True)
    # log2: log2(1+f) = f / ln2 + f^2 T2(f)
    out["log2_f32"] = fit(t / LN2, f, f**2 / np.abs(np.log2(1 + f)), 8, True)
    # tanh, |x| < 0.55: tanh(a) = a + a^3 P(a^2)
    z = grid(0.0, 0.55**2 * 1.0001)
    a = np.sqrt(z.astype(LD))
    em1 = np.expm1(2 * a)
    with np.errstate(all="ignore"):
        exact = (em1 / (em1 + 2) - a) / a**3
    zl = z.astype(LD)
    p = np.where(z > 1e-4, exact, LD(-1) / 3 + 2 * zl / 15 - 17 * zl**2 / 315)
    af = a.astype(np.float64)
    out["tanh_f32"] = fit(p, z, z * af / np.maximum(np.tanh(af), 1e-300), 5, True)
    # double log for pow: log(m) = s B(s^2), s = f/(2+f) in [-0.1716, 0.1716]
    z = grid(0.0, 0.1716**2 * 1.01)
    b = series(z, lambda k: LD(2) / (2 * k + 1), 80)
    out["log_f64"] = fit(b, z, np.ones_like(z), 7, False)
    # double exp2 for pow: 2^r = 1 + r P(r), |r| <= 1/2
    r = grid(-0.5, 0.5)
    q = series(r, lambda k: LN2 ** (k + 1) / fact(k + 1))
    out["exp2_f64"] = fit(q, r, np.abs(r) / 2**r, 9, False)
    # double sin, cos on |r| <= pi/4: sin r = r + r^3 S(r^2), cos r = 1 - r^2/2 + r^4 C(r^2)
    z = grid(0.0, (math.pi / 4) ** 2 * 1.01)
    s = series(z, lambda k: LD((-1) ** (k + 1)) / fact(2 * k + 3), 30)
    rr = np.sqrt(z)
    out["sin_f64"] = fit(s, z, z * rr / np.maximum(np.sin(rr), 1e-300) + 0 * z, 5, False)
    c = series(z, lambda k: LD((-1) ** k) / fact(2 * k + 4), 30)
    out["cos_f64"] = fit(c, z, z**2 / np.cos(rr), 5, False)
    return out


def recip_seed(a: float = 1.0, b: float = 4 / 3) -> tuple[float, float]:
    """``(alpha, beta)``: ``1/d`` is ``alpha - beta d`` within the least relative error on
    ``[a, b]`` (equal at both ends and at the middle extremum), rounded to float32."""
    beta = 2 / ((a + b) ** 2 / 4 + a * b)
    return float(np.float32(beta * (a + b))), float(np.float32(beta))


def two_over_pi_chunks(count: int = 7, bits: int = 28) -> list[float]:
    """2/pi as ``count`` chunks of ``bits`` bits (Machin's formula in integers)."""

    def arctan_inv(n: int, prec: int) -> int:
        s = t = (1 << prec) // n
        k, sign = 1, -1
        while t:
            t //= n * n
            s += sign * (t // (2 * k + 1))
            k, sign = k + 1, -sign
        return s

    prec = 400
    pi = 4 * (4 * arctan_inv(5, prec) - arctan_inv(239, prec))  # pi * 2^prec
    two_over_pi = (1 << (2 * prec + 1)) // pi  # 2/pi * 2^prec
    mask = (1 << bits) - 1
    return [
        ((two_over_pi >> (prec - bits * (i + 1))) & mask) * 2.0 ** (-bits * (i + 1))
        for i in range(count)
    ]


def main() -> None:
    for name, (coeffs, err) in fits().items():
        print(f"    # max weighted error {err:.3g} (2^{math.log2(err):.1f})")
        print(f'    "{name}": (' + ", ".join(float(c).hex() for c in coeffs) + ",),")
    print("RECIP_SEED", [v.hex() for v in recip_seed()])
    print("TWO_OVER_PI_28", [v.hex() for v in two_over_pi_chunks()])


if __name__ == "__main__":
    main()
