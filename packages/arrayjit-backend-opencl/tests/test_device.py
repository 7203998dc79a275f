"""The opencl backend end to end: reductions, matmul, fetches and static indices, merge buffers,
streams, transfers for every precision, and the kernels the renderer chooses."""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np
import pytest
from opencl_helpers import FLOATS, INTS, compare, node, require_prec, run_batch

from arrayjit_backends import MergeMode
from arrayjit_backends.gpu.program import GpuProgram, render_program
from arrayjit_ir import interpret, ir
from arrayjit_ir.indexing import StaticSymbol
from arrayjit_tnode import Padding, Tnode, UsageError
from arrayjit_tnode import memory_mode as mm

RNG = np.random.default_rng(5)


def _program(code: Any) -> GpuProgram:
    program: GpuProgram = code.native.rendered
    return program


@pytest.mark.parametrize(
    "prec,accums",
    [
        ("single", ("add", "max", "min", "mul")),
        ("double", ("add", "min")),
        ("int32", ("mul", "max")),
        ("uint64", ("add", "min")),
        ("bfloat16", ("add", "max")),
    ],
)
def test_reductions_over_each_axis_and_all(backend: Any, prec: str, accums: tuple[str]) -> None:
    require_prec(backend, prec)
    x = node((6, 11), "x", prec)
    vx = RNG.uniform(-2, 2, (6, 11)) if prec in FLOATS else RNG.integers(0, 5, (6, 11))
    outs, items = [], []
    for accum in accums:
        for spec, dims in (("ij->i", (6,)), ("ij->j", (11,)), ("ij->", ())):
            out = node(dims, f"{accum}_{spec[3:] or 'all'}", prec)
            outs.append(out)
            items.append(ir.accum(out, accum, x, spec=spec))
    results = run_batch(backend, ir.block(*items), {x: vx}, outs, name=f"red_{prec}")
    for out, (got, ref) in zip(outs, results):
        compare(got, ref, prec, out.debug_label)


def test_full_reduction_runs_ranges_of_the_serial_loop_on_a_cpu_device(backend: Any) -> None:
    """PoCL's default shape (one lane per cell): a full reduction is a kernel of work groups of
    one work item, each running a contiguous range of the serial loop, then one work item
    combining the partials in order. A blocked float sum gets a work item per top-level block,
    so its value has the bits of the serial code (the interpreter over the optimized code); an
    integer max is cut into 64 ranges (exact in any order). Run twice: the cell restarts from
    its fill each run."""
    n = (1 << 18) + 3
    x, total, top = node((n,), "x"), node((), "total"), node((), "top", "int32")
    xi = node((n,), "xi", "int32")
    vx, vi = RNG.standard_normal(n).astype(np.float32), RNG.integers(-1000, 1000, n)
    x.set_values(vx)
    xi.set_values(vi)
    code = backend.compile(
        ir.block(ir.accum(total, "add", x, spec="i->"), ir.accum(top, "max", xi, spec="i->")),
        name="ranges",
    )
    program = _program(code)
    # The sum's 64 top-level blocks, its combine, its 3 terms past the blocked part (one work
    # item's), then the max's 64 ranges and combine: no fill launches, no local memory.
    sizes = [(k.global_size, k.local_size) for k in program.kernels]
    assert sizes == [(64, 1), (1, 1), (1, 1), (64, 1), (1, 1)]
    assert "__local" not in program.source and "barrier(" not in program.source
    r = backend.link(backend.make_context(backend.new_stream(backend.get_device(0))), code)
    for _ in range(2):
        r()
    backend.to_host(r.context, total)
    backend.to_host(r.context, top)
    bufs = {x: vx.copy(), xi: vi.astype(np.int32), total: np.zeros((), np.float32)}
    bufs[top] = np.zeros((), np.int32)
    interpret(code.optimized, bufs, {})
    assert total.get_values().tobytes() == bufs[total].tobytes()  # the serial code's bits
    exact = vx.astype(np.float64).sum()
    assert abs(float(total.get_values()) - exact) <= 1e-5 * np.abs(vx).sum()
    assert int(top.get_values()) == vi.max()


def test_matmul_runs_one_work_item_per_output_cell(backend: Any) -> None:
    x, w = node((33, 70), "x"), node((70, 65), "w")
    h, y = Tnode.create((33, 65), label="h"), node((33, 65), "y")
    vx, vw = RNG.standard_normal((33, 70)), RNG.standard_normal((70, 65))
    comp = ir.block(ir.accum(h, "add", x, w, op="mul", spec="ik,kj->ij"), ir.unop(y, "relu", h))
    x.set_values(vx)
    w.set_values(vw)
    code = backend.compile(comp, name="mm")
    assert [k.global_size for k in _program(code).kernels][-1] == 33 * 65
    r = backend.link(backend.make_context(backend.new_stream(backend.get_device(0))), code)
    r()
    backend.to_host(r.context, y)
    ref = np.maximum(vx.astype(np.float32) @ vw.astype(np.float32), 0)
    np.testing.assert_allclose(y.get_values(), ref, rtol=1e-5, atol=1e-5)


def test_large_matmul_order_is_interchanged() -> None:
    """The optimizer orders a large matmul i, k, j (contiguous j innermost, for CPUs); the GPU
    renderer still finds the (i, j) cells and the k loop inside, and runs them as a tiled kernel:
    a group of 256 work items per 64 x 64 block of cells."""
    from arrayjit_backend_opencl.renderer import OpenclSyntax
    from arrayjit_ir import lower, optimize

    x, w, h = node((256, 256), "x"), node((256, 256), "w"), node((256, 256), "h")
    opt = optimize(lower(ir.accum(h, "add", x, w, op="mul", spec="ik,kj->ij")), name="mm")
    program = render_program(OpenclSyntax(), opt, "mm")
    sizes = [(k.global_size, k.local_size) for k in program.kernels]
    assert sizes == [(16 * 256, 256)]  # the zeroing folded in: the cells start from 0
    assert "__local float aj_ta[16][68] __attribute__((aligned(16)));" in program.source
    # A device whose groups are smaller than 256 keeps one work item per cell, each storing
    # its cell's zero first (the zeroing folded in: one launch).
    program = render_program(OpenclSyntax(group_size=128), opt, "mm")
    assert [k.global_size for k in program.kernels] == [256 * 256]
    assert "float acc" in program.source
    assert "h_0[(i0) * 256 + i1] = ((float)0.0);" in program.source


def test_fetches_padding_and_static_indices(backend: Any) -> None:
    i = StaticSymbol("i", range=4)
    data, row, e = node((4, 3), "data"), node((3,), "row"), node((2,), "e", "int32")
    r_, f = node((2, 3), "r", "int32"), node((2, 2), "f", "double")
    c = node((5,), "c", "bfloat16")
    comp = ir.block(
        ir.fetch(row, ir.Slice(i, data)),
        ir.fetch(e, ir.Embed_symbol(i)),
        ir.fetch(r_, ir.Range_over_offsets()),
        ir.fetch(f, ir.Constant_fill((1.5, -2.0, 3.25, 0.0))),
        ir.fetch(c, ir.Constant(5.0)),
    )
    vd = RNG.standard_normal((4, 3))
    data.set_values(vd)
    code = backend.compile(comp, name="fetch", bindings=(i,))
    r = backend.link(backend.make_context(backend.new_stream(backend.get_device(0))), code)
    for k in (2, 0, 3):  # one build, several bindings
        r.bindings["i"] = k
        r()
        backend.to_host(r.context, row)
        backend.to_host(r.context, e)
        np.testing.assert_array_equal(row.get_values(), vd[k].astype(np.float32))
        np.testing.assert_array_equal(e.get_values(), [k, k])
    for out, ref in ((r_, np.arange(6).reshape(2, 3)), (f, [[1.5, -2.0], [3.25, 0.0]])):
        backend.to_host(r.context, out)
        np.testing.assert_array_equal(out.get_values(), ref)
    backend.to_host(r.context, c)
    assert (c.get_values() == 5).all()


def test_padded_and_local_nodes(backend: Any) -> None:
    x = Tnode.create((3,), label="x", hosted=True, padding=Padding(((1, 2),), 0.0))
    y = node((3,), "y")
    s, z = Tnode.create((5,), label="s", prec="double"), node((5,), "z", "double")
    m = node((5, 8), "m", "double")
    comp = ir.block(
        ir.binop(y, "mul", x, x),
        ir.accum(s, "add", m, spec="ij->i"),
        ir.binop(z, "mul", s, s),
    )
    vx, vm = RNG.standard_normal(3), RNG.standard_normal((5, 8))
    results = run_batch(backend, comp, {x: vx, m: vm}, [y, z], name="pad_local")
    for (got, ref), prec in zip(results, ("single", "double")):
        compare(got, ref, prec)
    np.testing.assert_allclose(results[1][0], vm.sum(1) ** 2, rtol=1e-12)


@pytest.mark.parametrize("mode", [MergeMode.Copy, MergeMode.Streaming], ids=["copy", "streaming"])
def test_merge_buffer_across_streams(backend: Any, mode: MergeMode) -> None:
    dev = backend.get_device(0)
    s1, s2 = backend.new_stream(dev), backend.new_stream(dev)
    small = Tnode.create((3,), label="small", memory_mode=(mm.Materialized(), 1))
    g = Tnode.create((1000,), label="g", memory_mode=(mm.Materialized(), 1))
    src, acc, out = node((1000,), "src"), node((1000,), "acc"), node((3,), "out")
    src.set_values(np.arange(1000.0))
    acc.set_values(np.ones(1000))
    prod = backend.link(
        backend.make_context(s1),
        backend.compile(
            ir.block(ir.unop(g, "neg", src), ir.fetch(small, ir.Constant(7.0))), name="prod"
        ),
    )
    prod()
    first = backend.link(
        backend.make_context(s2),
        backend.compile(ir.unop(out, "identity", ir.merge_buffer(small)), name="first"),
    )
    use = backend.link(
        first.context,
        backend.compile(
            ir.accum(acc, "add", ir.merge_buffer(g), initialize_neutral=False), name="use"
        ),
    )
    # The small node first, then a larger one: a Copy merge buffer grows.
    assert backend.device_to_device(small, mode, first.context, prod.context)
    first()
    assert backend.device_to_device(g, mode, use.context, prod.context)
    use()
    use()
    backend.to_host(first.context, out)
    backend.to_host(use.context, acc)
    np.testing.assert_array_equal(out.get_values(), [7, 7, 7])
    np.testing.assert_array_equal(acc.get_values(), 1 - 2 * np.arange(1000.0))


def test_streams_run_concurrently_and_cross_stream_reads_wait(backend: Any) -> None:
    dev = backend.get_device(0)
    streams = [backend.new_stream(dev) for _ in range(3)]
    n = 1 << 16
    shared = Tnode.create((n,), label="shared")
    shared.update_memory_mode(mm.On_device(mm.Sharing.Shared_cross_streams), 1)
    src = node((n,), "src")
    src.set_values(RNG.standard_normal(n))
    writer = backend.link(
        backend.make_context(streams[0]),
        backend.compile(ir.unop(shared, "tanh", src), name="writer"),
    )
    outs = [node((n,), f"o{k}") for k in range(2)]
    readers = [
        backend.link(
            backend.make_context(s),
            backend.compile(ir.binop(o, "mul", shared, shared), name=f"reader{k}"),
        )
        for k, (s, o) in enumerate(zip(streams[1:], outs))
    ]
    for _ in range(2):
        writer()
        for r in readers:
            r()
    for r, o in zip(readers, outs):
        backend.to_host(r.context, o)
    expected = np.tanh(src.get_values()) ** 2
    for o in outs:
        np.testing.assert_allclose(o.get_values(), expected, rtol=1e-5, atol=1e-6)
    for s in streams:
        backend.await_stream(s)
        assert backend.is_idle(s)


@pytest.mark.parametrize("prec", FLOATS + INTS)
def test_hosted_round_trip_every_precision(backend: Any, prec: str) -> None:
    require_prec(backend, prec)
    x = node((7, 3), "x", prec)
    dtype = x.prec.numpy_dtype
    bits = RNG.integers(0, 256, x.prec.byte_size * 21, dtype=np.uint8).view(dtype).reshape(7, 3)
    if prec in FLOATS:  # NaN payloads need not survive; keep finite values
        with np.errstate(invalid="ignore"):
            bits = np.where(np.isfinite(bits.astype(np.float64)), bits, dtype.type(1))
    x.array = np.ascontiguousarray(bits)
    x.devices_not_lagging_host.clear()
    y = node((7, 3), "y", prec)
    r = backend.link(
        backend.make_context(backend.new_stream(backend.get_device(0))),
        backend.compile(ir.unop(y, "identity", x), name=f"copy_{prec}"),
    )
    r()
    backend.to_host(r.context, y)
    backend.to_host(r.context, x)
    np.testing.assert_array_equal(y.get_values().view(np.uint8), bits.view(np.uint8))
    np.testing.assert_array_equal(x.get_values().view(np.uint8), bits.view(np.uint8))


def test_transfers_do_not_block_the_host(backend: Any) -> None:
    """A device-to-host copy behind a long kernel returns at once; the host read waits."""
    n = 384
    x, w, h = node((n, n), "x"), node((n, n), "w"), node((n, n), "h")
    x.set_values(np.full((n, n), 0.5))
    w.set_values(np.full((n, n), 2.0))
    mm_ = ir.accum(h, "add", x, w, op="mul", spec="ik,kj->ij")
    r = backend.link(
        backend.make_context(backend.new_stream(backend.get_device(0))),
        backend.compile(mm_, name="slow"),
    )
    r()
    backend.await_stream(r.context.stream)
    start = time.perf_counter()
    r()
    r()
    queued = time.perf_counter()
    backend.to_host(r.context, h)
    returned = time.perf_counter()
    values = h.get_values()
    done = time.perf_counter()
    assert (values == n).all()
    # The copy call costs about as little as the launches; the read waits for the kernels.
    assert returned - queued < max(0.5 * (done - start), queued - start + 0.01)


def test_the_host_gate_holds_the_queue_on_the_device(backend: Any) -> None:
    """A stream made to wait for its host gate (how arrayjit-distributed hands a collective's
    result back) waits on the device: the caller is never blocked, and the stream's later work
    runs once the gate is opened."""
    from arrayjit_backend_opencl.device import OpenclGate

    queue = backend.new_stream(backend.get_device(0)).queue
    gate = queue.host_gate()
    assert isinstance(gate, OpenclGate)
    opener = threading.Timer(1.0, gate.open)  # another thread opens it, as the engine does
    start = time.perf_counter()
    opener.start()
    queue.wait_for(gate.event)
    after = queue.all_work()
    returned = time.perf_counter() - start
    assert not gate.event.is_done() and not after.is_done()
    after.sync()
    opened = time.perf_counter() - start
    assert gate.event.is_done() and after.succeeded()
    assert returned < 0.5 <= opened  # the caller did not wait for the gate; the stream did


def test_unsupported_precision_is_refused(backend: Any) -> None:
    k, y = node((2,), "k", "uint4x32"), node((2,), "y", "uint4x32")
    with pytest.raises(UsageError, match=r"precision uint4x32"):
        backend.compile(ir.unop(y, "identity", k), name="bits")


def test_pools_are_capped_by_the_largest_allocation(backend: Any) -> None:
    # PoCL allocates at most 2 GiB at once; pools of up to 4 GiB made links of several large
    # nodes fail with INVALID_BUFFER_SIZE although each node fitted.
    runtime = backend.runtime
    for d in range(backend.num_devices()):
        assert runtime.max_alloc(d) == runtime.devices[d].max_mem_alloc_size > 0


def test_a_held_stream_whose_backend_is_dropped_does_not_hang() -> None:
    # Collecting a held queue waited (in the collector, with the GIL) for a copy behind the
    # hold's gate, which only the timer's Python thread could open: the process hung.
    import subprocess
    import sys

    script = """
import gc
import numpy as np
from arrayjit_backends import fresh_backend
from arrayjit_ir import interpret, ir
from arrayjit_tnode import Tnode

def go():
    b = fresh_backend("opencl")
    s = b.new_stream(b.get_device(0))
    a = Tnode.create((64,), label="a", hosted=True)
    a.set_values(np.arange(64.0))
    y = Tnode.create((64,), label="y", hosted=True)
    r = b.link(b.make_context(s), b.compile(ir.unop(y, "neg", a), name="n"))
    s.hold(0.3)
    r()
    b.to_host(r.context, y)
    return y

y = go()
gc.collect()
print(y.get_values()[:3].tolist())
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[-0.0, -1.0, -2.0]"
