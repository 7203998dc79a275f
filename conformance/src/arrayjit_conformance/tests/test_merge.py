"""device_to_device and merge buffers in No, Streaming and Copy modes, on the same stream,
other streams and (where the backend has several) other devices."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import numpy as np
import pytest

from arrayjit_backends import MergeMode, UsageError
from arrayjit_conformance.harness import hosted, require_devices
from arrayjit_conformance.plugin import fresh_or_skip
from arrayjit_ir import ir
from arrayjit_tnode import Tnode
from arrayjit_tnode import memory_mode as mm

PLACES = ["same_stream", "other_stream", "other_device"]


def _materialized(dims: tuple[int, ...], label: str) -> Tnode:
    return Tnode.create(dims, label=label, memory_mode=(mm.Materialized(), 1))


def _streams(backend: Any, place: str) -> tuple[Any, Any]:
    if place == "other_device":
        require_devices(backend, 2)
        return backend.new_stream(backend.get_device(0)), backend.new_stream(backend.get_device(1))
    s1 = backend.new_stream(backend.get_device(0))
    return s1, (s1 if place == "same_stream" else backend.new_stream(backend.get_device(0)))


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("mode", list(MergeMode), ids=[m.value for m in MergeMode])
def test_device_to_device(backend: Any, mode: MergeMode, place: str) -> None:
    s1, s2 = _streams(backend, place)
    n = 1000
    g = _materialized((n,), "g")
    src_vals, acc = hosted((n,), "sv"), hosted((n,), "acc")
    src_vals.set_values(np.arange(n, dtype=np.float64))
    acc.set_values(np.full(n, 10.0))
    produce = backend.link(
        backend.make_context(s1), backend.compile(ir.unop(g, "identity", src_vals), name="produce")
    )
    produce()
    if mode is MergeMode.No:
        fill = backend.link(
            backend.make_context(s2), backend.compile(ir.fetch(g, ir.Constant(0.0)), name="zero")
        )
        fill()
        assert backend.device_to_device(g, MergeMode.No, fill.context, produce.context)
        code = backend.compile(ir.accum(acc, "add", g, initialize_neutral=False), name="use")
        use = backend.link(fill.context, code)
    else:
        assert backend.device_to_device(g, mode, backend.make_context(s2), produce.context)
        code = backend.compile(
            ir.accum(acc, "add", ir.merge_buffer(g), initialize_neutral=False), name="use"
        )
        use = backend.link(backend.make_context(s2), code)
        assert use.merge_buffer_input == g
    use()
    backend.to_host(use.context, acc)
    np.testing.assert_array_equal(acc.get_values(), np.arange(n, dtype=np.float32) + 10)
    nowhere = Tnode.create((1,), label="nowhere")
    assert not backend.device_to_device(nowhere, mode, use.context, produce.context)


def test_copy_into_own_buffer_overwrites_only_the_destination(backend: Any) -> None:
    s1, s2 = _streams(backend, "other_stream")
    g = _materialized((6,), "g")
    out1, out2 = hosted((6,), "out1"), hosted((6,), "out2")
    a = backend.link(
        backend.make_context(s1), backend.compile(ir.fetch(g, ir.Constant(1.0)), name="a")
    )
    b = backend.link(
        backend.make_context(s2), backend.compile(ir.fetch(g, ir.Constant(2.0)), name="b")
    )
    a()
    b()
    backend.device_to_device(g, MergeMode.No, b.context, a.context)
    ra = backend.link(a.context, backend.compile(ir.unop(out1, "identity", g), name="ra"))
    rb = backend.link(b.context, backend.compile(ir.unop(out2, "identity", g), name="rb"))
    ra()
    rb()
    backend.to_host(ra.context, out1)
    backend.to_host(rb.context, out2)
    assert (out1.get_values() == 1).all() and (out2.get_values() == 1).all()
    b()  # recompute the destination: the source keeps its value
    backend.device_to_device(g, MergeMode.No, a.context, b.context)
    ra()
    backend.to_host(ra.context, out1)
    assert (out1.get_values() == 2).all()


def test_copying_a_shared_node_within_a_device_makes_no_copy(backend: Any) -> None:
    """Seed 003: "if a tensor node is shared cross-stream, within-device copying is a NOOP as
    source and destination pointers are in that case identical". A private node's copy between
    the same two streams is a real one (it counts in ``backend.copies``)."""
    s1, s2 = _streams(backend, "other_stream")
    shared = Tnode.create((6,), label="shared")
    shared.update_memory_mode(mm.On_device(mm.Sharing.Shared_cross_streams), 1)
    private = _materialized((6,), "private")
    out = hosted((6,), "out")
    write = backend.link(
        backend.make_context(s1),
        backend.compile(
            ir.block(ir.fetch(shared, ir.Constant(3.0)), ir.fetch(private, ir.Constant(4.0))),
            name="write",
        ),
    )
    other = backend.link(  # the private node gets its own buffer on s2
        backend.make_context(s2), backend.compile(ir.fetch(private, ir.Constant(0.0)), name="z")
    )
    read = backend.link(
        other.context, backend.compile(ir.binop(out, "add", shared, private), name="read")
    )
    assert write.context.buffers[shared] == read.context.buffers[shared]  # one buffer
    assert write.context.buffers[private] != read.context.buffers[private]
    write()
    other()
    copies = backend.copies
    assert backend.device_to_device(shared, MergeMode.No, read.context, write.context) is True
    assert backend.copies == copies  # no copy: the destination is the source
    assert backend.device_to_device(private, MergeMode.No, read.context, write.context) is True
    assert backend.copies == copies + 1
    read()
    backend.to_host(read.context, out)
    np.testing.assert_array_equal(out.get_values(), np.full(6, 7.0))


def test_merge_buffer_holding_another_node(backend: Any) -> None:
    s1, s2 = _streams(backend, "other_stream")
    g, h = _materialized((3,), "g"), _materialized((3,), "h")
    src, out = hosted((3,), "src"), hosted((3,), "out")
    src.set_values(np.ones(3))
    prod = backend.link(
        backend.make_context(s1),
        backend.compile(ir.block(ir.unop(g, "identity", src), ir.unop(h, "neg", src)), name="prod"),
    )
    prod()
    use = backend.link(
        backend.make_context(s2),
        backend.compile(ir.unop(out, "identity", ir.merge_buffer(g)), name="use_g"),
    )
    with pytest.raises(
        UsageError,
        match=r"routine use_g on .* reads the merge buffer as g#\d+, but it holds nothing",
    ):
        use()
    backend.device_to_device(h, MergeMode.Copy, use.context, prod.context)
    with pytest.raises(UsageError, match=r"reads the merge buffer as g#\d+, but it holds h#\d+"):
        use()
    backend.device_to_device(g, MergeMode.Copy, use.context, prod.context)
    use()
    backend.to_host(use.context, out)
    assert (out.get_values() == 1).all()


def test_merge_buffer_grows_for_larger_nodes(backend: Any) -> None:
    s1, s2 = _streams(backend, "other_stream")
    small, big = _materialized((2,), "small"), _materialized((50,), "big")
    o_small, o_big = hosted((2,), "o_small"), hosted((50,), "o_big")
    prod = backend.link(
        backend.make_context(s1),
        backend.compile(
            ir.block(ir.fetch(small, ir.Constant(1.0)), ir.fetch(big, ir.Constant(2.0))), name="p"
        ),
    )
    prod()
    dev = s2.device
    dst = backend.make_context(s2)
    before = backend.get_used_memory(dev)
    backend.device_to_device(small, MergeMode.Copy, dst, prod.context)
    r1 = backend.link(
        dst, backend.compile(ir.unop(o_small, "neg", ir.merge_buffer(small)), name="r1")
    )
    r1()
    backend.device_to_device(big, MergeMode.Copy, dst, prod.context)
    r2 = backend.link(dst, backend.compile(ir.unop(o_big, "neg", ir.merge_buffer(big)), name="r2"))
    r2()
    backend.to_host(r1.context, o_small)
    backend.to_host(r2.context, o_big)
    assert (o_small.get_values() == -1).all() and (o_big.get_values() == -2).all()
    backend.await_stream(s2)
    assert s2.merge_capacity >= big.size_in_bytes
    grown = backend.get_used_memory(dev) - before
    assert grown >= big.size_in_bytes


@pytest.mark.parametrize("mode", [MergeMode.Streaming, MergeMode.Copy])
@pytest.mark.parametrize("place", PLACES)
def test_merge_outlives_the_source_context(backend: Any, mode: MergeMode, place: str) -> None:
    # The source's routine and context are dropped before the destination reads its merge
    # buffer; on OpenCL a Streaming view then read a released buffer and failed the stream.
    s1, s2 = _streams(backend, place)
    g = _materialized((256,), "g")
    a, out = hosted((256,), "a"), hosted((256,), "out")
    a.set_values(np.arange(256.0))
    src = backend.link(backend.make_context(s1), backend.compile(ir.unop(g, "neg", a), name="mk"))
    src()
    use = backend.link(
        backend.make_context(s2),
        backend.compile(ir.unop(out, "identity", ir.merge_buffer(g)), name="use"),
    )
    assert backend.device_to_device(g, mode, use.context, src.context)
    del src
    gc.collect()
    for i in range(3):  # new buffers of the same size on the source's device
        t, o = hosted((256,), f"t{i}"), _materialized((256,), f"o{i}")
        t.set_values(np.full(256, 99.0))
        r = backend.link(backend.make_context(s1), backend.compile(ir.unop(o, "neg", t), name="j"))
        r()
    use()
    backend.to_host(use.context, out)
    np.testing.assert_array_equal(out.get_values(), -np.arange(256.0))
    # Once nothing views the source's memory (another merge replaced the view), it is freed.
    dev = s1.device
    held = backend.get_used_memory(dev)
    assert backend.device_to_device(o, MergeMode.Copy, use.context, r.context)
    backend.await_stream(s2)
    if mode is MergeMode.Streaming and place != "other_device":
        # the source's pool (a and g: 2 KiB) goes; the merge buffer grows by 1 KiB at most
        assert backend.get_used_memory(dev) <= held - 1024


def test_backend_dropped_with_a_streaming_view_is_collected(backend_name: str) -> None:
    be = fresh_or_skip(backend_name)
    s1, s2 = _streams(be, "other_stream")
    g, out = _materialized((8,), "g"), hosted((8,), "out")
    src = be.link(be.make_context(s1), be.compile(ir.fetch(g, ir.Constant(3.0)), name="mk"))
    src()
    use = be.link(
        be.make_context(s2), be.compile(ir.unop(out, "neg", ir.merge_buffer(g)), name="use")
    )
    be.device_to_device(g, MergeMode.Streaming, use.context, src.context)
    use()
    be.to_host(use.context, out)
    np.testing.assert_array_equal(out.get_values(), np.full(8, -3.0))
    ref = weakref.ref(be)
    del be, s1, s2, src, use
    gc.collect()
    assert ref() is None, "a backend dropped without finalize() must be collected"
