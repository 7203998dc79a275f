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

from arrayjit_backend_c.cpu.matmul import c_helpers, c_part, cpu_matmul
from arrayjit_backend_c.cpu.segments import (
    Arg,
    Segment,
    SegmentedKernel,
    plan_segments,
    task_arguments,
)
from arrayjit_backends.codegen.c_syntax import CSyntax, Out
from arrayjit_backends.codegen.kernel_plan import ScalarReduction, scalar_reduction
from arrayjit_ir import low_level as L
from arrayjit_ir import ops
from arrayjit_ir.optimized import Optimized
from arrayjit_tnode import Tnode

RowArray = tuple[str, int, bool]
"""A row held in an array: its name, the row's leading axes, whether stores reach the buffer
too (:meth:`~arrayjit_backends.codegen.c_syntax.CSyntax.resident_rows`)."""

RANGE = ("start", "stop")
"""The parameters of a parallel segment's range."""


class CcSyntax(CSyntax):
    """C for the system compiler, a function per segment (see the module docstring)."""

    simd_reduction_pragma = "#pragma omp simd reduction({op}:{var})"
    jam_factor = 4

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
            mm = cpu_matmul(g)
            if mm is not None and isinstance(g, L.For_loop):
                segments.append(Segment(name, g, None, mm, args=plan.args[k]))
                helpers.setdefault(mm.suffix, c_helpers(mm))
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
        width = len(seg.extra_pointers())
        out.add(0, f"void {seg.task_name}(const int64_t *restrict common,")
        out.add(0, "    const int64_t *restrict extra, int64_t chunk) {")
        values = [
            f"{'(void *)(intptr_t)' if a.pointer else ''}"
            f"{a.block}[{a.index if a.block == 'common' else f'chunk * {width} + {a.index}'}]"
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
