"""Matmul kernels, a GPU kernel shape (planned by :mod:`arrayjit_backends.gpu.planner`).

The naive parallel nest gives each output cell of ``C[i, j] = sum_k A[i, k] * B[k, j]`` a work
item walking ``k`` alone: two global loads per multiply-add. Here a work group computes a
``BM x BN`` block of ``C``: it walks ``k`` a tile of ``BK`` steps at a time, its work items first
copying the ``BM x BK`` tile of ``A`` and the ``BK x BN`` tile of ``B`` into local memory (OpenCL
``__local``, CUDA ``__shared__``; zeros outside the operands), then each work item updating its
``TM x TN`` cells (register blocking) from the tiles: ``TM + TN`` local loads per ``TM * TN``
multiply-adds, and each global element loaded once per group instead of once per cell.

On a CPU device (``cell_lanes == 1``, a dialect with vector types: PoCL) local memory and
barriers only cost (the runtime runs a group as loops around its code, split at each barrier):
there each work item computes rows of a vector of cells straight from the operands
(:func:`render_register_matmul`), 3.7x the tiled shape's speed on PoCL.

Exactness: each cell starts from its stored value (as the naive kernel does), or from the
constant of the fill just before it where that was folded in, and takes
``acc = fma(a, b, acc)`` for ``k`` in increasing order, one rounding per step, the operands in
their original order: the bits of the serial code. Steps past the end of ``k`` are not taken
(the last tile's loop is bounded by what is left), so a zero-padded step never runs
(``fma(0, 0, -0.0)`` is ``+0.0``, which would change a ``-0.0`` cell); padded rows and columns
compute cells that are never stored.

Which nests: the plain matmuls :func:`~arrayjit_backends.codegen.matmul_plan.matmul_plan`
recognizes (a parallel nest over the cells of a float32 or float64 node, one ``k`` loop of
``fma`` steps, operands indexed by ``{i, k}`` and ``{k, j}`` in either order, possibly batched),
on devices whose groups hold :data:`~arrayjit_backends.gpu.planner.THREADS` work items.
Everything else keeps the naive nest.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from arrayjit_backends.codegen.c_syntax import Out
from arrayjit_backends.codegen.matmul_plan import MatmulPlan
from arrayjit_backends.gpu.dialect import GpuSyntax
from arrayjit_backends.gpu.planner import THREADS
from arrayjit_ir import low_level as L
from arrayjit_ir.indexing import Fixed_idx, Iterator, Symbol

LOCAL_BYTES = 24 * 1024
"""Local memory the tiles of a group may take: OpenCL guarantees 32 KiB per group (less what
the implementation keeps), CUDA 48 KiB of static shared memory."""


@dataclass(frozen=True)
class Tiling:
    """A group computes ``bm x bn`` cells, ``tm x tn`` per work item, ``bk`` steps of ``k`` per
    tile; ``(bm // tm) * (bn // tn) == THREADS``."""

    bm: int
    bn: int
    bk: int
    tm: int
    tn: int


SQUARE = Tiling(64, 64, 16, 4, 4)
"""The general shape: 16 x 16 work items of 4 x 4 cells."""
WIDE = Tiling(8, 256, 16, 1, 8)
"""Few rows (a matrix-vector product, ``1 x N``): 8 x 32 work items of 1 x 8 cells."""
TALL = Tiling(256, 8, 16, 8, 1)
"""Few columns: 32 x 8 work items of 8 x 1 cells."""


def tiling(plan: MatmulPlan) -> Tiling:
    """The tiling of ``plan``'s tiled kernel: by the shape of its result, its tiles within
    :data:`LOCAL_BYTES`."""
    m, n, _ = plan.extents
    t = SQUARE
    if m < 32 and n >= 4 * m:
        t = WIDE
    elif n < 32 and m >= 4 * n:
        t = TALL
    # Both tiles within LOCAL_BYTES (float64 WIDE and TALL tiles take half as many steps).
    size = plan.target.tn.prec.byte_size
    while t.bk > 1 and (t.bm + 1 + t.bn) * t.bk * size > LOCAL_BYTES:
        t = replace(t, bk=t.bk // 2)
    return t


def _address(g: L.Get, values: dict[Symbol, str]) -> str:
    """Row-major offset of ``g`` with its loop symbols replaced by ``values``."""
    dims, text = g.tn.dims, ""
    for n, i in enumerate(g.indices):
        if isinstance(i, Iterator):
            assert isinstance(i.symbol, Symbol)
            part = values[i.symbol]
        else:
            assert isinstance(i, Fixed_idx)
            part = str(i.value)
        text = part if n == 0 else f"({text}) * {dims[n]} + {part}"
    return text


def _origins(plan: MatmulPlan) -> tuple[tuple[int, int, int], tuple[Symbol, Symbol, Symbol]]:
    """The first index of the row, column and ``k`` loops, and their symbols (a missing loop, a
    size-1 axis: 0 and a symbol no index uses)."""
    loops = (plan.rows, plan.cols, plan.k)
    r0, c0, k0 = (0 if lp is None else lp.from_ for lp in loops)
    ri, ci, ki = (Symbol(-1) if lp is None else lp.index for lp in loops)
    return (r0, c0, k0), (ri, ci, ki)


def _batch_cell(
    plan: MatmulPlan, out: Out, it: str, block: str, per_matrix: int
) -> dict[Symbol, str]:
    """Decode the batch cell of block number ``block`` (a C expression; the outer batch loop
    varies slowest) into ``aj_bt<e>``; returns each batch loop's value."""
    batch: dict[Symbol, str] = {}
    if plan.batch:
        out.add(1, f"{it} aj_q = {block} / {per_matrix};")
    for e, lp in reversed(list(enumerate(plan.batch))):
        extent = lp.to_inclusive - lp.from_ + 1
        out.add(1, f"const {it} aj_bt{e} = {lp.from_} + aj_q % {extent}; aj_q /= {extent};")
        batch[lp.index] = f"aj_bt{e}"
    return batch


REGISTER_ROWS = 8
"""Rows of cells a work item of the CPU-device shape computes (:func:`render_register_matmul`).
On PoCL (AMD EPYC, AVX2), 512x512 float32: 2 rows 8.6 GFLOP/s, 4 rows 10.3, 6 rows 12.6, 8 rows
12.3 (256x784x128: 8.3, 8.9, 11.5, 13.0); the tiled shape 3.3. Rows of 16 floats were slower
(3.3-5.8)."""
REGISTER_BYTES = 32
"""Bytes of the vector of cells per row a work item of the CPU-device shape computes (8 floats,
4 doubles: one AVX register)."""


def render_register_matmul(syntax: GpuSyntax, plan: MatmulPlan, out: Out) -> tuple[int, int | None]:
    """The CPU-device shape (``syntax.cell_lanes == 1`` with vector types): no local memory and
    no barriers, which a CPU OpenCL runtime (PoCL) runs as loops around the work-group's code;
    each work item computes ``REGISTER_ROWS`` rows of a vector of cells, walking ``k`` with one
    broadcast of ``A`` per row and one vector of ``B`` per step, one vector ``fma`` per row
    (the same single rounding per lane, ``k`` in order: the serial code's bits). Rows and
    columns past the matrix read a clamped (valid) address and are never stored. Returns
    ``(global size, local size)``: one work item per block of cells, no group size."""
    m, n, kk = plan.extents
    prec = plan.target.tn.prec
    ct = syntax.compute_type(prec)
    it = syntax.index_type
    rows, lanes = REGISTER_ROWS, REGISTER_BYTES // prec.byte_size
    blocks_n, blocks_m = -(-n // lanes), -(-m // rows)
    per_matrix = blocks_m * blocks_n
    extents = [lp.to_inclusive - lp.from_ + 1 for lp in plan.batch]
    a, b = (plan.x, plan.w) if plan.x_is_a else (plan.w, plan.x)
    (r0, c0, k0), (ri, ci, ki) = _origins(plan)
    vt = f"{ct}{lanes}"
    out.add(1, f"const {it} aj_gid = ({it}){syntax.global_id};")
    out.add(1, f"const {it} aj_blk = aj_gid % {per_matrix};")
    batch = _batch_cell(plan, out, it, "aj_gid", per_matrix)
    out.add(1, f"const {it} aj_bi = (aj_blk / {blocks_n}) * {rows};")
    out.add(1, f"const {it} aj_bj = (aj_blk % {blocks_n}) * {lanes};")
    for r in range(rows):  # clamped: a row past the matrix computes a cell never stored
        out.add(1, f"const {it} aj_i{r} = min(aj_bi + {r}, ({it}){m - 1});")
    for c in range(lanes):
        out.add(1, f"const {it} aj_j{c} = min(aj_bj + {c}, ({it}){n - 1});")
    target = L.Get(plan.target.tn, plan.target.indices)

    def at(g: L.Get, r: int | None, c: int | None, k: str | None) -> str:
        vals = dict(batch)
        if r is not None:
            vals[ri] = f"{r0} + aj_i{r}"
        if c is not None:
            vals[ci] = f"{c0} + aj_j{c}"
        if k is not None:
            vals[ki] = f"{k0} + {k}"
        return f"{syntax.name(g.tn)}[{_address(g, vals)}]"

    for r in range(rows):
        if plan.init is not None:  # the fill before, folded (the planner's fold_fills)
            out.add(1, f"{vt} aj_c{r} = ({vt})({syntax.const(plan.init, ct)});")
            continue
        cells = ", ".join(
            f"({ct}){syntax.load(prec, at(target, r, c, None))}" for c in range(lanes)
        )
        out.add(1, f"{vt} aj_c{r} = ({vt})({cells});")
    out.add(1, f"for ({it} aj_s = 0; aj_s < {kk}; ++aj_s) {{")
    cols = ", ".join(f"({ct}){syntax.load(prec, at(b, None, c, 'aj_s'))}" for c in range(lanes))
    out.add(2, f"const {vt} aj_b = ({vt})({cols});")
    for r in range(rows):
        av = f"(({vt})(({ct}){syntax.load(prec, at(a, r, None, 'aj_s'))}))"
        x, w = (av, "aj_b") if plan.x_is_a else ("aj_b", av)
        out.add(2, f"aj_c{r} = fma({x}, {w}, aj_c{r});")
    out.add(1, "}")
    for r in range(rows):
        for c in range(lanes):
            keep = f"aj_bi + {r} < {m} && aj_bj + {c} < {n}"
            out.add(
                1,
                f"if ({keep}) {at(target, r, c, None)} = {syntax.store(prec, f'aj_c{r}.s{c:x}')};",
            )
    return per_matrix * math.prod(extents), None


def render_matmul_kernel(syntax: GpuSyntax, plan: MatmulPlan, out: Out) -> tuple[int, int | None]:
    """The body of the kernel computing ``plan`` (after the kernel's prologue): the tiled shape,
    or on a CPU device (``cell_lanes == 1``) with vector types the register shape
    (:func:`render_register_matmul`); returns ``(global size, local size)``.

    The tiled shape: work item ``(ty, tx)`` owns the block's rows ``ty * tm + r`` and columns
    ``tx * tn + c`` (contiguous, so a step's values of a tile are vector loads from local
    memory); the next tiles of ``A`` and ``B`` are loaded into registers while the current
    ones are used (each work item's share of a tile), then stored to local memory."""
    if syntax.cell_lanes == 1 and syntax.vector_cells:
        return render_register_matmul(syntax, plan, out)
    t = tiling(plan)
    m, n, kk = plan.extents
    prec = plan.target.tn.prec
    ct = syntax.compute_type(prec)
    it = syntax.index_type
    f = "f" if ct == "float" else ""
    rt, cth = t.bm // t.tm, t.bn // t.tn  # work items along rows, along columns
    assert rt * cth == THREADS
    groups_n = -(-n // t.bn)
    per_matrix = -(-m // t.bm) * groups_n
    extents = [lp.to_inclusive - lp.from_ + 1 for lp in plan.batch]
    groups = per_matrix * math.prod(extents)
    a, b = (plan.x, plan.w) if plan.x_is_a else (plan.w, plan.x)
    (r0, c0, k0), (ri, ci, ki) = _origins(plan)
    c_name = syntax.name(plan.target.tn)
    width = VECTOR_BYTES // prec.byte_size  # values of one vector load from local memory

    # Where the dialect has vector types with an elementwise fma (OpenCL C), a work item's row
    # of cells is one vector: one fma call per row and step (the same one rounding per lane).
    # Up to 32 bytes: a wider vector argument (double8) changes the call ABI on CPUs without
    # AVX-512, which PoCL warns about on every build; such rows take one fma per cell.
    vector = syntax.vector_cells and t.tn in (2, 4, 8, 16) and t.tn * prec.byte_size <= 32

    def cell(r: int, c: int) -> str:
        return f"aj_c{r}.s{c:x}" if vector else f"aj_c{r}_{c}"

    out.add(1, f"const int aj_lid = (int){syntax.local_id};")
    out.add(1, f"const {it} aj_grp = ({it}){syntax.group_id} % {per_matrix};")
    out.add(1, f"const {it} aj_bi = (aj_grp / {groups_n}) * {t.bm};")
    out.add(1, f"const {it} aj_bj = (aj_grp % {groups_n}) * {t.bn};")
    batch = _batch_cell(plan, out, it, f"({it}){syntax.group_id}", per_matrix)  # its matrix

    def target_at(r: int, c: int) -> str:
        vals = {**batch, ri: f"{r0} + aj_i{r}", ci: f"{c0} + aj_j{c}"}
        return f"{c_name}[{_address(L.Get(plan.target.tn, plan.target.indices), vals)}]"

    out.add(1, f"const int aj_ty = aj_lid / {cth}, aj_tx = aj_lid % {cth};")
    # The A tile is stored k-major (a row of it is what one k step reads); a vector's worth of
    # padding keeps its rows aligned and the transposing stores off a single bank.
    out.add(1, syntax.local_array(ct, "aj_ta", (t.bk, t.bm + width)))
    out.add(1, syntax.local_array(ct, "aj_tb", (t.bk, t.bn)))
    for r in range(t.tm):
        out.add(1, f"const {it} aj_i{r} = aj_bi + aj_ty * {t.tm} + {r};")
    for c in range(t.tn):
        out.add(1, f"const {it} aj_j{c} = aj_bj + aj_tx * {t.tn} + {c};")
    for r in range(t.tm):
        for c in range(t.tn):
            if plan.init is not None:  # the fill before, folded (the planner's fold_fills)
                start = syntax.const(plan.init, ct)
            else:
                start = f"({ct}){syntax.load(prec, target_at(r, c))}"
            if vector and c == 0:
                out.add(1, f"{ct}{t.tn} aj_c{r};")
            decl = "" if vector else f"{ct} "
            inside = f"aj_i{r} < {m} && aj_j{c} < {n}"
            out.add(1, f"{decl}{cell(r, c)} = ({inside}) ? ({start}) : {syntax.zero(prec)};")

    # A work item's share of each tile: element e = lid + q * THREADS of the A tile is (row
    # e / bk, step e % bk), consecutive steps on neighbouring work items; of the B tile (step e
    # / bn, column e % bn). Its values wait in registers aj_pa<q>, aj_pb<q>.
    shares = []
    for what, size, inner, g in (("a", t.bm * t.bk, t.bk, a), ("b", t.bk * t.bn, t.bn, b)):
        for q in range(-(-size // THREADS)):
            e = f"aj_lid + {q * THREADS}"
            guard = f"{e} < {size}" if (q + 1) * THREADS > size else None
            u, v = f"aj_{what}u{q}", f"aj_{what}v{q}"
            out.add(1, f"const int {u} = ({e}) / {inner}, {v} = ({e}) % {inner};")
            out.add(1, f"{ct} aj_p{what}{q} = {syntax.zero(prec)};")
            shares.append((what, q, guard, g))

    def fetch(kt: str, indent: int) -> None:
        """Load this work item's share of the tiles at ``k = kt`` into its registers (zeros
        outside the operands)."""
        for what, q, guard, g in shares:
            u, v = f"aj_{what}u{q}", f"aj_{what}v{q}"
            if what == "a":
                s, cond = f"{kt} + {v}", f"aj_bi + {u} < {m}"
                vals = {**batch, ri: f"{r0} + aj_bi + {u}", ki: f"{k0} + {s}"}
            else:
                s, cond = f"{kt} + {u}", f"aj_bj + {v} < {n}"
                vals = {**batch, ki: f"{k0} + {s}", ci: f"{c0} + aj_bj + {v}"}
            if guard is not None:
                cond = f"{guard} && {cond}"
            load = syntax.load(prec, f"{syntax.name(g.tn)}[{_address(g, vals)}]")
            value = f"({cond} && {s} < {kk}) ? (({ct}){load}) : {syntax.zero(prec)}"
            out.add(indent, f"aj_p{what}{q} = {value};")

    def stash(indent: int) -> None:
        """Store the registers' share into the local tiles."""
        for what, q, guard, _ in shares:
            u, v = f"aj_{what}u{q}", f"aj_{what}v{q}"
            dest = f"aj_ta[{v}][{u}]" if what == "a" else f"aj_tb[{u}][{v}]"
            line = f"{dest} = aj_p{what}{q};"
            out.add(indent, f"if ({guard}) {line}" if guard is not None else line)

    def values(name: str, tile: str, base: str, count: int, indent: int) -> None:
        """``aj_<name><r>`` for ``r < count``: the step's ``count`` values of a local tile row
        from ``base`` on (vector loads where they divide evenly)."""
        if count % width or width == 1:
            for r in range(count):
                out.add(indent, f"const {ct} aj_{name}{r} = {tile}[aj_s][{base} + {r}];")
            return
        for v in range(count // width):
            vec = syntax.local_vector(ct, width, f"{tile}[aj_s][{base} + {v * width}]")
            out.add(indent, f"const {ct}{width} aj_vec_{name}{v} = {vec};")
            for w in range(width):
                part = f"aj_vec_{name}{v}.{'xyzw'[w]}"
                out.add(indent, f"const {ct} aj_{name}{v * width + w} = {part};")

    def steps(count: str | int, indent: int) -> None:
        """Take ``count`` steps of every cell from the local tiles."""
        out.add(indent, f"for (int aj_s = 0; aj_s < {count}; ++aj_s) {{")
        values("a", "aj_ta", f"aj_ty * {t.tm}", t.tm, indent + 1)
        values("b", "aj_tb", f"aj_tx * {t.tn}", t.tn, indent + 1)
        for r in range(t.tm):
            if vector:
                av = f"(({ct}{t.tn})(aj_a{r}))"
                bv = f"(({ct}{t.tn})({', '.join(f'aj_b{c}' for c in range(t.tn))}))"
                x, w = (av, bv) if plan.x_is_a else (bv, av)
                out.add(indent + 1, f"aj_c{r} = fma({x}, {w}, aj_c{r});")
                continue
            for c in range(t.tn):
                x, w = (f"aj_a{r}", f"aj_b{c}") if plan.x_is_a else (f"aj_b{c}", f"aj_a{r}")
                out.add(indent + 1, f"{cell(r, c)} = fma{f}({x}, {w}, {cell(r, c)});")
        out.add(indent, "}")

    # Steps past the end of k are never taken (the last tile's loop is bounded by what is
    # left): a zero-padded step would turn a -0.0 cell into +0.0.
    full, tail = divmod(kk, t.bk)
    last = (full + (1 if tail else 0)) * t.bk  # where the tiles end
    fetch("0", 1)
    stash(1)
    out.add(1, syntax.barrier)
    if full:
        out.add(1, f"for (int aj_kt = 0; aj_kt < {full * t.bk}; aj_kt += {t.bk}) {{")
        out.add(2, f"const int aj_more = aj_kt + {t.bk} < {last};")
        out.add(2, "if (aj_more) {")
        fetch(f"(aj_kt + {t.bk})", 3)
        out.add(2, "}")
        steps(t.bk, 2)
        out.add(2, syntax.barrier)  # every work item is done with the tiles
        out.add(2, "if (aj_more) {")
        stash(3)
        out.add(2, "}")
        out.add(2, syntax.barrier)
        out.add(1, "}")
    if tail:
        steps(tail, 1)
    for r in range(t.tm):
        for c in range(t.tn):
            store = syntax.store(prec, cell(r, c))
            out.add(1, f"if (aj_i{r} < {m} && aj_j{c} < {n}) {target_at(r, c)} = {store};")
    return groups * THREADS, THREADS


VECTOR_BYTES = 16
"""Bytes of one vector load from a local tile (``float4``, ``double2``)."""


__all__ = ["Tiling", "render_matmul_kernel", "render_register_matmul", "tiling"]
