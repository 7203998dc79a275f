"""The ``cc`` renderer: the shared C-like renderer (:class:`arrayjit_backends.c_syntax.CSyntax`)
with the OpenMP pragmas of the system C compiler."""

from arrayjit_backends.c_syntax import CSyntax


class CcSyntax(CSyntax):
    """C for the system compiler: top-level loops writing disjoint cells, and reductions into
    one cell, run on all cores; reductions vectorize (reassociated, as OpenMP allows)."""

    parallel_pragma = "#pragma omp parallel for schedule(static)"
    reduction_pragma = "#pragma omp parallel for{simd} schedule(static) reduction({op}:{var})"
    simd_reduction_pragma = "#pragma omp simd reduction({op}:{var})"
    jam_factor = 4
