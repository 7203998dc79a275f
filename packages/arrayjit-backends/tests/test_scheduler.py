"""The multicore scheduler's queue on its own: events as queue positions, waiters, failures."""

import functools
import threading
import time

import pytest

from arrayjit_backends import fresh_backend
from arrayjit_backends.impl.stream_queue import DONE, Bell, ThreadBudget, thread_share
from arrayjit_backends.runtime.schedulers import (
    DEFER_WINDOW_NS,
    SyncQueue,
    ThreadQueue,
    _WorkerState,
)
from arrayjit_tnode import StreamError, UsageError


def test_events_are_done_once_the_tasks_before_them_ran() -> None:
    q = ThreadQueue("s")
    gate, ran = threading.Event(), []
    assert q.all_work() is DONE and q.is_idle()
    q.schedule(gate.wait)
    first = q.all_work()
    q.schedule(lambda: ran.append(1))
    second = q.all_work()
    assert not first.is_done() and not second.is_done() and not q.is_idle()
    gate.set()
    second.sync()
    assert first.is_done() and second.is_done() and ran == [1]
    q.await_idle()
    assert q.is_idle()
    q.close()


def test_many_waiters_each_wake_at_their_point() -> None:
    q = ThreadQueue("s")
    gates = [threading.Event() for _ in range(4)]
    events = []
    for g in gates:
        q.schedule(g.wait)
        events.append(q.all_work())
    woken: list[int] = []
    lock = threading.Lock()

    def waiter(k: int) -> None:
        events[k].sync()
        with lock:
            woken.append(k)

    threads = [threading.Thread(target=waiter, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for k, g in enumerate(gates):
        g.set()
        events[k].sync()
        assert all(e.is_done() for e in events[: k + 1])
        assert not any(e.is_done() for e in events[k + 1 :])
    for t in threads:
        t.join(timeout=10)
    assert sorted(woken) == [0, 1, 2, 3]
    q.close()


def test_a_failed_task_skips_the_rest_but_no_event_hangs() -> None:
    q = ThreadQueue("s")
    ran = []

    def fail() -> None:
        raise ValueError("boom")

    q.schedule(fail)
    q.schedule(lambda: ran.append(1))  # accepted before the failure is known
    event = q.all_work()
    event.wait()  # returns: skipped tasks still count as run
    assert event.is_done() and ran == []
    with pytest.raises(StreamError, match=r"stream s: a task before this event failed.*boom") as e:
        event.sync()  # never silently: the point was passed without running the tasks
    assert isinstance(e.value.__cause__, ValueError)
    with pytest.raises(StreamError, match=r"stream s: .*boom") as info:
        q.await_idle()
    assert isinstance(info.value.__cause__, ValueError)
    with pytest.raises(StreamError, match="an earlier task failed"):
        q.schedule(lambda: None)
    q.close()


def test_sync_wait_for_a_failing_event_fails_the_stream() -> None:
    from arrayjit_backends.impl.stream_queue import Event
    from arrayjit_backends.runtime.schedulers import SyncQueue

    class Failing(Event):
        def is_done(self) -> bool:
            return False

        def sync(self) -> None:
            raise RuntimeError("bad event")

    q = SyncQueue("s")
    with pytest.raises(StreamError, match=r"stream s: the event it waited for failed") as info:
        q.wait_for(Failing())
    assert isinstance(info.value.__cause__, RuntimeError)
    with pytest.raises(StreamError, match="an earlier task failed"):
        q.schedule(lambda: None)


def test_a_waiting_stream_fails_with_the_stream_it_waits_for() -> None:
    a, b = ThreadQueue("a"), ThreadQueue("b")

    def fail() -> None:
        raise ValueError("boom")

    a.schedule(fail)
    b.wait_for(a.all_work())
    with pytest.raises(StreamError, match=r"stream b: .*stream a: a task before this event"):
        b.await_idle()
    a.close()
    b.close()


def test_a_dropped_queue_stops_its_worker() -> None:
    import gc

    q = ThreadQueue("dropped")
    thread = q.thread
    q.schedule(functools.partial(repr, q))  # a task that holds the queue itself
    q.await_idle()
    del q
    gc.collect()
    thread.join(timeout=5)
    assert not thread.is_alive()


def test_poll_until_lets_ctrl_c_through_at_once() -> None:
    import _thread
    import signal
    import time

    from arrayjit_backends.impl.stream_queue import poll_until

    # interrupt_main does nothing where SIGINT is not handled by Python: a process started with
    # SIGINT ignored (a job sent to the background by a non-interactive shell, as `make test &`
    # or a CI runner may do) keeps it ignored, and the wait then ran its whole course. The test
    # installs Python's own handler for its duration, as an interactive session has it.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(0.2, _thread.interrupt_main, args=(signal.SIGINT,))
    try:
        start = time.monotonic()
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            poll_until(lambda: time.monotonic() - start > 30)  # a device wait that takes long
        # Generous for a loaded machine, far below the 30 s the wait would take uninterrupted.
        assert time.monotonic() - start < 10.0
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)


def test_succeeded_is_false_for_good_after_a_failure() -> None:
    q = ThreadQueue("s")
    gate = threading.Event()
    q.schedule(lambda: gate.wait(10))
    before = q.all_work()
    q.schedule(lambda: 1 / 0)
    after = q.all_work()
    assert not before.succeeded() and not after.succeeded()
    gate.set()
    after.wait()
    assert before.succeeded() and after.is_done() and not after.succeeded()
    before.sync()  # the point before the failure is fine
    with pytest.raises(StreamError, match="ZeroDivisionError"):
        after.sync()
    q.close()


# ---- thread budget ----


def test_thread_budget_shares_the_cores() -> None:
    budget = ThreadBudget(4)
    assert budget.share() == 4  # nothing busy: a kernel may use every core
    shares = []
    for _ in range(5):
        budget.enter()
        shares.append(budget.share())
    assert shares == [4, 2, 1, 1, 1]
    for _ in range(5):
        budget.leave()
    assert budget.busy == 0
    assert ThreadBudget(0).cores == 1


def test_busy_streams_split_the_budget() -> None:
    """A kernel gets ``cores // busy streams``: a stream counts as busy from its first queued
    task until its queue drains; a sync stream's tasks see the whole budget."""
    budget = ThreadBudget(2)
    q1, q2 = ThreadQueue("a", budget), ThreadQueue("b", budget)
    seen: list[int] = []
    gate1, gate2 = threading.Event(), threading.Event()
    q2.schedule(gate2.wait)  # q2 busy until gate2 opens
    q1.schedule(gate1.wait)
    q1.schedule(lambda: seen.append(thread_share()))
    gate1.set()
    q1.await_idle()
    assert seen == [1]  # two busy streams on two cores: one thread each
    gate2.set()
    q2.await_idle()
    q1.schedule(lambda: seen.append(thread_share()))
    q1.await_idle()
    assert seen == [1, 2]  # alone again: both cores
    assert budget.busy == 0  # drained queues are idle (checked after their last task)
    sync = SyncQueue("s", ThreadBudget(3))
    sync.schedule(lambda: seen.append(thread_share()))
    assert seen == [1, 2, 3]
    q1.close()
    q2.close()


# ---- short tasks ----


def test_short_task_runs_on_the_caller_when_the_stream_is_idle() -> None:
    q = ThreadQueue("s")
    ran_on: list[str] = []
    q.schedule_short(lambda: ran_on.append(threading.current_thread().name))
    assert ran_on == [threading.current_thread().name]
    assert q.all_work() is DONE and q.is_idle()
    gate = threading.Event()
    q.schedule(gate.wait)  # busy: a short task queues behind, in order
    q.schedule_short(lambda: ran_on.append("after the gate"))
    assert len(ran_on) == 1 and not q.is_idle()
    gate.set()
    q.await_idle()
    assert ran_on[1:] == ["after the gate"]
    q.close()


def test_short_task_failure_is_kept_for_the_next_interaction() -> None:
    q = ThreadQueue("f")

    def boom() -> None:
        raise ValueError("bad")

    q.schedule_short(boom)  # no error here: as if the worker had run it
    with pytest.raises(StreamError, match="an earlier task failed: ValueError"):
        q.await_idle()
    with pytest.raises(StreamError, match="an earlier task failed"):
        q.schedule_short(lambda: None)
    q.close()


def test_task_queued_while_a_caller_runs_one_waits_for_it() -> None:
    """A second thread's task scheduled while a short task runs on the first caller runs
    after it, on the worker (order is kept whoever runs the tasks)."""
    q = ThreadQueue("o")
    order: list[str] = []
    started, release = threading.Event(), threading.Event()

    def short() -> None:
        started.set()
        release.wait()
        order.append("short")

    caller = threading.Thread(target=q.schedule_short, args=(short,))
    caller.start()
    started.wait()
    q.schedule(lambda: order.append("next"))
    assert order == []
    release.set()
    caller.join()
    q.await_idle()
    assert order == ["short", "next"]
    q.close()


def test_a_waiter_runs_the_tasks_the_worker_has_not_taken() -> None:
    """White box: a stream state with no worker thread; waiting for its tasks runs them, in
    order, on the waiting thread; an interrupt inside one fails the stream and reaches the
    waiter."""
    state = _WorkerState("w", ThreadBudget(2))
    order: list[tuple[int, str, int]] = []
    me = threading.current_thread().name
    for k in range(3):
        state.push(lambda k=k: order.append((k, threading.current_thread().name, thread_share())))
    state.wait_until(2)
    assert order == [(0, me, 2), (1, me, 2)]  # task 2 stays queued: not waited for
    assert (state.finished, state.scheduled, state.running) == (2, 3, False)
    state.wait_until(3)
    assert [o[0] for o in order] == [0, 1, 2]

    def interrupted() -> None:
        raise KeyboardInterrupt

    state.push(interrupted)
    with pytest.raises(KeyboardInterrupt):
        state.wait_until(4)
    assert isinstance(state.error, KeyboardInterrupt) and state.failed_at == 3


class _LevelBell(Bell):
    """A bell that only records its level (no worker sleeps on it)."""

    def __init__(self) -> None:
        self.raised = False

    def raise_(self, at_once: bool = False) -> None:
        self.raised = True

    def lower(self) -> None:
        self.raised = False

    def prepare(self) -> None:
        pass

    def wait(self) -> None:
        raise AssertionError("no worker here")


def test_a_run_and_wait_leaves_the_next_push_unrung_until_watched() -> None:
    """White box: once a caller took its task right after pushing it, the next push to the
    idle stream does not raise the bell; a query of the stream's progress does, and a second
    push does. A caller that took its task late (it did other work first) ends the
    deferring: the push after raises the bell at once."""
    bell = _LevelBell()
    state = _WorkerState("d", None, bell)
    state.push(lambda: None)
    assert bell.raised and not state.deferred  # no history yet: the worker is woken
    state.wait_until(1)  # the caller takes it at once
    assert state.defer and not bell.raised
    state.push(lambda: None)
    assert state.deferred and not bell.raised
    state.wake_deferred()
    assert bell.raised and not state.deferred
    state.wait_until(2)
    state.push(lambda: None)
    assert not bell.raised
    state.push(lambda: None)  # a second push: the worker has work of its own
    assert bell.raised and not state.deferred
    state.wait_until(4)
    state.push(lambda: None)
    assert not bell.raised
    time.sleep(2 * DEFER_WINDOW_NS / 1e9)  # the caller's own work, before it waits
    state.wait_until(5)
    assert not state.defer
    state.push(lambda: None)
    assert bell.raised
    state.wait_until(6)


@pytest.mark.parametrize("query", ["is_idle", "is_done", "succeeded", "wait_for"])
def test_a_watched_stream_runs_its_task_on_the_worker(query: str) -> None:
    """After runs and waits, a task scheduled and then watched (polling ``is_idle``, an
    event's ``is_done`` or ``succeeded``, another stream waiting for it) runs on the worker,
    without the caller waiting for it."""
    q, other = ThreadQueue("w"), ThreadQueue("x")
    for _ in range(3):
        q.schedule(lambda: None)
        q.await_idle()
    ran: list[str] = []
    q.schedule(lambda: ran.append(threading.current_thread().name))
    event = q.all_work()
    watch = {
        "is_idle": q.is_idle,
        "is_done": event.is_done,
        "succeeded": event.succeeded,
        "wait_for": lambda: (other.wait_for(event), other.is_idle())[1],
    }[query]
    deadline = time.monotonic() + 10
    while not watch():
        assert time.monotonic() < deadline, "the task never ran"
        time.sleep(0.001)
    assert ran and ran[0].startswith("arrayjit-"), ran
    q.close()
    other.close()


@pytest.mark.parametrize("seconds", [-1, float("nan"), float("inf"), "x", True])
def test_hold_refuses_a_bad_delay_and_leaves_the_stream_working(seconds: object) -> None:
    be = fresh_backend("multicore_interp")
    be.initialize()
    try:
        stream = be.new_stream(be.get_device(0))
        with pytest.raises(UsageError, match=r"hold on stream .*: expected a finite number"):
            stream.hold(seconds)  # type: ignore[arg-type]
        be.await_stream(stream)  # nothing was queued: the stream did not fail
    finally:
        be.finalize()


@pytest.mark.parametrize("wait", ["await_idle", "sync_later", "sync_earlier", "short"])
def test_a_task_waiting_for_its_own_stream_fails_instead_of_hanging(wait: str) -> None:
    # A task that waited for its own stream's later work (await_stream from inside
    # schedule_task) hung forever: the work it waits for runs only once it returns.
    q = ThreadQueue("own")
    other = ThreadQueue("other")
    other.schedule(lambda: None)
    before = q.all_work()
    seen: list[str] = []

    def task() -> None:
        other.all_work().sync()  # another stream: fine
        before.sync()  # this stream's earlier work: done already, fine
        seen.append("waited")
        if wait == "await_idle" or wait == "short":
            q.await_idle()
        elif wait == "sync_later":
            later.sync()
        else:
            q.all_work().sync()  # the point after this very task

    if wait == "short":
        q.schedule_short(task)  # run on this thread: the same wait, the same refusal
    else:
        q.schedule(task)
    with pytest.raises(StreamError, match=r"stream own: .*UsageError.*waits for work queued"):
        later = q.all_work()  # after a short run on this thread, this call reports it
        later.sync()
    assert seen == ["waited"]
    q.close()
    other.close()
