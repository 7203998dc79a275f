"""Hosted nodes and merge buffers stay in program order across streams (issue 21, section 1).

Each test forces the schedule in which a wrong answer would show: ``Stream.hold`` delays one
stream's next task without blocking the caller (a no-op on ``sync_`` backends, whose tasks run
at once), so another stream overtakes it. The expected values are the program-order meaning
of the calls, computed by hand:

- ``from_host(ctx, tn)`` leaves ``ctx``'s buffer of ``tn`` holding the host array's value,
  unless that buffer computed the node's latest value itself (freshness is per buffer: every
  stream's context has its own buffer of a hosted node);
- transfers into one host array land in the order they were requested, and ``get_values()``
  waits for every one still pending;
- a ``Streaming`` merge means what ``Copy`` means: the merge buffer holds the value the source
  had when ``device_to_device`` was called, whatever the source computes afterwards.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from arrayjit_backends import MergeMode
from arrayjit_conformance.harness import hosted
from arrayjit_ir import ir
from arrayjit_tnode import Tnode
from arrayjit_tnode import memory_mode as mm

HOLD = 0.3
"""Seconds a lagging stream is held back: long enough for the other streams to overtake it."""

N = 64


def _streams(backend: Any, count: int) -> list[Any]:
    dev = backend.get_device(0)
    return [backend.new_stream(dev) for _ in range(count)]


def _full(v: float) -> np.ndarray:
    return np.full(N, v, dtype=np.float32)


def _copy_of(backend: Any, ctx: Any, src: Tnode, name: str) -> tuple[Any, Tnode]:
    """A routine on ``ctx`` copying ``src`` into a new hosted node, and that node."""
    out = hosted((N,), f"{name}_out")
    return backend.link(ctx, backend.compile(ir.unop(out, "identity", src), name=name)), out


def _fill(backend: Any, stream: Any, tn: Tnode, v: float, name: str) -> Any:
    """A routine on a new context of ``stream`` setting every element of ``tn`` to ``v``."""
    code = backend.compile(ir.fetch(tn, ir.Constant(v)), name=name)
    return backend.link(backend.make_context(stream), code)


def _read(backend: Any, routine: Any, out: Tnode) -> np.ndarray:
    routine()
    assert backend.to_host(routine.context, out)
    return out.get_values()


# ---- 1. stale data after from_host on a second stream ----


def test_from_host_on_a_second_stream_copies_the_new_value(backend: Any) -> None:
    """The issue's case: after ``set_values(9)``, ``from_host`` on stream 1 copies, and
    ``from_host`` on stream 2 must copy too (its context has its own buffer of ``a``)."""
    s1, s2 = _streams(backend, 2)
    a = hosted((N,), "a")
    r1, y1 = _copy_of(backend, backend.make_context(s1), a, "r1")
    r2, y2 = _copy_of(backend, backend.make_context(s2), a, "r2")
    assert r1.context.buffers[a] != r2.context.buffers[a]  # one buffer per stream
    a.set_values(_full(9.0))
    copies = backend.copies
    assert backend.from_host(r1.context, a)
    assert backend.from_host(r2.context, a)
    assert backend.copies == copies + 2
    assert backend.from_host(r2.context, a)  # now up to date: no third copy
    assert backend.copies == copies + 2
    np.testing.assert_array_equal(_read(backend, r2, y2), _full(9.0))
    np.testing.assert_array_equal(_read(backend, r1, y1), _full(9.0))


def test_from_host_on_three_streams_and_two_nodes(backend: Any) -> None:
    streams = _streams(backend, 3)
    a, b = hosted((N,), "a"), hosted((N,), "b")
    outs = [hosted((N,), f"y{k}") for k in range(3)]
    routines = [
        backend.link(
            backend.make_context(s), backend.compile(ir.binop(y, "sub", a, b), name=f"diff{k}")
        )
        for k, (s, y) in enumerate(zip(streams, outs))
    ]
    a.set_values(_full(9.0))
    b.set_values(_full(2.0))
    for r in routines[:2]:  # the third context never asks: its run uploads them itself
        assert backend.from_host(r.context, a) and backend.from_host(r.context, b)
    streams[0].hold(HOLD)
    for r, y in zip(routines, outs):
        np.testing.assert_array_equal(_read(backend, r, y), _full(7.0))


def test_repeated_set_values_reach_every_stream(backend: Any) -> None:
    s1, s2 = _streams(backend, 2)
    a = hosted((N,), "a")
    r1, y1 = _copy_of(backend, backend.make_context(s1), a, "r1")
    r2, y2 = _copy_of(backend, backend.make_context(s2), a, "r2")
    for k in range(1, 5):
        a.set_values(_full(float(k)))
        order = [(r1, y1), (r2, y2)] if k % 2 else [(r2, y2), (r1, y1)]
        for r, _ in order:
            assert backend.from_host(r.context, a)
        s1.hold(HOLD / 4)
        for r, y in order:
            np.testing.assert_array_equal(_read(backend, r, y), _full(float(k)))


def test_value_computed_on_one_stream_reaches_another_through_the_host(backend: Any) -> None:
    """A routine writing ``a`` on stream 1 makes the host array and stream 2's buffer of ``a``
    stale: after ``to_host`` on stream 1, ``from_host`` on stream 2 must copy."""
    s1, s2 = _streams(backend, 2)
    a = hosted((N,), "a")
    a.set_values(_full(9.0))
    ctx1 = backend.make_context(s1)
    bump = backend.link(ctx1, backend.compile(ir.binop(a, "add", a, a), name="bump"))
    r2, y2 = _copy_of(backend, backend.make_context(s2), a, "r2")
    s1.hold(HOLD)
    bump()  # a = 18 in stream 1's buffer only
    assert backend.from_host(bump.context, a)  # not lagging the host: nothing to copy
    assert backend.to_host(bump.context, a)
    np.testing.assert_array_equal(a.get_values(), _full(18.0))
    assert backend.from_host(r2.context, a)
    np.testing.assert_array_equal(_read(backend, r2, y2), _full(18.0))


def test_device_to_device_passes_freshness_along(backend: Any) -> None:
    """``device_to_device(No)`` of a hosted node: the destination buffer holds the latest value
    exactly when the source did (then ``from_host`` leaves it alone, as it leaves the source);
    a copy from a stale buffer leaves the destination stale (``from_host`` refreshes it)."""
    s1, s2 = _streams(backend, 2)
    a = hosted((N,), "a")
    a.set_values(_full(9.0))
    bump = backend.link(
        backend.make_context(s1), backend.compile(ir.binop(a, "add", a, a), name="bump")
    )
    r2, y2 = _copy_of(backend, backend.make_context(s2), a, "r2")
    s1.hold(HOLD)
    bump()  # stream 1's buffer: 18, the node's latest value
    assert backend.device_to_device(a, MergeMode.No, r2.context, bump.context)
    assert backend.from_host(r2.context, a)
    np.testing.assert_array_equal(_read(backend, r2, y2), _full(18.0))
    a.set_values(_full(3.0))  # the host is newest: both buffers are stale
    assert backend.device_to_device(a, MergeMode.No, r2.context, bump.context)
    np.testing.assert_array_equal(_read(backend, r2, y2), _full(18.0))
    assert backend.from_host(r2.context, a)
    np.testing.assert_array_equal(_read(backend, r2, y2), _full(3.0))


# ---- 2. a host array overwritten by an older transfer ----


def test_later_to_host_is_not_overwritten_by_an_earlier_one(backend: Any) -> None:
    """The issue's case: stream A (held back) and stream B each write ``y`` and ``to_host`` it;
    the host array ends with B's value, requested last."""
    sa, sb = _streams(backend, 2)
    y = hosted((N,), "y")
    wa = _fill(backend, sa, y, 1.0, "wa")
    wb = _fill(backend, sb, y, 2.0, "wb")
    sa.hold(HOLD)
    wa()
    assert backend.to_host(wa.context, y)
    wb()
    assert backend.to_host(wb.context, y)
    np.testing.assert_array_equal(y.get_values(), _full(2.0))
    backend.await_stream(sa)
    backend.await_stream(sb)
    np.testing.assert_array_equal(y.get_values(), _full(2.0))


def test_three_streams_to_host_in_request_order(backend: Any) -> None:
    streams = _streams(backend, 3)
    y = hosted((N,), "y")
    writers = [
        backend.link(
            backend.make_context(s), backend.compile(ir.fetch(y, ir.Constant(float(k))), f"w{k}")
        )
        for k, s in enumerate(streams)
    ]
    streams[0].hold(HOLD)
    streams[1].hold(HOLD / 2)
    for w in writers:
        w()
        assert backend.to_host(w.context, y)
    np.testing.assert_array_equal(y.get_values(), _full(2.0))
    for s in streams:
        backend.await_stream(s)
    np.testing.assert_array_equal(y.get_values(), _full(2.0))


def test_two_nodes_each_keep_their_last_transfer(backend: Any) -> None:
    sa, sb = _streams(backend, 2)
    y, z = hosted((N,), "y"), hosted((N,), "z")

    def writer(stream: Any, v: float, name: str) -> Any:
        comp = ir.block(ir.fetch(y, ir.Constant(v)), ir.fetch(z, ir.Constant(-v)))
        return backend.link(backend.make_context(stream), backend.compile(comp, name=name))

    wa, wb = writer(sa, 1.0, "wa"), writer(sb, 2.0, "wb")
    sa.hold(HOLD)
    wa()
    wb()
    backend.to_host(wa.context, y)  # y: A then B; z: B then A
    backend.to_host(wb.context, z)
    backend.to_host(wb.context, y)
    backend.to_host(wa.context, z)
    np.testing.assert_array_equal(y.get_values(), _full(2.0))
    np.testing.assert_array_equal(z.get_values(), _full(-1.0))
    backend.await_stream(sa)
    backend.await_stream(sb)
    np.testing.assert_array_equal(y.get_values(), _full(2.0))
    np.testing.assert_array_equal(z.get_values(), _full(-1.0))


def test_set_values_after_a_pending_to_host_wins(backend: Any) -> None:
    (sa,) = _streams(backend, 1)
    y = hosted((N,), "y")
    wa = _fill(backend, sa, y, 1.0, "wa")
    sa.hold(HOLD)
    wa()
    assert backend.to_host(wa.context, y)
    y.set_values(_full(7.0))
    backend.await_stream(sa)
    np.testing.assert_array_equal(y.get_values(), _full(7.0))


def test_upload_on_another_stream_sees_a_pending_to_host(backend: Any) -> None:
    """``to_host`` on a held stream, then ``from_host`` of the same node on another stream:
    the upload reads the host array after the download landed."""
    sa, sb = _streams(backend, 2)
    y = hosted((N,), "y")
    wa = _fill(backend, sa, y, 1.0, "wa")
    rb, out = _copy_of(backend, backend.make_context(sb), y, "rb")
    sa.hold(HOLD)
    wa()
    assert backend.to_host(wa.context, y)
    assert backend.from_host(rb.context, y)
    np.testing.assert_array_equal(_read(backend, rb, out), _full(1.0))


def test_download_on_another_stream_waits_for_a_pending_upload(backend: Any) -> None:
    """``from_host`` on a held stream reads the host array; a ``to_host`` on another stream
    requested after it must not change what the upload reads."""
    sa, sb = _streams(backend, 2)
    y = hosted((N,), "y")
    ra, out = _copy_of(backend, backend.make_context(sa), y, "ra")
    wb = _fill(backend, sb, y, 2.0, "wb")
    y.set_values(_full(5.0))
    sa.hold(HOLD)
    assert backend.from_host(ra.context, y)
    ra()
    wb()
    assert backend.to_host(wb.context, y)
    np.testing.assert_array_equal(y.get_values(), _full(2.0))
    assert backend.to_host(ra.context, out)
    np.testing.assert_array_equal(out.get_values(), _full(5.0))


def test_set_values_waits_for_every_pending_upload(backend: Any) -> None:
    sa, sb = _streams(backend, 2)
    a = hosted((N,), "a")
    ra, ya = _copy_of(backend, backend.make_context(sa), a, "ra")
    rb, yb = _copy_of(backend, backend.make_context(sb), a, "rb")
    a.set_values(_full(3.0))
    sa.hold(HOLD)
    assert backend.from_host(ra.context, a)  # held back: still reading the host array
    assert backend.from_host(rb.context, a)
    ra()  # both runs are queued after their uploads, before the next host write
    rb()
    a.set_values(_full(4.0))
    for r, y in ((ra, ya), (rb, yb)):
        assert backend.to_host(r.context, y)
        np.testing.assert_array_equal(y.get_values(), _full(3.0))


# ---- 3. a Streaming merge ordered before the source's next write ----


def _merge_setup(backend: Any, streams: list[Any]) -> tuple[Any, Any, Tnode]:
    """Producer routines on ``streams[0]`` setting ``g`` to 1 then to 5 (one buffer)."""
    g = Tnode.create((N,), label="g", memory_mode=(mm.Materialized(), 1))
    p1 = backend.link(
        backend.make_context(streams[0]), backend.compile(ir.fetch(g, ir.Constant(1.0)), "p1")
    )
    p5 = backend.link(p1.context, backend.compile(ir.fetch(g, ir.Constant(5.0)), "p5"))
    return p1, p5, g


def _consumer(backend: Any, stream: Any, g: Tnode, name: str) -> tuple[Any, Tnode]:
    out = hosted((N,), f"{name}_out")
    code = backend.compile(ir.unop(out, "identity", ir.merge_buffer(g)), name=name)
    return backend.link(backend.make_context(stream), code), out


def _sent_to_held_consumer(backend: Any, mode: MergeMode) -> tuple[Any, Any, Any, Tnode]:
    """``p1`` runs on one stream and its 1.0 is sent (``mode``) to ``use`` on another stream,
    which is then held back. Returns ``p1``, ``p5`` (writes 5.0 to the source), ``use`` and its
    hosted output."""
    src, dst = _streams(backend, 2)
    p1, p5, g = _merge_setup(backend, [src])
    use, out = _consumer(backend, dst, g, "use")
    p1()
    assert backend.device_to_device(g, mode, use.context, p1.context)
    dst.hold(HOLD)
    return p1, p5, use, out


@pytest.mark.parametrize("mode", [MergeMode.Streaming, MergeMode.Copy], ids=lambda m: m.value)
def test_merge_read_is_ordered_before_the_sources_next_write(backend: Any, mode: MergeMode) -> None:
    """The issue's case: the consumer (held back) must read the 1.0 that was sent, although the
    source writes 5.0 right after the consumer was scheduled."""
    _, p5, use, out = _sent_to_held_consumer(backend, mode)
    use()
    p5()
    assert backend.to_host(use.context, out)
    np.testing.assert_array_equal(out.get_values(), _full(1.0))


@pytest.mark.parametrize("mode", [MergeMode.Streaming, MergeMode.Copy], ids=lambda m: m.value)
def test_merge_sends_the_value_at_the_time_of_the_call(backend: Any, mode: MergeMode) -> None:
    """The source writes again between ``device_to_device`` and the consumer: the merge buffer
    still holds what was sent, in both modes (and on every later run of the consumer)."""
    p1, p5, use, out = _sent_to_held_consumer(backend, mode)
    p5()
    np.testing.assert_array_equal(_read(backend, use, out), _full(1.0))
    p1()
    np.testing.assert_array_equal(_read(backend, use, out), _full(1.0))


def test_streaming_merge_to_two_consumers_on_three_streams(backend: Any) -> None:
    src, d1, d2 = _streams(backend, 3)
    p1, p5, g = _merge_setup(backend, [src])
    u1, o1 = _consumer(backend, d1, g, "u1")
    u2, o2 = _consumer(backend, d2, g, "u2")
    p1()
    backend.device_to_device(g, MergeMode.Streaming, u1.context, p1.context)
    backend.device_to_device(g, MergeMode.Streaming, u2.context, p1.context)
    d1.hold(HOLD)
    d2.hold(HOLD / 2)
    u1()
    u2()
    p5()
    backend.to_host(u1.context, o1)
    backend.to_host(u2.context, o2)
    np.testing.assert_array_equal(o1.get_values(), _full(1.0))
    np.testing.assert_array_equal(o2.get_values(), _full(1.0))
    backend.device_to_device(g, MergeMode.Streaming, u1.context, p5.context)
    d1.hold(HOLD)
    u1()
    p1()
    backend.to_host(u1.context, o1)
    np.testing.assert_array_equal(o1.get_values(), _full(5.0))


def test_streaming_merge_of_a_hosted_source_refreshed_from_the_host(backend: Any) -> None:
    """The source buffer is overwritten by ``from_host`` (a write like any other) while the
    destination's merge buffer still views it."""
    src, dst = _streams(backend, 2)
    h = hosted((N,), "h")
    h.set_values(_full(1.0))
    keep = backend.link(
        backend.make_context(src), backend.compile(ir.binop(h, "mul", h, h), name="keep")
    )
    use, out = _consumer(backend, dst, h, "use")
    keep()  # 1 * 1: the source holds 1
    assert backend.device_to_device(h, MergeMode.Streaming, use.context, keep.context)
    dst.hold(HOLD)
    h.set_values(_full(6.0))
    assert backend.from_host(keep.context, h)
    np.testing.assert_array_equal(_read(backend, use, out), _full(1.0))


def test_streaming_merge_on_the_source_stream(backend: Any) -> None:
    """Source and destination share one stream: program order alone decides."""
    (s,) = _streams(backend, 1)
    p1, p5, g = _merge_setup(backend, [s])
    use, out = _consumer(backend, s, g, "use")
    p1()
    backend.device_to_device(g, MergeMode.Streaming, use.context, p1.context)
    p5()
    np.testing.assert_array_equal(_read(backend, use, out), _full(1.0))


def test_a_buffer_given_to_another_node_is_ordered_across_streams(backend: Any) -> None:
    # ctx_arrays may give one context's buffer of g to another context as the buffer of g2:
    # both name one memory, so a write of g on one stream and a read or write of g2 on another
    # are ordered (the hazard table once went by node and buffer, and the reader overtook).
    s1, s2 = _streams(backend, 2)
    a = hosted((N,), "a")
    g = Tnode.create((N,), label="g", memory_mode=(mm.Materialized(), 1))
    g2 = Tnode.create((N,), label="g2", memory_mode=(mm.Materialized(), 1))
    out = hosted((N,), "out")
    a.set_values(np.arange(N, dtype=np.float32))
    write_g = backend.link(
        backend.make_context(s1), backend.compile(ir.unop(g, "neg", a), name="w")
    )
    write_g()
    ctx2 = backend.make_context(s2, ctx_arrays={g2: write_g.context.ctx_arrays[g]})
    read_g2 = backend.link(ctx2, backend.compile(ir.unop(out, "identity", g2), name="r"))
    read_g2()
    backend.to_host(read_g2.context, out)
    np.testing.assert_array_equal(out.get_values(), -np.arange(N))
    a.set_values(np.full(N, 7.0, dtype=np.float32))
    backend.from_host(write_g.context, a)
    s1.hold(HOLD)
    write_g()  # g = -7, late
    read_g2()  # must wait for it
    backend.to_host(read_g2.context, out)
    np.testing.assert_array_equal(out.get_values(), np.full(N, -7.0))
    # and the other way: a write of g2 on s2 waits for a lagging read of g on s1
    fill_g2 = backend.link(ctx2, backend.compile(ir.fetch(g2, ir.Constant(5.0)), name="f"))
    read_g = backend.link(write_g.context, backend.compile(ir.unop(out, "identity", g), name="rg"))
    s1.hold(HOLD)
    read_g()  # reads -7, late
    fill_g2()
    backend.to_host(read_g.context, out)
    np.testing.assert_array_equal(out.get_values(), np.full(N, -7.0))
    read_g()
    backend.to_host(read_g.context, out)
    np.testing.assert_array_equal(out.get_values(), np.full(N, 5.0))
