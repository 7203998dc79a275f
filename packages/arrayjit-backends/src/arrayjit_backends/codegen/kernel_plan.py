"""Loop analysis shared by the code generators (C, OpenCL C and CUDA C, LLVM IR).

What a renderer needs to know about optimized code before it picks a shape for it, decided once
here so that every backend parallelizes and reduces the same loops:

- the kernel's parameters and their stable order (:func:`kernel_params`);
- the work a statement does (:func:`loop_work`), against which :data:`PARALLEL_MIN_WORK` decides
  whether a loop may run in parallel, and its estimated cost (:func:`loop_cost`), which decides
  how many threads it is worth (:func:`worth_threads`);
- whether a loop's iterations are independent (:func:`is_parallel_loop`), and which loops of a
  perfect nest may run as parallel work items, moved outside the others (:func:`parallel_order`);
- whether a loop nest accumulates into one cell (:func:`scalar_reduction`) or an inlined local
  (:func:`local_sum`), so it may run reassociated in registers or SIMD lanes.

Nothing here renders text or depends on a target.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from arrayjit_ir import low_level as L
from arrayjit_ir import ops
from arrayjit_ir.indexing import Affine, AxisIndex, Iterator, StaticSymbol, Symbol
from arrayjit_ir.optimized import Optimized
from arrayjit_tnode import Prec, Tnode


@dataclass(frozen=True)
class KernelParams:
    """The kernel's parameters, in order."""

    buffers: tuple[Tnode, ...]
    merge_node: Tnode | None
    static_symbols: tuple[StaticSymbol, ...]


def kernel_params(opt: Optimized) -> KernelParams:
    """The stable parameter order of a routine's kernel."""
    nodes = sorted(opt.context_nodes, key=lambda tn: (tn.debug_name, tn.id))
    return KernelParams(tuple(nodes), opt.merge_node, opt.static_symbols)


PARALLEL_MIN_WORK = 1 << 15
"""Loops doing fewer innermost iterations than this stay sequential (threads would not pay)."""


def loop_work(s: L.Stmt, *, zeroing: bool = False) -> int:
    """Innermost iterations ``s`` runs, the loops of computations inlined into it included;
    with ``zeroing``, a ``Zero_out`` counts its cells (else one)."""
    # isinstance chains and plain loops, no generators: a planner asks this of every
    # top-level statement several times (issue 38).
    if isinstance(s, L.For_loop):
        return max(s.to_inclusive - s.from_ + 1, 0) * loop_work(s.body, zeroing=zeroing)
    if isinstance(s, L.Seq):
        total = 0
        for x in s.stmts:
            total += loop_work(x, zeroing=zeroing)
        return total
    if isinstance(s, L.Set | L.Set_local):
        return max(1, _inlined_work(s.value, zeroing))
    if zeroing and isinstance(s, L.Zero_out):
        return s.tn.num_elems
    return 1


def _inlined_work(e: L.Expr, zeroing: bool) -> int:
    if isinstance(e, L.Local_scope):
        return loop_work(e.body, zeroing=zeroing)
    if isinstance(e, L.Binop):
        return _inlined_work(e.a, zeroing) + _inlined_work(e.b, zeroing)
    if isinstance(e, L.Unop):
        return _inlined_work(e.a, zeroing)
    if isinstance(e, L.Ternop):
        return (
            _inlined_work(e.a, zeroing) + _inlined_work(e.b, zeroing) + _inlined_work(e.c, zeroing)
        )
    return 0


_EXPENSIVE_UNOPS = frozenset(
    {ops.Unop.exp, ops.Unop.log, ops.Unop.exp2, ops.Unop.log2, ops.Unop.sin, ops.Unop.cos}
    | {ops.Unop.tanh}
)
_BINOP_COST = {ops.Binop.pow: 20, ops.Binop.mod: 20, ops.Binop.div: 4}


def loop_cost(s: L.Stmt) -> int:
    """A rough cost of running ``s``, in units of one vectorized load, store or arithmetic op
    per element; a math-library call counts 20, a division or square root 4. Used to decide
    how many threads a parallel loop is worth (:func:`worth_threads`)."""
    match s:
        case L.Seq(stmts=stmts):
            return sum(loop_cost(x) for x in stmts)
        case L.For_loop(from_=lo, to_inclusive=hi, body=body):
            return max(hi - lo + 1, 0) * loop_cost(body)
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
            return loop_cost(body)
        case L.Binop(op=op, a=a, b=b):
            return _BINOP_COST.get(op, 1) + _expr_cost(a) + _expr_cost(b)
        case L.Unop(op=op, a=a):
            cheap = 4 if op in (ops.Unop.sqrt, ops.Unop.recip, ops.Unop.recip_sqrt) else 1
            return (20 if op in _EXPENSIVE_UNOPS else cheap) + _expr_cost(a)
        case L.Ternop(a=a, b=b, c=c):
            return 1 + _expr_cost(a) + _expr_cost(b) + _expr_cost(c)
    return 0


TEAM_MIN_COST = 1 << 18
"""A parallel loop gets at most one thread per this much :func:`loop_cost` (about 25 us of
work on one core): handing a chunk to a helper thread that spins costs a microsecond or two;
a sleeping one is not waited for (the calling thread takes the chunks a helper has not), see
the arrayjit-backend-c README."""


def worth_threads(s: L.Stmt) -> int:
    """The most threads the top-level loop (or reduction) ``s`` is worth, at least 1: one per
    :data:`TEAM_MIN_COST` of its estimated cost. Both CPU compilers split their parallel loops
    into chunks by it; 1 means no threads at all (the loop stays serial)."""
    return max(1, loop_cost(s) // TEAM_MIN_COST)


def sets_of(s: L.Stmt) -> list[L.Set]:
    """Every store to a node in ``s`` (zeroing excluded), in order."""
    match s:
        case L.For_loop(body=body):
            return sets_of(body)
        case L.Seq(stmts=stmts):
            return [x for st in stmts for x in sets_of(st)]
        case L.Set():
            return [s]
    return []


def gets_of(s: L.Stmt) -> list[L.Get]:
    """Every read of a node in ``s`` (the merge buffer excluded), inlined computations
    included, in order (the order of :func:`~arrayjit_ir.low_level.exprs_of` and
    :func:`~arrayjit_ir.low_level.sub_exprs`)."""
    out: list[L.Get] = []
    _stmt_gets(s, out)
    return out


def reads_of(s: L.Stmt) -> list[L.Get | L.Get_merge_buffer]:
    """Every read of a node in ``s``, the merge buffer included, inlined computations
    included, in order: :func:`~arrayjit_ir.low_level.reads`, in one walk."""
    out: list[L.Get | L.Get_merge_buffer] = []
    _stmt_gets(s, out, True)
    return out


def _stmt_gets(s: L.Stmt, out: list[Any], merge: bool = False) -> None:
    # One walk appending to a list, in the order of exprs_of and sub_exprs: their
    # generators cost most of a planner's time (issue 38). ``merge``: merge-buffer reads too.
    if isinstance(s, L.Seq):
        for x in s.stmts:
            _stmt_gets(x, out, merge)
    elif isinstance(s, L.For_loop):
        _stmt_gets(s.body, out, merge)
    elif isinstance(s, L.Set | L.Set_local):
        _expr_gets_into(s.value, out, merge)


def _expr_gets_into(e: L.Expr, out: list[Any], merge: bool = False) -> None:
    if isinstance(e, L.Get):
        out.append(e)
    elif isinstance(e, L.Binop):
        _expr_gets_into(e.a, out, merge)
        _expr_gets_into(e.b, out, merge)
    elif isinstance(e, L.Unop):
        _expr_gets_into(e.a, out, merge)
    elif isinstance(e, L.Ternop):
        _expr_gets_into(e.a, out, merge)
        _expr_gets_into(e.b, out, merge)
        _expr_gets_into(e.c, out, merge)
    elif isinstance(e, L.Local_scope):
        _stmt_gets(e.body, out, merge)
    elif merge and isinstance(e, L.Get_merge_buffer):
        out.append(e)


def local_scopes(e: L.Expr) -> list[L.Local_scope]:
    """The local scopes inside ``e`` (``e`` itself included, and those inside their bodies),
    in the order of :func:`~arrayjit_ir.low_level.sub_exprs`, in one walk."""
    out: list[L.Local_scope] = []
    _expr_scopes(e, out)
    return out


def _expr_scopes(e: L.Expr, out: list[L.Local_scope]) -> None:
    if isinstance(e, L.Local_scope):
        out.append(e)
        _stmt_scopes(e.body, out)
    elif isinstance(e, L.Binop):
        _expr_scopes(e.a, out)
        _expr_scopes(e.b, out)
    elif isinstance(e, L.Unop):
        _expr_scopes(e.a, out)
    elif isinstance(e, L.Ternop):
        _expr_scopes(e.a, out)
        _expr_scopes(e.b, out)
        _expr_scopes(e.c, out)


def _stmt_scopes(s: L.Stmt, out: list[L.Local_scope]) -> None:
    if isinstance(s, L.Seq):
        for x in s.stmts:
            _stmt_scopes(x, out)
    elif isinstance(s, L.For_loop):
        _stmt_scopes(s.body, out)
    elif isinstance(s, L.Set | L.Set_local):
        _expr_scopes(s.value, out)


def _expr_gets(e: L.Expr) -> list[L.Get]:
    out: list[L.Get] = []
    _expr_gets_into(e, out)
    return out


def is_parallel_loop(loop: L.For_loop) -> bool:
    """Whether the iterations of ``loop`` write disjoint cells and read nothing another
    iteration writes: every store indexes its node by the loop symbol on some axis, every read of
    a stored node uses the same index on that axis, and nothing is zeroed inside."""
    stores = sets_of(loop.body)
    return _parallel_over(
        loop.index, stores, lambda: _has_zero_out(loop.body), lambda: gets_of(loop.body)
    )


def _parallel_over(
    index: Symbol,
    stores: Sequence[L.Set],
    zeroes: Callable[[], bool],
    gets: Callable[[], Sequence[L.Get]],
) -> bool:
    """:func:`is_parallel_loop` of a loop over ``index`` around a body with these stores,
    zeroings and reads (asked only when the stores allow it)."""
    axis: dict[Tnode, int] = {}
    for st in stores:
        k = iterator_axis(st.indices, index)
        if k < 0:
            return False
        if axis.setdefault(st.tn, k) != k:
            return False
    if zeroes():
        return False
    for g in gets():
        k = axis.get(g.tn, -1)
        if k < 0:
            continue
        if len(g.indices) <= k:
            return False
        x = g.indices[k]
        if not (x.__class__ is Iterator and x.symbol == index):
            return False
    return True


def iterator_axis(idx: Sequence[AxisIndex], symbol: Symbol | StaticSymbol) -> int:
    """The first axis of ``idx`` indexed by ``Iterator(symbol)``, or -1: ``idx.index(it)``
    without building ``it`` or calling its ``__eq__`` per axis (the planners ask it of every
    access, issue 38)."""
    for k, i in enumerate(idx):
        if i.__class__ is Iterator and i.symbol == symbol:  # as Iterator.__eq__ compares
            return k
    return -1


def parallel_order(loop: L.For_loop) -> tuple[list[L.For_loop], L.Stmt]:
    """The loops of the perfect nest headed by ``loop`` that can run as parallel work items
    (GPU work items, CPU threads), outermost first, and the statement each work item runs (the
    other loops, in their original order, around the innermost body).

    A loop is taken when it is parallel (:func:`is_parallel_loop`) over the body formed by the
    loops not yet taken; moving it outside them is then exact: its iterations touch disjoint
    cells of every written node and read no cell another iteration writes, so each cell still
    sees its updates in the original order. Loops are tried in their original order, so the
    innermost parallel loop stays innermost (contiguous accesses on neighbouring work items).
    A matmul the optimizer ordered ``i, k, j`` gives ``[i, j]`` and the ``k`` loop.
    """
    loops, body = _perfect_nest(loop)
    # Whether a loop is parallel over a nest of others around ``body`` depends only on its
    # symbol and ``body``'s stores, reads and zeroings (the loops around ``body`` add none):
    # so the loops taken one at a time, each the first parallel one left, are the parallel
    # loops in their order, each found from one walk of ``body`` (issue 38).
    stores = sets_of(body)
    zero: list[bool] = []
    reads: list[list[L.Get]] = []

    def zeroes() -> bool:
        if not zero:
            zero.append(_has_zero_out(body))
        return zero[0]

    def gets() -> list[L.Get]:
        if not reads:
            reads.append(gets_of(body))
        return reads[0]

    chosen: list[L.For_loop] = []
    rest: list[L.For_loop] = []
    for lp in loops:
        (chosen if _parallel_over(lp.index, stores, zeroes, gets) else rest).append(lp)
    return chosen, _nest(rest, body)


def _nest(loops: list[L.For_loop], body: L.Stmt) -> L.Stmt:
    """``body`` inside ``loops`` (outermost first), each loop otherwise as it was."""
    for lp in reversed(loops):
        body = replace(lp, body=body)
    return body


def _has_zero_out(s: L.Stmt) -> bool:
    match s:
        case L.Zero_out():
            return True
        case L.For_loop(body=body):
            return _has_zero_out(body)
        case L.Seq(stmts=stmts):
            return any(_has_zero_out(x) for x in stmts)
    return False


SIMD_LANES = 4
"""Lanes a vectorizing renderer counts on when it widens the blocks of blocked sums
(:func:`arrayjit_ir.summation.widen_blocks`): 4 floats or doubles (SSE, NEON, AVX)."""


REDUCTION_OPS = {ops.Binop.add: "+", ops.Binop.mul: "*", ops.Binop.max: "max", ops.Binop.min: "min"}
"""Accumulations a renderer may turn into a scalar reduction, with their OpenMP operator."""


@dataclass(frozen=True)
class ScalarReduction:
    """A perfect loop nest whose only statement accumulates into one cell:
    ``for ... for ...: tn[idx] = tn[idx] op term`` with ``idx`` fixed across the nest and
    ``term`` not reading ``tn``. It can run with the cell in a register, reassociated."""

    loops: tuple[L.For_loop, ...]
    target: L.Set
    op: ops.Binop
    term: L.Expr
    fused: bool = False
    """A multiply-accumulate: ``term`` is ``x * w`` and each step is ``fma(x, w, cell)``."""


def _index_symbols(i: AxisIndex) -> set[Symbol | StaticSymbol]:
    match i:
        case Iterator(symbol=s):
            return {s}
        case Affine(terms=terms):
            return {s for _, s in terms}
    return set()


def accumulation_step(value: L.Expr, cell: L.Expr) -> tuple[ops.Binop, L.Expr, bool] | None:
    """``(op, term, fused)`` when ``value`` is one step of accumulating into ``cell``:
    ``cell op term`` for a reduction op, or ``fma(x, w, cell)`` (a multiply-accumulate: ``add``
    of ``x * w``, ``fused``)."""
    match value:
        case L.Binop(op=op, a=a, b=term) if op in REDUCTION_OPS and a == cell:
            return op, term, False
        case L.Ternop(op=ops.Ternop.fma, a=x, b=w, c=c) if c == cell:
            return ops.Binop.add, L.Binop(ops.Binop.mul, x, w), True
    return None


def fused_reduction(nest: Sequence[L.For_loop], rest: L.Stmt) -> ScalarReduction | None:
    """The fused :class:`ScalarReduction` (one ``fma`` a step) each cell of the parallel
    ``nest`` runs, when ``rest``, the statement under the nest, is one; else None. What the
    contraction recognizers (matmul, implicit GEMM, the GPU's register tiles) start from."""
    if not nest or not isinstance(rest, L.For_loop):
        return None
    red = scalar_reduction(rest)
    return red if red is not None and red.fused else None


def fused_operands(red: ScalarReduction) -> tuple[L.Get, L.Get] | None:
    """The two reads a fused reduction (:func:`fused_reduction`) multiplies, when its target is
    a float32 or float64 cell and both are reads of nodes of its precision; else None. What the
    contraction recognizers take as their operands."""
    prec = red.target.tn.prec
    x, w = (red.term.a, red.term.b) if isinstance(red.term, L.Binop) else (None, None)
    if prec not in (Prec.single, Prec.double):
        return None
    if not (isinstance(x, L.Get) and isinstance(w, L.Get)):
        return None
    return (x, w) if x.tn.prec is prec and w.tn.prec is prec else None


def scalar_reduction(s: L.For_loop | L.Set) -> ScalarReduction | None:
    """The :class:`ScalarReduction` ``s`` is, if it is one.

    A loop nest accumulating into a cell is one, unless the cell is a half, bfloat16 or fp8:
    such a step rounds at every store and must keep its order. A reduction into such a cell
    as the lowering writes it, ``tn[idx] = (acc := tn[idx]; for ...: acc := acc op term;
    acc)`` with ``acc`` a float32 local (:attr:`~arrayjit_ir.low_level.ScopeId.acc_prec`), is
    one too: its loops are the local's, and its ``target`` is the cell's step
    ``tn[idx] = tn[idx] op term``. Accumulating it in a register of the cell's compute type
    (float32 for the small floats), reassociated, and storing the register once is what it
    means."""
    if isinstance(s, L.Set):
        return _wide_reduction(s)
    loops, body = _perfect_nest(s)
    if not isinstance(body, L.Set) or (body.tn.prec.byte_size < 4 and body.tn.prec.is_float):
        return None  # small floats round at every store: keep the interpreter's steps
    if body.tn.prec is Prec.uint4x32:
        return None  # its arithmetic keeps only lane 0 between steps: it does not reassociate
    step = accumulation_step(body.value, L.Get(body.tn, body.indices))
    if step is None:
        return None
    op, term, fused = step
    if not _reduces_into(body, loops, term):
        return None
    return ScalarReduction(tuple(loops), body, op, term, fused)


def _perfect_nest(loop: L.For_loop) -> tuple[list[L.For_loop], L.Stmt]:
    """The loops of the perfect nest headed by ``loop``, outermost first, and its body."""
    loops = [loop]
    body = loop.body
    while isinstance(body, L.For_loop):
        loops.append(body)
        body = body.body
    return loops, body


def _reduces_into(cell: L.Set, loops: list[L.For_loop], term: L.Expr) -> bool:
    """Whether accumulating ``term`` over ``loops`` into ``cell``'s one cell is a reduction: no
    loop indexes the cell, and the term reads no cell of its node."""
    looped = {lp.index for lp in loops}
    return not any(_index_symbols(i) & looped for i in cell.indices) and not any(
        g.tn is cell.tn for g in _expr_gets(term)
    )


def _wide_reduction(st: L.Set) -> ScalarReduction | None:
    """The reduction a store of a float32 accumulator into a small-float cell runs (see
    :func:`scalar_reduction`)."""
    match st.value:
        case L.Local_scope(
            scope=acc, body=L.Seq(stmts=(L.Set_local() as start, L.For_loop() as top))
        ):
            pass
        case _:
            return None
    if acc.acc_prec is not Prec.single or start != L.Set_local(acc, L.Get(st.tn, st.indices)):
        return None
    loops, body = _perfect_nest(top)
    if not isinstance(body, L.Set_local) or body.scope != acc:
        return None
    step = accumulation_step(body.value, L.Get_local(acc))
    if step is None:
        return None
    op, term, fused = step
    if not _reduces_into(st, loops, term) or any(
        isinstance(x, L.Get_local) and x.scope == acc for x in L.sub_exprs(term)
    ):
        return None
    cell = L.Get(st.tn, st.indices)
    value = (
        L.Ternop(ops.Ternop.fma, term.a, term.b, cell)
        if fused and isinstance(term, L.Binop)
        else L.Binop(op, cell, term)
    )
    return ScalarReduction(tuple(loops), L.Set(st.tn, st.indices, value), op, term, fused)


def local_sum(loop: L.For_loop) -> tuple[ops.Binop, L.ScopeId] | None:
    """``(op, local)`` (``op`` is ``add`` or ``mul``) when ``loop`` is the innermost loop of an
    inlined sum or product (``v := v + term``, ``term`` not reading ``v``) that may be
    vectorized; small-float locals round at every step and keep their order (float32
    accumulators of small-float reductions are float32 locals: they vectorize)."""
    body = loop.body
    if not isinstance(body, L.Set_local):
        return None
    sc, v = body.scope, body.value
    match v:
        case L.Binop(op=ops.Binop.add | ops.Binop.mul as op, a=a, b=term) if a == L.Get_local(sc):
            pass
        case L.Ternop(op=ops.Ternop.fma, a=x, b=w, c=c) if c == L.Get_local(sc):
            op, term = ops.Binop.add, L.Binop(ops.Binop.mul, x, w)  # a multiply-accumulate
        case _:
            return None
    if sc.prec is Prec.uint4x32 or (sc.prec.is_float and sc.prec.byte_size < 4):
        return None
    if any(isinstance(x, L.Get_local) and x.scope == sc for x in L.sub_exprs(term)):
        return None
    if has_loops(term):
        return None  # a level of a blocked sum: its inner loops carry their own pragmas
    return op, sc


def has_loops(e: L.Expr) -> bool:
    """Whether computing ``e`` runs a loop (in a local scope): such a term is no SIMD lane."""
    return any(loop_work(x.body) > 1 for x in local_scopes(e))
