"""Seed features of the backend interface that the other modules do not cover: optional entries
of ``compile_batch``, the host memory types a routine must honour, device-wide
``synchronize``, contexts made from given buffers and buffer reuse, device facts
(``Device.info``), memory accounting as an upper bound, and ``use_host_memory``."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from arrayjit_backends import MemoryModeError, MergeMode, UsageError
from arrayjit_conformance.harness import hosted, new_context
from arrayjit_ir import ir
from arrayjit_tnode import Prec, Tnode
from arrayjit_tnode import memory_mode as mm

# ---- compile_batch with absent entries ----------------------------------------------------------


def test_compile_batch_absent_entries_give_absent_routines(backend: Any) -> None:
    a, h, y = hosted((4,), "a"), Tnode.create((4,), label="h"), hosted((4,), "y")
    a.set_values(np.arange(4.0))
    first, second = ir.unop(h, "neg", a), ir.binop(y, "add", h, a)
    codes = backend.compile_batch([None, first, None, second], [None, "neg", "x", "add"])
    assert codes[0] is None and codes[2] is None
    assert codes[1].name == "neg" and codes[3].name == "add"
    routines = backend.link_batch(new_context(backend), codes)
    assert routines[0] is None and routines[2] is None
    r1, r3 = routines[1], routines[3]
    assert r3.context.parent is r1.context  # absent entries leave the chain as it is
    r1()
    r3()
    backend.to_host(r3.context, y)
    np.testing.assert_array_equal(y.get_values(), np.zeros(4))  # -a + a
    assert backend.compile_batch([None], [None]) == [None]
    assert backend.link_batch(new_context(backend), [None, None]) == [None, None]


def test_compile_batch_entry_without_name_is_refused(backend: Any) -> None:
    a, y = hosted((2,), "a"), hosted((2,), "y")
    with pytest.raises(UsageError, match="entry 1 has a computation but no name"):
        backend.compile_batch([None, ir.unop(y, "neg", a)], ["x", None])


# ---- host memory types -------------------------------------------------------------------------


def test_routine_writing_hosted_constant_is_refused(backend: Any) -> None:
    c = hosted((3,), "c", memory_mode=(mm.Hosted(mm.Constant()), 7))
    a = hosted((3,), "a")
    with pytest.raises(MemoryModeError, match=r"routine bad writes node c#\d+.*Constant"):
        backend.compile(ir.unop(c, "neg", a), name="bad")
    with pytest.raises(MemoryModeError, match=r"routine bad2 writes node c#\d+"):
        backend.compile_batch([ir.unop(a, "neg", a), ir.unop(c, "neg", a)], ["ok", "bad2"])
    # Reading a constant is what constants are for; it stays Hosted(Constant).
    c.set_values(np.array([1.0, 2.0, 3.0]))
    r = backend.link(new_context(backend), backend.compile(ir.unop(a, "neg", c), name="read"))
    r()
    backend.to_host(r.context, a)
    np.testing.assert_array_equal(a.get_values(), [-1.0, -2.0, -3.0])
    assert c.memory_mode == mm.Hosted(mm.Constant())


def test_routine_writing_volatile_is_refused(backend: Any) -> None:
    v = hosted((3,), "v", memory_mode=(mm.Hosted(mm.Volatile()), 8))
    a = hosted((3,), "a")
    with pytest.raises(MemoryModeError, match=r"routine upd writes node v#\d+.*Volatile"):
        backend.compile(ir.unop(v, "neg", a), name="upd")


def test_task_writing_hosted_constant_is_refused(backend: Any) -> None:
    c = hosted((3,), "c", memory_mode=(mm.Hosted(mm.Constant()), 7))
    a = hosted((3,), "a")
    c.set_values(np.array([1.0, 2.0, 3.0]))
    r = backend.link(new_context(backend), backend.compile(ir.unop(a, "neg", c), name="read"))
    ran: list[str] = []
    with pytest.raises(
        UsageError,
        match=r"schedule_task: the task writes node c#\d+, whose memory mode Hosted\(Constant\) "
        r"\(provenance 7\) says it never changes after initialization",
    ):
        backend.schedule_task(r.context, lambda: ran.append("write"), writes=[c])
    assert ran == []  # refused before anything was scheduled
    backend.sync(backend.schedule_task(r.context, lambda: ran.append("read"), reads=[c]))
    assert ran == ["read"]  # reading a constant is what it is for
    r()
    backend.to_host(r.context, a)
    np.testing.assert_array_equal(a.get_values(), [-1.0, -2.0, -3.0])


def test_constant_already_on_a_device_refuses_host_writes(backend: Any) -> None:
    c = hosted((3,), "c", memory_mode=(mm.Hosted(mm.Constant()), 7))
    a = hosted((3,), "a")
    c.set_values(np.array([1.0, 2.0, 3.0]))
    c.set_value((2,), 4.0)  # no device holds it yet: this is how a constant gets its values
    r = backend.link(new_context(backend), backend.compile(ir.unop(a, "neg", c), name="read"))
    r()
    on_device = r"node c#\d+ is a constant already on a device \(memory mode Hosted\(Constant\)"
    with pytest.raises(UsageError, match=rf"^set_values: {on_device}"):
        c.set_values(np.array([9.0, 9.0, 9.0]))
    with pytest.raises(UsageError, match=rf"^set_value: {on_device}"):
        c.set_value((0,), 9.0)
    r()  # the device's constant is the one it got, and so is the host's
    backend.to_host(r.context, a)
    np.testing.assert_array_equal(a.get_values(), [-1.0, -2.0, -4.0])
    np.testing.assert_array_equal(c.get_values(), [1.0, 2.0, 4.0])


def test_written_hosted_node_becomes_changed_on_devices(backend: Any) -> None:
    a, y = hosted((3,), "a"), hosted((3,), "y")
    backend.compile(ir.unop(y, "neg", a), name="neg")
    assert y.memory_mode == mm.Hosted(mm.Changed_on_devices())
    assert a.memory_mode == mm.Hosted()  # only read: still undecided
    y2 = hosted((3,), "y2", memory_mode=(mm.Hosted(mm.Nonconstant()), 9))
    y2.update_memory_sharing(mm.Sharing.Per_stream, 9)
    backend.compile(ir.unop(y2, "neg", a), name="neg2")
    assert y2.memory_mode == mm.Hosted(mm.Changed_on_devices(mm.Sharing.Per_stream))


# ---- device-wide synchronize -------------------------------------------------------------------


def test_synchronize_waits_for_every_stream_of_the_device(backend: Any) -> None:
    dev = backend.get_device(0)
    n = 1 << 12
    outs = []
    for k in range(3):
        stream = backend.new_stream(dev)
        a, y = hosted((n,), f"a{k}"), hosted((n,), f"y{k}")
        a.set_values(np.full(n, float(k)))
        r = backend.link(backend.make_context(stream), backend.compile(ir.unop(y, "neg", a)))
        stream.hold(0.05)
        r()
        backend.to_host(r.context, y)
        outs.append((stream, y, k))
    backend.synchronize(dev)
    for stream, y, k in outs:
        assert backend.is_idle(stream)
        np.testing.assert_array_equal(y.get_values(), np.full(n, -float(k)))
    with pytest.raises(UsageError, match="expected a Device"):
        backend.synchronize("device 0")


# ---- device facts (seed 004's Device_info) -----------------------------------------------------


def test_device_info_names_the_limits(backend: Any) -> None:
    for k in range(backend.num_devices()):
        info = backend.get_device(k).info
        assert backend.get_device(k).info is info  # asked of the driver once
        assert info.ordinal == k and isinstance(info.name, str) and info.name
        assert info.kind in ("cpu", "gpu", "accelerator", "unknown")
        assert info.supported_precs >= backend.capabilities.supported_precs
        assert info.supports_dtype(Prec.single)
        assert all(info.supports_dtype(p) == (p in info.supported_precs) for p in Prec)
        assert info.compute_units >= 1 and info.global_memory > 0
        assert info.max_workgroup_total >= 1 and info.max_shared_memory >= 0
        assert len(info.max_workgroup_size) >= 1 and min(info.max_workgroup_size) >= 1
        if backend.capabilities.unified_memory:  # CPU backends: one work item, no group memory
            assert info.kind == "cpu" and info.unified_memory
            assert info.max_shared_memory == 0 and info.max_workgroup_total == 1
            assert info.float4_type is None and info.barrier == ""
        else:  # device backends render work-group code
            assert info.max_shared_memory > 0 and info.max_workgroup_total > 1
            assert info.float4_type == "float4" and info.barrier and info.smem_prefix


# ---- contexts from given buffers, buffer reuse -------------------------------------------------


def test_alloc_buffer_reuse_and_accounting(backend: Any) -> None:
    dev = backend.get_device(0)
    stream = backend.new_stream(dev)
    before = backend.get_used_memory(dev)
    b = backend.alloc_buffer(256, stream)
    assert b.size_in_bytes == 256 and b.device is dev
    assert backend.get_used_memory(dev) >= before + 256
    assert backend.alloc_buffer(100, stream, old_buffer=b) is b  # large enough: reused
    bigger = backend.alloc_buffer(1024, stream, old_buffer=b)
    assert bigger is not b and bigger.size_in_bytes == 1024
    z = backend.alloc_zero_init_array(Prec.double, (3, 4), stream)
    assert z.size_in_bytes == 96
    for bad in (-1, 2.5, "8"):
        with pytest.raises(UsageError, match="alloc_buffer: size_in_bytes"):
            backend.alloc_buffer(bad, stream)
    with pytest.raises(UsageError, match="old_buffer must be a Buffer"):
        backend.alloc_buffer(8, stream, old_buffer=object())


def test_context_from_given_buffers(backend: Any) -> None:
    n = 64
    dev = backend.get_device(0)
    s1, s2 = backend.new_stream(dev), backend.new_stream(dev)
    y = hosted((n,), "y")
    # y's buffer is given, larger than needed; a fresh buffer is zero-filled.
    buf = backend.alloc_buffer(8 * n, s1)
    ctx1 = backend.make_context(s1, ctx_arrays={y: buf})
    assert list(ctx1.buffers) == [y] and ctx1.parent is None
    probe = hosted((n,), "probe")
    r0 = backend.link(ctx1, backend.compile(ir.unop(probe, "identity", y), name="probe"))
    r0()
    backend.to_host(r0.context, probe)
    np.testing.assert_array_equal(probe.get_values(), np.zeros(n))
    a, h = hosted((n,), "a"), Tnode.create((n,), label="h")
    a.set_values(np.arange(n, dtype=np.float64))
    h.update_memory_mode(mm.On_device(), 1)
    w = backend.link(ctx1, backend.compile(ir.unop(h, "neg", a), name="w"))
    # A context on another stream reading w's buffer of h: ordered after w's write.
    ctx2 = backend.make_context(s2, ctx_arrays={h: w.context.ctx_arrays[h]})
    r = backend.link(ctx2, backend.compile(ir.binop(y, "mul", h, h), name="sq"))
    s1.hold(0.05)
    w()
    r()
    backend.to_host(r.context, y)
    np.testing.assert_array_equal(y.get_values(), np.arange(n, dtype=np.float64) ** 2)


def test_make_child_with_given_buffers_replaces_them(backend: Any) -> None:
    stream = backend.new_stream(backend.get_device(0))
    a, y = hosted((4,), "a"), hosted((4,), "y")
    a.set_values(np.arange(4.0))
    r = backend.link(backend.make_context(stream), backend.compile(ir.unop(y, "neg", a)))
    parent = r.context
    assert backend.make_child(parent).buffers == parent.buffers
    child = backend.make_child(parent, ctx_arrays={y: parent.ctx_arrays[y]})
    assert child.parent is parent and list(child.buffers) == [y]
    assert child.buffers[y] == parent.buffers[y]


def test_given_buffers_are_checked(backend: Any) -> None:
    stream = backend.new_stream(backend.get_device(0))
    y = hosted((16,), "y", "double")
    small = backend.alloc_buffer(64, stream)
    with pytest.raises(UsageError, match=r"make_context: node y#\d+ needs 128 bytes, its buffer"):
        backend.make_context(stream, ctx_arrays={y: small})
    with pytest.raises(UsageError, match="must map Tnodes to Buffers"):
        backend.make_context(stream, ctx_arrays={y: 0})
    with pytest.raises(UsageError, match="must map nodes to Buffers"):
        backend.make_child(backend.make_context(stream), ctx_arrays=[y])
    # A byte node's buffer at an odd offset cannot hold a double node.
    b1, b2 = hosted((17,), "b1", "byte"), hosted((17,), "b2", "byte")
    r = backend.link(
        backend.make_context(stream), backend.compile(ir.unop(b2, "identity", b1), name="bb")
    )
    odd = [buf for buf in r.context.ctx_arrays.values() if buf.loc.offset % 8]
    assert odd  # two 17-byte buffers packed in one pool: the second starts at an odd offset
    one = Tnode.create((2,), prec="double", label="one", hosted=True)
    with pytest.raises(UsageError, match="not a multiple of its element size 8"):
        backend.make_context(stream, ctx_arrays={one: odd[0]})
    other = fresh_or_skip_same(backend)
    if other is not None:
        try:
            foreign = other.alloc_buffer(128, other.new_stream(other.get_device(0)))
            with pytest.raises(UsageError, match="not on the stream's device"):
                backend.make_context(stream, ctx_arrays={y: foreign})
        finally:
            other.finalize()


def fresh_or_skip_same(backend: Any) -> Any:
    """Another instance of the same backend (its devices are other devices), or None."""
    from arrayjit_backends import fresh_backend

    other = fresh_backend(backend.name)
    return None if other.num_devices() == 0 else other


# ---- use_host_memory ---------------------------------------------------------------------------


def require_host_memory(backend: Any) -> None:
    """Skip unless the backend computes on host arrays directly; check that it says so."""
    if not backend.capabilities.use_host_memory:
        with pytest.raises(UsageError, match="cannot compute on host arrays directly"):
            backend.use_host_memory(hosted((1,), "h"))
        pytest.skip(f"backend {backend.name} has no use_host_memory (not unified memory)")


def test_use_host_memory_copies_nothing(backend: Any) -> None:
    require_host_memory(backend)
    n = 32
    a, y = hosted((n,), "a"), hosted((n,), "y")
    backend.use_host_memory(a)
    backend.use_host_memory(y)
    a.set_values(np.arange(n, dtype=np.float64))
    copies = backend.copies
    r = backend.link(new_context(backend), backend.compile(ir.unop(y, "neg", a), name="neg"))
    r()
    np.testing.assert_array_equal(y.get_values(), -np.arange(n))  # no to_host needed
    assert backend.to_host(r.context, y) and backend.from_host(r.context, a)
    a.set_values(np.ones(n))  # no from_host needed either
    r()
    np.testing.assert_array_equal(y.get_values(), -np.ones(n))
    assert backend.copies == copies
    assert backend.get_used_memory(r.context.device) < 2 * 4 * n  # the host arrays are not counted


def test_use_host_memory_keeps_host_access_ordered(backend: Any) -> None:
    require_host_memory(backend)
    n = 1 << 12
    a, y = hosted((n,), "a"), hosted((n,), "y")
    backend.use_host_memory(a)
    backend.use_host_memory(y)
    a.set_values(np.full(n, 2.0))
    ctx = new_context(backend)
    r = backend.link(ctx, backend.compile(ir.unop(y, "neg", a), name="neg"))
    ctx.stream.hold(0.1)
    r()
    a.set_values(np.full(n, 5.0))  # waits until the routine has read a
    np.testing.assert_array_equal(y.get_values(), np.full(n, -2.0))  # waits for the write
    # Another stream reading y is ordered after the writer, as for any buffer.
    z = hosted((n,), "z")
    ctx2 = new_context(backend)
    rz = backend.link(ctx2, backend.compile(ir.binop(z, "add", y, a), name="add"))
    ctx.stream.hold(0.1)
    r()
    rz()
    backend.to_host(rz.context, z)
    np.testing.assert_array_equal(z.get_values(), np.zeros(n))  # -5 + 5


def test_use_host_memory_is_declared_before_linking(backend: Any) -> None:
    require_host_memory(backend)
    a, y = hosted((4,), "a"), hosted((4,), "y")
    backend.link(new_context(backend), backend.compile(ir.unop(y, "neg", a), name="neg"))
    with pytest.raises(UsageError, match=r"node a#\d+ already has a buffer on backend"):
        backend.use_host_memory(a)
    with pytest.raises(UsageError, match=r"node d#\d+ is not hosted"):
        backend.use_host_memory(Tnode.create((4,), label="d"))
    p = hosted((4,), "p")
    p.update_memory_sharing(mm.Sharing.Per_stream, 3)
    with pytest.raises(UsageError, match="Per_stream"):
        backend.use_host_memory(p)


def test_use_host_memory_with_device_to_device(backend: Any) -> None:
    require_host_memory(backend)
    n = 16
    a, y = hosted((n,), "a"), hosted((n,), "y")
    backend.use_host_memory(y)
    a.set_values(np.arange(n, dtype=np.float64))
    r1 = backend.link(new_context(backend), backend.compile(ir.unop(y, "neg", a), name="n1"))
    r2 = backend.link(new_context(backend), backend.compile(ir.unop(y, "exp", a), name="n2"))
    r1()
    # Both contexts hold the one host array: a copy between them is a no-op, and y is r1's.
    assert backend.device_to_device(y, MergeMode.No, r2.context, r1.context)
    np.testing.assert_array_equal(y.get_values(), -np.arange(n))


# ---- get_used_memory: an upper bound ------------------------------------------------------------


def test_used_memory_counts_every_buffer_and_kernel_scratch(backend: Any) -> None:
    import gc

    n = 1 << 14
    dev = backend.get_device(0)
    x, s = hosted((n,), "x"), hosted((), "s")
    x.set_values(np.ones(n))
    code = backend.compile(ir.accum(s, "add", x, op="identity", spec="i->"), name="total")
    gc.collect()
    before = backend.get_used_memory(dev)
    r = backend.link(new_context(backend), code)
    r()
    backend.to_host(r.context, s)
    assert s.get_values() == n
    # Device programs keep reduction partials in scratch memory outside the contexts.
    rendered = getattr(code.native, "rendered", None)
    scratch = sum(nbytes for _, nbytes in rendered.scratch) if rendered is not None else 0
    assert scratch > 0 or rendered is None
    used = backend.get_used_memory(dev)
    assert used - before >= x.size_in_bytes + s.size_in_bytes + scratch
    del r
    gc.collect()
    assert backend.get_used_memory(dev) <= before
