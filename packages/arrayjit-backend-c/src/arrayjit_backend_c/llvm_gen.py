"""LLVM IR from optimized low-level IR: the renderer of the ``llvm`` backend.

The generated code computes what the shared C renderer's code computes
(:mod:`arrayjit_backends.c_syntax`) and what the reference interpreter computes: a stored value
is evaluated in the compute type of the node it is stored into (half, bfloat16 and fp8 compute in
float and round to nearest-even when stored); ``where``'s condition in its own natural precision;
integers wrap; integer division and remainder by zero give 0 (and ``x / -1`` is ``-x``, never a
trap); a float converted to an integer saturates (``llvm.fptosi.sat``/``llvm.fptoui.sat``: NaN
gives 0, values beyond the range its nearest end, others truncate toward zero), as integer ops
computed in double do. Float arithmetic is IEEE (no fast-math or contraction flags), math
functions are LLVM intrinsics; float ``max``/``min`` are ``llvm.maximum``/``llvm.minimum`` (NaN
propagates).

A routine becomes one LLVM function per *segment* of its top-level statements: each top-level loop
whose iterations write disjoint cells and do at least :data:`~arrayjit_backends.c_syntax.
PARALLEL_MIN_WORK` innermost iterations is a parallel segment, taking the extra parameters
``(start, stop)`` (a half-open range of its loop), which the backend splits across threads; the
statements between them form serial segments. Every segment function takes the same leading
parameters: the context nodes' buffers (in :func:`~arrayjit_backends.c_syntax.kernel_params`
order), the merge buffer if the routine reads it, the scratch buffers (kernel-local nodes too
large for the stack or used by several segments), then the static indices as ``i64``. Buffer
parameters are ``noalias``: nodes never share memory.

Values, blocks and helpers are numbered per routine, so the same routine generates the same IR
(and hits the compile cache) whatever the global ids of its symbols and nodes.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from arrayjit_backends.kernel_plan import (
    PARALLEL_MIN_WORK,
    SIMD_LANES,
    KernelParams,
    ScalarReduction,
    is_parallel_loop,
    kernel_params,
    scalar_reduction,
)
from arrayjit_backends.kernel_plan import local_sum as _local_sum
from arrayjit_backends.kernel_plan import loop_work as _loop_work
from arrayjit_ir import low_level as L
from arrayjit_ir import ops
from arrayjit_ir.indexing import Affine, AxisIndex, Fixed_idx, Iterator, StaticSymbol, Symbol
from arrayjit_ir.low_level import natural_prec, rounds_when_stored
from arrayjit_ir.optimized import Optimized
from arrayjit_ir.summation import widen_blocks
from arrayjit_tnode import Prec, Tnode, UsageError

STACK_LIMIT_BYTES = 1 << 16
"""Kernel-local nodes larger than this live in scratch buffers allocated at link, not on the
stack (worker threads have small stacks)."""


@dataclass(frozen=True)
class _Ty:
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


_U8, _U16 = _Ty("i8", False, False, 8), _Ty("i16", False, False, 16)
_I32, _U32 = _Ty("i32", False, True, 32), _Ty("i32", False, False, 32)
_I64, _U64 = _Ty("i64", False, True, 64), _Ty("i64", False, False, 64)
_F16 = _Ty("half", True, True, 16)
_F32, _F64 = _Ty("float", True, True, 32), _Ty("double", True, True, 64)
_VEC = _Ty("<4 x i32>", False, False, 128)
"""uint4x32: four uint32 lanes. As in the interpreter, a scalar becomes lanes 0 and 1 (its
64-bit value), a vector becomes a scalar through lane 0, and arithmetic other than threefry runs
on lane 0 as uint64."""

_COMPUTE: dict[Prec, _Ty] = {
    Prec.byte: _U8,
    Prec.uint16: _U16,
    Prec.int32: _I32,
    Prec.uint32: _U32,
    Prec.int64: _I64,
    Prec.uint64: _U64,
    Prec.half: _F32,
    Prec.bfloat16: _F32,
    Prec.fp8: _F32,
    Prec.single: _F32,
    Prec.double: _F64,
    Prec.uint4x32: _VEC,
}


def compute_type(prec: Prec) -> _Ty:
    """The type arithmetic of ``prec`` runs in (float for the small floats)."""
    try:
        return _COMPUTE[prec]
    except KeyError:
        raise UsageError(f"the LLVM generator does not support precision {prec}") from None


def _fconst(v: float, ty: _Ty) -> str:
    """An LLVM float literal: the exact hex of the double holding the (rounded) value."""
    with np.errstate(all="ignore"):
        if ty.ll == "float":
            v = float(np.float32(v))
    return f"0x{struct.unpack('<Q', struct.pack('<d', v))[0]:016X}"


def _iconst(v: int, bits: int) -> str:
    """An LLVM integer literal: ``v`` wrapped to ``bits`` bits, written signed."""
    v &= (1 << bits) - 1
    return str(v - (1 << bits) if v >> (bits - 1) else v)


def _ident(text: str) -> str:
    """``text`` with the characters LLVM names do not allow unquoted replaced by ``_``."""
    return "".join(c if (c.isascii() and c.isalnum()) or c in "._" else "_" for c in text)


def _vec_literal(bits64: int) -> str:
    lo, hi = bits64 & 0xFFFFFFFF, (bits64 >> 32) & 0xFFFFFFFF
    return f"<i32 {_iconst(lo, 32)}, i32 {_iconst(hi, 32)}, i32 0, i32 0>"


def _const(v: float, ty: _Ty) -> str:
    if ty is _VEC:  # through int64, as a float read into uint4x32
        return _vec_literal(int(ops.float_to_int(v, np.dtype(np.int64))))
    if ty.is_float:
        return _fconst(v, ty)
    dtype = np.dtype(f"{'i' if ty.signed else 'u'}{ty.bits // 8}")
    return _iconst(int(ops.float_to_int(v, dtype)), ty.bits)


# ---- conversion helpers, defined in the module when used (always inlined) ----

_HELPERS: dict[str, str] = {
    "aj_bf16_to_f32": """
define internal float @aj_bf16_to_f32(i16 %b) #1 {
  %w = zext i16 %b to i32
  %s = shl i32 %w, 16
  %f = bitcast i32 %s to float
  ret float %f
}""",
    "aj_f32_to_bf16": """
define internal i16 @aj_f32_to_bf16(float %f) #1 {
  %u = bitcast float %f to i32
  %h = lshr i32 %u, 16
  %lsb = and i32 %h, 1
  %a = add i32 %u, 32767
  %b = add i32 %a, %lsb
  %r = lshr i32 %b, 16
  %q = or i32 %h, 64
  %nan = fcmp uno float %f, %f
  %s = select i1 %nan, i32 %q, i32 %r
  %o = trunc i32 %s to i16
  ret i16 %o
}""",
    # The magnitude bits shifted into a float's exponent and mantissa, scaled by 2^(127-bias):
    # exact for normal and subnormal values; infinities and NaNs are rebuilt from the bits.
    "aj_half_to_f32": """
define internal float @aj_half_to_f32(i16 %h) #1 {
  %w = zext i16 %h to i32
  %x = and i32 %w, 32767
  %m = shl i32 %x, 13
  %mf = bitcast i32 %m to float
  %v = fmul float %mf, 0x46F0000000000000
  %vb = bitcast float %v to i32
  %sp = or i32 %m, 2139095040
  %big = icmp uge i32 %x, 31744
  %mag = select i1 %big, i32 %sp, i32 %vb
  %sg = and i32 %w, 32768
  %s = shl i32 %sg, 16
  %r = or i32 %mag, %s
  %f = bitcast i32 %r to float
  ret float %f
}""",
    # Round to nearest even: subnormal results by adding 0.5 (the float adder rounds at the
    # half's subnormal quantum), normal ones by rebiasing the exponent and rounding the bits.
    "aj_f32_to_half": """
define internal i16 @aj_f32_to_half(float %f) #1 {
  %u = bitcast float %f to i32
  %hs = lshr i32 %u, 16
  %sign = and i32 %hs, 32768
  %a = and i32 %u, 2147483647
  %isnan = icmp ugt i32 %a, 2139095040
  %inf = select i1 %isnan, i32 32256, i32 31744
  %af = bitcast i32 %a to float
  %d = fadd float %af, 0x3FE0000000000000
  %db = bitcast float %d to i32
  %sub = sub i32 %db, 1056964608
  %odd0 = lshr i32 %a, 13
  %odd = and i32 %odd0, 1
  %n0 = add i32 %a, -939520001
  %n1 = add i32 %n0, %odd
  %norm = lshr i32 %n1, 13
  %issub = icmp ult i32 %a, 947912704
  %fin = select i1 %issub, i32 %sub, i32 %norm
  %isbig = icmp uge i32 %a, 1199570944
  %mag = select i1 %isbig, i32 %inf, i32 %fin
  %r = or i32 %mag, %sign
  %o = trunc i32 %r to i16
  ret i16 %o
}""",
    # E5M2, round to nearest even: round the magnitude m to a multiple of 2^(e-2), where e is
    # its exponent (at least -14, the subnormal range), then encode; 65536 and up is infinity.
    "aj_f32_to_fp8": """
define internal i8 @aj_f32_to_fp8(float %f) #1 {
  %u = bitcast float %f to i32
  %s32 = lshr i32 %u, 24
  %s8 = trunc i32 %s32 to i8
  %sign = and i8 %s8, -128
  %m = call float @llvm.fabs.f32(float %f)
  %mu = bitcast float %m to i32
  %ef = lshr i32 %mu, 23
  %e0 = sub i32 %ef, 127
  %low = icmp slt i32 %e0, -14
  %e = select i1 %low, i32 -14, i32 %e0
  %sb = sub i32 129, %e
  %sbits = shl i32 %sb, 23
  %scale = bitcast i32 %sbits to float
  %ib = add i32 %e, 125
  %ibits = shl i32 %ib, 23
  %inv = bitcast i32 %ibits to float
  %sc = fmul float %m, %scale
  %ri = call float @llvm.roundeven.f32(float %sc)
  %r = fmul float %ri, %inv
  %rb = bitcast float %r to i32
  %hi = lshr i32 %rb, 21
  %norm = sub i32 %hi, 448
  %small = fmul float %r, 0x40F0000000000000
  %subi = fptoui float %small to i32
  %isnorm = fcmp oge float %r, 0x3F10000000000000
  %c0 = select i1 %isnorm, i32 %norm, i32 %subi
  %big = fcmp oge float %r, 0x40F0000000000000
  %c1 = select i1 %big, i32 124, i32 %c0
  %c8 = trunc i32 %c1 to i8
  %res = or i8 %c8, %sign
  %nan = fcmp uno float %f, %f
  %o = select i1 %nan, i8 126, i8 %res
  ret i8 %o
}""",
}

# Threefry-4x32 (Salmon et al. 2011, the Random123 constants): rotation pairs by round mod 8 and
# the key-schedule parity.
_THREEFRY_ROTATIONS = ((10, 26), (11, 21), (13, 27), (23, 5), (6, 20), (17, 11), (25, 10), (18, 20))
_THREEFRY_PARITY = 0x1BD11BDA


def _threefry_helper() -> str:
    """Threefry-4x32 with 20 rounds, as :func:`arrayjit_ir.ops.threefry4x32` computes it."""
    lines = [
        "define internal <4 x i32> @aj_threefry4x32(<4 x i32> %key, <4 x i32> %ctr) #1 {",
    ]
    n = 0

    def op(text: str) -> str:
        nonlocal n
        n += 1
        lines.append(f"  %v{n} = {text}")
        return f"%v{n}"

    ks = [op(f"extractelement <4 x i32> %key, i32 {i}") for i in range(4)]
    parity = op(f"xor i32 {ks[0]}, {ks[1]}")
    parity = op(f"xor i32 {parity}, {ks[2]}")
    parity = op(f"xor i32 {parity}, {ks[3]}")
    ks.append(op(f"xor i32 {parity}, {_THREEFRY_PARITY}"))
    x = [op(f"extractelement <4 x i32> %ctr, i32 {i}") for i in range(4)]
    x = [op(f"add i32 {x[i]}, {ks[i]}") for i in range(4)]

    def rotl(v: str, r: int) -> str:
        return op(f"call i32 @llvm.fshl.i32(i32 {v}, i32 {v}, i32 {r})")

    for rnd in range(ops.THREEFRY_ROUNDS):
        r0, r1 = _THREEFRY_ROTATIONS[rnd % 8]
        a, b = (1, 3) if rnd % 2 == 0 else (3, 1)
        x[0] = op(f"add i32 {x[0]}, {x[a]}")
        x[a] = op(f"xor i32 {rotl(x[a], r0)}, {x[0]}")
        x[2] = op(f"add i32 {x[2]}, {x[b]}")
        x[b] = op(f"xor i32 {rotl(x[b], r1)}, {x[2]}")
        if rnd % 4 == 3:
            inject = rnd // 4 + 1
            x = [op(f"add i32 {x[i]}, {ks[(inject + i) % 5]}") for i in range(4)]
            x[3] = op(f"add i32 {x[3]}, {inject}")
    vec = "zeroinitializer"
    for i in range(4):
        vec = op(f"insertelement <4 x i32> {vec}, i32 {x[i]}, i32 {i}")
    lines += [f"  ret <4 x i32> {vec}", "}"]
    return "\n".join(lines)


_HELPERS["aj_threefry4x32"] = _threefry_helper()

_HELPER_INTRINSICS: dict[str, tuple[str, ...]] = {
    "aj_threefry4x32": ("declare i32 @llvm.fshl.i32(i32, i32, i32)",),
    "aj_f32_to_fp8": (
        "declare float @llvm.fabs.f32(float)",
        "declare float @llvm.roundeven.f32(float)",
    ),
}

_FLOAT_UNOP_INTRINSIC: dict[ops.Unop, str] = {
    ops.Unop.exp: "exp",
    ops.Unop.log: "log",
    ops.Unop.exp2: "exp2",
    ops.Unop.log2: "log2",
    ops.Unop.sin: "sin",
    ops.Unop.cos: "cos",
    ops.Unop.sqrt: "sqrt",
    ops.Unop.trunc: "trunc",
    ops.Unop.tanh: "tanh",
}


# ---- routine structure ----


@dataclass(frozen=True)
class Segment:
    """One generated function: a run of serial top-level statements, a parallel loop, or a
    parallel reduction."""

    name: str
    loop: L.For_loop | None = None
    """The parallel loop; its function takes ``(start, stop)`` after the common parameters."""
    reduction: ScalarReduction | None = None
    """For a parallel reduction (then ``loop`` is its outer loop): the function takes
    ``(start, stop, partials, slot)`` and stores the reduction of its range, from the op's
    identity, into ``partials[slot]`` (8-byte slots); ``{name}_combine`` takes
    ``(partials, count)`` and folds the partials into the cell."""

    @property
    def parallel(self) -> bool:
        return self.loop is not None

    @property
    def combine_name(self) -> str:
        return f"{self.name}_combine"

    @property
    def cost(self) -> int:
        """The estimated cost of the parallel loop (0 for a serial segment), see
        :func:`cost`."""
        return cost(self.loop) if self.loop is not None else 0


@dataclass(frozen=True)
class LlvmKernel:
    """The generated module of one routine."""

    ir: str
    params: KernelParams
    scratch: tuple[Tnode, ...]
    """Kernel-local nodes held in buffers allocated at link; their pointers follow the merge
    buffer in every segment's parameters."""
    segments: tuple[Segment, ...]


def split_segments(code: L.Stmt) -> list[list[L.Stmt] | L.For_loop]:
    """The routine's top-level statements grouped into serial runs (lists) and parallel loops:
    top-level loops with at least ``PARALLEL_MIN_WORK`` work that write disjoint cells or are a
    :class:`~arrayjit_backends.c_syntax.ScalarReduction`."""
    stmts = list(code.stmts) if isinstance(code, L.Seq) else [code]
    groups: list[list[L.Stmt] | L.For_loop] = []
    for s in stmts:
        if (
            isinstance(s, L.For_loop)
            and _loop_work(s) >= PARALLEL_MIN_WORK
            and (scalar_reduction(s) is not None or is_parallel_loop(s))
        ):
            groups.append(s)
        elif groups and isinstance(groups[-1], list):
            groups[-1].append(s)
        else:
            groups.append([s])
    return groups


_EXPENSIVE_UNOPS = frozenset(
    {ops.Unop.exp, ops.Unop.log, ops.Unop.exp2, ops.Unop.log2, ops.Unop.sin, ops.Unop.cos}
    | {ops.Unop.tanh}
)
_BINOP_COST = {ops.Binop.pow: 20, ops.Binop.mod: 20, ops.Binop.div: 4}


def cost(s: L.Stmt) -> int:
    """A rough cost of running ``s``, in units of one vectorized load, store or arithmetic op
    per element; a math-library call counts 20, a division or square root 4. Used to decide
    how many threads a parallel loop is worth."""
    match s:
        case L.Seq(stmts=stmts):
            return sum(cost(x) for x in stmts)
        case L.For_loop(from_=lo, to_inclusive=hi, body=body):
            return max(hi - lo + 1, 0) * cost(body)
        case L.Zero_out(tn=tn):
            return tn.num_elems // 8
        case L.Set(value=v):
            return 1 + _expr_cost(v)
        case L.Set_local(value=v):
            return _expr_cost(v)
    return 0


def _expr_cost(e: L.Expr) -> int:
    match e:
        case L.Get() | L.Get_merge_buffer():
            return 1
        case L.Local_scope(body=body):
            return cost(body)
        case L.Binop(op=op, a=a, b=b):
            return _BINOP_COST.get(op, 1) + _expr_cost(a) + _expr_cost(b)
        case L.Unop(op=op, a=a):
            cheap = 4 if op in (ops.Unop.sqrt, ops.Unop.recip, ops.Unop.recip_sqrt) else 1
            return (20 if op in _EXPENSIVE_UNOPS else cheap) + _expr_cost(a)
        case L.Ternop(a=a, b=b, c=c):
            return 1 + _expr_cost(a) + _expr_cost(b) + _expr_cost(c)
    return 0


def _touched(s: L.Stmt, acc: set[Tnode]) -> set[Tnode]:
    """Every node a statement reads, writes or zeroes (local-scope bodies included)."""
    match s:
        case L.Seq(stmts=stmts):
            for x in stmts:
                _touched(x, acc)
        case L.For_loop(body=body):
            _touched(body, acc)
        case L.Zero_out(tn=tn):
            acc.add(tn)
        case L.Set(tn=tn, value=v):
            acc.add(tn)
            _touched_expr(v, acc)
        case L.Set_local(value=v):
            _touched_expr(v, acc)
    return acc


def _touched_expr(e: L.Expr, acc: set[Tnode]) -> None:
    match e:
        case L.Get(tn=tn):
            acc.add(tn)
        case L.Local_scope(body=body):
            _touched(body, acc)
        case L.Binop(a=a, b=b):
            _touched_expr(a, acc)
            _touched_expr(b, acc)
        case L.Unop(a=a):
            _touched_expr(a, acc)
        case L.Ternop(a=a, b=b, c=c):
            _touched_expr(a, acc)
            _touched_expr(b, acc)
            _touched_expr(c, acc)


# ---- one function ----


@dataclass
class _Fn:
    """The body of one function being generated."""

    lines: list[str] = field(default_factory=list)
    allocas: list[str] = field(default_factory=list)
    block: str = "entry"
    n: int = 0

    def tmp(self, text: str) -> str:
        self.n += 1
        name = f"%t{self.n}"
        self.lines.append(f"  {name} = {text}")
        return name

    def do(self, text: str) -> None:
        self.lines.append(f"  {text}")

    def label(self, hint: str) -> str:
        self.n += 1
        return f"{hint}{self.n}"

    def start(self, label: str) -> None:
        self.lines.append(f"{label}:")
        self.block = label


class LlvmGen:
    """Generates the LLVM module of a routine (see the module docstring)."""

    supported_precs: ClassVar[frozenset[Prec]] = frozenset(Prec)

    def __init__(
        self, target_cpu: str = "", target_features: str = "", native_half: bool = False
    ) -> None:
        """``native_half``: convert half with LLVM's ``half`` type (hardware conversions where
        the target has them, e.g. x86 F16C); else with integer code, like bfloat16 and fp8."""
        self.target_cpu = target_cpu
        self.target_features = target_features
        self.native_half = native_half
        self._reset()

    def _reset(self) -> None:
        self._decls: dict[str, None] = {}
        self._helpers: dict[str, None] = {}
        self._names: dict[Tnode, str] = {}
        self._fn = _Fn()
        self._ptrs: dict[Tnode, str] = {}
        self._syms: dict[Symbol | StaticSymbol, str] = {}
        self._locals: dict[L.ScopeId, str] = {}
        self._merge = "null"

    # ---- types and conversions ----

    def storage_type(self, prec: Prec) -> str:
        """The LLVM type of one stored element."""
        if prec is Prec.half:
            return "half" if self.native_half else "i16"
        if prec is Prec.bfloat16:
            return "i16"
        if prec is Prec.fp8:
            return "i8"
        return compute_type(prec).ll

    @staticmethod
    def align(prec: Prec) -> int:
        """The alignment of a stored element (uint4x32 host arrays hold uint32 lanes)."""
        return 4 if prec is Prec.uint4x32 else prec.byte_size

    def _helper(self, name: str) -> str:
        self._helpers[name] = None
        for d in _HELPER_INTRINSICS.get(name, ()):
            self._decls[d] = None
        return name

    def _call(self, ret: str, fn: str, *args: str, flags: str = "") -> str:
        return self._fn.tmp(f"call {flags}{ret} @{fn}({', '.join(args)})")

    def _intrinsic(self, name: str, ty: _Ty, *args: str, flags: str = "") -> str:
        fn = f"llvm.{name}.{ty.suffix}"
        self._decls[f"declare {ty.ll} @{fn}({', '.join([ty.ll] * len(args))})"] = None
        return self._call(ty.ll, fn, *(f"{ty.ll} {a}" for a in args), flags=flags)

    def _load_conv(self, prec: Prec, v: str) -> str:
        """A stored element as a value of ``prec``'s compute type."""
        match prec:
            case Prec.bfloat16:
                return self._call("float", self._helper("aj_bf16_to_f32"), f"i16 {v}")
            case Prec.fp8:  # an E5M2 byte is the high byte of a half
                bits = self._fn.tmp(f"shl i16 {self._fn.tmp(f'zext i8 {v} to i16')}, 8")
                if self.native_half:
                    bits = self._fn.tmp(f"bitcast i16 {bits} to half")
                return self._load_conv(Prec.half, bits)
            case Prec.half if self.native_half:
                return self._fn.tmp(f"fpext half {v} to float")
            case Prec.half:
                return self._call("float", self._helper("aj_half_to_f32"), f"i16 {v}")
        return v

    def _store_conv(self, prec: Prec, v: str) -> str:
        """A computed value of ``prec``'s compute type as a stored element."""
        match prec:
            case Prec.bfloat16:
                return self._call("i16", self._helper("aj_f32_to_bf16"), f"float {v}")
            case Prec.fp8:
                return self._call("i8", self._helper("aj_f32_to_fp8"), f"float {v}")
            case Prec.half if self.native_half:
                return self._fn.tmp(f"fptrunc float {v} to half")
            case Prec.half:
                return self._call("i16", self._helper("aj_f32_to_half"), f"float {v}")
        return v

    def cast(self, v: str, src: _Ty, dst: _Ty) -> str:
        """Convert ``v`` as C's cast does (float to integer: see the module docstring)."""
        if src == dst:
            return v
        f = self._fn
        if src is _VEC:
            return self.cast(f.tmp(f"extractelement <4 x i32> {v}, i32 0"), _U32, dst)
        if dst is _VEC:
            wide = self.cast(v, src, _I64)
            lo = f.tmp(f"trunc i64 {wide} to i32")
            hi = f.tmp(f"trunc i64 {f.tmp(f'lshr i64 {wide}, 32')} to i32")
            vec = f.tmp(f"insertelement <4 x i32> zeroinitializer, i32 {lo}, i32 0")
            return f.tmp(f"insertelement <4 x i32> {vec}, i32 {hi}, i32 1")
        if src.is_float and dst.is_float:
            op = "fpext" if dst.bits > src.bits else "fptrunc"
            return f.tmp(f"{op} {src.ll} {v} to {dst.ll}")
        if not src.is_float and not dst.is_float:
            if src.bits == dst.bits:
                return v
            if src.bits > dst.bits:
                return f.tmp(f"trunc {src.ll} {v} to {dst.ll}")
            return f.tmp(f"{'sext' if src.signed else 'zext'} {src.ll} {v} to {dst.ll}")
        if not src.is_float:
            return f.tmp(f"{'sitofp' if src.signed else 'uitofp'} {src.ll} {v} to {dst.ll}")
        # The saturating rule of arrayjit_ir.ops.float_to_int is LLVM's saturating conversion.
        fn = f"llvm.fpto{'s' if dst.signed else 'u'}i.sat.{dst.ll}.{src.suffix}"
        self._decls[f"declare {dst.ll} @{fn}({src.ll})"] = None
        return self._call(dst.ll, fn, f"{src.ll} {v}")

    def _bool(self, c: str, ty: _Ty) -> str:
        """An ``i1`` as 1 or 0 of type ``ty``."""
        return self._fn.tmp(f"{'uitofp' if ty.is_float else 'zext'} i1 {c} to {ty.ll}")

    def _nonzero(self, v: str, ty: _Ty) -> str:
        if ty is _VEC:  # any lane, as the interpreter tests a vector condition
            lanes = self._fn.tmp(f"icmp ne <4 x i32> {v}, zeroinitializer")
            self._decls["declare i1 @llvm.vector.reduce.or.v4i1(<4 x i1>)"] = None
            return self._call("i1", "llvm.vector.reduce.or.v4i1", f"<4 x i1> {lanes}")
        if ty.is_float:
            return self._fn.tmp(f"fcmp une {ty.ll} {v}, 0.0")
        return self._fn.tmp(f"icmp ne {ty.ll} {v}, 0")

    def _select(self, c: str, ty: _Ty, a: str, b: str) -> str:
        return self._fn.tmp(f"select i1 {c}, {ty.ll} {a}, {ty.ll} {b}")

    # ---- names and indices ----

    def name(self, tn: Tnode) -> str:
        """The IR name of a node's buffer pointer."""
        if tn not in self._names:
            self._names[tn] = f"%n.{_ident(tn.debug_name)}_{len(self._names)}"
        return self._names[tn]

    def _ptr(self, tn: Tnode) -> str:
        try:
            return self._ptrs[tn]
        except KeyError:
            raise UsageError(
                f"the LLVM generator found node {tn.debug_label}, which is neither in the "
                "routine's context nor local to it"
            ) from None

    def index(self, i: AxisIndex) -> int | str:
        """An axis index as an ``i64`` value (a Python int when constant)."""
        match i:
            case Fixed_idx(value=v):
                return v
            case Iterator(symbol=s):
                return self._syms[s]
            case Affine(terms=terms, offset=off):
                acc: int | str = off
                for c, s in terms:
                    acc = self._iadd(acc, self._imul(self._syms[s], c))
                return acc
        raise TypeError(i)

    def _imul(self, a: int | str, c: int) -> int | str:
        if isinstance(a, int):
            return a * c
        if c == 1:
            return a
        return self._fn.tmp(f"mul nsw i64 {a}, {c}")

    def _iadd(self, a: int | str, b: int | str) -> int | str:
        if isinstance(a, int) and isinstance(b, int):
            return a + b
        if a == 0:
            return b
        if b == 0:
            return a
        return self._fn.tmp(f"add nsw i64 {a}, {b}")

    def _elem_ptr(self, base: str, tn: Tnode, idx: tuple[AxisIndex, ...]) -> str:
        """The address of ``tn[idx]`` (row-major in its padded dims) from ``base``."""
        off: int | str = 0
        for k, i in enumerate(idx):
            part = self.index(i)
            off = part if k == 0 else self._iadd(self._imul(off, tn.dims[k]), part)
        st = self.storage_type(tn.prec)
        return self._fn.tmp(f"getelementptr inbounds {st}, ptr {base}, i64 {off}")

    def _load(self, base: str, tn: Tnode, idx: tuple[AxisIndex, ...], ty: _Ty) -> str:
        p = self._elem_ptr(base, tn, idx)
        st = self.storage_type(tn.prec)
        raw = self._fn.tmp(f"load {st}, ptr {p}, align {self.align(tn.prec)}")
        return self.cast(self._load_conv(tn.prec, raw), compute_type(tn.prec), ty)

    # ---- expressions ----

    def expr(self, e: L.Expr, prec: Prec) -> str:
        """Generate ``e`` computed in ``prec``'s compute type; returns its value."""
        ty = compute_type(prec)
        f = self._fn
        match e:
            case L.Binop(op=ops.Binop.threefry4x32, a=a, b=b):
                key = self.expr(a, Prec.uint4x32)
                ctr = self.expr(b, Prec.uint4x32)
                bits = self._call(
                    "<4 x i32>",
                    self._helper("aj_threefry4x32"),
                    f"<4 x i32> {key}",
                    f"<4 x i32> {ctr}",
                )
                return self.cast(bits, _VEC, ty)
            case L.Unop(op=ops.Unop.uint4x32_to_prec_uniform, a=a):
                return self.uniform(self.expr(a, Prec.uint4x32), ty)
            case L.Binop() | L.Unop() | L.Ternop(op=ops.Ternop.fma) if ty is _VEC:
                return self.cast(self.expr(e, Prec.uint64), _U64, _VEC)
            case L.Get(tn=tn, indices=idx):
                return self._load(self._ptr(tn), tn, idx, ty)
            case L.Get_merge_buffer(tn=tn, indices=idx):
                return self._load(self._merge, tn, idx, ty)
            case L.Get_local(scope=sc):
                lty = compute_type(sc.tn.prec)
                v = f.tmp(f"load {lty.ll}, ptr {self._local(sc)}")
                return self.cast(v, lty, ty)
            case L.Local_scope(scope=sc, body=body):
                lty = compute_type(sc.tn.prec)
                ptr = self._local(sc)
                f.do(f"store {lty.ll} {lty.zero}, ptr {ptr}")
                self.stmt(body)
                v = f.tmp(f"load {lty.ll}, ptr {ptr}")
                return self.cast(v, lty, ty)
            case L.Embed_index(index=i):
                return self.cast(str(self.index(i)), _I64, ty)
            case L.Constant(value=v):
                return _const(v, ty)
            case L.Constant_bits(value=v):
                return self.cast(_iconst(v, 64), _I64, ty)
            case L.Binop(op=op, a=a, b=b):
                x = self.expr(a, prec)
                return self.binop(op, x, self.expr(b, prec), ty)
            case L.Unop(op=op, a=a):
                return self.unop(op, self.expr(a, prec), ty)
            case L.Ternop(op=ops.Ternop.where, a=c, b=b, c=d):
                cprec = natural_prec(c)
                cond = self._nonzero(self.expr(c, cprec), compute_type(cprec))
                x = self.expr(b, prec)
                return self._select(cond, ty, x, self.expr(d, prec))
            case L.Ternop(op=ops.Ternop.fma, a=a, b=b, c=c):
                x = self.expr(a, prec)
                y = self.expr(b, prec)
                z = self.expr(c, prec)
                if ty.is_float:
                    return self._intrinsic("fma", ty, x, y, z)
                return f.tmp(f"add {ty.ll} {f.tmp(f'mul {ty.ll} {x}, {y}')}, {z}")
        raise UsageError(f"the LLVM generator cannot generate {type(e).__name__}")

    def binop(self, op: ops.Binop, x: str, y: str, ty: _Ty) -> str:
        """``op(x, y)`` in type ``ty``."""
        f, t = self._fn, ty.ll
        match op:
            case ops.Binop.arg1:
                return x
            case ops.Binop.arg2:
                return y
            case ops.Binop.threefry4x32:
                raise UsageError("the LLVM generator does not support threefry4x32 yet")
            case ops.Binop.relu_gate:
                return self._select(self._cmp("gt", x, ty.zero, ty), ty, y, ty.zero)
            case ops.Binop.satur01_gate:
                c1 = self._cmp("gt", x, ty.zero, ty)
                c2 = self._cmp("lt", x, ty.one, ty)
                return self._select(f.tmp(f"and i1 {c1}, {c2}"), ty, y, ty.zero)
            case ops.Binop.cmplt:
                return self._bool(self._cmp("lt", x, y, ty), ty)
            case ops.Binop.cmpeq:
                return self._bool(self._cmp("eq", x, y, ty), ty)
            case ops.Binop.cmpne:
                return self._bool(self._cmp("ne", x, y, ty), ty)
            case ops.Binop.or_ | ops.Binop.and_:
                c = f.tmp(f"{op.value} i1 {self._nonzero(x, ty)}, {self._nonzero(y, ty)}")
                return self._bool(c, ty)
        if ty.is_float:
            match op:
                case ops.Binop.add | ops.Binop.sub | ops.Binop.mul | ops.Binop.div:
                    return f.tmp(f"f{'div' if op is ops.Binop.div else op.value} {t} {x}, {y}")
                case ops.Binop.mod:
                    return f.tmp(f"frem {t} {x}, {y}")
                case ops.Binop.pow:
                    return self._intrinsic("pow", ty, x, y)
                case ops.Binop.max | ops.Binop.min:  # IEEE maximum/minimum: NaN propagates
                    return self._intrinsic(f"{op.value}imum", ty, x, y)
        else:
            match op:
                case ops.Binop.add | ops.Binop.sub | ops.Binop.mul:
                    return f.tmp(f"{op.value} {t} {x}, {y}")
                case ops.Binop.div | ops.Binop.mod:
                    return self._int_divmod(op, x, y, ty)
                case ops.Binop.pow:
                    xd, yd = self.cast(x, ty, _F64), self.cast(y, ty, _F64)
                    return self.cast(self._intrinsic("pow", _F64, xd, yd), _F64, ty)
                case ops.Binop.max:
                    return self._select(self._cmp("gt", x, y, ty), ty, x, y)
                case ops.Binop.min:
                    return self._select(self._cmp("lt", x, y, ty), ty, x, y)
        raise UsageError(f"the LLVM generator cannot generate binary op {op.value}")

    def _cmp(self, rel: str, x: str, y: str, ty: _Ty) -> str:
        """An ordered comparison as C's ``<``, ``>``, ``==`` (and unordered ``!=``)."""
        if ty.is_float:
            pred = "une" if rel == "ne" else f"o{rel}"
            return self._fn.tmp(f"fcmp {pred} {ty.ll} {x}, {y}")
        pred = rel if rel in ("eq", "ne") else ("s" if ty.signed else "u") + rel
        return self._fn.tmp(f"icmp {pred} {ty.ll} {x}, {y}")

    def _above_zero(self, x: str, ty: _Ty) -> str:
        """``x > 0``, true for a NaN ``x`` too (``!(x <= 0)``)."""
        if ty.is_float:
            return self._fn.tmp(f"fcmp ugt {ty.ll} {x}, {ty.zero}")
        return self._cmp("gt", x, ty.zero, ty)

    def _int_divmod(self, op: ops.Binop, x: str, y: str, ty: _Ty) -> str:
        # Division by zero gives 0; for signed types x / -1 is -x and x % -1 is 0 (never the
        # hardware's overflow trap on INT_MIN / -1).
        f, t = self._fn, ty.ll
        zero = f.tmp(f"icmp eq {t} {y}, 0")
        bad = zero
        if ty.signed:
            m1 = f.tmp(f"icmp eq {t} {y}, -1")
            bad = f.tmp(f"or i1 {zero}, {m1}")
        safe = self._select(bad, ty, "1", y)
        kind = "div" if op is ops.Binop.div else "rem"
        r = f.tmp(f"{'s' if ty.signed else 'u'}{kind} {t} {x}, {safe}")
        if ty.signed and op is ops.Binop.div:
            r = self._select(m1, ty, f.tmp(f"sub {t} 0, {x}"), r)
            return self._select(zero, ty, "0", r)
        return self._select(bad, ty, "0", r)

    def unop(self, op: ops.Unop, x: str, ty: _Ty) -> str:
        """``op(x)`` in type ``ty``."""
        f, t = self._fn, ty.ll
        match op:
            case ops.Unop.identity:
                return x
            case ops.Unop.uint4x32_to_prec_uniform:
                raise UsageError("the LLVM generator does not support uint4x32_to_prec_uniform yet")
            case ops.Unop.relu:  # max(x, +0): NaN passes (unordered), -0 becomes +0
                return self._select(self._above_zero(x, ty), ty, x, ty.zero)
            case ops.Unop.satur01:
                hi = self._select(self._cmp("gt", x, ty.one, ty), ty, ty.one, x)
                return self._select(self._above_zero(x, ty), ty, hi, ty.zero)
            case ops.Unop.not_:
                return self._bool(self._cmp("eq", x, ty.zero, ty), ty)
            case ops.Unop.neg:
                return f.tmp(f"fneg {t} {x}" if ty.is_float else f"sub {t} 0, {x}")
        if not ty.is_float:
            match op:
                case ops.Unop.trunc:
                    return x
                case ops.Unop.recip:
                    return self._int_divmod(ops.Binop.div, "1", x, ty)
            return self.cast(self.unop(op, self.cast(x, ty, _F64), _F64), _F64, ty)
        match op:
            case ops.Unop.recip:
                return f.tmp(f"fdiv {t} {ty.one}, {x}")
            case ops.Unop.recip_sqrt:
                return f.tmp(f"fdiv {t} {ty.one}, {self._intrinsic('sqrt', ty, x)}")
        return self._intrinsic(_FLOAT_UNOP_INTRINSIC[op], ty, x)

    def uniform(self, bits: str, ty: _Ty) -> str:
        """Random bits as a value of ``ty``: floats uniform in [0, 1) from the top mantissa-width
        bits of lane 0 (lanes 1:0 for double), integers from lane 0 (lanes 1:0 when 64-bit)."""
        f = self._fn
        if ty is _VEC:
            return bits
        lo = f.tmp(f"extractelement <4 x i32> {bits}, i32 0")
        if ty.bits == 64:
            hi = f.tmp(f"extractelement <4 x i32> {bits}, i32 1")
            lo64 = f.tmp(f"zext i32 {lo} to i64")
            hi64 = f.tmp(f"shl i64 {f.tmp(f'zext i32 {hi} to i64')}, 32")
            wide = f.tmp(f"or i64 {lo64}, {hi64}")
            if not ty.is_float:
                return wide
            top = f.tmp(f"uitofp i64 {f.tmp(f'lshr i64 {wide}, 11')} to double")
            return f.tmp(f"fmul double {top}, {_fconst(2.0**-53, _F64)}")
        if not ty.is_float:
            return self.cast(lo, _U32, ty)
        top = f.tmp(f"uitofp i32 {f.tmp(f'lshr i32 {lo}, 8')} to float")
        return f.tmp(f"fmul float {top}, {_fconst(2.0**-24, _F32)}")

    # ---- statements ----

    def _local(self, sc: L.ScopeId) -> str:
        if sc not in self._locals:
            name = f"%v.{len(self._locals)}_{_ident(sc.tn.debug_name)}"
            self._fn.allocas.append(f"  {name} = alloca {compute_type(sc.tn.prec).ll}")
            self._locals[sc] = name
        return self._locals[sc]

    def stmt(self, s: L.Stmt) -> None:
        f = self._fn
        match s:
            case L.Noop():
                pass
            case L.Comment(text=text):
                f.lines.append("  ; " + " ".join(text.split()))
            case L.Seq(stmts=stmts):
                for x in stmts:
                    self.stmt(x)
            case L.For_loop() if (red := scalar_reduction(s)) is not None:
                self.reduction(red)
            case L.For_loop(index=i, from_=lo, to_inclusive=hi, body=L.Set_local() as step) if (
                local := _local_sum(s)
            ) is not None:
                # An inlined sum's loop (a block of a blocked sum): reassociated, so it
                # vectorizes, as the cc backend's ``omp simd`` reduction does.
                op = ops.Binop.add if local[0] == "+" else ops.Binop.mul
                if lo <= hi:
                    self.loop(i, str(lo), str(hi + 1), lambda: self._local_step(op, step), False)
            case L.For_loop(index=i, from_=lo, to_inclusive=hi, body=body):
                if lo <= hi:
                    self.loop(i, str(lo), str(hi + 1), lambda: self.stmt(body), guard=False)
            case L.Zero_out(tn=tn) if tn.num_elems > 0:  # an empty node owns no bytes
                self._memset(self._ptr(tn), tn.num_elems * tn.prec.byte_size)
            case L.Zero_out():
                pass
            case L.Set(tn=tn, indices=idx, value=v):
                val = self._store_conv(tn.prec, self.expr(v, tn.prec))
                p = self._elem_ptr(self._ptr(tn), tn, idx)
                f.do(
                    f"store {self.storage_type(tn.prec)} {val}, ptr {p}, align {tn.prec.byte_size}"
                )
            case L.Set_local(scope=sc, value=v):
                val = self.expr(v, sc.tn.prec)
                if rounds_when_stored(sc.tn.prec):  # a virtual node's value rounds as stored
                    val = self._load_conv(sc.tn.prec, self._store_conv(sc.tn.prec, val))
                f.do(f"store {compute_type(sc.tn.prec).ll} {val}, ptr {self._local(sc)}")
            case _:
                raise UsageError(f"the LLVM generator cannot generate {type(s).__name__}")

    def _local_step(self, op: ops.Binop, s: L.Set_local) -> None:
        """``local = local op term`` or, for a multiply-accumulate, ``local = fma(x, w,
        local)`` (a :func:`_local_sum` loop's body), reassociable."""
        ty, prec = compute_type(s.scope.tn.prec), s.scope.tn.prec
        ptr = self._local(s.scope)
        acc = self._fn.tmp(f"load {ty.ll}, ptr {ptr}")
        match s.value:
            case L.Ternop(op=ops.Ternop.fma, a=x, b=w):
                xv, wv = self.expr(x, prec), self.expr(w, prec)
                new = self._intrinsic("fma", ty, xv, wv, acc, flags="reassoc ")
            case L.Binop(b=term):
                new = self._reduce(op, acc, self.expr(term, prec), ty, True)
            case _:
                raise AssertionError(f"not an inlined sum's step: {s.value!r}")
        self._fn.do(f"store {ty.ll} {new}, ptr {ptr}")

    def loop(self, sym: Symbol, lo: str, stop: str, body: Callable[[], None], guard: bool) -> None:
        """``for sym in [lo, stop): body()`` as a bottom-tested loop (guarded when the bounds are
        not known to be non-empty)."""
        f = self._fn
        head, done = f.label("L"), f.label("X")
        if guard:
            c = f.tmp(f"icmp slt i64 {lo}, {stop}")
            f.do(f"br i1 {c}, label %{head}, label %{done}")
        else:
            f.do(f"br label %{head}")
        pre = f.block
        f.start(head)
        iv = f"%i{f.n}"
        phi_at = len(f.lines)
        f.lines.append("")
        self._syms[sym] = iv
        body()
        nxt = f.tmp(f"add nsw i64 {iv}, 1")
        c = f.tmp(f"icmp slt i64 {nxt}, {stop}")
        f.do(f"br i1 {c}, label %{head}, label %{done}")
        f.lines[phi_at] = f"  {iv} = phi i64 [ {lo}, %{pre} ], [ {nxt}, %{f.block} ]"
        f.start(done)

    # ---- reductions into one cell ----

    def _reduce(self, op: ops.Binop, acc: str, x: str, ty: _Ty, reassoc: bool) -> str:
        """``op(acc, x)``; with ``reassoc`` a float op may be reassociated (vectorized), as
        OpenMP's reduction clause allows the cc backend."""
        flags = "reassoc " if reassoc and ty.is_float else ""
        match op:
            case ops.Binop.add | ops.Binop.mul if ty.is_float:
                return self._fn.tmp(f"f{op.value} {flags}{ty.ll} {acc}, {x}")
            case ops.Binop.max | ops.Binop.min if ty.is_float:
                return self._intrinsic(f"{op.value}imum", ty, acc, x, flags=flags)
        return self.binop(op, acc, x, ty)

    def _identity(self, op: ops.Binop, ty: _Ty) -> str:
        """The value each chunk of a parallel reduction starts from."""
        match op:
            case ops.Binop.add:
                return ty.zero
            case ops.Binop.mul:
                return ty.one
        low = op is ops.Binop.max
        if ty.is_float:
            return _fconst(-np.inf if low else np.inf, ty)
        if ty.signed:
            return _iconst(-(1 << (ty.bits - 1)) if low else (1 << (ty.bits - 1)) - 1, ty.bits)
        return "0" if low else "-1"

    def _accumulate(
        self, red: ScalarReduction, acc: str, loops: tuple[L.For_loop, ...], first: tuple[str, str]
    ) -> None:
        """The nest of ``red`` (its outer loop over ``first``, a ``[start, stop)`` pair of
        values) accumulating into the local at ``acc``."""
        ty = compute_type(red.target.tn.prec)

        def nest(k: int) -> None:
            if k == len(loops):
                a = self._fn.tmp(f"load {ty.ll}, ptr {acc}")
                prec = red.target.tn.prec
                if red.fused:  # a multiply-accumulate: fma(x, w, acc)
                    assert isinstance(red.term, L.Binop)
                    x, w = self.expr(red.term.a, prec), self.expr(red.term.b, prec)
                    new = self._intrinsic("fma", ty, x, w, a, flags="reassoc ")
                else:
                    new = self._reduce(red.op, a, self.expr(red.term, prec), ty, True)
                self._fn.do(f"store {ty.ll} {new}, ptr {acc}")
                return
            lp = loops[k]
            lo, stop = first if k == 0 else (str(lp.from_), str(lp.to_inclusive + 1))
            self.loop(lp.index, lo, stop, lambda: nest(k + 1), guard=k == 0)

        nest(0)

    def _acc_local(self, ty: _Ty) -> str:
        name = f"%acc{len(self._fn.allocas)}"
        self._fn.allocas.append(f"  {name} = alloca {ty.ll}")
        return name

    def reduction(self, red: ScalarReduction) -> None:
        """A loop nest accumulating into one cell, the cell in a register."""
        if any(lp.from_ > lp.to_inclusive for lp in red.loops):
            return
        tn = red.target.tn
        ty = compute_type(tn.prec)
        cell = self._elem_ptr(self._ptr(tn), tn, red.target.indices)
        acc = self._acc_local(ty)
        st = self.storage_type(tn.prec)
        init = self._load_conv(tn.prec, self._fn.tmp(f"load {st}, ptr {cell}"))
        self._fn.do(f"store {ty.ll} {init}, ptr {acc}")
        outer = red.loops[0]
        self._accumulate(red, acc, red.loops, (str(outer.from_), str(outer.to_inclusive + 1)))
        final = self._store_conv(tn.prec, self._fn.tmp(f"load {ty.ll}, ptr {acc}"))
        self._fn.do(f"store {st} {final}, ptr {cell}")

    def _partial_reduction(self, red: ScalarReduction) -> None:
        """The body of a parallel reduction's chunk function."""
        ty = compute_type(red.target.tn.prec)
        acc = self._acc_local(ty)
        self._fn.do(f"store {ty.ll} {self._identity(red.op, ty)}, ptr {acc}")
        self._accumulate(red, acc, red.loops, ("%start", "%stop"))
        slot = self._fn.tmp("getelementptr inbounds i64, ptr %partials, i64 %slot")
        self._fn.do(f"store {ty.ll} {self._fn.tmp(f'load {ty.ll}, ptr {acc}')}, ptr {slot}")

    def _combine(self, red: ScalarReduction) -> None:
        """The body of a parallel reduction's combining function."""
        tn = red.target.tn
        ty = compute_type(tn.prec)
        f = self._fn
        cell = self._elem_ptr(self._ptr(tn), tn, red.target.indices)
        st = self.storage_type(tn.prec)
        acc = self._acc_local(ty)
        f.do(
            f"store {ty.ll} {self._load_conv(tn.prec, f.tmp(f'load {st}, ptr {cell}'))}, ptr {acc}"
        )

        def fold() -> None:
            slot = f.tmp(f"getelementptr inbounds i64, ptr %partials, i64 {self._syms[k]}")
            part = f.tmp(f"load {ty.ll}, ptr {slot}")
            a = f.tmp(f"load {ty.ll}, ptr {acc}")
            f.do(f"store {ty.ll} {self._reduce(red.op, a, part, ty, False)}, ptr {acc}")

        k = Symbol(0)
        self.loop(k, "0", "%count", fold, guard=True)
        f.do(
            f"store {st} {self._store_conv(tn.prec, f.tmp(f'load {ty.ll}, ptr {acc}'))}, ptr {cell}"
        )

    # ---- the module ----

    def check_precisions(self, opt: Optimized) -> None:
        """Raise :class:`UsageError` naming a node whose precision the generator lacks."""
        for tn in opt.traced:
            if tn.prec not in self.supported_precs:
                raise UsageError(
                    f"routine {opt.name}: node {tn.debug_label} has precision {tn.prec}, which "
                    "the LLVM generator does not support"
                )

    def generate(self, opt: Optimized, fn_name: str) -> LlvmKernel:
        """The LLVM module of a routine; its functions are ``{fn_name}_{k}``, one a segment."""
        self.check_precisions(opt)
        self._reset()
        params = kernel_params(opt)
        # Blocks of sums vectorize (reassociated): wider blocks, same error bound.
        groups = split_segments(widen_blocks(opt.code, SIMD_LANES))
        touched = [
            _touched(g if isinstance(g, L.For_loop) else L.Seq(tuple(g)), set()) for g in groups
        ]
        local_nodes = opt.local_nodes
        scratch = tuple(
            tn
            for tn in local_nodes
            if tn.num_elems * tn.prec.byte_size > STACK_LIMIT_BYTES
            or sum(tn in t for t in touched) > 1
        )
        args = [f"ptr noalias {self.name(tn)}" for tn in params.buffers]
        if params.merge_node is not None:
            args.append("ptr noalias readonly %merge_buffer")
        args += [f"ptr noalias {self.name(tn)}" for tn in scratch]
        args += [f"i64 %sym.{s.name}" for s in params.static_symbols]
        functions: list[str] = []
        segments: list[Segment] = []

        def function(name: str, extra: list[str], k: int, body: Callable[[], None]) -> None:
            self._fn = _Fn()
            self._locals = {}
            self._syms = {s: f"%sym.{s.name}" for s in params.static_symbols}
            self._ptrs = {tn: self.name(tn) for tn in (*params.buffers, *scratch)}
            self._merge = "%merge_buffer" if params.merge_node is not None else "null"
            used = touched[k]
            for tn in local_nodes:
                if tn in used and tn not in scratch:
                    self._stack_node(tn, opt.traced[tn].zero_initialized_by_code)
            serial = not isinstance(groups[k], L.For_loop)
            for tn in scratch:
                first = next(j for j, t in enumerate(touched) if tn in t)
                if first == k and serial and opt.traced[tn].zero_initialized_by_code:
                    self._memset(self.name(tn), tn.num_elems * tn.prec.byte_size)
            body()
            self._fn.do("ret void")
            functions.append(
                f"define void @{name}({', '.join(args + extra)}) #0 {{\nentry:\n"
                + "\n".join(self._fn.allocas + self._fn.lines)
                + "\n}"
            )

        for k, g in enumerate(groups):
            name = f"{fn_name}_{k}"
            if not isinstance(g, L.For_loop):
                segments.append(Segment(name))
                function(name, [], k, functools.partial(self._serial, g))
                continue
            red = scalar_reduction(g)
            seg = Segment(name, g, red)
            segments.append(seg)
            if red is None:
                start_stop = ["i64 %start", "i64 %stop"]
                function(name, start_stop, k, functools.partial(self._parallel_loop, g))
            else:
                chunk = ["i64 %start", "i64 %stop", "ptr noalias %partials", "i64 %slot"]
                function(name, chunk, k, functools.partial(self._partial_reduction, red))
                combine = ["ptr noalias readonly %partials", "i64 %count"]
                function(seg.combine_name, combine, k, functools.partial(self._combine, red))
        attrs = f'"target-cpu"="{self.target_cpu}" "target-features"="{self.target_features}"'
        ir = "\n".join(
            [
                f"; routine {opt.name}",
                *self._decls,
                *functions,
                *(_HELPERS[h] for h in self._helpers),
                f'attributes #0 = {{ nounwind "no-trapping-math"="true" {attrs} }}',
                f"attributes #1 = {{ alwaysinline nounwind {attrs} }}",
                "",
            ]
        )
        return LlvmKernel(ir, params, scratch, tuple(segments))

    def _serial(self, stmts: list[L.Stmt]) -> None:
        for x in stmts:
            self.stmt(x)

    def _parallel_loop(self, loop: L.For_loop) -> None:
        """The body of a parallel loop's function: the loop over ``[start, stop)``."""
        self.loop(loop.index, "%start", "%stop", lambda: self.stmt(loop.body), guard=True)

    def _stack_node(self, tn: Tnode, zero: bool) -> None:
        name = self.name(tn)
        n = max(tn.num_elems, 1)
        st = self.storage_type(tn.prec)
        self._fn.allocas.append(f"  {name} = alloca [{n} x {st}], align 16")
        self._ptrs[tn] = name
        if zero:
            self._memset(name, n * tn.prec.byte_size)

    def _memset(self, ptr: str, size: int) -> None:
        self._decls["declare void @llvm.memset.p0.i64(ptr, i8, i64, i1)"] = None
        self._fn.do(f"call void @llvm.memset.p0.i64(ptr {ptr}, i8 0, i64 {size}, i1 0)")
