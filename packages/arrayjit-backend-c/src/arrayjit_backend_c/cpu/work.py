"""How much work a routine does, roughly: which routines are short enough to run on the thread
that schedules them (both CPU compilers mark their runs with it)."""

from __future__ import annotations

from arrayjit_backends.codegen.kernel_plan import loop_cost, loop_work
from arrayjit_ir.optimized import Optimized

SHORT_WORK = 1 << 16
"""Routines doing more innermost iterations than this (zeroed cells counted: see
:func:`~arrayjit_backends.codegen.kernel_plan.loop_work`) are never short."""
SHORT_COST = 1 << 19
"""Routines of at most this estimated cost
(:func:`~arrayjit_backends.codegen.kernel_plan.loop_cost`, about 50 us on one core) and
:data:`SHORT_WORK` iterations count as short: handing them to a stream's worker thread costs about
as much as running them (a thread wake is 15-35 us on a virtual machine, and the caller pays for it
even when it then runs the task itself; see
:meth:`~arrayjit_backends.impl.stream_queue.StreamQueue.schedule_short`)."""


def is_short(optimized: Optimized) -> bool:
    """Whether a routine is short enough to run on the thread that schedules it."""
    code = optimized.code
    return loop_work(code, zeroing=True) <= SHORT_WORK and loop_cost(code) <= SHORT_COST
