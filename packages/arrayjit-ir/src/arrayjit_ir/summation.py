"""Blocked summation: long float sums rewritten so that their rounding error grows as log n.

A float add-accumulation run term after term into one accumulator (a cell, or the local of an
inlined reduction) has an error bound proportional to the number of terms: 2**20 copies of 0.1
summed in float32 that way are off by about 1000. This pass, the optimizer's last, rewrites every
such loop nest with more than :data:`BLOCK` terms into a tree, which every backend then runs as
written (the interpreter included):

- *blocks*: :data:`BLOCK` consecutive terms (fewer when each iteration adds several) are summed
  in order into a local partial; compilers vectorize this loop;
- *pairs*: partials are added pairwise, level after level (loops of two iterations), until at
  most :data:`TOP` remain;
- *top*: the accumulator takes those (at most :data:`TOP`) partials in order; the terms left
  over after the last whole group of the top level are summed the same way, as a sum of their
  own, and added once.

Each term then reaches the accumulator through at most ``BLOCK + log2(n) + TOP + log_{TOP/2}(n)``
additions, so the error is bounded by that many units of roundoff of the sum of magnitudes
(first order): O(log n). Backends may reassociate further (vectorized blocks, threads splitting
the top loop, GPU trees), which only shortens these chains.

A nest of reduction loops (a full sum of a matrix) is summed row by row when its inner loops run
at least :data:`BLOCK` terms (each row a partial), else blocks span several rows. The partials
are locals of the accumulator's node and precision: the float32 accumulator the lowering gives
a half, bfloat16 or fp8 reduction has float32 partials (a small-float accumulator that rounds
at every step, which only hand-written code has, has partials that do too). A partial
starts at -0.0, the local's implicit start (:func:`~arrayjit_ir.low_level.local_start`) and
the identity of float addition, so blocking keeps signed zeros (-0.0 terms into a -0.0 cell
stay -0.0). Only ``add``
accumulations whose loops are innermost are
rewritten: a sum whose reduction loop sits outside an output loop (a column sum the lowering
reordered for locality, a matmul) keeps one chain per cell.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from arrayjit_ir import low_level as L
from arrayjit_ir import ops
from arrayjit_ir.definitions import fresh_scope, instantiate
from arrayjit_ir.indexing import (
    Affine,
    AxisIndex,
    Iterator,
    Symbol,
    fresh_symbol,
    index_symbols,
)
from arrayjit_ir.low_level import rounds_when_stored
from arrayjit_tnode import Prec, Tnode

BLOCK = 64
"""Terms summed in order into one block partial."""

TOP = 64
"""Most partials the accumulator itself takes in order (enough iterations for threads to share
the top loop of a full sum)."""


@dataclass(frozen=True)
class _Acc:
    """The accumulator of a sum: a cell ``tn[indices]``, or a local (``scope``)."""

    tn: Tnode
    indices: tuple[AxisIndex, ...] | None
    scope: L.ScopeId | None

    def step(self, term: L.Expr) -> L.Stmt:
        """``acc = acc + term``."""
        if self.scope is not None:
            return L.Set_local(self.scope, L.Binop(ops.Binop.add, L.Get_local(self.scope), term))
        assert self.indices is not None
        old = L.Get(self.tn, self.indices)
        return L.Set(self.tn, self.indices, L.Binop(ops.Binop.add, old, term))

    def partial(self) -> L.ScopeId:
        """A new local for a partial sum, of the accumulator's precision (a float32
        accumulator of a small-float cell has float32 partials)."""
        return fresh_scope(self.tn, self.scope.acc_prec if self.scope is not None else None)

    def reads_itself(self, e: L.Expr) -> bool:
        """Whether ``e`` reads the accumulator (any cell of its node, for a cell)."""
        for x in L.sub_exprs(e):
            if self.scope is not None and isinstance(x, L.Get_local) and x.scope == self.scope:
                return True
            if self.scope is None and isinstance(x, L.Get | L.Get_merge_buffer) and x.tn is self.tn:
                return True
        return False


def _summable(prec: Prec) -> bool:
    return prec.is_float


def _accumulation(s: L.Stmt) -> tuple[_Acc, L.Expr] | None:
    """``(acc, term)`` when ``s`` is ``acc = acc + term`` with ``term`` not reading ``acc``."""
    match s:
        case L.Set(tn=tn, indices=idx, value=L.Binop(op=ops.Binop.add, a=L.Get() as a, b=term)):
            if a.tn is tn and a.indices == idx and _summable(tn.prec):
                acc = _Acc(tn, idx, None)
                return None if acc.reads_itself(term) else (acc, term)
        case L.Set_local(scope=sc, value=L.Binop(op=ops.Binop.add, a=L.Get_local() as a, b=term)):
            if a.scope == sc and _summable(sc.prec):
                acc = _Acc(sc.tn, None, sc)
                return None if acc.reads_itself(term) else (acc, term)
    return None


def _reduction_nest(loop: L.For_loop) -> tuple[list[L.For_loop], _Acc, L.Expr] | None:
    """The perfect nest headed by ``loop`` when it only accumulates ``term`` into one
    accumulator that none of its loops indexes."""
    loops = [loop]
    body = loop.body
    while isinstance(body, L.For_loop):
        loops.append(body)
        body = body.body
    found = _accumulation(body)
    if found is None:
        return None
    acc, term = found
    looped = {lp.index for lp in loops}
    if acc.indices is not None and any(set(index_symbols(i)) & looped for i in acc.indices):
        return None
    return loops, acc, term


def _subst(e: L.Expr, m: dict[Symbol, AxisIndex], tn: Tnode) -> L.Expr:
    """A copy of ``e`` with ``m`` substituted and fresh names for its loops and locals."""
    s = instantiate(L.Set_local(fresh_scope(tn), e), m, {})
    assert isinstance(s, L.Set_local)
    return s.value


def _nest_stmt(loops: list[L.For_loop], step: L.Stmt) -> L.Stmt:
    for lp in reversed(loops):
        step = L.For_loop(lp.index, lp.from_, lp.to_inclusive, step, lp.trace_it)
    return step


def _sum_nest(loops: list[L.For_loop], acc: _Acc, term: L.Expr) -> L.Stmt:
    """``for loops: acc += term``, blocked."""
    head, inner = loops[0], loops[1:]
    weight = 1
    for lp in inner:
        weight *= lp.extent
    if weight >= BLOCK:  # rows are long: each row is a partial, itself blocked
        row = acc.partial()
        row_sum = L.Local_scope(row, _sum_nest(inner, _Acc(acc.tn, None, row), term))
        return _sum_range(head, acc, 1, lambda a: a.step(row_sum))
    return _sum_range(head, acc, weight, lambda a: _nest_stmt(inner, a.step(term)))


def _sum_range(loop: L.For_loop, acc: _Acc, weight: int, body: Callable[[_Acc], L.Stmt]) -> L.Stmt:
    """``loop`` (each iteration adding ``weight`` terms with ``body``) as a blocked sum."""
    per_block = max(1, BLOCK // weight)
    if loop.extent <= per_block:
        return L.For_loop(loop.index, loop.from_, loop.to_inclusive, body(acc), loop.trace_it)
    return _blocked(loop.index, loop.from_, loop.extent, per_block, acc, body, loop.trace_it)


def _blocked(
    k: Symbol,
    lo: int,
    n: int,
    per_block: int,
    acc: _Acc,
    body: Callable[[_Acc], L.Stmt],
    trace_it: bool,
) -> L.Stmt:
    """Iterations ``lo .. lo + n - 1`` of ``k`` summed into ``acc`` as a tree (module doc)."""
    blocks = n // per_block
    if blocks == 0:  # a remainder shorter than a block: one partial, added once
        part = acc.partial()
        k0 = fresh_symbol()
        inner = instantiate(body(_Acc(acc.tn, None, part)), {k: _shifted(k0, 1, lo)}, {})
        return acc.step(L.Local_scope(part, L.For_loop(k0, 0, n - 1, inner, trace_it)))
    levels = 0
    while blocks >> levels > TOP:
        levels += 1
    top = blocks >> levels
    # One block: iteration lo + per_block * j + k0 of the original loop.
    j = fresh_symbol()
    part = acc.partial()
    k0 = fresh_symbol()
    index = Affine(((per_block, j), (1, k0)), lo)
    inner = instantiate(body(_Acc(acc.tn, None, part)), {k: index}, {})
    item: L.Expr = L.Local_scope(part, L.For_loop(k0, 0, per_block - 1, inner, trace_it))
    for _ in range(levels):  # item(j') = item(2 j') + item(2 j' + 1)
        j2, t = fresh_symbol(), fresh_symbol()
        pair = acc.partial()
        child = _subst(item, {j: Affine(((2, j2), (1, t)), 0)}, acc.tn)
        step = _Acc(acc.tn, None, pair).step(child)
        item = L.Local_scope(pair, L.For_loop(t, 0, 1, step, trace_it))
        j = j2
    main: L.Stmt = L.For_loop(j, 0, top - 1, acc.step(item), trace_it)
    done = top * (per_block << levels)
    if done == n:
        return main
    return L.seq(main, _blocked(k, lo + done, n - done, per_block, acc, body, trace_it))


def _shifted(sym: Symbol, coeff: int, off: int) -> AxisIndex:
    if coeff == 1 and off == 0:
        return Iterator(sym)
    return Affine(((coeff, sym),), off)


# ---- the pass ----


def _stmt(s: L.Stmt) -> L.Stmt:
    # isinstance chains rather than class patterns: this rebuilds every statement.
    if isinstance(s, L.Set):
        return L.Set(s.tn, s.indices, _expr(s.value))
    if isinstance(s, L.For_loop):
        nest = _reduction_nest(s)
        if nest is not None:
            loops, acc, term = nest
            total = 1
            for lp in loops:
                total *= lp.extent
            if total > BLOCK:
                return _sum_nest(loops, acc, _expr(term))
        return L.For_loop(s.index, s.from_, s.to_inclusive, _stmt(s.body), s.trace_it)
    if isinstance(s, L.Seq):  # flat: backends look for loops among top-level statements
        return L.seq(*[_stmt(x) for x in s.stmts])
    if isinstance(s, L.Set_local):
        return L.Set_local(s.scope, _expr(s.value))
    return s


def _expr(e: L.Expr) -> L.Expr:
    if isinstance(e, L.Local_scope):
        return L.Local_scope(e.scope, _stmt(e.body), e.orig_indices)
    if isinstance(e, L.Binop | L.Unop | L.Ternop):
        return L.map_children(e, _expr)
    return e  # a leaf (map_children would give it back as it is)


def block_sums(code: L.Stmt) -> L.Stmt:
    """``code`` with every float add-accumulation nest of more than :data:`BLOCK` terms
    rewritten as a blocked, pairwise sum (module doc); everything else unchanged. Sums inside
    inlined computations (local scopes) included."""
    return _stmt(code)


# ---- wider blocks for vectorizing renderers ----


def _simple_block(e: L.Expr) -> tuple[L.ScopeId, L.For_loop, L.Expr] | None:
    """``(scope, loop, term)`` when ``e`` is a local scope summing a loop-free ``term`` over one
    loop (``p := p + term``)."""
    if not isinstance(e, L.Local_scope) or not isinstance(e.body, L.For_loop):
        return None
    loop = e.body
    found = _accumulation(loop.body)
    if found is None or found[0].scope != e.scope:
        return None
    term = found[1]
    if any(isinstance(x, L.Local_scope) for x in L.sub_exprs(term)):
        return None
    return e.scope, loop, term


def _collapse(
    i: AxisIndex, outer: Symbol, inner: Symbol, stride: int, new: Symbol
) -> AxisIndex | None:
    """``i`` with ``stride * outer + inner`` replaced by ``new``; None if ``i`` uses them in
    another proportion."""
    match i:
        case Iterator(symbol=s) if s in (outer, inner):
            return None
        case Affine(terms=terms, offset=off):
            coeff = {s: c for c, s in terms}
            c_out, c_in = coeff.get(outer, 0), coeff.get(inner, 0)
            if c_out == 0 and c_in == 0:
                return i
            if c_out != stride * c_in:
                return None
            kept = tuple((c, s) for c, s in terms if s not in (outer, inner))
            return Affine((*kept, (c_in, new)), off)
    return i


def _merge_level(e: L.Local_scope, limit: int) -> L.Local_scope | None:
    """``q := sum over t of (p := sum over k0 of term)`` as one loop over ``t * B + k0`` (B the
    inner extent), when the result sums at most ``limit`` terms and ``term`` indexes both
    loops as that one number."""
    outer = e.body
    if not isinstance(outer, L.For_loop) or outer.from_ != 0 or rounds_when_stored(e.scope.prec):
        return None  # (small floats round at every step: no renderer vectorizes them)
    found = _accumulation(outer.body)
    if found is None or found[0].scope != e.scope:
        return None
    inner = _simple_block(found[1])
    if inner is None:
        return None
    _, loop, term = inner
    width = loop.extent
    total = outer.extent * width
    if loop.from_ != 0 or total > limit:
        return None
    new = fresh_symbol()
    ok = True

    def fix(idx: tuple[AxisIndex, ...]) -> tuple[AxisIndex, ...]:
        nonlocal ok
        out = []
        for i in idx:
            j = _collapse(i, outer.index, loop.index, width, new)
            if j is None:
                ok = False
                return idx
            out.append(j)
        return tuple(out)

    def walk(x: L.Expr) -> L.Expr:
        match x:
            case L.Get(tn=tn, indices=idx):
                return L.Get(tn, fix(idx))
            case L.Get_merge_buffer(tn=tn, indices=idx):
                return L.Get_merge_buffer(tn, fix(idx))
            case L.Embed_index(index=i):
                (j,) = fix((i,))
                return L.Embed_index(j)
        return L.map_children(x, walk)

    merged = walk(term)
    if not ok:
        return None
    step = _Acc(e.scope.tn, None, e.scope).step(merged)
    return L.Local_scope(
        e.scope, L.For_loop(new, 0, total - 1, step, loop.trace_it), e.orig_indices
    )


def _widen_stmt(s: L.Stmt, limit: int) -> L.Stmt:
    return L.map_exprs(s, lambda e: _widen_expr(e, limit))


def _widen_expr(e: L.Expr, limit: int) -> L.Expr:
    if isinstance(e, L.Local_scope):
        scope = L.Local_scope(e.scope, _widen_stmt(e.body, limit), e.orig_indices)
        return _merge_level(scope, limit) or scope
    return L.map_children(e, lambda x: _widen_expr(x, limit))


def widen_blocks(code: L.Stmt, lanes: int) -> L.Stmt:
    """``code`` with the blocks of its blocked sums merged with their lowest pairwise levels into
    blocks of up to ``BLOCK * lanes`` terms (a power-of-two ``lanes``).

    For renderers that vectorize a block over ``lanes`` SIMD lanes (reassociating it): each
    lane then sums at most ``BLOCK`` terms in order, as the interpreter does, so the error
    bound of the module doc still holds, with a horizontal sum per ``BLOCK * lanes`` terms
    instead of one per ``BLOCK``."""
    if lanes < 2:
        return code
    return _widen_stmt(code, BLOCK * lanes)


__all__ = ["BLOCK", "TOP", "block_sums", "widen_blocks"]
