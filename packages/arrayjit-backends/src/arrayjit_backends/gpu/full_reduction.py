"""Full reductions (a loop nest accumulating into one cell: a full sum, max...), a GPU kernel
shape: two kernels, partials and then a combine, in one of two shapes.

**GPU devices** (:func:`render_tree_reduction`): up to :data:`MAX_GROUPS` work groups, each
reducing a strided share of the index space in registers (neighbouring work items read
neighbouring terms) and then as a tree in local memory into one partial; then one group combines
the partials with the cell's value.

**CPU devices** (one lane per cell, :func:`render_range_reduction`): a CPU device (PoCL)
runs a work group's work items as a loop on one core, one barrier-separated region after the
other: each work item of that shape walks the whole array with a stride of the grid (1 MiB for
1024 groups of 256), a new page at every load, and a 2^24 float sum took 1.9x the time of
``pyopencl.array.sum`` and 14x numpy's.

In the CPU shape the outermost loop of the reduction is cut into contiguous ranges, one work item
(a work group of one) each; a work item runs its range of the serial loop nest with the cell
in a register and stores its partial; a second kernel of one work item combines the cell's
value with the partials in order and stores the cell. Each work item reads a contiguous slice:
what a CPU's caches and prefetchers want.

Results:

- a float sum (or product) whose loop the optimizer blocked (:mod:`arrayjit_ir.summation`: at
  most :data:`~arrayjit_ir.summation.TOP` top-level blocks, each a nest of its own) gets a work
  item per top-level block, which computes the block exactly as the serial code does; the
  combine then adds the blocks to the cell in order. A partial starts at the operation's exact
  identity (``-0.0 + x`` is ``x``, ``1.0 * x`` is ``x``), so the result has the bits of the serial
  code (tested against the interpreter). The same holds for any single-loop reduction of at most
  :data:`MAX_ITEMS` iterations that is not a multiply-accumulate;
- max, min and integer reductions are exact in any order: longer loops are cut into
  :data:`CHUNKS` ranges;
- other float reductions (a long multiply-accumulate, a nest of several loops) are cut into
  ranges too: reassociated once per range, as the GPU shape reassociates them.
"""

from __future__ import annotations

import math

from arrayjit_backends.codegen.c_syntax import Out
from arrayjit_backends.codegen.kernel_plan import ScalarReduction
from arrayjit_backends.gpu.dialect import GpuSyntax
from arrayjit_ir import ops

MAX_GROUPS = 1024
"""Work groups of a tree reduction's first kernel, and the most partials of either shape."""
CHUNKS = 64
"""Work items of a long reduction that is cut into ranges: a few per core of a CPU."""
MAX_ITEMS = 1024
"""Most work items of a reduction given one per iteration of its loop."""

Launch = tuple[int, int]
"""A kernel's launch: ``(global size, local size)``, work items in groups."""


def render_full_reduction(
    syn: GpuSyntax,
    red: ScalarReduction,
    init: float | None,
    partials: str,
    names: tuple[str, str],
    out: Out,
    header: str,
    prologue: list[str],
) -> tuple[Launch, Launch]:
    """The two kernels of ``red``, named ``names``, in the device's shape (ranges where ``syn``
    takes one lane per cell, else trees), appended to ``out``; returns their launches.
    ``init`` is the constant of a fill folded in (the cell's value before the reduction),
    ``partials`` the scratch buffer of partials, ``header`` the kernel header with ``{name}``
    for the kernel's name."""
    render = render_tree_reduction if syn.cell_lanes > 1 else render_range_reduction
    return render(syn, red, _cell_before(syn, red, init), partials, names, out, header, prologue)


def _cell_before(syn: GpuSyntax, red: ScalarReduction, init: float | None) -> str:
    """The value of the cell before the reduction, in the compute type: the folded fill's
    constant as the cell holds it, else the cell's stored value."""
    tn = red.target.tn
    if init is not None:
        return syn.stored_const(tn.prec, init)
    return f"(({syn.compute_type(tn.prec)}){syn.load(tn.prec, _cell(syn, red))})"


def _cell(syn: GpuSyntax, red: ScalarReduction) -> str:
    """The reduction's cell, as an lvalue of its node's buffer."""
    tn = red.target.tn
    return syn.cell(tn, red.target.indices)


def _accumulator(syn: GpuSyntax, red: ScalarReduction, before: str) -> tuple[str, bool, str]:
    """The compute type of ``red``'s cell, whether it is an integer type, and the value a
    partial starts from: the cell's value before (``before``) for max and min, which may see
    it twice, else the operation's exact identity (the cell joins once, in the combine)."""
    ct = syn.compute_type(red.target.tn.prec)
    is_int = ct not in ("float", "double")
    idempotent = red.op in (ops.Binop.max, ops.Binop.min)
    start = before if idempotent else syn.const(ops.partial_start(red.op, not is_int), ct)
    return ct, is_int, start


def _kernel(out: Out, header: str, name: str, prologue: list[str], body: Out) -> None:
    out.add(0, header.format(name=name) + " {")
    for line in prologue:
        out.add(1, line)
    out.lines.extend(body.lines)
    out.add(0, "}")


def render_tree_reduction(
    syn: GpuSyntax,
    red: ScalarReduction,
    before: str,
    partials: str,
    names: tuple[str, str],
    out: Out,
    header: str,
    prologue: list[str],
) -> tuple[Launch, Launch]:
    """The GPU shape of ``red`` (``before``: the cell's value before it); returns the two
    kernels' launches."""

    ct, is_int, start = _accumulator(syn, red, before)
    total = math.prod(lp.extent for lp in red.loops)
    group = syn.group_size
    groups = max(1, min(MAX_GROUPS, -(-total // group)))

    def combine(a: str, b: str) -> str:
        return syn.binop(red.op, a, b, ct, is_int)

    def tree(body: Out) -> None:
        body.add(1, f"{syn.local_qualifier} {ct} aj_sh[{group}];")
        syn.local_tree(body, group, combine)

    # Kernel 1: each group reduces a strided share of the index space into one partial.
    it = syn.index_type
    body = Out()
    body.add(1, f"const int aj_lid = (int){syn.local_id};")
    body.add(1, f"{ct} aj_acc = {start};")
    body.add(
        1,
        f"for ({it} aj_g = ({it}){syn.group_id} * {group} + aj_lid; aj_g < {total}; "
        f"aj_g += {groups * group}) {{",
    )
    inner = Out()
    syn.decode(list(red.loops), inner, "aj_g")
    pre: list[str] = []
    step = syn.reduction_step(red, "aj_acc", pre, 2)
    body.lines.extend("  " + line for line in inner.lines)
    for p in pre:
        body.add(2, p)
    body.add(2, f"aj_acc = {step};")
    body.add(1, "}")
    tree(body)
    body.add(1, f"if (aj_lid == 0) {partials}[{syn.group_id}] = aj_sh[0];")
    _kernel(out, header, names[0], prologue, body)
    # Kernel 2: one group combines the partials with the cell.
    body = Out()
    body.add(1, f"const int aj_lid = (int){syn.local_id};")
    body.add(1, f"{ct} aj_acc = {start};")
    step = combine("aj_acc", f"{partials}[aj_g]")
    body.add(1, f"for (int aj_g = aj_lid; aj_g < {groups}; aj_g += {group})")
    body.add(2, f"aj_acc = {step};")
    tree(body)
    final = combine(before, "aj_sh[0]")
    body.add(1, f"if (aj_lid == 0) {_cell(syn, red)} = {syn.store(red.target.tn.prec, final)};")
    _kernel(out, header, names[1], prologue, body)
    return (groups * group, group), (group, group)


def plan_items(red: ScalarReduction) -> tuple[int, int]:
    """``(items, chunk)``: how many work items run ``red`` and how many iterations of its
    outermost loop each takes (the last one may take fewer)."""
    outer = red.loops[0]
    n = outer.extent
    any_order = red.op in (ops.Binop.max, ops.Binop.min) or not red.target.tn.prec.is_float
    if not any_order and len(red.loops) == 1 and not red.fused and n <= MAX_ITEMS:
        chunk = 1  # the serial code's own steps: the same bits
    else:
        chunk = max(1, -(-n // CHUNKS))
    return max(1, -(-n // chunk)), chunk


def render_range_reduction(
    syn: GpuSyntax,
    red: ScalarReduction,
    before: str,
    partials: str,
    names: tuple[str, str],
    out: Out,
    header: str,
    prologue: list[str],
) -> tuple[Launch, Launch]:
    """The CPU shape of ``red`` (``before``: the cell's value before it): ranges of the
    outermost loop into ``partials``, then the combine into the cell; returns the two kernels'
    launches."""

    ct, is_int, start = _accumulator(syn, red, before)
    it = syn.index_type
    items, chunk = plan_items(red)

    # Kernel 1: work item w runs iterations [w * chunk, (w + 1) * chunk) of the outer loop.
    body = Out()
    outer = red.loops[0]
    v = syn.sym(outer.index)
    body.add(1, f"const {it} aj_w = ({it}){syn.global_id};")
    body.add(1, f"const {it} aj_lo = {outer.from_} + aj_w * {chunk};")
    end = outer.to_inclusive + 1
    body.add(1, f"const {it} aj_end = aj_lo + {chunk} < {end} ? aj_lo + {chunk} : {end};")
    body.add(1, f"{ct} aj_acc = {start};")
    body.add(1, f"for ({it} {v} = aj_lo; {v} < aj_end; ++{v}) {{")
    depth = 2
    for lp in red.loops[1:]:
        body.add(depth, syn.loop_header(lp))
        depth += 1
    pre: list[str] = []
    step = syn.reduction_step(red, "aj_acc", pre, depth)
    for line in pre:
        body.add(depth, line)
    body.add(depth, f"aj_acc = {step};")
    for _ in red.loops:
        depth -= 1
        body.add(depth, "}")
    body.add(1, f"{partials}[aj_w] = aj_acc;")
    _kernel(out, header, names[0], prologue, body)

    # Kernel 2: one work item combines the cell's value with the partials, in order.
    body = Out()
    body.add(1, f"{ct} aj_acc = {before};")
    body.add(1, f"for (int aj_w = 0; aj_w < {items}; ++aj_w)")
    body.add(2, f"aj_acc = {syn.binop(red.op, 'aj_acc', f'{partials}[aj_w]', ct, is_int)};")
    body.add(1, f"{_cell(syn, red)} = {syn.store(red.target.tn.prec, 'aj_acc')};")
    _kernel(out, header, names[1], prologue, body)
    return (items, 1), (1, 1)


__all__ = [
    "CHUNKS",
    "MAX_GROUPS",
    "MAX_ITEMS",
    "Launch",
    "plan_items",
    "render_full_reduction",
    "render_range_reduction",
    "render_tree_reduction",
]
