"""Lowering: assignments to low-level loops.

A reduction into a half, bfloat16 or fp8 node accumulates in a float32 local and stores it
once, rounded (:func:`_wide_reduction`; the IR README's "Semantics decided here"): the rule is
decided here so that the reference interpreter over the lowered code follows it too.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from arrayjit_ir import assignments as A
from arrayjit_ir import bounds, margins, ops
from arrayjit_ir import low_level as L
from arrayjit_ir.definitions import fresh_scope
from arrayjit_ir.indexing import (
    Affine,
    AxisIndex,
    Fixed_idx,
    Iterator,
    Symbol,
    fresh_symbol,
    index_symbols,
)
from arrayjit_ir.low_level import rounds_when_stored
from arrayjit_tnode import Prec, Tnode, UsageError

CONSTANT_FILL_LIMIT = 4096
"""Constant_fill is unrolled into one store per cell; larger fills are refused."""

REORDER_MIN_WORK = 1 << 15
"""Reductions doing at least this many iterations get a memory-friendly loop order."""


def lower(comp: A.Comp | A.Assignment) -> L.Stmt:
    """Lower a computation (or assignments) to low-level code.

    Raises:
        UsageError: an op on a precision it does not support (``threefry4x32`` or
            ``uint4x32_to_prec_uniform`` without uint4x32 operands), a ``Constant_fill`` whose
            number of values differs from the node's cells, an index that can leave its
            node's buffer (:func:`arrayjit_ir.bounds.check`).
    """
    asg = comp.assignments if isinstance(comp, A.Comp) else comp
    return bounds.check(L.seq(*(_lower_leaf(leaf) for leaf in A.flatten(asg))))


def shift(tn: Tnode, idx: Sequence[AxisIndex]) -> tuple[AxisIndex, ...]:
    """Logical indices of ``tn`` turned into buffer indices (its left padding added)."""
    if tn.padding is None:
        return tuple(idx)
    out: list[AxisIndex] = []
    for i, (left, _) in zip(idx, tn.padding.axes):
        match i:
            case _ if left == 0:
                out.append(i)
            case Fixed_idx(value=v):
                out.append(Fixed_idx(v + left))
            case Iterator(symbol=s):
                out.append(Affine(((1, s),), left))
            case Affine(terms=terms, offset=off):
                out.append(Affine(terms, off + left))
    return tuple(out)


def loop_over(dims: Sequence[int], body: Callable[[tuple[AxisIndex, ...]], L.Stmt]) -> L.Stmt:
    """Loops over ``dims`` (size-1 axes get ``Fixed_idx(0)`` and no loop)."""
    symbols: list[Symbol | None] = [None if d == 1 else fresh_symbol() for d in dims]
    idx = tuple(Fixed_idx(0) if s is None else Iterator(s) for s in symbols)
    stmt = body(idx)
    for d, s in reversed(list(zip(dims, symbols))):
        if s is not None:
            stmt = L.For_loop(s, 0, d - 1, stmt)
    return stmt


def _read(r: A.Rhs, idx: tuple[AxisIndex, ...]) -> L.Expr:
    if isinstance(r, A.Merge_buffer):
        return L.Get_merge_buffer(r.tn, shift(r.tn, idx))
    return L.Get(r, shift(r, idx))


def _check_prec(asg: A.Accum_op) -> None:
    uses_bits = asg.op in (ops.Binop.threefry4x32, ops.Unop.uint4x32_to_prec_uniform)
    if asg.op is ops.Binop.threefry4x32 and asg.lhs.prec is not Prec.uint4x32:
        raise UsageError(
            f"threefry4x32 writes uint4x32, but {asg.lhs.debug_label} has precision {asg.lhs.prec}"
        )
    if uses_bits:
        for r in asg.rhs:
            tn = A.rhs_node(r)
            if tn.prec is not Prec.uint4x32:
                raise UsageError(
                    f"{asg.op.value} reads uint4x32 random bits, but {tn.debug_label} has "
                    f"precision {tn.prec}"
                )


def _apply(op: ops.Binop | ops.Unop | ops.Ternop, args: list[L.Expr]) -> L.Expr:
    match op:
        case ops.Binop.arg1:
            return args[0]
        case ops.Binop.arg2:
            return args[1]
        case ops.Unop.identity:
            return args[0]
        case ops.Binop():
            return L.Binop(op, args[0], args[1])
        case ops.Unop():
            return L.Unop(op, args[0])
        case ops.Ternop():
            return L.Ternop(op, args[0], args[1], args[2])
    raise TypeError(op)


def _lower_accum(asg: A.Accum_op) -> L.Stmt:
    """The assignment's loops, after the margin fills its reads need and the neutral fill of
    its cells, and before the fill that restores its result's margins (:mod:`arrayjit_ir.
    margins`)."""
    body = _lower_accum_loops(asg)
    proj = asg.projections
    reads = [
        (A.rhs_node(r), isinstance(r, A.Merge_buffer), idx)
        for r, idx in zip(asg.rhs, proj.project_rhs)
    ]
    resets: L.Stmt = L.Noop()
    # Only an operand padded without a value can need a margin fill (most have no padding).
    if any(tn.padding is not None and tn.padding.value is None for tn, _, _ in reads):
        extents = dict(zip(proj.product_iterators, proj.product_space))
        resets = margins.reset_for_reads(asg.lhs, asg.accum, asg.op, reads, extents, proj.spec)
    return L.seq(resets, body, _restore_margins(asg.lhs))


def _restore_margins(tn: Tnode) -> L.Stmt:
    """The fill of ``tn``'s margins with its declared padding value, after a write."""
    if tn.padding is None or tn.padding.value is None:
        return L.Noop()
    return margins.margin_fill(tn, tn.padding.value)


def _lower_accum_loops(asg: A.Accum_op) -> L.Stmt:
    _check_prec(asg)
    proj = asg.projections
    lhs = asg.lhs
    injective = proj.is_injective()
    prefix: L.Stmt = L.Noop()
    if (
        asg.accum is not None
        and asg.initialize_neutral
        and not (injective and proj.is_surjective(lhs.dims_without_padding))
    ):
        start = neutral_value(asg.accum, lhs.prec)
        if isinstance(start, L.Constant) and start.value == 0 and lhs.padding is None:
            prefix = L.Zero_out(lhs)
        else:
            dims = lhs.dims_without_padding
            prefix = loop_over(dims, lambda idx: L.Set(lhs, shift(lhs, idx), start))
    symbols = {s: s for s in proj.product_iterators}
    lhs_idx = shift(lhs, proj.project_lhs)
    value = _apply(asg.op, [_read(r, idx) for r, idx in zip(asg.rhs, proj.project_rhs)])
    if asg.accum is not None and not (asg.initialize_neutral and injective):
        wide = _wide_reduction(asg, lhs_idx, value)
        if wide is not None:
            return L.seq(prefix, wide)
    if asg.accum is not None:
        # Each cell starts from the neutral element (or its old value) and accumulates its
        # terms. Where every cell gets exactly one term it is ``neutral op x``: ``x`` itself for
        # the ops whose neutral element is exact (add, mul, max, min), ``0 - x`` for ``sub``.
        if not (asg.initialize_neutral and injective):
            value = _accumulate(asg, L.Get(lhs, lhs_idx), value)
        elif asg.accum not in _IDENTITY_START:
            value = L.Binop(asg.accum, neutral_value(asg.accum, lhs.prec), value)
    stmt: L.Stmt = L.Set(lhs, lhs_idx, value)
    for extent, sym in reversed(_loop_order(asg, injective)):
        stmt = L.For_loop(symbols[sym], 0, extent - 1, stmt)
    return L.seq(prefix, stmt)


def _accumulate(asg: A.Accum_op, cell: L.Get | L.Get_local, value: L.Expr) -> L.Expr:
    """One accumulation step. A float multiply-accumulate (``accum(h, "add", x, w, op="mul")``,
    matmul and contractions) updates the cell as ``fma(x, w, h)``, one rounding per step, as
    BLAS kernels do; every other step is ``h op value``, the value rounded first."""
    if (
        asg.accum is ops.Binop.add
        and asg.op is ops.Binop.mul
        and asg.lhs.prec.is_float
        and isinstance(value, L.Binop)
        and value.op is ops.Binop.mul
    ):
        return L.Ternop(ops.Ternop.fma, value.a, value.b, cell)
    assert asg.accum is not None
    return L.Binop(asg.accum, cell, value)


def _wide_reduction(
    asg: A.Accum_op, lhs_idx: tuple[AxisIndex, ...], value: L.Expr
) -> L.Stmt | None:
    """A reduction into half, bfloat16 or fp8 cells, accumulated in float32.

    Each visit of a cell by the output loops runs its reduction loops (the loops its index
    does not use, innermost) into a float32 local started from the cell's value, and stores
    the local into the cell once, rounded: ``h[i] = (acc := h[i]; for k: acc := acc + t[k];
    acc)``. Only the store rounds, as in numpy's float16 sums, CuPy and PyTorch. None (keep
    the per-step form, which rounds at every step) for other precisions, when no loop is left
    to reduce over, or when a term reads the node accumulated into."""
    lhs = asg.lhs
    if not rounds_when_stored(lhs.prec) or asg.accum is None:
        return None
    if any(A.rhs_node(r) is lhs for r in asg.rhs):
        return None  # a term would read cells the float32 local has not stored yet
    proj = asg.projections
    loops = [(e, s) for e, s in zip(proj.product_space, proj.product_iterators) if e != 1]
    used = {sym for i in lhs_idx for sym in index_symbols(i)}
    outer = [(e, s) for e, s in loops if s in used]
    inner = [(e, s) for e, s in loops if s not in used]
    if not inner:
        return None
    acc = fresh_scope(lhs, Prec.single)
    step: L.Stmt = L.Set_local(acc, _accumulate(asg, L.Get_local(acc), value))
    for extent, sym in reversed(inner):
        step = L.For_loop(sym, 0, extent - 1, step)
    start = L.Set_local(acc, L.Get(lhs, lhs_idx))
    stmt: L.Stmt = L.Set(lhs, lhs_idx, L.Local_scope(acc, L.seq(start, step)))
    for extent, sym in reversed(outer):
        stmt = L.For_loop(sym, 0, extent - 1, stmt)
    return stmt


_IDENTITY_START = (ops.Binop.add, ops.Binop.mul, ops.Binop.max, ops.Binop.min)
"""Accumulations for which ``neutral op x`` is exactly ``x`` (NaN included)."""


def neutral_value(op: ops.Binop, prec: Prec) -> L.Expr:
    """The neutral element of accumulating with ``op`` into a node of precision ``prec``:
    ``max`` and ``min`` of integers start from the precision's smallest and largest value (an
    infinity has no integer value)."""
    return margins.constant(ops.neutral(op), prec)


def _innermost_axis(idx: tuple[AxisIndex, ...]) -> Symbol | None:
    """The loop symbol that walks the last axis of an operand (its stride-1 axis)."""
    if idx and isinstance(idx[-1], Iterator) and isinstance(idx[-1].symbol, Symbol):
        return idx[-1].symbol
    return None


def _loop_order(asg: A.Accum_op, injective: bool) -> list[tuple[int, Symbol]]:
    """Loops of an assignment, outermost first: the projection's order, except that a
    reduction whose operands mostly walk memory along an output axis gets that axis innermost
    (a matmul ``ik,kj->ij`` runs ``i, k, j``: the inner loop is contiguous in ``h`` and ``w``
    and vectorizes). Each output cell still accumulates its terms in the same order. Small
    reductions keep their order, so the optimizer can still inline them into their reader."""
    loops = [
        (e, s)
        for e, s in zip(asg.projections.product_space, asg.projections.product_iterators)
        if e != 1
    ]
    if injective or asg.accum is None or len(loops) < 2:
        return loops
    if math.prod(e for e, _ in loops) < REORDER_MIN_WORK:
        return loops
    proj = asg.projections
    votes: dict[Symbol, int] = {}
    for idx in (proj.project_lhs, *proj.project_rhs):
        sym = _innermost_axis(idx)
        if sym is not None:
            votes[sym] = votes.get(sym, 0) + 1
    current = loops[-1][1]
    best = max(votes, key=lambda s: votes[s], default=current)
    if votes.get(best, 0) <= votes.get(current, 0) or _innermost_axis(proj.project_lhs) != best:
        return loops
    return [loop for loop in loops if loop[1] != best] + [lp for lp in loops if lp[1] == best]


def _row_major(dims: Sequence[int], idx: tuple[AxisIndex, ...]) -> AxisIndex:
    terms: list[tuple[int, Symbol]] = []
    stride = 1
    for d, i in reversed(list(zip(dims, idx))):
        if isinstance(i, Iterator) and isinstance(i.symbol, Symbol):
            terms.append((stride, i.symbol))
        stride *= d
    if not terms:
        return Fixed_idx(0)
    if len(terms) == 1 and terms[0][0] == 1:
        return Iterator(terms[0][1])
    return Affine(tuple(reversed(terms)), 0)


def _lower_fetch(f: A.Fetch) -> L.Stmt:
    tn = f.lhs
    dims = tn.dims_without_padding
    match f.fetch_op:
        case A.Constant(value=v) if v == 0 and math.copysign(1.0, v) > 0 and tn.padding is None:
            return L.Zero_out(tn)  # +0.0 only: a fill of -0.0 is a fill
        case A.Constant(value=v):
            return loop_over(dims, lambda idx: L.Set(tn, shift(tn, idx), L.Constant(v)))
        case A.Range_over_offsets():
            return loop_over(
                dims, lambda idx: L.Set(tn, shift(tn, idx), L.Embed_index(_row_major(dims, idx)))
            )
        case A.Embed_symbol(symbol=s):
            return loop_over(
                dims, lambda idx: L.Set(tn, shift(tn, idx), L.Embed_index(Iterator(s)))
            )
        case A.Slice(batch=b, source=src):
            src_dims = src.dims_without_padding
            if tuple(src_dims[1:]) != tuple(dims):
                raise UsageError(
                    f"slice: {src.debug_label} with dims {list(src_dims)} cannot fill "
                    f"{tn.debug_label} with dims {list(dims)}"
                )
            return loop_over(
                dims,
                lambda idx: L.Set(tn, shift(tn, idx), L.Get(src, shift(src, (Iterator(b), *idx)))),
            )
        case A.Constant_fill(values=vals):
            n = tn.num_elems if tn.padding is None else _count(dims)
            if n > CONSTANT_FILL_LIMIT:
                raise UsageError(
                    f"constant_fill: {tn.debug_label} has {n} cells; Constant_fill takes at most "
                    f"{CONSTANT_FILL_LIMIT} (they are unrolled into the code): use a hosted "
                    "node and set_values instead"
                )
            if len(vals) != n:
                raise UsageError(
                    f"constant_fill: {tn.debug_label} has {n} cells but {len(vals)} values were "
                    "given (one per cell, row-major)"
                )
            stmts: list[L.Stmt] = []
            for offset, v in enumerate(vals):
                idx, rest = [], offset
                for d in reversed(dims):
                    idx.append(Fixed_idx(rest % d))
                    rest //= d
                stmts.append(L.Set(tn, shift(tn, tuple(reversed(idx))), L.Constant(float(v))))
            return L.seq(*stmts)
    raise TypeError(f"unknown fetch op {f.fetch_op!r}")


def _count(dims: Sequence[int]) -> int:
    n = 1
    for d in dims:
        n *= d
    return n


def _lower_leaf(a: A.Accum_op | A.Fetch) -> L.Stmt:
    if isinstance(a, A.Accum_op):
        return _lower_accum(a)
    return L.seq(_lower_fetch(a), _restore_margins(a.lhs))
