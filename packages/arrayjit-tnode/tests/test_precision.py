"""Precisions: metadata, parsing, promotion and the small-float conversions."""

from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from arrayjit_tnode import UsageError
from arrayjit_tnode import precision as P
from arrayjit_tnode.precision import Prec

SIZES = {
    "byte": 1,
    "uint16": 2,
    "int32": 4,
    "uint32": 4,
    "int64": 8,
    "uint64": 8,
    "uint4x32": 16,
    "half": 2,
    "bfloat16": 2,
    "fp8": 1,
    "single": 4,
    "double": 8,
}


@pytest.mark.parametrize("name,size", SIZES.items())
def test_byte_sizes_match_numpy_storage(name: str, size: int) -> None:
    p = P.parse(name)
    assert p.byte_size == size
    assert p.numpy_dtype.itemsize * p.lanes == size


@pytest.mark.parametrize("p", list(Prec))
def test_parse_is_case_insensitive_and_roundtrips(p: Prec) -> None:
    assert P.parse(p.value.upper()) is p
    assert P.parse(f"  {p.value} ") is p
    assert P.parse(p) is p
    assert str(p) == p.value


def test_parse_aliases() -> None:
    assert P.parse("float32") is Prec.single
    assert P.parse("f64") is Prec.double
    assert P.parse("bf16") is Prec.bfloat16
    assert P.parse("float8_e5m2") is Prec.fp8


def test_parse_unknown_lists_valid_names() -> None:
    with pytest.raises(UsageError, match=r"unknown precision 'quad'; valid names: byte, .*double"):
        P.parse("quad")


def test_float_flags() -> None:
    assert {p for p in Prec if p.is_float} == {
        Prec.half,
        Prec.bfloat16,
        Prec.fp8,
        Prec.single,
        Prec.double,
    }
    assert P.fp8.numpy_dtype == np.dtype(ml_dtypes.float8_e5m2)
    assert P.bfloat16.numpy_dtype == np.dtype(ml_dtypes.bfloat16)
    assert P.uint4x32.host_shape((3, 2)) == (3, 2, 4)
    assert P.single.host_shape((3, 2)) == (3, 2)
    assert P.int32.is_signed_int and not P.uint32.is_signed_int
    assert P.single.c_type == "float" and P.uint64.c_type == "uint64_t"


@pytest.mark.parametrize(
    "a,b,expected",
    [
        ("single", "double", "double"),
        ("int32", "half", "half"),
        ("half", "bfloat16", "bfloat16"),
        ("fp8", "half", "half"),
        ("uint64", "fp8", "fp8"),
        ("int64", "uint32", "int64"),
        ("byte", "uint16", "uint16"),
        ("uint4x32", "double", "uint4x32"),
        ("single", "single", "single"),
    ],
)
def test_promote(a: str, b: str, expected: str) -> None:
    assert P.promote(P.parse(a), P.parse(b)) is P.parse(expected)
    assert P.promote(P.parse(b), P.parse(a)) is P.parse(expected)


def test_of_dtype() -> None:
    assert P.of_dtype(np.float32) is Prec.single
    assert P.of_dtype(ml_dtypes.bfloat16) is Prec.bfloat16
    with pytest.raises(UsageError, match="no arrayjit precision has numpy dtype complex128"):
        P.of_dtype(np.complex128)


def _same_floats(a: np.ndarray, b: np.ndarray) -> bool:
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    return bool(np.array_equal(nan_a, nan_b) and np.array_equal(a[~nan_a], b[~nan_b]))


def test_bfloat16_decode_every_pattern() -> None:
    bits = np.arange(1 << 16, dtype=np.uint16)
    expected = bits.view(ml_dtypes.bfloat16).astype(np.float32)
    assert _same_floats(P.bfloat16_bits_to_single(bits), expected)


def test_fp8_decode_every_pattern() -> None:
    bits = np.arange(256, dtype=np.uint8)
    expected = bits.view(ml_dtypes.float8_e5m2).astype(np.float32)
    assert _same_floats(P.fp8_bits_to_single(bits), expected)


def _grid_and_midpoints(decoded: np.ndarray) -> np.ndarray:
    grid = np.unique(decoded[np.isfinite(decoded)]).astype(np.float64)
    mids = (grid[:-1] + grid[1:]) / 2
    # Just below and above each midpoint too, where float32 can tell them apart.
    below = np.nextafter(mids.astype(np.float32), np.float32(-np.inf))
    above = np.nextafter(mids.astype(np.float32), np.float32(np.inf))
    return np.concatenate([grid, mids, below, above]).astype(np.float32)


def test_bfloat16_encode_every_value_and_tie() -> None:
    decoded = P.bfloat16_bits_to_single(np.arange(1 << 16, dtype=np.uint16))
    x = _grid_and_midpoints(decoded)
    x = np.concatenate([x, np.array([np.inf, -np.inf, np.nan, 3.4e38, -0.0], np.float32)])
    got = P.single_to_bfloat16_bits(x)
    expected = x.astype(ml_dtypes.bfloat16).view(np.uint16)
    finite = ~np.isnan(x)
    assert np.array_equal(got[finite], expected[finite])
    assert np.isnan(P.bfloat16_bits_to_single(got[~finite])).all()


def test_fp8_encode_every_value_and_tie() -> None:
    decoded = P.fp8_bits_to_single(np.arange(256, dtype=np.uint8))
    x = _grid_and_midpoints(decoded)
    rng = np.random.default_rng(0)
    scales = np.float32(10.0) ** rng.integers(-9, 6, 20000).astype(np.float32)
    noise = rng.standard_normal(20000).astype(np.float32) * scales
    extremes = np.array([np.inf, -np.inf, 65504, 61440, 61439, 1e-9, -0.0, 0.0], np.float32)
    x = np.concatenate([x, noise, extremes])
    got = P.single_to_fp8_bits(x)
    expected = x.astype(ml_dtypes.float8_e5m2).view(np.uint8)
    assert np.array_equal(got, expected)


def test_fp8_nan_stays_nan() -> None:
    got = P.single_to_fp8_bits(np.array([np.nan, -np.nan], np.float32))
    assert np.isnan(P.fp8_bits_to_single(got)).all()


@pytest.mark.parametrize(
    "dtype,prec,ok",
    [
        (np.float64, "single", True),
        (np.float32, "double", True),
        (np.float64, "bfloat16", True),
        (np.float16, "fp8", True),
        (ml_dtypes.bfloat16, "single", True),
        (ml_dtypes.float8_e5m2, "half", True),
        (np.int64, "single", True),
        (np.int64, "uint32", True),
        (np.uint8, "int64", True),
        (np.bool_, "byte", True),
        (np.uint32, "uint4x32", True),
        (np.float64, "int32", False),
        (np.float32, "byte", False),
        (ml_dtypes.bfloat16, "int64", False),
        (np.float64, "uint4x32", False),
        (np.complex128, "double", False),
        (np.dtype("<U3"), "single", False),
        (np.dtype(object), "single", False),
    ],
)
def test_can_convert(dtype: object, prec: str, ok: bool) -> None:
    assert P.can_convert(dtype, P.parse(prec)) is ok


def test_to_host_dtype_converts_and_keeps_shape() -> None:
    vals = np.array([[1.0, 3.14159], [-2.5, 1e-3]])
    got = P.to_host_dtype(vals, P.bfloat16)
    assert got.dtype == np.dtype(ml_dtypes.bfloat16) and got.shape == (2, 2)
    assert np.array_equal(got, vals.astype(ml_dtypes.bfloat16))
    same = np.zeros(3, np.float32)
    assert P.to_host_dtype(same, P.single) is same  # no copy when already right
    assert P.to_host_dtype([1, 2, 3], P.byte).tolist() == [1, 2, 3]
    assert P.to_host_dtype(np.zeros((0,), np.int64), P.byte).shape == (0,)


def test_to_host_dtype_errors() -> None:
    with pytest.raises(
        UsageError, match="values of dtype float64 do not convert to precision int32"
    ):
        P.to_host_dtype([1.5], P.int32)
    with pytest.raises(
        UsageError, match=r"value 256 is out of the range \[0, 255\] of precision byte"
    ):
        P.to_host_dtype([1, 256], P.byte)
    with pytest.raises(UsageError, match=r"value -1 is out of the range \[0, 65535\]"):
        P.to_host_dtype([-1, 2], P.uint16)


def _random_float32_bit_patterns(n: int) -> np.ndarray:
    rng = np.random.default_rng(1)
    return rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)


@pytest.mark.parametrize(
    ("encode", "decode", "dtype"),
    [
        (P.single_to_bfloat16_bits, P.bfloat16_bits_to_single, ml_dtypes.bfloat16),
        (P.single_to_fp8_bits, P.fp8_bits_to_single, ml_dtypes.float8_e5m2),
    ],
    ids=["bfloat16", "fp8"],
)
def test_encode_random_bit_patterns(
    encode: Callable[[np.ndarray], np.ndarray],
    decode: Callable[[np.ndarray], np.ndarray],
    dtype: Any,
) -> None:
    # Every kind of float32: normals, subnormals, infinities, NaNs with payloads; ml_dtypes is
    # the oracle (NaN payloads may differ, NaN-ness may not).
    x = _random_float32_bit_patterns(1 << 20)
    got = encode(x)
    bits = np.dtype(dtype).itemsize * 8
    with np.errstate(invalid="ignore"):
        expected = x.astype(dtype).view(got.dtype)
    nan = np.isnan(x)
    assert nan.any()
    assert np.array_equal(got[~nan], expected[~nan])
    assert np.isnan(decode(got[nan])).all()
    # The sign of a NaN is kept.
    assert np.array_equal(got[nan] >> (bits - 1), x[nan].view(np.uint32) >> 31)


def test_decode_then_encode_is_identity() -> None:
    bf = np.arange(1 << 16, dtype=np.uint16)
    back = P.single_to_bfloat16_bits(P.bfloat16_bits_to_single(bf))
    keep = ~np.isnan(P.bfloat16_bits_to_single(bf))
    assert np.array_equal(back[keep], bf[keep])
    f8 = np.arange(256, dtype=np.uint8)
    back8 = P.single_to_fp8_bits(P.fp8_bits_to_single(f8))
    keep8 = ~np.isnan(P.fp8_bits_to_single(f8))
    assert np.array_equal(back8[keep8], f8[keep8])


@pytest.mark.parametrize(
    "value,bits",
    [
        (2.0**-16, 0x01),  # smallest subnormal
        (2.0**-17, 0x00),  # half of it: a tie, rounds to even (zero)
        (1.5 * 2.0**-16, 0x02),  # tie between 1 and 2 quanta: even is 2
        (2.5 * 2.0**-16, 0x02),  # tie between 2 and 3: even is 2
        (2.0**-14, 0x04),  # smallest normal
        (1.5, 0x3E),  # exact (the OCaml encoder's quirk turned this into 1.25)
        (1.125, 0x3C),  # tie between 1.0 and 1.25: even is 1.0
        (1.375, 0x3E),  # tie between 1.25 and 1.5: even is 1.5
        (57344.0, 0x7B),  # largest finite
        (61439.0, 0x7B),  # just below the tie with infinity
        (61440.0, 0x7C),  # the tie rounds to even: infinity
        (-0.0, 0x80),
        (-(2.0**-18), 0x80),  # underflow keeps the sign
        (float("-inf"), 0xFC),
    ],
)
def test_fp8_boundaries(value: float, bits: int) -> None:
    x = np.array([value], np.float32)
    assert int(P.single_to_fp8_bits(x)[0]) == bits
    assert int(x.astype(ml_dtypes.float8_e5m2).view(np.uint8)[0]) == bits


@pytest.mark.parametrize(
    "bits32,bits16",
    [
        (0x3F808000, 0x3F80),  # tie, even below
        (0x3F818000, 0x3F82),  # tie, even above
        (0x3F808001, 0x3F81),  # just above the tie
        (0x7F7FFFFF, 0x7F80),  # float32 max rounds to infinity
        (0x00000001, 0x0000),  # smallest float32 subnormal
        (0x00400000, 0x0040),  # a float32 subnormal bfloat16 can hold exactly
        (0x80000000, 0x8000),  # -0
        (0xFF800000, 0xFF80),  # -inf
    ],
)
def test_bfloat16_boundaries(bits32: int, bits16: int) -> None:
    x = np.array([bits32], np.uint32).view(np.float32)
    assert int(P.single_to_bfloat16_bits(x)[0]) == bits16
    assert int(x.astype(ml_dtypes.bfloat16).view(np.uint16)[0]) == bits16


def test_conversions_keep_shape() -> None:
    x = np.arange(12, dtype=np.float32).reshape(3, 4) / 7
    assert P.single_to_bfloat16_bits(x).shape == (3, 4)
    assert P.single_to_fp8_bits(x).shape == (3, 4)
    assert P.bfloat16_bits_to_single(P.single_to_bfloat16_bits(x)).shape == (3, 4)
    assert P.fp8_bits_to_single(P.single_to_fp8_bits(x)).dtype == np.float32
