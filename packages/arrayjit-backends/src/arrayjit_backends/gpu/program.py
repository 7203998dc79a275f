"""The GPU program renderer: one routine as a program of kernels launched in order on one queue.

:func:`render_program` plans each top-level statement of the optimized code
(:mod:`arrayjit_backends.gpu.planner`) and prints each resulting kernel in its shape, with a
dialect (:class:`~arrayjit_backends.gpu.dialect.GpuSyntax`):

- a loop nest whose loops write disjoint cells (:func:`~arrayjit_backends.codegen.kernel_plan.
  is_parallel_loop`) is flattened into one index space: work item ``gid`` decodes its loop
  indices by division and remainder (the innermost parallel loop varies fastest, so neighbouring
  work items touch neighbouring cells) and runs the rest of the body; ``Zero_out`` is one work
  item per cell. In a perfect nest the parallel loops are found at any depth and moved outside
  the others (:func:`~arrayjit_backends.codegen.kernel_plan.parallel_order`): a matmul the
  optimizer ordered ``i, k, j`` runs one work item per ``(i, j)`` cell with the ``k`` loop
  inside, accumulating in a register when the rest is a
  :class:`~arrayjit_backends.codegen.kernel_plan.ScalarReduction`. Each cell then sees its
  updates in the original order, so results are those of the serial code. Statements of the
  same size that touch disjoint nodes share a kernel; a plain matmul is a tiled kernel of its
  own (:mod:`arrayjit_backends.gpu.matmul`), a long reduction into each cell a work group per
  cell (:mod:`arrayjit_backends.gpu.cell_reduction`);
- a :class:`~arrayjit_backends.codegen.kernel_plan.ScalarReduction` (a loop nest accumulating
  into one cell, e.g. a full sum) runs as a grid of work groups, each reducing a strided share of
  the index space in registers and then in local memory into one partial; a second, one-group
  kernel combines the partials with the cell's value. On CPU devices (one lane per cell) it runs
  as contiguous ranges of the serial loop instead (:mod:`arrayjit_backends.gpu.full_reduction`);
- consecutive row reductions and pointwise statements over the same rows (softmax, layer norm)
  run as one kernel with a work group per row (:mod:`arrayjit_backends.gpu.row_chain`);
- anything else (a loop carrying a dependence) runs in one work item.

The program's buffers are, in order: the context nodes (each its pool pointer and byte offset;
dialects may fold them into one pointer), then the scratch buffers (the routine's local nodes,
which must outlive one kernel, and the reduction partials). Each kernel takes the buffers its
body names, in the order it first names them (:attr:`GpuKernel.buffers`: a routine's kernels
would otherwise each take every buffer, and the source would grow as kernels times nodes), then
the merge buffer (pointer and offset) and the static indices, which every kernel takes. Launch
sizes are in :class:`GpuKernel`. Kernels that are the same text but for the routine's names
(the repeated layers of a model) are defined once and launched under the first one's name with
each launch's own buffers: a GPU compiler generates the code of each distinct kernel once (PoCL
at a kernel's first launch, 60-180 ms a kernel).

Why a pool pointer plus a byte offset rather than an OpenCL sub-buffer per node: the generic
layer packs nodes into pools at offsets aligned to their element size, and an OpenCL sub-buffer's
origin must be a multiple of the device's ``CL_DEVICE_MEM_BASE_ADDR_ALIGN`` (often 1024 bits),
which such offsets are not. The kernel adds the offset and casts once, in its prologue. CUDA
folds the offset into the device pointer on the host side instead (one parameter per buffer).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace

from arrayjit_backends.codegen.c_syntax import Out
from arrayjit_backends.codegen.kernel_plan import KernelParams, kernel_params, scalar_reduction
from arrayjit_backends.gpu.cell_reduction import render_cell_kernel
from arrayjit_backends.gpu.contraction import render_contraction
from arrayjit_backends.gpu.dialect import GpuSyntax
from arrayjit_backends.gpu.full_reduction import MAX_GROUPS, render_full_reduction
from arrayjit_backends.gpu.matmul import render_matmul_kernel
from arrayjit_backends.gpu.planner import (
    Piece,
    fold_fills,
    full_reductions,
    group,
    plan_piece,
    top_statements,
)
from arrayjit_backends.gpu.row_chain import fuse_rows, render_row_kernel, row_resident
from arrayjit_backends.gpu.row_lanes import render_row_lanes, row_lanes_on
from arrayjit_ir import low_level as L
from arrayjit_ir.optimized import Optimized
from arrayjit_tnode import Tnode


@dataclass(frozen=True)
class GpuKernel:
    """One launch: ``global_size`` work items in groups of ``local_size`` (None: the driver
    chooses)."""

    name: str
    global_size: int
    local_size: int | None
    buffers: tuple[int, ...] | None = None
    """The program's buffers the kernel takes, by position (the context nodes', then the
    scratch buffers'), in the order of its parameters (the order its body first names them);
    None: every one."""


@dataclass(frozen=True)
class GpuProgram:
    """A rendered routine: source, kernels in launch order, and the parameters they share."""

    source: str
    kernels: tuple[GpuKernel, ...]
    params: KernelParams
    scratch: tuple[tuple[Tnode | None, int], ...]
    """Scratch buffers after the merge buffer: ``(local node, bytes)`` or ``(None, bytes)`` for
    reduction partials."""


def render_program(syntax: GpuSyntax, opt: Optimized, prefix: str) -> GpuProgram:
    """The routine ``opt`` in ``syntax``'s dialect, as kernels named ``<prefix>_k<n>``.

    Raises:
        UsageError: ``opt`` uses a precision the dialect does not support
            (:meth:`~arrayjit_backends.codegen.c_syntax.CSyntax.check_precisions`), or a
            statement the renderer cannot render."""
    syntax.check_precisions(opt)
    syntax.reset()
    params = kernel_params(opt)
    scratch: list[tuple[Tnode | None, int]] = [
        (tn, max(tn.size_in_bytes, 1)) for tn in opt.local_nodes
    ]
    buffers = [(syntax.name(tn), syntax.storage_types[tn.prec]) for tn in params.buffers]
    buffers += [(syntax.name(tn), syntax.storage_types[tn.prec]) for tn in opt.local_nodes]
    statements = top_statements(opt.code)
    # Reduction partials are scratch buffers too; count them first for the signature.
    reductions = full_reductions(statements, syntax.cell_lanes)
    partials: list[str] = []
    for k, full in enumerate(reductions.values()):
        name = f"partials{k}"
        partials.append(name)
        buffers.append((name, syntax.compute_type(full.target.tn.prec)))
        scratch.append((None, MAX_GROUPS * 8))
    signature, prologue = _signature(syntax, params, buffers)
    out = Out()
    kernels: list[GpuKernel] = []
    out.add(0, f"/* routine {opt.name} */")
    red_index = 0
    pieces = fold_fills(
        plan_piece(
            stmt,
            reductions.get(id(stmt)),
            syntax.group_size,
            syntax.cell_lanes,
            syntax.vector_cells and syntax.cell_lanes == 1,
            row_lanes=syntax.vector_cells and syntax.cell_lanes == 1 and row_lanes_on(),
        )
        for stmt in statements
    )
    fused = fuse_rows(syntax, pieces)
    unstored: set[Tnode] = set()  # kernel-local nodes that live in a row chain's arrays
    for kernel in group(fused):
        first = kernel[0]
        name = f"{prefix}_k{len(kernels)}"
        header = f"{syntax.kernel_prefix} {name}({signature})"
        if (chain := first.chain) is not None:
            elsewhere = {tn for p in fused if p is not first for tn in p.writes | p.reads}
            only_here = {tn for tn in opt.local_nodes if tn not in elsewhere}
            resident = row_resident(chain, only_here)
            unstored |= {tn for tn, through in resident.items() if not through}
            render_row_kernel(syntax, chain, out, header, prologue, resident)
            kernels.append(GpuKernel(name, chain.rows * chain.lanes, chain.lanes))
        elif (cr := first.cell) is not None:
            render_cell_kernel(syntax, first.nest, cr, out, header, prologue)
            assert first.total is not None
            kernels.append(GpuKernel(name, first.total * cr.lanes, cr.lanes))
        elif (red := first.reduction) is not None:
            fill, init = first.fill, None  # the constant of a fill folded in
            if fill is not None and isinstance(fill.value, L.Constant):
                init = fill.value.value
            names = (name, f"{prefix}_k{len(kernels) + 1}")
            launches = render_full_reduction(
                syntax,
                red,
                init,
                partials[red_index],
                names,
                out,
                f"{syntax.kernel_prefix} {{name}}({signature})",
                prologue,
            )
            red_index += 1
            kernels += [GpuKernel(n, g, size) for n, (g, size) in zip(names, launches, strict=True)]
        else:
            body = Out()
            local: int | None
            if first.matmul is not None:
                size, local = render_matmul_kernel(syntax, first.matmul, body)
            elif first.contraction is not None:
                size, local = render_contraction(syntax, first.contraction, body), None
            elif first.row_lanes is not None:
                size = render_row_lanes(syntax, first.row_lanes, first.fill, body)
                local = None
            else:
                size = _kernel_body(syntax, kernel, body)
                local = None if size > 1 else 1
            out.add(0, f"{header} {{")
            for line in prologue:
                out.add(1, line)
            out.lines.extend(body.lines)
            out.add(0, "}")
            kernels.append(GpuKernel(name, size, local))
    lines, kernels = _parameter_diet(syntax, out.lines, kernels, signature, buffers, params)
    lines, kernels = _share_identical(syntax, lines, kernels, buffers)
    return GpuProgram(
        syntax.program_prelude() + "\n".join(lines) + "\n",
        tuple(kernels),
        params,
        # The buffer of a node that lives in local arrays alone is never touched: one byte.
        tuple((tn, 1 if tn in unstored else size) for tn, size in scratch),
    )


def _signature(
    syntax: GpuSyntax, params: KernelParams, buffers: list[tuple[str, str]]
) -> tuple[str, list[str]]:
    """The parameter list every kernel of the program takes (``buffers``: name and element
    type of each buffer, in order), and the prologue turning them into typed pointers."""
    args: list[str] = []
    prologue: list[str] = []
    for name, ctype in buffers:
        args += syntax.buffer_params(name, ctype)
        prologue.append(syntax.buffer_prologue(name, ctype))
    if params.merge_node is not None:
        # Not restrict: in Streaming mode it is another stream's buffer of a node, which may
        # be this routine's own buffer of it (a node shared across streams).
        args += syntax.buffer_params("merge_buffer", "unsigned char")
        prologue.append(
            syntax.buffer_prologue("merge_buffer", "unsigned char").replace(
                f" {syntax.restrict} ", " "
            )
        )
    args += [f"const {syntax.index_type} {syntax.sym(s)}" for s in params.static_symbols]
    return ", ".join(args), [line for line in prologue if line]


_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _parameter_diet(
    syntax: GpuSyntax,
    lines: list[str],
    kernels: list[GpuKernel],
    signature: str,
    buffers: list[tuple[str, str]],
    params: KernelParams,
) -> tuple[list[str], list[GpuKernel]]:
    """``lines`` (the program's kernels, each rendered with the whole ``signature`` and its
    prologue) with each kernel taking only the buffers its body names, in the order it first
    names them, and ``kernels`` with those buffers (:attr:`GpuKernel.buffers`)."""
    whole = f"({signature})"
    prologue = {syntax.buffer_prologue(n, ct): k for k, (n, ct) in enumerate(buffers)}
    prologue.pop("", None)
    position = {n: k for k, (n, _) in enumerate(buffers)}
    tail, _ = _signature(syntax, KernelParams((), params.merge_node, params.static_symbols), [])
    taken: dict[str, tuple[int, ...]] = {}
    result, spans = _kernel_spans(lines, lambda line: line.endswith(f"{whole} {{"))
    for text in spans:
        body = [line for line in text[1:] if line.strip() not in prologue]
        # In the order the body first names them: kernels that differ only in their
        # buffers' names then take them alike (see _share_identical).
        words = dict.fromkeys(w for line in body for w in _WORD.findall(line))
        used = tuple(position[w] for w in words if w in position)
        args = [a for k in used for a in syntax.buffer_params(*buffers[k])]
        if tail:
            args.append(tail)
        head = text[0][: -len(f"{whole} {{")]
        taken[head.rsplit(" ", 1)[-1]] = used
        result.append(f"{head}({', '.join(args)}) {{")
        own = {line.strip(): line for line in text[1:] if line.strip() in prologue}
        result += [own[p] for k in used if (p := syntax.buffer_prologue(*buffers[k])) in own]
        result += body
    return result, [replace(k, buffers=taken[k.name]) for k in kernels]


def _kernel_spans(
    lines: list[str], is_header: Callable[[str], bool]
) -> tuple[list[str], list[list[str]]]:
    """The lines before the first kernel, and each kernel's lines: from a line ``is_header``
    accepts to the next one (the program's kernels follow one another)."""
    starts = [i for i, line in enumerate(lines) if is_header(line)]
    ends = [*starts[1:], len(lines)]
    return lines[: starts[0]] if starts else list(lines), [
        lines[a:b] for a, b in zip(starts, ends, strict=True)
    ]


def _share_identical(
    syntax: GpuSyntax, lines: list[str], kernels: list[GpuKernel], buffers: list[tuple[str, str]]
) -> tuple[list[str], list[GpuKernel]]:
    """``lines`` (the program's kernels, each taking its own buffers) with one definition of
    kernels that are the same text but for the routine's own names (its nodes, loop indices,
    temporaries, reduction partials, kernel names: the repeated layers of a model), and
    ``kernels`` launching the first of them in place of the others. A kernel's buffers are its
    parameters, in the order its body first names them, so the same text with other names is
    the same kernel given other arguments. A GPU compiler then generates code once for N such
    kernels (PoCL generates each kernel's code at its first launch: 60-180 ms a kernel)."""
    ours = syntax.generated_names() | {k.name for k in kernels}
    ours |= {_WORD.findall(p)[-1] for b in buffers for p in syntax.buffer_params(*b)}
    ours |= {name for name, _ in buffers}  # the reduction partials are named apart
    prefix = f"{syntax.kernel_prefix} "
    first: dict[str, str] = {}  # a kernel's text, normalized: the kernel that defines it
    alias: dict[str, str] = {}
    result, spans = _kernel_spans(lines, lambda line: line.startswith(prefix))
    for text in spans:
        name = text[0][len(prefix) :].split("(", 1)[0]
        numbers: dict[str, str] = {}

        def number(m: re.Match[str], numbers: dict[str, str] = numbers) -> str:
            word = m.group(0)
            if word not in ours:
                return word
            return numbers.setdefault(word, f"\0{len(numbers)}")

        key = _WORD.sub(number, "\n".join(text))
        if key in first:
            alias[name] = first[key]
            continue
        first[key] = name
        result += text
    return result, [replace(k, name=alias.get(k.name, k.name)) for k in kernels]


def _kernel_body(syntax: GpuSyntax, pieces: list[Piece], out: Out) -> int:
    """Render a group of statements as one kernel's body; returns its global size."""
    it = syntax.index_type
    total = pieces[0].total
    if total is None:  # serial statements: one work item runs them in order
        out.add(1, f"if ({syntax.global_id} != 0) return;")
        for piece in pieces:
            syntax.stmt(piece.stmt, out, 1)
        return 1
    out.add(1, f"const {it} aj_gid = ({it}){syntax.global_id};")
    if not syntax.exact_launch or total < 1:
        # A work item that may return keeps PoCL from vectorizing the work group's loop
        # over work items (a fused 2^24 elementwise kernel took twice the time): only where
        # the launch has extra work items (an empty nest still launches one).
        out.add(1, f"if (aj_gid >= {total}) return;")
    for piece in pieces:
        if len(pieces) > 1:
            out.add(1, "{")
        indent = 2 if len(pieces) > 1 else 1
        _piece(syntax, piece, out, indent)
        if len(pieces) > 1:
            out.add(1, "}")
    return max(total, 1)


def _piece(syntax: GpuSyntax, piece: Piece, out: Out, indent: int) -> None:
    """One statement of a parallel kernel, for the work item ``aj_gid``."""
    if isinstance(piece.stmt, L.Zero_out):
        tn = piece.stmt.tn
        out.add(indent, f"{syntax.name(tn)}[aj_gid] = {syntax.zero(tn.prec)};")
        return
    syntax.decode(list(piece.nest), out, "aj_gid", indent)
    rest = piece.rest
    red = scalar_reduction(rest) if isinstance(rest, L.For_loop) else None
    if piece.fill is not None:
        syntax.stmt(piece.fill, out, indent)
    if red is not None:
        syntax.register_reduction(red, out, indent)
    else:
        syntax.stmt(rest, out, indent)


__all__ = ["GpuKernel", "GpuProgram", "render_program"]
