"""Implicit-GEMM recognition shared by the renderers: which parallel loop nests are a matmul
whose operands are read through affine axes (convolutions and their gradients).

A convolution is a contraction: ``y[b,h,w,d] = sum_{i,j,c} x[b,h+i-1,w+j-1,c] * k[i,j,c,d]`` is
a matmul of ``M = b*h*w`` rows, ``N = d`` columns and ``K = i*j*c`` steps, whose ``A`` operand
is not a strided matrix but a window of ``x`` per row and step. Every axis index the IR has
(a loop, a fixed index, an affine combination of loops) is linear in the loop values, so the
element an operand reads at loop point ``p`` lies at ``offset + sum_l stride_l * p_l`` of its
buffer: the offset of a row (a step, a column) is a sum over the loops of that side alone.
:func:`gemm_plan` finds the sides and describes each operand's rows, steps and columns as a
:class:`Walk`: the offset of the ``t``-th row (step, column) in mixed radix over the side's
loops. A packing routine reads ``A[row_walk(r) + step_walk(p)]``: no bounds tests (reads
outside a node's logical range are inside its padding margins, which hold the padding value).

Which nests (:func:`gemm_plan`): a parallel nest (from
:func:`~arrayjit_backends.codegen.kernel_plan.parallel_order`) over the cells of a float32 or
float64 node, whose rest is a perfect nest of reduction loops around one
``C[...] = fma(x, w, C[...])`` with ``x`` and ``w`` reads of nodes of the result's precision
indexed by fixed indices, loops and affine combinations of loops (no static symbols); each
parallel loop indexes exactly one of ``x`` and ``w`` (no batch loop shared by both), each side
has at least one, and the result's own rows and columns each walk with one stride (the tile
store is strided). The steps are the reduction loops in their serial order, flattened: each
cell takes its ``fma`` steps in the order of the loop nest, so a kernel that follows the plan
computes the serial code's bits.

:func:`scatter_plan` recognizes the other form of a convolution's input gradient, the result
indexed by the window (``dx[b, o+k, c] += dy[b, o, d] * w[k, c, d]``): no parallel loop covers
its cells, but per window offset it is a GEMM with shifted result rows, a
:class:`ScatterPlan` of runs and shifts in the order that reproduces each cell's serial order.

Nothing here renders text or depends on a target.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from arrayjit_backends.codegen.kernel_plan import fused_operands, fused_reduction
from arrayjit_ir import low_level as L
from arrayjit_ir import ops
from arrayjit_ir.indexing import Affine, AxisIndex, Fixed_idx, Iterator, Symbol
from arrayjit_tnode import Prec, Tnode


@dataclass(frozen=True)
class Walk:
    """Offsets of the flattened points of some loops: the ``t``-th point (``0 <= t <
    extent``) lies ``sum_d ((t // inner_d) % extent_d) * stride_d`` elements from the first,
    ``dims`` the ``(extent, stride)`` of each loop, outermost first, ``inner_d`` the product of
    the extents inside ``d``. Dims of extent 1 are dropped and neighbours that walk as one
    (``stride_outer == extent_inner * stride_inner``) merged, so a walk with at most one dim
    is a plain stride (:attr:`stride`)."""

    dims: tuple[tuple[int, int], ...]

    @staticmethod
    def of(dims: list[tuple[int, int]]) -> Walk:
        """The walk of loops of ``(extent, stride)``, outermost first, simplified."""
        kept: list[tuple[int, int]] = []
        for e, s in dims:
            if e == 1:
                continue
            if kept and kept[-1][1] == e * s:
                kept[-1] = (kept[-1][0] * e, s)
            else:
                kept.append((e, s))
        return Walk(tuple(kept))

    @property
    def extent(self) -> int:
        n = 1
        for e, _ in self.dims:
            n *= e
        return n

    @property
    def stride(self) -> int | None:
        """The stride between consecutive points when the walk has one (else None)."""
        if not self.dims:
            return 0
        return self.dims[0][1] if len(self.dims) == 1 else None

    def terms(self) -> list[tuple[int, int, int]]:
        """``(inner, extent, stride)`` per dim, outermost first: the offset of ``t`` is the sum
        of ``((t // inner) % extent) * stride``."""
        out: list[tuple[int, int, int]] = []
        inner = 1
        for e, s in reversed(self.dims):
            out.append((inner, e, s))
            inner *= e
        return out[::-1]

    def offset(self, t: int) -> int:
        """The offset of the ``t``-th point (for tests and for a renderer's constant tables)."""
        return sum((t // inner) % e * s for inner, e, s in self.terms())


@dataclass(frozen=True)
class GemmOperand:
    """An operand's reads: the element of (lane ``l``, step ``p``) lies at ``offset +
    lanes.offset(l) + steps.offset(p)`` of ``tn``'s buffer (lanes: the rows of ``A``, the
    columns of ``B``)."""

    tn: Tnode
    offset: int
    lanes: Walk
    steps: Walk


@dataclass(frozen=True)
class GemmPlan:
    """A recognized implicit GEMM: ``C (m x n)`` at ``c_offset + r * c_rs + j * c_cs`` of
    ``target``'s node, each cell taking ``fma(x, w, cell)`` over the ``k`` steps; ``a`` reads
    the rows and steps, ``b`` the columns and steps; ``x_is_a``: ``x`` (the IR's first factor)
    is ``a``."""

    m: int
    n: int
    k: int
    a: GemmOperand
    b: GemmOperand
    target: Tnode
    c_offset: int
    c_rs: int
    c_cs: int
    x_is_a: bool
    rows: tuple[L.For_loop, ...] = ()
    """The loops of the rows, outermost digit first (row ``r`` is their mixed-radix point)."""
    cols: tuple[L.For_loop, ...] = ()
    """The loops of the columns, likewise."""
    steps: tuple[L.For_loop, ...] = ()
    """The reduction loops, in the serial code's order (step ``p`` is their mixed-radix
    point: the order each cell takes its ``fma`` steps in)."""


def _strides(g_tn: Tnode, indices: tuple[AxisIndex, ...]) -> tuple[int, dict[Symbol, int]] | None:
    """The constant offset and the element stride per loop symbol of a read at ``indices`` of
    ``g_tn``'s buffer; None where an index is not linear in loop symbols."""
    if len(indices) != len(g_tn.dims):
        return None
    stride, offset = 1, 0
    per: dict[Symbol, int] = {}
    for dim, i in reversed(list(zip(g_tn.dims, indices, strict=True))):
        match i:
            case Fixed_idx(value=v):
                offset += v * stride
            case Iterator(symbol=Symbol() as s):
                per[s] = per.get(s, 0) + stride
            case Affine(terms=terms, offset=o):
                offset += o * stride
                for coeff, sym in terms:
                    if not isinstance(sym, Symbol):
                        return None
                    per[sym] = per.get(sym, 0) + coeff * stride
            case _:
                return None
        stride *= dim
    return offset, per


def _extent(lp: L.For_loop) -> int:
    return lp.to_inclusive - lp.from_ + 1


def _walk(loops: list[L.For_loop], per: dict[Symbol, int]) -> Walk:
    return Walk.of([(_extent(lp), per.get(lp.index, 0)) for lp in loops])


def _base(loops: list[L.For_loop], per: dict[Symbol, int]) -> int:
    """The offset the loops' first values add (loops need not start at 0)."""
    return sum(lp.from_ * per.get(lp.index, 0) for lp in loops)


def gemm_plan(nest: list[L.For_loop], rest: L.Stmt) -> GemmPlan | None:
    """The :class:`GemmPlan` of a parallel nest (from :func:`~arrayjit_backends.codegen.
    kernel_plan.parallel_order`) and the statement each cell runs, if they are an implicit GEMM
    (see the module docstring); else None."""
    red = fused_reduction(nest, rest)
    if red is None:
        return None
    target = red.target
    operands = fused_operands(red)
    if operands is None:
        return None
    x, w = operands
    if any(_extent(lp) < 1 for lp in (*nest, *red.loops)):
        return None
    found = [_strides(g.tn, g.indices) for g in (x, w, L.Get(target.tn, target.indices))]
    if any(f is None for f in found):
        return None
    (x_off, x_per), (w_off, w_per), (c_off, c_per) = found  # type: ignore[misc]
    nest_syms = {lp.index for lp in nest}
    if not set(x_per) | set(w_per) <= nest_syms | {lp.index for lp in red.loops}:
        return None
    if set(c_per) != nest_syms or len(target.indices) != len(target.tn.dims):
        return None
    if not all(isinstance(i, Iterator | Fixed_idx) for i in target.indices):
        return None
    # Each parallel loop belongs to the operand that reads it: x's side or w's side.
    x_side = [lp for lp in nest if x_per.get(lp.index, 0) and not w_per.get(lp.index, 0)]
    w_side = [lp for lp in nest if w_per.get(lp.index, 0) and not x_per.get(lp.index, 0)]
    if len(x_side) + len(w_side) != len(nest) or not x_side or not w_side:
        return None
    # The result's own order, so that its rows and columns walk with one stride where its
    # layout allows.
    place = {i.symbol: k for k, i in enumerate(target.indices) if isinstance(i, Iterator)}
    x_side.sort(key=lambda lp: place[lp.index])
    w_side.sort(key=lambda lp: place[lp.index])
    last = target.indices[-1]
    x_is_a = not (isinstance(last, Iterator) and any(lp.index == last.symbol for lp in x_side))
    rows, cols = (x_side, w_side) if x_is_a else (w_side, x_side)
    (a_g, a_off, a_per), (b_g, b_off, b_per) = (
        ((x, x_off, x_per), (w, w_off, w_per)) if x_is_a else ((w, w_off, w_per), (x, x_off, x_per))
    )
    steps = list(red.loops)
    c_rows, c_cols = _walk(rows, c_per), _walk(cols, c_per)
    if c_rows.stride is None or c_cols.stride is None:
        return None
    m, n, k = (math.prod(_extent(lp) for lp in side) for side in (rows, cols, steps))
    a = GemmOperand(
        a_g.tn,
        a_off + _base(rows, a_per) + _base(steps, a_per),
        _walk(rows, a_per),
        _walk(steps, a_per),
    )
    b = GemmOperand(
        b_g.tn,
        b_off + _base(cols, b_per) + _base(steps, b_per),
        _walk(cols, b_per),
        _walk(steps, b_per),
    )
    c_base = c_off + _base(rows, c_per) + _base(cols, c_per)
    return GemmPlan(
        m,
        n,
        k,
        a,
        b,
        target.tn,
        c_base,
        c_rows.stride,
        c_cols.stride,
        x_is_a,
        tuple(rows),
        tuple(cols),
        tuple(steps),
    )


@dataclass(frozen=True)
class ScatterPlan:
    """A recognized scatter-form contraction (a convolution's input gradient,
    ``dx[b, o+k, c] += sum_d dy[b, o, d] * w[k, c, d]``): a sequence of plain implicit GEMMs.

    ``gemm`` is the GEMM at the first value of every loop; run ``u`` (``0 <= u <``
    ``units.extent``) and shift ``s`` add ``units.offset(u)`` (``a_units`` for ``A``,
    ``c_units`` for ``C``) and ``shifts[s]`` (``A``, ``B``, ``C``) to its operands' offsets.
    The serial nest's order is: for each run in increasing order, for each shift in order, the
    whole GEMM, its row ``r`` at ``c_rows.offset(r)`` of ``C``. ``batches``: the number of
    leading runs' groups whose cells are disjoint (``runs // batches`` runs each): threads may
    split them, not the runs inside."""

    gemm: GemmPlan
    a_units: Walk
    c_units: Walk
    c_rows: Walk
    """The offsets of the GEMM's rows in ``C`` (``gemm.c_rs`` is unused: they need not walk
    with one stride)."""
    runs: int
    batches: int
    shifts: tuple[tuple[int, int, int], ...]
    units: tuple[L.For_loop, ...] = ()
    """The loops of the runs (rows of the serial nest kept outside the GEMM), outermost first."""
    offsets: tuple[tuple[L.For_loop, int], ...] = ()
    """The shifted loops with their direction (``1`` increasing, ``-1`` decreasing), outermost
    first: shift ``s`` is their mixed-radix point in that order."""


MAX_SHIFTS = 64
"""A scatter with more shifts keeps its loop nest (each shift is one call per run)."""


def scatter_plan(loop: L.For_loop) -> ScatterPlan | None:
    """The :class:`ScatterPlan` of a top-level loop nest, if it is one.

    Which nests: a perfect nest around one ``C[...] = fma(x, w, C[...])`` (float32 or float64,
    ``x`` and ``w`` reads of other nodes of that precision, every index linear in the loops);
    the loops that do not index ``C`` (the steps) innermost; each other loop reads exactly one
    of ``x`` and ``w`` and appears in exactly one of ``C``'s indices; each of ``C``'s indices a
    loop, a fixed index, or ``a*q + b*o + e`` with ``q`` of the rows' side (``x`` or ``w``,
    the side not indexing ``C``'s last axis) and ``o`` (the *offset*) of the columns' side, at
    least one such index. Per offset point the rest is a GEMM that writes each cell once; the
    GEMMs follow each other in an order that gives every cell its contributions in the serial
    nest's order: the leading row loops (in ``C``'s order) that no offset pairs are the runs
    (``units``: their cells are disjoint), the other rows the GEMM's (their ``C`` offsets
    :attr:`ScatterPlan.c_rows`, any walk); the offsets iterate in the order and direction the
    serial nest gives a cell's contributions (the pair whose outer loop comes first outermost;
    ``q`` increasing means ``o`` decreasing when the coefficients have one sign). The columns'
    ``C`` walk has one stride. A nest whose order no such sequence reproduces keeps its loop
    nest (the checks for runs paired with offsets stay for plans that would make them)."""
    loops: list[L.For_loop] = [loop]
    while isinstance(loops[-1].body, L.For_loop):
        loops.append(loops[-1].body)
    body = loops[-1].body
    if not isinstance(body, L.Set) or body.tn.prec not in (Prec.single, Prec.double):
        return None
    prec = body.tn.prec
    cell = L.Get(body.tn, body.indices)
    match body.value:
        case L.Ternop(op=ops.Ternop.fma, a=L.Get() as x, b=L.Get() as w, c=c) if c == cell:
            pass
        case _:
            return None
    if x.tn is body.tn or w.tn is body.tn or x.tn.prec is not prec or w.tn.prec is not prec:
        return None
    if any(_extent(lp) < 1 for lp in loops) or len(body.indices) != len(body.tn.dims):
        return None
    found = [_strides(g.tn, g.indices) for g in (x, w, cell)]
    if any(f is None for f in found):
        return None
    (x_off, x_per), (w_off, w_per), (c_off, c_per) = found  # type: ignore[misc]
    syms = [lp.index for lp in loops]
    if not set(x_per) | set(w_per) | set(c_per) <= set(syms):
        return None
    pos = {s: k for k, s in enumerate(syms)}
    steps = [lp for lp in loops if not c_per.get(lp.index, 0)]
    outer = [lp for lp in loops if c_per.get(lp.index, 0)]
    if loops[: len(outer)] != outer:  # the steps innermost: each contribution one fma chain
        return None
    if any(bool(x_per.get(lp.index, 0)) == bool(w_per.get(lp.index, 0)) for lp in outer):
        return None
    # C's indices: plain loops and (row, offset) pairs.
    seen: list[Symbol] = []
    pairs: list[tuple[L.For_loop, L.For_loop, int, int]] = []  # (q, o, cq, co)
    by_sym = {lp.index: lp for lp in loops}
    last_side: str | None = None
    for k, i in enumerate(body.indices):
        match i:
            case Fixed_idx():
                continue
            case Iterator(symbol=Symbol() as s):
                seen.append(s)
                if k == len(body.indices) - 1:
                    last_side = "x" if x_per.get(s, 0) else "w"
            case Affine(terms=terms) if 1 <= len(terms) <= 2:
                if not all(isinstance(s, Symbol) and coef for coef, s in terms):
                    return None
                seen += [s for _, s in terms]  # type: ignore[misc]
                if len(terms) == 2:
                    (c1, s1), (c2, s2) = terms
                    pairs.append((by_sym[s1], by_sym[s2], c1, c2))  # type: ignore[index]
            case _:
                return None
    if not pairs or len(seen) != len(set(seen)) or set(seen) != {lp.index for lp in outer}:
        return None
    x_is_a = last_side != "x"
    row_side = x_per if x_is_a else w_per

    def is_row(lp: L.For_loop) -> bool:
        return bool(row_side.get(lp.index, 0))

    oriented: list[tuple[L.For_loop, L.For_loop, int, int]] = []
    for q, o, cq, co in pairs:
        if is_row(q) and not is_row(o):
            oriented.append((q, o, cq, co))
        elif is_row(o) and not is_row(q):
            oriented.append((o, q, co, cq))
        else:
            return None
    offset_syms = {o.index for _, o, _, _ in oriented}
    partner = {q.index: (o, cq, co) for q, o, cq, co in oriented}
    place = {s: k for k, s in enumerate(seen)}
    rows_all = sorted((lp for lp in outer if is_row(lp)), key=lambda lp: place[lp.index])
    cols = sorted(
        (lp for lp in outer if not is_row(lp) and lp.index not in offset_syms),
        key=lambda lp: place[lp.index],
    )
    if not cols or not rows_all:
        return None
    # The runs: the leading rows that no offset pairs (their cells are disjoint); the GEMM's
    # rows: the rest (their C offsets a table, :attr:`ScatterPlan.c_rows`).
    units: list[L.For_loop] = []
    for lp in rows_all:
        if lp.index in partner:
            break
        units.append(lp)
    rows = rows_all[len(units) :]
    if _walk(cols, c_per).stride is None:
        return None
    unit_syms = {lp.index for lp in units}
    # The serial order of a cell's contributions: its pairs by their outer loop's position.
    serial = sorted(oriented, key=lambda p: min(pos[p[0].index], pos[p[1].index]))
    in_units = [p for p in serial if p[0].index in unit_syms]
    in_rows = [p for p in serial if p[0].index not in unit_syms]
    if serial != in_units + in_rows:
        return None
    if [p[0].index for p in in_units] != [lp.index for lp in units if lp.index in partner]:
        return None
    for q, o, cq, co in in_units:  # a run's loop q increases: so must the serial nest's
        if pos[o.index] < pos[q.index] and cq * co > 0:
            return None
    offsets: list[tuple[L.For_loop, int]] = [(o, 1) for _, o, _, _ in in_units]
    for q, o, cq, co in in_rows:
        offsets.append((o, 1 if pos[o.index] < pos[q.index] or cq * co < 0 else -1))
    n_shifts = math.prod(_extent(o) for o, _ in offsets)
    if n_shifts > MAX_SHIFTS:
        return None
    shifts: list[tuple[int, int, int]] = []
    for point in range(n_shifts):
        a_d = b_d = c_d = 0
        rest = point
        for o, d in reversed(offsets):
            e = _extent(o)
            v = rest % e if d > 0 else e - 1 - rest % e
            rest //= e
            a_d += v * (x_per if x_is_a else w_per).get(o.index, 0)
            b_d += v * (w_per if x_is_a else x_per).get(o.index, 0)
            c_d += v * c_per.get(o.index, 0)
        shifts.append((a_d, b_d, c_d))
    batches = 1
    for lp in units:
        if lp.index in partner:
            break
        batches *= _extent(lp)
    a_g, a_off, a_per = (x, x_off, x_per) if x_is_a else (w, w_off, w_per)
    b_g, b_off, b_per = (w, w_off, w_per) if x_is_a else (x, x_off, x_per)
    fixed = [*units, *(o for o, _ in offsets)]
    m, n, k = (math.prod(_extent(lp) for lp in side) for side in (rows, cols, steps))
    a = GemmOperand(
        a_g.tn,
        a_off + _base(rows, a_per) + _base(steps, a_per) + _base(fixed, a_per),
        _walk(rows, a_per),
        _walk(steps, a_per),
    )
    b = GemmOperand(
        b_g.tn,
        b_off + _base(cols, b_per) + _base(steps, b_per) + _base(fixed, b_per),
        _walk(cols, b_per),
        _walk(steps, b_per),
    )
    c_base = c_off + _base(rows, c_per) + _base(cols, c_per) + _base(fixed, c_per)
    gemm = GemmPlan(
        m,
        n,
        k,
        a,
        b,
        body.tn,
        c_base,
        int(_walk(rows, c_per).stride or 0),  # unused: the rows' offsets are c_rows
        int(_walk(cols, c_per).stride or 0),
        x_is_a,
        tuple(rows),
        tuple(cols),
        tuple(steps),
    )
    runs = math.prod(_extent(lp) for lp in units)
    return ScatterPlan(
        gemm,
        _walk(units, a_per),
        _walk(units, c_per),
        _walk(rows, c_per),
        runs,
        batches,
        tuple(shifts),
        tuple(units),
        tuple(offsets),
    )


__all__ = [
    "MAX_SHIFTS",
    "GemmOperand",
    "GemmPlan",
    "ScatterPlan",
    "Walk",
    "gemm_plan",
    "scatter_plan",
]
