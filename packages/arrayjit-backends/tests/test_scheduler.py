"""The multicore scheduler's queue on its own: events as queue positions, waiters, failures."""

import threading

import pytest

from arrayjit_backends.scheduler import DONE, ThreadQueue
from arrayjit_tnode import StreamError


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
