"""The optimizer: trace, virtualize (inline), clean up and settle modes, simplify.

Passes, in order:

1. **trace** — per node: written, read, read-only, read before written, zero-initialized by
   code; the merge-buffer node; static symbols the code needs.
2. **virtualize** — a node whose undecided mode allows it, that is not hosted and not shared with
   other routines, and that one top-level loop nest computes cell by cell (``tn[i, j] := e`` with
   its loop symbols as indices, or such a nest accumulating over extra reduction loops after an
   initialization) becomes ``Virtual``: every read of it is replaced by a ``Local_scope``
   computing that scalar at the reader's indices, and its loop nest disappears. A reduction is
   inlined only where it is read once (so no work is repeated).
3. **cleanup** — stores to virtual nodes are gone; every remaining node settles to a leaf mode:
   inputs (read-only or read before written) and outputs (written, never read here) are
   materialized, other intermediates default to ``Local`` (small) or ``On_device``.
5. **CSE** — within a statement, an inlined computation equal to an earlier one (up to renaming
   of its own loop symbols and locals) reads the earlier local instead; across sibling
   statements, such a computation is hoisted into a local before its first user when nothing in
   between writes what it reads (:mod:`arrayjit_ir.cse`).

4. **simplify** — constant folding and exact identities (``x + 0``, ``x - 0``, ``x * 1``,
   ``x / 1``; never ``x * 0``, which is wrong for NaN and infinity); a local scope that only
   assigns a value becomes that value.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from arrayjit_ir import low_level as L
from arrayjit_ir import ops
from arrayjit_ir.cse import eliminate_common_subexpressions, hoist_across_statements
from arrayjit_ir.indexing import (
    Affine,
    AxisIndex,
    Fixed_idx,
    Iterator,
    StaticSymbol,
    Symbol,
    fresh_symbol,
)
from arrayjit_ir.optimized import Optimized, TracedNode
from arrayjit_tnode import Tnode, UsageError
from arrayjit_tnode import memory_mode as mm

# Provenances of the decisions the optimizer takes (they appear in MemoryModeError messages).
PROV_VIRTUAL = 29
PROV_INPUT = 37
PROV_OUTPUT = 38
PROV_INTERMEDIATE = 1
PROV_SHARED = 39
PROV_SETTLE = 40

_scope_ids = itertools.count(1)
_scope_lock = threading.Lock()


def _fresh_scope(tn: Tnode) -> L.ScopeId:
    with _scope_lock:
        return L.ScopeId(tn, next(_scope_ids))


# ---- traversal helpers ----


def _top_level(s: L.Stmt) -> list[L.Stmt]:
    if isinstance(s, L.Seq):
        return list(s.stmts)
    if isinstance(s, L.Noop):
        return []
    return [s]


def _exprs_of(s: L.Stmt) -> Iterable[L.Expr]:
    match s:
        case L.Seq(stmts=stmts):
            for x in stmts:
                yield from _exprs_of(x)
        case L.For_loop(body=body):
            yield from _exprs_of(body)
        case L.Set(value=v) | L.Set_local(value=v):
            yield v


def _sub_exprs(e: L.Expr) -> Iterable[L.Expr]:
    yield e
    match e:
        case L.Binop(a=a, b=b):
            yield from _sub_exprs(a)
            yield from _sub_exprs(b)
        case L.Unop(a=a):
            yield from _sub_exprs(a)
        case L.Ternop(a=a, b=b, c=c):
            yield from _sub_exprs(a)
            yield from _sub_exprs(b)
            yield from _sub_exprs(c)
        case L.Local_scope(body=body):
            for x in _exprs_of(body):
                yield from _sub_exprs(x)


def _reads(s: L.Stmt) -> list[L.Get | L.Get_merge_buffer]:
    return [
        x for e in _exprs_of(s) for x in _sub_exprs(e) if isinstance(x, (L.Get, L.Get_merge_buffer))
    ]


def _writes(s: L.Stmt) -> list[L.Set | L.Zero_out]:
    match s:
        case L.Seq(stmts=stmts):
            return [w for x in stmts for w in _writes(x)]
        case L.For_loop(body=body):
            return _writes(body)
        case L.Set() | L.Zero_out():
            return [s]
    return []


def _static_symbols(s: L.Stmt) -> set[StaticSymbol]:
    found: set[StaticSymbol] = set()

    def idx(i: AxisIndex) -> None:
        match i:
            case Iterator(symbol=StaticSymbol() as sym):
                found.add(sym)
            case Affine(terms=terms):
                found.update(t for _, t in terms if isinstance(t, StaticSymbol))

    def walk(st: L.Stmt) -> None:
        for w in _writes(st):
            if isinstance(w, L.Set):
                for i in w.indices:
                    idx(i)
        for e in _exprs_of(st):
            for x in _sub_exprs(e):
                if isinstance(x, (L.Get, L.Get_merge_buffer)):
                    for i in x.indices:
                        idx(i)
                elif isinstance(x, L.Embed_index):
                    idx(x.index)

    walk(s)
    return found


# ---- substitution ----


def _subst_index(i: AxisIndex, m: dict[Symbol, AxisIndex]) -> AxisIndex:
    match i:
        case Iterator(symbol=Symbol() as s) if s in m:
            return m[s]
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


def _subst_expr(e: L.Expr, m: dict[Symbol, AxisIndex]) -> L.Expr:
    match e:
        case L.Get(tn=tn, indices=idx):
            return L.Get(tn, tuple(_subst_index(i, m) for i in idx))
        case L.Get_merge_buffer(tn=tn, indices=idx):
            return L.Get_merge_buffer(tn, tuple(_subst_index(i, m) for i in idx))
        case L.Embed_index(index=i):
            return L.Embed_index(_subst_index(i, m))
        case L.Local_scope(scope=sc, body=body, orig_indices=oi):
            return L.Local_scope(sc, _subst_stmt(body, m), oi)
    return L.map_children(e, lambda x: _subst_expr(x, m))


def _subst_stmt(s: L.Stmt, m: dict[Symbol, AxisIndex]) -> L.Stmt:
    match s:
        case L.Seq(stmts=stmts):
            return L.Seq(tuple(_subst_stmt(x, m) for x in stmts))
        case L.For_loop(index=i, from_=lo, to_inclusive=hi, body=body, trace_it=t):
            new = fresh_symbol()
            return L.For_loop(new, lo, hi, _subst_stmt(body, {**m, i: Iterator(new)}), t)
        case L.Set(tn=tn, indices=idx, value=v):
            return L.Set(tn, tuple(_subst_index(i, m) for i in idx), _subst_expr(v, m))
        case L.Set_local(scope=sc, value=v):
            return L.Set_local(sc, _subst_expr(v, m))
    return s


def _map_gets(e: L.Expr, f: _Inliner) -> L.Expr:
    match e:
        case L.Get(tn=tn) if tn in f.defs:
            return f.inline(e)
        case L.Local_scope(scope=sc, body=body, orig_indices=oi):
            return L.Local_scope(sc, _map_gets_stmt(body, f), oi)
    return L.map_children(e, lambda x: _map_gets(x, f))


def _map_gets_stmt(s: L.Stmt, f: _Inliner) -> L.Stmt:
    match s:
        case L.Seq(stmts=stmts):
            return L.Seq(tuple(_map_gets_stmt(x, f) for x in stmts))
        case L.For_loop(index=i, from_=lo, to_inclusive=hi, body=body, trace_it=t):
            return L.For_loop(i, lo, hi, _map_gets_stmt(body, f), t)
        case L.Set(tn=tn, indices=idx, value=v):
            return L.Set(tn, idx, _map_gets(v, f))
        case L.Set_local(scope=sc, value=v):
            return L.Set_local(sc, _map_gets(v, f))
    return s


# ---- virtualization ----


@dataclass
class _Definition:
    """How to compute one cell of a virtual node: ``out_symbols`` are the symbols of its
    indices; ``reduction`` loops (innermost last) accumulate ``value`` with ``accum`` starting
    from ``init`` (no reduction: the cell is ``value``)."""

    out_symbols: tuple[Symbol | None, ...]
    value: L.Expr
    reduction: tuple[L.For_loop, ...] = ()
    accum: ops.Binop | None = None
    init: float = 0.0


class _Inliner:
    def __init__(self) -> None:
        self.defs: dict[Tnode, _Definition] = {}

    def inline(self, get: L.Get) -> L.Expr:
        d = self.defs[get.tn]
        m = {s: i for s, i in zip(d.out_symbols, get.indices) if s is not None}
        scope = _fresh_scope(get.tn)
        if not d.reduction:
            body: L.Stmt = L.Set_local(scope, _subst_expr(d.value, m))
            return L.Local_scope(scope, body, get.indices)
        assert d.accum is not None
        inner: L.Stmt = L.Set_local(scope, L.Binop(d.accum, L.Get_local(scope), d.value))
        for loop in reversed(d.reduction):
            inner = L.For_loop(loop.index, loop.from_, loop.to_inclusive, inner, loop.trace_it)
        body = L.seq(L.Set_local(scope, L.Constant(d.init)), _subst_stmt(inner, m))
        return L.Local_scope(scope, body, get.indices)


def _nest(s: L.Stmt) -> tuple[list[L.For_loop], L.Stmt]:
    loops: list[L.For_loop] = []
    while isinstance(s, L.For_loop):
        loops.append(s)
        s = s.body
    return loops, s


def _as_definition(stmts: list[L.Stmt], tn: Tnode) -> _Definition | None:
    """The definition of ``tn`` if ``stmts`` (its only writes, in order) compute it cell by
    cell, else ``None``."""
    init = 0.0
    if len(stmts) == 2:
        first, main = stmts
        if isinstance(first, L.Zero_out) and first.tn == tn:
            init = 0.0
        else:
            _, body0 = _nest(first)
            if not (isinstance(body0, L.Set) and isinstance(body0.value, L.Constant)):
                return None
            init = body0.value.value
    elif len(stmts) == 1:
        main = stmts[0]
    else:
        return None
    loops, body = _nest(main)
    if not isinstance(body, L.Set) or body.tn != tn or not all(lp.trace_it for lp in loops):
        return None
    loop_syms = [lp.index for lp in loops]
    out_syms: list[Symbol | None] = []
    for idx, dim in zip(body.indices, tn.dims):
        match idx:
            case Iterator(symbol=Symbol() as s) if s in loop_syms and s not in out_syms:
                lp = loops[loop_syms.index(s)]
                if lp.from_ != 0 or lp.to_inclusive != dim - 1:
                    return None
                out_syms.append(s)
            case Fixed_idx(value=0) if dim == 1:
                out_syms.append(None)
            case _:
                return None
    reduction = tuple(lp for lp in loops if lp.index not in out_syms)
    self_reads = [g for g in _sub_exprs(body.value) if isinstance(g, L.Get) and g.tn == tn]
    if not reduction:
        if self_reads or len(stmts) != 1:
            return None
        return _Definition(tuple(out_syms), body.value)
    # Accumulation: tn[out] := accum(tn[out], value) with value not reading tn.
    v = body.value
    if not (isinstance(v, L.Binop) and isinstance(v.a, L.Get) and v.a.tn == tn):
        return None
    if v.a.indices != body.indices or len(self_reads) != 1 or len(stmts) != 2:
        return None
    if loops[: len(loops) - len(reduction)] != [lp for lp in loops if lp not in reduction]:
        return None  # reduction loops must be innermost
    return _Definition(tuple(out_syms), v.b, reduction, v.op, init)


def _virtualize(
    stmts: list[L.Stmt], candidates: set[Tnode], read_once: set[Tnode]
) -> tuple[list[L.Stmt], set[Tnode]]:
    writers: dict[Tnode, list[int]] = {}
    for k, s in enumerate(stmts):
        for w in _writes(s):
            writers.setdefault(w.tn, [])
            if k not in writers[w.tn]:
                writers[w.tn].append(k)
    inliner = _Inliner()
    virtual: set[Tnode] = set()
    out: list[L.Stmt] = []
    pending: dict[Tnode, list[L.Stmt]] = {}
    for k, s in enumerate(stmts):
        s = _map_gets_stmt(s, inliner)
        written = {w.tn for w in _writes(s)}
        if len(written) == 1:
            (tn,) = written
            ks = writers[tn]
            if tn in candidates and k in ks and ks == list(range(ks[0], ks[0] + len(ks))):
                pending.setdefault(tn, []).append(s)
                if k == ks[-1]:
                    d = _as_definition(pending[tn], tn)
                    if d is not None and (not d.reduction or tn in read_once):
                        inliner.defs[tn] = d
                        virtual.add(tn)
                    else:
                        out.extend(pending[tn])
                continue
        out.append(s)
    return out, virtual


# ---- simplification ----


def _is_const(e: L.Expr, v: float | None = None) -> bool:
    return isinstance(e, L.Constant) and (v is None or e.value == v)


def _simplify_expr(e: L.Expr) -> L.Expr:
    match e:
        case L.Binop(op=op, a=a, b=b):
            a, b = _simplify_expr(a), _simplify_expr(b)
            if (
                op is not ops.Binop.threefry4x32
                and isinstance(a, L.Constant)
                and isinstance(b, L.Constant)
            ):
                v = ops.apply_binop(op, a.value, b.value, np.dtype(np.float64))
                return L.Constant(float(v))
            if (op is ops.Binop.add and _is_const(b, 0.0)) or (
                op is ops.Binop.sub and _is_const(b, 0.0)
            ):
                return a
            if op is ops.Binop.add and _is_const(a, 0.0):
                return b
            if op in (ops.Binop.mul, ops.Binop.div) and _is_const(b, 1.0):
                return a
            if op is ops.Binop.mul and _is_const(a, 1.0):
                return b
            return L.Binop(op, a, b)
        case L.Unop(op=ops.Unop.identity, a=a):
            return _simplify_expr(a)
        case L.Unop(op=op, a=a):
            a = _simplify_expr(a)
            if isinstance(a, L.Constant) and op is not ops.Unop.uint4x32_to_prec_uniform:
                return L.Constant(float(ops.apply_unop(op, a.value, np.dtype(np.float64))))
            return L.Unop(op, a)
        case L.Ternop(op=op, a=a, b=b, c=c):
            return L.Ternop(op, _simplify_expr(a), _simplify_expr(b), _simplify_expr(c))
        case L.Embed_index(index=Fixed_idx(value=v)):
            return L.Constant(float(v))
        case L.Local_scope(scope=sc, body=L.Set_local(scope=sc2, value=v)) if sc == sc2 and not any(
            isinstance(x, L.Get_local) and x.scope == sc for x in _sub_exprs(v)
        ):
            return _simplify_expr(v)
        case L.Local_scope(scope=sc, body=body, orig_indices=oi):
            return L.Local_scope(sc, _simplify_stmt(body), oi)
    return e


def _simplify_stmt(s: L.Stmt) -> L.Stmt:
    match s:
        case L.Seq(stmts=stmts):
            return L.seq(*(_simplify_stmt(x) for x in stmts))
        case L.For_loop(index=i, from_=lo, to_inclusive=hi, body=body, trace_it=t):
            inner = _simplify_stmt(body)
            return L.Noop() if isinstance(inner, L.Noop) else L.For_loop(i, lo, hi, inner, t)
        case L.Set(tn=tn, indices=idx, value=v):
            return L.Set(tn, idx, _simplify_expr(v))
        case L.Set_local(scope=sc, value=v):
            return L.Set_local(sc, _simplify_expr(v))
    return s


# ---- the pipeline ----


def _trace(stmts: Sequence[L.Stmt]) -> dict[Tnode, TracedNode]:
    traced: dict[Tnode, TracedNode] = {}

    def node(tn: Tnode) -> TracedNode:
        if tn not in traced:
            traced[tn] = TracedNode(tn)
        return traced[tn]

    for s in stmts:
        writes = _writes(s)
        # A merge-buffer read reads another stream's value, not this node's own buffer.
        for g in (g for g in _reads(s) if isinstance(g, L.Get)):
            t = node(g.tn)
            # A read of a node this statement also writes reads the previous value unless the
            # node was already written before (accumulation into an initialized cell).
            if not t.assigned:
                t.read_before_write = True
        for w in writes:
            t = node(w.tn)
            if isinstance(w, L.Zero_out):
                if not t.assigned and not t.read_before_write:
                    t.zero_initialized_by_code = True
                t.zeroed_out = True
            t.assigned = True
    for t in traced.values():
        t.read_only = not t.assigned
        if t.read_only:
            t.read_before_write = True
    return traced


def _injective_readers(stmts: Sequence[L.Stmt]) -> set[Tnode]:
    """Nodes every read of which (outside their own writers) visits each cell at most once: all
    enclosing loops with more than one iteration index the read."""
    bad: set[Tnode] = set()
    seen: set[Tnode] = set()

    def walk(s: L.Stmt, loops: list[Symbol], written: set[Tnode]) -> None:
        match s:
            case L.Seq(stmts=stmts):
                for x in stmts:
                    walk(x, loops, written)
            case L.For_loop(index=i, from_=lo, to_inclusive=hi, body=body):
                walk(body, [*loops, i] if hi > lo else loops, written)
            case L.Set(value=v) | L.Set_local(value=v):
                for g in _sub_exprs(v):
                    if isinstance(g, L.Get) and g.tn not in written:
                        seen.add(g.tn)
                        used = {i.symbol for i in g.indices if isinstance(i, Iterator)}
                        if not set(loops) <= used:
                            bad.add(g.tn)

    for s in stmts:
        walk(s, [], {w.tn for w in _writes(s)})
    return seen - bad


def _read_counts(stmts: Sequence[L.Stmt]) -> dict[Tnode, int]:
    """Reads of each node by statements that do not write it (an accumulation's read of its
    own cell is part of computing the node, not a use of it)."""
    counts: dict[Tnode, int] = {}
    for s in stmts:
        written = {w.tn for w in _writes(s)}
        for g in _reads(s):
            if isinstance(g, L.Get) and g.tn not in written:
                counts[g.tn] = counts.get(g.tn, 0) + 1
    return counts


def optimize(
    llc: L.Stmt,
    *,
    name: str,
    static_symbols: Sequence[StaticSymbol] = (),
    shared: Iterable[Tnode] = (),
) -> Optimized:
    """Optimize one routine's low-level code; settles the memory mode of every node it touches.

    Args:
        llc: the code (from :func:`arrayjit_ir.lower.lower`).
        name: the routine's name.
        static_symbols: the symbols bound when the routine runs, in parameter order.
        shared: nodes other routines read or write: never made virtual or local.

    Raises:
        UsageError: the code reads a static symbol that is not in ``static_symbols``, or reads
            the merge buffer for two different nodes.
        MemoryModeError: a decision contradicts a node's mode set earlier.
    """
    stmts = _top_level(llc)
    needed = _static_symbols(llc)
    missing = sorted(s.name for s in needed - set(static_symbols))
    if missing:
        raise UsageError(
            f"routine {name}: static symbols {missing} are not bound; pass them in bindings"
        )
    merge_nodes = list(
        dict.fromkeys(g.tn for s in stmts for g in _reads(s) if isinstance(g, L.Get_merge_buffer))
    )
    if len(merge_nodes) > 1:
        labels = ", ".join(tn.debug_label for tn in merge_nodes)
        raise UsageError(f"routine {name}: reads the merge buffer of several nodes: {labels}")

    traced = _trace(stmts)
    shared_set = set(shared)
    for tn in shared_set & set(traced):
        tn.update_memory_mode(mm.Never_virtual(), PROV_SHARED)
    counts = _read_counts(stmts)
    candidates = {
        tn
        for tn, t in traced.items()
        if t.assigned
        and not t.read_before_write
        and counts.get(tn, 0) > 0
        and "V" in (mm.leaves(tn.memory_mode) if tn.memory_mode is not None else "V")
        and not tn.is_hosted()
        and tn not in shared_set
        and tn not in merge_nodes
        and not isinstance(tn.memory_mode, mm.Effectively_constant)
    }
    # Inlining a reduction repeats its loop wherever it is read: only where it is read once, at
    # positions that visit each cell once.
    read_once = {tn for tn in candidates if counts.get(tn, 0) == 1} & _injective_readers(stmts)
    new_stmts, virtual = _virtualize(stmts, candidates, read_once)

    # Settle every node's mode (cleanup).
    for tn, t in traced.items():
        if tn in virtual:
            tn.update_memory_mode(mm.Virtual(), PROV_VIRTUAL)
        elif t.read_only or t.read_before_write:
            if not tn.known_constant():
                tn.update_memory_mode(mm.Materialized(), PROV_INPUT)
        elif counts.get(tn, 0) == 0:
            tn.update_memory_mode(mm.Materialized(), PROV_OUTPUT)
        else:
            tn.update_memory_mode(mm.Never_virtual(), PROV_INTERMEDIATE)
        if tn.known_constant() and not tn.is_hosted() and tn not in virtual:
            tn.update_memory_mode(mm.Materialized(), PROV_INPUT)
        tn.default_to_most_local(PROV_SETTLE)

    code = hoist_across_statements(
        eliminate_common_subexpressions(_simplify_stmt(L.seq(*new_stmts)))
    )
    return Optimized(
        name=name,
        code=code,
        traced=traced,
        static_symbols=tuple(static_symbols),
        merge_node=merge_nodes[0] if merge_nodes else None,
        unoptimized=llc,
    )


def optimize_batch(
    llcs: Sequence[L.Stmt],
    names: Sequence[str],
    static_symbols: Sequence[StaticSymbol] = (),
) -> list[Optimized]:
    """Optimize several routines that will run in one context: nodes that more than one of them
    touches are shared (never virtual or local)."""
    seen: dict[Tnode, int] = {}
    for llc in llcs:
        touched = {g.tn for g in _reads(llc)} | {w.tn for w in _writes(llc)}
        for tn in touched:
            seen[tn] = seen.get(tn, 0) + 1
    shared = [tn for tn, n in seen.items() if n > 1]
    return [
        optimize(llc, name=name, static_symbols=static_symbols, shared=shared)
        for llc, name in zip(llcs, names)
    ]
