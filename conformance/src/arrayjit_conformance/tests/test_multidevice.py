"""Two devices of one backend: streams, memory and contexts on each, one compiled routine run on
both, host values reaching each device, events of one device ordering work on the other, and
values exchanged between devices (``device_to_device`` in every merge mode between two devices
is also in ``test_merge``).

These tests skip (with the reason) on a backend with one device; ``tox -e conf-opencl-2dev``
runs them on two PoCL devices and fails if any of them skips.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from arrayjit_backends import MergeMode
from arrayjit_conformance.harness import hosted, require_devices
from arrayjit_ir import ir
from arrayjit_tnode import Tnode
from arrayjit_tnode import memory_mode as mm

RNG = np.random.default_rng(23)


def _contexts(backend: Any) -> tuple[Any, Any]:
    """A context on a new stream of device 0 and one on a new stream of device 1."""
    require_devices(backend, 2)
    return tuple(  # type: ignore[return-value]
        backend.make_context(backend.new_stream(backend.get_device(k))) for k in (0, 1)
    )


def test_streams_and_memory_belong_to_their_device(backend: Any) -> None:
    require_devices(backend, 2)
    d0, d1 = backend.get_device(0), backend.get_device(1)
    s1 = backend.new_stream(d1)
    assert s1.device is d1 and backend.get_name(s1).startswith(f"{backend.name}:1:")
    x, y = hosted((500,), "x"), hosted((500,), "y")
    code = backend.compile(ir.unop(y, "neg", x), name="neg")
    used0, used1 = backend.get_used_memory(d0), backend.get_used_memory(d1)
    r = backend.link(backend.make_context(s1), code)
    assert r.context.device is d1
    assert backend.get_used_memory(d1) - used1 == 4000  # x and y, on device 1 only
    assert backend.get_used_memory(d0) == used0


def test_one_routine_runs_on_both_devices_with_each_host_value(backend: Any) -> None:
    ctx0, ctx1 = _contexts(backend)
    n = 1 << 12
    x, y = hosted((n,), "x"), hosted((n,), "y")
    first = RNG.standard_normal(n).astype(np.float32)
    x.set_values(first)
    code = backend.compile(ir.binop(y, "mul", x, x), name="square")
    r0, r1 = backend.link(ctx0, code), backend.link(ctx1, code)  # both upload x's host value
    results = []
    for r in (r0, r1):
        r()
        assert backend.to_host(r.context, y)
        results.append(y.get_values().copy())
    np.testing.assert_array_equal(results[0], first * first)
    np.testing.assert_array_equal(results[1], first * first)
    # A new host value lags on both devices: from_host copies it into each.
    second = RNG.standard_normal(n).astype(np.float32)
    x.set_values(second)
    for r in (r1, r0):
        assert backend.from_host(r.context, x)
        r()
        assert backend.to_host(r.context, y)
        np.testing.assert_array_equal(y.get_values(), second * second)


def test_event_of_one_device_orders_work_on_the_other(backend: Any) -> None:
    ctx0, ctx1 = _contexts(backend)
    n = 1 << 12
    out = hosted((n,), "out")
    one = backend.link(ctx0, backend.compile(ir.fetch(out, ir.Constant(1.0)), name="one"))
    two = backend.link(ctx1, backend.compile(ir.fetch(out, ir.Constant(2.0)), name="two"))
    ctx0.stream.hold(0.3)  # device 0's transfer lands late unless device 1 waits for it
    one()
    assert backend.to_host(one.context, out)
    done_on_0 = backend.all_work(ctx0.stream)
    backend.will_wait_for(two.context, done_on_0)
    two()
    assert backend.to_host(two.context, out)
    done_on_1 = backend.all_work(ctx1.stream)
    backend.sync(done_on_1)
    assert backend.is_done(done_on_0) and backend.is_done(done_on_1)
    assert (out.get_values() == 2).all()
    backend.await_stream(ctx0.stream)
    assert (out.get_values() == 2).all()  # device 0's copy landed first, as requested


@pytest.mark.parametrize("mode", [MergeMode.Copy, MergeMode.Streaming], ids=["Copy", "Streaming"])
def test_devices_exchange_partial_sums(backend: Any, mode: MergeMode) -> None:
    """Each device computes a partial sum and receives the other's through its merge buffer at
    the same time (an all-reduce of two); both end with the total. Device 0 is held back, so
    device 1's read of device 0's value must wait for it."""
    ctx0, ctx1 = _contexts(backend)
    n = 1 << 12
    parts = [RNG.standard_normal(n) for _ in range(2)]
    g = Tnode.create((n,), label="g", memory_mode=(mm.Materialized(), 1))
    total = hosted((n,), "total")
    ctx0.stream.hold(0.2)
    producers = []
    for k, ctx in enumerate((ctx0, ctx1)):
        src = hosted((n,), f"part{k}")
        src.set_values(parts[k])
        producers.append(backend.link(ctx, backend.compile(ir.unop(g, "identity", src), "part")))
        producers[-1]()
    code = backend.compile(ir.binop(total, "add", g, ir.merge_buffer(g)), name="sum")
    users = []
    for k, p in enumerate(producers):
        assert backend.device_to_device(g, mode, p.context, producers[1 - k].context)
        users.append(backend.link(p.context, code))
    expected = parts[0].astype(np.float32) + parts[1].astype(np.float32)
    for u in users:
        u()
        assert backend.to_host(u.context, total)
        np.testing.assert_array_equal(total.get_values(), expected)


def test_value_travels_to_the_other_device_and_back(backend: Any) -> None:
    """Device 0 computes ``g``, device 1 receives it into its own buffer (``No``), doubles it in
    place, and device 0 receives the result back and doubles it into ``out``: each copy waits
    for the writer before it, and each in-place write waits for the copy reading the buffer
    (device 0 is held back first)."""
    ctx0, ctx1 = _contexts(backend)
    n = 1 << 12
    x, out = hosted((n,), "x"), hosted((n,), "out")
    vx = RNG.standard_normal(n).astype(np.float32)
    x.set_values(vx)
    g = Tnode.create((n,), label="g", memory_mode=(mm.Materialized(), 1))
    ctx0.stream.hold(0.2)
    make = backend.link(ctx0, backend.compile(ir.unop(g, "identity", x), name="make"))
    # Device 1's context gets its buffer of g from a routine writing it (a read needs one).
    zero = backend.link(ctx1, backend.compile(ir.fetch(g, ir.Constant(0.0)), name="zero"))
    zero()
    double = backend.link(zero.context, backend.compile(ir.binop(g, "add", g, g), name="double"))
    finish = backend.link(make.context, backend.compile(ir.binop(out, "add", g, g), name="finish"))
    for round_ in range(2):
        make()
        assert backend.device_to_device(g, MergeMode.No, double.context, make.context)
        double()
        assert backend.device_to_device(g, MergeMode.No, make.context, double.context)
        finish()
        assert backend.to_host(finish.context, out)
        np.testing.assert_array_equal(out.get_values(), vx * 4, err_msg=f"round {round_}")


def test_shared_node_has_a_buffer_per_device(backend: Any) -> None:
    """A node shared across streams has one buffer per device: a second stream of device 0
    sees device 0's value directly; device 1 keeps its own until device 0's is sent there."""
    require_devices(backend, 2)
    d0, d1 = backend.get_device(0), backend.get_device(1)
    n = 256
    x = Tnode.create((n,), label="x")
    x.update_memory_mode(mm.On_device(mm.Sharing.Shared_cross_streams), 1)
    y = hosted((n,), "y")
    write = backend.link(
        backend.make_context(backend.new_stream(d0)),
        backend.compile(ir.fetch(x, ir.Constant(3.0)), name="write"),
    )
    write_other = backend.link(
        backend.make_context(backend.new_stream(d1)),
        backend.compile(ir.fetch(x, ir.Constant(5.0)), name="write_other"),
    )
    read_code = backend.compile(ir.unop(y, "neg", x), name="read")
    same_device = backend.link(backend.make_context(backend.new_stream(d0)), read_code)
    other_device = backend.link(write_other.context, read_code)
    assert same_device.context.buffers[x] == write.context.buffers[x]
    write_other()
    write()
    for r, expected in ((same_device, -3.0), (other_device, -5.0)):
        r()
        assert backend.to_host(r.context, y)
        assert (y.get_values() == expected).all(), r.context
    assert backend.device_to_device(x, MergeMode.No, other_device.context, write.context)
    other_device()
    assert backend.to_host(other_device.context, y)
    assert (y.get_values() == -3.0).all()
