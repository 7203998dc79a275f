"""Ending the whole job when one rank fails, with a clear message on every rank.

A collective that one rank never joins leaves the others blocked inside MPI forever. So a rank
that fails during a collective (a task before it failed on its stream, the MPI call raised, or
an exception escaped the main program while a communicator was open) calls :meth:`Alarm.fail`:
it prints the cause, sends it to every other rank on a dedicated communicator, gives them a
moment to print it too, and calls ``MPI_Abort``. Each rank runs a watcher thread that polls for
such a message (every few milliseconds, so it costs nothing measurable) and, when one arrives,
prints it (even while its own engine is blocked inside a collective) and is then ended by the
failing rank's abort, or aborts itself if that does not come.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
import traceback
from types import TracebackType

from mpi4py import MPI

ALARM_TAG = 7001
MAX_MESSAGE = 8192
GRACE_SECONDS = 1.0
"""How long a failing rank waits after telling the others, so they can print before the job
is killed."""


def _say(rank: int, size: int, text: str) -> None:
    with contextlib.suppress(Exception):  # stderr may be closed at exit
        sys.stderr.write(f"arrayjit-distributed: rank {rank} of {size}: {text}\n")
        sys.stderr.flush()


class Alarm:
    """The failure channel of one communicator: a watcher thread and the abort path."""

    def __init__(self, comm: MPI.Intracomm, abort_comm: MPI.Comm) -> None:
        self.comm = comm.Dup()
        self.abort_comm = abort_comm
        self.rank, self.size = self.comm.Get_rank(), self.comm.Get_size()
        self._buf = bytearray(MAX_MESSAGE)
        self._req = self.comm.Irecv([self._buf, MPI.BYTE], source=MPI.ANY_SOURCE, tag=ALARM_TAG)
        self._stop = threading.Event()
        self._failing = threading.Lock()
        self._thread = threading.Thread(
            target=self._watch, name=f"arrayjit-distributed-alarm-{self.rank}", daemon=True
        )
        self._thread.start()

    def _watch(self) -> None:
        status = MPI.Status()
        while not self._stop.wait(0.005):
            if self._req.Test(status):
                n = status.Get_count(MPI.BYTE)
                text = bytes(self._buf[:n]).decode("utf-8", "replace")
                _say(
                    self.rank,
                    self.size,
                    f"rank {status.Get_source()} failed, so this job ends: {text}",
                )
                # The failing rank aborts the job once every rank had time to print; abort
                # ourselves only if that never comes (it died first), so no rank's message is
                # cut short by another's abort.
                time.sleep(3 * GRACE_SECONDS)
                self.abort_comm.Abort(1)

    def fail(self, text: str) -> None:
        """Print ``text`` as this rank's failure, send it to every other rank, and abort the
        job (never returns)."""
        with self._failing:  # one failure report per rank, even from several threads
            _say(self.rank, self.size, f"{text}; aborting the job")
            data = text.encode()[:MAX_MESSAGE]
            reqs = [
                self.comm.Isend([data, MPI.BYTE], dest=r, tag=ALARM_TAG)
                for r in range(self.size)
                if r != self.rank
            ]
            deadline = time.monotonic() + 1.0
            while reqs and not MPI.Request.Testall(reqs) and time.monotonic() < deadline:
                time.sleep(0.001)
            time.sleep(GRACE_SECONDS)
            self.abort_comm.Abort(1)
            time.sleep(60)  # Abort does not return; never let this thread go on meanwhile

    def close(self) -> None:
        """Stop the watcher and withdraw the pending receive (local, not collective)."""
        if self._stop.is_set():
            return
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join()
        with contextlib.suppress(Exception):
            self._req.Cancel()
            self._req.Wait()
        with contextlib.suppress(Exception):
            self.comm.Free()


def _cause(exc: BaseException) -> BaseException | None:
    if exc.__cause__ is not None or exc.__suppress_context__:
        return exc.__cause__
    return exc.__context__


def describe_exception(exc: BaseException) -> str:
    """The exception and its chain of causes on one line each, then the innermost frames of
    the first one raised, for a failure message."""
    chain = [exc]
    while (nxt := _cause(chain[-1])) is not None and len(chain) < 8:
        chain.append(nxt)
    text = "\n  caused by ".join(f"{type(e).__name__}: {e}" for e in chain)
    frames = "".join(traceback.format_tb(chain[-1].__traceback__)[-2:]).rstrip()
    return f"{text}\n{frames}" if frames else text


class ExceptHooks:
    """While installed: an exception that escapes the main program or a thread aborts the job
    through an :class:`Alarm` instead of leaving the other ranks blocked."""

    def __init__(self, alarm: Alarm) -> None:
        self.alarm = alarm
        self._sys_prev = sys.excepthook
        self._thread_prev = threading.excepthook
        sys.excepthook = self._sys_hook
        threading.excepthook = self._thread_hook

    def _sys_hook(
        self, kind: type[BaseException], exc: BaseException, tb: TracebackType | None
    ) -> None:
        self._sys_prev(kind, exc, tb)
        if isinstance(exc, KeyboardInterrupt | SystemExit):
            return
        self.alarm.fail(f"an exception escaped the program: {describe_exception(exc)}")

    def _thread_hook(self, args: threading.ExceptHookArgs) -> None:
        self._thread_prev(args)
        if args.exc_value is None or isinstance(args.exc_value, SystemExit):
            return
        name = args.thread.name if args.thread is not None else "?"
        self.alarm.fail(f"an exception escaped thread {name}: {describe_exception(args.exc_value)}")

    def uninstall(self) -> None:
        """Put the previous hooks back (if nothing replaced ours meanwhile)."""
        if sys.excepthook == self._sys_hook:
            sys.excepthook = self._sys_prev
        if threading.excepthook == self._thread_hook:
            threading.excepthook = self._thread_prev
