"""The ``llvm`` backend: LLVM IR generated from the low-level IR (types, scalar ops, helpers,
the packed matmul) and JIT-compiled by llvmlite. Imports ``cpu`` and the shared layer, never
``cc``."""
