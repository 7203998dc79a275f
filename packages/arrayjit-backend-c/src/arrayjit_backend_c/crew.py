"""A crew of helper threads that run chunks of a parallel loop next to the calling thread (the
``llvm`` compiler's parallelism: the generated code has no threads of its own).

Each helper runs one native call at a time; hand-offs are lock releases, so a dispatch costs a
few microseconds. ctypes releases the GIL around every native call, so the chunks run on all
cores.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from typing import Any


class _Helper:
    """A thread that runs one native call at a time for a :class:`Crew`."""

    def __init__(self, name: str) -> None:
        self._go = threading.Lock()
        self._go.acquire()
        self._done = threading.Lock()
        self._done.acquire()
        self._task: tuple[Any, tuple[Any, ...]] | None = None
        self._error: BaseException | None = None
        self.thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while True:
            self._go.acquire()
            task = self._task
            if task is None:
                return
            try:
                task[0](*task[1])
            except BaseException as e:  # re-raised on the thread that waits
                self._error = e
            self._done.release()

    def start(self, fn: Any, args: tuple[Any, ...]) -> None:
        self._task = (fn, args)
        self._go.release()

    def wait(self) -> None:
        self._done.acquire()
        error, self._error = self._error, None
        if error is not None:
            raise error

    def stop(self) -> None:
        self._task = None
        self._go.release()


class Crew:
    """Helper threads for parallel loops, shared by the threads that run routines.

    ``run`` hands chunks to idle helpers (starting one when fewer than ``size`` exist) and runs
    the rest on the calling thread, so concurrent callers never oversubscribe the cores nor
    wait for each other. Lock hand-offs keep a dispatch to a few microseconds."""

    def __init__(self, size: int) -> None:
        self.size = size
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

    def _take(self, n: int) -> list[_Helper]:
        with self._lock:
            while len(self._idle) < n and len(self._all) < self.size:
                helper = _Helper(f"arrayjit-llvm-{len(self._all)}")
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
        """``fn(*args, *extra)`` for each ``extra`` of ``calls``; returns when all are done.
        ``threads``: the most threads to use, the caller's included (its stream's share of the
        cores, see :class:`~arrayjit_backends.scheduler.ThreadBudget`; None: no limit).

        Raises:
            Exception: the first error a call raised (after every call finished).
        """
        wanted = len(calls) - 1 if threads is None else min(len(calls), threads) - 1
        helpers = self._take(wanted) if wanted > 0 else []
        for helper, extra in zip(helpers, calls[1:], strict=False):
            helper.start(fn, (*args, *extra))
        try:
            fn(*args, *calls[0])
            for extra in calls[1 + len(helpers) :]:
                fn(*args, *extra)
        finally:
            errors = []
            for helper in helpers:
                try:
                    helper.wait()
                except BaseException as e:
                    errors.append(e)
            with self._lock:
                self._idle.extend(helpers)
        if errors:
            raise errors[0]


def _stop_helpers(helpers: list[_Helper]) -> None:
    for helper in helpers:
        helper.stop()
