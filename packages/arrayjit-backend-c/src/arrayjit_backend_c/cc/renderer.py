"""The ``cc`` renderer: the shared C-like renderer
(:class:`arrayjit_backends.codegen.c_syntax.CSyntax`) for the system C compiler, one C function
per segment of the routine
(:mod:`arrayjit_backend_c.cpu.segments`), with the packed matmul
(:mod:`arrayjit_backend_c.cpu.matmul`) for the top-level loop nests that are one.

A parallel loop's function runs ``[start, stop)`` of its loop; a parallel reduction's function
accumulates its range from the op's identity into ``partials[slot]`` (8-byte slots) and its
``_combine`` function folds the partials into the cell in slot order; the packed matmul's
function computes units ``[start, stop)`` packing into ``mmbuf``. Reductions vectorize
(reassociated: ``#pragma omp simd``, compiled with ``-fopenmp-simd``, which needs no OpenMP
runtime).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from arrayjit_backend_c.cpu.matmul import c_helpers, c_part
from arrayjit_backend_c.cpu.segments import (
    Arg,
    Segment,
    SegmentedKernel,
    plan_segments,
    task_arguments,
)
from arrayjit_backends.codegen.c_prelude import C_PRELUDE
from arrayjit_backends.codegen.c_syntax import CSyntax, Out
from arrayjit_backends.codegen.kernel_plan import (
    ScalarReduction,
    has_loops,
    is_parallel_loop,
    local_scopes,
    local_sum,
    reads_of,
    scalar_reduction,
)
from arrayjit_ir import low_level as L
from arrayjit_ir import ops
from arrayjit_ir.optimized import Optimized
from arrayjit_tnode import Prec, Tnode

RowArray = tuple[str, int, bool]
"""A row held in an array: its name, the row's leading axes, whether stores reach the buffer
too (:meth:`~arrayjit_backends.codegen.c_syntax.CSyntax.resident_rows`)."""

RANGE = ("start", "stop")
"""The parameters of a parallel segment's range."""

ORDER_KEYS = "".join(
    f"static inline {it} aj_{name}_key({ft} x) {{ union {{ {ft} f; {it} i; }} v; v.f = x; "
    f"return v.i ^ ((v.i >> {bits - 1}) & {mask}); }}\n"
    f"static inline {ft} aj_{name}_unkey({it} k) {{ union {{ {ft} f; {it} i; }} v; "
    f"v.i = k ^ ((k >> {bits - 1}) & {mask}); return v.f; }}\n"
    for name, ft, it, bits, mask in (
        ("f32", "float", "int32_t", 32, "0x7FFFFFFF"),
        ("f64", "double", "int64_t", 64, "0x7FFFFFFFFFFFFFFFLL"),
    )
)
"""Order keys of floats: the signed integer of a float's bits with the magnitude bits of a
negative one flipped orders the non-NaN floats as the IEEE maximum and minimum do (-0 < +0);
the map is its own inverse (``unkey``). A vectorized max or min reduction
(:meth:`CcSyntax.accumulate`) runs on keys: the integer max is one instruction of one cycle's
latency, where the NaN-propagating float ``aj_fmaxf`` chained four compares and three mask
operations through the accumulator (a softmax's row max took three quarters of its time
without ``exp``, gcc 12, AVX-512)."""

DOT_JAM = 4
"""Cells of a loop of inlined sums (:class:`DotLoop`) computed side by side."""

LANE_BYTES = 64
"""Bytes of the lane partials of each of those sums: a 512-bit vector (two 256-bit ones)."""


@dataclass(frozen=True)
class DotLoop:
    """A loop whose every iteration stores one cell computed from one inlined sum, as
    attention's scores ``s[i, j] = (sum_d q[i, d] k[j, d]) * scale`` are inside its row loop:
    ``for j: tn[.., j, ..] = f(v)`` with ``v`` a local scope ``v := init; for d: v := v +
    term`` (or ``fma``). Rendered one at a time, each cell's sum vectorizes over ``d`` and
    ends in a horizontal sum, which costs more than its 64 terms (gcc 12 sums the lanes in
    order); :meth:`CcSyntax.dot_jam` runs :data:`DOT_JAM` cells at once, each term's shared
    operands loaded once, with their lanes summed as trees."""

    loop: L.For_loop
    store: L.Set
    scope: L.Local_scope
    init: L.Set_local | None
    inner: L.For_loop


def dot_loop(loop: L.For_loop) -> DotLoop | None:
    """``loop`` as a :class:`DotLoop` whose iterations are independent, with a trip count a
    multiple of :data:`DOT_JAM` and a float32 or double sum over a multiple of a vector's
    lanes (:data:`LANE_BYTES`) terms; None otherwise."""
    store = loop.body
    if not isinstance(store, L.Set) or (loop.to_inclusive - loop.from_ + 1) % DOT_JAM:
        return None
    scopes = local_scopes(store.value)
    if len(scopes) != 1 or any(g.tn is store.tn for g in reads_of(store)):
        return None
    scope = scopes[0]
    parts = list(scope.body.stmts) if isinstance(scope.body, L.Seq) else [scope.body]
    init = parts[0] if len(parts) == 2 else None
    inner = parts[-1]
    if len(parts) > 2 or not isinstance(inner, L.For_loop):
        return None
    if init is not None and not (
        isinstance(init, L.Set_local) and init.scope == scope.scope and not has_loops(init.value)
    ):
        return None
    sum_of = local_sum(inner)
    prec = scope.scope.prec
    if sum_of != (ops.Binop.add, scope.scope) or prec not in (Prec.single, Prec.double):
        return None
    lanes = LANE_BYTES // prec.byte_size
    if (inner.to_inclusive - inner.from_ + 1) % lanes or not is_parallel_loop(loop):
        return None
    return DotLoop(loop, store, scope, init, inner)


KEY_TYPES = {"float": ("f32", "int32_t", 32), "double": ("f64", "int64_t", 64)}
"""Per float compute type: the key helpers' suffix, the key type, its bits."""


class CcSyntax(CSyntax):
    """C for the system compiler, a function per segment (see the module docstring)."""

    simd_reduction_pragma = "#pragma omp simd reduction({op}:{var})"
    jam_factor = 4
    prelude = C_PRELUDE + ORDER_KEYS

    def stmt(self, s: L.Stmt, out: Out, indent: int) -> None:
        """As :meth:`CSyntax.stmt`, with loops of inlined sums jammed (:class:`DotLoop`)."""
        if isinstance(s, L.For_loop) and scalar_reduction(s) is None:
            dot = dot_loop(s)
            if dot is not None:
                self.dot_jam(dot, out, indent)
                return
            sum_of = local_sum(s)
            if sum_of is not None and sum_of[0] is ops.Binop.add and _lanes_fit(s, sum_of[1]):
                self.lane_sum(s, sum_of[1], out, indent)
                return
        super().stmt(s, out, indent)

    def lane_sum(self, loop: L.For_loop, sc: L.ScopeId, out: Out, indent: int) -> None:
        """The innermost loop of an inlined sum into the (declared) local ``sc`` in lane
        partials, as :meth:`dot_jam` does for one cell: the local plus their tree sum. gcc 12
        ends a vectorized sum (``omp simd reduction``) with the lanes added in order, 15
        dependent adds per 16-lane block: the blocks of 64 terms of a blocked row sum paid
        that per block (softmax's row loop: 1.30 -> 1.10 ms on one thread)."""
        ct = self.compute_type(sc.prec)
        width = LANE_BYTES // sc.prec.byte_size
        v = self.sym(loop.index)
        lanes, lane = self.temp("lanes"), self.fresh_name("l")
        local = self.local(sc)
        out.add(indent, "{")
        body = indent + 1
        out.add(body, f"{ct} {lanes}[{width}];")
        out.add(body, f"for (int64_t {lane} = 0; {lane} < {width}; ++{lane})")
        out.add(body + 1, f"{lanes}[{lane}] = {self.const(-0.0, ct)};")
        out.add(body, self.loop_header(loop, width))
        out.add(body + 1, "#pragma omp simd")
        out.add(body + 1, f"for (int64_t {lane} = 0; {lane} < {width}; ++{lane}) {{")
        self._syms[loop.index] = f"({v} + {lane})"
        self._locals[sc] = f"{lanes}[{lane}]"
        self.stmt(loop.body, out, body + 2)
        self._locals[sc] = local
        self._syms[loop.index] = v
        out.add(body + 1, "}")
        out.add(body, "}")
        self._tree(lanes, width, lane, out, body)
        out.add(body, f"{local} = {local} + {lanes}[0];")
        out.add(indent, "}")

    @staticmethod
    def _tree(lanes: str, width: int, lane: str, out: Out, indent: int) -> None:
        """Sum the ``width`` partials of the array ``lanes`` pairwise into its first."""
        half = width // 2
        while half:
            out.add(indent, "#pragma omp simd")
            out.add(indent, f"for (int64_t {lane} = 0; {lane} < {half}; ++{lane})")
            out.add(indent + 1, f"{lanes}[{lane}] = {lanes}[{lane}] + {lanes}[{lane} + {half}];")
            half //= 2

    def dot_jam(self, dot: DotLoop, out: Out, indent: int) -> None:
        """:data:`DOT_JAM` iterations of ``dot.loop`` at a time: each sum in lane partials
        (``lanes[u][l]`` takes the terms ``l``, ``l + W``, ... of cell ``u`` in order, from
        -0.0, vectorized over ``l``), the partials summed pairwise, then the local's start plus
        that sum, and the cell's store. A reassociation of each sum, as vectorizing it was;
        a sum of -0.0 terms stays -0.0 (every partial does)."""
        sc = dot.scope.scope
        ct = self.compute_type(sc.prec)
        width = LANE_BYTES // sc.prec.byte_size
        zero = self.const(-0.0, ct)
        v, w = self.sym(dot.loop.index), self.sym(dot.inner.index)
        lanes, u, lane = self.temp("lanes"), self.fresh_name("u"), self.fresh_name("l")
        out.add(indent, self.loop_header(dot.loop, DOT_JAM))
        body = indent + 1
        out.add(body, f"{ct} {lanes}[{DOT_JAM}][{width}];")
        out.add(body, f"for (int64_t {u} = 0; {u} < {DOT_JAM}; ++{u})")
        out.add(body + 1, f"for (int64_t {lane} = 0; {lane} < {width}; ++{lane})")
        out.add(body + 2, f"{lanes}[{u}][{lane}] = {zero};")
        out.add(body, self.loop_header(dot.inner, width))
        out.add(body + 1, "#pragma omp simd")
        out.add(body + 1, f"for (int64_t {lane} = 0; {lane} < {width}; ++{lane}) {{")
        saved = self._locals.get(sc)
        was_declared = sc in self._declared
        self._declared.add(sc)
        self._syms[dot.inner.index] = f"({w} + {lane})"
        for k in range(DOT_JAM):
            self._syms[dot.loop.index] = f"({v} + {k})"
            self._locals[sc] = f"{lanes}[{k}][{lane}]"
            self.stmt(dot.inner.body, out, body + 2)
        self._syms[dot.inner.index] = w
        out.add(body + 1, "}")
        out.add(body, "}")
        store = L.Set(dot.store.tn, dot.store.indices, _replace(dot.store.value, dot.scope))
        for k in range(DOT_JAM):
            self._syms[dot.loop.index] = f"({v} + {k})"
            self._tree(f"{lanes}[{k}]", width, lane, out, body)
            self._locals[sc] = self.fresh_name(f"v{len(self._locals)}_{sc.tn.debug_name}")
            out.add(body, "{")
            out.add(body + 1, self.declare(sc))
            if dot.init is not None:
                self.stmt(dot.init, out, body + 1)
            local = self.local(sc)
            out.add(body + 1, f"{local} = {local} + {lanes}[{k}][0];")
            self.stmt(store, out, body + 1)
            out.add(body, "}")
        self._syms[dot.loop.index] = v
        if saved is None:
            self._locals.pop(sc, None)
        else:
            self._locals[sc] = saved
        if not was_declared:
            self._declared.discard(sc)
        out.add(indent, "}")

    def accumulate(
        self,
        red: ScalarReduction,
        acc: str,
        out: Out,
        indent: int,
        bounds: tuple[str, str] | None = None,
    ) -> None:
        """As :meth:`CSyntax.accumulate`; a float max or min whose innermost loop vectorizes
        runs on order keys (:data:`ORDER_KEYS`): any NaN term or start makes the key the
        extreme one, whose float is a NaN (every NaN is the same value to arrayjit); otherwise
        the key's extreme is the float's, -0 below +0, so the result is the serial one."""
        ct = self.compute_type(red.target.tn.prec)
        keyed = (
            red.op in (ops.Binop.max, ops.Binop.min)
            and ct in KEY_TYPES
            and not red.fused
            and not has_loops(red.term)
            and self.simd_pays(red.loops[-1])
        )
        if not keyed:
            super().accumulate(red, acc, out, indent, bounds)
            return
        suffix, kt, bits = KEY_TYPES[ct]
        top = f"INT{bits}_MAX" if red.op is ops.Binop.max else f"INT{bits}_MIN"
        pick = ">" if red.op is ops.Binop.max else "<"
        key = self.temp("key")
        out.add(indent, "{")
        out.add(indent + 1, f"{kt} {key} = {acc} != {acc} ? {top} : aj_{suffix}_key({acc});")
        depth = indent + 1
        for k, lp in enumerate(red.loops):
            if k == len(red.loops) - 1:
                out.add(depth, self.simd_reduction_pragma.format(op=red.op.value, var=key))
            out.add(depth, self.loop_header(lp, 1, bounds if k == 0 else None))
            depth += 1
        pre: list[str] = []
        term = self.expr(red.term, red.target.tn.prec, pre, depth)
        value, term_key = self.temp("t"), self.temp("k")
        pre.append(f"const {ct} {value} = {term};")
        keyed_value = f"{value} != {value} ? {top} : aj_{suffix}_key({value})"
        pre.append(f"const {kt} {term_key} = {keyed_value};")
        self._emit(out, depth, pre, f"{key} = {key} {pick} {term_key} ? {key} : {term_key};")
        for _ in red.loops:
            depth -= 1
            out.add(depth, "}")
        out.add(indent + 1, f"{acc} = aj_{suffix}_unkey({key});")
        out.add(indent, "}")

    def _reset(self) -> None:
        super()._reset()
        self._taken |= {*RANGE, "partials", "slot", "count", "mmbuf", "pa", "pb"}

    def render_segments(self, opt: Optimized, fn_name: str) -> SegmentedKernel:
        """The C source of a routine as segment functions (see the module docstring)."""
        self.check_precisions(opt)
        self._reset()
        plan = plan_segments(opt, rows=True)
        groups, scratch = plan.groups, plan.scratch
        common = self.parameters(plan.params, scratch)
        out, helpers, segments = Out(), dict[str, str](), list[Segment]()
        out.add(0, f"/* routine {opt.name} */")

        def function(name: str, extra: list[str], k: int) -> None:
            mine = [common[i] for i in plan.args[k]]
            out.add(0, f"void {name}({', '.join(mine + extra) or 'void'}) {{")
            self._declared = set()
            for tn in plan.stack_nodes(k):
                self.declare_node(tn, opt.traced[tn].zero_initialized_by_code, out, 1)
            for tn in plan.zeroed_scratch(k):
                self.stmt(L.Zero_out(tn), out, 1)

        for k, g in enumerate(groups):
            name = f"{fn_name}_{k}"
            if isinstance(g, list):
                segments.append(Segment(name, args=plan.args[k]))
                function(name, [], k)
                for s in g:
                    held = plan.resident(s)
                    if not held:
                        self.stmt(s, out, 1)
                        continue
                    out.add(1, "{")
                    with self.resident_rows(self._row_arrays(held, out, 2)):
                        self.stmt(s, out, 2)
                    out.add(1, "}")
                out.add(0, "}")
                continue
            mm = plan.matmul(g)
            if mm is not None and isinstance(g, L.For_loop):
                segments.append(Segment(name, g, None, mm, args=plan.args[k]))
                if mm.suffix not in helpers:  # the same text for every matmul of a suffix
                    helpers[mm.suffix] = c_helpers(mm)
                function(name, ["int64_t start", "int64_t stop", "void *restrict mmbuf"], k)
                for line in c_part(mm, {op.tn: self.name(op.tn) for op in (mm.a, mm.b, mm.c)}):
                    out.add(1, line)
                out.add(0, "}")
                continue
            red = scalar_reduction(g)
            if red is None:
                assert isinstance(g, L.For_loop)
                held = plan.resident(g)
                jam = not held and self.jammable(g)  # jammed rows would share one row array
                segments.append(
                    Segment(name, g, grain=self.jam_factor if jam else 1, args=plan.args[k])
                )
                function(name, ["int64_t start", "int64_t stop"], k)
                if jam:
                    self.jam(g, out, 1, RANGE)
                else:
                    with self.resident_rows(self._row_arrays(held, out, 1)):
                        out.add(1, self.loop_header(g, 1, RANGE))
                        self.stmt(g.body, out, 2)
                        out.add(1, "}")
                out.add(0, "}")
                continue
            # A Set is the float32 accumulator of a small-float cell: always a reduction.
            segments.append(Segment(name, red.loops[0], red, args=plan.args[k]))
            chunk = ["int64_t start", "int64_t stop", "void *restrict partials", "int64_t slot"]
            function(name, chunk, k)
            self._partial(red, out)
            out.add(0, "}")
            function(f"{name}_combine", ["const void *restrict partials", "int64_t count"], k)
            self._combine(red, out)
            out.add(0, "}")
        for seg in segments:
            if seg.parallel:
                self._task(seg, task_arguments(seg, plan.params, scratch), out)
        source = (
            self.prelude
            + self.math_prelude()
            + "".join(helpers.values())
            + "\n".join(out.lines)
            + "\n"
        )
        return SegmentedKernel(source, plan.params, scratch, tuple(segments))

    def _row_arrays(self, held: Sequence[Tnode], out: Out, indent: int) -> dict[Tnode, RowArray]:
        """Arrays of one row of each node a row loop holds a row at a time
        (:meth:`~arrayjit_backend_c.cpu.segments.SegmentPlan.resident`), declared at
        ``indent``: the loop's iterations reuse them, so a row stays in the core's cache and
        the node has no buffer at all."""
        rows: dict[Tnode, RowArray] = {}
        for tn in held:
            name = self.fresh_name(f"row_{tn.debug_name}")
            cells = max(math.prod(tn.dims[1:]), 1)
            out.add(indent, f"{self.storage_types[tn.prec]} {name}[{cells}];")
            rows[tn] = (name, 1, False)
        return rows

    @staticmethod
    def _task(seg: Segment, args: list[Arg], out: Out) -> None:
        """A parallel segment's task: its function called with one chunk's arguments."""
        out.add(0, f"void {seg.task_name}(const int64_t *restrict common,")
        out.add(0, "    const int64_t *restrict extra, int64_t chunk) {")
        out.add(1, f"const int64_t *restrict row = extra + chunk * {seg.chunk_width()};")
        values = [
            f"{'(void *)(intptr_t)' if a.pointer else ''}"
            f"{f'common[row[{a.index}]]' if a.common else f'row[{a.index}]'}"
            for a in args
        ]
        out.add(1, f"{seg.name}({', '.join(values)});")
        out.add(0, "}")

    def _partial(self, red: ScalarReduction, out: Out) -> None:
        """The body of a parallel reduction's chunk function."""
        ct = self.compute_type(red.target.tn.prec)
        acc = self.temp("acc")
        start = ops.partial_start(red.op, ct in ("float", "double"))
        out.add(1, f"{ct} {acc} = {self.const(start, ct)};")
        self.accumulate(red, acc, out, 1, RANGE)
        out.add(1, f"(({ct} *)((uint64_t *)partials + slot))[0] = {acc};")

    def _combine(self, red: ScalarReduction, out: Out) -> None:
        """The body of a parallel reduction's combining function: the cell, then each
        partial in slot order."""
        tn, idx = red.target.tn, red.target.indices
        ct = self.compute_type(tn.prec)
        cell = self.cell(tn, idx)
        acc, k = self.temp("acc"), self.fresh_name("part")
        out.add(1, f"{ct} {acc} = (({ct}){self.load(tn.prec, cell)});")
        out.add(1, f"for (int64_t {k} = 0; {k} < count; ++{k}) {{")
        part = f"((const {ct} *)((const uint64_t *)partials + {k}))[0]"
        out.add(2, f"{acc} = {self.binop(red.op, acc, part, ct, ct not in ('float', 'double'))};")
        out.add(1, "}")
        out.add(1, f"{cell} = {self.store(tn.prec, acc)};")


def _lanes_fit(loop: L.For_loop, sc: L.ScopeId) -> bool:
    """Whether an inlined float32 or double sum over ``loop`` runs whole vectors of lanes."""
    if sc.prec not in (Prec.single, Prec.double):
        return False
    trip = loop.to_inclusive - loop.from_ + 1
    return trip % (LANE_BYTES // sc.prec.byte_size) == 0


def _replace(e: L.Expr, scope: L.Local_scope) -> L.Expr:
    """``e`` with the local scope ``scope`` read as its local (computed before)."""
    if e is scope or e == scope:
        return L.Get_local(scope.scope)
    return L.map_children(e, lambda x: _replace(x, scope))
