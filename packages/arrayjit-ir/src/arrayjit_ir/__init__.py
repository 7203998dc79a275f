"""arrayjit_ir: ops, indexing, assignments, low-level IR, optimizer, reference interpreter."""

from arrayjit_ir import assignments, indexing, ir, low_level, ops
from arrayjit_ir.__about__ import __version__
from arrayjit_ir.assignments import Comp
from arrayjit_ir.indexing import StaticSymbol, Symbol
from arrayjit_ir.interpret import interpret
from arrayjit_ir.lower import lower
from arrayjit_ir.optimize import optimize, optimize_batch
from arrayjit_ir.optimized import Optimized, TracedNode
from arrayjit_ir.pretty import pretty
from arrayjit_ir.projections import Projections

__all__ = [
    "Comp",
    "Optimized",
    "Projections",
    "StaticSymbol",
    "Symbol",
    "TracedNode",
    "__version__",
    "assignments",
    "indexing",
    "interpret",
    "ir",
    "low_level",
    "lower",
    "ops",
    "optimize",
    "optimize_batch",
    "pretty",
]
