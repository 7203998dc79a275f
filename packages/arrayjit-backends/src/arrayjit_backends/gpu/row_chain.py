"""Row chains: row reductions and the pointwise work between them as one kernel (GPU renderer:
which statements fuse, and the row kernel).

Softmax over rows, as users write it, is five statements: a row max, ``e = x - m``,
``e = exp(e)``, a row sum of ``e``, ``y = e / s``. Each would be a launch of its own, and each
would stream the whole of ``x`` or ``e`` through memory again. When consecutive statements
(:func:`fuse_rows`) all run over the same rows, include a reduction whose lanes can share a row
(a :class:`~arrayjit_backends.gpu.planner.CellReduction`) and touch, in each row, only that
row's cells of what any of them writes, they run as one kernel with one work group per row:

- a **cell reduction** step runs as in its own kernel (lanes walk the row, a tree in local
  memory, lane 0 stores the cell), so its accuracy rules hold unchanged: blocked float sums,
  NaN-propagating max and min, ``fma`` steps; small floats are never cell reductions;
- a **pointwise** step's lanes walk the cells of its row: lane ``l`` takes cells ``l, l +
  lanes, ...`` of the loops inside the row (neighbouring lanes, neighbouring cells);
  consecutive pointwise steps over the same cells share one walk when each cell's steps touch
  only that cell of what they write (``e = x - m`` then ``e = exp(e)``);
- a step with no loops inside the row (``rstd = 1 / sqrt(var + eps)``) runs on lane 0; the
  reductions the optimizer inlined into it (``mean = sum(x) * inv_n``: a local scope summing
  the row, :func:`local_reductions`) run first on all lanes, as cell reductions do, into a
  variable of each lane;
- a barrier (local and global memory) separates the phases, so each phase sees every store
  of the phases before it, as the serial code does.

Why this is exact: the statements' rows are independent (:func:`independent`: every store is
to the row's own cells, every read of a written node is of the row's own cells), so running
them row by row, in statement order within each row, is running them statement by statement.
A node the chain reads after writing it (softmax's ``e``, ``m``, ``se``) may keep its row in a
local array of the work group (:func:`row_resident`): its reads come from there, and its stores
also reach its buffer unless no other kernel of the routine touches it and it is kernel-local
(``Local``: ``m`` and ``se`` are then never stored). This is exact because the first step
touching such a node stores its whole row, so the array never stands for a value from before
the kernel.

Chains need many rows (:data:`CHAIN_MIN_ROWS`) or short rows: a few long rows would leave the
pointwise steps a few work groups where their own kernels get a work item per cell.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import replace

from arrayjit_backends.codegen.c_syntax import Out
from arrayjit_backends.codegen.kernel_plan import (
    ScalarReduction,
    accumulation_step,
    gets_of,
    scalar_reduction,
    sets_of,
)
from arrayjit_backends.codegen.row_plan import independent
from arrayjit_backends.gpu.cell_reduction import render_cell_body, render_lanes
from arrayjit_backends.gpu.dialect import GpuSyntax
from arrayjit_backends.gpu.planner import (
    CellReduction,
    Piece,
    RowChain,
    RowStep,
    cell_lanes,
    covers,
    extent,
    flatten_blocked_sum,
)
from arrayjit_ir import low_level as L
from arrayjit_ir.indexing import Iterator
from arrayjit_tnode import Prec, Tnode

CHAIN_MIN_ROWS = 256
"""Rows from which any pointwise step joins a chain (a few work groups per compute unit)."""

CHAIN_MAX_ROW_CELLS = 1 << 14
"""Cells per row of a pointwise step that joins a chain of fewer rows (the row then fits in
cache and the whole computation is small)."""

MAX_STEPS = 32
"""Statements in one chain at most."""

RESIDENT_BYTES = 24 * 1024
"""Local memory a chain's work group may hold rows of nodes in (:func:`row_resident`): OpenCL
guarantees 32 KiB per group, CUDA 48 KiB of static shared memory; 24 KiB leaves room for the
reduction tree and, on an H100, eight groups per multiprocessor."""


def _ranges(loops: Sequence[L.For_loop]) -> list[tuple[int, int]]:
    return [(lp.from_, lp.to_inclusive) for lp in loops]


def _rows_independent(steps: Sequence[RowStep]) -> bool:
    return independent([([lp.index for lp in st.rows], st.stmt) for st in steps])


def _as_step(syn: GpuSyntax, p: Piece, rows: tuple[L.For_loop, ...]) -> RowStep | None:
    """``p`` as a step over ``rows`` (by their ranges), if it can be one."""
    k = len(rows)
    if (
        p.total is None
        or p.reduction is not None
        or p.matmul is not None
        or p.chain is not None
        or len(p.nest) < k
        or (p.cell is not None and len(p.nest) != k)
        or _ranges(p.nest[:k]) != _ranges(rows)
    ):
        return None
    inner = p.nest[k:]
    if extent(rows) < CHAIN_MIN_ROWS and extent(inner) > CHAIN_MAX_ROW_CELLS:
        return None
    found = local_reductions(p.nest, p.rest, syn.cell_lanes) if not inner else ()
    return RowStep(p.stmt, p.nest[:k], inner, p.rest, p.cell, p.fill, found)


def _fits(syn: GpuSyntax, steps: Sequence[RowStep]) -> bool:
    """Whether ``steps`` can be one chain: one compute type for the local tree, independent
    rows."""
    types = {syn.compute_type(c.target.tn.prec) for st in steps for c in st.cooperative}
    return len(types) == 1 and len(steps) <= MAX_STEPS and _rows_independent(steps)


def local_reductions(
    rows: tuple[L.For_loop, ...], rest: L.Stmt, max_lanes: int
) -> tuple[tuple[L.Local_scope, CellReduction], ...]:
    """The inlined reductions of a store into the row's cell (``rest``, run once per row) that
    lanes may share: local scopes among the operands of its value (not inside other local
    scopes) whose body is an optional constant start, then accumulations into the local with
    one reduction operation (loop nests, or a blocked sum's leftover level), each paired with
    its cooperative shape (:func:`~arrayjit_backends.gpu.planner.cell_lanes`; ``init``
    the start; where the body sets none, the local's own start, -0.0 for floats:
    :func:`~arrayjit_ir.low_level.local_start`)."""
    if not isinstance(rest, L.Set) or max_lanes < 2:
        return ()
    found: list[tuple[L.Local_scope, CellReduction]] = []
    todo: list[L.Expr] = [rest.value]
    while todo:
        e = todo.pop()
        if not isinstance(e, L.Local_scope):
            todo.extend(L.children(e))
            continue
        parts = _local_parts(e)
        if parts is None:
            continue
        init, reds = parts
        flat = [flatten_blocked_sum(r) for r in reds]
        lanes = cell_lanes(rows, flat, max_lanes)
        if lanes is not None:
            found.append((e, CellReduction(tuple(flat), lanes, init)))
    return tuple(found)


def _local_parts(e: L.Local_scope) -> tuple[float, list[ScalarReduction]] | None:
    """``(start, reductions)`` of a local scope that only reduces into its local."""
    sc = e.scope
    prec = sc.tn.prec
    if prec is Prec.uint4x32 or (prec.is_float and prec.byte_size < 4):
        return None  # small floats round at every step: their order stays
    stmts = list(e.body.stmts) if isinstance(e.body, L.Seq) else [e.body]
    init = L.local_start(sc.prec)
    match stmts:
        case [L.Set_local(scope=s0, value=L.Constant(value=v)), *_] if s0 == sc:
            init, stmts = v, stmts[1:]
    here = L.Get_local(sc)
    target = L.Set(sc.tn, (), here)  # the reduction's precision; no cell is stored
    reds: list[ScalarReduction] = []
    for st in stmts:
        loops: list[L.For_loop] = []
        while isinstance(st, L.For_loop):
            loops.append(st)
            st = st.body
        if not isinstance(st, L.Set_local) or st.scope != sc:
            return None
        step = accumulation_step(st.value, here)
        if step is None:
            return None
        op, term, fused = step
        if any(x == here for x in L.sub_exprs(term)):
            return None
        reds.append(ScalarReduction(tuple(loops), target, op, term, fused))
    if not reds or any(r.op is not reds[0].op for r in reds):
        return None
    return init, reds


def fuse_rows(syn: GpuSyntax, pieces: Sequence[Piece]) -> list[Piece]:
    """``pieces`` with each maximal run of consecutive statements that can share a row kernel
    (around a cooperative cell reduction: the statements before it, then after it) replaced by
    one piece carrying the :class:`RowChain`."""
    result: list[Piece] = []
    steps: list[RowStep] = []
    members: list[Piece] = []

    def close() -> None:
        if len(members) >= 2 or (members and steps[0].locals):
            lanes = max(c.lanes for st in steps for c in st.cooperative)
            first = members[0]
            rows = steps[0].rows
            result.append(
                replace(
                    first,
                    stmt=L.Seq(tuple(m.stmt for m in members)),
                    total=extent(rows),
                    nest=rows,
                    rest=L.Noop(),
                    cell=None,
                    fill=None,
                    chain=RowChain(tuple(steps), lanes),
                )
            )
        else:
            result.extend(members)
        members.clear()
        steps.clear()

    for p in pieces:
        if members:
            st = _as_step(syn, p, steps[0].rows)
            if st is not None and _fits(syn, [*steps, st]):
                steps.append(st)
                members.append(p)
                continue
            close()
        first = _as_step(syn, p, p.nest) if p.nest else None
        # A step alone must fit too: inlined reductions of two compute types cannot share
        # the local array of lanes (the step then keeps one work item per row).
        if first is None or not first.cooperative or not _fits(syn, [first]):
            result.append(p)
            continue
        steps.append(first)
        members.append(p)
        while result and (st := _as_step(syn, result[-1], first.rows)) is not None:
            if not _fits(syn, [st, *steps]):
                break
            steps.insert(0, st)
            members.insert(0, result.pop())
    close()
    return result


def _phases(steps: Sequence[RowStep]) -> list[list[RowStep]]:
    """Steps that run between two barriers: a cell reduction alone; consecutive lane-0 steps;
    consecutive pointwise steps over the same cells whose cells are independent (each lane's
    cells touch no cell another lane's touch)."""
    phases: list[list[RowStep]] = []
    for st in steps:
        last = phases[-1] if phases else None
        if last is not None and st.cell is None and last[0].cell is None:
            if not st.inner and not last[0].inner and not st.locals:
                last.append(st)
                continue
            if (
                st.inner
                and last[0].inner
                and _ranges(st.inner) == _ranges(last[0].inner)
                and independent(
                    [([lp.index for lp in (*x.rows, *x.inner)], x.stmt) for x in (*last, st)]
                )
            ):
                last.append(st)
                continue
        phases.append([st])
    return phases


def _row_axes(chain: RowChain, tn: Tnode) -> bool:
    """Whether every access to ``tn`` in ``chain`` indexes its leading axes by the step's row
    loops (so one work group's accesses are one row's cells)."""
    for st in chain.steps:
        rows = tuple(Iterator(lp.index) for lp in st.rows)
        accesses = [x.indices for x in sets_of(st.stmt) if x.tn is tn]
        accesses += [g.indices for g in gets_of(st.stmt) if g.tn is tn]
        if any(tuple(idx[: len(rows)]) != rows for idx in accesses):
            return False
        if any(isinstance(g, L.Get_merge_buffer) and g.tn is tn for g in L.reads(st.stmt)):
            return False
    return True


def _rendered_reads(st: RowStep) -> set[Tnode]:
    """The nodes the rendered step reads: a cell reduction starting from a folded fill reads
    its terms, not its cell."""
    cr = st.cell
    if cr is None or cr.init is None:
        return {g.tn for g in gets_of(st.stmt)}
    return {g.tn for r in cr.parts for g in L.sub_exprs(r.term) if isinstance(g, L.Get)}


def _writes_row_first(st: RowStep, tn: Tnode) -> bool:
    """Whether step ``st`` stores every cell of ``tn`` of its row before any read of it: a
    cell reduction into ``tn`` starting from a folded fill, a fill of its own cells, or a store
    covering the row that reads none of ``tn``."""
    cr = st.cell
    if cr is not None:
        return (
            cr.target.tn is tn
            and cr.init is not None
            and covers(st.rows, tn, cr.target.indices)
            and tn not in _rendered_reads(st)
        )
    if st.fill is not None and st.fill.tn is tn:
        return True
    loops = (*st.rows, *st.inner)
    stores = [x for x in sets_of(st.rest) if x.tn is tn]
    return (
        bool(stores)
        and all(covers(loops, tn, x.indices) for x in stores)
        and all(g.tn is not tn for g in gets_of(st.stmt))
    )


def row_resident(chain: RowChain, only_here: AbstractSet[Tnode]) -> dict[Tnode, bool]:
    """The nodes ``chain`` reads after writing them that it may hold a row of in local memory
    per work group, each with whether its stores must also reach its buffer (all but the
    kernel-local nodes of ``only_here``, which no other kernel touches): softmax's ``e`` is
    then read back from local memory, not from the cache hierarchy, and a kernel-local ``e``
    is never stored to memory at all. Each node's every access in the chain indexes its
    leading axes by the row; the first step touching it stores the whole row before reading
    it (so the row array never stands for a value from before the kernel); the rows fit
    :data:`RESIDENT_BYTES` together (largest first)."""
    chosen: dict[Tnode, bool] = {}
    room = RESIDENT_BYTES
    written = {x.tn for st in chain.steps for x in sets_of(st.stmt)}
    read = {tn for st in chain.steps for tn in _rendered_reads(st)}
    first: dict[Tnode, RowStep] = {}  # each node's first step, in the order nodes appear
    for st in chain.steps:
        for tn in (*(x.tn for x in sets_of(st.stmt)), *(g.tn for g in gets_of(st.stmt))):
            first.setdefault(tn, st)
    candidates = [tn for tn in first if tn in written and tn in read]
    for tn in sorted(candidates, key=lambda t: -t.size_in_bytes):
        if not _row_axes(chain, tn) or not _writes_row_first(first[tn], tn):
            continue
        size = _row_bytes(chain, tn)
        if size <= room:
            chosen[tn] = tn not in only_here
            room -= size
    return chosen


def _row_bytes(chain: RowChain, tn: Tnode) -> int:
    k = len(chain.steps[0].rows)
    return max(math.prod(tn.dims[k:]), 1) * tn.prec.byte_size


def render_row_kernel(
    syn: GpuSyntax,
    chain: RowChain,
    out: Out,
    header: str,
    prologue: list[str],
    resident: Mapping[Tnode, bool] | None = None,
) -> None:
    """The kernel of a row chain: work group ``g`` runs every step for row ``g`` (each step
    decodes its own row loops from the group id); launch it with ``chain.rows * chain.lanes``
    work items in groups of ``chain.lanes``. The nodes of ``resident`` (:func:`row_resident`)
    have a row in a local array, their stores also reaching their buffers where marked."""
    lanes = chain.lanes
    ct = next(syn.compute_type(c.target.tn.prec) for st in chain.steps for c in st.cooperative)
    out.add(0, f"{header} {{")
    for line in prologue:
        out.add(1, line)
    out.add(1, f"{syn.local_qualifier} {ct} aj_sh[{lanes}];")
    k = len(chain.steps[0].rows)
    rows: dict[Tnode, tuple[str, int, bool]] = {}
    for tn, through in (resident or {}).items():
        name = syn.fresh_name(f"row_{syn.name(tn)}")
        cells = _row_bytes(chain, tn) // tn.prec.byte_size
        out.add(1, f"{syn.local_qualifier} {syn.storage_types[tn.prec]} {name}[{cells}];")
        rows[tn] = (name, k, through)
    with syn.resident_rows(rows):
        _render_phases(syn, chain, out)
    out.add(0, "}")


def _render_phases(syn: GpuSyntax, chain: RowChain, out: Out) -> None:
    lanes = chain.lanes
    it = syn.index_type
    out.add(1, f"const int aj_lid = (int){syn.local_id};")
    for k, phase in enumerate(_phases(chain.steps)):
        if k:
            out.add(1, syn.global_barrier)
        out.add(1, "{")
        first = phase[0]
        if first.cell is not None:
            render_cell_body(syn, first.rows, first.cell, lanes, out, 2)
        elif not first.inner:
            steps = [replace(st, rest=_local_values(syn, st, lanes, out)) for st in phase]
            out.add(2, "if (aj_lid == 0) {")
            for st in steps:
                out.add(3, "{")
                syn.decode(list(st.rows), out, syn.group_id, 4)
                _body(syn, st, out, 4)
                out.add(3, "}")
            out.add(2, "}")
        else:
            # The lanes' trip count is the same for all (a uniform loop around the cells):
            # PoCL then runs a step's lanes side by side, vectorized.
            n = extent(first.inner)
            out.add(2, f"for ({it} aj_b = 0; aj_b < {n}; aj_b += {lanes}) {{")
            out.add(3, f"const {it} aj_c = aj_b + aj_lid;")
            if n % lanes:
                out.add(3, f"if (aj_c < {n}) {{")
            d = 3 if n % lanes == 0 else 4
            for st in phase:
                out.add(d, "{")
                syn.decode(list(st.rows), out, syn.group_id, d + 1)
                out.add(d + 1, "{")
                syn.decode(list(st.inner), out, "aj_c", d + 2)
                _body(syn, st, out, d + 2)
                out.add(d + 1, "}")
                out.add(d, "}")
            if n % lanes:
                out.add(3, "}")
            out.add(2, "}")
        out.add(1, "}")


def _local_values(syn: GpuSyntax, st: RowStep, lanes: int, out: Out) -> L.Stmt:
    """Render ``st``'s inlined reductions on all lanes, each into its local (declared at the
    phase's level, so the lane-0 block reads it), and return ``st.rest`` reading the locals
    instead of computing them."""
    done: dict[L.Local_scope, L.Expr] = {}
    for scope_expr, cr in st.locals:
        sc = scope_expr.scope
        ct = syn.compute_type(sc.tn.prec)
        name = syn.local(sc)
        out.add(2, syn.declare_uninitialized(sc))
        out.add(2, "{")
        syn.decode(list(st.rows), out, syn.group_id, 3)
        render_lanes(syn, cr, lanes, out, 3)
        init = syn.const(cr.init if cr.init is not None else L.local_start(sc.prec), ct)
        out.add(3, f"{name} = {syn.binop(cr.op, init, 'aj_sh[0]', ct, ct not in _FLOATS)};")
        out.add(2, "}")
        out.add(2, syn.barrier)  # every lane has read aj_sh[0] before the next tree
        done[scope_expr] = L.Get_local(sc)

    def swap(e: L.Expr) -> L.Expr:
        return done[e] if isinstance(e, L.Local_scope) and e in done else L.map_children(e, swap)

    return L.map_exprs(st.rest, swap) if done else st.rest


_FLOATS = ("float", "double")


def _body(syn: GpuSyntax, st: RowStep, out: Out, indent: int) -> None:
    """What one cell of a non-cooperative step runs (its fill first)."""
    if st.fill is not None:
        syn.stmt(st.fill, out, indent)
    red = scalar_reduction(st.rest) if isinstance(st.rest, L.For_loop) else None
    if red is not None:
        syn.register_reduction(red, out, indent)
    else:
        syn.stmt(st.rest, out, indent)


__all__ = [
    "CHAIN_MIN_ROWS",
    "fuse_rows",
    "independent",
    "render_row_kernel",
    "row_resident",
]
