"""Schedulers: streams and events for backends whose code runs on the host (CPU backends).

- ``sync_``: a task runs at once, on the calling thread; every event is already done.
- ``multicore_``: each stream is a worker thread with a FIFO queue. ``all_work`` enqueues a marker
  event; ``wait_for`` enqueues a wait; ``await_idle`` waits until the queue drains. An exception
  inside a task is kept and re-raised (as :class:`StreamError`, the original as its cause) on the
  caller's next interaction with the stream, which refuses new work from then on. Native kernels
  release the GIL (ctypes does), so streams really run in parallel.
"""

from __future__ import annotations

import abc
import collections
import threading
import weakref
from collections.abc import Callable

from arrayjit_tnode import StreamError

Task = Callable[[], None]


class Event:
    """Marks a point in a stream's schedule; done once the stream has passed it."""

    __slots__ = ("_done",)

    def __init__(self, done: bool = False) -> None:
        self._done = threading.Event()
        if done:
            self._done.set()

    def is_done(self) -> bool:
        """Whether the stream has passed this point."""
        return self._done.is_set()

    def sync(self) -> None:
        """Block until the stream has passed this point."""
        self._done.wait()

    def set(self) -> None:
        """Mark the point passed (called by the stream)."""
        self._done.set()


DONE = Event(done=True)
"""An event that is already done."""


class StreamQueue(abc.ABC):
    """The executor behind one stream."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.error: BaseException | None = None
        self.closed = False

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

    @abc.abstractmethod
    def all_work(self) -> Event:
        """An event done once everything scheduled so far has run."""

    @abc.abstractmethod
    def wait_for(self, event: Event) -> None:
        """Make later tasks of this stream wait until ``event`` is done (without blocking the
        caller)."""

    @abc.abstractmethod
    def await_idle(self) -> None:
        """Block until every scheduled task has run; re-raise a task's failure."""

    @abc.abstractmethod
    def is_idle(self) -> bool:
        """Whether no task is queued or running."""

    def close(self) -> None:
        """Stop accepting work (and stop the worker, if any) once the queue drains."""
        self.closed = True

    def debug_info(self) -> dict[str, object]:
        """State for debugging."""
        return {
            "name": self.name,
            "idle": self.is_idle(),
            "error": repr(self.error),
            "closed": self.closed,
        }


class SyncQueue(StreamQueue):
    """``sync_``: tasks run at once on the calling thread."""

    def schedule(self, task: Task) -> None:
        self._check()
        try:
            task()
        except BaseException as exc:
            self.error = exc
            raise StreamError(self.name, f"task failed: {exc!r}") from exc

    def all_work(self) -> Event:
        self._check()
        return DONE

    def wait_for(self, event: Event) -> None:
        self._check()
        event.sync()

    def await_idle(self) -> None:
        self._check()

    def is_idle(self) -> bool:
        return True


class _Marker:
    __slots__ = ("event",)

    def __init__(self, event: Event) -> None:
        self.event = event

    def __call__(self) -> None:
        self.event.set()


def _worker(state: _WorkerState) -> None:
    while True:
        with state.cond:
            while not state.tasks and not state.stop:
                state.cond.wait()
            if not state.tasks:
                return
            task = state.tasks.popleft()
            state.running = True
        try:
            if state.error is None or isinstance(task, _Marker):
                task()
        except BaseException as exc:  # kept for the caller's next interaction
            state.error = exc
        finally:
            with state.cond:
                state.running = False
                state.cond.notify_all()


class _WorkerState:
    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.tasks: collections.deque[Task] = collections.deque()
        self.running = False
        self.stop = False
        self.error: BaseException | None = None


def _stop_worker(state: _WorkerState, thread: threading.Thread) -> None:
    with state.cond:
        state.stop = True
        state.cond.notify_all()
    if thread is not threading.current_thread():
        thread.join(timeout=10)


class ThreadQueue(StreamQueue):
    """``multicore_``: a worker thread with a FIFO queue."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self._state = _WorkerState()
        self._thread = threading.Thread(
            target=_worker, args=(self._state,), name=f"arrayjit-{name}", daemon=True
        )
        self._thread.start()
        # The worker stops when the queue is closed or garbage-collected, at the latest at exit.
        self._finalizer = weakref.finalize(self, _stop_worker, self._state, self._thread)

    def _check(self) -> None:
        if self._state.error is not None and self.error is None:
            self.error = self._state.error
        super()._check()

    def _push(self, task: Task) -> None:
        with self._state.cond:
            self._state.tasks.append(task)
            self._state.cond.notify_all()

    def schedule(self, task: Task) -> None:
        self._check()
        self._push(task)

    def all_work(self) -> Event:
        self._check()
        event = Event()
        self._push(_Marker(event))
        return event

    def wait_for(self, event: Event) -> None:
        self._check()
        if not event.is_done():
            self._push(event.sync)

    def await_idle(self) -> None:
        with self._state.cond:
            while self._state.tasks or self._state.running:
                self._state.cond.wait()
        self._check()

    def is_idle(self) -> bool:
        with self._state.cond:
            return not self._state.tasks and not self._state.running

    def close(self) -> None:
        super().close()
        self._finalizer()

    @property
    def thread(self) -> threading.Thread:
        """The worker thread (for tests and debugging)."""
        return self._thread


SCHEDULERS: dict[str, type[StreamQueue]] = {"sync": SyncQueue, "multicore": ThreadQueue}
"""Scheduler prefixes of CPU backend names and their stream executors."""
