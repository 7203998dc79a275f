"""Op semantics against numpy, per precision; threefry and uniform conversion."""

import numpy as np
import pytest

from arrayjit_ir import ops
from arrayjit_ir.ops import Binop, Ternop, Unop

F32 = np.dtype(np.float32)
I32 = np.dtype(np.int32)
A = np.array([-2.5, -1.0, 0.0, 0.5, 3.0], dtype=np.float32)
B = np.array([1.5, -2.0, 4.0, 0.25, 3.0], dtype=np.float32)

FLOAT_BINOPS = {
    Binop.arg1: A,
    Binop.arg2: B,
    Binop.add: A + B,
    Binop.sub: A - B,
    Binop.mul: A * B,
    Binop.div: A / B,
    Binop.pow: np.power(A, B),
    Binop.relu_gate: np.where(A > 0, B, 0),
    Binop.satur01_gate: np.where((A > 0) & (A < 1), B, 0),
    Binop.max: np.maximum(A, B),
    Binop.min: np.minimum(A, B),
    Binop.mod: np.fmod(A, B),
    Binop.cmplt: (A < B).astype(np.float32),
    Binop.cmpeq: (A == B).astype(np.float32),
    Binop.cmpne: (A != B).astype(np.float32),
    Binop.or_: ((A != 0) | (B != 0)).astype(np.float32),
    Binop.and_: ((A != 0) & (B != 0)).astype(np.float32),
}


@pytest.mark.parametrize("op", list(FLOAT_BINOPS), ids=lambda o: o.value)
def test_float_binops(op: Binop) -> None:
    got = ops.apply_binop(op, A, B, F32)
    assert got.dtype == F32
    np.testing.assert_array_equal(got, FLOAT_BINOPS[op].astype(np.float32))


FLOAT_UNOPS = {
    Unop.identity: A,
    Unop.relu: np.maximum(A, 0),
    Unop.satur01: np.clip(A, 0, 1),
    Unop.exp: np.exp(A),
    Unop.log: np.log(np.abs(A) + 1),
    Unop.exp2: np.exp2(A),
    Unop.log2: np.log2(np.abs(A) + 1),
    Unop.sin: np.sin(A),
    Unop.cos: np.cos(A),
    Unop.sqrt: np.sqrt(np.abs(A)),
    Unop.recip: 1 / B,
    Unop.recip_sqrt: 1 / np.sqrt(np.abs(B)),
    Unop.neg: -A,
    Unop.trunc: np.trunc(A),
    Unop.tanh: np.tanh(A),
    Unop.not_: (A == 0).astype(np.float32),
}
ARG = {
    Unop.log: np.abs(A) + 1,
    Unop.log2: np.abs(A) + 1,
    Unop.sqrt: np.abs(A),
    Unop.recip: B,
    Unop.recip_sqrt: np.abs(B),
}


@pytest.mark.parametrize("op", list(FLOAT_UNOPS), ids=lambda o: o.value)
def test_float_unops(op: Unop) -> None:
    got = ops.apply_unop(op, ARG.get(op, A), F32)
    np.testing.assert_allclose(got, FLOAT_UNOPS[op].astype(np.float32), rtol=1e-6)


def test_integer_division_and_remainder_follow_c() -> None:
    a = np.array([-7, 7, -7, 7, 5], dtype=np.int32)
    b = np.array([2, -2, -2, 2, 0], dtype=np.int32)
    assert ops.apply_binop(Binop.div, a, b, I32).tolist() == [-3, -3, 3, 3, 0]
    assert ops.apply_binop(Binop.mod, a, b, I32).tolist() == [-1, 1, -1, 1, 0]
    assert ops.apply_binop(Binop.pow, np.int32(3), np.int32(4), I32) == 81
    assert ops.apply_unop(Unop.recip, np.array([2, 1, 0], np.int32), I32).tolist() == [0, 1, 0]


def test_integer_overflow_wraps() -> None:
    big = np.array([2**31 - 1], dtype=np.int32)
    assert ops.apply_binop(Binop.add, big, np.int32(1), I32).tolist() == [-(2**31)]


def test_integer_division_edge_cases() -> None:
    """INT_MIN / -1 wraps to INT_MIN, INT_MIN % -1 is 0, and INT_MIN as either operand
    truncates toward zero (abs(INT_MIN) is negative in int32: no shortcut through it)."""
    lo = -(2**31)
    a = np.array([lo, lo, 1, lo, lo, 7], dtype=np.int32)
    b = np.array([-1, 2, lo, 3, lo, lo], dtype=np.int32)
    assert ops.apply_binop(Binop.div, a, b, I32).tolist() == [lo, lo // 2, 0, -715827882, 1, 0]
    assert ops.apply_binop(Binop.mod, a, b, I32).tolist() == [0, 0, 1, -2, 0, 7]
    assert ops.apply_unop(Unop.recip, np.array([lo, -1], np.int32), I32).tolist() == [0, -1]
    assert ops.apply_unop(Unop.neg, np.array([lo], np.int32), I32).tolist() == [lo]


def test_float_to_int_saturates() -> None:
    x = np.array([np.nan, np.inf, -np.inf, 3e9, -2.5, 2.0**63, 2.0**64, -0.5, 255.9])
    u64, i32 = np.dtype(np.uint64), np.dtype(np.int32)
    top, top32 = 2**64 - 1, 2**31 - 1
    assert ops.float_to_int(x, u64).tolist() == [0, top, 0, 3 * 10**9, 0, 2**63, top, 0, 255]
    assert ops.float_to_int(x, i32).tolist() == [
        0,
        top32,
        -(2**31),
        top32,
        -2,
        top32,
        top32,
        0,
        255,
    ]
    assert ops.float_to_int(x, np.dtype(np.uint8)).tolist()[-2:] == [0, 255]
    # Integer math computed in double converts its result by the same rule.
    assert ops.apply_binop(Binop.pow, np.int32(2), np.int32(40), I32) == 2**31 - 1
    assert ops.apply_unop(Unop.log, np.int32(0), I32) == -(2**31)
    assert ops.apply_unop(Unop.sqrt, np.int32(-4), I32) == 0


def test_ternops() -> None:
    c = np.array([1, 0, 2], dtype=np.float64)
    x, y = np.array([1.0, 2.0, 3.0]), np.array([10.0, 20.0, 30.0])
    assert ops.apply_ternop(Ternop.where, c, x, y, F32).tolist() == [1.0, 20.0, 3.0]
    assert ops.apply_ternop(Ternop.fma, x, y, x, F32).tolist() == [11.0, 42.0, 93.0]


def test_neutral_elements() -> None:
    assert ops.neutral(Binop.add) == 0 and ops.neutral(Binop.mul) == 1
    assert ops.neutral(Binop.max) == -np.inf and ops.neutral(Binop.min) == np.inf
    assert ops.neutral(Binop.relu_gate) == 0


def test_partial_starts_are_exact_identities() -> None:
    """Float sums start at -0.0 (``x + -0.0`` is ``x`` for both zeros; ``+0.0`` is not);
    integer sums at 0; other ops at their neutral element."""
    start = ops.partial_start(Binop.add, True)
    assert start == 0 and np.signbit(start)
    for x in (np.float32(-0.0), np.float32(0.0), np.float32(1.5)):
        assert np.float32(start) + x == x and np.signbit(np.float32(start) + x) == np.signbit(x)
    assert not np.signbit(np.float32(0.0) + np.float32(-0.0))  # why +0.0 is no identity
    assert ops.partial_start(Binop.add, False) == 0
    assert ops.partial_start(Binop.mul, True) == 1
    assert ops.partial_start(Binop.max, True) == -np.inf


def test_op_parsing() -> None:
    assert ops.parse_binop("or") is Binop.or_ and ops.parse_unop("not") is Unop.not_
    assert ops.parse_ternop("fma") is Ternop.fma
    with pytest.raises(ValueError):
        ops.parse_binop("nope")


def test_threefry_is_deterministic_and_key_sensitive() -> None:
    key = np.array([1, 2, 3, 4], np.uint32)
    ctr = np.zeros((1000, 4), np.uint32)
    ctr[:, 0] = np.arange(1000)
    r1, r2 = ops.threefry4x32(key, ctr), ops.threefry4x32(key, ctr)
    assert np.array_equal(r1, r2) and r1.shape == (1000, 4) and r1.dtype == np.uint32
    other = ops.threefry4x32(np.array([1, 2, 3, 5], np.uint32), ctr)
    assert (other != r1).mean() > 0.99
    assert len(np.unique(r1[:, 0])) == 1000


def test_threefry_bits_look_uniform() -> None:
    ctr = np.zeros((20000, 4), np.uint32)
    ctr[:, 0] = np.arange(20000)
    bits = ops.threefry4x32(np.array([7, 0, 0, 0], np.uint32), ctr)
    ones = np.unpackbits(bits.view(np.uint8)).mean()
    assert abs(ones - 0.5) < 0.005


@pytest.mark.parametrize(
    "name,dtype", [("single", np.float32), ("double", np.float64), ("half", np.float16)]
)
def test_uniform_distribution(name: str, dtype: type) -> None:
    ctr = np.zeros((20000, 4), np.uint32)
    ctr[:, 0] = np.arange(20000)
    u = ops.uint4x32_to_uniform(
        ops.threefry4x32(np.array([3, 1, 4, 1], np.uint32), ctr), np.dtype(dtype), name
    )
    assert u.dtype == dtype and u.min() >= 0 and u.max() < 1
    assert abs(float(u.mean()) - 0.5) < 0.01
    assert abs(float(u.astype(np.float64).var()) - 1 / 12) < 0.005
    counts = np.histogram(u.astype(np.float64), bins=10, range=(0, 1))[0]
    chi2 = ((counts - 2000) ** 2 / 2000).sum()
    assert chi2 < 30  # 9 degrees of freedom: p < 0.001 above ~27.9


def test_uniform_integers_take_lane_bits() -> None:
    bits = np.array([[5, 1, 0, 0]], np.uint32)
    assert ops.uint4x32_to_uniform(bits, np.dtype(np.int32), "int32").tolist() == [5]
    assert ops.uint4x32_to_uniform(bits, np.dtype(np.uint64), "uint64").tolist() == [2**32 + 5]


def test_c_spelling_tables_cover_ops() -> None:
    assert set(ops.C_BINOP) | {Binop.arg1, Binop.arg2, Binop.threefry4x32} == set(Binop)
    assert set(ops.C_UNOP) | {Unop.uint4x32_to_prec_uniform} == set(Unop)
    assert set(ops.C_TERNOP) == set(Ternop)
    assert ops.C_BINOP[Binop.add].format("a", "b") == "(a + b)"


def test_max_min_propagate_nan_and_order_signed_zeros() -> None:
    a = np.array([np.nan, 1.0, -0.0, 0.0, -np.inf], dtype=np.float32)
    b = np.array([1.0, np.nan, 0.0, -0.0, np.nan], dtype=np.float32)
    mx, mn = ops.apply_binop(Binop.max, a, b, F32), ops.apply_binop(Binop.min, a, b, F32)
    assert np.isnan(mx[[0, 1, 4]]).all() and np.isnan(mn[[0, 1, 4]]).all()
    assert not np.signbit(mx[2:4]).any() and np.signbit(mn[2:4]).all()
    r = ops.apply_unop(Unop.relu, np.array([np.nan, -0.0, -1.0], dtype=np.float32), F32)
    s = ops.apply_unop(Unop.satur01, np.array([np.nan, -0.0, 2.0], dtype=np.float32), F32)
    assert np.isnan(r[0]) and np.isnan(s[0]) and not np.signbit(r[1]) and not np.signbit(s[1])
    assert list(r[1:]) == [0.0, 0.0] and list(s[1:]) == [0.0, 1.0]


def test_fma_rounds_once() -> None:
    eps32, eps64 = 2.0**-23, 2.0**-52
    got32 = ops.apply_ternop(Ternop.fma, 1 + eps32, 1 - eps32, -1.0, F32)
    assert got32 == np.float32(-(eps32**2))  # two roundings would give 0
    got64 = ops.apply_ternop(Ternop.fma, 1 + eps64, 1 - eps64, -1.0, np.dtype(np.float64))
    assert got64 == -(eps64**2)
    big = float(np.finfo(np.float64).max)
    assert ops.apply_ternop(Ternop.fma, big, 2.0, -big, np.dtype(np.float64)) == big
    assert ops.apply_ternop(Ternop.fma, big, -big, np.inf, np.dtype(np.float64)) == np.inf
    # 2^24 + 3 - 2^-46, just below a float32 tie: rounding to double first would make it the
    # tie 2^24 + 3, then rounding to even would give 2^24 + 4.
    got = ops.apply_ternop(Ternop.fma, 1 + eps32, 1 - eps32, 2.0**24 + 2, F32)
    assert got == np.float32(2.0**24 + 2)
    assert np.float32(np.float64(1 + eps32) * (1 - eps32) + (2.0**24 + 2)) == 2.0**24 + 4


@pytest.mark.parametrize("shape", [(), (1,)])
def test_pow_follows_ieee_special_cases(shape: tuple[int, ...]) -> None:
    cases = [
        (-np.inf, 0.5, np.inf),
        (np.nan, 0.0, 1.0),
        (1.0, np.nan, 1.0),
        (-0.0, -3.0, -np.inf),
        (-0.0, -2.0, np.inf),
        (-1.0, np.inf, 1.0),
        (-np.inf, -3.0, -0.0),
        (-8.0, 1.0 / 3.0, np.nan),
        (0.5, -np.inf, np.inf),
    ]
    for a, b, want in cases:
        got = ops.apply_binop(Binop.pow, np.full(shape, a), np.full(shape, b), F32)
        assert np.array_equal(got, np.full(shape, want, dtype=np.float32), equal_nan=True)
        assert np.signbit(got).all() == bool(np.signbit(want)), (a, b)
