"""Full reductions on CPU devices: work items that each run a contiguous share of the serial loop
(GPU renderer).

On a GPU a reduction into one cell (a full sum, max...) is a grid of work groups reducing
strided shares as trees in local memory (``GpuSyntax._reduction_kernels``). A CPU device (PoCL)
runs a work group's work items as a loop on one core, one barrier-separated region after the
other: each work item of that shape walks the whole array with a stride of the grid (1 MiB for
1024 groups of 256), a new page at every load, and a 2^24 float sum took 1.9x the time of
``pyopencl.array.sum`` and 14x numpy's.

Here instead the outermost loop of the reduction is cut into contiguous ranges, one work item
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

from typing import TYPE_CHECKING

from arrayjit_backends.c_syntax import Out
from arrayjit_backends.kernel_plan import ScalarReduction
from arrayjit_ir import ops

if TYPE_CHECKING:
    from arrayjit_backends.gpu_syntax import GpuKernel, GpuSyntax

CHUNKS = 64
"""Work items of a long reduction that is cut into ranges: a few per core of a CPU."""
MAX_ITEMS = 1024
"""Most work items of a reduction given one per iteration of its loop (the partials buffer
holds as many)."""


def _extent(lo: int, hi: int) -> int:
    return max(hi - lo + 1, 0)


def plan_items(red: ScalarReduction) -> tuple[int, int]:
    """``(items, chunk)``: how many work items run ``red`` and how many iterations of its
    outermost loop each takes (the last one may take fewer)."""
    outer = red.loops[0]
    n = _extent(outer.from_, outer.to_inclusive)
    any_order = red.op in (ops.Binop.max, ops.Binop.min) or not red.target.tn.prec.is_float
    if not any_order and len(red.loops) == 1 and not red.fused and n <= MAX_ITEMS:
        chunk = 1  # the serial code's own steps: the same bits
    else:
        chunk = max(1, -(-n // CHUNKS))
    return max(1, -(-n // chunk)), chunk


def render_serial_reduction(
    syn: GpuSyntax,
    red: ScalarReduction,
    before: str,
    partials: str,
    prefix: str,
    out: Out,
    kernels: list[GpuKernel],
    header: str,
    prologue: list[str],
) -> None:
    """The two kernels of ``red`` on a CPU device, appended to ``out`` and ``kernels``:
    ranges of the outermost loop into ``partials``, then the combine into the cell, whose
    value before the reduction is the expression ``before`` (the cell, or a folded fill's
    constant). ``header`` is the kernel header with ``{name}`` for the kernel's name."""
    from arrayjit_backends.gpu_syntax import GpuKernel

    tn, idx = red.target.tn, red.target.indices
    ct = syn.compute_type(tn.prec)
    is_int = ct not in ("float", "double")
    it = syn.index_type
    items, chunk = plan_items(red)
    idempotent = red.op in (ops.Binop.max, ops.Binop.min)
    start = before if idempotent else syn.const(ops.partial_start(red.op, not is_int), ct)

    # Kernel 1: work item w runs iterations [w * chunk, (w + 1) * chunk) of the outer loop.
    name = f"{prefix}_k{len(kernels)}"
    out.add(0, header.format(name=name) + " {")
    for line in prologue:
        out.add(1, line)
    outer = red.loops[0]
    v = syn.sym(outer.index)
    out.add(1, f"const {it} aj_w = ({it}){syn.global_id};")
    out.add(1, f"const {it} aj_lo = {outer.from_} + aj_w * {chunk};")
    end = outer.to_inclusive + 1
    out.add(1, f"const {it} aj_end = aj_lo + {chunk} < {end} ? aj_lo + {chunk} : {end};")
    out.add(1, f"{ct} aj_acc = {start};")
    out.add(1, f"for ({it} {v} = aj_lo; {v} < aj_end; ++{v}) {{")
    depth = 2
    for lp in red.loops[1:]:
        out.add(depth, syn.loop_header(lp))
        depth += 1
    pre: list[str] = []
    step = syn.reduction_step(red, "aj_acc", pre, depth)
    for line in pre:
        out.add(depth, line)
    out.add(depth, f"aj_acc = {step};")
    for _ in red.loops:
        depth -= 1
        out.add(depth, "}")
    out.add(1, f"{partials}[aj_w] = aj_acc;")
    out.add(0, "}")
    kernels.append(GpuKernel(name, items, 1))

    # Kernel 2: one work item combines the cell's value with the partials, in order.
    name = f"{prefix}_k{len(kernels)}"
    cell = f"{syn.name(tn)}[{syn.offset(tn, idx)}]"
    out.add(0, header.format(name=name) + " {")
    for line in prologue:
        out.add(1, line)
    out.add(1, f"{ct} aj_acc = {before};")
    out.add(1, f"for (int aj_w = 0; aj_w < {items}; ++aj_w)")
    out.add(2, f"aj_acc = {syn.binop(red.op, 'aj_acc', f'{partials}[aj_w]', ct, is_int)};")
    out.add(1, f"{cell} = {syn.store(tn.prec, 'aj_acc')};")
    out.add(0, "}")
    kernels.append(GpuKernel(name, 1, 1))


__all__ = ["CHUNKS", "MAX_ITEMS", "plan_items", "render_serial_reduction"]
