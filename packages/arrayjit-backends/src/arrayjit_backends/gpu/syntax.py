"""The GPU renderer: one routine as a program of kernels launched in order on one queue.

Each top-level statement of the optimized code becomes one or two kernels:

- a loop nest whose loops write disjoint cells (:func:`~arrayjit_backends.codegen.kernel_plan.
  is_parallel_loop`) is flattened into one index space: work item ``gid`` decodes its loop
  indices by division and remainder (the innermost parallel loop varies fastest, so neighbouring
  work items touch neighbouring cells) and runs the rest of the body; ``Zero_out`` is one work
  item per cell. In a perfect nest the parallel loops are found at any depth and moved outside
  the others (:func:`parallel_order`): a matmul the optimizer ordered ``i, k, j`` runs one work
  item per ``(i, j)`` cell with the ``k`` loop inside, accumulating in a register when the rest
  is a :class:`~arrayjit_backends.codegen.kernel_plan.ScalarReduction`. Each cell then sees its updates in
  the original order, so results are those of the serial code;
- a :class:`~arrayjit_backends.codegen.kernel_plan.ScalarReduction` (a loop nest accumulating into one
  cell, e.g. a full sum) runs as a grid of work groups, each reducing a strided share of the
  index space in registers and then in local memory into one partial; a second, one-group kernel
  combines the partials with the cell's value. On CPU devices (one lane per cell) it runs as
  contiguous ranges of the serial loop instead (:mod:`arrayjit_backends.gpu.full_reduction`);
- consecutive row reductions and pointwise statements over the same rows (softmax, layer norm)
  run as one kernel with a work group per row (:mod:`arrayjit_backends.gpu.row_chain`);
- anything else (a loop carrying a dependence) runs in one work item.

Every kernel of a program takes the same parameters: for each context node, its pool pointer
and byte offset (dialects may fold them into one pointer); then the scratch buffers (the
routine's local nodes, which must outlive one kernel, and the reduction partials), then the merge
buffer (pointer and offset), then the static indices. Launch sizes are in :class:`GpuKernel`.

Why a pool pointer plus a byte offset rather than an OpenCL sub-buffer per node: the generic
layer packs nodes into pools at offsets aligned to their element size, and an OpenCL sub-buffer's
origin must be a multiple of the device's ``CL_DEVICE_MEM_BASE_ADDR_ALIGN`` (often 1024 bits),
which such offsets are not. The kernel adds the offset and casts once, in its prologue. CUDA
folds the offset into the device pointer on the host side instead (one parameter per buffer).

Dialects (OpenCL C, CUDA C) set the qualifiers, the work-item builtins and the conversion
helpers.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import ClassVar

from arrayjit_backends.codegen.c_prelude import float_to_int_helpers
from arrayjit_backends.codegen.c_syntax import CSyntax, Out
from arrayjit_backends.codegen.kernel_plan import (
    KernelParams,
    ScalarReduction,
    gets_of,
    is_parallel_loop,
    kernel_params,
    scalar_reduction,
    sets_of,
)
from arrayjit_backends.gpu.cell_reduction import (
    CellReduction,
    covers,
    plan_cell_reduction,
    reads_across,
    render_cell_kernel,
)
from arrayjit_backends.gpu.full_reduction import MAX_GROUPS, render_full_reduction
from arrayjit_backends.gpu.matmul import THREADS, MatmulPlan, matmul_plan, render_matmul_kernel
from arrayjit_backends.gpu.row_chain import RowChain, fuse_rows, render_row_kernel, row_resident
from arrayjit_ir import low_level as L
from arrayjit_ir import ops
from arrayjit_ir.indexing import AxisIndex
from arrayjit_ir.optimized import Optimized
from arrayjit_tnode import Prec, Tnode


@dataclass(frozen=True)
class GpuKernel:
    """One launch: ``global_size`` work items in groups of ``local_size`` (None: the driver
    chooses)."""

    name: str
    global_size: int
    local_size: int | None


@dataclass(frozen=True)
class GpuProgram:
    """A rendered routine: source, kernels in launch order, and the parameters they share."""

    source: str
    kernels: tuple[GpuKernel, ...]
    params: KernelParams
    scratch: tuple[tuple[Tnode | None, int], ...]
    """Scratch buffers after the merge buffer: ``(local node, bytes)`` or ``(None, bytes)`` for
    reduction partials."""


def _flatten(s: L.Stmt) -> list[L.Stmt]:
    if isinstance(s, L.Seq):
        return [x for st in s.stmts for x in _flatten(st)]
    return [] if isinstance(s, L.Noop) else [s]


@dataclass(frozen=True)
class _Piece:
    """One top-level statement and how it runs: ``total`` work items (None: one work item, the
    statement carries a dependence), decoding the loops of ``nest`` and running ``rest``; or as
    a tree ``reduction``; or a work group per cell of ``nest`` (``cell``, a kernel of its own);
    or a tiled ``matmul`` (a kernel of its own)."""

    stmt: L.Stmt
    total: int | None
    nest: tuple[L.For_loop, ...]
    rest: L.Stmt
    reduction: ScalarReduction | None
    cell: CellReduction | None = None
    fill: L.Set | None = None
    """A store of a constant into the work item's own cell, run before ``rest`` (the fill of
    the whole node before it, folded in by :func:`_fold_fills`)."""
    matmul: MatmulPlan | None = None
    """A matmul run as a tiled kernel of its own (:mod:`arrayjit_backends.gpu.matmul`)."""
    chain: RowChain | None = None
    """Statements run row by row as one kernel (:mod:`arrayjit_backends.gpu.row_chain`):
    ``stmt`` is their sequence, ``nest`` the first one's row loops."""

    @property
    def writes(self) -> set[Tnode]:
        zeroed = {self.stmt.tn} if isinstance(self.stmt, L.Zero_out) else set()
        return {st.tn for st in sets_of(self.stmt)} | zeroed

    @property
    def reads(self) -> set[Tnode]:
        return {g.tn for g in gets_of(self.stmt)}


MAX_FUSED = 32
"""Statements fused into one kernel at most."""


def _group(pieces: Iterable[_Piece]) -> list[list[_Piece]]:
    """Consecutive statements that can share a kernel: serial ones (one work item runs them in
    order), and parallel ones of the same size that touch no node another of them writes
    (each work item runs its cell of each; fewer launches, and far fewer kernels to build)."""
    groups: list[list[_Piece]] = []
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


def _fill(p: _Piece) -> tuple[Tnode, float] | None:
    """``(node, value)`` when ``p`` sets every cell of a node's buffer to a constant (a
    ``Zero_out``, an accumulation's neutral-element fill)."""
    match p.stmt:
        case L.Zero_out(tn=tn):
            return tn, 0.0
    match p.rest:
        case L.Set(tn=tn, indices=idx, value=L.Constant(value=v)) if covers(p.nest, tn, idx):
            return tn, v
    return None


def _fold_fills(pieces: Iterable[_Piece]) -> list[_Piece]:
    """``pieces`` without the fills that a reduction into every cell right after them (each
    cell once, by its own work item or work group) starts from: a cooperative reduction
    combines the fill's constant instead of reading the cell, a register reduction's work item
    stores it first, so the fill's launch goes. The result is the same: the fill's value is the
    cell's value when the reduction reads it."""
    result: list[_Piece] = []
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


def _own_cell(p: _Piece, tn: Tnode) -> tuple[AxisIndex, ...] | None:
    """The indices of the one cell of ``tn`` that each work item of ``p`` writes and reads,
    when the work items' cells are every cell of ``tn``, each once (so filling its own cell
    first is filling the node first). Only for rows (:func:`~arrayjit_backends.
    gpu_cell_reduction.reads_across`): a matmul-shaped nest may be rendered by a path of its
    own (a tiled matmul folds the fill as its cells' start instead)."""
    if reads_across(p.nest, p.rest):
        return None
    sets = [st for st in sets_of(p.rest) if st.tn is tn]
    if not sets or len({st.indices for st in sets}) != 1:
        return None
    own = sets[0].indices
    if any(g.tn is tn and g.indices != own for g in gets_of(p.rest)):
        return None
    return own if covers(p.nest, tn, own) else None


def _nest(loops: list[L.For_loop], body: L.Stmt) -> L.Stmt:
    for lp in reversed(loops):
        body = replace(lp, body=body)
    return body


def parallel_order(loop: L.For_loop) -> tuple[list[L.For_loop], L.Stmt]:
    """The loops of the perfect nest headed by ``loop`` that can run as work items, outermost
    first, and the statement each work item runs (the other loops, in their original order,
    around the innermost body).

    A loop is taken when it is parallel (:func:`is_parallel_loop`) over the body formed by the
    loops not yet taken; moving it outside them is then exact: its iterations touch disjoint
    cells of every written node and read no cell another iteration writes, so each cell still
    sees its updates in the original order. Loops are tried in their original order, so the
    innermost parallel loop stays innermost (contiguous accesses on neighbouring work items).
    """
    loops, body = [loop], loop.body
    while isinstance(body, L.For_loop):
        loops.append(body)
        body = body.body
    chosen: list[L.For_loop] = []
    rest = loops
    while rest:
        for k, lp in enumerate(rest):
            others = rest[:k] + rest[k + 1 :]
            if is_parallel_loop(replace(lp, body=_nest(others, body))):
                chosen.append(lp)
                rest = others
                break
        else:
            break
    return chosen, _nest(rest, body)


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


class GpuSyntax(CSyntax):
    """Shared by the OpenCL C and CUDA C renderers; subclasses set the dialect."""

    kernel_prefix = "__kernel void"
    buffer_prefix = "__global "
    global_qualifier = "__global"
    local_qualifier = "__local"
    restrict = "restrict"
    global_id = "get_global_id(0)"
    local_id = "get_local_id(0)"
    group_id = "get_group_id(0)"
    barrier = "barrier(CLK_LOCAL_MEM_FENCE);"
    global_barrier = "barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);"
    """A work group's barrier after which its global stores are visible to the group too."""
    index_type = "long"
    # uint4x32 needs the dialect's vector type and a threefry builtin: not rendered yet.
    supported_precs: ClassVar[frozenset[Prec]] = frozenset(Prec) - {Prec.uint4x32}
    exact_launch: ClassVar[bool] = False
    """Whether a kernel launched without a group size runs exactly its global size of work
    items (OpenCL: the driver picks a group size that divides it), so that its parallel body
    needs no bounds check. CUDA launches whole blocks: the last one's extra threads return."""
    vector_cells: ClassVar[bool] = False
    """Whether the dialect's vector types have an elementwise ``fma`` a tiled matmul may step a
    work item's row of cells with (:mod:`arrayjit_backends.gpu.matmul`)."""

    def __init__(self, group_size: int = 256, fp64: bool = True, cell_lanes: int = 256) -> None:
        super().__init__()
        self.group_size = max(1, 1 << (group_size.bit_length() - 1))  # a power of two
        self.cell_lanes = min(self.group_size, cell_lanes)
        """Most work items per cell of a cooperative reduction (:mod:`~arrayjit_backends.
        gpu_cell_reduction`; below 2: none). Devices choose: GPUs want many lanes per row,
        PoCL's CPU devices fewer (a CPU core runs a work group's lanes as a loop)."""
        self.fp64 = fp64
        # Integer pow and transcendentals: in double where the device has it, else float
        # (exact for results below 2**24).
        self.int_math_type = "double" if fp64 else "float"

    def local_array(self, ct: str, name: str, dims: tuple[int, ...]) -> str:
        """The declaration of a work group's local array, aligned for vector loads."""
        shape = "".join(f"[{d}]" for d in dims)
        return f"{self.local_qualifier} {ct} {name}{shape} __attribute__((aligned(16)));"

    def local_vector(self, ct: str, width: int, lvalue: str) -> str:
        """A vector of ``width`` values of local memory from ``lvalue`` on."""
        return f"vload{width}(0, &{lvalue})"

    def _reset(self) -> None:
        super()._reset()
        self._resident: dict[Tnode, tuple[str, int, bool]] = {}
        """Nodes the row chain being rendered holds a row of in local memory: the array's
        name, how many leading axes are the row's, and whether stores also go to the node's
        buffer (:func:`~arrayjit_backends.gpu.row_chain.row_resident`)."""

    def cell(self, tn: Tnode, idx: tuple[AxisIndex, ...]) -> str:
        """An element of the node's buffer, or for a node the row chain being rendered holds
        in local memory, of the row's array (the row axes dropped from the offset)."""
        resident = self._resident.get(tn)
        if resident is None:
            return super().cell(tn, idx)
        name, k, _ = resident
        return f"{name}[{self.offset(tn, idx, k)}]"

    def assign(self, tn: Tnode, idx: tuple[AxisIndex, ...], value: str) -> str:
        """A store; into a row held in local memory, and also into the buffer unless the
        node lives only in this kernel."""
        resident = self._resident.get(tn)
        if resident is None or not resident[2]:
            return super().assign(tn, idx, value)
        return f"{self.cell(tn, idx)} = {super().cell(tn, idx)} = {value};"

    # ---- the program ----

    def buffer_params(self, name: str, ctype: str) -> list[str]:
        """Parameters that carry one buffer (pool pointer and byte offset)."""
        g = self.global_qualifier
        return [f"{g} unsigned char* p_{name}", f"const unsigned long o_{name}"]

    def buffer_prologue(self, name: str, ctype: str) -> str:
        """The kernel's first statements turning the parameters into a typed pointer."""
        g = self.global_qualifier
        return f"{g} {ctype}* {self.restrict} {name} = ({g} {ctype}*)(p_{name} + o_{name});"

    def render_program(self, opt: Optimized, prefix: str) -> GpuProgram:
        """The routine as kernels named ``<prefix>_k<n>``."""
        self.check_precisions(opt)
        self._reset()
        params = kernel_params(opt)
        scratch: list[tuple[Tnode | None, int]] = [
            (tn, max(tn.size_in_bytes, 1)) for tn in opt.local_nodes
        ]
        buffers = [(self.name(tn), self.storage_types[tn.prec]) for tn in params.buffers]
        buffers += [(self.name(tn), self.storage_types[tn.prec]) for tn in opt.local_nodes]
        self._partials: list[str] = []
        statements = _flatten(opt.code)
        # Reduction partials are scratch buffers too; count them first for the signature. A
        # small-float full reduction (a store of a float32 accumulator, see lowering) is a grid
        # reduction on GPUs; on CPU devices (one lane per cell) one work item was faster. CPU
        # devices run the others as ranges of the serial loop (blocked sums keep their blocks).
        reductions = {
            id(s): flatten_blocked_sum(red) if self.cell_lanes > 1 else red
            for s in statements
            if (isinstance(s, L.For_loop) or (self.cell_lanes > 1 and isinstance(s, L.Set)))
            and (red := scalar_reduction(s)) is not None
        }
        for k, red in enumerate(reductions.values()):
            ct = self.compute_type(red.target.tn.prec)
            name = f"partials{k}"
            self._partials.append(name)
            buffers.append((name, ct))
            scratch.append((None, MAX_GROUPS * 8))
        args: list[str] = []
        prologue: list[str] = []
        for name, ctype in buffers:
            args += self.buffer_params(name, ctype)
            prologue.append(self.buffer_prologue(name, ctype))
        if params.merge_node is not None:
            # Not restrict: in Streaming mode it is another stream's buffer of a node, which may
            # be this routine's own buffer of it (a node shared across streams).
            args += self.buffer_params("merge_buffer", "unsigned char")
            prologue.append(
                self.buffer_prologue("merge_buffer", "unsigned char").replace(
                    f" {self.restrict} ", " "
                )
            )
        prologue = [line for line in prologue if line]
        args += [f"const {self.index_type} {self.sym(s)}" for s in params.static_symbols]
        signature = ", ".join(args)
        out = Out()
        kernels: list[GpuKernel] = []
        out.add(0, f"/* routine {opt.name} */")
        red_index = 0
        pieces = _fold_fills(self._plan(stmt, reductions.get(id(stmt))) for stmt in statements)
        fused = fuse_rows(self, pieces)
        unstored: set[Tnode] = set()  # kernel-local nodes that live in a row chain's arrays
        for group in _group(fused):
            if (chain := group[0].chain) is not None:
                name = f"{prefix}_k{len(kernels)}"
                header = f"{self.kernel_prefix} {name}({signature})"
                elsewhere = {tn for p in fused if p is not group[0] for tn in p.writes | p.reads}
                only_here = {tn for tn in opt.local_nodes if tn not in elsewhere}
                resident = row_resident(chain, only_here)
                unstored |= {tn for tn, through in resident.items() if not through}
                render_row_kernel(self, chain, out, header, prologue, resident)
                kernels.append(GpuKernel(name, chain.rows * chain.lanes, chain.lanes))
                continue
            if group[0].cell is not None:
                name = f"{prefix}_k{len(kernels)}"
                piece, cr = group[0], group[0].cell
                render_cell_kernel(
                    self, piece.nest, cr, out, f"{self.kernel_prefix} {name}({signature})", prologue
                )
                assert piece.total is not None
                kernels.append(GpuKernel(name, piece.total * cr.lanes, cr.lanes))
                continue
            if (red := group[0].reduction) is not None:
                fill = group[0].fill
                init = (
                    fill.value.value
                    if fill is not None and isinstance(fill.value, L.Constant)
                    else None
                )
                partials = self._partials[red_index]
                red_index += 1
                header = f"{self.kernel_prefix} {{name}}({signature})"
                render_full_reduction(
                    self, red, init, partials, prefix, out, kernels, header, prologue
                )
                continue
            name = f"{prefix}_k{len(kernels)}"
            body = Out()
            local: int | None
            if group[0].matmul is not None:
                size, local = render_matmul_kernel(self, group[0].matmul, body)
            else:
                size = self._kernel_body(group, body)
                local = None if size > 1 else 1
            out.add(0, f"{self.kernel_prefix} {name}({signature}) {{")
            for line in prologue:
                out.add(1, line)
            out.lines.extend(body.lines)
            out.add(0, "}")
            kernels.append(GpuKernel(name, size, local))
        return GpuProgram(
            self.program_prelude() + "\n".join(out.lines) + "\n",
            tuple(kernels),
            params,
            # The buffer of a node that lives in local arrays alone is never touched: one byte.
            tuple((tn, 1 if tn in unstored else size) for tn, size in scratch),
        )

    helper_qualifier: ClassVar[str] = "inline"
    """How the dialect declares its helper functions."""

    def program_prelude(self) -> str:
        """Type names and helpers the kernels use."""
        return self.prelude

    def int_conversions(self) -> str:
        """The saturating float-to-integer helpers, for the dialect's prelude (after the integer
        type names; from double only where the device has it)."""
        sources = ("float", "double") if self.fp64 else ("float",)
        return float_to_int_helpers(self.helper_qualifier, sources)

    # Conversions of bfloat16 and fp8 (E5M2) to and from float, in the dialect's builtins:
    # {bits}(f) float -> uint bits, {flt}(u) uint bits -> float, and the math functions.
    SMALL_FLOATS: ClassVar[str] = """
{q} float aj_bf16_to_f32(unsigned short b) {{ return {flt}(((unsigned int)b) << 16); }}
{q} unsigned short aj_f32_to_bf16(float f) {{
  unsigned int u = {bits}(f);
  if (f != f) return (unsigned short)((u >> 16) | 0x40);
  return (unsigned short)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}}
{q} float aj_fp8_to_f32(unsigned char b) {{
  int e = (b >> 2) & 31, m = b & 3;
  float v = e == 0 ? {ldexp}((float)m, -16)
          : (e == 31 ? (m ? NAN : INFINITY) : {ldexp}(1.0f + m * 0.25f, e - 15));
  return (b & 0x80) ? -v : v;
}}
{q} unsigned char aj_f32_to_fp8(float f) {{
  if (f != f) return 0x7E;
  unsigned char sign = signbit(f) ? 0x80 : 0;
  float m = {fabs}(f);
  if (m == 0) return sign;
  int e; {frexp}(m, &e); e -= 1; if (e < -14) e = -14;
  float q = {ldexp}(1.0f, e - 2);
  float r = {rint}(m / q) * q;
  if (r >= 65536.0f) return sign | 0x7C;
  if (r == 0) return sign;
  int e2; {frexp}(r, &e2); e2 -= 1;
  if (e2 < -14) return sign | (unsigned char)(r * 65536.0f);
  unsigned int mant = (unsigned int)((r / {ldexp}(1.0f, e2) - 1.0f) * 4.0f);
  return sign | (unsigned char)(((e2 + 15) << 2) | mant);
}}
"""

    # ---- kernel bodies ----

    def _decode(self, nest: list[L.For_loop], out: Out, gid: str, indent: int = 1) -> None:
        """Each loop's index from the flat work-item index ``gid`` (mixed radix, innermost
        fastest). In unsigned arithmetic of 32 bits where the nest fits: a division by a
        constant is then a multiply and a shift (by a power of two, a shift), where a signed
        64-bit one is a long instruction sequence on a GPU (a 2^24 sum's 14 blocked-sum levels
        took 3x the memory time).

        A nest with an empty loop has no work item to decode (every caller bounds ``gid`` by
        the nest's size, 0): its indices are declared as their loops' starts, since a remainder
        by the zero extent, though never run, is undefined and compilers warn about it (PoCL
        printed "2 warnings generated." for a node of shape ``(3, 0)``)."""
        it = self.index_type
        for lp in nest:  # names in nest order: i0 is the outermost loop
            self.sym(lp.index)
        if any(lp.to_inclusive < lp.from_ for lp in nest):
            for lp in nest:
                out.add(indent, f"const {it} {self.sym(lp.index)} = {lp.from_};  /* empty nest */")
            return
        total = math.prod(lp.to_inclusive - lp.from_ + 1 for lp in nest)
        ut = "uint32_t" if total <= 0xFFFFFFFF else "uint64_t"
        out.add(indent, f"{ut} aj_r = (({ut}){gid});")
        for k, lp in enumerate(reversed(nest)):
            extent = lp.to_inclusive - lp.from_ + 1
            v = self.sym(lp.index)
            if k == len(nest) - 1:
                out.add(indent, f"const {it} {v} = {lp.from_} + ({it})aj_r;")
            else:
                out.add(
                    indent,
                    f"const {it} {v} = {lp.from_} + ({it})(aj_r % {extent}u); aj_r /= {extent}u;",
                )

    def _plan(self, stmt: L.Stmt, red: ScalarReduction | None) -> _Piece:
        """How one top-level statement runs."""
        if red is not None:
            return _Piece(stmt, 0, (), stmt, red)
        match stmt:
            case L.Zero_out(tn=tn):
                return _Piece(stmt, tn.num_elems, (), stmt, None)
            case L.For_loop():
                nest, rest = parallel_order(stmt)
                if nest:
                    total = math.prod(max(lp.to_inclusive - lp.from_ + 1, 0) for lp in nest)
                    tiled = matmul_plan(nest, rest) if self.group_size >= THREADS else None
                    cell = (
                        plan_cell_reduction(tuple(nest), rest, self.cell_lanes)
                        if total and tiled is None
                        else None
                    )
                    return _Piece(stmt, total, tuple(nest), rest, None, cell, matmul=tiled)
        return _Piece(stmt, None, (), stmt, None)

    def _kernel_body(self, group: list[_Piece], out: Out) -> int:
        """Render a group of statements as one kernel's body; returns its global size."""
        it = self.index_type
        total = group[0].total
        if total is None:  # serial statements: one work item runs them in order
            out.add(1, f"if ({self.global_id} != 0) return;")
            for piece in group:
                self.stmt(piece.stmt, out, 1)
            return 1
        out.add(1, f"const {it} aj_gid = ({it}){self.global_id};")
        if not self.exact_launch or total < 1:
            # A work item that may return keeps PoCL from vectorizing the work group's loop
            # over work items (a fused 2^24 elementwise kernel took twice the time): only where
            # the launch has extra work items (an empty nest still launches one).
            out.add(1, f"if (aj_gid >= {total}) return;")
        for piece in group:
            if len(group) > 1:
                out.add(1, "{")
            indent = 2 if len(group) > 1 else 1
            self._piece(piece, out, indent)
            if len(group) > 1:
                out.add(1, "}")
        return max(total, 1)

    def _piece(self, piece: _Piece, out: Out, indent: int) -> None:
        """One statement of a parallel kernel, for the work item ``aj_gid``."""
        if isinstance(piece.stmt, L.Zero_out):
            tn = piece.stmt.tn
            out.add(indent, f"{self.name(tn)}[aj_gid] = {self.zero(tn.prec)};")
            return
        self._decode(list(piece.nest), out, "aj_gid", indent)
        rest = piece.rest
        red = scalar_reduction(rest) if isinstance(rest, L.For_loop) else None
        if piece.fill is not None:
            self.stmt(piece.fill, out, indent)
        if red is not None:
            self._register_reduction(red, out, indent)
        else:
            self.stmt(rest, out, indent)

    def _register_reduction(self, red: ScalarReduction, out: Out, indent: int) -> None:
        """A work item's serial reduction into its own cell, the cell held in a register (no
        reassociation: the same steps as the serial code)."""
        self.reduction(red, out, indent)

    def local_tree(
        self, out: Out, lanes: int, combine: Callable[[str, str], str], indent: int = 1
    ) -> None:
        """Combine the work group's ``aj_acc`` values (``lanes`` of them, a power of two) as a
        tree in the local array ``aj_sh``: afterwards ``aj_sh[0]`` holds the group's result."""
        out.add(indent, "aj_sh[aj_lid] = aj_acc;")
        out.add(indent, self.barrier)
        out.add(indent, f"for (int aj_s = {lanes // 2}; aj_s > 0; aj_s >>= 1) {{")
        pair = combine("aj_sh[aj_lid]", "aj_sh[aj_lid + aj_s]")
        out.add(indent + 1, f"if (aj_lid < aj_s) aj_sh[aj_lid] = {pair};")
        out.add(indent + 1, self.barrier)
        out.add(indent, "}")

    def stored_const(self, prec: Prec, v: float) -> str:
        """The constant ``v`` as a cell of ``prec`` holds it once stored, in the compute type: a
        folded fill stands for the cell's value, which a half, bfloat16 or fp8 cell holds
        rounded (``1000.3`` is ``1000.5`` in a half cell)."""
        ct = self.compute_type(prec)
        c = self.const(v, ct)
        if not L.rounds_when_stored(prec):
            return c
        return f"(({ct}){self.load(prec, self.store(prec, c))})"


__all__ = ["GpuKernel", "GpuProgram", "GpuSyntax"]
