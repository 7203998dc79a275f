"""Row plans: which consecutive top-level statements may run row by row, and (for the CPU
renderers) those statements fused into one loop over the rows.

Softmax over rows, as users write it, is five statements, each a loop over the rows: a row
max, ``e = x - m``, ``e = exp(e)``, a row sum of ``e``, ``y = e / s``. Run one after another,
each streams the whole of ``x`` or ``e`` through memory again. When their rows are
independent (:func:`independent`: every store is to the row's own cells, every read of a
written node is of the row's own cells), running them row by row, in statement order within
each row, is running them statement by statement: the GPU renderers run such a chain as one
kernel with a work group per row (``gpu/row_chain.py``); the CPU renderers as one loop over the
rows (:func:`fuse_row_loops`), whose iterations the crew's threads split, so each row's
intermediates stay in the core's cache and the input row is read from memory once.

What this module decides is shape-agnostic: it imports only ``arrayjit_ir`` and
``arrayjit_tnode`` (the ``codegen/`` rule).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from arrayjit_backends.codegen.kernel_plan import (
    gets_of,
    is_parallel_loop,
    iterator_axis,
    local_scopes,
    reads_of,
    sets_of,
)
from arrayjit_ir import low_level as L
from arrayjit_ir import ops
from arrayjit_ir.indexing import Affine, AxisIndex, Iterator, Symbol, fresh_symbol
from arrayjit_tnode import Prec, Tnode

ROW_BYTES_LIMIT = 128 * 1024
"""The most bytes one row of a fused loop may touch across its nodes (:func:`row_bytes`: the
row's working set, which should stay in a core's L2 cache between the steps); a chain over
longer rows keeps its loops apart, as before."""

MAX_STEPS = 32
"""Statements in one fused loop at most."""

RESIDENT_BYTES = 32 * 1024
"""The most bytes of rows a CPU row loop holds in arrays of its own (:func:`resident_rows`,
on the stack of the thread running it: helper threads have small stacks)."""


def zeroes(s: L.Stmt) -> bool:
    """Whether ``s`` zeroes a node anywhere."""
    match s:
        case L.Zero_out():
            return True
        case L.For_loop(body=body):
            return zeroes(body)
        case L.Seq(stmts=stmts):
            return any(zeroes(x) for x in stmts)
    return False


def independent(parts: Sequence[tuple[Sequence[Symbol], L.Stmt]]) -> bool:
    """Whether the statements ``parts`` (each with the symbols of its leading loops) may run
    iteration by iteration of those loops, all statements in each, rather than one statement
    after another: the iterations of each statement and the statements' iterations with equal
    index values touch disjoint cells of every node any of them writes. Every store indexes its
    node by the statement's symbols, at the same axes for every store of that node; every read
    of a written node (the merge buffer included: it may be the node's buffer) has those
    symbols at those axes; nothing is zeroed. (:func:`~arrayjit_backends.codegen.kernel_plan.
    is_parallel_loop` for several statements and loops.)"""
    axes: dict[Tnode, tuple[int, ...]] = {}
    for syms, s in parts:
        its = [Iterator(x) for x in syms]
        if zeroes(s):
            return False
        for st in sets_of(s):
            if any(it not in st.indices for it in its):
                return False
            at = tuple(st.indices.index(it) for it in its)
            if axes.setdefault(st.tn, at) != at:
                return False
    for syms, s in parts:
        its = [Iterator(x) for x in syms]
        for g in reads_of(s):
            read_at = axes.get(g.tn)
            if read_at is None:
                continue
            if isinstance(g, L.Get_merge_buffer):
                return False
            if not all(
                a < len(g.indices) and g.indices[a] == it
                for a, it in zip(read_at, its, strict=True)
            ):
                return False
    return True


def _row_loop(s: L.Stmt, rows: tuple[int, int] | None) -> L.For_loop | None:
    """``s`` as a loop over the rows ``rows`` (``(from, to_inclusive)``; None: any): a loop
    itself, or the zeroing of a node whose leading axis has the rows' extent, written as a loop
    storing zeros (no uint4x32: a zero of it is not a scalar constant)."""
    match s:
        case L.For_loop(from_=lo, to_inclusive=hi) if rows is None or (lo, hi) == rows:
            return s
        case L.Zero_out(tn=tn) if (
            rows is not None
            and rows[0] == 0
            and tn.dims
            and tn.dims[0] == rows[1] + 1
            and tn.prec is not Prec.uint4x32
        ):
            syms = [fresh_symbol() for _ in tn.dims]
            body: L.Stmt = L.Set(tn, tuple(Iterator(x) for x in syms), L.Constant(0.0))
            for x, d in reversed(list(zip(syms, tn.dims, strict=True))):
                body = L.For_loop(x, 0, d - 1, body)
            assert isinstance(body, L.For_loop)
            return body
    return None


def _rename(loop: L.For_loop, row: Symbol) -> L.Stmt:
    """``loop``'s body with its symbol replaced by ``row``."""
    return _renamed(loop.body, {loop.index: row})


def _renamed(s: L.Stmt, names: Mapping[Symbol, Symbol]) -> L.Stmt:
    """``s`` with the loop symbols of ``names`` replaced by their values in every index (the
    loops' own symbols are not renamed: ``names`` holds symbols of loops around ``s``). A part
    that no renaming changes is returned as it is (an equal value: building copies of every
    node was most of the cost of fusing rows, issue 38)."""
    if all(k == v for k, v in names.items()):
        return s

    def index(i: AxisIndex) -> AxisIndex:
        if isinstance(i, Iterator):
            x = i.symbol
            if isinstance(x, Symbol) and x in names:
                y = names[x]
                return i if y == x else Iterator(y)
            return i
        if isinstance(i, Affine):
            terms = tuple((c, names.get(x, x) if isinstance(x, Symbol) else x) for c, x in i.terms)
            return i if terms == i.terms else Affine(terms, i.offset)
        return i

    def indices(idx: tuple[AxisIndex, ...]) -> tuple[AxisIndex, ...]:
        new = tuple(index(i) for i in idx)
        return idx if all(a is b for a, b in zip(new, idx, strict=True)) else new

    def expr(e: L.Expr) -> L.Expr:
        if isinstance(e, L.Get):
            idx = indices(e.indices)
            return e if idx is e.indices else L.Get(e.tn, idx)
        if isinstance(e, L.Binop):
            a, b = expr(e.a), expr(e.b)
            return e if a is e.a and b is e.b else L.Binop(e.op, a, b)
        if isinstance(e, L.Unop):
            a = expr(e.a)
            return e if a is e.a else L.Unop(e.op, a)
        if isinstance(e, L.Ternop):
            a, b, c = expr(e.a), expr(e.b), expr(e.c)
            return e if a is e.a and b is e.b and c is e.c else L.Ternop(e.op, a, b, c)
        if isinstance(e, L.Get_merge_buffer):
            idx = indices(e.indices)
            return e if idx is e.indices else L.Get_merge_buffer(e.tn, idx)
        if isinstance(e, L.Embed_index):
            i = index(e.index)
            return e if i is e.index else L.Embed_index(i)
        if isinstance(e, L.Local_scope):
            body = stmt(e.body)
            return e if body is e.body else L.Local_scope(e.scope, body, e.orig_indices)
        return e

    def stmt(s: L.Stmt) -> L.Stmt:
        if isinstance(s, L.Seq):
            stmts = tuple(stmt(x) for x in s.stmts)
            return s if all(a is b for a, b in zip(stmts, s.stmts, strict=True)) else L.Seq(stmts)
        if isinstance(s, L.For_loop):
            body = stmt(s.body)
            if body is s.body:
                return s
            return L.For_loop(s.index, s.from_, s.to_inclusive, body, s.trace_it)
        if isinstance(s, L.Set):
            idx, v = indices(s.indices), expr(s.value)
            return s if idx is s.indices and v is s.value else L.Set(s.tn, idx, v)
        if isinstance(s, L.Set_local):
            v = expr(s.value)
            return s if v is s.value else L.Set_local(s.scope, v)
        return s

    return stmt(s)


def row_bytes(loops: Sequence[L.For_loop]) -> int:
    """Bytes of one row of the fused loops' working set: per node that a loop reads or stores
    indexed by its row symbol, the cells of one value of that axis."""
    return _row_bytes([_row_sizes(lp, sets_of(lp.body), gets_of(lp.body)) for lp in loops])


def _row_sizes(lp: L.For_loop, stores: Sequence[L.Set], gets: Sequence[L.Get]) -> dict[Tnode, int]:
    """Per node that ``lp`` reads or stores indexed by its symbol, the bytes of one row
    (``stores`` and ``gets``: those of its body, :func:`sets_of` and :func:`gets_of`)."""
    sizes: dict[Tnode, int] = {}
    sym = lp.index
    accesses: list[L.Set | L.Get] = [*stores, *gets]
    for x in accesses:
        k = iterator_axis(x.indices, sym)
        if k >= 0:
            tn = x.tn
            dims = tn.dims
            cells = math.prod(dims[:k]) * math.prod(dims[k + 1 :])  # every axis but k
            sizes[tn] = max(sizes.get(tn, 0), cells * tn.prec.byte_size)
    return sizes


def _row_bytes(per_loop: Sequence[Mapping[Tnode, int]]) -> int:
    """:func:`row_bytes` from each loop's :func:`_row_sizes`: per node the largest."""
    sizes: dict[Tnode, int] = {}
    for mine in per_loop:
        for tn, size in mine.items():
            sizes[tn] = max(sizes.get(tn, 0), size)
    return sum(sizes.values())


@dataclass(frozen=True)
class _LoopFacts:
    """What :func:`_fusable` asks of one loop, found once per :func:`fuse_row_loops` (a run
    growing a loop at a time asked it of every loop of the run again, issue 38)."""

    loop: L.For_loop
    """The loop (kept: the facts are found by its ``id``)."""
    zeroes: bool
    stores: list[L.Set]
    reads: list[L.Get | L.Get_merge_buffer]
    sizes: dict[Tnode, int] | None
    """:func:`_row_sizes` (None where the run fuses cells: no limit on a row's bytes)."""


class _Facts:
    """:class:`_LoopFacts` of loops, each found once."""

    def __init__(self, cells: bool) -> None:
        self.cells = cells
        self._seen: dict[int, _LoopFacts] = {}

    def __call__(self, lp: L.For_loop) -> _LoopFacts:
        found = self._seen.get(id(lp))
        if found is None:
            stores, reads = sets_of(lp), reads_of(lp)
            sizes = None
            if not self.cells:  # the reads of nodes (gets_of) are the reads less the merge's
                gets = [g for g in reads if isinstance(g, L.Get)]
                sizes = _row_sizes(lp, stores, gets)
            found = _LoopFacts(lp, zeroes(lp), stores, reads, sizes)
            self._seen[id(lp)] = found
        return found


def _fusable(loops: Sequence[L.For_loop], facts: _Facts) -> bool:
    """Whether ``loops`` may run as one loop over their rows: at most :data:`MAX_STEPS`, at
    most :data:`ROW_BYTES_LIMIT` a row (unless ``facts.cells``), and :func:`independent`
    (computed here from each loop's facts, as :func:`independent` computes it)."""
    if len(loops) > MAX_STEPS:
        return False
    found = [facts(lp) for lp in loops]
    if not facts.cells and _row_bytes([f.sizes or {} for f in found]) > ROW_BYTES_LIMIT:
        return False
    axes: dict[Tnode, int] = {}
    for f in found:
        it = Iterator(f.loop.index)
        if f.zeroes:
            return False
        for st in f.stores:
            if it not in st.indices:
                return False
            at = st.indices.index(it)
            if axes.setdefault(st.tn, at) != at:
                return False
    for f in found:
        it = Iterator(f.loop.index)
        for g in f.reads:
            read_at = axes.get(g.tn)
            if read_at is None:
                continue
            if isinstance(g, L.Get_merge_buffer):
                return False
            if not (read_at < len(g.indices) and g.indices[read_at] == it):
                return False
    return True


def _has_row(loop: L.For_loop) -> bool:
    """Whether an iteration of ``loop`` walks a row: a loop inside it, or an inlined
    computation (a reduction) in its values (loops over single cells fuse no rows)."""

    def walks(s: L.Stmt) -> bool:
        match s:
            case L.For_loop():
                return True
            case L.Seq(stmts=stmts):
                return any(walks(x) for x in stmts)
        return any(local_scopes(e) for e in L.exprs_of(s))

    return walks(loop.body)


def _fuse(
    run: Sequence[L.For_loop], parallel: Callable[[L.For_loop], bool] = is_parallel_loop
) -> L.For_loop | None:
    """The loops ``run`` as one loop over their rows, if its iterations write disjoint cells;
    inside it, consecutive loops over the same cells whose cells are independent (softmax's
    ``e = x - m`` then ``e = exp(e)``) merged the same way, so a cell's steps run while its
    value is in a register."""
    row = run[0].index
    stmts = fuse_row_loops([_rename(lp, row) for lp in run], cells=True)
    fused = L.For_loop(row, run[0].from_, run[0].to_inclusive, L.Seq(tuple(stmts)))
    return fused if parallel(fused) else None


def fuse_row_loops(
    stmts: Sequence[L.Stmt],
    apart: Callable[[L.Stmt], bool] = lambda s: False,
    cells: bool = False,
    parallel: Callable[[L.For_loop], bool] = is_parallel_loop,
) -> list[L.Stmt]:
    """``stmts`` (top-level statements) with each maximal run of two or more consecutive loops
    over the same rows (zeroings of nodes over those rows included, as loops storing zeros),
    one of them walking a row (a loop or an inlined reduction inside), whose rows are
    :func:`independent` and touch at most :data:`ROW_BYTES_LIMIT` a row, replaced by one loop
    over the rows running each statement's row in turn (their symbols renamed to the
    first's). ``apart``: statements that never join a run (the CPU packed matmul's nests). The
    fused loop's iterations write disjoint cells (:func:`~arrayjit_backends.codegen.
    kernel_plan.is_parallel_loop` holds), so it runs in parallel as any such loop. With
    ``cells`` (the statements of a fused loop's row), runs of loops over single cells merge
    too, whatever their size. ``parallel``: :func:`~arrayjit_backends.codegen.kernel_plan.
    is_parallel_loop`, or a memo of it (the caller asks it of the fused loops again)."""
    result: list[L.Stmt] = []
    run: list[L.For_loop] = []
    kept: list[L.Stmt] = []  # the run's statements as written
    facts = _Facts(cells)

    def close() -> None:
        walks = cells or any(_has_row(lp) for lp in run)
        fused = _fuse(run, parallel) if len(run) >= 2 and walks else None
        result.extend(kept if fused is None else [fused])
        run.clear()
        kept.clear()

    for s in stmts:
        if run:
            lp = _row_loop(s, (run[0].from_, run[0].to_inclusive)) if not apart(s) else None
            if lp is not None and _fusable([*run, lp], facts):
                run.append(lp)
                kept.append(s)
                continue
            close()
        lp = _row_loop(s, None) if not apart(s) else None
        if lp is not None and _fusable([lp], facts):
            run.append(lp)
            kept.append(s)
        else:
            result.append(s)
    close()
    return result


def _nest(loops: Sequence[L.For_loop], body: L.Stmt, names: Mapping[Symbol, Symbol]) -> L.For_loop:
    """``body`` inside copies of the perfect nest ``loops``, every symbol renamed by ``names``
    (a fresh nest: no two top-level loops share a symbol)."""
    out = _renamed(body, names)
    for lp in reversed(loops):
        out = L.For_loop(names.get(lp.index, lp.index), lp.from_, lp.to_inclusive, out, lp.trace_it)
    assert isinstance(out, L.For_loop)
    return out


def _dot_cells(s: L.Stmt, takes: Callable[[L.For_loop], bool]) -> list[L.Stmt] | None:
    """``s`` as three loop nests if it stores each cell of a node from one inlined dot product
    (``c[i, j] := f(v; v := c0; for k: v := fma(x, w, v))``, the value reading nothing else of
    ``c``'s node, the local of ``c``'s precision) and ``takes`` the accumulating nest: ``c0``
    stored in every cell, ``c[i, j] := fma(x, w, c[i, j])`` over ``k``, then ``c[i, j] :=
    f(c[i, j])`` (left out when ``f`` is the local itself). Each cell takes the same steps from
    the same start in the same order, in the same precision: the same bits. None otherwise."""
    if not isinstance(s, L.For_loop):
        return None
    nest: list[L.For_loop] = [s]
    while isinstance(nest[-1].body, L.For_loop):
        nest.append(nest[-1].body)
    body = nest[-1].body
    if not isinstance(body, L.Set) or len(nest) < 2:
        return None
    scopes = local_scopes(body.value)
    if len(scopes) != 1 or any(g.tn is body.tn for g in reads_of(body)):
        return None
    dot = scopes[0]
    match dot.body:
        case L.Seq(
            stmts=(
                L.Set_local(scope=a, value=L.Constant() as start),
                L.For_loop(
                    body=L.Set_local(
                        scope=b, value=L.Ternop(op=ops.Ternop.fma, a=x, b=w, c=L.Get_local(scope=c))
                    )
                ) as k,
            )
        ) if a == b == c == dot.scope:
            pass
        case _:
            return None
    if dot.scope.prec is not body.tn.prec:
        return None
    cell = L.Get(body.tn, body.indices)
    step = L.Set(body.tn, body.indices, L.Ternop(ops.Ternop.fma, x, w, cell))
    acc = _nest(
        nest,
        L.For_loop(k.index, k.from_, k.to_inclusive, step, k.trace_it),
        {lp.index: fresh_symbol() for lp in nest},
    )
    if not takes(acc):
        return None
    fill = _nest(
        nest, L.Set(body.tn, body.indices, start), {lp.index: fresh_symbol() for lp in nest}
    )

    def rest(e: L.Expr) -> L.Expr:
        return cell if e is dot else L.map_children(e, rest)

    value = rest(body.value)
    if value == cell:
        return [fill, acc]
    return [fill, acc, _nest(nest, L.Set(body.tn, body.indices, value), {})]


def packed_dots(stmts: Sequence[L.Stmt], takes: Callable[[L.For_loop], bool]) -> list[L.Stmt]:
    """``stmts`` (top-level statements) with each loop nest storing every cell from one
    inlined dot product, whose accumulating nest ``takes`` accepts (the CPU packed matmul),
    split into a fill, the accumulating nest and the cells' remaining computation (see
    :func:`_dot_cells`). Attention's scores ``s = (q k^T) * scale``: the inlined form runs
    each of its 262144 cells as a 64-term dot product with a horizontal sum; the packed matmul
    runs the cells side by side, and ``s := s * scale`` then joins the softmax's row loop."""
    out: list[L.Stmt] = []
    for s in stmts:
        split = _dot_cells(s, takes)
        out.extend([s] if split is None else split)
    return out


def _writes_row_first(s: L.Stmt, tn: Tnode, row: Symbol) -> bool:
    """Whether ``s`` (a statement of a row loop's body) stores every cell of ``tn``'s row
    ``row`` before reading it: a nest of loops, each over a whole axis of ``tn``, around
    statements whose every access to ``tn`` is the cell indexed by ``row`` then those loops'
    symbols in order, the first of them a store whose value reads none of ``tn``."""
    loops: list[L.For_loop] = []
    while isinstance(s, L.For_loop):
        loops.append(s)
        s = s.body
    inner = list(s.stmts) if isinstance(s, L.Seq) else [s]
    cell = (Iterator(row), *(Iterator(lp.index) for lp in loops))
    if len(tn.dims) != len(loops) + 1 or not all(
        (lp.from_, lp.to_inclusive) == (0, d - 1) for lp, d in zip(loops, tn.dims[1:], strict=True)
    ):
        return False
    first = next((x for x in inner if any(t.tn is tn for t in (*sets_of(x), *reads_of(x)))), None)
    return (
        isinstance(first, L.Set)
        and first.tn is tn
        and all(g.tn is not tn for g in reads_of(first))
        and all(
            x.indices == cell for st in inner for x in (*sets_of(st), *reads_of(st)) if x.tn is tn
        )
    )


def resident_rows(loop: L.For_loop, only_here: Sequence[Tnode]) -> tuple[Tnode, ...]:
    """The nodes of ``only_here`` (kernel-local nodes no other statement of the routine
    touches) that the row loop ``loop`` (a :func:`fuse_row_loops` result) may hold a row of in
    an array of its own instead of their buffers, which are then never touched: every access
    indexes the node's first axis by the row symbol, and the first statement of the body
    touching the node stores its whole row and reads none of it (so the array never stands
    for a value from before the loop); the rows fit :data:`RESIDENT_BYTES` together (largest
    first). Softmax's ``e`` declared ``Local``: its row never leaves the cache."""
    if zeroes(loop.body):
        return ()
    row = Iterator(loop.index)
    body = list(loop.body.stmts) if isinstance(loop.body, L.Seq) else [loop.body]
    sets, reads = sets_of(loop.body), reads_of(loop.body)  # the same for every candidate
    chosen: list[Tnode] = []
    room = RESIDENT_BYTES
    for tn in sorted(only_here, key=lambda t: -t.size_in_bytes):
        size = max(math.prod(tn.dims[1:]), 1) * tn.prec.byte_size
        if not tn.dims or size > room or tn.prec is Prec.uint4x32:
            continue
        accesses = [x.indices for x in sets if x.tn is tn]
        accesses += [g.indices for g in reads if g.tn is tn]
        if not accesses or any(not idx or idx[0] != row for idx in accesses):
            continue
        if any(isinstance(g, L.Get_merge_buffer) and g.tn is tn for g in reads):
            continue
        first = next(x for x in body if any(t.tn is tn for t in (*sets_of(x), *reads_of(x))))
        if _writes_row_first(first, tn, loop.index):
            chosen.append(tn)
            room -= size
    return tuple(chosen)


__all__ = [
    "MAX_STEPS",
    "RESIDENT_BYTES",
    "ROW_BYTES_LIMIT",
    "fuse_row_loops",
    "independent",
    "packed_dots",
    "resident_rows",
    "row_bytes",
    "zeroes",
]
