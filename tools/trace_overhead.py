"""Where the cost of tracing a run goes (issue 37): the tiny run-and-wait of the benchmarks (a
1-element routine and ``await_stream``) timed with tracing off, then with partial recorders
swapped in for the tracer's ``call`` one step at a time, then with the real recorder; each
row's median over ``--runs`` runs, best of ``--repeats`` interleaved rounds, and its increment
over the row before (nanoseconds per traced run).

    python tools/trace_overhead.py
    python tools/trace_overhead.py --backend sync_cc --repeats 9
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from arrayjit_backends import fresh_backend
from arrayjit_backends.runtime import trace
from arrayjit_ir import ir
from arrayjit_tnode import Tnode
from arrayjit_tnode import memory_mode as mm

Recorder = Callable[[trace.Tracer], Any]
"""Makes the ``call`` (label, fn, arg -> task) that a tracer hands routines."""


def call_only(tracer: trace.Tracer) -> Any:
    """The call into the tracer and the routine's label, recording nothing."""

    def call(label: trace.Label, fn: Callable[[Any], None], arg: Any) -> Callable[[], None]:
        return lambda: fn(arg)

    return call


def with_number(tracer: trace.Tracer) -> Any:
    """And the task's sequence number."""
    numbers = tracer._seq

    def call(label: trace.Label, fn: Callable[[Any], None], arg: Any) -> Callable[[], None]:
        next(numbers)
        return lambda: fn(arg)

    return call


def with_record(tracer: trace.Tracer) -> Any:
    """And the timing closure with its record, without reading the clock."""
    numbers, record = tracer._seq, tracer._runs.append

    def call(label: trace.Label, fn: Callable[[Any], None], arg: Any) -> Callable[[], None]:
        seq = next(numbers)

        def traced() -> None:
            try:
                fn(arg)
            finally:
                record((seq, label, 0, 0))

        return traced

    return call


STEPS: list[tuple[str, Recorder | None]] = [
    ("off", None),
    ("call into the tracer", call_only),
    ("+ sequence number", with_number),
    ("+ timing closure, record", with_record),
    ("+ 2 clock readings (full)", lambda tracer: tracer.call),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="multicore_cc")
    parser.add_argument("--runs", type=int, default=4000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    backend = fresh_backend(args.backend)
    x = Tnode.create((1,), label="x", memory_mode=(mm.Materialized(), 1))
    ctx = backend.make_context(backend.new_stream(backend.get_device(0)))
    routine = backend.link(ctx, backend.compile(ir.fetch(x, ir.Constant(1.0)), name="tiny"))
    stream = routine.context.stream

    def median_ns() -> int:
        for _ in range(args.runs // 10):  # warm up
            routine()
            backend.await_stream(stream)
        times = []
        for _ in range(args.runs):
            start = time.perf_counter_ns()
            routine()
            backend.await_stream(stream)
            times.append(time.perf_counter_ns() - start)
        return sorted(times)[len(times) // 2]

    best: dict[str, int] = {}
    path = Path(tempfile.mkdtemp()) / "trace.json"
    for _ in range(args.repeats):
        for name, recorder in STEPS:
            if recorder is None:
                trace.tracer = None
            else:
                tracer = trace.Tracer(path)
                tracer.call = recorder(tracer)
                trace.tracer = tracer
            best[name] = min(best.get(name, 1 << 62), median_ns())
        trace.tracer = None
    base = previous = best["off"]
    print(f"{args.backend}: median of {args.runs} runs, best of {args.repeats}")
    for name, _ in STEPS:
        print(
            f"  {name:28} {best[name]:6d} ns  +{best[name] - previous:4d}  x{best[name] / base:.3f}"
        )
        previous = best[name]
    backend.finalize()


if __name__ == "__main__":
    main()
