"""Ordering within a stream, events, cross-stream reads, many streams at once, and the
data-parallel gradient-merge scenario."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from arrayjit_backends import MergeMode
from arrayjit_conformance.harness import hosted, new_context, on_interpreter
from arrayjit_ir import ir
from arrayjit_tnode import Tnode
from arrayjit_tnode import memory_mode as mm

RNG = np.random.default_rng(11)


def test_routines_on_one_stream_run_in_order(backend: Any) -> None:
    n = 1 << 14
    x = Tnode.create((n,), label="x", memory_mode=(mm.Materialized(), 1))
    y = hosted((n,), "y")
    ctx = new_context(backend)
    init = backend.link(ctx, backend.compile(ir.fetch(x, ir.Constant(1.0)), name="init"))
    double = backend.link(init.context, backend.compile(ir.binop(x, "add", x, x), name="double"))
    read = backend.link(double.context, backend.compile(ir.unop(y, "identity", x), name="read"))
    init()
    for _ in range(10):
        double()
    read()
    backend.to_host(read.context, y)
    assert (y.get_values() == 1024).all()


def test_events(backend: Any) -> None:
    dev = backend.get_device(0)
    s1, s2 = backend.new_stream(dev), backend.new_stream(dev)
    x = Tnode.create((64,), label="x", memory_mode=(mm.Materialized(), 1))
    r = backend.link(
        backend.make_context(s1), backend.compile(ir.fetch(x, ir.Constant(2.0)), name="w")
    )
    r()
    e = backend.all_work(s1)
    backend.will_wait_for(backend.make_context(s2), e)
    e2 = backend.all_work(s2)
    backend.sync(e2)
    assert backend.is_done(e) and backend.is_done(e2)
    backend.await_stream(s1)
    assert backend.is_idle(s1)


def test_cross_stream_read_waits_for_writer(backend: Any) -> None:
    dev = backend.get_device(0)
    s1, s2 = backend.new_stream(dev), backend.new_stream(dev)
    n = 1 << 12 if on_interpreter(backend) else 1 << 18  # the interpreter's writer is long anyway
    x = Tnode.create((n,), label="x")
    x.update_memory_mode(mm.On_device(mm.Sharing.Shared_cross_streams), 1)
    src, y = hosted((n,), "src"), hosted((n,), "y")
    src.set_values(RNG.standard_normal(n))
    # A long writer (many transcendental ops) on s1, a reader on s2 scheduled right after.
    t = Tnode.create((n,), label="t")
    writer = backend.link(
        backend.make_context(s1),
        backend.compile(ir.block(ir.unop(t, "exp", src), ir.unop(x, "tanh", t)), name="writer"),
    )
    reader = backend.link(
        backend.make_context(s2), backend.compile(ir.unop(y, "neg", x), name="reader")
    )
    assert writer.context.buffers[x] == reader.context.buffers[x]  # one buffer per device
    for _ in range(3):
        writer()
        reader()
    backend.to_host(reader.context, y)
    expected = -np.tanh(np.exp(src.get_values().astype(np.float64)))
    np.testing.assert_allclose(y.get_values(), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("count", [2, 8])
def test_many_streams_at_once(backend: Any, count: int) -> None:
    dev = backend.get_device(0)
    n = 1 << 10 if on_interpreter(backend) else 1 << 14
    routines, outs, expected = [], [], []
    for k in range(count):
        a, y = hosted((n,), f"a{k}"), hosted((n,), f"y{k}")
        va = RNG.standard_normal(n)
        a.set_values(va)
        ctx = backend.make_context(backend.new_stream(dev))
        routines.append(backend.link(ctx, backend.compile(ir.binop(y, "mul", a, a), name=f"sq{k}")))
        outs.append(y)
        expected.append(np.float32(va) * np.float32(va))
    for _ in range(3):
        for r in routines:
            r()
    for r, y, e in zip(routines, outs, expected):
        backend.to_host(r.context, y)
        np.testing.assert_allclose(y.get_values(), e, rtol=1e-6)


@pytest.mark.parametrize("mode", [MergeMode.Copy, MergeMode.Streaming], ids=["Copy", "Streaming"])
def test_data_parallel_gradient_merge(backend: Any, mode: MergeMode) -> None:
    """Streams compute partial gradients of a linear model on shards, merge them into one
    stream through merge buffers, update there, and broadcast the weights back; the result
    matches numpy's full-batch gradient descent."""
    shards, per, d, lr, steps_n = 3, 8, 4, 0.05, 5
    xs = RNG.standard_normal((shards * per, d))
    ys = xs @ RNG.standard_normal(d)
    devices = [backend.get_device(k % backend.num_devices()) for k in range(shards)]
    w = Tnode.create((d,), label="w", memory_mode=(mm.Materialized(), 1))
    grad = Tnode.create((d,), label="grad", memory_mode=(mm.Materialized(), 1))
    w_init = hosted((d,), "w_init", "double")
    w_init.set_values(np.zeros(d))
    w.update_prec("double")
    grad.update_prec("double")
    steps = []
    for k in range(shards):
        x, y = hosted((per, d), f"x{k}", "double"), hosted((per,), f"y{k}", "double")
        x.set_values(xs[k * per : (k + 1) * per])
        y.set_values(ys[k * per : (k + 1) * per])
        pred = Tnode.create((per,), label="pred", prec="double")
        err = Tnode.create((per,), label="err", prec="double")
        ctx = backend.make_context(backend.new_stream(devices[k]))
        init = backend.link(ctx, backend.compile(ir.unop(w, "identity", w_init), name=f"init{k}"))
        init()
        comp = ir.block(
            ir.accum(pred, "add", x, w, op="mul", spec="bi,i->b"),
            ir.binop(err, "sub", pred, y),
            ir.accum(grad, "add", x, err, op="mul", spec="bi,b->i"),
        )
        steps.append(backend.link(init.context, backend.compile(comp, name=f"grad{k}")))
    owner = steps[0].context
    merge_code = backend.compile(
        ir.accum(grad, "add", ir.merge_buffer(grad), initialize_neutral=False), name="merge"
    )
    merge = backend.link(owner, merge_code)
    scale = hosted((), "scale", "double")
    scale.set_values(np.array(lr / (shards * per)))
    update = backend.link(
        merge.context,
        backend.compile(
            ir.accum(w, "sub", scale, grad, op="mul", spec=",i->i", initialize_neutral=False),
            name="update",
        ),
    )
    w_out = hosted((d,), "w_out", "double")
    read = backend.link(update.context, backend.compile(ir.unop(w_out, "identity", w), name="read"))
    expected = np.zeros(d)
    for _ in range(steps_n):
        for step in steps:
            step()
        for step in steps[1:]:
            assert backend.device_to_device(grad, mode, merge.context, step.context)
            merge()
        update()
        for step in steps[1:]:
            assert backend.device_to_device(w, MergeMode.No, step.context, update.context)
        expected = expected - lr / (shards * per) * (xs.T @ (xs @ expected - ys))
    read()
    backend.to_host(read.context, w_out)
    np.testing.assert_allclose(w_out.get_values(), expected, rtol=1e-10, atol=1e-12)
