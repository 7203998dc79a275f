"""Backend.schedule_task (the hook other packages' tasks use, e.g. arrayjit-distributed's
collectives): ordered like a routine through the writer/reader tables, on both schedulers."""

import time
from collections.abc import Iterator

import numpy as np
import pytest

from arrayjit_backends import Backend, UsageError, fresh_backend
from arrayjit_backends.runtime.slab import typed_view
from arrayjit_ir import ir
from arrayjit_tnode import Tnode
from arrayjit_tnode import memory_mode as mm


@pytest.fixture(params=["sync_interp", "multicore_interp"])
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    be = fresh_backend(request.param)
    assert isinstance(be, Backend)
    be.initialize()
    yield be
    be.finalize()


def test_task_waits_for_writer_and_reader_waits_for_task(backend: Backend) -> None:
    dev = backend.get_device(0)
    s1, s2 = backend.new_stream(dev), backend.new_stream(dev)
    x = Tnode.create((8,), label="x")
    x.update_memory_mode(mm.On_device(mm.Sharing.Shared_cross_streams), 1)
    y = Tnode.create((8,), label="y", hosted=True)
    init = backend.link(
        backend.make_context(s1), backend.compile(ir.fetch(x, ir.Constant(0.0)), name="init")
    )
    read = backend.link(init.context, backend.compile(ir.binop(y, "add", x, x), name="read"))
    other = backend.link(
        backend.make_context(s2), backend.compile(ir.unop(y, "neg", x), name="other")
    )
    mem, off = init.context.buf(x)
    view = typed_view(mem, off, x)
    order: list[str] = []

    def slow_write() -> None:  # the writer on s1, slow: a task on s2 must not overtake it
        time.sleep(0.2)
        view[...] = 1.0
        order.append("write")

    def triple() -> None:
        view[...] *= 3.0
        order.append("triple")

    init()
    backend.schedule_task(init.context, slow_write, writes=[x])
    event = backend.schedule_task(other.context, triple, writes=[x])
    read()  # on s1 again: must see the tripled value
    backend.to_host(read.context, y)
    np.testing.assert_array_equal(y.get_values(), np.full(8, 6.0, np.float32))
    assert order == ["write", "triple"]
    assert event.is_done()


def test_task_refuses_a_node_without_a_buffer(backend: Backend) -> None:
    ctx = backend.make_context(backend.new_stream(backend.get_device(0)))
    stray = Tnode.create((4,), label="stray")
    with pytest.raises(UsageError, match=r"schedule_task: node stray#\d+ has no buffer"):
        backend.schedule_task(ctx, lambda: None, reads=[stray])


def test_written_hosted_node_is_marked_changed_on_the_device(backend: Backend) -> None:
    h = Tnode.create((4,), label="h", hosted=True)
    h.set_values(np.arange(4, dtype=np.float32))
    r = backend.link(
        backend.make_context(backend.new_stream(backend.get_device(0))),
        backend.compile(ir.binop(h, "add", h, h), name="dbl"),
    )
    mem, off = r.context.buf(h)
    view = typed_view(mem, off, h)

    def negate() -> None:
        view[...] = -view

    backend.schedule_task(r.context, negate, writes=[h])
    dev_id = r.context.device.id
    assert h.devices_not_lagging_host == {dev_id}
    backend.to_host(r.context, h)
    np.testing.assert_array_equal(h.get_values(), -np.arange(4, dtype=np.float32))
