"""The generic backend layer on the `interp` backend, under both schedulers."""

import gc
import threading
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import pytest

from arrayjit_backends import (
    Backend,
    Config,
    CpuCompiler,
    MergeMode,
    StreamError,
    UsageError,
    fresh_backend,
    make_cpu_backend,
)
from arrayjit_backends.impl.cpu_compiler import GetMergeView, NodeViews
from arrayjit_ir import ir
from arrayjit_ir.indexing import StaticSymbol
from arrayjit_tnode import Tnode
from arrayjit_tnode import memory_mode as mm

RNG = np.random.default_rng(0)


@pytest.fixture(params=["sync_interp", "multicore_interp"])
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    be = fresh_backend(request.param)
    be.initialize(Config.MOST_PARALLEL_STREAMS)
    yield be
    be.finalize()


def ctx_of(be: Backend) -> Any:
    return be.make_context(be.new_stream(be.get_device(0)))


def hosted(dims: tuple[int, ...], label: str, values: np.ndarray | None = None) -> Tnode:
    tn = Tnode.create(dims, label=label, hosted=True)
    if values is not None:
        tn.set_values(values)
    return tn


def test_fused_chain_matches_numpy(backend: Backend) -> None:
    n = 64
    va, vb, vc = (RNG.standard_normal(n) for _ in range(3))
    a, b, c = hosted((n,), "a", va), hosted((n,), "b", vb), hosted((n,), "c", vc)
    t1, t2, y = Tnode.create((n,), label="t1"), Tnode.create((n,), label="t2"), hosted((n,), "y")
    comp = ir.block(ir.binop(t1, "mul", a, b), ir.binop(t2, "add", t1, c), ir.unop(y, "relu", t2))
    r = backend.link(ctx_of(backend), backend.compile(comp, name="fused"))
    assert t1.known_virtual() and t2.known_virtual()
    assert set(r.inputs) == {a, b, c} and r.outputs == (y,)
    r()
    assert backend.to_host(r.context, y)
    np.testing.assert_allclose(y.get_values(), np.maximum(va * vb + vc, 0), rtol=1e-5, atol=1e-6)


def test_names_devices_streams(backend: Backend) -> None:
    dev = backend.get_device(0)
    assert backend.num_devices() == 1 and backend.is_initialized()
    s1, s2 = backend.new_stream(dev), backend.new_stream(dev)
    assert backend.get_name(s1) != backend.get_name(s2)
    assert backend.get_name(s1).startswith(f"{backend.name}:0:")
    expected = 1 if backend.scheduler == "sync" else None
    n = backend.suggested_num_streams(dev)
    assert n == expected if expected else n >= 1
    backend.initialize(Config.ONLY_DEVICES_PARALLEL)
    assert backend.suggested_num_streams(dev) == 1
    with pytest.raises(UsageError, match=r"has 1 device\(s\), so ordinal must be in 0..0, got 1"):
        backend.get_device(1)


def test_suggested_streams_per_config() -> None:
    be = fresh_backend("multicore_interp")
    dev = be.get_device(0)
    be.initialize(Config.FOR_PARALLEL_COPYING)
    assert be.suggested_num_streams(dev) == 2
    be.initialize(Config.MOST_PARALLEL_STREAMS)
    assert be.suggested_num_streams(dev) >= 1
    be.finalize()


def test_static_bindings(backend: Backend) -> None:
    i = StaticSymbol("i", range=3)
    data = hosted((3, 4), "data", RNG.standard_normal((3, 4)))
    row = hosted((4,), "row")
    code = backend.compile(ir.fetch(row, ir.Slice(i, data)), name="pick", bindings=(i,))
    r = backend.link(ctx_of(backend), code)
    for k in (2, 0, 1):
        r.bindings["i"] = k
        r()
        backend.to_host(r.context, row)
        np.testing.assert_allclose(row.get_values(), data.get_values()[k])
    with pytest.raises(
        UsageError, match=r"routine pick: static index i = 3 is out of range \(valid: 0..2\)"
    ):
        r.bindings["i"] = 3
    with pytest.raises(UsageError, match=r"routine pick has no static index 'j'"):
        r.bindings["j"] = 0
    r.bindings[i] = 2  # the symbol itself as the key
    assert r.bindings["i"] == r.bindings[i] == 2
    r()
    backend.to_host(r.context, row)
    np.testing.assert_allclose(row.get_values(), data.get_values()[2])
    with pytest.raises(UsageError, match=r"static index i = 5 is out of range"):
        r.bindings.update({i: 5})


def test_memory_accounting_and_release(backend: Backend) -> None:
    dev = backend.get_device(0)
    before = backend.get_used_memory(dev)
    x = Tnode.create((1000,), label="x", memory_mode=(mm.Materialized(), 1))
    y = hosted((1000,), "y")
    ctx = ctx_of(backend)
    r = backend.link(ctx, backend.compile(ir.fetch(x, ir.Constant(1.0)), name="fill"))
    r2 = backend.link(r.context, backend.compile(ir.unop(y, "neg", x), name="neg"))
    used = backend.get_used_memory(dev) - before
    assert used == 8000  # exactly the two live buffers
    r(), r2()
    backend.to_host(r2.context, y)
    assert (y.get_values() == -1).all()
    backend.await_stream(ctx.stream)
    del r, r2
    gc.collect()
    assert backend.get_used_memory(dev) == before


# Linking one code twice gives two independent child contexts: conformance
# test_devices::test_contexts_parent_child_and_persistence.


def test_hosted_nodes_no_redundant_copies(backend: Backend) -> None:
    a, y = hosted((8,), "a", np.arange(8.0)), hosted((8,), "y")
    r = backend.link(ctx_of(backend), backend.compile(ir.unop(y, "neg", a), name="neg"))
    dev = backend.get_device(0)
    assert dev.id in a.devices_not_lagging_host
    copies = backend.copies
    assert backend.from_host(r.context, a)  # the device already has the host's value
    assert backend.copies == copies
    a.set_values(np.ones(8))  # now the device lags the host
    assert dev.id not in a.devices_not_lagging_host
    assert backend.from_host(r.context, a) and backend.copies == copies + 1
    r()
    assert y.devices_not_lagging_host == {dev.id}
    backend.to_host(r.context, y)
    assert (y.get_values() == -1).all()
    assert not backend.to_host(r.context, Tnode.create((8,), label="absent", hosted=True))
    assert not backend.from_host(r.context, Tnode.create((2,), label="dev_only"))


def test_from_host_with_wrong_host_array(backend: Backend) -> None:
    a, y = hosted((4,), "a", np.arange(4.0)), hosted((4,), "y")
    r = backend.link(ctx_of(backend), backend.compile(ir.unop(y, "neg", a), name="neg"))
    a.array = np.zeros((5,), np.float32)
    a.devices_not_lagging_host.clear()
    with pytest.raises(UsageError, match=r"from_host: node a#\d+ has a host array of shape \[5\]"):
        backend.from_host(r.context, a)
    a.array = np.zeros((4,), np.float64)
    with pytest.raises(UsageError, match="expected shape \\[4\\] and dtype float32"):
        backend.from_host(r.context, a)


def test_link_checks_context_backend_and_inputs(backend: Backend) -> None:
    other = fresh_backend("sync_interp")
    a, y = hosted((4,), "a", np.arange(4.0)), hosted((4,), "y")
    code = backend.compile(ir.unop(y, "neg", a), name="neg")
    with pytest.raises(UsageError, match=r"link neg: the context belongs to backend sync_interp"):
        backend.link(ctx_of(other), code)
    other.finalize()
    missing = Tnode.create((4,), label="missing")
    code2 = backend.compile(ir.unop(y, "neg", missing), name="neg2")
    with pytest.raises(UsageError, match=r"lacks node missing#\d+, which the routine reads"):
        backend.link(ctx_of(backend), code2)


def test_finalized_backend_refuses_work() -> None:
    be = fresh_backend("multicore_interp")
    stream = be.new_stream(be.get_device(0))
    ctx = be.make_context(stream)
    be.finalize()
    with pytest.raises(UsageError, match="backend multicore_interp was finalized"):
        be.new_stream(be.get_device(0))
    with pytest.raises(UsageError, match="was finalized"):
        be.make_child(ctx)
    with pytest.raises(StreamError, match="closed"):
        stream.queue.schedule(lambda: None)


def test_worker_threads_stop_on_finalize() -> None:
    be = fresh_backend("multicore_interp")
    streams = [be.new_stream(be.get_device(0)) for _ in range(4)]
    threads = [s.queue.thread for s in streams]  # type: ignore[attr-defined]
    assert all(t.is_alive() and t.daemon for t in threads)
    be.finalize()
    for t in threads:
        t.join(timeout=5)
    assert not any(t.is_alive() for t in threads)


class _Failing(CpuCompiler):
    name = "failing"

    def compile(self, optimized: Any) -> Any:
        return optimized

    def link(self, code: Any, buffers: NodeViews, merge_buffer: GetMergeView) -> Any:
        def run(bindings: Mapping[StaticSymbol, int]) -> None:
            raise ZeroDivisionError("kernel blew up")

        return run


@pytest.mark.parametrize("scheduler", ["sync", "multicore"])
def test_task_failure_is_reraised_and_stream_refuses_work(scheduler: str) -> None:
    be = make_cpu_backend(f"{scheduler}_failing", scheduler, _Failing())
    y = hosted((2,), "y")
    r = be.link(ctx_of(be), be.compile(ir.fetch(y, ir.Constant(1.0)), name="boom"))
    stream = r.context.stream
    if scheduler == "sync":
        with pytest.raises(StreamError, match=r"sync_failing:0:\d+: task failed") as info:
            r()
    else:
        r()
        with pytest.raises(
            StreamError, match=r"multicore_failing:0:\d+: an earlier task failed"
        ) as info:
            be.await_stream(stream)
    assert isinstance(info.value.__cause__, ZeroDivisionError)
    with pytest.raises(StreamError, match="an earlier task failed"):
        r()
    # Other streams keep working.
    other = be.new_stream(be.get_device(0))
    assert be.is_done(be.all_work(other)) or be.sync(be.all_work(other)) is None
    be.finalize()


def test_cross_stream_reads_wait_for_the_writer() -> None:
    be = fresh_backend("multicore_interp")
    dev = be.get_device(0)
    s1, s2 = be.new_stream(dev), be.new_stream(dev)
    n = 300
    x = Tnode.create((n,), label="x")
    x.update_memory_mode(mm.On_device(mm.Sharing.Shared_cross_streams), 1)
    src = hosted((n,), "src", RNG.standard_normal(n))
    y = hosted((n,), "y")
    writer = be.link(be.make_context(s1), be.compile(ir.unop(x, "exp", src), name="w"))
    reader = be.link(be.make_context(s2), be.compile(ir.unop(y, "neg", x), name="r"))
    assert writer.context.buffers[x] == reader.context.buffers[x]  # one buffer per device
    gate = threading.Event()
    s1.queue.schedule(gate.wait)  # hold the writer back
    writer()
    reader()  # must wait for the writer's event
    be.to_host(reader.context, y)
    assert not be.is_idle(s2)
    gate.set()
    np.testing.assert_allclose(y.get_values(), -np.exp(src.get_values()), rtol=1e-6)
    be.finalize()


def test_will_wait_for_and_events(backend: Backend) -> None:
    dev = backend.get_device(0)
    s1, s2 = backend.new_stream(dev), backend.new_stream(dev)
    order: list[str] = []
    gate = threading.Event()
    if backend.scheduler == "multicore":
        s1.queue.schedule(gate.wait)
    s1.queue.schedule(lambda: order.append("first"))
    e = backend.all_work(s1)
    backend.will_wait_for(backend.make_context(s2), e)
    s2.queue.schedule(lambda: order.append("second"))
    gate.set()
    backend.await_stream(s2)
    assert order == ["first", "second"] and backend.is_done(e)
    assert backend.is_idle(s2)
    info = backend.get_debug_info(s2)
    assert info["name"] == backend.get_name(s2)
    assert backend.get_global_debug_info()["backend"] == backend.name


# device_to_device in every merge mode, and a merge buffer holding another node than the one a
# routine reads, are conformance tests (arrayjit_conformance.tests.test_merge), run on the
# interpreter backends too.


def test_merge_buffer_grows(backend: Backend) -> None:
    dev = backend.get_device(0)
    s1, s2 = backend.new_stream(dev), backend.new_stream(dev)
    small = Tnode.create((2,), label="small", memory_mode=(mm.Materialized(), 1))
    big = Tnode.create((50,), label="big", memory_mode=(mm.Materialized(), 1))
    prod = backend.link(
        backend.make_context(s1),
        backend.compile(
            ir.block(ir.fetch(small, ir.Constant(1.0)), ir.fetch(big, ir.Constant(2.0))), name="p"
        ),
    )
    prod()
    dst = backend.make_context(s2)
    backend.device_to_device(small, MergeMode.Copy, dst, prod.context)
    backend.await_stream(s2)
    assert s2.merge_capacity == 8
    backend.device_to_device(big, MergeMode.Copy, dst, prod.context)
    backend.await_stream(s2)
    assert s2.merge_capacity == 200


@pytest.mark.parametrize("mode", [MergeMode.Copy, MergeMode.Streaming])
def test_data_parallel_gradient_merge(backend: Backend, mode: MergeMode) -> None:
    """Streams compute partial gradients of a linear model on shards, merge them into one
    stream through merge buffers, update there, and broadcast the weights back. The weights and
    gradients are the same nodes on every stream: each stream's context has its own buffers."""
    shards, per, d = 3, 8, 4
    xs = RNG.standard_normal((shards * per, d))
    ys = xs @ RNG.standard_normal(d)
    lr = 0.05
    dev = backend.get_device(0)
    w = Tnode.create((d,), label="w", memory_mode=(mm.Materialized(), 1))
    grad = Tnode.create((d,), label="grad", memory_mode=(mm.Materialized(), 1))
    w_init = hosted((d,), "w_init", np.zeros(d))
    steps = []
    for k in range(shards):
        x = hosted((per, d), f"x{k}", xs[k * per : (k + 1) * per])
        y = hosted((per,), f"y{k}", ys[k * per : (k + 1) * per])
        pred, err = Tnode.create((per,), label="pred"), Tnode.create((per,), label="err")
        ctx = backend.make_context(backend.new_stream(dev))
        init = backend.link(ctx, backend.compile(ir.unop(w, "identity", w_init), name=f"init{k}"))
        init()
        step = backend.link(
            init.context,
            backend.compile(
                ir.block(
                    ir.accum(pred, "add", x, w, op="mul", spec="bi,i->b"),
                    ir.binop(err, "sub", pred, y),
                    ir.accum(grad, "add", x, err, op="mul", spec="bi,b->i"),
                ),
                name=f"grad{k}",
            ),
        )
        steps.append(step)
    owner = steps[0].context
    merge_code = backend.compile(
        ir.accum(grad, "add", ir.merge_buffer(grad), initialize_neutral=False), name="merge"
    )
    merge = backend.link(owner, merge_code)
    scale = hosted((), "scale", np.array(lr / (shards * per)))
    update = backend.link(
        merge.context,
        backend.compile(
            ir.accum(w, "sub", scale, grad, op="mul", spec=",i->i", initialize_neutral=False),
            name="update",
        ),
    )
    expected = np.zeros(d)
    for _ in range(5):
        for step in steps:
            step()
        for k in range(1, shards):
            assert backend.device_to_device(grad, mode, merge.context, steps[k].context)
            merge()
        update()
        for k in range(1, shards):
            assert backend.device_to_device(w, MergeMode.No, steps[k].context, update.context)
        expected = expected - lr / (shards * per) * (xs.T @ (xs @ expected - ys))
    w_host = hosted((d,), "w_out")
    for step in steps:  # every replica holds the updated weights
        out = backend.link(
            step.context, backend.compile(ir.unop(w_host, "identity", w), name="out")
        )
        out()
        backend.to_host(out.context, w_host)
        np.testing.assert_allclose(w_host.get_values(), expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("ordinal", ["0", 0.0, None, True])
def test_get_device_needs_an_integer(backend: Backend, ordinal: Any) -> None:
    with pytest.raises(UsageError, match=r"get_device: ordinal must be an integer"):
        backend.get_device(ordinal)
    assert backend.get_device(np.int64(0)) is backend.get_device(0)


@pytest.mark.parametrize("name", [123, b"cc", ["cc"]])
def test_fresh_backend_needs_a_string(name: Any) -> None:
    with pytest.raises(UsageError, match=r"fresh_backend: name must be a string or None"):
        fresh_backend(name)


def test_code_links_only_into_its_kind(backend: Backend) -> None:
    other = make_cpu_backend("sync_failing", "sync", _Failing())
    try:
        a, y = hosted((4,), "a", np.arange(4.0)), hosted((4,), "y")
        code = other.compile(ir.unop(y, "neg", a), name="elsewhere")
        with pytest.raises(UsageError, match=r"link elsewhere: the code was compiled for"):
            backend.link(ctx_of(backend), code)
    finally:
        other.finalize()


def test_unranged_static_index_stays_within_int64(backend: Backend) -> None:
    k = StaticSymbol("k")
    y = hosted((2,), "y")
    r = backend.link(ctx_of(backend), backend.compile(ir.fetch(y, ir.Embed_symbol(k)), "e", [k]))
    assert r.bindings.ranges() == {"k": None}
    with pytest.raises(UsageError, match=r"static index k = 9223372036854775808 is out of range"):
        r.bindings["k"] = 2**63
    r.bindings["k"] = 7
    r()
    backend.to_host(r.context, y)
    np.testing.assert_array_equal(y.get_values(), [7.0, 7.0])


def test_compile_and_link_arguments_are_checked(backend: Backend) -> None:
    a, y = hosted((4,), "a"), hosted((4,), "y")
    comp = ir.unop(y, "neg", a)
    with pytest.raises(UsageError, match=r"compile: name must be a string, got 3"):
        backend.compile(comp, name=3)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=r"bindings must be a list of StaticSymbol, got 'i'"):
        backend.compile(comp, bindings="i")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=r"compile: expected a Comp or an assignment"):
        backend.compile("comp")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=r"link: expected the Code of a compile, got None"):
        backend.link(ctx_of(backend), None)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=r"from_host: expected a Context of backend"):
        backend.from_host("ctx", a)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=r"expected a Device of backend"):
        backend.new_stream("dev")  # type: ignore[arg-type]
