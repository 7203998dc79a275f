"""The ``cc`` renderer: the shared C-like renderer (:class:`arrayjit_backends.c_syntax.CSyntax`)
with the OpenMP pragmas of the system C compiler, and the packed matmul
(:mod:`arrayjit_backend_c.cpu_matmul`) for the top-level loop nests that are one."""

from arrayjit_backend_c.cpu_matmul import c_call, c_helpers, cpu_matmul
from arrayjit_backends.c_syntax import CSyntax, Out
from arrayjit_backends.kernel_plan import PARALLEL_MIN_WORK, KernelParams
from arrayjit_ir import low_level as L
from arrayjit_ir.optimized import Optimized


class CcSyntax(CSyntax):
    """C for the system compiler: top-level loops writing disjoint cells, and reductions into
    one cell, run on all cores; reductions vectorize (reassociated, as OpenMP allows); plain
    matmuls run as the packed matmul, on all cores."""

    parallel_pragma = "#pragma omp parallel for schedule(static)"
    reduction_pragma = "#pragma omp parallel for{simd} schedule(static) reduction({op}:{var})"
    simd_reduction_pragma = "#pragma omp simd reduction({op}:{var})"
    jam_factor = 4

    def _reset(self) -> None:
        super()._reset()
        self._mm_helpers: dict[str, str] = {}

    def stmt(self, s: L.Stmt, out: Out, indent: int) -> None:
        mm = cpu_matmul(s) if indent == 1 else None
        if mm is None:
            super().stmt(s, out, indent)
            return
        self._mm_helpers.setdefault(mm.suffix, c_helpers(mm))
        names = {op.tn: self.name(op.tn) for op in (mm.a, mm.b, mm.c)}
        parallel = mm.m * mm.n * mm.k >= 2 * PARALLEL_MIN_WORK
        out.add(indent, f"/* packed matmul: {mm.m} x {mm.n} cells, {mm.k} steps */")
        out.add(indent, "{")
        for line in c_call(mm, names, parallel):
            out.add(0 if line.startswith("#") else indent + 1, line)
        out.add(indent, "}")

    def render(self, opt: Optimized, fn_name: str) -> tuple[str, KernelParams]:
        source, params = super().render(opt, fn_name)
        if not self._mm_helpers:
            return source, params
        assert source.startswith(self.prelude)
        helpers = "".join(self._mm_helpers.values())
        return self.prelude + helpers + source[len(self.prelude) :], params
