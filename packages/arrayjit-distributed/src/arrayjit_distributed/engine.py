"""The engine of a communicator: it keeps its collectives' MPI calls in the order the program
asked for them, runs them once their stream has reached them, and ends the job when a stream
skips one.

Every rank's collectives must reach MPI in the same order, one at a time. Each collective is a
:class:`Job` with a sequence number; its MPI call runs only in its turn (:class:`Turns`).

- CPU backends: the stream's own task waits for its turn (at once, normally), runs the MPI call
  on the device buffer and passes the turn on, so a collective costs the same thread hand-offs
  as a routine (a hand-off to another thread cost 30-40% of a 64 MiB all-reduce on a loaded
  2-core machine).
- Device backends (OpenCL, CUDA): their tasks run at once on the caller's thread, which must not
  block, so the engine's thread runs the MPI call on the host staging array once the device has
  copied the values out.

The engine's thread watches every job in order: a multicore stream that saw a failure skips its
later tasks, and a skipped collective would leave every other rank blocked in MPI forever. When
a job's stream passed it without running it, the engine aborts the job through the
:class:`~arrayjit_distributed.failure.Alarm` with the stream's failure as the cause.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable

from arrayjit_backends.impl.stream_queue import Event, StreamQueue
from arrayjit_distributed.failure import Alarm, describe_exception
from arrayjit_tnode import StreamError


class Turns:
    """Whose turn it is to call MPI: jobs are numbered from 0 in submission order."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._current = 0

    def wait(self, seq: int) -> None:
        """Block until job ``seq`` may call MPI."""
        with self._cond:
            while self._current != seq:
                self._cond.wait()

    def pass_on(self, seq: int) -> None:
        """Job ``seq`` is done: the next one's turn."""
        with self._cond:
            self._current = seq + 1
            self._cond.notify_all()


class Job:
    """One collective on its way through a stream and the engine."""

    def __init__(
        self,
        name: str,
        stream_queue: StreamQueue,
        work: Callable[[], None],
        *,
        on_stream: bool,
    ) -> None:
        self.name = name
        self.queue = stream_queue
        self.work = work
        """The MPI call(s) and any host-side scaling."""
        self.on_stream = on_stream
        """Whether the stream's task runs ``work`` (CPU backends), else the engine's thread."""
        self.seq = -1
        """Sequence number, set by :meth:`Engine.submit`."""
        self.turns: Turns | None = None
        self.failure: BaseException | None = None
        """What ``work`` raised on the stream."""
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

    def run_on_stream(self) -> None:
        """The stream's task on a CPU backend: in its turn, run the collective on the buffer
        itself (the stream's later work sees its result).

        Raises:
            BaseException: what the MPI call raised (the engine then aborts the job).
        """
        assert self.turns is not None
        self.reached.set()
        self.turns.wait(self.seq)
        try:
            self.work()
        except BaseException as exc:
            self.failure = exc
            raise
        finally:
            self.done.set()
            self.turns.pass_on(self.seq)


class SkippedError(RuntimeError):
    """The stream never ran the collective's task: an earlier task on it failed."""


class Engine:
    """Runs :class:`Job` objects on one thread, in submission order."""

    def __init__(self, alarm: Alarm, name: str) -> None:
        self.alarm = alarm
        self.turns = Turns()
        self._submitted = 0
        self._jobs: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def submit(self, job: Job) -> None:
        """Number ``job`` and queue it after every job submitted before it."""
        job.seq, job.turns = self._submitted, self.turns
        self._submitted += 1
        self._jobs.put(job)

    def _loop(self) -> None:
        while (job := self._jobs.get()) is not None:
            try:
                self._await_stream(job)
                if job.on_stream:
                    job.done.wait()
                    if job.failure is not None:
                        raise job.failure
                else:
                    self.turns.wait(job.seq)
                    try:
                        job.work()
                    finally:
                        job.done.set()
                        self.turns.pass_on(job.seq)
            except BaseException as exc:
                self.alarm.fail(f"collective {job.name} failed: {describe_exception(exc)}")

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
