"""The native crew (:mod:`arrayjit_backend_c.cpu.crew`), driven by Python tasks (ctypes callbacks,
which a helper thread calls as it would a generated task)."""

from __future__ import annotations

import ctypes
import gc
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable

import pytest

from arrayjit_backend_c.cpu import crew as crew_module
from arrayjit_backend_c.cpu.crew import SPIN_NS, TASK, Crew, FutexBell

pytestmark = pytest.mark.skipif(not crew_module.has_helpers(), reason="no helper threads here")


class Task:
    """A Python function of the chunk as a native task, recording which thread ran each chunk
    and how many chunks ran at once."""

    def __init__(self, body: Callable[[int], None] = lambda chunk: None) -> None:
        self.body = body
        self.lock = threading.Lock()
        self.ran: list[tuple[int, str]] = []
        self.running = self.most = 0
        self.callback = TASK(self._call)
        self.address = ctypes.cast(self.callback, ctypes.c_void_p).value

    def _call(self, common: int, extra: int, chunk: int) -> None:
        with self.lock:
            self.ran.append((chunk, threading.current_thread().name))
            self.running += 1
            self.most = max(self.most, self.running)
        try:
            self.body(chunk)
        finally:
            with self.lock:
                self.running -= 1

    def chunks(self) -> list[int]:
        return sorted(c for c, _ in self.ran)

    def threads(self) -> set[str]:
        return {t for _, t in self.ran}


def test_every_chunk_runs_once_on_the_caller_and_helpers() -> None:
    crew = Crew(3, "t-once")
    task = Task()
    for n in (1, 2, 7, 50):
        for _ in range(30):
            task.ran.clear()
            crew.run(task.address, 0, 0, n, None)
            assert task.chunks() == list(range(n))
    assert task.threads() <= {threading.current_thread().name} | {f"t-once-{i}" for i in range(3)}
    crew.stop()


def test_the_task_gets_its_blocks() -> None:
    crew = Crew(2)
    seen: list[tuple[int, int]] = []

    def call(common: int, extra: int, chunk: int) -> None:
        seen.append((ctypes.c_int64.from_address(common).value, chunk))

    callback = TASK(call)
    common = ctypes.c_int64(41)
    crew.run(ctypes.cast(callback, ctypes.c_void_p).value, ctypes.addressof(common), 0, 3)
    assert sorted(seen) == [(41, 0), (41, 1), (41, 2)]
    crew.stop()


def test_a_run_keeps_to_its_thread_limit() -> None:
    crew = Crew(3)
    task = Task(lambda chunk: time.sleep(0.002))
    crew.run(task.address, 0, 0, 4, 1)
    assert task.threads() == {threading.current_thread().name}  # a share of one: no helper
    assert crew.started == 0
    task.ran.clear()
    crew.run(task.address, 0, 0, 12, 2)
    assert task.chunks() == list(range(12))
    assert len(task.threads()) <= 2 and task.most <= 2
    assert crew.started == 1
    crew.stop()


def test_helpers_take_chunks_as_they_come() -> None:
    crew = Crew(1)
    second = threading.Event()

    def meet(chunk: int) -> None:
        if chunk == 0:  # only returns once another thread has run chunk 1
            assert second.wait(timeout=10), "no helper took a chunk"
        else:
            second.set()

    task = Task(meet)
    crew.run(task.address, 0, 0, 2, 2)
    assert task.chunks() == [0, 1] and len(task.threads()) == 2
    crew.stop()


def test_sleeping_helpers_wake_and_a_sleeping_caller_is_woken() -> None:
    crew = Crew(1)
    slow = Task(lambda chunk: time.sleep(0.02) if chunk == 1 else None)
    for _ in range(3):
        # Idle longer than the spin: the helper sleeps on its futex and a post wakes it.
        time.sleep(3 * SPIN_NS / 1e9)
        slow.ran.clear()
        second = threading.Event()

        def met(chunk: int, second: threading.Event = second) -> None:
            if chunk:
                second.set()
            else:
                assert second.wait(timeout=10), "no helper took a chunk"

        meet = Task(met)
        crew.run(meet.address, 0, 0, 2, 2)
        assert second.is_set() and len(meet.threads()) == 2
        # The helper's chunk outlasts the caller's spin: the caller sleeps until it ends.
        crew.run(slow.address, 0, 0, 2, 2)
        assert slow.chunks() == [0, 1]
    crew.stop()


def test_concurrent_callers_share_the_helpers_without_oversubscribing() -> None:
    crew = Crew(2)
    task = Task(lambda chunk: time.sleep(0.0005))
    errors: list[BaseException] = []

    def caller() -> None:
        try:
            for _ in range(20):
                mine = Task(lambda chunk: time.sleep(0.0002))
                crew.run(mine.address, 0, 0, 9, None)
                assert mine.chunks() == list(range(9))
                crew.run(task.address, 0, 0, 5, None)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=caller) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert task.most <= 4 + 2  # every caller and both helpers, never more
    assert sorted(task.chunks()) == sorted(list(range(5)) * 80)
    assert crew.started == 2
    crew.stop()


def test_stop_ends_the_helpers_and_a_later_run_starts_new_ones() -> None:
    crew = Crew(2, "t-stop")
    task = Task()
    crew.run(task.address, 0, 0, 6)
    names = {t.name for t in threading.enumerate()}
    assert {"t-stop-0", "t-stop-1"} <= names
    crew.stop()
    assert crew.started == 0
    assert not {"t-stop-0", "t-stop-1"} & {t.name for t in threading.enumerate()}
    task.ran.clear()
    crew.run(task.address, 0, 0, 6)
    assert task.chunks() == list(range(6)) and crew.started == 2
    del crew
    gc.collect()
    for _ in range(100):  # the collected crew's finalizer stops its helpers
        if not {"t-stop-0", "t-stop-1"} & {t.name for t in threading.enumerate()}:
            break
        time.sleep(0.01)
    assert not {"t-stop-0", "t-stop-1"} & {t.name for t in threading.enumerate()}


def test_no_chunks_run_nothing_and_a_bad_task_is_refused() -> None:
    crew = Crew(2, "t-bad")
    task = Task()
    for chunks in (0, -3):
        crew.run(task.address, 0, 0, chunks, 2)
    assert task.ran == [] and crew.started == 0
    for bad in ("x", None, 0, 1.5):
        with pytest.raises(TypeError, match="crew t-bad: task must be a function's address"):
            crew.run(bad, 0, 0, 1)  # type: ignore[arg-type]
    crew.stop()


def test_size_is_capped() -> None:
    assert Crew(1000).size == crew_module.MAX_HELPERS
    assert Crew(0).size == 0 and Crew(-1).size == 0


def test_a_futex_bell_wakes_its_worker_unless_lowered_in_time() -> None:
    bell = FutexBell()
    woke = threading.Event()
    stop = threading.Event()

    def worker() -> None:
        while not stop.is_set():
            bell.wait()
            woke.set()
            time.sleep(0.01)  # as a worker would while it runs the task

    thread = threading.Thread(target=worker, daemon=True)
    thread.start()
    time.sleep(0.05)  # asleep in the kernel by now
    bell.raise_()
    bell.lower()  # a caller took the task at once: the worker sleeps on
    assert not woke.wait(timeout=0.2)
    bell.raise_()
    assert woke.wait(timeout=10)
    stop.set()
    bell.lower()
    bell.raise_()
    thread.join(timeout=10)
    assert not thread.is_alive()


def test_a_forked_child_starts_helpers_of_its_own() -> None:
    """A child made by ``fork`` has none of its parent's helper threads: its runs must not post
    jobs to them (and wait forever), but start helpers of their own."""
    crew = Crew(1)
    task = Task()
    crew.run(task.address, 0, 0, 4, 2)
    assert crew.started == 1
    pid = os.fork()
    if pid == 0:  # the child: exits 0 only if two runs complete, with a helper of its own
        code = 1
        try:
            child_task = Task()
            crew.run(child_task.address, 0, 0, 8, 2)
            crew.run(child_task.address, 0, 0, 8, 2)
            code = 0 if child_task.chunks() == sorted(list(range(8)) * 2) else 2
        finally:
            os._exit(code)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.01)
    else:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        pytest.fail("the forked child's crew run hung")
    assert os.waitstatus_to_exitcode(status) == 0
    crew.run(task.address, 0, 0, 4, 2)  # the parent's helpers are unaffected
    crew.stop()


FIRST_USE = """
import ctypes
import threading
from arrayjit_backend_c.cpu import crew, llvm_jit
start = threading.Barrier(8)
natives, targets = [], []

def first_use():
    start.wait()
    targets.append(llvm_jit.host_target())
    bell = crew.FutexBell()
    natives.append(bell._native)
    bell.raise_(at_once=True)
    bell.wait()  # the entry point's code must still be there
    task = crew.TASK(lambda common, extra, chunk: None)
    crew.Crew(1).run(ctypes.cast(task, ctypes.c_void_p).value, 0, 0, 4, 2)

threads = [threading.Thread(target=first_use) for _ in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
assert len(natives) == 8 and all(n is crew._native() for n in natives), natives
assert len(targets) == 8 and all(t is targets[0] for t in targets), targets
"""


def test_first_use_from_threads_at_once_makes_one_crew_module() -> None:
    """Eight threads of a fresh process making their first bell and crew at the same instant
    share one crew module (a second one, dropped, freed the code the first callers' entry
    points pointed into: a segmentation fault every time) and one host target."""
    for _ in range(3):  # a race does not lose every time
        done = subprocess.run(
            [sys.executable, "-c", FIRST_USE], capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-2000:]}"
