"""A crew of helper threads that run chunks of a parallel loop next to the calling thread (the
CPU compilers' parallelism: the generated code has no threads of its own, see
:mod:`arrayjit_backend_c.segments`).

Chunks are not handed out in advance: the caller and the helpers it wakes each take the next
chunk not yet taken (:class:`_Job`), so the caller never waits for a helper that has not woken
up yet (on a virtual machine or a loaded one that takes from tens of microseconds to a time
slice): it runs the chunks itself meanwhile, and only waits for chunks a helper is running.
Hand-offs are lock releases; ctypes releases the GIL around every native call, so the chunks
run on all cores.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Sequence
from typing import Any


class _Job:
    """One parallel loop: its calls, taken one at a time by whichever thread asks next."""

    def __init__(self, fn: Any, args: Sequence[Any], calls: Sequence[tuple[Any, ...]]) -> None:
        self.fn = fn
        self.args = tuple(args)
        self.calls = calls
        self.lock = threading.Lock()
        self.taken = 0
        self.running = 0
        """Calls taken by a helper and not finished yet."""
        self.waiter: threading.Lock | None = None
        """Held by the caller while it waits for ``running`` to drop to 0."""
        self.errors: list[BaseException] = []

    def work(self, helper: bool) -> None:
        """Run calls until none is left to take; a helper's failure is kept for the caller."""
        while True:
            with self.lock:
                if self.taken == len(self.calls):
                    return
                extra = self.calls[self.taken]
                self.taken += 1
                if helper:
                    self.running += 1
            try:
                self.fn(*self.args, *extra)
            except BaseException as e:  # re-raised by the caller once every call finished
                with self.lock:
                    self.errors.append(e)
            finally:
                if helper:
                    self._finish_one()

    def _finish_one(self) -> None:
        with self.lock:
            self.running -= 1
            waiter = self.waiter if self.running == 0 else None
            if waiter is not None:
                self.waiter = None
        if waiter is not None:
            waiter.release()

    def wait(self) -> None:
        """Block until the calls helpers took have finished (the caller has run out of calls)."""
        with self.lock:
            if self.running == 0:
                return
            waiter = self.waiter = threading.Lock()
            waiter.acquire()
        waiter.acquire()


class _Helper:
    """A thread that works on one :class:`_Job` at a time for a :class:`Crew`."""

    def __init__(self, crew: Crew, name: str) -> None:
        self._go = threading.Lock()
        self._go.acquire()
        self._job: _Job | None = None
        self._crew = weakref.ref(crew)
        self.thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while True:
            self._go.acquire()
            job, self._job = self._job, None
            if job is None:
                return
            job.work(helper=True)
            del job  # the job's arguments must not outlive the loop's run
            crew = self._crew()
            if crew is None:
                return
            crew.rejoin(self)
            del crew

    def start(self, job: _Job) -> None:
        self._job = job
        self._go.release()

    def stop(self) -> None:
        self._job = None
        # Already released where it was woken for a job and is not up yet: it finds no job.
        with contextlib.suppress(RuntimeError):
            self._go.release()


class Crew:
    """Helper threads for parallel loops, shared by the threads that run routines.

    ``run`` wakes idle helpers (starting one when fewer than ``size`` exist) and works on the
    loop's calls next to them, so concurrent callers never oversubscribe the cores, and a
    caller never waits for a helper that is slow to wake. Lock hand-offs keep a dispatch to a
    few microseconds."""

    def __init__(self, size: int, name: str = "arrayjit-crew") -> None:
        """``size``: the most helper threads; ``name``: their names' prefix."""
        self.size = size
        self.name = name
        self._idle: list[_Helper] = []
        self._all: list[_Helper] = []
        self._lock = threading.Lock()
        self._stopper = weakref.finalize(self, _stop_helpers, self._all)

    def stop(self) -> None:
        """Stop every helper thread; later runs start new ones."""
        with self._lock:
            helpers = list(self._all)
            self._all.clear()  # in place: the finalizer holds this list
            self._idle.clear()
        _stop_helpers(helpers)
        for helper in helpers:
            helper.thread.join(timeout=10)

    def rejoin(self, helper: _Helper) -> None:
        """``helper`` has finished its job: idle again (unless the crew was stopped)."""
        with self._lock:
            if any(h is helper for h in self._all):
                self._idle.append(helper)

    def _take(self, n: int) -> list[_Helper]:
        with self._lock:
            while len(self._idle) < n and len(self._all) < self.size:
                helper = _Helper(self, f"{self.name}-{len(self._all)}")
                self._all.append(helper)
                self._idle.append(helper)
            taken = self._idle[:n]
            del self._idle[:n]
            return taken

    def run(
        self,
        fn: Any,
        args: Sequence[Any],
        calls: Sequence[tuple[Any, ...]],
        threads: int | None = None,
    ) -> None:
        """``fn(*args, *extra)`` for each ``extra`` of ``calls``, each once, in no particular
        order; returns when all are done. ``threads``: the most threads to use, the caller's
        included (its stream's share of the cores, see
        :class:`~arrayjit_backends.scheduler.ThreadBudget`; None: no limit).

        Raises:
            Exception: the first error a call raised (after every call finished).
        """
        wanted = len(calls) - 1 if threads is None else min(len(calls), threads) - 1
        job = _Job(fn, args, calls)
        for helper in self._take(wanted) if wanted > 0 else []:
            helper.start(job)
        try:
            job.work(helper=False)
        finally:
            job.wait()
        if job.errors:
            raise job.errors[0]


def _stop_helpers(helpers: list[_Helper]) -> None:
    for helper in helpers:
        helper.stop()
