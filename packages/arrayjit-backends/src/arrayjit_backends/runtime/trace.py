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

Imports only :mod:`arrayjit_backends.settings`.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from arrayjit_backends import settings


class _Slice:
    """A traced task: its times once it ran, and the flows leaving it."""

    __slots__ = ("end", "flows_out", "start")

    def __init__(self) -> None:
        self.start: float | None = None
        self.end: float | None = None
        self.flows_out: list[int] | None = None  # made by the first flow: most tasks have none


class Tracer:
    """Records trace events (thread-safe) and writes them to ``path`` (:meth:`write`)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.events: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._t0 = time.perf_counter_ns()
        self._pids: dict[str, int] = {}
        self._tids: dict[tuple[int, str], int] = {}
        self._streams: dict[str, tuple[int, int]] = {}
        """Per stream, its track (``pid``, ``tid``): found once."""
        self._last: dict[str, _Slice] = {}
        """Per stream, its last traced task (a flow of a later wait starts at its end)."""
        self._flows_in: dict[str, list[int]] = {}
        """Per stream, flows to end at the start of its next traced task."""
        self._flow_ids = itertools.count(1)

    def now(self) -> float:
        """Microseconds since the tracer started."""
        return (time.perf_counter_ns() - self._t0) / 1000.0

    def _track(self, process: str, thread: str) -> tuple[int, int]:
        # Under the lock: ids and their metadata events ("M") are made once.
        pid = self._pids.get(process)
        if pid is None:
            pid = self._pids[process] = len(self._pids) + 1
            self.events.append(
                {"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": process}}
            )
        tid = self._tids.get((pid, thread))
        if tid is None:
            tid = self._tids[pid, thread] = len(self._tids) + 1
            self.events.append(
                {"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": thread}}
            )
        return pid, tid

    @staticmethod
    def _process_of(stream: str) -> str:
        # Stream names are backend:ordinal:index; the device is the process.
        return stream.rsplit(":", 1)[0] if stream.count(":") >= 2 else stream

    def task(
        self, stream: str, name: str, cat: str, args: dict[str, Any], fn: Callable[[], None]
    ) -> Callable[[], None]:
        """``fn`` timed as an event ``name`` on ``stream``'s track when it runs (call before
        scheduling it: the stream's later waits start their flows at its end)."""
        piece = _Slice()
        with self._lock:
            self._last[stream] = piece
            incoming = self._flows_in.pop(stream, None) if self._flows_in else None
        clock, t0 = time.perf_counter_ns, self._t0

        def traced() -> None:
            piece.start = start = (clock() - t0) / 1000.0
            try:
                fn()
            finally:
                piece.end = end = (clock() - t0) / 1000.0
                self._emit(stream, name, cat, args, start, end, piece, incoming)

        return traced

    def _emit(
        self,
        stream: str,
        name: str,
        cat: str,
        args: dict[str, Any],
        start: float,
        end: float,
        piece: _Slice,
        incoming: list[int] | None,
    ) -> None:
        with self._lock:
            track = self._streams.get(stream)
            if track is None:
                track = self._streams[stream] = self._track(self._process_of(stream), stream)
            pid, tid = track
            self.events.append(
                {
                    "name": name,
                    "cat": cat,
                    "ph": "X",
                    "ts": start,
                    "dur": end - start,
                    "pid": pid,
                    "tid": tid,
                    "args": args,
                }
            )
            if incoming:
                for flow in incoming:
                    self.events.append(_flow("f", flow, start, pid, tid) | {"bp": "e"})
            if piece.flows_out:
                for flow in piece.flows_out:
                    self.events.append(_flow("s", flow, _inside(start, end), pid, tid))
                piece.flows_out = None

    def wait(self, source: str, target: str) -> None:
        """``target``'s next task waits for ``source``'s work so far: a flow from the end of
        ``source``'s last traced task to the start of ``target``'s next one."""
        with self._lock:
            last = self._last.get(source)
            if last is None:
                return
            flow = next(self._flow_ids)
            self._flows_in.setdefault(target, []).append(flow)
            if last.end is None:  # still to run: its end emits the start
                if last.flows_out is None:
                    last.flows_out = []
                last.flows_out.append(flow)
                return
            assert last.start is not None
            pid, tid = self._track(self._process_of(source), source)
            self.events.append(_flow("s", flow, _inside(last.start, last.end), pid, tid))

    @contextlib.contextmanager
    def span(self, name: str, cat: str, args: dict[str, Any]) -> Iterator[None]:
        """Time the block as an event on the calling thread's track (compile, link)."""
        start = self.now()
        try:
            yield
        finally:
            end = self.now()
            with self._lock:
                pid, tid = self._track("host", threading.current_thread().name)
                self.events.append(
                    {
                        "name": name,
                        "cat": cat,
                        "ph": "X",
                        "ts": start,
                        "dur": end - start,
                        "pid": pid,
                        "tid": tid,
                        "args": args,
                    }
                )

    def write(self) -> Path:
        """Write the trace (``{"traceEvents": [...]}``) to :attr:`path`; returns it."""
        with self._lock:
            data = {"traceEvents": list(self.events), "displayTimeUnit": "ms"}
        self.path.write_text(json.dumps(data))
        return self.path


def _inside(start: float, end: float) -> float:
    """A time within the slice, at its end: a flow binds to the slice enclosing it."""
    return max(start, end - min(0.001, (end - start) / 2))


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


__all__ = ["Tracer", "start_from_environment", "trace", "tracer"]
