"""The shared C-like renderer: optimized low-level IR to C source.

C, OpenCL C and CUDA C renderers are meant to be small subclasses setting types per precision,
builtins, the kernel signature and how parallel loops map to work items. Kernel parameters have a
stable order: the context nodes' buffers (by name), the merge buffer, then the static indices in
``Optimized.static_symbols`` order. Generated code keeps node labels in names. Which loops run in
parallel or as register reductions is decided by :mod:`arrayjit_backends.codegen.kernel_plan`,
shared with the GPU and LLVM generators.

Evaluation follows the IR: a stored value is computed in the type of the node it is stored into
(half, bfloat16 and fp8 compute in float); ``where``'s condition in its own natural precision.
Integer arithmetic wraps; integer division and remainder by zero give 0, and for signed types
``x / -1`` is ``-x`` (wrapping) and ``x % -1`` is 0, as in the reference interpreter (C traps on
``INT_MIN / -1``). A float converts to an integer by the saturating rule (NaN gives 0, values
beyond the range its nearest end, others truncate toward zero; the prelude's helpers:
:mod:`arrayjit_backends.codegen.c_prelude`), integer ops computed in floating point too. Float
``max`` and ``min`` are the NaN-propagating ``aj_fmax``/``aj_fmin`` of the prelude (never C's
``fmax``), and ``fma`` (the op, and each step of a multiply-accumulate) is C's single-rounding
``fma``; nothing else may be contracted (the compilers run with contraction off). The float
transcendentals (``exp``, ``log``, ``tanh``, ``sin``, ``pow``...) call the math library's
helpers (:mod:`arrayjit_backends.codegen.math_lib`), whose definitions head the source
(:meth:`CSyntax.math_prelude`); double ones call the C library. uint4x32
values are ``aj_u4`` structs of four uint32 lanes, as in the interpreter: a scalar becomes
lanes 0 and 1 (its 64-bit value), a uint4x32 becomes a scalar through lane 0, a uint4x32
condition is true when any lane is nonzero, and arithmetic other than threefry runs on lane 0
as uint64.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from arrayjit_backends.codegen import math_lib
from arrayjit_backends.codegen.c_prelude import C_PRELUDE, INT_CTYPES, int_literal
from arrayjit_backends.codegen.kernel_plan import (
    PARALLEL_MIN_WORK,
    REDUCTION_OPS,
    KernelParams,
    ScalarReduction,
    has_loops,
    is_parallel_loop,
    local_sum,
    loop_work,
    scalar_reduction,
)
from arrayjit_ir import low_level as L
from arrayjit_ir import ops
from arrayjit_ir.indexing import (
    Affine,
    AxisIndex,
    StaticSymbol,
    Symbol,
    format_index,
    index_symbols,
)
from arrayjit_ir.low_level import natural_prec, rounds_when_stored
from arrayjit_ir.optimized import Optimized
from arrayjit_tnode import Prec, Tnode, UsageError

_WRAPPING = {ops.Binop.add: "+", ops.Binop.sub: "-", ops.Binop.mul: "*"}
"""Signed integer ops rendered in the unsigned type of the same width, so that they wrap."""


def _lane_arithmetic(e: L.Expr) -> bool:
    """Whether ``e``, computed as uint4x32, runs on lane 0 as uint64 (as in the interpreter):
    every op but threefry, the uniform conversion (the identity on uint4x32) and ``where``."""
    match e:
        case (
            L.Binop(op=ops.Binop.threefry4x32)
            | L.Unop(op=ops.Unop.uint4x32_to_prec_uniform)
            | L.Ternop(op=ops.Ternop.where)
        ):
            return False
    return isinstance(e, L.Binop | L.Unop | L.Ternop)


@dataclass
class Out:
    """Lines of generated source, each indented by its nesting depth."""

    lines: list[str] = field(default_factory=list)

    def add(self, indent: int, text: str) -> None:
        self.lines.append("  " * indent + text)


class CSyntax:
    """Renders optimized IR as C statements and expressions. Subclasses override the class
    attributes and hooks, and assemble the functions (the cc renderer's
    ``CcSyntax.render_segments``; for the GPU dialects, ``GpuSyntax``,
    :func:`arrayjit_backends.gpu.program.render_program`)."""

    kernel_prefix = ""
    simd_reduction_pragma = ""
    """Emitted before the innermost loop of a :class:`ScalarReduction` (when set, such nests
    accumulate in a register); e.g. ``#pragma omp simd reduction({op}:{var})``."""
    simd_min_trip = 16
    """Innermost reduction loops of fewer iterations than this get :attr:`simd_reduction_pragma`
    only when their count is a multiple of :attr:`simd_width`: a vector loop of one or two
    iterations plus a scalar remainder and a horizontal sum was measured up to 1.6x slower
    than the plain loop (gcc 12, AVX2, 4 and 10 iterations), and faster from 16 on."""
    simd_width = 8
    jam_factor = 0
    """When at least 2: a top-level parallel loop over a perfect nest of three or more loops
    (a matmul) runs that many of its iterations together in the innermost body, so values they
    share (a row of ``w``) are loaded once for all of them (unroll-and-jam)."""
    buffer_prefix = ""
    index_type = "int64_t"
    supported_precs: ClassVar[frozenset[Prec]] = frozenset(Prec)
    storage_types: ClassVar[dict[Prec, str]] = {
        Prec.byte: "uint8_t",
        Prec.uint16: "uint16_t",
        Prec.int32: "int32_t",
        Prec.uint32: "uint32_t",
        Prec.int64: "int64_t",
        Prec.uint64: "uint64_t",
        Prec.half: "_Float16",
        Prec.bfloat16: "uint16_t",
        Prec.fp8: "uint8_t",
        Prec.single: "float",
        Prec.double: "double",
        Prec.uint4x32: "aj_u4",
    }
    int_math_type = "double"
    """Where integer ``pow`` and transcendental unary ops are computed."""
    prelude = C_PRELUDE
    math_dialect: ClassVar[math_lib.CDialect] = math_lib.C_DIALECT
    """How the math library's helpers (:mod:`~arrayjit_backends.codegen.math_lib`) are printed."""

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        # Names are numbered per routine, so identical routines render identical source (and
        # hit the compile cache) whatever the global ids of their symbols and nodes.
        self._temps = 0
        self._names: dict[Tnode, str] = {}
        self._syms: dict[Symbol | StaticSymbol, str] = {}
        self._locals: dict[L.ScopeId, str] = {}
        self._declared: set[L.ScopeId] = set()
        self._taken: set[str] = {"z"}  # the zero-fill loop's index
        self._math: dict[str, None] = {}
        """The math library's helpers the routine calls, in first-use order."""
        self._resident: dict[Tnode, tuple[str, int, bool]] = {}
        """Nodes held a row at a time in an array of the kernel while a row loop or chain
        renders: the array's name, how many leading axes are the row's, and whether stores
        also go to the node's buffer (:meth:`resident_rows`)."""

    def fresh_name(self, base: str) -> str:
        """A C identifier no other name of this routine has: ``base``, else ``base_<k>``.
        Every generated name goes through here (nodes, loop indices, locals, temporaries,
        static indices), so a user's label or static-symbol name can never collide with
        another; the ``aj_`` prefix stays reserved for the renderers' own helpers."""
        if base.startswith("aj_"):
            base = "u" + base
        name, k = base, 1
        while name in self._taken:
            name, k = f"{base}_{k}", k + 1
        self._taken.add(name)
        return name

    def temp(self, kind: str) -> str:
        """A fresh temporary's name, ``kind`` followed by a number."""
        self._temps += 1
        return self.fresh_name(f"{kind}{self._temps}")

    # ---- the math library ----

    def uses_math(self, name: str) -> bool:
        """Whether float32 code calls the math library's helper ``name`` (else the dialect's
        own function, e.g. where a helper needs double and the device has none)."""
        return True

    def math_call(self, name: str, *args: str) -> str:
        """A call of the math library's helper ``name``, recorded for :meth:`math_prelude`."""
        self._math[name] = None
        return f"{name}({', '.join(args)})"

    def math_prelude(self) -> str:
        """The definitions of the math library's helpers the routine rendered so far calls."""
        return math_lib.c_functions(tuple(self._math), self.math_dialect)

    # ---- types ----

    def compute_type(self, prec: Prec) -> str:
        """The C type arithmetic of ``prec`` runs in."""
        if prec in (Prec.half, Prec.bfloat16, Prec.fp8):
            return "float"
        return self.storage_types[prec]

    def load(self, prec: Prec, text: str) -> str:
        """Convert a stored value to its compute type."""
        match prec:
            case Prec.bfloat16:
                return f"aj_bf16_to_f32({text})"
            case Prec.fp8:
                return f"aj_fp8_to_f32({text})"
            case Prec.half:
                return f"((float){text})"
        return text

    def store(self, prec: Prec, text: str) -> str:
        """Convert a computed value to its storage type."""
        match prec:
            case Prec.bfloat16:
                return f"aj_f32_to_bf16({text})"
            case Prec.fp8:
                return f"aj_f32_to_fp8({text})"
            case Prec.half:
                return f"((_Float16)({text}))"
        return text

    def convert(self, text: str, src: Prec, dst: Prec) -> str:
        """A value of ``src``'s compute type as ``dst``'s compute type (C's cast, except for
        floats to integers, which saturate, and uint4x32: see the module docstring)."""
        ct = self.compute_type(dst)
        if src is Prec.uint4x32:
            return text if dst is Prec.uint4x32 else f"(({ct})({text}).v[0])"
        if dst is Prec.uint4x32:
            if src.is_float:
                text = f"aj_{self.compute_type(src)}_to_int64_t({text})"
            return f"aj_u4_of((uint64_t)(int64_t)({text}))"
        if src.is_float and not dst.is_float:
            return f"aj_{self.compute_type(src)}_to_{ct}({text})"
        return f"(({ct}){text})"

    def zero(self, prec: Prec) -> str:
        """The zero of ``prec``'s compute type."""
        return "(aj_u4){{0, 0, 0, 0}}" if prec is Prec.uint4x32 else "0"

    def uniform(self, bits: str, prec: Prec) -> str:
        """Random bits (``aj_u4``) as ``prec``: floats uniform in [0, 1) from the top
        mantissa-width bits of lane 0 (lanes 1:0 for double), integers from lane 0 (lanes 1:0 when
        64-bit). Small floats compute in float, so they take float's 24 bits and round when
        stored, as in the interpreter."""
        ct = self.compute_type(prec)
        if prec is Prec.uint4x32:
            return bits
        if ct == "double":
            return f"((double)(aj_u4_wide({bits}) >> 11) * 0x1p-53)"
        if ct == "float":
            return f"((float)(({bits}).v[0] >> 8) * 0x1p-24f)"
        if prec.byte_size == 8:
            return f"(({ct})aj_u4_wide({bits}))"
        return f"(({ct})({bits}).v[0])"

    # ---- names ----

    def name(self, tn: Tnode) -> str:
        """The identifier of a node's buffer."""
        if tn not in self._names:
            self._names[tn] = self.fresh_name(f"{tn.debug_name}_{len(self._names)}")
        return self._names[tn]

    def sym(self, s: Symbol | StaticSymbol) -> str:
        """The identifier of a loop index (``i<n>``) or a static index (its name)."""
        if s not in self._syms:
            base = s.name if isinstance(s, StaticSymbol) else f"i{len(self._syms)}"
            self._syms[s] = self.fresh_name(base)
        return self._syms[s]

    def declare(self, sc: L.ScopeId) -> str:
        """The declaration of local ``sc``, initialized to its start (-0.0 for floats, zero
        otherwise: :func:`~arrayjit_ir.low_level.local_start`); marks it declared."""
        self._declared.add(sc)
        ct = self.compute_type(sc.prec)
        start = self.const(L.local_start(sc.prec), ct) if sc.prec.is_float else self.zero(sc.prec)
        return f"{ct} {self.local(sc)} = {start};"

    def local(self, sc: L.ScopeId) -> str:
        if sc not in self._locals:
            self._locals[sc] = self.fresh_name(f"v{len(self._locals)}_{sc.tn.debug_name}")
        return self._locals[sc]

    def index(self, i: AxisIndex) -> str:
        """The C expression of an axis index (an affine one parenthesized)."""
        text = format_index(i, self.sym, " * ", " + ")
        return f"({text})" if isinstance(i, Affine) else text

    def offset(self, tn: Tnode, idx: tuple[AxisIndex, ...], first: int = 0) -> str:
        """Row-major offset of ``idx`` in ``tn``'s (padded) buffer; from axis ``first`` on
        (the offset within the block of cells the axes before it select)."""
        dims = tn.dims
        text = ""
        for k in range(first, len(idx)):
            part = self.index(idx[k])
            text = part if k == first else f"({text}) * {dims[k]} + {part}"
        return text or "0"

    @contextmanager
    def resident_rows(self, rows: Mapping[Tnode, tuple[str, int, bool]]) -> Iterator[None]:
        """While inside, each node of ``rows`` is read from and stored to a row held in an
        array of the kernel (:meth:`cell`, :meth:`assign`): ``(array name, leading axes that
        are the row's, whether stores also reach the node's buffer)``; the caller declared the
        arrays (a GPU row chain's local memory, :func:`~arrayjit_backends.gpu.row_chain.
        row_resident`; a CPU row loop's stack, :func:`~arrayjit_backends.codegen.row_plan.
        resident_rows`)."""
        self._resident.update(rows)
        try:
            yield
        finally:
            self._resident.clear()

    def cell(self, tn: Tnode, idx: tuple[AxisIndex, ...]) -> str:
        """The cell ``tn[idx]`` as an lvalue: an element of the node's buffer, or for a node
        held a row at a time (:meth:`resident_rows`), of the row's array (the row axes dropped
        from the offset)."""
        resident = self._resident.get(tn)
        if resident is None:
            return self._buffer_cell(tn, idx)
        name, k, _ = resident
        return f"{name}[{self.offset(tn, idx, k)}]"

    def _buffer_cell(self, tn: Tnode, idx: tuple[AxisIndex, ...]) -> str:
        return f"{self.name(tn)}[{self.offset(tn, idx)}]"

    def assign(self, tn: Tnode, idx: tuple[AxisIndex, ...], value: str) -> str:
        """The statement storing ``value`` (already in the storage type) into ``tn[idx]``; for
        a node held a row at a time, into the row, and also into the buffer unless the node
        lives only there."""
        resident = self._resident.get(tn)
        if resident is None or not resident[2]:
            return f"{self.cell(tn, idx)} = {value};"
        return f"{self.cell(tn, idx)} = {self._buffer_cell(tn, idx)} = {value};"

    # ---- expressions ----

    def const(self, v: float, ctype: str) -> str:
        if ctype in INT_CTYPES:  # the saturating rule, applied here
            bits, signed = INT_CTYPES[ctype]
            dtype = np.dtype(f"{'i' if signed else 'u'}{bits // 8}")
            return int_literal(int(ops.float_to_int(v, dtype)), ctype)
        if math.isnan(v):
            return f"(({ctype})NAN)"
        if math.isinf(v):
            return f"(({ctype})({'-' if v < 0 else ''}INFINITY))"
        if ctype in ("float", "double"):
            return f"(({ctype}){v!r})"
        return f"(({ctype}){int(v)})"

    def expr(self, e: L.Expr, prec: Prec, pre: list[str], indent: int) -> str:
        """Render ``e`` computed in ``prec``'s compute type; statements it needs first (local
        scopes) go to ``pre``."""
        ct = self.compute_type(prec)
        is_int = ct not in ("float", "double")
        if prec is Prec.uint4x32 and _lane_arithmetic(e):
            return f"aj_u4_of({self.expr(e, Prec.uint64, pre, indent)})"
        match e:
            case L.Get(tn=tn, indices=idx):
                cell = self.cell(tn, idx)
                return self.convert(self.load(tn.prec, cell), tn.prec, prec)
            case L.Get_merge_buffer(tn=tn, indices=idx):
                ptr = f"(({self.buffer_prefix}{self.storage_types[tn.prec]}*)merge_buffer)"
                cell = f"{ptr}[{self.offset(tn, idx)}]"
                return self.convert(self.load(tn.prec, cell), tn.prec, prec)
            case L.Get_local(scope=sc):
                return self.convert(self.local(sc), sc.prec, prec)
            case L.Local_scope(scope=sc, body=body):
                pre.append(self.declare(sc))
                out = Out()
                self.stmt(body, out, 0)
                pre.extend(out.lines)
                return self.convert(self.local(sc), sc.prec, prec)
            case L.Embed_index(index=i):
                return self.convert(f"({self.index(i)})", Prec.int64, prec)
            case L.Constant(value=v) if prec is Prec.uint4x32:
                return self.convert(self.const(v, "int64_t"), Prec.int64, prec)
            case L.Constant(value=v):
                return self.const(v, ct)
            case L.Constant_bits(value=v):
                return self.convert(f"{v}LL", Prec.int64, prec)
            case L.Binop(op=ops.Binop.threefry4x32, a=a, b=b):
                x = self.expr(a, Prec.uint4x32, pre, indent)
                y = self.expr(b, Prec.uint4x32, pre, indent)
                return self.convert(f"aj_threefry4x32({x}, {y})", Prec.uint4x32, prec)
            case L.Unop(op=ops.Unop.uint4x32_to_prec_uniform, a=a):
                return self.uniform(self.expr(a, Prec.uint4x32, pre, indent), prec)
            case L.Binop(op=op, a=a, b=b):
                x, y = self.expr(a, prec, pre, indent), self.expr(b, prec, pre, indent)
                if op in (ops.Binop.relu_gate, ops.Binop.satur01_gate):
                    x, y = self.hoist(x, ct, pre), self.hoist(y, ct, pre)
                return self.binop(op, x, y, ct, is_int)
            case L.Unop(op=op, a=a):
                x = self.expr(a, prec, pre, indent)
                if op in (ops.Unop.relu, ops.Unop.satur01):
                    x = self.hoist(x, ct, pre)  # read several times by the selection
                return self.unop(op, x, ct, is_int)
            case L.Ternop(op=ops.Ternop.where, a=c, b=b, c=d):
                cond = self.expr(c, natural_prec(c), pre, indent)
                if natural_prec(c) is Prec.uint4x32:
                    cond = f"aj_u4_any({cond})"
                x, y = self.expr(b, prec, pre, indent), self.expr(d, prec, pre, indent)
                x, y = self.hoist(x, ct, pre), self.hoist(y, ct, pre)
                return f"({cond} != 0 ? {x} : {y})"
            case L.Ternop(op=ops.Ternop.fma, a=a, b=b, c=c):
                x, y, z = (self.expr(t, prec, pre, indent) for t in (a, b, c))
                if is_int:
                    return self.binop(
                        ops.Binop.add, self.binop(ops.Binop.mul, x, y, ct, True), z, ct, True
                    )
                return f"fma{self._f(ct)}({x}, {y}, {z})"
        raise UsageError(f"the C renderer cannot render {type(e).__name__}")

    def reduction_step(self, red: ScalarReduction, acc: str, pre: list[str], indent: int) -> str:
        """The value of the accumulator ``acc`` after one step of ``red``: ``op(acc, term)``,
        or ``fma(x, w, acc)`` for a multiply-accumulate."""
        prec = red.target.tn.prec
        ct = self.compute_type(prec)
        if red.fused:
            assert isinstance(red.term, L.Binop)
            x = self.expr(red.term.a, prec, pre, indent)
            w = self.expr(red.term.b, prec, pre, indent)
            return f"fma{self._f(ct)}({x}, {w}, {acc})"
        term = self.expr(red.term, prec, pre, indent)
        return self.binop(red.op, acc, term, ct, ct not in ("float", "double"))

    def omp_reduction_op(self, op: ops.Binop, ct: str) -> str:
        """The OpenMP reduction identifier of accumulating with ``op`` in type ``ct``: float
        max and min use the NaN-propagating reductions the prelude declares, float sums the
        one whose private copies start at -0.0."""
        if ct in ("float", "double") and op in (ops.Binop.max, ops.Binop.min, ops.Binop.add):
            return f"aj_{op.value}"
        return REDUCTION_OPS[op]

    def hoist(self, text: str, ct: str, pre: list[str]) -> str:
        """Evaluate ``text`` into a temporary before the statement. Used for the operands of
        selections: both are pure, and loading them unconditionally lets compilers emit blends
        instead of conditional (masked) loads, which gcc 12 at -O3 was seen to get wrong."""
        name = self.temp("t")
        pre.append(f"const {ct} {name} = {text};")
        return name

    @staticmethod
    def _f(ct: str) -> str:
        return "f" if ct == "float" else ""

    def binop(self, op: ops.Binop, x: str, y: str, ct: str, is_int: bool) -> str:
        """C for ``op(x, y)`` in type ``ct``."""
        if is_int:
            signed = INT_CTYPES.get(ct, (0, False))[1]
            match op:
                case ops.Binop.add | ops.Binop.sub | ops.Binop.mul if signed:
                    # In unsigned arithmetic, which wraps in every C dialect: signed overflow
                    # is undefined in C, OpenCL C and CUDA (cc's -fwrapv covers cc alone).
                    return f"(({ct})((u{ct})({x}) {_WRAPPING[op]} (u{ct})({y})))"
                case ops.Binop.div if signed:  # -x in unsigned arithmetic: it wraps, no trap
                    return (
                        f"(({y}) == 0 ? ({ct})0 : ({y}) == -1 ? ({ct})(0 - (u{ct})({x})) : "
                        f"({ct})({x} / {y}))"
                    )
                case ops.Binop.mod if signed:
                    return f"(({y}) == 0 || ({y}) == -1 ? ({ct})0 : ({ct})({x} % {y}))"
                case ops.Binop.div:
                    return f"(({y}) == 0 ? ({ct})0 : ({ct})({x} / {y}))"
                case ops.Binop.mod:
                    return f"(({y}) == 0 ? ({ct})0 : ({ct})({x} % {y}))"
                case ops.Binop.max:
                    return f"({x} > {y} ? {x} : {y})"
                case ops.Binop.min:
                    return f"({x} < {y} ? {x} : {y})"
                case ops.Binop.pow:
                    mt = self.int_math_type
                    return f"aj_{mt}_to_{ct}(aj_ipow{self._f(mt)}(({mt}){x}, ({mt}){y}))"
        fn = math_lib.BINOP_FUNCTIONS.get(op)
        if ct == "float" and fn is not None and self.uses_math(fn):
            return self.math_call(fn, x, y)
        if op in (ops.Binop.cmplt, ops.Binop.cmpeq, ops.Binop.cmpne, ops.Binop.or_, ops.Binop.and_):
            return f"(({ct}){ops.C_BINOP[op].format(x, y)})"
        return f"(({ct}){ops.C_BINOP[op].format(x, y, f=self._f(ct))})"

    def unop(self, op: ops.Unop, x: str, ct: str, is_int: bool) -> str:
        """C for ``op(x)`` in type ``ct``."""
        if is_int:
            match op:
                case ops.Unop.recip:
                    return f"(({x}) == 0 ? ({ct})0 : ({ct})(1 / {x}))"
                case ops.Unop.trunc:
                    return x
                case ops.Unop.neg if INT_CTYPES.get(ct, (0, False))[1]:
                    return f"(({ct})(0 - (u{ct})({x})))"  # -INT_MIN wraps (see binop)
                case (
                    ops.Unop.relu
                    | ops.Unop.satur01
                    | ops.Unop.neg
                    | ops.Unop.not_
                    | (ops.Unop.identity)
                ):
                    pass
                case _:  # computed in floating point, converted by the saturating rule
                    mt = self.int_math_type
                    form = "aj_ilog2{f}({0})" if op is ops.Unop.log2 else ops.C_UNOP[op]
                    inner = form.format(f"(({mt}){x})", f=self._f(mt))
                    return f"aj_{mt}_to_{ct}({inner})"
        fn = math_lib.UNOP_FUNCTIONS.get(op)
        if ct == "float" and fn is not None and self.uses_math(fn):
            return self.math_call(fn, x)
        return f"(({ct}){ops.C_UNOP[op].format(x, f=self._f(ct))})"

    # ---- statements ----

    def stmt(self, s: L.Stmt, out: Out, indent: int) -> None:
        match s:
            case L.Noop():
                pass
            case L.Comment(text=t):
                out.add(indent, f"/* {t.replace('*/', '* /')} */")
            case L.Seq(stmts=stmts):
                for x in stmts:
                    self.stmt(x, out, indent)
            case L.For_loop() if self.simd_reduction_pragma and (red := scalar_reduction(s)):
                self.reduction(red, out, indent)
            case L.For_loop() if indent == 1 and self.jammable(s):
                self.jam(s, out, indent)
            case L.For_loop(body=body):
                local = local_sum(s) if self.simd_pays(s) else None
                if local is not None:  # float sums: lanes start at -0.0 (omp_reduction_op)
                    op, scope = local
                    omp_op = self.omp_reduction_op(op, self.compute_type(scope.prec))
                    pragma = self.simd_reduction_pragma.format(op=omp_op, var=self.local(scope))
                    out.add(indent, pragma)
                out.add(indent, self.loop_header(s))
                self.stmt(body, out, indent + 1)
                out.add(indent, "}")
            case L.Zero_out(tn=tn):
                zero = self.zero(tn.prec)
                out.add(
                    indent,
                    f"for (int64_t z = 0; z < {tn.num_elems}; ++z) {self.name(tn)}[z] = {zero};",
                )
            case L.Set() if self.simd_reduction_pragma and (red := scalar_reduction(s)):
                self.reduction(red, out, indent)  # a float32 accumulator
            case L.Set(tn=tn, indices=idx, value=v):
                pre: list[str] = []
                val = self.expr(v, tn.prec, pre, indent)
                line = self.assign(tn, idx, self.store(tn.prec, val))
                self._emit(out, indent, pre, line)
            case L.Set_local(scope=sc, value=v):
                if sc not in self._declared:  # a local hoisted out of its scope by CSE
                    out.add(indent, self.declare(sc))
                pre = []
                val = self.expr(v, sc.prec, pre, indent)
                if rounds_when_stored(sc.prec):  # a virtual node's value rounds as stored
                    val = self.load(sc.prec, self.store(sc.prec, val))
                self._emit(out, indent, pre, f"{self.local(sc)} = {val};")
            case _:
                raise UsageError(f"the C renderer cannot render {type(s).__name__}")

    def simd_pays(self, loop: L.For_loop) -> bool:
        """Whether an innermost reduction loop gets :attr:`simd_reduction_pragma`."""
        trip = loop.to_inclusive - loop.from_ + 1
        return bool(self.simd_reduction_pragma) and (
            trip >= self.simd_min_trip or trip % self.simd_width == 0
        )

    def jammable(self, loop: L.For_loop) -> bool:
        """Whether a top-level loop runs unroll-and-jammed (:attr:`jam_factor`)."""
        if self.jam_factor < 2 or loop_work(loop) < PARALLEL_MIN_WORK:
            return False
        extent = loop.to_inclusive - loop.from_ + 1
        depth, body, inner = 1, loop.body, loop
        while isinstance(body, L.For_loop):
            depth, inner, body = depth + 1, body, body.body
        return (
            depth >= 3
            and isinstance(body, L.Set)
            and extent % self.jam_factor == 0
            and (
                any(inner.index in index_symbols(i) for i in body.indices)
                or (bool(self.simd_reduction_pragma) and self._inner_reduction(loop) is not None)
            )
            and is_parallel_loop(loop)
        )

    def _inner_reduction(self, loop: L.For_loop) -> tuple[list[L.For_loop], ScalarReduction] | None:
        """The loops of ``loop``'s perfect nest above an inner loop nest that accumulates into
        one cell (a :class:`ScalarReduction`: a convolution's or a transposed matmul's
        reduction loops, innermost), and that reduction; None when there is none."""
        opened: list[L.For_loop] = []
        body: L.Stmt = loop.body
        while isinstance(body, L.For_loop):
            red = scalar_reduction(body)
            if red is not None:
                return opened, red
            opened.append(body)
            body = body.body
        return None

    def jam(
        self, loop: L.For_loop, out: Out, indent: int, bounds: tuple[str, str] | None = None
    ) -> None:
        """Unroll-and-jam a parallel loop (see :attr:`jam_factor`): its iterations are
        independent, so running ``jam_factor`` of them side by side in the innermost body is
        equivalent. (Tiling the innermost loop on top was measured slower on a 1024 matmul.)
        ``bounds``: as for :meth:`loop_header` (a multiple of the factor apart)."""
        v, step = self.sym(loop.index), self.jam_factor
        inner = self._inner_reduction(loop) if self.simd_reduction_pragma else None
        if inner is not None:
            self._jam_reduction(loop, inner[0], inner[1], out, indent, bounds)
            return
        out.add(indent, self.loop_header(loop, step, bounds))
        depth, body = indent + 1, loop.body
        opened = []
        while isinstance(body, L.For_loop):
            out.add(depth, self.loop_header(body))
            opened.append(depth)
            depth, body = depth + 1, body.body
        for u in range(step):
            self._syms[loop.index] = f"({v} + {u})"
            self.stmt(body, out, depth)
        self._syms[loop.index] = v
        for d in reversed(opened):
            out.add(d, "}")
        out.add(indent, "}")

    def _jam_reduction(
        self,
        loop: L.For_loop,
        opened: list[L.For_loop],
        red: ScalarReduction,
        out: Out,
        indent: int,
        bounds: tuple[str, str] | None,
    ) -> None:
        """:meth:`jam` of a nest whose inner loops reduce into one cell per iteration of the
        others: each of the ``jam_factor`` iterations keeps its cell in a register of its own,
        the reduction loops run once for all of them (operands that do not depend on ``loop``
        loaded once), the innermost vectorized and reassociated as :meth:`reduction` does, and
        each register is stored once."""
        v, step = self.sym(loop.index), self.jam_factor
        tn, idx = red.target.tn, red.target.indices
        ct = self.compute_type(tn.prec)
        out.add(indent, self.loop_header(loop, step, bounds))
        depth = indent + 1
        for lp in opened:
            out.add(depth, self.loop_header(lp))
            depth += 1
        accs = [self.temp("acc") for _ in range(step)]
        for u, acc in enumerate(accs):
            self._syms[loop.index] = f"({v} + {u})"
            out.add(depth, f"{ct} {acc} = (({ct}){self.load(tn.prec, self.cell(tn, idx))});")
        op = self.omp_reduction_op(red.op, ct)
        lanes = not has_loops(red.term)
        inner = depth
        for k, lp in enumerate(red.loops):
            if k == len(red.loops) - 1 and lanes and self.simd_pays(lp):
                out.add(inner, self.simd_reduction_pragma.format(op=op, var=", ".join(accs)))
            out.add(inner, self.loop_header(lp))
            inner += 1
        for u, acc in enumerate(accs):
            self._syms[loop.index] = f"({v} + {u})"
            pre: list[str] = []
            self._emit(out, inner, pre, f"{acc} = {self.reduction_step(red, acc, pre, inner)};")
        for _ in red.loops:
            inner -= 1
            out.add(inner, "}")
        for u, acc in enumerate(accs):
            self._syms[loop.index] = f"({v} + {u})"
            out.add(depth, self.assign(tn, idx, self.store(tn.prec, acc)))
        self._syms[loop.index] = v
        for _ in opened:
            depth -= 1
            out.add(depth, "}")
        out.add(indent, "}")

    def reduction(self, red: ScalarReduction, out: Out, indent: int) -> None:
        """A loop nest accumulating into one cell, with the cell in a register."""
        tn, idx = red.target.tn, red.target.indices
        ct = self.compute_type(tn.prec)
        cell = self.cell(tn, idx)
        acc = self.temp("acc")
        out.add(indent, "{")
        out.add(indent + 1, f"{ct} {acc} = (({ct}){self.load(tn.prec, cell)});")
        self.accumulate(red, acc, out, indent + 1)
        out.add(indent + 1, self.assign(tn, idx, self.store(tn.prec, acc)))
        out.add(indent, "}")

    def accumulate(
        self,
        red: ScalarReduction,
        acc: str,
        out: Out,
        indent: int,
        bounds: tuple[str, str] | None = None,
    ) -> None:
        """``red``'s loop nest taking each step into the local ``acc`` (its innermost loop
        vectorized, reassociated, where the renderer has :attr:`simd_reduction_pragma`);
        ``bounds``: the outer loop's range, as for :meth:`loop_header`."""
        op = self.omp_reduction_op(red.op, self.compute_type(red.target.tn.prec))
        lanes = not has_loops(red.term)  # the top of a blocked sum: its blocks vectorize
        depth = indent
        for k, lp in enumerate(red.loops):
            if k == len(red.loops) - 1 and lanes and self.simd_pays(lp):
                out.add(depth, self.simd_reduction_pragma.format(op=op, var=acc))
            out.add(depth, self.loop_header(lp, 1, bounds if k == 0 else None))
            depth += 1
        pre: list[str] = []
        step = self.reduction_step(red, acc, pre, depth)
        self._emit(out, depth, pre, f"{acc} = {step};")
        for _ in red.loops:
            depth -= 1
            out.add(depth, "}")

    def loop_header(
        self, loop: L.For_loop, step: int = 1, bounds: tuple[str, str] | None = None
    ) -> str:
        """``for (...) {`` over ``loop``'s range, ``step`` iterations at a time; ``bounds``:
        over ``[start, stop)`` instead (C expressions, e.g. a segment's parameters)."""
        v = self.sym(loop.index)
        advance = f"++{v}" if step == 1 else f"{v} += {step}"
        if bounds is not None:
            start, stop = bounds
            return f"for ({self.index_type} {v} = {start}; {v} < {stop}; {advance}) {{"
        lo, hi = loop.from_, loop.to_inclusive
        return f"for ({self.index_type} {v} = {lo}; {v} <= {hi}; {advance}) {{"

    def _emit(self, out: Out, indent: int, pre: list[str], line: str) -> None:
        if not pre:
            out.add(indent, line)
            return
        out.add(indent, "{")
        for p in pre:
            out.add(indent + 1, p)
        out.add(indent + 1, line)
        out.add(indent, "}")

    # ---- the function ----

    def check_precisions(self, opt: Optimized) -> None:
        """Raise :class:`UsageError` naming a node whose precision this renderer lacks."""
        for tn in opt.traced:
            if tn.prec not in self.supported_precs:
                raise UsageError(
                    f"routine {opt.name}: node {tn.debug_label} has precision {tn.prec}, which "
                    f"the {type(self).__name__} renderer does not support"
                )

    def parameters(self, params: KernelParams, scratch: tuple[Tnode, ...] = ()) -> list[str]:
        """The kernel's C parameters: the buffers, the merge buffer if read, ``scratch`` (more
        node buffers), then the static indices."""
        args = [
            f"{self.buffer_prefix}{self.storage_types[tn.prec]} *restrict {self.name(tn)}"
            for tn in params.buffers
        ]
        if params.merge_node is not None:
            args.append(f"{self.buffer_prefix}const void *restrict merge_buffer")
        args += [f"{self.storage_types[tn.prec]} *restrict {self.name(tn)}" for tn in scratch]
        return args + [f"{self.index_type} {self.sym(s)}" for s in params.static_symbols]

    def declare_node(self, tn: Tnode, zero: bool, out: Out, indent: int) -> None:
        """A kernel-local node as an array of the function (zero-filled when ``zero``)."""
        init = " = {0}" if zero else ""
        out.add(
            indent, f"{self.storage_types[tn.prec]} {self.name(tn)}[{max(tn.num_elems, 1)}]{init};"
        )
