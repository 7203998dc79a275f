"""How much work a routine does, roughly: which routines are short enough to run on the thread
that schedules them (both CPU compilers mark their runs with it)."""

from __future__ import annotations

from arrayjit_ir import low_level as L
from arrayjit_ir.optimized import Optimized

SHORT_WORK = 256
"""Routines doing at most this many innermost iterations (:func:`work`) count as short: a few
microseconds, less than handing them to a stream's worker thread (see
:meth:`~arrayjit_backends.scheduler.StreamQueue.schedule_short`)."""


def work(s: L.Stmt) -> int:
    """Innermost iterations ``s`` runs (loops inlined into expressions included): a bound on
    how long a routine runs, for :data:`SHORT_WORK`."""
    match s:
        case L.For_loop(from_=lo, to_inclusive=hi, body=body):
            return max(hi - lo + 1, 0) * work(body)
        case L.Seq(stmts=stmts):
            return sum(work(x) for x in stmts)
        case L.Zero_out(tn=tn):
            return tn.num_elems
        case L.Set(value=v) | L.Set_local(value=v):
            return max(1, _inlined_work(v))
    return 1


def _inlined_work(e: L.Expr) -> int:
    if isinstance(e, L.Local_scope):
        return work(e.body)
    return sum(_inlined_work(x) for x in L.children(e))


def is_short(optimized: Optimized) -> bool:
    """Whether a routine is short enough to run on the thread that schedules it."""
    return work(optimized.code) <= SHORT_WORK
