"""Precisions: the element types of tensor nodes.

Each precision has a name, a byte size, whether it is a float, its numpy dtype (bfloat16 and
fp8 through ``ml_dtypes``; fp8 is E5M2) and its C storage type name. ``uint4x32`` is a 16-byte
vector of four uint32 lanes used for random-number state: its numpy dtype is ``uint32`` and host
arrays of it carry one extra trailing axis of length 4 (see :meth:`Prec.host_shape`).
"""

from __future__ import annotations

import enum
from typing import Any

import ml_dtypes
import numpy as np

from arrayjit_tnode.errors import UsageError


class Prec(enum.Enum):
    """A precision. The value is the canonical lower-case name."""

    byte = "byte"
    uint16 = "uint16"
    int32 = "int32"
    uint32 = "uint32"
    int64 = "int64"
    uint64 = "uint64"
    uint4x32 = "uint4x32"
    half = "half"
    bfloat16 = "bfloat16"
    fp8 = "fp8"
    single = "single"
    double = "double"

    @property
    def byte_size(self) -> int:
        """Bytes per element (16 for uint4x32)."""
        return _INFO[self][0]

    @property
    def is_float(self) -> bool:
        """Whether this is a floating-point precision."""
        return _INFO[self][1]

    @property
    def numpy_dtype(self) -> np.dtype[Any]:
        """The numpy dtype of host arrays (per lane for uint4x32)."""
        return _INFO[self][2]

    @property
    def c_type(self) -> str:
        """The C storage type name of one element."""
        return _INFO[self][3]

    @property
    def lanes(self) -> int:
        """Number of numpy elements per arrayjit element: 4 for uint4x32, else 1."""
        return 4 if self is Prec.uint4x32 else 1

    def host_shape(self, dims: tuple[int, ...]) -> tuple[int, ...]:
        """Shape of a host array holding a node of these dims."""
        return (*dims, 4) if self is Prec.uint4x32 else tuple(dims)

    @property
    def is_signed_int(self) -> bool:
        """Whether this is a signed integer precision."""
        return self in (Prec.int32, Prec.int64)

    @property
    def rank(self) -> int:
        """Promotion rank: higher wins in :func:`promote`."""
        return _PROMOTION_ORDER.index(self)

    def __str__(self) -> str:
        return self.value

    def __repr__(self) -> str:
        return f"Prec.{self.value}"


_INFO: dict[Prec, tuple[int, bool, np.dtype[Any], str]] = {
    Prec.byte: (1, False, np.dtype(np.uint8), "uint8_t"),
    Prec.uint16: (2, False, np.dtype(np.uint16), "uint16_t"),
    Prec.int32: (4, False, np.dtype(np.int32), "int32_t"),
    Prec.uint32: (4, False, np.dtype(np.uint32), "uint32_t"),
    Prec.int64: (8, False, np.dtype(np.int64), "int64_t"),
    Prec.uint64: (8, False, np.dtype(np.uint64), "uint64_t"),
    Prec.uint4x32: (16, False, np.dtype(np.uint32), "uint4x32_t"),
    Prec.half: (2, True, np.dtype(np.float16), "_Float16"),
    Prec.bfloat16: (2, True, np.dtype(ml_dtypes.bfloat16), "uint16_t"),
    Prec.fp8: (1, True, np.dtype(ml_dtypes.float8_e5m2), "uint8_t"),
    Prec.single: (4, True, np.dtype(np.float32), "float"),
    Prec.double: (8, True, np.dtype(np.float64), "double"),
}

# Lowest first. Floats beat integers, a wider range beats a narrower one, double beats all
# floats; uint4x32 beats everything because its ops accept nothing else.
_PROMOTION_ORDER: tuple[Prec, ...] = (
    Prec.byte,
    Prec.uint16,
    Prec.int32,
    Prec.uint32,
    Prec.int64,
    Prec.uint64,
    Prec.fp8,
    Prec.half,
    Prec.bfloat16,
    Prec.single,
    Prec.double,
    Prec.uint4x32,
)

# Module-level names, so `precision.single` reads well: `Tnode.create(.., prec=P.single)`.
byte = Prec.byte
uint16 = Prec.uint16
int32 = Prec.int32
uint32 = Prec.uint32
int64 = Prec.int64
uint64 = Prec.uint64
uint4x32 = Prec.uint4x32
half = Prec.half
bfloat16 = Prec.bfloat16
fp8 = Prec.fp8
single = Prec.single
double = Prec.double

ALL: tuple[Prec, ...] = tuple(Prec)
FLOATS: tuple[Prec, ...] = tuple(p for p in Prec if p.is_float)
INTS: tuple[Prec, ...] = tuple(p for p in Prec if not p.is_float and p is not Prec.uint4x32)


def parse(name: str | Prec) -> Prec:
    """Parse a precision from its name, case-insensitively (``"SINGLE"``, ``"single"``).

    Also accepts a few common aliases (``float32``, ``float64``, ``float16``, ``bf16``,
    ``uint8``), numpy dtypes and scalar types (``np.float32``). Raises :class:`UsageError`
    listing the valid names for an unknown one.
    """
    if isinstance(name, Prec):
        return name
    if isinstance(name, type) and issubclass(name, np.generic):
        name = np.dtype(name).name  # np.float32, ml_dtypes.bfloat16: as their dtypes are
    key = str(name).strip().lower()
    key = _ALIASES.get(key, key)
    try:
        return Prec(key)
    except ValueError:
        valid = ", ".join(p.value for p in Prec)
        raise UsageError(f"unknown precision {name!r}; valid names: {valid}") from None


_ALIASES = {
    "float32": "single",
    "float": "single",
    "f32": "single",
    "float64": "double",
    "f64": "double",
    "float16": "half",
    "f16": "half",
    "fp16": "half",
    "bf16": "bfloat16",
    "uint8": "byte",
    "u8": "byte",
    "float8_e5m2": "fp8",
}


def promote(a: Prec, b: Prec) -> Prec:
    """The precision of an expression mixing ``a`` and ``b``."""
    return a if a.rank >= b.rank else b


def of_dtype(dtype: Any) -> Prec:
    """The precision whose numpy dtype is ``dtype``; raises :class:`UsageError` if none."""
    dt = np.dtype(dtype)
    for p in Prec:
        if p is not Prec.uint4x32 and p.numpy_dtype == dt:
            return p
    raise UsageError(f"no arrayjit precision has numpy dtype {dt}")


# ---- host values ---------------------------------------------------------------------------------

_SMALL_FLOAT_NAMES = ("bfloat16", "float8_e5m2")


def _is_float_dtype(dt: np.dtype[Any]) -> bool:
    return dt.kind == "f" or dt.name in _SMALL_FLOAT_NAMES


def can_convert(dtype: Any, prec: Prec) -> bool:
    """Whether values of numpy ``dtype`` convert to ``prec`` within their kind.

    Like numpy's ``'same_kind'`` casting, extended to the ``ml_dtypes`` floats and relaxed
    between integer kinds: floats go into float precisions only; integers and booleans go into
    any precision (signed into unsigned too: Python ints arrive as int64). Anything else
    (complex, strings, objects) converts to nothing.
    """
    dt = np.dtype(dtype)
    if dt == prec.numpy_dtype:
        return True
    if _is_float_dtype(dt):
        return prec.is_float
    return dt.kind in "iub"


def to_host_dtype(values: Any, prec: Prec) -> np.ndarray:
    """``values`` as a numpy array of ``prec``'s host dtype (rounding to nearest even for the
    small floats). The shape is kept.

    Raises:
        UsageError: the values' dtype does not convert within its kind (see
            :func:`can_convert`), e.g. floats into an integer precision; or an integer value
            is out of an integer precision's range.
    """
    arr = np.asarray(values)
    if not can_convert(arr.dtype, prec):
        raise UsageError(f"values of dtype {arr.dtype} do not convert to precision {prec}")
    target = prec.numpy_dtype
    if target.kind in "iu" and arr.dtype.kind in "iu" and arr.size:
        # Refuse rather than wrap around silently.
        info = np.iinfo(target)
        lo, hi = arr.min(), arr.max()
        if lo < info.min or hi > info.max:
            bad = lo if lo < info.min else hi
            raise UsageError(
                f"value {bad} is out of the range [{info.min}, {info.max}] of precision {prec}"
            )
    if prec in (Prec.bfloat16, Prec.fp8) and arr.dtype.kind == "f" and arr.dtype.itemsize > 4:
        # ml_dtypes casts wider floats through float32, rounding twice (1 + 2**-8 + 2**-40
        # becomes bfloat16 1.0, not 1.0078125). Rounding to odd into float32 first keeps the
        # information a single rounding needs: float32 has more than two extra bits.
        arr = _to_single_rounding_to_odd(arr)
    return arr.astype(target, copy=False)


def _to_single_rounding_to_odd(values: np.ndarray) -> np.ndarray:
    """float64 ``values`` as float32 rounded to odd: an inexact result is the float32 nearer
    zero with its last bit set. A later rounding to nearest of this value to a format with at
    least two fewer mantissa bits gives the same result as rounding ``values`` directly."""
    x = np.asarray(values, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        near = x.astype(np.float32)
        inexact = (near.astype(np.float64) != x) & ~np.isnan(x)
        too_far = inexact & (np.abs(near.astype(np.float64)) > np.abs(x))
    toward_zero = np.where(too_far, np.nextafter(near, np.float32(0)), near)
    bits = toward_zero.view(np.uint32) | inexact.astype(np.uint32)
    return bits.view(np.float32).reshape(x.shape)


# ---- bit-level conversions of the small float formats ------------------------------------------
# Generated kernels store bfloat16 and fp8 (E5M2) as raw bits and compute in float32; these are
# the reference conversions they must match (round to nearest, ties to even; NaN stays NaN,
# overflow rounds to infinity).


def bfloat16_bits_to_single(bits: np.ndarray) -> np.ndarray:
    """Decode bfloat16 bit patterns (uint16) to float32, exactly."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def single_to_bfloat16_bits(values: np.ndarray) -> np.ndarray:
    """Encode float32 values as bfloat16 bit patterns (uint16), rounding to nearest even."""
    x = np.ascontiguousarray(values, dtype=np.float32)
    bits = x.view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(x)
    if nan.any():
        sign = ((bits >> 16) & 0x8000).astype(np.uint16)
        rounded = np.where(nan, sign | np.uint16(0x7FC0), rounded)
    return rounded


def fp8_bits_to_single(bits: np.ndarray) -> np.ndarray:
    """Decode fp8 E5M2 bit patterns (uint8) to float32, exactly (E5M2 is the top byte of an
    IEEE half)."""
    half_bits = np.asarray(bits, dtype=np.uint8).astype(np.uint16) << 8
    with np.errstate(invalid="ignore"):  # signaling NaN patterns are expected input
        return half_bits.view(np.float16).astype(np.float32)


def single_to_fp8_bits(values: np.ndarray) -> np.ndarray:
    """Encode float32 values as fp8 E5M2 bit patterns (uint8), rounding to nearest even in one
    step (no double rounding through half); overflow gives infinity."""
    with np.errstate(invalid="ignore"):  # signaling NaNs are expected input
        x = np.asarray(values, dtype=np.float32).astype(np.float64)
    mag = np.abs(x)
    finite = np.isfinite(mag) & (mag > 0)
    _, exp = np.frexp(np.where(finite, mag, 1.0))
    # Quantum of the E5M2 grid around |x|: 2 mantissa bits; subnormals below 2**-14.
    quantum = np.ldexp(1.0, np.maximum(exp - 1, -14) - 2)
    rounded = np.where(finite, np.round(mag / quantum) * quantum, mag)
    rounded = np.where(rounded >= 65536.0, np.inf, rounded)
    half_bits = rounded.astype(np.float16).view(np.uint16)
    out = (half_bits >> 8).astype(np.uint8)
    out = np.where(np.isnan(x), np.uint8(0x7E), out)
    sign = np.signbit(x).astype(np.uint8) << 7
    return (out | sign).astype(np.uint8)


def is_number(value: object) -> bool:
    """Whether ``value`` is a real number: a Python or numpy integer or float (a ``bool`` is
    not, nor a complex number)."""
    return not isinstance(value, (bool, np.bool_)) and isinstance(
        value, (int, float, np.integer, np.floating)
    )


__all__ = [
    "ALL",
    "FLOATS",
    "INTS",
    "Prec",
    "bfloat16",
    "bfloat16_bits_to_single",
    "byte",
    "can_convert",
    "double",
    "fp8",
    "fp8_bits_to_single",
    "half",
    "int32",
    "int64",
    "is_number",
    "of_dtype",
    "parse",
    "promote",
    "single",
    "single_to_bfloat16_bits",
    "single_to_fp8_bits",
    "to_host_dtype",
    "uint4x32",
    "uint16",
    "uint32",
    "uint64",
]
