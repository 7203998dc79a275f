"""The scalar types of the LLVM generator and its literals.

Each arrayjit precision computes in one LLVM scalar type (:func:`compute_type`; half, bfloat16 and
fp8 compute in float), and uint4x32 in a vector of four ``i32`` lanes. Literals are written so
that the same value always prints the same text: floats as the exact hex of a double, integers
wrapped to their width and written signed.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from arrayjit_ir import ops
from arrayjit_tnode import Prec, UsageError


@dataclass(frozen=True)
class Ty:
    """An LLVM scalar type with the signedness arithmetic on it uses."""

    ll: str
    is_float: bool
    signed: bool
    bits: int

    @property
    def zero(self) -> str:
        if self.bits == 128:
            return "zeroinitializer"
        return "0.0" if self.is_float else "0"

    @property
    def one(self) -> str:
        return "1.0" if self.is_float else "1"

    @property
    def suffix(self) -> str:
        """The overload suffix of intrinsics (``f32``, ``i64``...)."""
        if self.is_float:
            return {"half": "f16", "float": "f32", "double": "f64"}[self.ll]
        return self.ll


U8, U16 = Ty("i8", False, False, 8), Ty("i16", False, False, 16)
I32, U32 = Ty("i32", False, True, 32), Ty("i32", False, False, 32)
I64, U64 = Ty("i64", False, True, 64), Ty("i64", False, False, 64)
F16 = Ty("half", True, True, 16)
F32, F64 = Ty("float", True, True, 32), Ty("double", True, True, 64)
VEC = Ty("<4 x i32>", False, False, 128)
"""uint4x32: four uint32 lanes. As in the interpreter, a scalar becomes lanes 0 and 1 (its
64-bit value), a vector becomes a scalar through lane 0, and arithmetic other than threefry runs
on lane 0 as uint64."""

_COMPUTE: dict[Prec, Ty] = {
    Prec.byte: U8,
    Prec.uint16: U16,
    Prec.int32: I32,
    Prec.uint32: U32,
    Prec.int64: I64,
    Prec.uint64: U64,
    Prec.half: F32,
    Prec.bfloat16: F32,
    Prec.fp8: F32,
    Prec.single: F32,
    Prec.double: F64,
    Prec.uint4x32: VEC,
}


def compute_type(prec: Prec) -> Ty:
    """The type arithmetic of ``prec`` runs in (float for the small floats)."""
    try:
        return _COMPUTE[prec]
    except KeyError:
        raise UsageError(f"the LLVM generator does not support precision {prec}") from None


def fconst(v: float, ty: Ty) -> str:
    """An LLVM float literal: the exact hex of the double holding the (rounded) value."""
    with np.errstate(all="ignore"):
        if ty.ll == "float":
            v = float(np.float32(v))
    return f"0x{struct.unpack('<Q', struct.pack('<d', v))[0]:016X}"


def iconst(v: int, bits: int) -> str:
    """An LLVM integer literal: ``v`` wrapped to ``bits`` bits, written signed."""
    v &= (1 << bits) - 1
    return str(v - (1 << bits) if v >> (bits - 1) else v)


def ident(text: str) -> str:
    """``text`` with the characters LLVM names do not allow unquoted replaced by ``_``."""
    return "".join(c if (c.isascii() and c.isalnum()) or c in "._" else "_" for c in text)


def _vec_literal(bits64: int) -> str:
    lo, hi = bits64 & 0xFFFFFFFF, (bits64 >> 32) & 0xFFFFFFFF
    return f"<i32 {iconst(lo, 32)}, i32 {iconst(hi, 32)}, i32 0, i32 0>"


def const(v: float, ty: Ty) -> str:
    if ty is VEC:  # through int64, as a float read into uint4x32
        return _vec_literal(int(ops.float_to_int(v, np.dtype(np.int64))))
    if ty.is_float:
        return fconst(v, ty)
    dtype = np.dtype(f"{'i' if ty.signed else 'u'}{ty.bits // 8}")
    return iconst(int(ops.float_to_int(v, dtype)), ty.bits)
