"""The synchronization tables on their own: per-buffer freshness of hosted nodes and the
hooks that make host reads and writes wait for every pending transfer (the conformance module
``test_hazards`` checks the values these give on every backend)."""

from __future__ import annotations

import numpy as np
import pytest

from arrayjit_backends.impl.stream_queue import Event
from arrayjit_backends.runtime import hazards
from arrayjit_backends.runtime.slab import BufferLoc
from arrayjit_tnode import StreamError, Tnode

B1, B2 = BufferLoc(1, 0), BufferLoc(2, 0)


class _Pending(Event):
    """An event the test completes (or fails) by hand."""

    def __init__(self) -> None:
        self.done = False
        self.failed = False

    def is_done(self) -> bool:
        return self.done

    def sync(self) -> None:
        self.done = True
        if self.failed:
            raise StreamError("s", "a task before this event failed")

    def succeeded(self) -> bool:
        return self.done and not self.failed


class _Stream:
    """Stands for the stream a transfer ran on (the tables hold it weakly)."""


STREAM = _Stream()


def test_freshness_is_per_buffer() -> None:
    tn = Tnode.create((2,), hosted=True, label="a")
    hazards.mark_fresh(tn, 7, B1)
    assert hazards.is_fresh(tn, 7, B1) and not hazards.is_fresh(tn, 7, B2)
    assert tn.devices_not_lagging_host == {7}
    hazards.mark_fresh(tn, 7, B2)
    tn.set_values([1.0, 2.0])  # every buffer is stale now
    assert not hazards.is_fresh(tn, 7, B1) and not hazards.is_fresh(tn, 7, B2)
    hazards.mark_fresh(tn, 7, B2)  # B1's old entry is not believed again
    assert hazards.is_fresh(tn, 7, B2) and not hazards.is_fresh(tn, 7, B1)


def test_a_write_makes_its_buffer_the_only_fresh_one() -> None:
    tn = Tnode.create((2,), hosted=True, label="a")
    hazards.mark_fresh(tn, 7, B1)
    hazards.mark_fresh(tn, 8, B2)
    hazards.mark_only_fresh(tn, 8, B2)
    assert tn.devices_not_lagging_host == {8}
    assert hazards.is_fresh(tn, 8, B2) and not hazards.is_fresh(tn, 7, B1)
    hazards.mark_stale(tn, 8, B2)
    assert tn.devices_not_lagging_host == set()


def test_get_values_waits_for_every_pending_copy_to_the_host() -> None:
    tn = Tnode.create((2,), hosted=True, label="y")
    first, second = _Pending(), _Pending()
    hazards.record_download(tn, STREAM, first)  # type: ignore[arg-type]
    hazards.record_download(tn, STREAM, second)  # type: ignore[arg-type]
    tn.get_values()
    assert first.done and second.done


def test_a_failed_copy_to_the_host_raises_after_every_copy_landed() -> None:
    tn = Tnode.create((2,), hosted=True, label="y")
    first, second = _Pending(), _Pending()
    first.failed = True
    hazards.record_download(tn, STREAM, first)  # type: ignore[arg-type]
    hazards.record_download(tn, STREAM, second)  # type: ignore[arg-type]
    with pytest.raises(StreamError):
        tn.get_values()
    assert second.done


def test_set_values_waits_for_every_pending_upload() -> None:
    tn = Tnode.create((2,), hosted=True, label="a")
    first, second = _Pending(), _Pending()
    first.failed = True  # a failed upload is waited for, never raised
    hazards.record_upload(tn, STREAM, first)  # type: ignore[arg-type]
    hazards.record_upload(tn, STREAM, second)  # type: ignore[arg-type]
    tn.set_values([3.0, 4.0])
    assert first.done and second.done
    np.testing.assert_array_equal(tn.get_values(), [3.0, 4.0])
