"""Matmul recognition shared by the renderers: which parallel loop nests are a plain matmul.

Every renderer that has a matmul kernel of its own (the GPU renderer's tiled and register
shapes, :mod:`arrayjit_backends.gpu.matmul`; the CPU backends' packed matmul,
``arrayjit_backend_c.cpu.matmul``) asks the same question of a top-level loop nest, so the answer
is decided once, here.

Only the plain pattern is recognized (:func:`matmul_plan`): a parallel nest (from
:func:`~arrayjit_backends.codegen.kernel_plan.parallel_order`) over the cells of a float32 or
float64 node, whose rest is a single ``k`` loop of ``C[..., i, j] = fma(x, w, C[..., i, j])``
with ``x`` and ``w`` plain reads of nodes of the same precision indexed by ``{i, k}`` and
``{k, j}`` in either order (transposed operands are gathered the same way), each possibly also
by the batch loops ``...`` (the result's axes before the last two), size-1 axes by fixed
indices. Everything else keeps the loop nest.

Nothing here renders text or depends on a target.
"""

from __future__ import annotations

from dataclasses import dataclass

from arrayjit_backends.codegen.kernel_plan import fused_operands, fused_reduction
from arrayjit_ir import low_level as L
from arrayjit_ir.indexing import AxisIndex, Fixed_idx, Iterator, Symbol
from arrayjit_tnode import Prec


@dataclass(frozen=True)
class MatmulPlan:
    """A recognized matmul: cells ``rows x cols`` of ``target``, ``acc = fma(x, w, acc)`` over
    ``k``; ``x_is_a`` says whether ``x`` is the operand indexed by the rows. A size-1 axis of the
    result has no loop (the optimizer indexes it with a fixed index): ``rows`` or ``cols`` is
    then None and its extent 1. ``batch``: the parallel loops of a batched matmul (result axes
    before the last two)."""

    rows: L.For_loop | None
    cols: L.For_loop | None
    k: L.For_loop
    target: L.Set
    x: L.Get
    w: L.Get
    x_is_a: bool
    batch: tuple[L.For_loop, ...] = ()
    init: float | None = None
    """The value every cell was filled with just before, where a renderer folded that fill in
    (the fill's launch dropped; the GPU planner's ``fold_fills``): cells start from it instead
    of their stored values. :func:`matmul_plan` leaves it None."""

    @property
    def extents(self) -> tuple[int, int, int]:
        """``(m, n, k)``: the rows, the columns (1 for a size-1 axis) and the steps."""
        m, n, kk = (
            1 if lp is None else lp.to_inclusive - lp.from_ + 1
            for lp in (self.rows, self.cols, self.k)
        )
        return m, n, kk


def _loop_of(i: AxisIndex, nest: list[L.For_loop]) -> L.For_loop | bool | None:
    """The loop of ``nest`` indexing an axis by ``i``; None for a fixed index; False otherwise."""
    if isinstance(i, Fixed_idx):
        return None
    if isinstance(i, Iterator):
        return next((lp for lp in nest if lp.index == i.symbol), False)
    return False


def _reads(g: L.Expr, required: set[Symbol], optional: set[Symbol]) -> bool:
    """Whether ``g`` is a plain read indexed by each loop of ``required`` once, by loops of
    ``optional`` (batch axes: an operand shared by the batch has none) at most once, and by
    fixed indices otherwise."""
    if not isinstance(g, L.Get) or len(g.indices) != len(g.tn.dims):
        return False
    if not all(isinstance(i, Iterator | Fixed_idx) for i in g.indices):
        return False
    syms = [i.symbol for i in g.indices if isinstance(i, Iterator)]
    return required <= set(syms) <= required | optional and len(set(syms)) == len(syms)


def matmul_plan(nest: list[L.For_loop], rest: L.Stmt) -> MatmulPlan | None:
    """The :class:`MatmulPlan` of a parallel nest (from :func:`~arrayjit_backends.codegen.
    kernel_plan.parallel_order`) and the statement each cell runs, if they are a plain matmul
    (see the module docstring); else None."""
    red = fused_reduction(nest, rest)
    if red is None or len(red.loops) != 1:
        return None
    k, target = red.loops[0], red.target
    prec = target.tn.prec
    if prec not in (Prec.single, Prec.double) or len(target.indices) < 2:
        return None
    if len(target.tn.dims) != len(target.indices):
        return None
    found = [_loop_of(i, nest) for i in target.indices]
    if any(lp is False for lp in found):
        return None
    loops = [lp for lp in found if isinstance(lp, L.For_loop)]
    if len(loops) != len(nest) or {id(lp) for lp in loops} != {id(lp) for lp in nest}:
        return None
    rows, cols = found[-2], found[-1]
    assert not isinstance(rows, bool) and not isinstance(cols, bool)
    if rows is None and cols is None:
        return None
    batch = tuple(lp for lp in found[:-2] if isinstance(lp, L.For_loop))
    if any(lp.to_inclusive < lp.from_ for lp in (*nest, k)):
        return None
    operands = fused_operands(red)
    if operands is None:
        return None
    x, w = operands
    a_side = {k.index} | ({rows.index} if rows is not None else set())
    b_side = {k.index} | ({cols.index} if cols is not None else set())
    opt = {lp.index for lp in batch}
    if _reads(x, a_side, opt) and _reads(w, b_side, opt):
        return MatmulPlan(rows, cols, k, target, x, w, True, batch)
    if _reads(x, b_side, opt) and _reads(w, a_side, opt):
        return MatmulPlan(rows, cols, k, target, x, w, False, batch)
    return None


__all__ = ["MatmulPlan", "matmul_plan"]
