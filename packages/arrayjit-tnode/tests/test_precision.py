"""Precisions: metadata, parsing, promotion and the small-float conversions."""

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
