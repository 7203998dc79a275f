"""Wrong argument types at the Backend's entry points (events, streams, nodes, merge modes,
tasks, code lists) are a `UsageError` naming the call and the argument, raised before anything
is scheduled: the stream given stays usable and every value stays what it was."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from arrayjit_backends import MergeMode, UsageError
from arrayjit_conformance.harness import hosted
from arrayjit_ir import ir


def _routine(backend: Any, stream: Any, label: str) -> tuple[Any, Any, Any]:
    """``y = -a`` linked on ``stream``, with ``a = 0..7`` uploaded."""
    a, y = hosted((8,), f"{label}_a"), hosted((8,), f"{label}_y")
    a.set_values(np.arange(8.0))
    code = backend.compile(ir.unop(y, "neg", a), name=f"{label}_neg")
    return backend.link(backend.make_context(stream), code), a, y


def _still_runs(backend: Any, r: Any, y: Any) -> None:
    r()
    backend.await_stream(r.context.stream)
    backend.to_host(r.context, y)
    np.testing.assert_array_equal(y.get_values(), -np.arange(8.0))


def test_a_bad_event_or_task_fails_the_call_not_the_stream(backend: Any) -> None:
    stream = backend.new_stream(backend.get_device(0))
    r, _, y = _routine(backend, stream, "ev")
    for bad in (None, "e", r.context):
        with pytest.raises(UsageError, match=r"will_wait_for: expected an Event .*got"):
            backend.will_wait_for(r.context, bad)
    with pytest.raises(UsageError, match=r"schedule_task: the task must be callable .*got 5"):
        backend.schedule_task(r.context, 5)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=r"schedule_task \(reads/writes\): expected a Tnode"):
        backend.schedule_task(r.context, lambda: None, reads=["y"])
    with pytest.raises(UsageError, match=r"sync: expected an Event.*got None"):
        backend.sync(None)
    with pytest.raises(UsageError, match=r"is_done: expected an Event.*got 3"):
        backend.is_done(3)
    _still_runs(backend, r, y)  # nothing above reached the stream
    event = backend.all_work(stream)
    backend.sync(event)
    backend.sync(event)  # an event can be waited for any number of times
    assert backend.is_done(event)


def test_stream_and_device_arguments_are_checked(backend: Any) -> None:
    dev = backend.get_device(0)
    stream = backend.new_stream(dev)
    ctx = backend.make_context(stream)
    calls: dict[str, Callable[[Any], Any]] = {
        "all_work": backend.all_work,
        "await_stream": backend.await_stream,
        "is_idle": backend.is_idle,
        "get_name": backend.get_name,
        "get_debug_info": backend.get_debug_info,
    }
    for name, call in calls.items():
        for bad in (None, ctx, dev):
            with pytest.raises(UsageError, match=rf"{name}: expected a Stream of backend"):
                call(bad)
    with pytest.raises(UsageError, match=r"get_used_memory: expected a Device of backend"):
        backend.get_used_memory(stream)
    assert backend.is_idle(stream) in (True, False)
    backend.await_stream(stream)  # nothing queued: returns at once
    assert backend.is_idle(stream)
    backend.sync(backend.all_work(stream))
    assert backend.get_name(stream) == stream.name


def test_node_and_merge_mode_arguments_are_checked(backend: Any) -> None:
    dev = backend.get_device(0)
    r1, a, y = _routine(backend, backend.new_stream(dev), "src")
    r2 = backend.link(
        backend.make_context(backend.new_stream(dev)),
        backend.compile(ir.unop(y, "neg", a), name="dst_neg"),
    )
    r1()  # the source's y is -(0..7)
    a.set_values(np.full(8, 5.0))  # after it: a later run of r1 would read these
    r2()  # the destination's y is -5
    for bad in ("y", 3, None):
        with pytest.raises(UsageError, match=r"to_host: expected a Tnode"):
            backend.to_host(r1.context, bad)
        with pytest.raises(UsageError, match=r"from_host: expected a Tnode"):
            backend.from_host(r1.context, bad)
        with pytest.raises(UsageError, match=r"device_to_device: expected a Tnode"):
            backend.device_to_device(bad, MergeMode.No, r2.context, r1.context)
    # A mode given as text was taken for Streaming: the copy did not happen, yet True came back.
    for bad_mode in ("No", "Copy", None, 0):
        with pytest.raises(UsageError, match=r"into_merge_buffer must be one of MergeMode\.No"):
            backend.device_to_device(y, bad_mode, r2.context, r1.context)
    backend.to_host(r2.context, y)
    np.testing.assert_array_equal(y.get_values(), np.full(8, -5.0))  # untouched
    assert backend.device_to_device(y, MergeMode.No, r2.context, r1.context)
    backend.to_host(r2.context, y)
    np.testing.assert_array_equal(y.get_values(), -np.arange(8.0))


def test_allocation_and_link_batch_arguments(backend: Any) -> None:
    stream = backend.new_stream(backend.get_device(0))
    buf = backend.alloc_zero_init_array("single", (3, 4), stream)  # a name, as Tnode.create
    assert buf.size_in_bytes == 48
    for dims in ((-3,), (2.5,), 7):
        with pytest.raises(UsageError, match=r"alloc_zero_init_array: dims must be a sequence"):
            backend.alloc_zero_init_array("single", dims, stream)
    with pytest.raises(UsageError, match=r"unknown precision 'foo'"):
        backend.alloc_zero_init_array("foo", (3,), stream)
    a, y = hosted((4,), "lb_a"), hosted((4,), "lb_y")
    a.set_values(np.arange(4.0))
    code = backend.compile(ir.unop(y, "neg", a), name="lb_neg")
    ctx = backend.make_context(stream)
    with pytest.raises(UsageError, match=r"link_batch: expected a list of Codes"):
        backend.link_batch(ctx, code)
    (r,) = backend.link_batch(ctx, [code])
    r()
    backend.to_host(r.context, y)
    np.testing.assert_array_equal(y.get_values(), -np.arange(4.0))


def test_initialize_takes_a_config_or_its_name(backend: Any) -> None:
    from arrayjit_backends import Config

    dev = backend.get_device(0)
    backend.initialize(Config.MOST_PARALLEL_STREAMS)
    most = backend.suggested_num_streams(dev)
    for bad in ("x", 3, None):
        # was accepted, and suggested_num_streams then raised AttributeError
        with pytest.raises(UsageError, match=r"initialize: config must be one of Config\."):
            backend.initialize(bad)
    assert backend.config is Config.MOST_PARALLEL_STREAMS  # unchanged
    assert backend.suggested_num_streams(dev) == most
    backend.initialize("only_devices_parallel")
    assert backend.config is Config.ONLY_DEVICES_PARALLEL
    assert backend.suggested_num_streams(dev) == 1


def test_to_host_into_an_unusable_host_array_fails_the_call_not_the_stream(backend: Any) -> None:
    # A read-only host array made the queued copy fail, and with it the stream.
    stream = backend.new_stream(backend.get_device(0))
    r, _, y = _routine(backend, stream, "ro")
    r()
    y.array.flags.writeable = False
    with pytest.raises(UsageError, match=r"to_host: node ro_y#\d+'s host array is read-only"):
        backend.to_host(r.context, y)
    y.array = [0.0] * 8
    with pytest.raises(UsageError, match=r"to_host: node ro_y#\d+'s host array is list, not a"):
        backend.to_host(r.context, y)
    y.array = np.zeros(8, np.float32)
    _still_runs(backend, r, y)


def test_memory_the_device_refuses_is_a_usage_error(backend: Any) -> None:
    # MemoryError on the CPU backends, a pyopencl LogicError on OpenCL: one documented type
    # now, naming the size, the device and the backend.
    dev = backend.get_device(0)
    stream = backend.new_stream(dev)
    used = backend.get_used_memory(dev)
    with pytest.raises(UsageError, match=rf"cannot allocate {1 << 50} bytes on <Device "):
        backend.alloc_buffer(1 << 50, stream)
    assert backend.get_used_memory(dev) == used
    r, _, y = _routine(backend, stream, "mem")
    _still_runs(backend, r, y)


def test_compile_batch_takes_lists(backend: Any) -> None:
    a, y, z = hosted((4,), "cb_a"), hosted((4,), "cb_y"), hosted((4,), "cb_z")
    comps = [ir.unop(y, "neg", a), ir.unop(z, "exp", a)]
    # a string of names was taken letter by letter: routines "y" and "z"
    with pytest.raises(UsageError, match=r"compile_batch: names must be a list, got 'yz'"):
        backend.compile_batch(comps, "yz")
    with pytest.raises(UsageError, match=r"compile_batch: names must be a list, got None"):
        backend.compile_batch(comps, None)
    with pytest.raises(UsageError, match=r"compile_batch: comps must be a list"):
        backend.compile_batch(comps[0], ["neg"])
    codes = backend.compile_batch(tuple(comps), ("neg", "exp"))
    assert [c.name for c in codes] == ["neg", "exp"]


def test_bindings_update_is_checked_and_all_or_nothing(backend: Any) -> None:
    from arrayjit_ir.indexing import StaticSymbol

    i = StaticSymbol("i", range=5)
    x, row = hosted((5, 4), "bx"), hosted((4,), "brow")
    x.set_values(np.arange(20.0).reshape(5, 4))
    r = backend.link(
        backend.make_context(backend.new_stream(backend.get_device(0))),
        backend.compile(ir.fetch(row, ir.Slice(i, x)), name="pick", bindings=(i,)),
    )
    r.bindings["i"] = 2
    for bad in (5, None):  # TypeError from MutableMapping.update
        with pytest.raises(UsageError, match=r"routine pick: bindings must map static index"):
            r.bindings = bad
    # a good entry before a bad one was applied, although the assignment raised
    with pytest.raises(UsageError, match=r"routine pick has no static index 'j'"):
        r.bindings = {"i": 3, "j": 1}
    with pytest.raises(UsageError, match=r"static index i = 9 is out of range"):
        r.bindings.update([("i", 4), ("i", 9)])
    assert dict(r.bindings) == {"i": 2}
    r()
    backend.to_host(r.context, row)
    np.testing.assert_array_equal(row.get_values(), np.arange(8.0, 12.0))


def test_a_static_symbol_given_twice_is_one_index(backend: Any) -> None:
    # cc declared the parameter twice and failed with a CompileError
    from arrayjit_ir.indexing import StaticSymbol

    i = StaticSymbol("i", range=5)
    x, row = hosted((5, 4), "tx"), hosted((4,), "trow")
    x.set_values(np.arange(20.0).reshape(5, 4))
    code = backend.compile(ir.fetch(row, ir.Slice(i, x)), name="twice", bindings=(i, i))
    (batch,) = backend.compile_batch([ir.fetch(row, ir.Slice(i, x))], ["twice_b"], (i, i))
    for c in (code, batch):
        r = backend.link(backend.make_context(backend.new_stream(backend.get_device(0))), c)
        assert r.bindings.ranges() == {"i": 5}
        r.bindings["i"] = 3
        r()
        backend.to_host(r.context, row)
        np.testing.assert_array_equal(row.get_values(), np.arange(12.0, 16.0))


def test_long_routine_names_compile_and_stay_distinct(backend: Any) -> None:
    # a 300-character name: cc's build folder name was too long, PoCL's kernel link failed
    a, y, z = hosted((4,), "ln_a"), hosted((4,), "ln_y"), hosted((4,), "ln_z")
    a.set_values(np.arange(4.0))
    stream = backend.new_stream(backend.get_device(0))
    r1 = backend.link(
        backend.make_context(stream), backend.compile(ir.unop(y, "neg", a), name="n" * 300 + "1")
    )
    r2 = backend.link(r1.context, backend.compile(ir.unop(z, "exp", a), name="n" * 300 + "2"))
    r1()
    r2()
    backend.to_host(r2.context, y)
    backend.to_host(r2.context, z)
    np.testing.assert_array_equal(y.get_values(), -np.arange(4.0))
    np.testing.assert_allclose(z.get_values(), np.exp(np.arange(4.0)), rtol=2e-5)
