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

Nothing here renders text or depends on a target.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from arrayjit_backends.codegen.kernel_plan import scalar_reduction
from arrayjit_ir import low_level as L
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
    if not nest or not isinstance(rest, L.For_loop):
        return None
    red = scalar_reduction(rest)
    if red is None or not red.fused:
        return None
    target = red.target
    prec = target.tn.prec
    if prec not in (Prec.single, Prec.double):
        return None
    assert isinstance(red.term, L.Binop)
    x, w = red.term.a, red.term.b
    if not (isinstance(x, L.Get) and isinstance(w, L.Get)):
        return None
    if x.tn.prec is not prec or w.tn.prec is not prec:
        return None
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


__all__ = ["GemmOperand", "GemmPlan", "Walk", "gemm_plan"]
