"""LLVM IR from optimized low-level IR: the renderer of the ``llvm`` backend.

The generated code computes what the shared C renderer's code computes
(:mod:`arrayjit_backends.codegen.c_syntax`) and what the reference interpreter computes: a stored
value is evaluated in the compute type of the node it is stored into (half, bfloat16 and fp8 compute
in float and round to nearest-even when stored); ``where``'s condition in its own natural precision;
integers wrap; integer division and remainder by zero give 0 (and ``x / -1`` is ``-x``, never a
trap); a float converted to an integer saturates (``llvm.fptosi.sat``/``llvm.fptoui.sat``: NaN
gives 0, values beyond the range its nearest end, others truncate toward zero), as integer ops
computed in double do. Float arithmetic is IEEE (no fast-math or contraction flags), math
functions are LLVM intrinsics, except the float32 transcendentals, which call the math
library's helpers (:mod:`arrayjit_backends.codegen.math_lib`, the steps the C renderers
print); float ``max``/``min`` are ``llvm.maximum``/``llvm.minimum`` (NaN propagates).

Reductions into one cell or one local may be reassociated, as OpenMP's ``simd reduction``
clause allows the cc backend, and nothing more: their steps carry ``reassoc`` alone (never
``nnan``, ``ninf`` or ``nsz``), and the vector lanes of a float sum start at -0.0. A
multiply-accumulate step ``fma(x, w, acc)`` is ``llvm.fmuladd`` where the target fuses a
multiply-add in hardware (:attr:`LlvmGen.fused_mul_add`): LLVM's loop vectorizer takes that
intrinsic as a reduction and not ``llvm.fma`` (a scalar fma chain ran a layer norm's variance
10x slower than cc's), and on such a target code generation fuses it, one rounding per step as
``llvm.fma`` would give. Elsewhere the step stays ``llvm.fma``, scalar.

A routine becomes one LLVM function per *segment* of its top-level statements: each top-level loop
whose iterations write disjoint cells and do at least :data:`~arrayjit_backends.codegen.kernel_plan.
PARALLEL_MIN_WORK` innermost iterations is a parallel segment, taking the extra parameters
``(start, stop)`` (a half-open range of its loop), which the backend splits across threads; the
statements between them form serial segments. Every segment function takes, of the routine's
parameters, those it uses (:attr:`~arrayjit_backend_c.cpu.segments.Segment.args`), in their
order: the context nodes' buffers it touches (in
:func:`~arrayjit_backends.codegen.kernel_plan.kernel_params` order), the merge buffer if the routine
reads it, the scratch buffers it touches (kernel-local nodes too large for the stack or used by
several segments), then the static indices as ``i64``. Buffer parameters are ``noalias``: nodes
never share memory.

Values, blocks and helpers are numbered per routine, so the same routine generates the same IR
(and hits the compile cache) whatever the global ids of its symbols and nodes.

:class:`LlvmGen` walks the routine; the instructions of one scalar operation come from its base
:class:`~arrayjit_backend_c.llvm.scalar.ScalarGen`, types and literals from
:mod:`~arrayjit_backend_c.llvm.ir_types`, helper functions from
:mod:`~arrayjit_backend_c.llvm.helpers`, and the segments from
:mod:`~arrayjit_backend_c.cpu.segments`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import ClassVar

import numpy as np

from arrayjit_backend_c.cpu.matmul import CpuMatmul
from arrayjit_backend_c.cpu.segments import (
    Arg,
    Segment,
    SegmentedKernel,
    SegmentPlan,
    plan_segments,
    task_arguments,
)
from arrayjit_backend_c.llvm import matmul as llvm_matmul
from arrayjit_backend_c.llvm.helpers import HELPERS
from arrayjit_backend_c.llvm.ir_types import (
    I64,
    U64,
    VEC,
    Ty,
    compute_type,
    const,
    fconst,
    iconst,
    ident,
)
from arrayjit_backend_c.llvm.scalar import Fn, ScalarGen
from arrayjit_backends.codegen.kernel_plan import (
    ScalarReduction,
    accumulation_step,
    local_sum,
    scalar_reduction,
)
from arrayjit_ir import low_level as L
from arrayjit_ir import ops
from arrayjit_ir.indexing import Affine, AxisIndex, Fixed_idx, Iterator, StaticSymbol, Symbol
from arrayjit_ir.low_level import natural_prec, rounds_when_stored
from arrayjit_ir.optimized import Optimized
from arrayjit_tnode import Prec, Tnode, UsageError


class LlvmGen(ScalarGen):
    """Generates the LLVM module of a routine (see the module docstring)."""

    supported_precs: ClassVar[frozenset[Prec]] = frozenset(Prec)

    def __init__(
        self,
        target_cpu: str = "",
        target_features: str = "",
        native_half: bool = False,
        fused_mul_add: bool | None = None,
    ) -> None:
        """``native_half``: convert half with LLVM's ``half`` type (hardware conversions where
        the target has them, e.g. x86 F16C); else with integer code, like bfloat16 and fp8.
        ``fused_mul_add``: see :attr:`fused_mul_add` (default: whether ``target_features``
        has x86's ``+fma``)."""
        self.target_cpu = target_cpu
        self.target_features = target_features
        self.native_half = native_half
        if fused_mul_add is None:
            fused_mul_add = "+fma" in target_features.split(",")
        self.fused_mul_add = fused_mul_add
        """The target fuses a multiply-add in hardware (x86 FMA, AArch64): a reduction's
        multiply-accumulate steps are ``llvm.fmuladd``, which vectorizes (module docstring)."""
        self._reset()

    def _reset(self) -> None:
        self._loop_meta: list[str] = []
        """Metadata nodes of the module (loops kept whole: :meth:`loop`)."""
        self._decls: dict[str, None] = {}
        self._helpers: dict[str, None] = {}
        self._names: dict[Tnode, str] = {}
        self._fn = Fn()
        self._ptrs: dict[Tnode, str] = {}
        self._rows: set[Tnode] = set()
        """Nodes held a row at a time in an array of the function (their ``_ptrs``): the
        offset drops the first axis (:meth:`_row_arrays`)."""
        self._syms: dict[Symbol | StaticSymbol, str] = {}
        self._locals: dict[L.ScopeId, str] = {}
        self._merge = "null"
        self._stored: tuple[Tnode, tuple[AxisIndex, ...]] | None = None
        self._mm_helpers: dict[str, str] = {}

    # ---- names and indices ----

    def name(self, tn: Tnode) -> str:
        """The IR name of a node's buffer pointer."""
        if tn not in self._names:
            self._names[tn] = f"%n.{ident(tn.debug_name)}_{len(self._names)}"
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
        """The address of ``tn[idx]`` (row-major in its padded dims) from ``base``; for a node
        held a row at a time, of the cell in its row array (the first axis dropped)."""
        first = 1 if tn in self._rows else 0
        off: int | str = 0
        for k in range(first, len(idx)):
            part = self.index(idx[k])
            off = part if k == first else self._iadd(self._imul(off, tn.dims[k]), part)
        st = self.storage_type(tn.prec)
        return self._fn.tmp(f"getelementptr inbounds {st}, ptr {base}, i64 {off}")

    def _load(self, base: str, tn: Tnode, idx: tuple[AxisIndex, ...], ty: Ty) -> str:
        p = self._elem_ptr(base, tn, idx)
        st = self.storage_type(tn.prec)
        raw = self._fn.tmp(f"load {st}, ptr {p}, align {self.align(tn.prec)}")
        if self._stored == (tn, idx):
            # The cell the statement stores into: x86 code generation turns a store of
            # select(c, <this load>, v) back into its cell into a masked store of v, and masked
            # stores are microcoded on AMD (in-place relu 2^20: 0.68 ms instead of 0.1).
            # A freeze (no instruction) hides the load from that rewrite.
            raw = self._fn.tmp(f"freeze {st} {raw}")
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
                return self.cast(bits, VEC, ty)
            case L.Unop(op=ops.Unop.uint4x32_to_prec_uniform, a=a):
                return self.uniform(self.expr(a, Prec.uint4x32), ty)
            case L.Binop() | L.Unop() | L.Ternop(op=ops.Ternop.fma) if ty is VEC:
                return self.cast(self.expr(e, Prec.uint64), U64, VEC)
            case L.Get(tn=tn, indices=idx):
                return self._load(self._ptr(tn), tn, idx, ty)
            case L.Get_merge_buffer(tn=tn, indices=idx):
                return self._load(self._merge, tn, idx, ty)
            case L.Get_local(scope=sc):
                lty = compute_type(sc.prec)
                v = f.tmp(f"load {lty.ll}, ptr {self._local(sc)}")
                return self.cast(v, lty, ty)
            case L.Local_scope(scope=sc, body=body):
                lty = compute_type(sc.prec)
                ptr = self._local(sc)
                f.do(f"store {lty.ll} {const(L.local_start(sc.prec), lty)}, ptr {ptr}")
                self.stmt(body)
                v = f.tmp(f"load {lty.ll}, ptr {ptr}")
                return self.cast(v, lty, ty)
            case L.Embed_index(index=i):
                return self.cast(str(self.index(i)), I64, ty)
            case L.Constant(value=v):
                return const(v, ty)
            case L.Constant_bits(value=v):
                return self.cast(iconst(v, 64), I64, ty)
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

    # ---- statements ----

    def _local(self, sc: L.ScopeId) -> str:
        if sc not in self._locals:
            name = f"%v.{len(self._locals)}_{ident(sc.tn.debug_name)}"
            self._fn.allocas.append(f"  {name} = alloca {compute_type(sc.prec).ll}")
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
            case L.For_loop() | L.Set() if (red := scalar_reduction(s)) is not None:
                self.reduction(red)  # (a Set: a float32 accumulator of a small-float cell)
            case L.For_loop(index=i, from_=lo, to_inclusive=hi, body=L.Set_local() as step) if (
                local := local_sum(s)
            ) is not None:
                # An inlined sum's loop (a block of a blocked sum): reassociated, so it
                # vectorizes, as the cc backend's ``omp simd`` reduction does.
                op = local[0]
                # Kept a loop (not fully unrolled): unrolled, its enclosing loop of blocks
                # became the innermost and was vectorized across blocks, with scalar loads
                # from 64 rows (a 4096x4096 row sum ran 3x slower than cc's).
                if lo <= hi:
                    step_fn = lambda: self._local_step(op, step)  # noqa: E731
                    width = self._interleave(hi - lo + 1)
                    self.loop(i, str(lo), str(hi + 1), step_fn, False, True, width)
            case L.For_loop(index=i, from_=lo, to_inclusive=hi, body=body):
                if lo <= hi:
                    self.loop(i, str(lo), str(hi + 1), lambda: self.stmt(body), guard=False)
            case L.Zero_out(tn=tn) if tn.num_elems > 0:  # an empty node owns no bytes
                self._memset(self._ptr(tn), tn.num_elems * tn.prec.byte_size)
            case L.Zero_out():
                pass
            case L.Set(tn=tn, indices=idx, value=v):
                # Not for an accumulation (cell op term): a freeze in its chain would hide the
                # reduction from the vectorizer, and it selects nothing.
                accumulates = accumulation_step(v, L.Get(tn, idx)) is not None
                self._stored = None if accumulates else (tn, idx)
                try:
                    val = self._store_conv(tn.prec, self.expr(v, tn.prec))
                finally:
                    self._stored = None
                p = self._elem_ptr(self._ptr(tn), tn, idx)
                f.do(
                    f"store {self.storage_type(tn.prec)} {val}, ptr {p}, align {tn.prec.byte_size}"
                )
            case L.Set_local(scope=sc, value=v):
                val = self.expr(v, sc.prec)
                if rounds_when_stored(sc.prec):  # a virtual node's value rounds as stored
                    val = self._load_conv(sc.prec, self._store_conv(sc.prec, val))
                f.do(f"store {compute_type(sc.prec).ll} {val}, ptr {self._local(sc)}")
            case _:
                raise UsageError(f"the LLVM generator cannot generate {type(s).__name__}")

    def _local_step(self, op: ops.Binop, s: L.Set_local) -> None:
        """``local = local op term`` or, for a multiply-accumulate, ``local = fma(x, w,
        local)`` (a :func:`~arrayjit_backends.codegen.kernel_plan.local_sum` loop's body),
        reassociable."""
        ty, prec = compute_type(s.scope.prec), s.scope.prec
        ptr = self._local(s.scope)
        acc = self._fn.tmp(f"load {ty.ll}, ptr {ptr}")
        match s.value:
            case L.Ternop(op=ops.Ternop.fma, a=x, b=w):
                new = self._mul_acc(self.expr(x, prec), self.expr(w, prec), acc, ty)
            case L.Binop(b=term):
                new = self._reduce(op, acc, self.expr(term, prec), ty, True)
            case _:
                raise AssertionError(f"not an inlined sum's step: {s.value!r}")
        self._fn.do(f"store {ty.ll} {new}, ptr {ptr}")

    def loop(
        self,
        sym: Symbol,
        lo: str,
        stop: str,
        body: Callable[[], None],
        guard: bool,
        keep: bool = False,
        interleave: int = 0,
    ) -> None:
        """``for sym in [lo, stop): body()`` as a bottom-tested loop (guarded when the bounds are
        not known to be non-empty); ``keep``: never unrolled by LLVM (it stays the innermost
        loop, the one the loop vectorizer vectorizes); ``interleave``: when at least 2, the
        loop vectorizer's interleave count for it (that many vector accumulators)."""
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
        hints = ['!{!"llvm.loop.unroll.disable"}'] if keep else []
        if interleave >= 2:
            hints.append(f'!{{!"llvm.loop.interleave.count", i32 {interleave}}}')
        meta = ""
        if hints:
            node = f"!{len(self._loop_meta)}"
            self._loop_meta.append(f"{node} = distinct !{{{node}, {', '.join(hints)}}}")
            meta = f", !llvm.loop {node}"
        f.do(f"br i1 {c}, label %{head}, label %{done}{meta}")
        f.lines[phi_at] = f"  {iv} = phi i64 [ {lo}, %{pre} ], [ {nxt}, %{f.block} ]"
        f.start(done)

    # ---- reductions into one cell ----

    def _reduce(self, op: ops.Binop, acc: str, x: str, ty: Ty, reassoc: bool) -> str:
        """``op(acc, x)``; with ``reassoc`` a float op may be reassociated (vectorized), as
        OpenMP's reduction clause allows the cc backend."""
        flags = "reassoc " if reassoc and ty.is_float else ""
        match op:
            case ops.Binop.add | ops.Binop.mul if ty.is_float:
                return self._fn.tmp(f"f{op.value} {flags}{ty.ll} {acc}, {x}")
            case ops.Binop.max | ops.Binop.min if ty.is_float:
                return self._intrinsic(f"{op.value}imum", ty, acc, x, flags=flags)
        return self.binop(op, acc, x, ty)

    reduction_interleave: ClassVar[int] = 4
    """The vector accumulators of an innermost reduction loop of at least
    :attr:`interleave_min_trip` iterations: LLVM's cost model gave one, and a chain of
    dependent vector adds or fmas ran at their latency."""
    interleave_min_trip: ClassVar[int] = 256

    def _interleave(self, trip: int) -> int:
        """The interleave count of an innermost reduction loop of ``trip`` iterations (0: the
        vectorizer's choice)."""
        return self.reduction_interleave if trip >= self.interleave_min_trip else 0

    def _mul_acc(self, x: str, w: str, acc: str, ty: Ty) -> str:
        """A reduction's multiply-accumulate step ``fma(x, w, acc)``, reassociable: with
        :attr:`fused_mul_add`, ``llvm.fmuladd`` (the form the loop vectorizer takes as a
        reduction; fused by code generation on such a target), else ``llvm.fma``."""
        if not ty.is_float:
            return self._fn.tmp(f"add {ty.ll} {self._fn.tmp(f'mul {ty.ll} {x}, {w}')}, {acc}")
        name = "fmuladd" if self.fused_mul_add else "fma"
        return self._intrinsic(name, ty, x, w, acc, flags="reassoc ")

    def _identity(self, op: ops.Binop, ty: Ty) -> str:
        """The value each chunk of a parallel reduction starts from (-0.0 for float sums:
        :func:`~arrayjit_ir.ops.partial_start`)."""
        match op:
            case ops.Binop.add | ops.Binop.mul:
                return const(ops.partial_start(op, ty.is_float), ty)
        low = op is ops.Binop.max
        if ty.is_float:
            return fconst(-np.inf if low else np.inf, ty)
        if ty.signed:
            return iconst(-(1 << (ty.bits - 1)) if low else (1 << (ty.bits - 1)) - 1, ty.bits)
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
                    new = self._mul_acc(x, w, a, ty)
                else:
                    new = self._reduce(red.op, a, self.expr(red.term, prec), ty, True)
                self._fn.do(f"store {ty.ll} {new}, ptr {acc}")
                return
            lp = loops[k]
            lo, stop = first if k == 0 else (str(lp.from_), str(lp.to_inclusive + 1))
            inner = k == len(loops) - 1 and not (k == 0 and first[0].startswith("%"))
            width = self._interleave(lp.to_inclusive - lp.from_ + 1) if inner else 0
            self.loop(lp.index, lo, stop, lambda: nest(k + 1), k == 0, interleave=width)

        nest(0)

    def _acc_local(self, ty: Ty) -> str:
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

    def generate(self, opt: Optimized, fn_name: str) -> SegmentedKernel:
        """The LLVM module of a routine; its functions are ``{fn_name}_{k}``, one a segment."""
        self.check_precisions(opt)
        self._reset()
        plan = plan_segments(opt, rows=True)
        params, groups, scratch = plan.params, plan.groups, plan.scratch
        args = [f"ptr noalias {self.name(tn)}" for tn in params.buffers]
        if params.merge_node is not None:
            args.append("ptr noalias readonly %merge_buffer")
        args += [f"ptr noalias {self.name(tn)}" for tn in scratch]
        args += [f"i64 %sym.{s.name}" for s in params.static_symbols]
        syms: dict[Symbol | StaticSymbol, str] = {
            s: f"%sym.{s.name}" for s in params.static_symbols
        }
        functions: list[str] = []
        segments: list[Segment] = []

        def function(name: str, extra: list[str], k: int, body: Callable[[], None]) -> None:
            self._fn = Fn()
            self._locals = {}
            self._syms = dict(syms)
            self._ptrs = {tn: self.name(tn) for tn in plan.arg_nodes(k)}
            self._rows = set()
            self._merge = "%merge_buffer" if params.merge_node is not None else "null"
            for tn in plan.stack_nodes(k):
                self._stack_node(tn, opt.traced[tn].zero_initialized_by_code)
            for tn in plan.zeroed_scratch(k):
                self._memset(self.name(tn), tn.num_elems * tn.prec.byte_size)
            body()
            self._fn.do("ret void")
            mine = [args[i] for i in plan.args[k]]
            functions.append(
                f"define void @{name}({', '.join(mine + extra)}) #0 {{\nentry:\n"
                + "\n".join(self._fn.allocas + self._fn.lines)
                + "\n}"
            )

        for k, g in enumerate(groups):
            name = f"{fn_name}_{k}"
            if isinstance(g, list):
                segments.append(Segment(name, args=plan.args[k]))
                function(name, [], k, functools.partial(self._serial, g, plan))
                continue
            mm = plan.matmul(g)
            if mm is not None and isinstance(g, L.For_loop):
                segments.append(Segment(name, g, None, mm, args=plan.args[k]))
                if mm.suffix not in self._mm_helpers:
                    # The same text and declarations for every matmul of a suffix (rendering
                    # them per matmul took a third of a 64-layer MLP's generation, issue 38).
                    text, decls = llvm_matmul.helpers(mm)
                    self._mm_helpers[mm.suffix] = text
                    self._decls.update(dict.fromkeys(decls))
                extra = ["i64 %start", "i64 %stop", "ptr noalias %mmbuf"]
                function(name, extra, k, functools.partial(self._matmul, mm))
                continue
            red = scalar_reduction(g)
            # A Set is the float32 accumulator of a small-float cell: always a reduction.
            loop = g if isinstance(g, L.For_loop) else red.loops[0] if red else None
            seg = Segment(name, loop, red, args=plan.args[k])
            segments.append(seg)
            if red is None:
                assert isinstance(g, L.For_loop)
                start_stop = ["i64 %start", "i64 %stop"]
                body = functools.partial(self._parallel_loop, g, plan.resident(g))
                function(name, start_stop, k, body)
            else:
                chunk = ["i64 %start", "i64 %stop", "ptr noalias %partials", "i64 %slot"]
                function(name, chunk, k, functools.partial(self._partial_reduction, red))
                combine = ["ptr noalias readonly %partials", "i64 %count"]
                function(seg.combine_name, combine, k, functools.partial(self._combine, red))
        functions += [
            task_function(seg, task_arguments(seg, params, scratch))
            for seg in segments
            if seg.parallel
        ]
        attrs = f'"target-cpu"="{self.target_cpu}" "target-features"="{self.target_features}"'
        ir = "\n".join(
            [
                f"; routine {opt.name}",
                *self._decls,
                *functions,
                *(HELPERS[h] for h in self._helpers),
                *self._mm_helpers.values(),
                f'attributes #0 = {{ nounwind "no-trapping-math"="true" {attrs} }}',
                f"attributes #1 = {{ alwaysinline nounwind {attrs} }}",
                *self._loop_meta,
                "",
            ]
        )
        return SegmentedKernel(ir, params, scratch, tuple(segments))

    def _serial(self, stmts: list[L.Stmt], plan: SegmentPlan) -> None:
        for x in stmts:
            self._row_arrays(plan.resident(x))
            self.stmt(x)

    def _row_arrays(self, held: Sequence[Tnode]) -> None:
        """An array of one row of each node a row loop holds a row at a time
        (:meth:`~arrayjit_backend_c.cpu.segments.SegmentPlan.resident`), allocated at the
        function's entry: the loop's iterations reuse it, and the node has no buffer."""
        for tn in held:
            name = f"{self.name(tn)}.row"
            cells = max(math.prod(tn.dims[1:]), 1)
            self._fn.allocas.append(
                f"  {name} = alloca [{cells} x {self.storage_type(tn.prec)}], align 64"
            )
            self._ptrs[tn] = name
            self._rows.add(tn)

    def _matmul(self, mm: CpuMatmul) -> None:
        """The body of a packed matmul's function (:mod:`arrayjit_backend_c.llvm.matmul`)."""
        llvm_matmul.part_body(self._fn, mm, self._ptrs)

    def _parallel_loop(self, loop: L.For_loop, held: Sequence[Tnode] = ()) -> None:
        """The body of a parallel loop's function: the loop over ``[start, stop)`` (with the
        row arrays of the nodes it holds a row at a time)."""
        self._row_arrays(held)
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


def task_function(seg: Segment, args: list[Arg]) -> str:
    """A parallel segment's task: its function called with one chunk's arguments."""
    lines = [
        f"define void @{seg.task_name}(ptr %common, ptr %extra, i64 %chunk) #0 {{",
        "entry:",
        f"  %base = mul i64 %chunk, {seg.chunk_width()}",
        "  %row = getelementptr i64, ptr %extra, i64 %base",
    ]
    values = []
    for k, a in enumerate(args):
        lines.append(f"  %a{k}.r = getelementptr i64, ptr %row, i64 {a.index}")
        at = f"%a{k}.r"
        if a.common:  # the row holds the position among the routine's parameters
            lines.append(f"  %a{k}.at = load i64, ptr %a{k}.r")
            lines.append(f"  %a{k}.p = getelementptr i64, ptr %common, i64 %a{k}.at")
            at = f"%a{k}.p"
        lines.append(f"  %a{k}.v = load i64, ptr {at}")
        if a.pointer:
            lines.append(f"  %a{k} = inttoptr i64 %a{k}.v to ptr")
        values.append(f"ptr %a{k}" if a.pointer else f"i64 %a{k}.v")
    lines += [f"  call void @{seg.name}({', '.join(values)})", "  ret void", "}"]
    return "\n".join(lines)
