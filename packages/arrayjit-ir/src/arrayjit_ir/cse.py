"""Common-subexpression elimination of inlined computations.

Within one statement, a ``Local_scope`` that computes the same thing as an earlier one (equal up
to renaming of its own loop symbols and local ids; free symbols must be the same) is replaced by
a read of the earlier local (``Get_local``). Only scopes at the top of a statement's value take
part (not scopes nested in another scope's loops), and the earlier one is always evaluated first
(left-to-right), so the replacement reads a value that exists.

Across sibling statements inside a loop (:func:`hoist_across_statements`), a computation two of
them inline is computed once into a local before the first; never across a routine's top-level
statements, which renderers may run as separate kernels.
"""

from __future__ import annotations

from typing import Any

from arrayjit_ir import low_level as L
from arrayjit_ir.indexing import Affine, AxisIndex, Fixed_idx, Iterator, Symbol


class _Canon:
    def __init__(self) -> None:
        self.symbols: dict[Symbol, int] = {}
        self.scopes: dict[L.ScopeId, int] = {}

    def sym(self, s: Any) -> Any:
        if isinstance(s, Symbol) and s in self.symbols:
            return ("bound", self.symbols[s])
        return ("free", s)

    # isinstance chains rather than class patterns (every inlined computation is keyed);
    # parts are keyed left to right, so bound names number in the same order.
    def index(self, i: AxisIndex) -> Any:
        if isinstance(i, Iterator):
            return ("it", self.sym(i.symbol))
        if isinstance(i, Fixed_idx):
            return ("fixed", i.value)
        if isinstance(i, Affine):
            return ("affine", tuple([(c, self.sym(s)) for c, s in i.terms]), i.offset)
        raise TypeError(i)

    def scope(self, sc: L.ScopeId) -> Any:
        if sc not in self.scopes:
            self.scopes[sc] = len(self.scopes)
        return ("scope", sc.tn.id, sc.acc_prec, self.scopes[sc])

    def expr(self, e: L.Expr) -> Any:
        if isinstance(e, L.Get):
            return ("get", e.tn.id, tuple([self.index(i) for i in e.indices]))
        if isinstance(e, L.Binop):
            return ("b", e.op, self.expr(e.a), self.expr(e.b))
        if isinstance(e, L.Unop):
            return ("u", e.op, self.expr(e.a))
        if isinstance(e, L.Ternop):
            return ("t", e.op, self.expr(e.a), self.expr(e.b), self.expr(e.c))
        if isinstance(e, L.Get_local):
            return ("local", self.scope(e.scope))
        if isinstance(e, L.Local_scope):
            return ("ls", self.scope(e.scope), self.stmt(e.body))
        if isinstance(e, L.Constant):
            return ("c", e.value)
        if isinstance(e, L.Get_merge_buffer):
            return ("merge", e.tn.id, tuple([self.index(i) for i in e.indices]))
        if isinstance(e, L.Embed_index):
            return ("embed", self.index(e.index))
        if isinstance(e, L.Constant_bits):
            return ("bits", e.value)
        raise TypeError(e)

    def stmt(self, s: L.Stmt) -> Any:
        if isinstance(s, L.Set):
            idx = tuple([self.index(i) for i in s.indices])
            return ("set", s.tn.id, idx, self.expr(s.value))
        if isinstance(s, L.For_loop):
            self.symbols[s.index] = len(self.symbols)
            return ("for", s.from_, s.to_inclusive, self.stmt(s.body))
        if isinstance(s, L.Seq):
            return ("seq", tuple([self.stmt(x) for x in s.stmts]))
        if isinstance(s, L.Set_local):
            return ("setl", self.scope(s.scope), self.expr(s.value))
        if isinstance(s, L.Zero_out):
            return ("zero", s.tn.id)
        return ("other",)


def canonical(e: L.Expr) -> Any:
    """A hashable key equal for computations equal up to renaming of bound names."""
    return _Canon().expr(e)


def _cse_expr(e: L.Expr, seen: dict[Any, L.ScopeId]) -> L.Expr:
    if isinstance(e, L.Local_scope):
        key = canonical(e)
        if key in seen:
            return L.Get_local(seen[key])
        seen[key] = e.scope
        return e
    if isinstance(e, L.Binop | L.Unop | L.Ternop):
        return L.map_children(e, lambda x: _cse_expr(x, seen))
    return e  # a leaf: nothing inside to share


def eliminate_common_subexpressions(s: L.Stmt) -> L.Stmt:
    """Apply the CSE described in the module docstring to every statement of ``s``."""
    return L.map_exprs(s, lambda v: _cse_expr(v, {}))


def _top_scopes(e: L.Expr) -> list[L.Local_scope]:
    if isinstance(e, L.Local_scope):
        return [e]
    return [x for c in L.children(e) for x in _top_scopes(c)]


def _replace_scope(e: L.Expr, key: Any, sc: L.ScopeId) -> L.Expr:
    """``e`` with every top scope of ``key`` replaced by a read of ``sc``, and the reads of the
    replaced scopes' locals too (within-statement CSE left them: ``t * t`` is
    ``(v1 := ...) * v1``)."""
    replaced: set[L.ScopeId] = set()

    def swap(x: L.Expr) -> L.Expr:
        match x:
            case L.Local_scope() if canonical(x) == key:
                replaced.add(x.scope)
                return L.Get_local(sc)
        return L.map_children(x, swap)

    def rename(x: L.Expr) -> L.Expr:
        match x:
            case L.Get_local(scope=old) if old in replaced:
                return L.Get_local(sc)
        return L.map_children(x, rename)

    return rename(swap(e))


def _value(s: L.Stmt) -> L.Expr | None:
    return s.value if isinstance(s, (L.Set, L.Set_local)) else None


def _written(s: L.Stmt) -> set[int]:
    match s:
        case L.Seq(stmts=stmts):
            return set().union(*(_written(x) for x in stmts)) if stmts else set()
        case L.For_loop(body=body):
            return _written(body)
        case L.Set(tn=tn) | L.Zero_out(tn=tn):
            return {tn.id}
    return set()


def _read_ids(key: Any) -> set[int]:
    found: set[int] = set()

    def walk(k: Any) -> None:
        if isinstance(k, tuple):
            if len(k) == 3 and k[0] in ("get", "merge") and isinstance(k[1], int):
                found.add(k[1])
            for x in k:
                walk(x)

    walk(key)
    return found


def hoist_across_statements(s: L.Stmt) -> L.Stmt:
    """Across sibling statements inside a loop: a computation two statements inline (equal
    keys, as in :func:`canonical`) is computed once, into a local, before the first of them,
    provided no statement from the first user up to the last writes a node the computation
    reads.

    ``s`` is a routine's code: its top-level statements are left as they are. Each of them
    may run as a kernel of its own (the GPU renderers launch a statement, or a group of them,
    per kernel), and a local set in one kernel does not exist in the next, so no local is
    shared between top-level statements; a computation they share is the virtualization's
    decision (it stores a node whose recomputation would cost too much)."""
    match s:
        case L.Seq(stmts=stmts):
            return L.seq(*(hoist_across_statements(x) for x in stmts))
        case L.For_loop(index=i, from_=lo, to_inclusive=hi, body=body, trace_it=t):
            return L.For_loop(i, lo, hi, _hoist_within(body), t)
    return s


def _hoist_within(s: L.Stmt) -> L.Stmt:
    """:func:`hoist_across_statements` in ``s``, a loop body: in its sequences at every
    depth."""
    match s:
        case L.For_loop(index=i, from_=lo, to_inclusive=hi, body=body, trace_it=t):
            return L.For_loop(i, lo, hi, _hoist_within(body), t)
        case L.Seq(stmts=stmts):
            items = [_hoist_within(x) for x in stmts]
        case _:
            return s
    users: dict[Any, list[tuple[int, L.Local_scope]]] = {}
    for k, st in enumerate(items):
        v = _value(st)
        for scope in _top_scopes(v) if v is not None else []:
            users.setdefault(canonical(scope), []).append((k, scope))
    hoisted: dict[int, list[L.Stmt]] = {}
    for key, uses in users.items():
        positions = sorted({k for k, _ in uses})
        if len(positions) < 2:
            continue
        first, last = positions[0], positions[-1]
        between = set().union(*(_written(items[k]) for k in range(first, last)))
        if between & _read_ids(key):
            continue
        scope = uses[0][1]
        hoisted.setdefault(first, []).append(scope.body)
        for k in positions:
            st = items[k]
            if isinstance(st, L.Set):
                items[k] = L.Set(st.tn, st.indices, _replace_scope(st.value, key, scope.scope))
            elif isinstance(st, L.Set_local):
                items[k] = L.Set_local(st.scope, _replace_scope(st.value, key, scope.scope))
    out: list[L.Stmt] = []
    for k, st in enumerate(items):
        out.extend(hoisted.get(k, []))
        out.append(st)
    return L.seq(*out)
