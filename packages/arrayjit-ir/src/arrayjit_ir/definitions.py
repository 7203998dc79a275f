"""Definitions: a node's writes as one computation of each cell (:class:`Definition`, what
:mod:`arrayjit_ir.virtualize` inlines at a virtual node's reads), and the substitution that
instantiates a computation at other indices with fresh local names (:func:`instantiate`; the
lowering and the blocked summation use it too)."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from arrayjit_ir import low_level as L
from arrayjit_ir import ops
from arrayjit_ir.indexing import (
    Affine,
    AxisIndex,
    Fixed_idx,
    Iterator,
    StaticSymbol,
    Symbol,
    fresh_symbol,
)
from arrayjit_tnode import Prec, Tnode

_scope_ids = itertools.count(1)
_scope_lock = threading.Lock()


def fresh_scope(tn: Tnode, acc_prec: Prec | None = None) -> L.ScopeId:
    """A new local of node ``tn`` (of precision ``acc_prec`` when given), with an id no other
    local of this process has."""
    with _scope_lock:
        return L.ScopeId(tn, next(_scope_ids), acc_prec)


# ---- substitution ----


def subst_index(i: AxisIndex, m: dict[Symbol, AxisIndex]) -> AxisIndex:
    """``i`` with the loop symbols of ``m`` replaced by their indices."""
    if isinstance(i, Iterator):  # the common case first, without a class pattern
        s = i.symbol
        return m.get(s, i) if isinstance(s, Symbol) else i
    match i:
        case Affine(terms=terms, offset=off):
            out_terms: list[tuple[int, Symbol | StaticSymbol]] = []
            for c, sym in terms:
                target = m.get(sym) if isinstance(sym, Symbol) else None
                match target:
                    case None:
                        out_terms.append((c, sym))
                    case Fixed_idx(value=v):
                        off += c * v
                    case Iterator(symbol=t):
                        out_terms.append((c, t))
                    case Affine(terms=t2, offset=o2):
                        out_terms.extend((c * c2, s2) for c2, s2 in t2)
                        off += c * o2
            if not out_terms:
                return Fixed_idx(off)
            if len(out_terms) == 1 and out_terms[0][0] == 1 and off == 0:
                return Iterator(out_terms[0][1])
            return Affine(tuple(out_terms), off)
    return i


def _subst_expr(e: L.Expr, m: dict[Symbol, AxisIndex], sc: dict[L.ScopeId, L.ScopeId]) -> L.Expr:
    # isinstance chains rather than class patterns (every inlined read comes here); operands
    # left to right, so fresh names come in the same order.
    if isinstance(e, L.Get):
        return L.Get(e.tn, tuple([subst_index(i, m) for i in e.indices]))
    if isinstance(e, L.Binop):
        a = _subst_expr(e.a, m, sc)
        return L.Binop(e.op, a, _subst_expr(e.b, m, sc))
    if isinstance(e, L.Unop):
        return L.Unop(e.op, _subst_expr(e.a, m, sc))
    if isinstance(e, L.Ternop):
        a = _subst_expr(e.a, m, sc)
        b = _subst_expr(e.b, m, sc)
        return L.Ternop(e.op, a, b, _subst_expr(e.c, m, sc))
    if isinstance(e, L.Get_local):
        return L.Get_local(sc.get(e.scope, e.scope))
    if isinstance(e, L.Local_scope):
        s = e.scope
        new = fresh_scope(s.tn, s.acc_prec)
        inner = {**sc, s: new}
        return L.Local_scope(new, _subst_stmt(e.body, m, inner), e.orig_indices)
    if isinstance(e, L.Get_merge_buffer):
        return L.Get_merge_buffer(e.tn, tuple([subst_index(i, m) for i in e.indices]))
    if isinstance(e, L.Embed_index):
        return L.Embed_index(subst_index(e.index, m))
    return e


def _subst_stmt(s: L.Stmt, m: dict[Symbol, AxisIndex], sc: dict[L.ScopeId, L.ScopeId]) -> L.Stmt:
    if isinstance(s, L.Set):
        idx = tuple([subst_index(i, m) for i in s.indices])
        return L.Set(s.tn, idx, _subst_expr(s.value, m, sc))
    if isinstance(s, L.For_loop):
        new = fresh_symbol()
        body = _subst_stmt(s.body, {**m, s.index: Iterator(new)}, sc)
        return L.For_loop(new, s.from_, s.to_inclusive, body, s.trace_it)
    if isinstance(s, L.Seq):
        return L.Seq(tuple([_subst_stmt(x, m, sc) for x in s.stmts]))
    if isinstance(s, L.Set_local):
        return L.Set_local(sc.get(s.scope, s.scope), _subst_expr(s.value, m, sc))
    return s


def instantiate(
    s: L.Stmt, m: dict[Symbol, AxisIndex], scopes: dict[L.ScopeId, L.ScopeId]
) -> L.Stmt:
    """A copy of ``s`` with the symbols of ``m`` substituted, every loop given a fresh symbol,
    every local scope inside it given a fresh id, and the locals of ``scopes`` renamed: each
    inlined instance of a definition declares names of its own."""
    return _subst_stmt(s, m, scopes)


# ---- definitions ----


@dataclass
class Definition:
    """How to compute one cell of a node: ``out_symbols`` are the symbols of its indices;
    ``reduction`` loops (innermost last) accumulate ``value`` with ``accum`` starting from
    ``init`` (no reduction: the cell is ``value``)."""

    out_symbols: tuple[Symbol | None, ...]
    value: L.Expr
    reduction: tuple[L.For_loop, ...] = ()
    accum: ops.Binop | None = None
    init: float = 0.0
    fused: bool = False
    """A multiply-accumulate: ``value`` is a product ``x * w`` and each step is
    ``fma(x, w, cell)`` (see :mod:`arrayjit_ir.lower`)."""
    acc_prec: Prec | None = None
    """The precision of a wider accumulator (float32 for a half, bfloat16 or fp8 node): the
    reduction runs in it and the cell's value is rounded once (see :mod:`arrayjit_ir.lower`)."""

    def step(self, cell: L.Expr) -> L.Expr:
        """One accumulation step into ``cell``."""
        if self.fused:
            assert isinstance(self.value, L.Binop)
            return L.Ternop(ops.Ternop.fma, self.value.a, self.value.b, cell)
        assert self.accum is not None
        return L.Binop(self.accum, cell, self.value)

    def inline(self, get: L.Get) -> L.Local_scope:
        """The computation of the cell ``get`` reads, as a local scope with fresh names."""
        m = {s: i for s, i in zip(self.out_symbols, get.indices) if s is not None}
        scope = fresh_scope(get.tn)
        if not self.reduction:
            body = instantiate(L.Set_local(scope, self.value), m, {})
            return L.Local_scope(scope, body, get.indices)
        acc = scope if self.acc_prec is None else fresh_scope(get.tn, self.acc_prec)
        inner: L.Stmt = L.Set_local(acc, self.step(L.Get_local(acc)))
        for loop in reversed(self.reduction):
            inner = L.For_loop(loop.index, loop.from_, loop.to_inclusive, inner, loop.trace_it)
        init = L.Set_local(acc, L.Constant(self.init))
        body = L.seq(init, instantiate(inner, m, {}))
        if self.acc_prec is None:
            return L.Local_scope(scope, body, get.indices)
        # The wide accumulator's value, rounded once to the node's precision.
        return L.Local_scope(scope, L.Set_local(scope, L.Local_scope(acc, body)), get.indices)


def loop_nest(s: L.Stmt) -> tuple[list[L.For_loop], L.Stmt]:
    loops: list[L.For_loop] = []
    while isinstance(s, L.For_loop):
        loops.append(s)
        s = s.body
    return loops, s


def as_definition(stmts: Sequence[L.Stmt], tn: Tnode) -> Definition | None:
    """The definition of ``tn`` if ``stmts`` (its only writes, in order) compute it cell by
    cell, else ``None``."""
    init = 0.0
    if len(stmts) == 2:
        first, main = stmts
        if isinstance(first, L.Zero_out) and first.tn == tn:
            init = 0.0
        else:
            _, body0 = loop_nest(first)
            if not (isinstance(body0, L.Set) and isinstance(body0.value, L.Constant)):
                return None
            init = body0.value.value
    elif len(stmts) == 1:
        main = stmts[0]
    else:
        return None
    loops, body = loop_nest(main)
    if not isinstance(body, L.Set) or body.tn != tn or not all(lp.trace_it for lp in loops):
        return None
    loop_syms = [lp.index for lp in loops]
    out_syms: list[Symbol | None] = []
    for idx, dim in zip(body.indices, tn.dims):
        # isinstance tests rather than class patterns: every candidate comes here.
        if isinstance(idx, Iterator):
            s = idx.symbol
            if not (isinstance(s, Symbol) and s in loop_syms and s not in out_syms):
                return None
            lp = loops[loop_syms.index(s)]
            if lp.from_ != 0 or lp.to_inclusive != dim - 1:
                return None
            out_syms.append(s)
        elif isinstance(idx, Fixed_idx) and idx.value == 0 and dim == 1:
            out_syms.append(None)
        else:
            return None
    reduction = tuple(lp for lp in loops if lp.index not in out_syms)
    if _wide_form(body) is not None:
        if reduction or len(stmts) != 2:
            return None
        return _wide_definition(body, tn, tuple(out_syms), init)
    # Nodes are equal when their ids are: compared by id here, without a call per read.
    tid = tn.id
    self_reads = [g for g in L.sub_exprs(body.value) if isinstance(g, L.Get) and g.tn.id == tid]
    if not reduction:
        if self_reads or len(stmts) != 1:
            return None
        return Definition(tuple(out_syms), body.value)
    # Accumulation: tn[out] := accum(tn[out], value) with value not reading tn.
    v = body.value
    match v:
        case L.Binop(op=op, a=L.Get() as cell, b=term):
            fused = False
        case L.Ternop(op=ops.Ternop.fma, a=x, b=w, c=L.Get() as cell):
            op, term, fused = ops.Binop.add, L.Binop(ops.Binop.mul, x, w), True
        case _:
            return None
    if cell.tn != tn or cell.indices != body.indices or len(self_reads) != 1 or len(stmts) != 2:
        return None
    if loops[: len(loops) - len(reduction)] != [lp for lp in loops if lp not in reduction]:
        return None  # reduction loops must be innermost
    return Definition(tuple(out_syms), term, reduction, op, init, fused)


def _wide_form(body: L.Set) -> tuple[L.ScopeId, L.Stmt] | None:
    """``(acc, loops)`` when ``body`` stores a wide accumulation into its own cell, as the
    lowering writes reductions into small floats: ``tn[i] = (acc := tn[i]; loops; acc)``."""
    match body.value:
        case L.Local_scope(scope=acc, body=L.Seq(stmts=(L.Set_local() as start, loops))):
            if acc.acc_prec is not None and start == L.Set_local(acc, L.Get(body.tn, body.indices)):
                return acc, loops
    return None


def _wide_definition(
    body: L.Set, tn: Tnode, out_syms: tuple[Symbol | None, ...], init: float
) -> Definition | None:
    """The definition of a cell computed by a wide accumulation (:func:`_wide_form`)."""
    found = _wide_form(body)
    assert found is not None
    acc, nest = found
    loops, step = loop_nest(nest)
    if not loops or not all(lp.trace_it for lp in loops) or not isinstance(step, L.Set_local):
        return None
    cell = L.Get_local(acc)
    match step.value:
        case L.Binop(op=op, a=a, b=term) if a == cell:
            fused = False
        case L.Ternop(op=ops.Ternop.fma, a=x, b=w, c=c) if c == cell:
            op, term, fused = ops.Binop.add, L.Binop(ops.Binop.mul, x, w), True
        case _:
            return None
    if step.scope != acc or any(
        (isinstance(g, L.Get) and g.tn == tn) or (isinstance(g, L.Get_local) and g.scope == acc)
        for g in L.sub_exprs(term)
    ):
        return None
    return Definition(out_syms, term, tuple(loops), op, init, fused, acc.acc_prec)


__all__ = ["Definition", "as_definition", "fresh_scope", "instantiate", "loop_nest", "subst_index"]
