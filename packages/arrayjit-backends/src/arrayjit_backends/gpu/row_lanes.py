"""Row lanes on CPU devices: a parallel nest whose cells each store a value computed from
``fma`` reductions that the optimizer inlined into the statement (layer norm's
``rstd = rsqrt(sum((x - mean)^2) * inv_n + eps)``, attention's ``s = (q . k) * scale``, a dot
product per cell then scaled) as vectors of neighbouring cells per work item.

One work item per cell runs such a nest badly on a CPU OpenCL runtime (PoCL): it vectorizes a
kernel across the work items of a group only where the body has no loop, so each cell's
reduction is a scalar dependent chain, and PoCL's scalar ``fma`` is a library call (4.5x a
multiply and an add, see the OpenCL README). Here each work item takes ``lanes`` neighbouring
values of the nest's innermost parallel loop (8 floats, 4 doubles: one 32-byte vector) and,
where the nest has two loops or more, :data:`ROWS` values of the next one out (as the
register matmul and :mod:`~arrayjit_backends.gpu.contraction` do), the other parallel loops
decoded from its index, and runs the reduction loops once for all of them with each local a
vector per row: each step's term is computed as a vector (a read that depends on the lanes'
index is a gather of the lanes' cells, other reads a broadcast; each read once a step
however often the term reads it, and once for every row where it does not depend on the
rows' index), then one vector ``fma`` or op per row. What the statement does with
the reductions' values (``* inv_n``, ``rsqrt``, the store) runs per lane afterwards, as the
scalar code in a scope where the lane's index is the loop's index (math-library calls keep
their scalar helpers, hence their bits).

Exactness: each lane takes the serial code's steps in their order (a blocked sum's inner
local scope is a vector of the lanes' block sums; ``max`` and ``min`` are the NaN-propagating
ones with ``-0 < +0``), so each cell gets the serial code's bits. Lanes past the nest compute
a clamped (valid) cell and are never stored.

Which nests (:func:`row_lanes_plan`): a parallel nest, no loop empty, whose rest is a store
whose value holds local scopes with loops, at least one ``fma`` among them (row sums and
maxes without one measured no faster this way on PoCL: one work item per row reads its row
contiguously), every local of them float32, or every one float64, their steps built from
reads, constants, their own locals, ``+ - * /``, ``max``, ``min``, negation and ``fma`` (no
index used as a number, no call). Only where the dialect has vector types and the device is a
CPU (``cell_lanes == 1``); ``ARRAYJIT_GPU_ROW_LANES=0`` turns it off (for measuring).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from dataclasses import dataclass

from arrayjit_backends.codegen.c_syntax import Out
from arrayjit_backends.codegen.kernel_plan import has_loops
from arrayjit_backends.gpu.contraction import work_item_block
from arrayjit_backends.gpu.dialect import GpuSyntax
from arrayjit_ir import low_level as L
from arrayjit_ir import ops
from arrayjit_ir.indexing import index_symbols
from arrayjit_tnode import Prec

VECTOR_BYTES = 32
"""Bytes of a work item's vector of lanes: 8 floats, 4 doubles (an AVX2 register)."""

ROWS = 8
"""Rows of lanes a work item takes where the nest has two loops or more: a read that does not
depend on the lanes' loop (``q[i, d]`` of attention's scores, lanes along the keys) is one
broadcast per row, and a gather that does not depend on the rows' loop (``k[j, d]``) serves
every row."""


def row_lanes_on() -> bool:
    """Whether CPU devices get row lanes: yes unless ``ARRAYJIT_GPU_ROW_LANES=0`` (read at each
    compile; for measuring the shape against one work item per cell)."""
    return os.environ.get("ARRAYJIT_GPU_ROW_LANES", "1") != "0"


_ARITH = (ops.Binop.add, ops.Binop.sub, ops.Binop.mul, ops.Binop.div)
_MINMAX = (ops.Binop.max, ops.Binop.min)


@dataclass(frozen=True)
class RowLanes:
    """A parallel nest (outermost first) whose cells run ``rest``, a store whose value holds
    the local scopes ``scopes`` (the outermost ones); ``prec`` their locals' precision (float32
    or float64)."""

    nest: tuple[L.For_loop, ...]
    rest: L.Set
    scopes: tuple[L.Local_scope, ...]
    prec: Prec

    @property
    def lanes(self) -> int:
        """Cells of the innermost parallel loop a work item takes."""
        return VECTOR_BYTES // self.prec.byte_size

    @property
    def rows(self) -> int:
        """Values of the next parallel loop out a work item takes (``ROWS``, or 1 where the
        nest has one loop)."""
        return ROWS if len(self.nest) > 1 else 1


def _top_scopes(e: L.Expr) -> Iterator[L.Local_scope]:
    """The local scopes of ``e`` not inside another one."""
    if isinstance(e, L.Local_scope):
        yield e
        return
    for x in L.children(e):
        yield from _top_scopes(x)


def _scope_ids(e: L.Expr) -> set[L.ScopeId]:
    """The locals of the local scopes in ``e``, nested ones included."""
    return {x.scope for x in L.sub_exprs(e) if isinstance(x, L.Local_scope)}


def _expr_ok(e: L.Expr, scopes: set[L.ScopeId]) -> bool:
    """Whether ``e`` renders as a vector of lanes (:meth:`_Vectors.expr`), its locals being
    ``scopes``."""
    match e:
        case L.Get():
            return True
        case L.Constant():
            return True
        case L.Get_local(scope=sc):
            return sc in scopes
        case L.Binop(op=op, a=a, b=b) if op in _ARITH or op in _MINMAX:
            return _expr_ok(a, scopes) and _expr_ok(b, scopes)
        case L.Unop(op=ops.Unop.neg | ops.Unop.identity, a=a):
            return _expr_ok(a, scopes)
        case L.Ternop(op=ops.Ternop.fma, a=a, b=b, c=c):
            return all(_expr_ok(x, scopes) for x in (a, b, c))
        case L.Local_scope(scope=sc, body=body):
            return sc in scopes and _stmt_ok(body, scopes)
    return False


def _stmt_ok(s: L.Stmt, scopes: set[L.ScopeId]) -> bool:
    """Whether ``s`` (in a local scope's body) renders with vector locals."""
    match s:
        case L.Noop() | L.Comment():
            return True
        case L.Seq(stmts=stmts):
            return all(_stmt_ok(x, scopes) for x in stmts)
        case L.For_loop(body=body):
            return _stmt_ok(body, scopes)
        case L.Set_local(scope=sc, value=v):
            return sc in scopes and _expr_ok(v, scopes)
    return False


def _fma_in(e: L.Expr) -> bool:
    """Whether computing ``e`` takes an ``fma`` step (see the module docstring: where the
    shape pays)."""
    return any(isinstance(x, L.Ternop) and x.op is ops.Ternop.fma for x in L.sub_exprs(e))


def row_lanes_plan(nest: tuple[L.For_loop, ...], rest: L.Stmt) -> RowLanes | None:
    """The :class:`RowLanes` of a parallel nest and the statement each cell runs, when the
    module docstring's shape; else None."""
    if not nest or any(lp.to_inclusive < lp.from_ for lp in nest):
        return None
    if not isinstance(rest, L.Set) or not has_loops(rest.value):
        return None
    tops = tuple(_top_scopes(rest.value))
    precs = {sc.scope.prec for sc in tops}
    if len(precs) != 1:
        return None
    (prec,) = precs
    if prec not in (Prec.single, Prec.double):
        return None
    for top in tops:
        locals_ = _scope_ids(top)
        if any(sc.prec is not prec for sc in locals_) or not _expr_ok(top, locals_):
            return None
    if not any(_fma_in(top) for top in tops):
        return None
    return RowLanes(nest, rest, tops, prec)


class _Vectors:
    """Renders expressions of a plan as vectors of its lanes, one set per row of the work item
    (see the module docstring)."""

    def __init__(self, syntax: GpuSyntax, plan: RowLanes) -> None:
        self.syn = syntax
        self.plan = plan
        self.ct = syntax.compute_type(plan.prec)
        self.vt = f"{self.ct}{plan.lanes}"
        self.lane = plan.nest[-1].index
        self.row = plan.nest[-2].index if plan.rows > 1 else None
        self.names: dict[tuple[L.ScopeId, int], str] = {}
        self.count = 0
        self.reads: dict[tuple[int, L.Expr, int], str] = {}
        self.kept: list[list[str]] = []  # the statement lists ``reads`` is keyed by

    def fresh(self, base: str) -> str:
        self.count += 1
        return f"aj_{base}{self.count}"

    def bound(self, lane: int | None, row: int | None, text: str) -> str:
        """``text`` in a scope where the lanes' loop index is lane ``lane``'s and the rows'
        loop index row ``row``'s (None: not bound)."""
        it = self.syn.index_type
        decls = ""
        if row is not None and self.row is not None:
            decls += f"const {it} {self.syn.sym(self.row)} = aj_i{row}; "
        if lane is not None:
            decls += f"const {it} {self.syn.sym(self.lane)} = aj_r{lane}; "
        return f"{{ {decls}{text} }}"

    def name(self, sc: L.ScopeId, row: int) -> str:
        if (sc, row) not in self.names:
            self.names[sc, row] = self.fresh("v")
        return self.names[sc, row]

    def hoist(self, text: str, pre: list[str]) -> str:
        name = self.fresh("t")
        pre.append(f"const {self.vt} {name} = {text};")
        return name

    def read(self, e: L.Get, pre: list[str], row: int) -> str:
        """The lanes' values of the read ``e`` for row ``row``: a gather where it depends on
        the lanes' index, else a broadcast; read once per statement however often used."""
        syms = {s for i in e.indices for s in index_symbols(i)}
        by_row = self.row in syms
        key = (id(pre), e, row if by_row else -1)
        if key in self.reads:  # read twice in one step (``d * d``) or by several rows
            return self.reads[key]
        value = self.syn.expr(e, self.plan.prec, [], 0)
        if self.lane not in syms and not by_row:
            return f"(({self.vt})({value}))"
        name = self.fresh("g")
        self.reads[key] = name
        self.kept.append(pre)
        pre.append(f"{self.vt} {name};")
        r = row if by_row else None
        if self.lane not in syms:
            pre.append(self.bound(None, r, f"{name} = ({self.vt})({value});"))
            return name
        for lane in range(self.plan.lanes):
            pre.append(self.bound(lane, r, f"{name}.s{lane:x} = {value};"))
        return name

    def expr(self, e: L.Expr, pre: list[str], row: int) -> str:
        """``e`` as a vector of the lanes' values of row ``row``; statements it needs go to
        ``pre``."""
        syn, vt = self.syn, self.vt
        match e:
            case L.Get():
                return self.read(e, pre, row)
            case L.Constant(value=v):
                return f"(({vt}){syn.const(v, self.ct)})"
            case L.Get_local(scope=sc):
                return self.name(sc, row)
            case L.Binop(op=op, a=a, b=b) if op in _ARITH:
                x, y = self.expr(a, pre, row), self.expr(b, pre, row)
                return ops.C_BINOP[op].format(x, y)
            case L.Binop(op=op, a=a, b=b):
                x = self.hoist(self.expr(a, pre, row), pre)
                y = self.hoist(self.expr(b, pre, row), pre)
                return self.minmax(op, x, y)
            case L.Unop(op=ops.Unop.neg, a=a):
                return f"(-{self.expr(a, pre, row)})"
            case L.Unop(a=a):
                return self.expr(a, pre, row)
            case L.Ternop(a=a, b=b, c=c):
                x, y, z = (self.expr(t, pre, row) for t in (a, b, c))
                return f"fma({x}, {y}, {z})"
            case L.Local_scope(scope=sc, body=body):
                if (sc, row) not in self.names:  # every row's, sharing the scope's loops
                    for r in range(self.plan.rows):
                        start = syn.const(-0.0, self.ct)
                        pre.append(f"{vt} {self.name(sc, r)} = (({vt}){start});")
                    out = Out()
                    self.stmt(body, out, 0)
                    pre.extend(out.lines)
                return self.name(sc, row)
        raise AssertionError(f"row lanes cannot render {type(e).__name__}")

    def minmax(self, op: ops.Binop, a: str, b: str) -> str:
        """The lanes' NaN-propagating ``max`` or ``min`` with ``-0 < +0`` (the scalar helpers'
        rule, ``aj_fmax``), as vector comparisons and selections: ``x != x`` for ``isnan`` and
        the sign bit read as an integer, since PoCL's vector ``isnan`` and ``signbit`` may be
        calls."""
        neg = f"(as_{'int' if self.plan.prec is Prec.single else 'long'}{self.plan.lanes}({a}) < 0)"
        if op is ops.Binop.max:
            return (
                f"((({a} > {b}) || ({a} != {a})) ? {a} : ((({b} > {a}) || ({b} != {b})) ? {b} "
                f": ({neg} ? {b} : {a})))"
            )
        return (
            f"((({a} < {b}) || ({a} != {a})) ? {a} : ((({b} < {a}) || ({b} != {b})) ? {b} "
            f": ({neg} ? {a} : {b})))"
        )

    def stmt(self, s: L.Stmt, out: Out, indent: int) -> None:
        match s:
            case L.Seq(stmts=stmts):
                for x in stmts:
                    self.stmt(x, out, indent)
            case L.For_loop(body=body):
                out.add(indent, self.syn.loop_header(s))
                self.stmt(body, out, indent + 1)
                out.add(indent, "}")
            case L.Set_local(scope=sc, value=v):
                pre: list[str] = []
                values = [self.expr(v, pre, r) for r in range(self.plan.rows)]
                lines = [f"{self.name(sc, r)} = {x};" for r, x in enumerate(values)]
                self.emit(out, indent, pre, lines)

    def emit(self, out: Out, indent: int, pre: list[str], lines: list[str]) -> None:
        if not pre:
            for line in lines:
                out.add(indent, line)
            return
        out.add(indent, "{")
        for p in pre + lines:
            out.add(indent + 1, p)
        out.add(indent, "}")


def _swap_scopes(e: L.Expr, tops: tuple[L.Local_scope, ...]) -> L.Expr:
    """``e`` with each of ``tops`` read as its local (its value, computed before)."""
    if any(e is t for t in tops):
        assert isinstance(e, L.Local_scope)
        return L.Get_local(e.scope)
    return L.map_children(e, lambda x: _swap_scopes(x, tops))


def render_row_lanes(syntax: GpuSyntax, plan: RowLanes, fill: L.Set | None, out: Out) -> int:
    """The body of the kernel running ``plan`` (after the kernel's prologue; ``fill``: a store
    of a constant into the work item's own cell first, the fill folded in), one work item per
    block of rows x vectors of lanes; returns the global size (launched with no group size)."""
    vec = _Vectors(syntax, plan)
    it = syntax.index_type
    lanes, rows = plan.lanes, plan.rows
    jl = plan.nest[-1]
    il = plan.nest[-2] if rows > 1 else None
    n, m = jl.extent, il.extent if il is not None else 1
    blocks_n, blocks_m = -(-n // lanes), -(-m // rows)
    per_block = blocks_n * blocks_m
    outer = plan.nest[: len(plan.nest) - (2 if il is not None else 1)]
    work_item_block(syntax, out, it, outer, per_block)
    out.add(1, f"const {it} aj_b = (aj_blk % {blocks_n}) * {lanes};")
    for lane in range(lanes):  # clamped: a lane past the nest computes a cell never stored
        out.add(1, f"const {it} aj_r{lane} = {jl.from_} + min(aj_b + {lane}, ({it}){n - 1});")
    if il is not None:
        out.add(1, f"const {it} aj_bi = (aj_blk / {blocks_n}) * {rows};")
        for r in range(rows):
            out.add(1, f"const {it} aj_i{r} = {il.from_} + min(aj_bi + {r}, ({it}){m - 1});")

    def stored(row: int, lane: int, text: str) -> None:
        """``text`` run for row ``row``'s lane ``lane`` where it is a cell of the nest (cells
        past the nest store nothing)."""
        keep = f"aj_b + {lane} < {n}" + (f" && aj_bi + {row} < {m}" if il is not None else "")
        out.add(1, f"if ({keep}) " + vec.bound(lane, row, text))

    if fill is not None:
        fill_out = Out()
        syntax.stmt(fill, fill_out, 0)
        for r in range(rows):
            for lane in range(lanes):
                stored(r, lane, " ".join(fill_out.lines))
    values: list[list[str]] = []
    for top in plan.scopes:
        pre: list[str] = []
        values.append([vec.expr(top, pre, r) for r in range(rows)])
        for line in pre:
            out.add(1, line)
    stmt = plan.rest
    swapped = L.Set(stmt.tn, stmt.indices, _swap_scopes(stmt.value, plan.scopes))
    for r in range(rows):
        for lane in range(lanes):
            lane_out = Out()
            for top, value in zip(plan.scopes, values, strict=True):
                sc = top.scope
                ct = syntax.compute_type(sc.prec)
                lane_out.add(0, f"{ct} {syntax.local(sc)} = {value[r]}.s{lane:x};")
            syntax.stmt(swapped, lane_out, 0)
            stored(r, lane, " ".join(lane_out.lines))
    return per_block * math.prod(lp.extent for lp in outer)


__all__ = ["ROWS", "VECTOR_BYTES", "RowLanes", "render_row_lanes", "row_lanes_on", "row_lanes_plan"]
