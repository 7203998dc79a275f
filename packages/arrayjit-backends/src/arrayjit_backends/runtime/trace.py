"""A trace of streams, kernels and transfers in the Chrome Trace Event Format.

:class:`Tracer` records, while it is installed (:data:`tracer`), one complete event
(``"ph": "X"``: ``ts`` and ``dur`` in microseconds) per routine run, ``from_host``,
``to_host`` and ``device_to_device`` copy (merge-buffer copies included), timed where the
work really runs (on the stream's worker), on a track per stream (``pid``: the backend and
device, ``tid``: the stream); compiles and links on a track of the calling thread; and a flow
(``"s"`` at the end of the writer's last task, ``"f"`` at the start of the waiting stream's
next task) per cross-stream wait the hazard rules insert. ``chrome://tracing`` and Perfetto
read the file; ``arrayjit trace FILE`` prints a summary.

Installed by ``ARRAYJIT_TRACE=FILE`` (:func:`start_from_environment`, written at exit) or
``with arrayjit_backends.trace(FILE):`` (written on leaving). Off, the cost is one
``if tracer is not None`` test per scheduled task. :data:`tracer` is the one piece of global
state here, like a registry: a trace is of the whole process.

**Recording is raw; events are made when the file is written.** A traced task costs a
sequence number, a pair of ``perf_counter_ns`` readings and one tuple appended to a list (a
``list.append`` is atomic: no lock is taken while recording); its name, category and
arguments are a :data:`Label` its caller made once (a routine keeps its own), and the tracks,
event dicts, flows and microsecond times are all worked out by :meth:`Tracer.events`. A wait
records the two streams and a sequence number: the tasks it joins are found when the file is
written.

Imports only :mod:`arrayjit_backends.settings`.
"""

from __future__ import annotations

import atexit
import bisect
import contextlib
import itertools
import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from arrayjit_backends import settings

Label = tuple[str, str, str, dict[str, Any]]
"""What a traced task is: its stream's name, the event's name, its category and ``args``. A
routine makes its own once and shares it among all its runs' events, so recording copies
nothing."""

A = TypeVar("A")


class Tracer:
    """Records trace events (from any thread) and writes them to ``path`` (:meth:`write`)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._t0 = time.perf_counter_ns()
        self._seq = itertools.count()
        """Numbers tasks and waits in the order they are scheduled (``next`` on a count is
        atomic)."""
        self._runs: list[tuple[int, Label, int, int]] = []
        """Per task that ran: its number, label, and start and end (``perf_counter_ns``)."""
        self._waits: list[tuple[str, str, int]] = []
        """Per wait: the stream waited for, the waiting stream, and the wait's own number (the
        flow joins the last task of the first scheduled before it to the first task of the
        second scheduled after it)."""
        self._spans: list[tuple[str, str, dict[str, Any], str, int, int]] = []
        """Host spans (compile, link): name, category, args, thread name, start, end."""
        self.task, self.call = _recorders(self._seq, self._runs.append)

    task: Callable[[Label, Callable[[], None]], Callable[[], None]]
    """``task(label, fn)``: ``fn`` timed as the event ``label`` on its stream's track when it
    runs (call it when scheduling ``fn``: the stream's later waits start their flows at its
    end)."""

    call: Callable[[Label, Callable[[Any], None], Any], Callable[[], None]]
    """``call(label, fn, arg)``: :attr:`task` of ``lambda: fn(arg)`` without the extra closure
    and call (a routine's run: ``fn`` its native run, ``arg`` the static-index values)."""

    def now(self) -> float:
        """Microseconds since the tracer started."""
        return (time.perf_counter_ns() - self._t0) / 1000.0

    def wait(self, source: str, target: str) -> None:
        """``target``'s next task waits for ``source``'s work so far: a flow from the end of
        ``source``'s last traced task to the start of ``target``'s next one."""
        self._waits.append((source, target, next(self._seq)))

    @contextlib.contextmanager
    def span(self, name: str, cat: str, args: dict[str, Any]) -> Iterator[None]:
        """Time the block as an event on the calling thread's track (compile, link)."""
        start = time.perf_counter_ns()
        try:
            yield
        finally:
            end = time.perf_counter_ns()
            self._spans.append((name, cat, args, threading.current_thread().name, start, end))

    def events(self) -> list[dict[str, Any]]:
        """The trace events recorded so far (what :meth:`write` writes): metadata naming
        each track, complete events per track in run order, and flow starts and ends."""
        t0 = self._t0
        out: list[dict[str, Any]] = []
        pids: dict[str, int] = {}
        tids: dict[tuple[int, str], int] = {}

        def track(process: str, thread: str) -> tuple[int, int]:
            pid = pids.get(process)
            if pid is None:
                pid = pids[process] = len(pids) + 1
                out.append(_meta("process_name", pid, 0, process))
            tid = tids.get((pid, thread))
            if tid is None:
                tid = tids[pid, thread] = len(tids) + 1
                out.append(_meta("thread_name", pid, tid, thread))
            return pid, tid

        def us(ns: int) -> float:
            return (ns - t0) / 1000.0

        runs = sorted(self._runs)  # by number: a stream's tasks in its order
        spans = list(self._spans)
        waits = list(self._waits)
        per_stream: dict[str, list[int]] = {}
        """Per stream, the numbers of its tasks that ran, ascending."""
        by_seq: dict[int, tuple[Label, int, int]] = {}
        for seq, label, start_ns, end_ns in runs:
            per_stream.setdefault(label[0], []).append(seq)
            by_seq[seq] = (label, start_ns, end_ns)
        # Numbers of tasks scheduled that had not run when this was called (of some stream):
        # a flow whose end may be one of them is left out, not tied to the wrong task.
        known = sorted([*by_seq, *(at for _, _, at in waits)])
        unrun = [n for a, b in itertools.pairwise([-1, *known]) for n in range(a + 1, b)]

        def none_unrun(low: int, high: int) -> bool:
            return bisect.bisect_left(unrun, high) == bisect.bisect_right(unrun, low)

        flows_out: dict[int, list[int]] = {}
        flows_in: dict[int, list[int]] = {}
        for flow, (source, target, at) in enumerate(waits, start=1):
            earlier = per_stream.get(source, [])
            i = bisect.bisect_left(earlier, at)
            later = per_stream.get(target, [])
            j = bisect.bisect_right(later, at)
            if (
                i == 0
                or j == len(later)
                or not none_unrun(earlier[i - 1], at)
                or not none_unrun(at, later[j])
            ):
                continue  # the source's last task or the target's next one had not run
            flows_out.setdefault(earlier[i - 1], []).append(flow)
            flows_in.setdefault(later[j], []).append(flow)
        for seq, (stream, name, cat, args), start_ns, end_ns in runs:
            pid, tid = track(_process_of(stream), stream)
            start, end = us(start_ns), us(end_ns)
            out.append(_complete(name, cat, start, end - start, pid, tid, args))
            for flow in flows_in.get(seq, ()):
                out.append(_flow("f", flow, start, pid, tid) | {"bp": "e"})
            for flow in flows_out.get(seq, ()):
                out.append(_flow("s", flow, _inside(start, end), pid, tid))
        for name, cat, args, thread, start_ns, end_ns in spans:
            pid, tid = track("host", thread)
            start, end = us(start_ns), us(end_ns)
            out.append(_complete(name, cat, start, end - start, pid, tid, args))
        return out

    def write(self) -> Path:
        """Write the trace (``{"traceEvents": [...]}``) to :attr:`path`; returns it."""
        data = {"traceEvents": self.events(), "displayTimeUnit": "ms"}
        self.path.write_text(json.dumps(data))
        return self.path


def _recorders(
    numbers: Iterator[int], record: Callable[[tuple[int, Label, int, int]], None]
) -> tuple[
    Callable[[Label, Callable[[], None]], Callable[[], None]],
    Callable[[Label, Callable[[Any], None], Any], Callable[[], None]],
]:
    """A tracer's ``task`` and ``call``: closures over its numbering and its record's append,
    not methods (the attribute lookups of a method were a quarter of a traced run's cost)."""
    clock = time.perf_counter_ns

    def task(label: Label, fn: Callable[[], None]) -> Callable[[], None]:
        seq = next(numbers)

        def traced() -> None:
            start = clock()
            try:
                fn()
            finally:
                record((seq, label, start, clock()))

        return traced

    def call(label: Label, fn: Callable[[A], None], arg: A) -> Callable[[], None]:
        seq = next(numbers)

        def traced() -> None:
            start = clock()
            try:
                fn(arg)
            finally:
                record((seq, label, start, clock()))

        return traced

    return task, call


def _process_of(stream: str) -> str:
    # Stream names are backend:ordinal:index; the device is the process.
    return stream.rsplit(":", 1)[0] if stream.count(":") >= 2 else stream


def _inside(start: float, end: float) -> float:
    """A time within the slice, at its end: a flow binds to the slice enclosing it."""
    return max(start, end - min(0.001, (end - start) / 2))


def _meta(name: str, pid: int, tid: int, value: str) -> dict[str, Any]:
    return {"name": name, "ph": "M", "pid": pid, "tid": tid, "args": {"name": value}}


def _complete(
    name: str, cat: str, ts: float, dur: float, pid: int, tid: int, args: dict[str, Any]
) -> dict[str, Any]:
    return {
        "name": name, "cat": cat, "ph": "X", "ts": ts, "dur": dur, "pid": pid, "tid": tid,
        "args": args,
    }  # fmt: skip


def _flow(ph: str, flow: int, ts: float, pid: int, tid: int) -> dict[str, Any]:
    return {"name": "wait", "cat": "wait", "ph": ph, "id": flow, "ts": ts, "pid": pid, "tid": tid}


tracer: Tracer | None = None
"""The installed tracer, or None (tracing off)."""


def start_from_environment() -> Tracer | None:
    """Install a tracer writing to ``ARRAYJIT_TRACE`` at exit, once, where it is set and no
    tracer is installed; returns the installed tracer (None: tracing off)."""
    global tracer
    path = settings.get("ARRAYJIT_TRACE")
    if path and tracer is None:
        tracer = Tracer(path)
        atexit.register(tracer.write)
    return tracer


@contextlib.contextmanager
def trace(path: str | Path) -> Iterator[Tracer]:
    """Trace the block: install a :class:`Tracer`, and on leaving write ``path`` and restore
    the tracer that was installed before (work still running then is not in the file: wait
    for it inside the block)."""
    global tracer
    previous, tracer = tracer, Tracer(path)
    mine = tracer
    try:
        yield mine
    finally:
        tracer = previous
        mine.write()


__all__ = ["Label", "Tracer", "start_from_environment", "trace", "tracer"]
