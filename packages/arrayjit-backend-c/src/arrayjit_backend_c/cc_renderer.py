"""The ``cc`` renderer: the shared C-like renderer (:class:`arrayjit_backends.c_syntax.CSyntax`)
with the OpenMP pragmas of the system C compiler, and the packed matmul
(:mod:`arrayjit_backend_c.cpu_matmul`) for the top-level loop nests that are one."""

from arrayjit_backend_c.cpu_matmul import c_call, c_helpers, cpu_matmul
from arrayjit_backends.c_syntax import CSyntax, Out
from arrayjit_backends.kernel_plan import KernelParams
from arrayjit_ir import low_level as L
from arrayjit_ir.optimized import Optimized


class CcSyntax(CSyntax):
    """C for the system compiler: top-level loops writing disjoint cells, and reductions into
    one cell, run on all cores; reductions vectorize (reassociated, as OpenMP allows); plain
    matmuls run as the packed matmul, on all cores."""

    parallel_pragma = "#pragma omp parallel for schedule(static) num_threads(aj_team({threads}))"
    reduction_pragma = (
        "#pragma omp parallel for{simd} schedule(static) reduction({op}:{var}) "
        "num_threads(aj_team({threads}))"
    )
    # A team of the loop's worth (kernel_plan.worth_threads), at most the thread's OpenMP
    # budget (omp_set_num_threads: the stream's share of the cores).
    prelude = CSyntax.prelude + (
        "#ifdef _OPENMP\n#include <omp.h>\n"
        "static inline int aj_team(int worth) "
        "{ int most = omp_get_max_threads(); return worth < most ? worth : most; }\n#endif\n"
    )
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
        assert isinstance(s, L.For_loop)  # only loop nests are matmuls
        threads = self.team_size(s)
        out.add(indent, f"/* packed matmul: {mm.m} x {mm.n} cells, {mm.k} steps */")
        out.add(indent, "{")
        for line in c_call(mm, names, threads):
            out.add(0 if line.startswith("#") else indent + 1, line)
        out.add(indent, "}")

    def render(self, opt: Optimized, fn_name: str) -> tuple[str, KernelParams]:
        source, params = super().render(opt, fn_name)
        if not self._mm_helpers:
            return source, params
        assert source.startswith(self.prelude)
        helpers = "".join(self._mm_helpers.values())
        return self.prelude + helpers + source[len(self.prelude) :], params
