"""The engine of a communicator: one thread that runs its collectives' MPI calls, in the order
the program asked for them, each once its stream has reached it.

Why a thread of its own: a collective must be a task of the node's stream (ordered after the
node's writer, before its later readers), but its MPI call must not run on a device queue's
caller (OpenCL and CUDA tasks run at once on the caller's thread) and must run even when the
stream skips it: a multicore stream that saw a failure skips its later tasks, and a skipped
collective would leave every other rank blocked in MPI forever. So each collective is a
:class:`Job`: the stream's task only says "reached" (and, on CPU backends, holds the stream until
the engine is done, so later work of the stream waits); the engine waits for that, runs the MPI
call, and, when the stream passed the point without running the task, aborts the job through the
:class:`~arrayjit_distributed.failure.Alarm` with the stream's failure as the cause.

One engine thread per communicator runs jobs first in, first out: every rank submits its
collectives in program order, so every rank's MPI calls come in the same order.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable

from arrayjit_backends.scheduler import Event, StreamQueue
from arrayjit_distributed.failure import Alarm, describe_exception
from arrayjit_tnode import StreamError


class Job:
    """One collective on its way through a stream and the engine."""

    def __init__(self, name: str, stream_queue: StreamQueue, work: Callable[[], None]) -> None:
        self.name = name
        self.queue = stream_queue
        self.work = work
        """The MPI call(s) and any host-side scaling, run on the engine thread."""
        self.reached = threading.Event()
        """Set by the stream's task: the stream has reached the collective."""
        self.done = threading.Event()
        """Set by the engine once ``work`` has run."""
        self.passed: Event | None = None
        """The stream's event right after the task (set once scheduled): done while
        ``reached`` is not set means the stream skipped the task."""
        self.not_scheduled: BaseException | None = None
        """Why the task could not even be scheduled (the stream had already failed)."""
        self.staged: Event | None = None
        """Device backends: done once the node's values are in host memory."""

    def hold_stream(self) -> None:
        """The stream's task on a CPU backend: mark the point reached, then hold the stream
        until the engine has run the collective (so the stream's later work sees its result)."""
        self.reached.set()
        self.done.wait()


class SkippedError(RuntimeError):
    """The stream never ran the collective's task: an earlier task on it failed."""


class Engine:
    """Runs :class:`Job` objects on one thread, in submission order."""

    def __init__(self, alarm: Alarm, name: str) -> None:
        self.alarm = alarm
        self._jobs: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def submit(self, job: Job) -> None:
        """Queue ``job`` after every job submitted before it."""
        self._jobs.put(job)

    def _loop(self) -> None:
        while (job := self._jobs.get()) is not None:
            try:
                self._await_stream(job)
                job.work()
            except BaseException as exc:
                self.alarm.fail(f"collective {job.name} failed: {describe_exception(exc)}")
            finally:
                job.done.set()

    @staticmethod
    def _await_stream(job: Job) -> None:
        """Block until the stream reached ``job`` (and, on a device, staged its values).

        Raises:
            SkippedError: the stream passed the point without running the task, or the task
                could not be scheduled; the stream's failure is the cause.
        """
        while not job.reached.wait(0.002):
            if job.not_scheduled is not None:
                raise SkippedError(
                    f"the stream {job.queue.name} could not schedule it"
                ) from job.not_scheduled
            passed = job.passed
            if passed is not None and passed.is_done() and not job.reached.is_set():
                cause: BaseException | None = None
                try:
                    job.queue.all_work()  # raises the stream's failure
                except StreamError as exc:
                    cause = exc
                raise SkippedError(
                    f"the stream {job.queue.name} skipped it after an earlier task failed"
                ) from cause
        if job.staged is not None:
            job.staged.sync()

    def close(self) -> None:
        """Run the jobs still queued, then stop the thread."""
        if self._thread.is_alive():
            self._jobs.put(None)
            if self._thread is not threading.current_thread():
                self._thread.join()
