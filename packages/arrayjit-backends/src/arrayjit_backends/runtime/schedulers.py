"""The CPU schedulers: streams and events for backends whose code runs on the host.

- ``sync_``: a task runs at once, on the calling thread; every event is already done.
- ``multicore_``: each stream is a worker thread with a FIFO queue. ``all_work`` returns an event
  that is the queue's current length (done once that many tasks have run: no marker task is
  queued); ``wait_for`` enqueues a wait; ``await_idle`` waits until the queue drains. An exception
  inside a task is kept and re-raised (as :class:`StreamError`, the original as its cause) on the
  caller's next interaction with the stream, which refuses new work from then on. Native kernels
  release the GIL (ctypes does), so streams really run in parallel.

The stream API they implement is :mod:`arrayjit_backends.impl.stream_queue`. A worker holds only
its queue's shared state, never the queue: it stops when its queue is closed or becomes
unreachable (a backend dropped without ``finalize``).
"""

from __future__ import annotations

import collections
import threading
import time
import traceback
import weakref

from arrayjit_backends.impl.stream_queue import (
    DONE,
    Bell,
    Event,
    StreamQueue,
    Task,
    ThreadBudget,
    running,
)
from arrayjit_tnode import StreamError, UsageError


class SyncQueue(StreamQueue):
    """``sync_``: tasks run at once on the calling thread."""

    def schedule(self, task: Task) -> None:
        self._check()
        outer, running.owner = running.owner, self
        try:
            task()
        except BaseException as exc:
            self.error = exc
            raise StreamError(self.name, f"task failed: {exc!r}") from exc
        finally:
            running.owner = outer

    def all_work(self) -> Event:
        self._check()
        return DONE

    def wait_for(self, event: Event) -> None:
        self._check()
        try:
            event.sync()
        except BaseException as exc:  # as a multicore stream does: the stream fails
            self.error = exc
            raise StreamError(self.name, f"the event it waited for failed: {exc!r}") from exc

    def await_idle(self) -> None:
        self._check()

    def is_idle(self) -> bool:
        return True


class LockBell(Bell):
    """A :class:`Bell` of a bare lock held as a binary signal (not ``threading.Condition``:
    a condition allocates a lock per wait and wakes every waiter, which made a routine's
    run-and-wait on a stream cost three times a lock ping-pong). A wake the worker has not
    acted on yet is taken back by :meth:`lower`, but the woken thread still runs, and returns
    to Python (taking the interpreter lock) when the wake was not taken back in time: native
    bells (:meth:`~arrayjit_backends.impl.cpu_compiler.CpuCompiler.new_bell`) avoid both."""

    def __init__(self) -> None:
        self._wake = threading.Lock()
        self._wake.acquire()  # released once per sleep of the worker
        self._sleeping = False

    def raise_(self, at_once: bool = False) -> None:
        if self._sleeping:
            self._sleeping = False
            self._wake.release()

    def lower(self) -> None:
        if not self._sleeping and self._wake.acquire(blocking=False):
            self._sleeping = True

    def prepare(self) -> None:
        self._sleeping = True

    def wait(self) -> None:
        self._wake.acquire()


DEFER_WINDOW_NS = 100_000
"""How soon after a push its caller must take the task itself (a run and wait) for the
stream's next push to leave the worker asleep (:class:`_WorkerState`)."""


class _WorkerState:
    """What a stream's worker shares with its callers, under ``lock``. Tasks are numbered in
    schedule order and ``finished`` counts those that have run, so an event is just a number.

    The worker sleeps on ``bell``; a blocked caller on a bare lock of its own, held as a
    binary signal.

    **Deferred wakes.** A caller that runs and waits takes its task itself before the worker
    does (:meth:`wait_until`), but the push had already woken the worker: on a 2-vCPU virtual
    machine that wake preempts a crew helper on the other core and cost a 2^20 fused run 30-80
    us (+27-48% over ``sync_``; +6-14% without it). So once a caller took its task within
    :data:`DEFER_WINDOW_NS` of pushing it, the next push to the idle stream leaves the worker
    asleep (``deferred``); the wake happens at the next push, at any query of the stream's
    progress (:meth:`wake_deferred`: ``is_done``, ``is_idle``; at once, without the native
    bell's grace), or never, when the caller takes the task. A caller that took it later (it
    did other work meanwhile, which the worker could have overlapped), or a worker that took
    one, ends the deferring."""

    __slots__ = (
        "bell", "budget", "busy", "current", "defer", "deferred", "error", "failed_at",
        "finished", "lock", "name", "pushed_ns", "running", "scheduled", "stop", "tasks",
        "waiters",
    )  # fmt: skip

    def __init__(self, name: str, budget: ThreadBudget | None, bell: Bell | None = None) -> None:
        self.name = name
        self.budget = budget
        self.busy = False
        """Whether this stream counts as busy in ``budget`` (a task is queued or running)."""
        self.lock = threading.Lock()
        self.bell = bell or LockBell()
        self.running = False
        """Whether a task runs (on the worker, or on a caller: :meth:`run_now`)."""
        self.tasks: collections.deque[Task] = collections.deque()
        self.current: Task | None = None
        """The task taken to run next (see :meth:`run`)."""
        self.scheduled = 0
        self.finished = 0
        self.waiters: list[tuple[int, threading.Lock]] = []
        self.stop = False
        self.error: BaseException | None = None
        self.failed_at: int | None = None
        """Number of the first failed task (0-based), once one failed."""
        self.defer = False
        """The last task was taken by its caller right after its push (a run and wait)."""
        self.deferred = False
        """The queued task's push left the worker asleep (see the class's docstring)."""
        self.pushed_ns = 0

    def push(self, task: Task) -> None:
        with self.lock:
            idle = not self.tasks and not self.running
            self.tasks.append(task)
            self.scheduled += 1
            if not self.busy and self.budget is not None:
                self.busy = True
                self.budget.enter()
            self.deferred = idle and self.defer
            self.pushed_ns = time.perf_counter_ns()
            self._ring()

    def passed(self, count: int) -> bool:
        """Whether ``count`` tasks have run. A query of progress, not a wait: if not, the
        worker is woken for a task whose push left it asleep (:meth:`wake_deferred`)."""
        if self.finished >= count:
            return True
        self.wake_deferred()
        return False

    def wake_deferred(self) -> None:
        """Wake the worker for a task whose push left it asleep: someone is watching the
        stream's progress rather than waiting for it."""
        if self.deferred:
            with self.lock:
                self.deferred = False
                self._ring(at_once=True)

    def halt(self) -> None:
        with self.lock:
            self.stop = True
            self._ring()

    def _ring(self, at_once: bool = False) -> None:  # under ``lock``
        """Raise the bell while the worker may take a task (or must stop), else lower it: a
        caller that takes the task the worker was woken for leaves it asleep, instead of
        contending for the GIL (and a core) with the caller only to find the queue empty."""
        if not self.running and (self.stop or (self.tasks and not self.deferred)):
            self.bell.raise_(at_once)
        else:
            self.bell.lower()

    def take_next(self) -> bool:
        """Take the next task into ``current``, blocking while there is none; False once
        stopped and drained."""
        while True:
            with self.lock:
                if self.tasks and not self.running:  # not while a caller runs one
                    self.running = True
                    self.current = self.tasks.popleft()
                    self.defer = self.deferred = False
                    self.bell.lower()
                    return True
                if self.stop and not self.tasks:
                    return False
                self.bell.prepare()
            self.bell.wait()

    def task_done(self) -> None:
        with self.lock:
            self.running = False
            if self.busy and self.finished + 1 == self.scheduled:  # drained: idle before done
                self.busy = False
                self.budget.leave()  # type: ignore[union-attr]
            self.finished += 1
            self._ring()  # tasks queued while a caller ran this one are the worker's now
            if not self.waiters:
                return
            ready = [w for w in self.waiters if w[0] <= self.finished]
            self.waiters = [w for w in self.waiters if w[0] > self.finished]
        for _, signal in ready:
            signal.release()

    def run(self, on_caller: bool = False) -> None:
        """Run the task taken into ``current`` (its failure is kept for the stream's callers),
        then count it as done. ``on_caller``: the thread is a caller's, not the worker's, and
        an interrupt (``KeyboardInterrupt``, ``SystemExit``) is the caller's too: it fails the
        stream and is re-raised.

        The task is only referenced from this frame, and dropped before the callers are
        signalled: a caller that drops its last handle on a context once woken must find
        nothing of the context's closures left in the worker (which may not have run since)."""
        task, self.current = self.current, None
        assert task is not None
        interrupt: BaseException | None = None
        outer = running.owner
        running.owner = self
        try:
            if self.error is None:
                task()
        except BaseException as exc:  # kept for the caller's next interaction
            # The frames' locals would keep the task's closure, hence the queue, alive.
            traceback.clear_frames(exc.__traceback__)
            self.failed_at = self.finished
            self.error = exc
            if on_caller and not isinstance(exc, Exception):
                interrupt = exc
        finally:
            running.owner = outer
            task = None  # the closure must not outlive the run
            self.task_done()
        if interrupt is not None:
            raise interrupt

    def wait_until(self, count: int) -> None:
        """Block until ``count`` tasks have run.

        A caller that would block while the worker has not taken the next task yet runs the
        tasks up to ``count`` itself, in order (one thread at a time runs a stream's tasks,
        whichever): it would only sleep meanwhile, and being woken by the worker afterwards is
        a second thread hand-off."""
        if self.finished >= count:  # without the lock: a synchronized idle stream is common
            return
        if running.owner is self:
            # A task of this stream waiting for the stream's later work would wait forever.
            raise UsageError(
                f"stream {self.name}: a task running on this stream waits for work queued "
                f"after it on the same stream (await_stream, sync or get_values of its own "
                f"stream), which can only run once the task returns"
            )
        while True:
            with self.lock:
                if self.finished >= count:
                    return
                if self.running or not self.tasks:
                    signal = threading.Lock()
                    signal.acquire()
                    self.waiters.append((count, signal))
                    break
                self.running = True
                self.current = self.tasks.popleft()
                if self.finished + 1 == self.scheduled:  # the last task: was it a run and wait?
                    self.defer = time.perf_counter_ns() - self.pushed_ns < DEFER_WINDOW_NS
                self.deferred = False
                self.bell.lower()  # a task runs: the worker may not take the next one
            self.run(on_caller=True)
            if self.finished >= count:
                return
        signal.acquire()

    def run_now(self, task: Task) -> bool:
        """Run ``task`` at once on the calling thread if the stream is idle (nothing queued or
        running, no failure), counting it as scheduled and run; False (nothing done) if not.
        The stream does not count as busy in its budget meanwhile: a task short enough to run
        here has no parallel loop to size."""
        with self.lock:
            if self.tasks or self.running or self.error is not None or self.stop:
                return False
            self.running = True
            self.scheduled += 1
            self.current = task
        del task
        self.run(on_caller=True)
        return True


class _Ticket(Event):
    """The point after the ``count``-th task of a worker's schedule."""

    __slots__ = ("_count", "_state")

    def __init__(self, state: _WorkerState, count: int) -> None:
        self._state = state
        self._count = count

    def is_done(self) -> bool:
        return self._state.passed(self._count)

    def sync(self) -> None:
        state = self._state
        state.wait_until(self._count)
        failed = state.failed_at
        if failed is not None and failed < self._count:
            raise StreamError(
                state.name, f"a task before this event failed: {state.error!r}"
            ) from state.error

    def succeeded(self) -> bool:
        state = self._state
        failed = state.failed_at
        return self.is_done() and (failed is None or failed >= self._count)

    def wait(self) -> None:
        self._state.wait_until(self._count)

    def where(self) -> str:
        return f"{self._state.name} after {self._count} tasks"

    def status(self) -> str:
        state = self._state  # read without waking a worker left asleep (``passed`` would)
        if state.finished < self._count:
            return "pending"
        failed = state.failed_at
        return "done" if failed is None or failed >= self._count else "failed"


def _worker(state: _WorkerState) -> None:
    while state.take_next():
        state.run()


def _stop_worker(state: _WorkerState, thread: threading.Thread) -> None:
    state.halt()
    if thread is not threading.current_thread():
        thread.join(timeout=10)


class ThreadQueue(StreamQueue):
    """``multicore_``: a worker thread with a FIFO queue. Events are positions in the queue
    (no marker tasks); a task that fails makes the worker skip the rest, which still count as
    run, so no event stays pending forever."""

    def __init__(
        self, name: str, budget: ThreadBudget | None = None, bell: Bell | None = None
    ) -> None:
        """``bell``: how the worker sleeps (default: a :class:`LockBell`)."""
        super().__init__(name, budget)
        self._state = _WorkerState(name, budget, bell)
        self._thread = threading.Thread(
            target=_worker, args=(self._state,), name=f"arrayjit-{name}", daemon=True
        )
        self._thread.start()
        # The worker stops when the queue is closed or garbage-collected, at the latest at exit.
        self._finalizer = weakref.finalize(self, _stop_worker, self._state, self._thread)

    def _check(self) -> None:
        error = self._state.error
        if error is not None or self.closed:  # checked three times per run: kept short
            if self.error is None:
                self.error = error
            super()._check()

    def schedule(self, task: Task) -> None:
        self._check()
        self._state.push(task)

    def schedule_short(self, task: Task) -> None:
        """An idle stream runs a short task at once on the caller's thread, as its worker
        would have run it: waking the worker costs the caller a thread wake (10-15 us of a
        run-and-wait on a 2-vCPU virtual machine, even when the caller then runs the task
        itself), and being woken by it as much again, about what the task takes. In order all
        the same: the stream has nothing queued or running. (The task does not overlap the
        caller's next Python work, as a short one would barely have.)"""
        self._check()
        if not self._state.run_now(task):
            self._state.push(task)

    def all_work(self) -> Event:
        self._check()
        state = self._state
        return DONE if state.finished >= state.scheduled else _Ticket(state, state.scheduled)

    def wait_for(self, event: Event) -> None:
        self._check()
        if not event.succeeded():  # pending, or failed: its sync then fails this stream
            self.schedule(event.sync)

    def wait_past(self, event: Event) -> None:
        self._check()
        if not event.is_done():
            self.schedule(event.wait)

    def await_idle(self) -> None:
        self._state.wait_until(self._state.scheduled)
        self._check()

    def is_idle(self) -> bool:
        return self._state.passed(self._state.scheduled)

    def idle_now(self) -> bool:
        state = self._state
        return state.finished >= state.scheduled

    def failure(self) -> BaseException | None:
        return self.error or self._state.error

    def hold(self, seconds: float) -> None:
        self.schedule(lambda: time.sleep(seconds))

    def close(self) -> None:
        super().close()
        self._finalizer()

    @property
    def thread(self) -> threading.Thread:
        """The worker thread (for tests and debugging)."""
        return self._thread


SCHEDULERS: dict[str, type[StreamQueue]] = {"sync": SyncQueue, "multicore": ThreadQueue}
"""Scheduler prefixes of CPU backend names and their stream executors."""
