"""The instructions of scalar operations in the LLVM function being generated: storage
conversions, casts, arithmetic, comparisons and random bits as uniform values.

:class:`ScalarGen` is the base of :class:`~arrayjit_backend_c.llvm.renderer.LlvmGen`, which walks
the routine's IR and owns the state these methods write to: the function body (:class:`Fn`), the
module's declarations and the helpers it calls. The semantics (IEEE floats, wrapping integers,
division by zero, saturating float-to-integer conversion) are described in
:mod:`arrayjit_backend_c.llvm.renderer`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from arrayjit_backend_c.llvm.helpers import HELPER_INTRINSICS
from arrayjit_backend_c.llvm.ir_types import F32, F64, I64, U32, VEC, Ty, compute_type, fconst
from arrayjit_backends.codegen import math_lib
from arrayjit_ir import ops
from arrayjit_tnode import Prec, UsageError

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


@dataclass
class Fn:
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


class ScalarGen:
    """Generates scalar operations into the current function body (see the module docstring)."""

    native_half: bool
    """Convert half with LLVM's ``half`` type, else with integer code."""
    _fn: Fn
    _decls: dict[str, None]
    """The module's declarations (intrinsics), in first-use order."""
    _helpers: dict[str, None]
    """The helper functions (:data:`~arrayjit_backend_c.llvm.helpers.HELPERS`) the module calls."""

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
        for d in HELPER_INTRINSICS.get(name, ()):
            self._decls[d] = None
        return name

    def _call(self, ret: str, fn: str, *args: str, flags: str = "") -> str:
        return self._fn.tmp(f"call {flags}{ret} @{fn}({', '.join(args)})")

    def _intrinsic(self, name: str, ty: Ty, *args: str, flags: str = "") -> str:
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

    def cast(self, v: str, src: Ty, dst: Ty) -> str:
        """Convert ``v`` as C's cast does (float to integer: see the module docstring)."""
        if src == dst:
            return v
        f = self._fn
        if src is VEC:
            return self.cast(f.tmp(f"extractelement <4 x i32> {v}, i32 0"), U32, dst)
        if dst is VEC:
            wide = self.cast(v, src, I64)
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

    def _bool(self, c: str, ty: Ty) -> str:
        """An ``i1`` as 1 or 0 of type ``ty``."""
        return self._fn.tmp(f"{'uitofp' if ty.is_float else 'zext'} i1 {c} to {ty.ll}")

    def _nonzero(self, v: str, ty: Ty) -> str:
        if ty is VEC:  # any lane, as the interpreter tests a vector condition
            lanes = self._fn.tmp(f"icmp ne <4 x i32> {v}, zeroinitializer")
            self._decls["declare i1 @llvm.vector.reduce.or.v4i1(<4 x i1>)"] = None
            return self._call("i1", "llvm.vector.reduce.or.v4i1", f"<4 x i1> {lanes}")
        if ty.is_float:
            return self._fn.tmp(f"fcmp une {ty.ll} {v}, 0.0")
        return self._fn.tmp(f"icmp ne {ty.ll} {v}, 0")

    def _select(self, c: str, ty: Ty, a: str, b: str) -> str:
        return self._fn.tmp(f"select i1 {c}, {ty.ll} {a}, {ty.ll} {b}")

    # ---- arithmetic ----

    def binop(self, op: ops.Binop, x: str, y: str, ty: Ty) -> str:
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
                case ops.Binop.pow if ty is F32:
                    return self._call("float", self._helper("aj_powf"), f"float {x}", f"float {y}")
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
                    xd, yd = self.cast(x, ty, F64), self.cast(y, ty, F64)
                    return self.cast(self._intrinsic("pow", F64, xd, yd), F64, ty)
                case ops.Binop.max:
                    return self._select(self._cmp("gt", x, y, ty), ty, x, y)
                case ops.Binop.min:
                    return self._select(self._cmp("lt", x, y, ty), ty, x, y)
        raise UsageError(f"the LLVM generator cannot generate binary op {op.value}")

    def _cmp(self, rel: str, x: str, y: str, ty: Ty) -> str:
        """An ordered comparison as C's ``<``, ``>``, ``==`` (and unordered ``!=``)."""
        if ty.is_float:
            pred = "une" if rel == "ne" else f"o{rel}"
            return self._fn.tmp(f"fcmp {pred} {ty.ll} {x}, {y}")
        pred = rel if rel in ("eq", "ne") else ("s" if ty.signed else "u") + rel
        return self._fn.tmp(f"icmp {pred} {ty.ll} {x}, {y}")

    def _above_zero(self, x: str, ty: Ty) -> str:
        """``x > 0``, true for a NaN ``x`` too (``!(x <= 0)``)."""
        if ty.is_float:
            return self._fn.tmp(f"fcmp ugt {ty.ll} {x}, {ty.zero}")
        return self._cmp("gt", x, ty.zero, ty)

    def _int_divmod(self, op: ops.Binop, x: str, y: str, ty: Ty) -> str:
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

    def unop(self, op: ops.Unop, x: str, ty: Ty) -> str:
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
            return self.cast(self.unop(op, self.cast(x, ty, F64), F64), F64, ty)
        if ty is F32 and op in math_lib.UNOP_FUNCTIONS:
            return self._call("float", self._helper(math_lib.UNOP_FUNCTIONS[op]), f"float {x}")
        match op:
            case ops.Unop.recip:
                return f.tmp(f"fdiv {t} {ty.one}, {x}")
            case ops.Unop.recip_sqrt:
                return f.tmp(f"fdiv {t} {ty.one}, {self._intrinsic('sqrt', ty, x)}")
        return self._intrinsic(_FLOAT_UNOP_INTRINSIC[op], ty, x)

    def uniform(self, bits: str, ty: Ty) -> str:
        """Random bits as a value of ``ty``: floats uniform in [0, 1) from the top mantissa-width
        bits of lane 0 (lanes 1:0 for double), integers from lane 0 (lanes 1:0 when 64-bit)."""
        f = self._fn
        if ty is VEC:
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
            return f.tmp(f"fmul double {top}, {fconst(2.0**-53, F64)}")
        if not ty.is_float:
            return self.cast(lo, U32, ty)
        top = f.tmp(f"uitofp i32 {f.tmp(f'lshr i32 {lo}, 8')} to float")
        return f.tmp(f"fmul float {top}, {fconst(2.0**-24, F32)}")
