"""Register contractions on CPU devices: a parallel nest of multiply-accumulate reductions (a
convolution, its gradients, a matmul with index arithmetic) as vectors of cells per work item.

The one-work-item-per-cell shape of ``C[cell] = fma(x, w, C[cell])`` over reduction loops runs
badly on a CPU OpenCL runtime (PoCL): it vectorizes a kernel across the work items of a group
only where the kernel's body has no loop of its own, so each cell's reduction runs as scalar
code, and PoCL's scalar ``fma`` is a library call (4.5x a multiply and an add; see the OpenCL
README). Here, as in the register matmul (:func:`~arrayjit_backends.gpu.matmul.
render_register_matmul`), each work item computes ``ROWS`` rows of a vector of cells: the
vector along the nest's innermost parallel loop (``j``), the rows along the one outside it
(``i``), the remaining parallel loops decoded from the work item's index. Each step of the
reduction loops loads each operand once per row it depends on: as a broadcast where it does
not depend on ``j``, a vector load where its last axis is ``j`` alone and whole vectors fit, a
gather otherwise; then one vector ``fma`` per row.

Exactness: every cell starts from its stored value (or the constant of the fill just before,
folded in) and takes ``fma(x, w, acc)`` at each step of the reduction loops in their order,
one rounding each, the operands in their order: the serial code's bits. Rows and columns past
the nest read a clamped (valid, the serial code's own) address and are never stored.

Which nests (:func:`contraction_plan`): a parallel nest of at least one loop, no loop empty,
whose rest is one fused reduction (``fma``) of float32 or float64 into a cell indexed by each
loop of the nest once (plain iterators), from two plain reads of nodes of that precision that
are not the target. Only planned where the dialect has vector types and the device is a CPU
(``cell_lanes == 1``); GPUs keep their shapes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from arrayjit_backends.codegen.c_syntax import Out
from arrayjit_backends.codegen.kernel_plan import ScalarReduction, fused_operands, fused_reduction
from arrayjit_backends.gpu.dialect import GpuSyntax
from arrayjit_ir import low_level as L
from arrayjit_ir.indexing import Iterator, Symbol, index_symbols
from arrayjit_tnode import Prec

ROWS = 8
"""Rows of cells a work item computes (the register matmul's count: 8 accumulators)."""

VECTOR_BYTES = 32
"""Bytes of a vector of cells: 8 floats, 4 doubles (an AVX2 register)."""


@dataclass(frozen=True)
class ContractionPlan:
    """A parallel nest (outermost first) whose cells each run the fused reduction ``red``;
    ``init``: the constant of a fill just before, folded in (cells start from it)."""

    nest: tuple[L.For_loop, ...]
    red: ScalarReduction
    init: float | None = None

    @property
    def operands(self) -> tuple[L.Get, L.Get]:
        term = self.red.term
        assert isinstance(term, L.Binop) and isinstance(term.a, L.Get)
        assert isinstance(term.b, L.Get)
        return term.a, term.b


def contraction_plan(nest: tuple[L.For_loop, ...], rest: L.Stmt) -> ContractionPlan | None:
    """The :class:`ContractionPlan` of a parallel nest and the statement each cell runs, when
    it is a fused reduction the module docstring describes; else None."""
    red = fused_reduction(nest, rest)
    if red is None or not red.loops:
        return None
    target = red.target
    prec = target.tn.prec
    if prec not in (Prec.single, Prec.double) or len(target.indices) != len(target.tn.dims):
        return None
    if any(lp.to_inclusive < lp.from_ for lp in (*nest, *red.loops)):
        return None
    syms = [i.symbol for i in target.indices if isinstance(i, Iterator)]
    if len(syms) != len(target.indices) or sorted(map(id, syms)) != sorted(
        id(lp.index) for lp in nest
    ):
        return None
    operands = fused_operands(red)
    if operands is None:
        return None
    for g in operands:
        if g.tn is target.tn or len(g.indices) != len(g.tn.dims):
            return None
    return ContractionPlan(nest, red)


def _uses(g: L.Get, s: Symbol) -> bool:
    return any(s in index_symbols(i) for i in g.indices)


def _contiguous(g: L.Get, s: Symbol) -> bool:
    """Whether ``g``'s last axis is indexed by ``s`` alone and no other axis uses ``s``: the
    cells of neighbouring ``s`` are neighbours in memory."""
    last = g.indices[-1]
    return (
        isinstance(last, Iterator)
        and last.symbol == s
        and not any(s in index_symbols(i) for i in g.indices[:-1])
    )


def work_item_block(
    syntax: GpuSyntax, out: Out, it: str, outer: Sequence[L.For_loop], per_block: int
) -> None:
    """Declare ``aj_blk``, the work item's block among the ``per_block`` blocks of the two
    innermost loops, and the indices of the ``outer`` loops (in type ``it``) from the global
    id: the ``outer`` loops' extents times ``per_block`` work items in all."""
    out.add(1, f"const {it} aj_gid = ({it}){syntax.global_id};")
    out.add(1, f"const {it} aj_blk = aj_gid % {per_block};")
    if outer:
        out.add(1, f"{it} aj_q = aj_gid / {per_block};")
    for lp in reversed(outer):
        out.add(1, f"const {it} {syntax.sym(lp.index)} = {lp.from_} + aj_q % {lp.extent};")
        out.add(1, f"aj_q /= {lp.extent};")


def render_contraction(syntax: GpuSyntax, plan: ContractionPlan, out: Out) -> int:
    """The body of the kernel computing ``plan`` (after the kernel's prologue), one work item
    per block of ``ROWS`` x vector cells; returns the global size (launched with no group
    size)."""
    red, nest = plan.red, plan.nest
    prec = red.target.tn.prec
    ct = syntax.compute_type(prec)
    it = syntax.index_type
    lanes = VECTOR_BYTES // prec.byte_size
    vt = f"{ct}{lanes}"
    jl = nest[-1]
    il = nest[-2] if len(nest) > 1 else None
    rows = ROWS if il is not None else 1
    n = jl.extent
    m = il.extent if il is not None else 1
    blocks_n, blocks_m = -(-n // lanes), -(-m // rows)
    per_block = blocks_m * blocks_n
    outer = nest[:-2] if il is not None else ()
    work_item_block(syntax, out, it, outer, per_block)
    out.add(1, f"const {it} aj_bi = (aj_blk / {blocks_n}) * {rows};")
    out.add(1, f"const {it} aj_bj = (aj_blk % {blocks_n}) * {lanes};")
    for r in range(rows):  # clamped: a row past the nest computes cells never stored
        out.add(
            1, f"const {it} aj_i{r} = {il.from_ if il else 0} + min(aj_bi + {r}, ({it}){m - 1});"
        )
    for c in range(lanes):
        out.add(1, f"const {it} aj_j{c} = {jl.from_} + min(aj_bj + {c}, ({it}){n - 1});")
    isym = syntax.sym(il.index) if il is not None else None
    jsym = syntax.sym(jl.index)

    def bound(r: int | None, c: int | None, text: str) -> str:
        """``text`` (a statement) in a scope where the row and column loops' indices are row
        ``r``'s and column ``c``'s (or ``aj_bj`` for the first of a vector)."""
        decls = ""
        if r is not None and isym is not None:
            decls += f"const {it} {isym} = aj_i{r}; "
        if c is not None:
            col = "aj_j0" if c < 0 else f"aj_j{c}"
            decls += f"const {it} {jsym} = {col}; "
        return f"{{ {decls}{text} }}"

    tn, idx = red.target.tn, red.target.indices
    for r in range(rows):
        if plan.init is not None:  # the fill before, folded (the planner's fold_fills)
            out.add(1, f"{vt} aj_c{r} = ({vt})({syntax.const(plan.init, ct)});")
            continue
        out.add(1, f"{vt} aj_c{r};")
        for c in range(lanes):
            cell = f"(({ct}){syntax.load(prec, syntax.cell(tn, idx))})"
            out.add(1, bound(r, c, f"aj_c{r}.s{c:x} = {cell};"))
    depth = 1
    for lp in red.loops:
        out.add(depth, syntax.loop_header(lp))
        depth += 1
    whole = n % lanes == 0
    names: list[list[str]] = []
    for k, g in enumerate(plan.operands):
        by_row = il is not None and _uses(g, il.index)
        per = [f"aj_o{k}r{r}" for r in range(rows)] if by_row else [f"aj_o{k}"] * rows
        names.append(per)
        for r in range(rows if by_row else 1):
            rr = r if by_row else None
            value = f"(({ct}){syntax.load(prec, syntax.cell(g.tn, g.indices))})"
            if not _uses(g, jl.index):
                out.add(depth, f"{vt} {per[r]};")
                out.add(depth, bound(rr, None, f"{per[r]} = ({vt})({value});"))
            elif whole and prec in (Prec.single, Prec.double) and _contiguous(g, jl.index):
                load = f"vload{lanes}(0, &{syntax.cell(g.tn, g.indices)})"
                out.add(depth, f"{vt} {per[r]};")
                out.add(depth, bound(rr, -1, f"{per[r]} = {load};"))
            else:
                out.add(depth, f"{vt} {per[r]};")
                for c in range(lanes):
                    out.add(depth, bound(rr, c, f"{per[r]}.s{c:x} = {value};"))
    for r in range(rows):
        out.add(depth, f"aj_c{r} = fma({names[0][r]}, {names[1][r]}, aj_c{r});")
    for _ in red.loops:
        depth -= 1
        out.add(depth, "}")
    for r in range(rows):
        for c in range(lanes):
            keep = f"aj_bi + {r} < {m} && aj_bj + {c} < {n}"
            store = syntax.assign(tn, idx, syntax.store(prec, f"aj_c{r}.s{c:x}"))
            out.add(1, f"if ({keep}) " + bound(r, c, store))
    return per_block * math.prod(lp.extent for lp in outer)


__all__ = ["ROWS", "VECTOR_BYTES", "ContractionPlan", "contraction_plan", "render_contraction"]
