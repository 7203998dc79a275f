"""What every renderer shares: kernel planning facts (parameters, reductions, matmul shapes),
the C syntax and its prelude. Imports only ``arrayjit_ir`` and ``arrayjit_tnode``."""
