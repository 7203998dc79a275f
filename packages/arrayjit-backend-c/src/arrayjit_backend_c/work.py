"""How much work a routine does, roughly: which routines are short enough to run on the thread
that schedules them (both CPU compilers mark their runs with it)."""

from __future__ import annotations

from arrayjit_backends.kernel_plan import loop_work
from arrayjit_ir.optimized import Optimized

SHORT_WORK = 256
"""Routines doing at most this many innermost iterations (zeroed cells counted: see
:func:`~arrayjit_backends.kernel_plan.loop_work`) count as short: a few microseconds, less than
handing them to a stream's worker thread (see
:meth:`~arrayjit_backends.scheduler.StreamQueue.schedule_short`)."""


def is_short(optimized: Optimized) -> bool:
    """Whether a routine is short enough to run on the thread that schedules it."""
    return loop_work(optimized.code, zeroing=True) <= SHORT_WORK
