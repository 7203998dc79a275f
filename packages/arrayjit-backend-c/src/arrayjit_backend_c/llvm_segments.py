"""Segment planning of the LLVM generator: which top-level statements of a routine become a
parallel function and which nodes each segment touches.

A routine becomes one LLVM function per *segment*: a parallel loop (a top-level loop whose
iterations write disjoint cells, or that reduces into one cell, with enough work), or a run of the
serial statements between them (:func:`split_segments`). The backend splits a parallel segment
across as many threads as its cost is worth
(:func:`~arrayjit_backends.kernel_plan.worth_threads`). A kernel-local node touched by several
segments lives in a scratch buffer (:func:`touched_nodes`).
"""

from __future__ import annotations

from dataclasses import dataclass

from arrayjit_backend_c.cpu_matmul import CpuMatmul, cpu_matmul
from arrayjit_backends.kernel_plan import (
    PARALLEL_MIN_WORK,
    ScalarReduction,
    is_parallel_loop,
    loop_work,
    scalar_reduction,
)
from arrayjit_ir import low_level as L
from arrayjit_tnode import Tnode


@dataclass(frozen=True)
class Segment:
    """One generated function: a run of serial top-level statements, a parallel loop, or a
    parallel reduction."""

    name: str
    loop: L.For_loop | None = None
    """The parallel loop; its function takes ``(start, stop)`` after the common parameters."""
    reduction: ScalarReduction | None = None
    """For a parallel reduction (then ``loop`` is its outer loop): the function takes
    ``(start, stop, partials, slot)`` and stores the reduction of its range, from the op's
    identity, into ``partials[slot]`` (8-byte slots); ``{name}_combine`` takes
    ``(partials, count)`` and folds the partials into the cell."""
    matmul: CpuMatmul | None = None
    """For the packed matmul (then ``loop`` is the nest it replaces): the function takes
    ``(start, stop, buffer)``, a range of its :attr:`~arrayjit_backend_c.cpu_matmul.CpuMatmul.
    units` (not of the loop) and the chunk's packing buffer
    (:func:`~arrayjit_backend_c.llvm_matmul.buffer_bytes`)."""

    @property
    def parallel(self) -> bool:
        return self.loop is not None

    @property
    def combine_name(self) -> str:
        return f"{self.name}_combine"


def split_segments(code: L.Stmt) -> list[list[L.Stmt] | L.For_loop | L.Set]:
    """The routine's top-level statements grouped into serial runs (lists) and parallel loops:
    top-level loops with at least ``PARALLEL_MIN_WORK`` work that write disjoint cells or are a
    :class:`~arrayjit_backends.kernel_plan.ScalarReduction` (as is the store of a float32
    accumulator into a small-float cell, a ``Set``), and packed matmuls
    (:func:`~arrayjit_backend_c.cpu_matmul.cpu_matmul`)."""
    stmts = list(code.stmts) if isinstance(code, L.Seq) else [code]
    groups: list[list[L.Stmt] | L.For_loop | L.Set] = []
    for s in stmts:
        if (
            isinstance(s, L.For_loop | L.Set)
            and loop_work(s) >= PARALLEL_MIN_WORK
            and (
                scalar_reduction(s) is not None
                or (isinstance(s, L.For_loop) and is_parallel_loop(s))
            )
        ) or (isinstance(s, L.For_loop) and cpu_matmul(s) is not None):
            groups.append(s)
        elif groups and isinstance(groups[-1], list):
            groups[-1].append(s)
        else:
            groups.append([s])
    return groups


def touched_nodes(s: L.Stmt, acc: set[Tnode]) -> set[Tnode]:
    """Every node a statement reads, writes or zeroes (local-scope bodies included)."""
    match s:
        case L.Seq(stmts=stmts):
            for x in stmts:
                touched_nodes(x, acc)
        case L.For_loop(body=body):
            touched_nodes(body, acc)
        case L.Zero_out(tn=tn):
            acc.add(tn)
        case L.Set(tn=tn, value=v):
            acc.add(tn)
            _touched_expr(v, acc)
        case L.Set_local(value=v):
            _touched_expr(v, acc)
    return acc


def _touched_expr(e: L.Expr, acc: set[Tnode]) -> None:
    match e:
        case L.Get(tn=tn):
            acc.add(tn)
        case L.Local_scope(body=body):
            touched_nodes(body, acc)
        case L.Binop(a=a, b=b):
            _touched_expr(a, acc)
            _touched_expr(b, acc)
        case L.Unop(a=a):
            _touched_expr(a, acc)
        case L.Ternop(a=a, b=b, c=c):
            _touched_expr(a, acc)
            _touched_expr(b, acc)
            _touched_expr(c, acc)
