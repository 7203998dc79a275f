"""Cooperative reductions: a work group per output cell of a row reduction (GPU renderer).

A parallel loop nest whose work item only accumulates a long reduction into its own cell (a
row sum, a row max, a row dot product) would give each work item a whole row to walk:
neighbouring work items then read addresses a row apart (every load of a warp touches as many
cache lines as it has lanes) and a few thousand rows launch only a few groups. Instead each
cell gets a work group of ``lanes`` work items (:func:`plan_cell_reduction`): lane ``l`` takes
the terms ``l, l + lanes, l + 2 lanes, ...`` of the cell's index space (neighbouring lanes read
neighbouring terms: coalesced), accumulates them in a register, and the lanes' accumulators are
combined as a tree in local memory; lane 0 combines the result with the cell and stores it.

What stays as in the serial code:

- **accuracy** of float sums: the optimizer's blocked form (:mod:`arrayjit_ir.summation`) is
  flattened into one index space, and each lane sums its terms in blocks of
  :data:`~arrayjit_ir.summation.BLOCK` into a partial, adding the partials in order (at most
  :data:`~arrayjit_ir.summation.TOP` of them, else the cell keeps its one work item). A term
  then reaches the cell through at most ``BLOCK + TOP + log2(lanes) + 1`` additions, within the
  blocked sum's bound: O(log n) ulps;
- **max and min** combine with the NaN-propagating helpers (``aj_fmax``/``aj_fmin``), lanes
  and tree alike, so a NaN anywhere in the row reaches the cell;
- **multiply-accumulate**: each lane step is ``fma(x, w, partial)``, as each serial step is;
- **small floats** (half, bfloat16, fp8 cells): the lowering accumulates their reductions in a
  float32 local and stores it once, rounded (IR README, issue 19 item 4), so the statement is a
  ``Set`` of that local, not a loop nest into the cell: each cell keeps one work item, which
  accumulates in float32. :func:`~arrayjit_backends.codegen.kernel_plan.scalar_reduction` accepts such
  a ``Set`` (its target is the cell, its register float32); planning it here is what remains.
  An accumulation that rounds at every step (a loop nest into a small-float cell) is refused.

The accumulators start from the operation's neutral element (``-0.0`` for float sums: ``-0 +
x`` is ``x`` for every ``x``, signed zeros included), so only the final combine reads the cell.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from arrayjit_backends.codegen.c_syntax import Out
from arrayjit_backends.codegen.kernel_plan import (
    ScalarReduction,
    accumulation_step,
    gets_of,
    scalar_reduction,
    sets_of,
)
from arrayjit_ir import low_level as L
from arrayjit_ir import ops
from arrayjit_ir.indexing import AxisIndex, Iterator, index_symbols
from arrayjit_ir.summation import BLOCK, TOP
from arrayjit_tnode import Tnode

if TYPE_CHECKING:
    from arrayjit_backends.gpu.syntax import GpuSyntax

CELL_MIN_TERMS = 256
"""Terms per cell from which a cell gets a work group: below, one work item per cell keeps more
cells in flight and its row fits a few cache lines anyway."""

TERMS_PER_LANE = 8
"""Fewest terms a lane gets on average: short rows get fewer lanes (at least 32, a warp)."""


@dataclass(frozen=True)
class CellReduction:
    """A work item's body that only accumulates into its cell, as one or more reductions into
    that same cell with the same operation (a blocked sum's main tree, then the sum of its
    leftover terms), each flattened into one index space, and the work group's lane count."""

    parts: tuple[ScalarReduction, ...]
    lanes: int
    init: float | None = None
    """The value every cell was filled with just before (:func:`covers`), folded in: the
    fill's launch is dropped and lane 0 combines this constant instead of the cell's value."""

    @property
    def target(self) -> L.Set:
        return self.parts[0].target

    @property
    def op(self) -> ops.Binop:
        return self.parts[0].op


def _extent(loops: tuple[L.For_loop, ...]) -> int:
    return math.prod(max(lp.to_inclusive - lp.from_ + 1, 0) for lp in loops)


def _loop_free(st: L.Set) -> ScalarReduction | None:
    """A single accumulation into a cell (``cell = cell op term``, ``fma(x, w, cell)``) as a
    reduction of no loops; its term, a blocked sum's level, is flattened later."""
    step = accumulation_step(st.value, L.Get(st.tn, st.indices))
    if step is None:
        return None
    op, term, fused = step
    if st.tn.prec.is_float and st.tn.prec.byte_size < 4:
        return None  # small floats round at every step (see scalar_reduction)
    if any(isinstance(g, L.Get) and g.tn is st.tn for g in L.sub_exprs(term)):
        return None
    return ScalarReduction((), st, op, term, fused)


def plan_cell_reduction(
    nest: tuple[L.For_loop, ...], rest: L.Stmt, max_lanes: int
) -> CellReduction | None:
    """The cooperative shape of the body ``rest`` of the cells of ``nest`` (parallel loops,
    innermost last), when it is a long reduction into the cell (at least
    :data:`CELL_MIN_TERMS` terms) that walks rows (:func:`_walks_rows`) and whose lanes keep
    the summation bound; None where each cell keeps one work item."""
    from arrayjit_backends.gpu.syntax import flatten_blocked_sum  # no import cycle at load

    stmts = list(rest.stmts) if isinstance(rest, L.Seq) else [rest]
    parts: list[ScalarReduction] = []
    for st in stmts:
        red = (
            scalar_reduction(st)
            if isinstance(st, L.For_loop)
            else _loop_free(st)
            if isinstance(st, L.Set)
            else None
        )
        if red is None:
            return None
        parts.append(flatten_blocked_sum(red))
    if not parts:
        return None
    first = parts[0]
    for p in parts[1:]:
        if p.op is not first.op or p.target.tn is not first.target.tn:
            return None
        if p.target.indices != first.target.indices:
            return None
    lanes = cell_lanes(nest, parts, max_lanes)
    return None if lanes is None else CellReduction(tuple(parts), lanes)


def cell_lanes(
    nest: tuple[L.For_loop, ...], parts: list[ScalarReduction], max_lanes: int
) -> int | None:
    """The lanes of a work group reducing ``parts`` (flattened, one operation) for each cell of
    ``nest``: None where the cell keeps one work item (short, not along rows, or beyond the
    summation bound)."""
    terms = sum(_extent(p.loops) for p in parts)
    if terms < CELL_MIN_TERMS or max_lanes < 2 or not _walks_rows(nest, parts):
        return None
    lanes = 1 << (min(max_lanes, max(32, terms // TERMS_PER_LANE)).bit_length() - 1)
    if _blocked(parts[0]) and any(
        -(-_extent(p.loops) // lanes) > BLOCK * TOP for p in parts
    ):  # a lane would add more than TOP block partials: beyond the summation bound
        return None
    return lanes


def _walks_rows(nest: tuple[L.For_loop, ...], parts: list[ScalarReduction]) -> bool:
    """Whether lanes on the reduced axis read contiguously where cells do not: no read that
    varies along the reduction has its innermost axis follow the innermost parallel loop
    (neighbouring work items of the one-item shape already read neighbouring addresses there: a
    column sum, a matmul's right operand) and some read's innermost axis follows a part's
    innermost reduction loop (a row). A read of one value per cell (a row's mean) is neither."""
    if not nest:
        return False
    across = nest[-1].index
    along = {p.loops[-1].index for p in parts if p.loops}
    found = False
    for p in parts:
        reduced = {lp.index for lp in p.loops}
        for g in L.sub_exprs(p.term):
            if not isinstance(g, L.Get) or not g.indices:
                continue
            if not reduced & {s for i in g.indices for s in index_symbols(i)}:
                continue
            last = set(index_symbols(g.indices[-1]))
            if across in last:
                return False
            found = found or bool(last & along)
    return found


def covers(nest: tuple[L.For_loop, ...], tn: Tnode, indices: tuple[AxisIndex, ...]) -> bool:
    """Whether the cells ``tn[indices]`` over the loops of ``nest`` are every cell of ``tn``'s
    buffer (padding included), each once: each axis indexed by its own loop of ``nest``, from 0
    over the axis's whole extent."""
    dims = tn.dims
    if len(indices) != len(dims) or len(nest) != len(dims):
        return False
    loops = {lp.index: lp for lp in nest}
    seen = set()
    for idx, dim in zip(indices, dims, strict=True):
        if not isinstance(idx, Iterator) or idx.symbol not in loops or idx.symbol in seen:
            return False
        seen.add(idx.symbol)
        lp = loops[idx.symbol]
        if lp.from_ != 0 or lp.to_inclusive != dim - 1:
            return False
    return True


def reads_across(nest: tuple[L.For_loop, ...], s: L.Stmt) -> bool:
    """Whether some read in ``s`` of a node it does not write has its innermost axis follow
    the innermost loop of ``nest`` (the cells' axis): a column sum, a matmul's right operand."""
    across = {nest[-1].index} if nest else set()
    written = {st.tn for st in sets_of(s)}
    return any(
        g.tn not in written and g.indices and set(index_symbols(g.indices[-1])) & across
        for g in gets_of(s)
    )


def _blocked(red: ScalarReduction) -> bool:
    """Whether lanes sum in blocks (float sums: the summation bound); other reductions are
    exact in any order (integers, max, min) or not bounded by the rule (products)."""
    return red.op is ops.Binop.add and red.target.tn.prec.is_float


def render_cell_kernel(
    syn: GpuSyntax,
    nest: tuple[L.For_loop, ...],
    cr: CellReduction,
    out: Out,
    header: str,
    prologue: list[str],
) -> None:
    """The kernel of a cooperative reduction: work group ``g`` reduces cell ``g`` of ``nest``
    (decoded from the group id as the one-item-per-cell kernel decodes its global id); launch
    it with ``cells * cr.lanes`` work items in groups of ``cr.lanes``."""
    out.add(0, f"{header} {{")
    for line in prologue:
        out.add(1, line)
    out.add(1, f"{syn.local_qualifier} {syn.compute_type(cr.target.tn.prec)} aj_sh[{cr.lanes}];")
    out.add(1, f"const int aj_lid = (int){syn.local_id};")
    render_cell_body(syn, nest, cr, cr.lanes, out, 1)
    out.add(0, "}")


def render_cell_body(
    syn: GpuSyntax,
    nest: tuple[L.For_loop, ...],
    cr: CellReduction,
    lanes: int,
    out: Out,
    indent: int,
) -> None:
    """The statements of a work group reducing its cell of ``nest`` with ``lanes`` lanes (at
    least ``cr.lanes``, a power of two), at ``indent``: they use the kernel's local array
    ``aj_sh`` (``lanes`` values of the compute type) and lane id ``aj_lid``, and end with lane 0
    storing the cell (no barrier after it)."""
    tn, idx = cr.target.tn, cr.target.indices
    syn._decode(list(nest), out, syn.group_id, indent)
    render_lanes(syn, cr, lanes, out, indent)
    ct = syn.compute_type(tn.prec)
    cell = syn.cell(tn, idx)
    old = (
        f"(({ct}){syn.load(tn.prec, cell)})"
        if cr.init is None
        else syn.stored_const(tn.prec, cr.init)
    )
    final = syn.binop(cr.op, old, "aj_sh[0]", ct, ct not in ("float", "double"))
    out.add(indent, f"if (aj_lid == 0) {syn.assign(tn, idx, syn.store(tn.prec, final))}")


def render_lanes(syn: GpuSyntax, cr: CellReduction, lanes: int, out: Out, indent: int) -> None:
    """The lanes' share of ``cr``'s terms (the cell's loop indices already decoded), then the
    tree: afterwards ``aj_sh[0]`` holds the combined terms, for every lane (without the cell's
    value or ``cr.init``)."""
    ct = syn.compute_type(cr.target.tn.prec)
    is_int = ct not in ("float", "double")
    it = syn.index_type
    start = syn.const(ops.partial_start(cr.op, cr.target.tn.prec.is_float), ct)

    def combine(a: str, b: str) -> str:
        return syn.binop(cr.op, a, b, ct, is_int)

    out.add(indent, f"{ct} aj_acc = {start};")
    d = indent
    for red in cr.parts:
        n = _extent(red.loops)
        out.add(d, "{")
        if _blocked(red) and -(-n // lanes) > BLOCK:
            span = lanes * BLOCK
            out.add(d + 1, f"for ({it} aj_t0 = aj_lid; aj_t0 < {n}; aj_t0 += {span}) {{")
            out.add(d + 2, f"{ct} aj_part = {start};")
            out.add(d + 2, f"const {it} aj_te = aj_t0 + {span} < {n} ? aj_t0 + {span} : {n};")
            out.add(d + 2, f"for ({it} aj_t = aj_t0; aj_t < aj_te; aj_t += {lanes}) {{")
            _step(syn, red, "aj_part", out, d + 3)
            out.add(d + 2, "}")
            out.add(d + 2, f"aj_acc = {combine('aj_acc', 'aj_part')};")
            out.add(d + 1, "}")
        else:
            out.add(d + 1, f"for ({it} aj_t = aj_lid; aj_t < {n}; aj_t += {lanes}) {{")
            _step(syn, red, "aj_acc", out, d + 2)
            out.add(d + 1, "}")
        out.add(d, "}")
    syn.local_tree(out, lanes, combine, indent)


def _step(syn: GpuSyntax, red: ScalarReduction, acc: str, out: Out, indent: int) -> None:
    """Decode term ``aj_t`` of ``red``'s index space into its loop indices and accumulate it."""
    syn._decode(list(red.loops), out, "aj_t", indent)
    pre: list[str] = []
    step = syn.reduction_step(red, acc, pre, indent)
    for p in pre:
        out.add(indent, p)
    out.add(indent, f"{acc} = {step};")


__all__ = [
    "CELL_MIN_TERMS",
    "CellReduction",
    "cell_lanes",
    "covers",
    "plan_cell_reduction",
    "reads_across",
    "render_cell_body",
    "render_cell_kernel",
    "render_lanes",
]
