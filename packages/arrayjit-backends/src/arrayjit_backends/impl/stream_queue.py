"""The stream API every backend's executors implement: events, host gates, the stream queue
base, the worker's bell, and the thread budget of a device's streams.

A :class:`StreamQueue` runs the tasks of one stream in order; an :class:`Event` marks a point in
its schedule. The CPU schedulers (``sync_``, ``multicore_``) are in
:mod:`arrayjit_backends.runtime.schedulers`; device backends subclass
:class:`~arrayjit_backends.impl.device.ImmediateQueue`.

Errors are never lost: an event placed after a failed task raises :class:`StreamError` (with the
failure as its cause) from ``sync``, so a host read waiting for a copy that can no longer
happen fails instead of returning stale values, and a stream made to wait for such an event
(``wait_for``) fails too, on either scheduler. ``wait`` blocks without raising (for waits whose
only purpose is to let a read of host memory finish).
"""

from __future__ import annotations

import abc
import contextlib
import threading
import time
from collections.abc import Callable
from typing import Protocol

from arrayjit_backends import settings
from arrayjit_tnode import StreamError

Task = Callable[[], None]


class ThreadBudget:
    """The cores of one CPU device, shared among its busy streams.

    A ``multicore_`` stream is busy from the moment its worker takes a task until its queue
    drains; a kernel a stream runs gets ``cores // busy streams`` threads (at least one), so
    N busy streams on N cores run one thread each and a lone stream uses them all, instead of
    every kernel's thread team fighting the others' for the same cores. ``cores`` is
    ``ARRAYJIT_NUM_THREADS`` capped by the cores the process may use.
    """

    def __init__(self, cores: int) -> None:
        self.cores = max(1, cores)
        self._busy: list[None] = []
        """One entry per busy stream: a list's ``append`` and ``pop`` are atomic, so streams
        of several threads count themselves without a lock (a lock pair was 1 us of every
        run on a ``multicore_`` stream)."""

    @property
    def busy(self) -> int:
        """How many streams are busy."""
        return len(self._busy)

    def enter(self) -> None:
        """A stream became busy."""
        self._busy.append(None)

    def leave(self) -> None:
        """A busy stream became idle."""
        self._busy.pop()

    def share(self) -> int:
        """Threads a kernel starting now may use."""
        return max(1, self.cores // max(1, len(self._busy)))


class Executor(Protocol):
    """What :func:`thread_share` needs of the executor whose task runs on a thread."""

    budget: ThreadBudget | None


class Running(threading.local):
    owner: Executor | None = None
    """The executor of the stream whose task runs on this thread (set by the schedulers of
    :mod:`arrayjit_backends.runtime.schedulers`): its ``budget`` is the kernel's, and a task
    waiting for its own stream's later work is refused."""


running = Running()


def thread_share() -> int:
    """Threads the native kernel about to run on this thread may use: its stream's share of
    its device's :class:`ThreadBudget`; on a thread that runs no stream's tasks, the whole
    budget (:func:`settings.num_threads`)."""
    owner = running.owner
    budget = owner.budget if owner is not None else None
    if budget is None:
        return settings.num_threads()
    return budget.share()


class Event:
    """Marks a point in a stream's schedule; done once the stream has passed it. This base class
    is a point already passed; streams return subclasses."""

    __slots__ = ()

    def is_done(self) -> bool:
        """Whether the stream has passed this point."""
        return True

    def sync(self) -> None:
        """Block until the stream has passed this point.

        Raises:
            StreamError: a task the stream ran before this point failed (where the stream
                knows it: multicore streams).
        """

    def succeeded(self) -> bool:
        """Whether the stream has passed this point having run every task before it (false
        while pending, and for good once a task before it failed)."""
        return self.is_done()

    def wait(self) -> None:
        """Block until the stream has passed this point, whether or not a task before it
        failed."""
        with contextlib.suppress(StreamError):
            self.sync()

    def where(self) -> str:
        """The event's stream (its name) and, where the stream counts its tasks, the point in
        its schedule (``multicore_cc:0:1 after 3 tasks``); empty for :data:`DONE`, a point of no
        stream. For :func:`repr` and messages."""
        return ""

    def status(self) -> str:
        """``"pending"``, ``"done"`` or ``"failed"`` (done, but a task before it failed), as
        far as the stream knows; a query that blocks nothing. For :func:`repr` and messages."""
        if not self.is_done():
            return "pending"
        return "done" if self.succeeded() else "failed"

    def __repr__(self) -> str:
        try:
            where, status = self.where(), self.status()
        except Exception as exc:  # a repr must not raise (a released driver context)
            where, status = "", f"unknown ({type(exc).__name__})"
        return f"<Event{f' of {where}' if where else ''}: {status}>"


POLL_SPIN_S = 5e-5
"""How long :func:`poll_until` polls without sleeping: a short kernel finishes within it, and
the shortest sleep the OS gives is about as long (timer slack), which used to dominate a small
synchronized run on a GPU."""


def poll_until(is_done: Callable[[], bool]) -> None:
    """Block until ``is_done()``: polled back to back for :data:`POLL_SPIN_S`, then in short
    sleeps (at most 5 ms), so that a ``KeyboardInterrupt`` reaches the waiting thread at once,
    which a driver's blocking wait would hold back until the device finishes."""
    if is_done():
        return
    spin_until = time.perf_counter() + POLL_SPIN_S
    while time.perf_counter() < spin_until:
        if is_done():
            return
    pause = 1e-5
    while not is_done():
        time.sleep(pause)
        pause = min(pause * 2, 5e-3)


DONE = Event()
"""An event that is already done (a point of no stream in particular: the generic layer
compares against it to skip recording a run that has already happened)."""


class Passed(Event):
    """A point of a named stream that it has already passed: what the Backend hands users in
    place of :data:`DONE` (``all_work`` of a ``sync_`` or drained stream), so that the event
    says which stream it belongs to."""

    __slots__ = ("stream",)

    def __init__(self, stream: str) -> None:
        self.stream = stream

    def where(self) -> str:
        return self.stream


class HostGate:
    """A point of a stream's schedule that a host thread opens: a stream made to wait for
    :attr:`event` (``queue.wait_for(gate.event)``) runs its later tasks only once some thread
    has called :meth:`open`. How work done off the stream (an MPI collective on a staging array,
    on another thread) hands its result back to the stream in order.
    :meth:`StreamQueue.host_gate` makes one for its stream.

    This base class is the gate any stream can wait for: a host flag, so the stream's wait
    blocks a thread (the caller of ``wait_for``, or the stream's worker) until the gate opens.
    A queue that can wait on the device returns a subclass whose event its device waits for
    instead, blocking no thread (OpenCL: a user event).
    """

    event: Event
    """What the stream waits for; done once the gate is open."""

    def __init__(self, stream: str = "") -> None:
        """``stream``: the name of the stream the gate is for (for :func:`repr`)."""
        self._opened = threading.Event()
        self.event = _FlagEvent(self._opened, stream)

    def open(self) -> None:
        """Let the stream pass the gate. Call it once."""
        self._opened.set()


class _FlagEvent(Event):
    """Done once its flag is set (the event of a :class:`HostGate` of the base class)."""

    __slots__ = ("_flag", "stream")

    def __init__(self, flag: threading.Event, stream: str = "") -> None:
        self._flag = flag
        self.stream = stream

    def is_done(self) -> bool:
        return self._flag.is_set()

    def sync(self) -> None:
        self._flag.wait()

    def where(self) -> str:
        return f"{self.stream} (a host gate)" if self.stream else "a host gate"


class StreamQueue(abc.ABC):
    """The executor behind one stream."""

    def __init__(self, name: str, budget: ThreadBudget | None = None) -> None:
        self.name = name
        self.error: BaseException | None = None
        self.closed = False
        self.budget = budget
        """The cores this stream's kernels share with the device's other streams (None: every
        core the process may use)."""

    def check(self) -> None:
        """Raise :class:`StreamError` if the stream failed or was closed (it refuses new
        work)."""
        self._check()

    def _check(self) -> None:
        if self.error is not None:
            raise StreamError(self.name, f"an earlier task failed: {self.error!r}") from self.error
        if self.closed:
            raise StreamError(self.name, "the stream was closed (its backend was finalized)")

    @abc.abstractmethod
    def schedule(self, task: Task) -> None:
        """Run ``task`` after everything scheduled before it.

        Raises:
            StreamError: an earlier task failed, or the stream is closed.
        """

    def schedule_short(self, task: Task) -> None:
        """:meth:`schedule` for a task known to take about as long as handing it to another
        thread, or less (tens of microseconds): a stream may run it on the caller's thread when
        it has nothing else to do (see :meth:`ThreadQueue.schedule_short`). A failure is kept as
        :meth:`schedule` keeps it (raised by the stream's next interaction, not here)."""
        self.schedule(task)

    @abc.abstractmethod
    def all_work(self) -> Event:
        """An event done once everything scheduled so far has run."""

    @abc.abstractmethod
    def wait_for(self, event: Event) -> None:
        """Make later tasks of this stream wait until ``event`` is done (without blocking the
        caller)."""

    def wait_past(self, event: Event) -> None:
        """Make later tasks of this stream wait until ``event`` has passed, whether or not the
        tasks before it succeeded (a write that must not overtake another stream's access, but
        does not read its result). Here: the caller blocks; a ``multicore_`` stream's worker
        waits instead."""
        self._check()
        event.wait()

    def host_gate(self) -> HostGate:
        """A gate for this stream that a host thread opens (see :class:`HostGate`): after
        ``wait_for(gate.event)``, this stream's later tasks run once ``gate.open()`` was
        called. Here: a host flag, so waiting for it may block a thread; a queue that can wait
        on the device without blocking one overrides this (the OpenCL queue: a user event).
        """
        return HostGate(self.name)

    @abc.abstractmethod
    def await_idle(self) -> None:
        """Block until every scheduled task has run; re-raise a task's failure."""

    @abc.abstractmethod
    def is_idle(self) -> bool:
        """Whether no task is queued or running."""

    def close(self) -> None:
        """Stop accepting work (and stop the worker, if any) once the queue drains."""
        self.closed = True

    def hold(self, seconds: float) -> None:
        """Test hook: delay this stream's next task by ``seconds`` without blocking the caller
        (where the stream runs asynchronously), so that tests can force a schedule in which
        this stream lags behind the others. A synchronous stream has nothing to delay: a hold
        is a no-op there (its tasks run at once on the caller's thread, so no other stream can
        overtake them)."""
        self._check()

    def debug_info(self) -> dict[str, object]:
        """State for debugging."""
        return {
            "name": self.name,
            "idle": self.is_idle(),
            "error": repr(self.error),
            "closed": self.closed,
        }

    def failure(self) -> BaseException | None:
        """The failure the stream will raise at its next interaction, if a task failed (a
        query that raises nothing and blocks nothing)."""
        return self.error

    def idle_now(self) -> bool:
        """:meth:`is_idle`, for :func:`repr`: a queue whose :meth:`is_idle` acts on the stream
        (a ``multicore_`` one wakes a worker left asleep) overrides it with a pure query."""
        return self.is_idle()

    def __repr__(self) -> str:
        try:
            parts = ["idle" if self.idle_now() else "busy"]
        except Exception as exc:  # a repr must not raise (a released driver queue)
            parts = [f"state unknown ({type(exc).__name__})"]
        if self.closed:
            parts.append("closed")
        error = self.failure()
        if error is not None:
            parts.append(f"failed: {error!r}")
        return f"<{type(self).__name__} {self.name}: {', '.join(parts)}>"


class Bell(abc.ABC):
    """How a stream's worker thread sleeps until it has a task it may take (a level, not a
    count: raised while the queue holds a task and none runs, or the stream stops).
    :meth:`raise_`, :meth:`lower` and :meth:`prepare` are called under the stream's lock,
    :meth:`wait` outside it."""

    @abc.abstractmethod
    def raise_(self, at_once: bool = False) -> None:
        """The worker may take a task: wake it if it sleeps. ``at_once``: it should take it
        without the grace a native bell gives a caller that waits for the task (the caller
        watches the stream's progress instead)."""

    @abc.abstractmethod
    def lower(self) -> None:
        """The worker may not (a caller took the task, or one runs): a worker woken for it
        that has not acted yet should sleep on."""

    @abc.abstractmethod
    def prepare(self) -> None:
        """The worker found nothing to take and is about to :meth:`wait`."""

    @abc.abstractmethod
    def wait(self) -> None:
        """Block until the bell is raised (the worker then looks at the queue again)."""


__all__ = [
    "DONE",
    "POLL_SPIN_S",
    "Bell",
    "Event",
    "Executor",
    "HostGate",
    "Passed",
    "Running",
    "StreamQueue",
    "Task",
    "ThreadBudget",
    "poll_until",
    "running",
    "thread_share",
]
