"""Cooperative reductions: a work group per output cell of a row reduction (a GPU kernel shape).

A parallel loop nest whose work item only accumulates a long reduction into its own cell (a
row sum, a row max, a row dot product) would give each work item a whole row to walk:
neighbouring work items then read addresses a row apart (every load of a warp touches as many
cache lines as it has lanes) and a few thousand rows launch only a few groups. Instead each
cell gets a work group of ``lanes`` work items (planned by :func:`~arrayjit_backends.gpu.
planner.plan_cell_reduction`, rendered here): lane ``l`` takes the terms ``l, l + lanes, l + 2
lanes, ...`` of the cell's index space (neighbouring lanes read neighbouring terms: coalesced),
accumulates them in a register, and the lanes' accumulators are combined as a tree in local
memory; lane 0 combines the result with the cell and stores it.

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
  accumulates in float32. :func:`~arrayjit_backends.codegen.kernel_plan.scalar_reduction`
  accepts such a ``Set`` (its target is the cell, its register float32); planning it
  (:mod:`arrayjit_backends.gpu.planner`) is what remains.
  An accumulation that rounds at every step (a loop nest into a small-float cell) is refused.

The accumulators start from the operation's neutral element (``-0.0`` for float sums: ``-0 +
x`` is ``x`` for every ``x``, signed zeros included), so only the final combine reads the cell.
"""

from __future__ import annotations

from arrayjit_backends.codegen.c_syntax import Out
from arrayjit_backends.codegen.kernel_plan import ScalarReduction
from arrayjit_backends.gpu.dialect import GpuSyntax
from arrayjit_backends.gpu.planner import CellReduction, extent, sums_in_blocks
from arrayjit_ir import low_level as L
from arrayjit_ir import ops
from arrayjit_ir.summation import BLOCK


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
    syn.decode(list(nest), out, syn.group_id, indent)
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
        n = extent(red.loops)
        out.add(d, "{")
        if sums_in_blocks(red) and -(-n // lanes) > BLOCK:
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
    syn.decode(list(red.loops), out, "aj_t", indent)
    pre: list[str] = []
    step = syn.reduction_step(red, acc, pre, indent)
    for p in pre:
        out.add(indent, p)
    out.add(indent, f"{acc} = {step};")


__all__ = ["render_cell_body", "render_cell_kernel", "render_lanes"]
