"""The GPU planner: how each top-level statement of a routine runs, decided before any text is
written (the kernel shapes and the program renderer only print what is decided here).

Each statement becomes a :class:`Piece` (:func:`plan_piece`):

- a loop nest whose loops write disjoint cells is flattened into one index space of work items
  (the parallel loops moved outside the others:
  :func:`~arrayjit_backends.codegen.kernel_plan.parallel_order`), one per cell; ``Zero_out`` is
  one work item per cell;
- of those, a plain matmul (:func:`~arrayjit_backends.codegen.matmul_plan.matmul_plan`) is a
  tiled kernel of its own where the device's groups are large enough (:data:`THREADS`), and a
  long reduction into each cell that walks rows is a work group per cell
  (:func:`plan_cell_reduction`: a :class:`CellReduction`);
- a :class:`~arrayjit_backends.codegen.kernel_plan.ScalarReduction` (a loop nest accumulating
  into one cell, e.g. a full sum) is a grid reduction (:func:`full_reductions`), its blocked-sum
  levels merged into one index space (:func:`flatten_blocked_sum`) on GPU devices;
- anything else (a loop carrying a dependence) runs in one work item.

Then the pieces are simplified and grouped: a fill of a whole node that the reduction right
after it starts from is folded into that reduction (:func:`fold_fills`: a launch fewer), and
consecutive pieces that can share a kernel are grouped (:func:`group`). Row chains
(:mod:`arrayjit_backends.gpu.row_chain`) fuse pieces over the same rows on top of this.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, replace

from arrayjit_backends.codegen.kernel_plan import (
    ScalarReduction,
    accumulation_step,
    gets_of,
    parallel_order,
    scalar_reduction,
    sets_of,
)
from arrayjit_backends.codegen.matmul_plan import MatmulPlan, matmul_plan
from arrayjit_backends.gpu.contraction import ContractionPlan, contraction_plan
from arrayjit_backends.gpu.row_lanes import RowLanes, row_lanes_plan
from arrayjit_ir import low_level as L
from arrayjit_ir import ops
from arrayjit_ir.indexing import AxisIndex, Iterator, index_symbols
from arrayjit_ir.summation import BLOCK, TOP
from arrayjit_tnode import Tnode

THREADS = 256
"""Work items of a tiled matmul's group; a device whose groups are smaller keeps the naive nest
(:mod:`arrayjit_backends.gpu.matmul`)."""

MAX_FUSED = 32
"""Statements fused into one kernel at most."""

CELL_MIN_TERMS = 256
"""Terms per cell from which a cell gets a work group: below, one work item per cell keeps more
cells in flight and its row fits a few cache lines anyway."""

TERMS_PER_LANE = 8
"""Fewest terms a lane gets on average: short rows get fewer lanes (at least 32, a warp)."""


# ---- cooperative reductions: a work group per cell ----


@dataclass(frozen=True)
class CellReduction:
    """A work item's body that only accumulates into its cell, as one or more reductions into
    that same cell with the same operation (a blocked sum's main tree, then the sum of its
    leftover terms), each flattened into one index space, and the work group's lane count
    (rendered by :mod:`arrayjit_backends.gpu.cell_reduction`)."""

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


def extent(loops: Iterable[L.For_loop]) -> int:
    """The iterations of the nest ``loops`` (0 where a loop is empty)."""
    return math.prod(lp.extent for lp in loops)


def sums_in_blocks(red: ScalarReduction) -> bool:
    """Whether lanes sum in blocks (float sums: the summation bound); other reductions are
    exact in any order (integers, max, min) or not bounded by the rule (products)."""
    return red.op is ops.Binop.add and red.target.tn.prec.is_float


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
    terms = sum(extent(p.loops) for p in parts)
    if terms < CELL_MIN_TERMS or max_lanes < 2 or not _walks_rows(nest, parts):
        return None
    lanes = 1 << (min(max_lanes, max(32, terms // TERMS_PER_LANE)).bit_length() - 1)
    if sums_in_blocks(parts[0]) and any(
        -(-extent(p.loops) // lanes) > BLOCK * TOP for p in parts
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


def flatten_blocked_sum(red: ScalarReduction) -> ScalarReduction:
    """``red`` with the levels of a blocked sum (:mod:`arrayjit_ir.summation`) merged into its
    loops: a term that is a local scope only adding a term over a loop nest is replaced by that
    nest's loops and term. The grid reduction reassociates anyway (strided shares, then trees),
    and it needs the whole index space to spread over work items: a blocked sum's top loop has
    at most 64 iterations."""
    if red.op is not ops.Binop.add or not red.target.tn.prec.is_float:
        return red
    loops, term = list(red.loops), red.term
    while isinstance(term, L.Local_scope):
        body, nest = term.body, []
        while isinstance(body, L.For_loop):
            nest.append(body)
            body = body.body
        sc = term.scope
        if not (
            nest
            and isinstance(body, L.Set_local)
            and body.scope == sc
            and isinstance(body.value, L.Binop)
            and body.value.op is ops.Binop.add
            and body.value.a == L.Get_local(sc)
            and not any(
                isinstance(x, L.Get_local) and x.scope == sc for x in L.sub_exprs(body.value.b)
            )
        ):
            break
        loops += nest
        term = body.value.b
    return replace(red, loops=tuple(loops), term=term)


# ---- row chains: statements run row by row as one kernel ----


@dataclass(frozen=True)
class RowStep:
    """One statement of a row chain (:mod:`arrayjit_backends.gpu.row_chain`): its row loops
    (outermost first), the parallel loops inside the row that lanes walk (none: lane 0 runs
    it), and what each of those cells runs (the folded ``fill`` first); or a cooperative
    ``cell`` reduction of the row. A lane-0 step's inlined reductions (``locals``) run on all
    lanes first."""

    stmt: L.Stmt
    rows: tuple[L.For_loop, ...]
    inner: tuple[L.For_loop, ...]
    rest: L.Stmt
    cell: CellReduction | None
    fill: L.Set | None
    locals: tuple[tuple[L.Local_scope, CellReduction], ...] = ()

    @property
    def cooperative(self) -> tuple[CellReduction, ...]:
        """The reductions this step's lanes share."""
        return (self.cell,) if self.cell is not None else tuple(c for _, c in self.locals)


@dataclass(frozen=True)
class RowChain:
    """Statements run as one kernel of a work group of ``lanes`` work items per row."""

    steps: tuple[RowStep, ...]
    lanes: int

    @property
    def rows(self) -> int:
        """The rows: the chain's work groups."""
        return extent(self.steps[0].rows)


# ---- pieces: one top-level statement each ----


def top_statements(s: L.Stmt) -> list[L.Stmt]:
    """The top-level statements of a routine's code, in order (sequences flattened, no-ops
    dropped)."""
    if isinstance(s, L.Seq):
        return [x for st in s.stmts for x in top_statements(st)]
    return [] if isinstance(s, L.Noop) else [s]


@dataclass(frozen=True)
class Piece:
    """One top-level statement and how it runs: ``total`` work items (None: one work item, the
    statement carries a dependence), decoding the loops of ``nest`` and running ``rest``; or as
    a grid ``reduction``; or a work group per cell of ``nest`` (``cell``, a kernel of its own);
    or a tiled ``matmul`` (a kernel of its own); or a row ``chain``."""

    stmt: L.Stmt
    total: int | None
    nest: tuple[L.For_loop, ...]
    rest: L.Stmt
    reduction: ScalarReduction | None
    cell: CellReduction | None = None
    fill: L.Set | None = None
    """A store of a constant into the work item's own cell, run before ``rest`` (the fill of
    the whole node before it, folded in by :func:`fold_fills`)."""
    matmul: MatmulPlan | None = None
    """A matmul run as a tiled kernel of its own (:mod:`arrayjit_backends.gpu.matmul`)."""
    chain: RowChain | None = None
    """Statements run row by row as one kernel (set by
    :func:`~arrayjit_backends.gpu.row_chain.fuse_rows`): ``stmt`` is their sequence, ``nest``
    the first one's row loops."""
    contraction: ContractionPlan | None = None
    """On CPU devices, a multiply-accumulate nest run as vectors of cells per work item (a
    kernel of its own: :mod:`arrayjit_backends.gpu.contraction`)."""
    row_lanes: RowLanes | None = None
    """On CPU devices, a nest of reductions per cell run as vectors of cells per work item (a
    kernel of its own: :mod:`arrayjit_backends.gpu.row_lanes`)."""

    @property
    def writes(self) -> set[Tnode]:
        """The nodes the statement stores to (or zeroes)."""
        zeroed = {self.stmt.tn} if isinstance(self.stmt, L.Zero_out) else set()
        return {st.tn for st in sets_of(self.stmt)} | zeroed

    @property
    def reads(self) -> set[Tnode]:
        """The nodes the statement reads."""
        return {g.tn for g in gets_of(self.stmt)}


def full_reductions(statements: Iterable[L.Stmt], cell_lanes: int) -> dict[int, ScalarReduction]:
    """The statements (by ``id``) that run as grid reductions, each with its reduction.

    On GPU devices (``cell_lanes > 1``) a blocked sum's levels are merged into one index space
    (:func:`flatten_blocked_sum`), and a small-float full reduction (a store of a float32
    accumulator, see the lowering) is one too; on CPU devices (one lane per cell) one work item
    was faster for those, and the others run as ranges of the serial loop (blocked sums keep
    their blocks)."""
    return {
        id(s): flatten_blocked_sum(red) if cell_lanes > 1 else red
        for s in statements
        if (isinstance(s, L.For_loop) or (cell_lanes > 1 and isinstance(s, L.Set)))
        and (red := scalar_reduction(s)) is not None
    }


def plan_piece(
    stmt: L.Stmt,
    red: ScalarReduction | None,
    group_size: int,
    cell_lanes: int,
    vector_cells: bool = False,
    row_lanes: bool = False,
) -> Piece:
    """How one top-level statement runs on a device of work groups of ``group_size`` and
    ``cell_lanes`` lanes per cooperative cell; ``red`` is its grid reduction, if it is one
    (:func:`full_reductions`). ``vector_cells``: a CPU device whose dialect has vector types
    (a multiply-accumulate nest that is no plain matmul gets vectors of cells per work item:
    :mod:`arrayjit_backends.gpu.contraction`); ``row_lanes``: likewise, other reductions per
    cell get vectors of rows (:mod:`arrayjit_backends.gpu.row_lanes`)."""
    if red is not None:
        return Piece(stmt, 0, (), stmt, red)
    match stmt:
        case L.Zero_out(tn=tn):
            return Piece(stmt, tn.num_elems, (), stmt, None)
        case L.For_loop():
            nest, rest = parallel_order(stmt)
            if nest:
                total = math.prod(lp.extent for lp in nest)
                tiled = matmul_plan(nest, rest) if group_size >= THREADS else None
                cell = (
                    plan_cell_reduction(tuple(nest), rest, cell_lanes)
                    if total and tiled is None
                    else None
                )
                contraction = (
                    contraction_plan(tuple(nest), rest)
                    if vector_cells and total and tiled is None and cell is None
                    else None
                )
                lanes = (
                    row_lanes_plan(tuple(nest), rest)
                    if row_lanes
                    and total
                    and tiled is None
                    and cell is None
                    and contraction is None
                    else None
                )
                return Piece(
                    stmt,
                    total,
                    tuple(nest),
                    rest,
                    None,
                    cell,
                    matmul=tiled,
                    contraction=contraction,
                    row_lanes=lanes,
                )
    return Piece(stmt, None, (), stmt, None)


def group(pieces: Iterable[Piece]) -> list[list[Piece]]:
    """Consecutive statements that can share a kernel: serial ones (one work item runs them in
    order), and parallel ones of the same size that touch no node another of them writes
    (each work item runs its cell of each; fewer launches, and far fewer kernels to build)."""
    groups: list[list[Piece]] = []
    for p in pieces:
        last = groups[-1] if groups else None
        if (
            last is not None
            and p.reduction is None
            and last[0].reduction is None
            and p.cell is None
            and last[0].cell is None
            and p.matmul is None
            and last[0].matmul is None
            and p.chain is None
            and last[0].chain is None
            and p.contraction is None
            and last[0].contraction is None
            and p.row_lanes is None
            and last[0].row_lanes is None
            and p.total == last[0].total
            and len(last) < MAX_FUSED
        ):
            if p.total is None:
                last.append(p)
                continue
            written = set().union(*(q.writes for q in last))
            touched = written.union(*(q.reads for q in last))
            if not (p.writes & touched or p.reads & written):
                last.append(p)
                continue
        groups.append([p])
    return groups


def _fill(p: Piece) -> tuple[Tnode, float] | None:
    """``(node, value)`` when ``p`` sets every cell of a node's buffer to a constant (a
    ``Zero_out``, an accumulation's neutral-element fill)."""
    match p.stmt:
        case L.Zero_out(tn=tn):
            return tn, 0.0
    match p.rest:
        case L.Set(tn=tn, indices=idx, value=L.Constant(value=v)) if covers(p.nest, tn, idx):
            return tn, v
    return None


def fold_fills(pieces: Iterable[Piece]) -> list[Piece]:
    """``pieces`` without the fills that a reduction into every cell right after them (each
    cell once, by its own work item or work group) starts from: a cooperative reduction
    combines the fill's constant instead of reading the cell, a register reduction's work item
    stores it first, so the fill's launch goes. The result is the same: the fill's value is the
    cell's value when the reduction reads it."""
    result: list[Piece] = []
    for p in pieces:
        prev = result[-1] if result else None
        fill = _fill(prev) if prev is not None else None
        cr = p.cell
        if fill is not None and (red := p.reduction) is not None:
            # A full reduction into a node of one cell: its last kernel combines the fill's
            # constant with the partials instead of reading the cell (a launch fewer).
            tn = red.target.tn
            if (
                fill[0] is tn
                and tn.num_elems == 1
                and tn.size_in_bytes == tn.prec.byte_size
                and not any(
                    isinstance(g, L.Get | L.Get_merge_buffer) and g.tn is tn
                    for g in L.sub_exprs(red.term)
                )
            ):
                result[-1] = replace(p, fill=L.Set(tn, red.target.indices, L.Constant(fill[1])))
            else:
                result.append(p)
            continue
        if fill is not None and (mp := p.matmul) is not None:
            # The matmul kernel's cells (either shape) start from the fill's constant.
            tn = mp.target.tn
            if (
                fill[0] is tn
                and mp.init is None
                and covers(p.nest, tn, mp.target.indices)
                and all(g.tn is not tn for g in (mp.x, mp.w))
            ):
                result[-1] = replace(p, matmul=replace(mp, init=fill[1]))
            else:
                result.append(p)
            continue
        if fill is not None and (cp := p.contraction) is not None:
            # The contraction's cells start from the fill's constant (as a matmul's).
            tn = cp.red.target.tn
            if (
                fill[0] is tn
                and cp.init is None
                and p.fill is None
                and covers(p.nest, tn, cp.red.target.indices)
            ):
                result[-1] = replace(p, contraction=replace(cp, init=fill[1]))
            else:
                result.append(p)
            continue
        if (
            fill is None
            or p.fill is not None
            or p.reduction is not None
            or p.matmul is not None
            or not p.nest
            or any(isinstance(g, L.Get_merge_buffer) and g.tn is fill[0] for g in L.reads(p.rest))
        ):  # (a merge buffer may be the node's own buffer: its other cells must be filled)
            result.append(p)
        elif cr is not None:
            if (
                cr.init is None
                and fill[0] is cr.target.tn
                and covers(p.nest, fill[0], cr.target.indices)
            ):
                result[-1] = replace(p, cell=replace(cr, init=fill[1]))
            else:
                result.append(p)
        elif (own := _own_cell(p, fill[0])) is not None:
            result[-1] = replace(p, fill=L.Set(fill[0], own, L.Constant(fill[1])))
        else:
            result.append(p)
    return result


def _own_cell(p: Piece, tn: Tnode) -> tuple[AxisIndex, ...] | None:
    """The indices of the one cell of ``tn`` that each work item of ``p`` writes and reads,
    when the work items' cells are every cell of ``tn``, each once (so filling its own cell
    first is filling the node first). Any such nest, rows or not (a max pooling's window,
    whose reads follow the cells' axis): the shapes that render no ``Piece.fill`` (a tiled
    matmul, a contraction, a cooperative cell) fold the fill themselves or keep it, before
    this is asked (:func:`fold_fills`)."""
    sets = [st for st in sets_of(p.rest) if st.tn is tn]
    if not sets or len({st.indices for st in sets}) != 1:
        return None
    own = sets[0].indices
    if any(g.tn is tn and g.indices != own for g in gets_of(p.rest)):
        return None
    return own if covers(p.nest, tn, own) else None


__all__ = [
    "CELL_MIN_TERMS",
    "MAX_FUSED",
    "THREADS",
    "CellReduction",
    "Piece",
    "RowChain",
    "RowStep",
    "cell_lanes",
    "covers",
    "extent",
    "flatten_blocked_sum",
    "fold_fills",
    "full_reductions",
    "group",
    "plan_cell_reduction",
    "plan_piece",
    "reads_across",
    "sums_in_blocks",
    "top_statements",
]
