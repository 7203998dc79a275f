"""Scenarios run on every rank under ``mpiexec -n N python mpi_scenarios.py BACKEND NAME...``
by test_distributed.py. Each rank computes every rank's inputs itself (seeded by rank), so the
numpy oracle never goes through MPI or the backend. A failed check raises, which aborts the job
(the communicator's exception hook); a passing scenario prints ``rank R ok NAME``.

Scenarios: ``collectives`` (every collective on every precision the backend supports),
``ordering`` (against routines on other streams; the caller is not blocked), ``hierarchical``
(streams merge through merge buffers, then one all-reduce per process), ``threads`` (the ranks
of a machine share its cores), ``mismatch`` (errors on
every rank, the stream intact after them), and the failing ones, ``stream_fails`` (an earlier
task of rank 1's stream fails) and ``program_raises`` (rank 1's program raises while rank 0
waits in a collective).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from typing import Any

import numpy as np
from mpi4py import MPI

from arrayjit_backends import MergeMode, fresh_backend
from arrayjit_distributed import Communicator
from arrayjit_ir import ir
from arrayjit_tnode import Prec, Tnode, UsageError
from arrayjit_tnode import memory_mode as mm

WORLD = MPI.COMM_WORLD
RANK, SIZE = WORLD.Get_rank(), WORLD.Get_size()
SMALL_FLOATS = {Prec.half, Prec.bfloat16, Prec.fp8}
MEAN_RTOL = {Prec.half: 1e-3, Prec.bfloat16: 8e-3, Prec.fp8: 0.13, Prec.single: 1e-6}


def inputs(rank: int, prec: Prec, shape: tuple[int, ...], salt: int) -> np.ndarray:
    """Rank ``rank``'s values: small integers (sums exact in every precision, fp8 included),
    random normals for single and double."""
    rng = np.random.default_rng([rank, salt, list(Prec).index(prec)])
    if prec in (Prec.single, Prec.double):
        return rng.standard_normal(shape)
    if prec in SMALL_FLOATS or prec in (Prec.int32, Prec.int64):
        return rng.integers(-2, 3, shape).astype(np.float64)
    return rng.integers(0, 40, shape).astype(np.float64)


def reduce_all(values: list[np.ndarray], op: str) -> np.ndarray:
    if op in ("add", "mean"):
        total = np.sum(values, axis=0)
        return total / len(values) if op == "mean" else total
    return np.max(values, axis=0) if op == "max" else np.min(values, axis=0)


def check(got: np.ndarray, want: np.ndarray, prec: Prec, op: str, what: str) -> None:
    got64 = np.asarray(got, dtype=np.float64)
    if op == "mean" or prec in (Prec.single, Prec.double):
        rtol = 1e-13 if prec is Prec.double else MEAN_RTOL.get(prec, 1e-6)
        np.testing.assert_allclose(got64, want, rtol=rtol, atol=rtol, err_msg=what)
    else:
        np.testing.assert_array_equal(got64, want, err_msg=what)


def hosted(dims: tuple[int, ...], label: str, prec: Prec) -> Tnode:
    return Tnode.create(dims, prec=prec, label=label, hosted=True)


def link_reading(backend: Any, ctx: Any, nodes: list[Tnode], name: str) -> Any:
    """A routine that reads every node (so each gets a buffer in the context), through one
    chain of inlined sums per dims and precision: few kernels, which keeps PoCL's compile time
    low."""
    groups: dict[tuple[tuple[int, ...], Prec], list[Tnode]] = {}
    for tn in nodes:
        groups.setdefault((tn.dims, tn.prec), []).append(tn)
    comps = []
    for (dims, prec), members in groups.items():
        acc = members[0]
        for tn in members[1:]:
            t = Tnode.create(dims, prec=prec, label="t")
            comps.append(ir.binop(t, "add", acc, tn))
            acc = t
        comps.append(ir.unop(Tnode.create(dims, prec=prec, label="sink"), "identity", acc))
    return backend.link(ctx, backend.compile(ir.block(*comps), name=name))


def scenario_random(backend: Any) -> None:
    """Collectives drawn at random (kind, precision, dims of 1 to 3 axes, operation, root),
    seeded alike on every rank, alternating at random between contexts of two streams of one
    communicator: their MPI calls must keep the program's order across streams."""
    rng = np.random.default_rng(4321)
    dev = backend.get_device(0)
    ctxs = [backend.make_context(backend.new_stream(dev)) for _ in range(2)]
    precs = sorted(backend.capabilities.supported_precs - {Prec.uint4x32}, key=lambda p: p.name)
    kinds = ["all_reduce", "broadcast", "all_gather", "reduce_scatter"]
    cases = []
    on_stream: list[list[Tnode]] = [[], []]
    for k in range(24):
        kind = kinds[int(rng.integers(len(kinds)))]
        prec = precs[int(rng.integers(len(precs)))]
        ops = ["add", "max", "min"] + (["mean"] if prec.is_float else [])
        op = ops[int(rng.integers(len(ops)))]
        dims = tuple(int(d) for d in rng.integers(1, 5, int(rng.integers(1, 4))))
        root, which = int(rng.integers(SIZE)), int(rng.integers(2))
        whole = (SIZE * dims[0], *dims[1:])
        if kind == "all_gather":
            src, dst = hosted(dims, f"src{k}", prec), hosted(whole, f"dst{k}", prec)
        elif kind == "reduce_scatter":
            src, dst = hosted(whole, f"src{k}", prec), hosted(dims, f"dst{k}", prec)
        else:
            src, dst = hosted(dims, f"x{k}", prec), None
        src.set_values(inputs(RANK, prec, src.dims, 1000 + k).astype(prec.numpy_dtype))
        on_stream[which] += [src] if dst is None else [src, dst]
        cases.append((kind, prec, op, root, which, src, dst, k))
    routines = [
        link_reading(backend, c, n, f"rnd{j}") for j, (c, n) in enumerate(zip(ctxs, on_stream))
    ]
    for r in routines:
        r()
    comm = Communicator(backend, routines[0].context)
    if backend.scheduler == "multicore":
        # Each rank holds back another stream: without the turns, ranks would reach MPI with
        # their collectives in different orders.
        backend.schedule_task(routines[RANK % 2].context, lambda: time.sleep(0.3))
    for kind, _, op, root, which, src, dst, _ in cases:
        ctx = routines[which].context
        if kind == "all_reduce":
            comm.all_reduce(src, op, ctx=ctx)
        elif kind == "broadcast":
            comm.broadcast(src, root, ctx=ctx)
        elif kind == "all_gather":
            comm.all_gather(src, dst, ctx=ctx)
        else:
            comm.reduce_scatter(src, dst, op, ctx=ctx)
    for kind, prec, op, root, which, src, dst, k in cases:
        out = dst if dst is not None else src
        assert backend.to_host(routines[which].context, out)
        every = [inputs(r, prec, src.dims, 1000 + k) for r in range(SIZE)]
        n = out.dims[0]
        if kind == "all_reduce":
            want, how = reduce_all(every, op), op
        elif kind == "broadcast":
            want, how = every[root], "copy"
        elif kind == "all_gather":
            want, how = np.concatenate(every), "copy"
        else:
            want, how = reduce_all(every, op)[RANK * n : (RANK + 1) * n], op
        check(
            out.get_values(),
            want,
            prec,
            how,
            f"case {k}: {kind}({how}) of {prec.name} {list(src.dims)}",
        )
    comm.close()


def scenario_collectives(backend: Any) -> None:
    """Every collective on every precision the backend supports, against numpy."""
    ctx = backend.make_context(backend.new_stream(backend.get_device(0)))
    comm = Communicator(backend, ctx)
    root = SIZE - 1  # a root other than 0 catches a hard-wired root
    shape, blk = (4, 3), (2, 3)
    for prec in sorted(backend.capabilities.supported_precs, key=lambda p: p.name):
        if prec is Prec.uint4x32:
            continue  # random-number state: moved, never reduced (checked in mismatch)
        ops = ["add", "max", "min"] + (["mean"] if prec.is_float else [])
        cases: list[tuple[str, str, Tnode, Tnode | None, int]] = []
        nodes: list[Tnode] = []
        for k, op in enumerate([*ops, "broadcast", "all_gather", *[f"rs_{o}" for o in ops]]):
            if op == "all_gather":
                src = hosted(blk, f"ag_src_{prec.name}", prec)
                dst = hosted((SIZE * blk[0], blk[1]), f"ag_dst_{prec.name}", prec)
            elif op.startswith("rs_"):
                src = hosted((SIZE * blk[0], blk[1]), f"{op}_src_{prec.name}", prec)
                dst = hosted(blk, f"{op}_dst_{prec.name}", prec)
            else:
                src, dst = hosted(shape, f"{op}_{prec.name}", prec), None
            # Uploaded when linked; the collectives then overwrite them in place.
            src.set_values(inputs(RANK, prec, src.dims, k).astype(prec.numpy_dtype))
            nodes += [src] if dst is None else [src, dst]
            cases.append((op, op, src, dst, k))
        routine = link_reading(backend, ctx, nodes, f"init_{prec.name}")
        routine()
        comm.context = routine.context
        for op, _, src, dst, _ in cases:
            if op == "broadcast":
                comm.broadcast(src, root)
            elif op == "all_gather":
                assert dst is not None
                comm.all_gather(src, dst)
            elif op.startswith("rs_"):
                assert dst is not None
                comm.reduce_scatter(src, dst, op[3:])
            else:
                comm.all_reduce(src, op)
        for op, _, src, dst, k in cases:
            out = dst if dst is not None else src
            assert backend.to_host(routine.context, out)
            every = [inputs(r, prec, src.dims, k) for r in range(SIZE)]
            what = f"{op} of {prec.name} on rank {RANK} of {SIZE}"
            if op == "broadcast":
                want = every[root]
            elif op == "all_gather":
                want = np.concatenate(every)
            elif op.startswith("rs_"):
                want = reduce_all(every, op[3:])[RANK * blk[0] : (RANK + 1) * blk[0]]
            else:
                want = reduce_all(every, op)
            check(out.get_values(), want, prec, op.removeprefix("rs_"), what)
    comm.close()


def scenario_zero_copy(backend: Any) -> None:
    """CPU backends: a collective makes no copy (the backend counts copies), and the engine's
    array is the buffer itself."""
    ctx = backend.make_context(backend.new_stream(backend.get_device(0)))
    x = Tnode.create((1000,), label="x", prec="single")
    x.update_memory_mode(mm.Materialized(), 1)
    fill = backend.link(ctx, backend.compile(ir.fetch(x, ir.Constant(float(RANK + 1))), name="f"))
    fill()
    comm = Communicator(backend, fill.context)
    before = backend.copies
    for _ in range(3):
        comm.all_reduce(x, "add")
    backend.await_stream(fill.context.stream)
    assert backend.copies == before, (before, backend.copies)
    mem, off = fill.context.buf(x)
    view = mem[off : off + 4000].view(np.float32)
    total = SIZE * (SIZE + 1) / 2
    np.testing.assert_array_equal(view, np.full(1000, total * SIZE**2, np.float32))
    comm.close()


def scenario_threads(backend: Any) -> None:
    """CPU backends: with no thread count chosen, the ranks of one machine share its cores
    (mpiexec here binds no rank to cores: every rank may run on all of them); a count the user
    chose (``OMP_NUM_THREADS``, ``ARRAYJIT_NUM_THREADS``) is left alone."""
    budget = backend.runtime.budget
    cores = len(os.sched_getaffinity(0))
    assert len(set(WORLD.allgather(frozenset(os.sched_getaffinity(0))))) == 1
    ctx = backend.make_context(backend.new_stream(backend.get_device(0)))
    chosen = {v: os.environ.pop(v, None) for v in ("ARRAYJIT_NUM_THREADS", "OMP_NUM_THREADS")}
    try:
        budget.cores = cores
        Communicator(backend, ctx).close()
        assert budget.cores == max(1, cores // SIZE), (budget.cores, cores, SIZE)
        for variable in chosen:
            os.environ[variable] = "1"
            budget.cores = cores
            Communicator(backend, ctx).close()
            assert budget.cores == cores, (variable, budget.cores, cores)
            del os.environ[variable]
    finally:
        os.environ.update({k: v for k, v in chosen.items() if v is not None})


def scenario_ordering(backend: Any) -> None:
    """A collective on stream 2 waits for a long writer on stream 1, and a reader on stream 1
    scheduled right after it waits for the collective; the caller is never blocked."""
    dev = backend.get_device(0)
    s1, s2 = backend.new_stream(dev), backend.new_stream(dev)
    n = 1 << 17
    src = hosted((n,), "src", Prec.single)
    src.set_values(inputs(RANK, Prec.single, (n,), 99))
    x, t = Tnode.create((n,), label="x"), Tnode.create((n,), label="t")
    x.update_memory_mode(mm.On_device(mm.Sharing.Shared_cross_streams), 1)
    y = hosted((n,), "y", Prec.single)
    writer = backend.link(
        backend.make_context(s1),
        backend.compile(ir.block(ir.unop(t, "exp", src), ir.unop(x, "tanh", t)), name="writer"),
    )
    reader = backend.link(writer.context, backend.compile(ir.binop(y, "add", x, x), name="read"))
    side = Tnode.create((n,), label="side")
    on_s2 = backend.link(backend.make_context(s2), backend.compile(ir.unop(side, "neg", x), "s2"))
    assert on_s2.context.buffers[x] == writer.context.buffers[x]
    comm = Communicator(backend, on_s2.context)
    every = [np.tanh(np.exp(inputs(r, Prec.single, (n,), 99))) for r in range(SIZE)]
    for _ in range(3):
        writer()
        comm.all_reduce(x, "add")
        reader()
    backend.to_host(reader.context, y)
    np.testing.assert_allclose(y.get_values(), 2 * np.sum(every, axis=0), rtol=2e-6, atol=1e-5)
    if backend.scheduler == "multicore":
        # The stream is held until the call has returned (a gate only this thread opens; the
        # bound makes a broken build fail instead of hang): a collective that blocked the
        # caller until it ran would return only after the gate's timeout, its event done.
        gate = threading.Event()
        backend.schedule_task(on_s2.context, lambda: gate.wait(120))
        event = comm.all_reduce(x, "max")
        assert not event.is_done(), "the collective did not wait for the held stream"
        gate.set()
        backend.sync(event)
    comm.close()


def scenario_hierarchical(backend: Any) -> None:
    """Two streams per process compute partial sums, merge through the merge buffer, and one
    all-reduce per process crosses the network."""
    dev = backend.get_device(0)
    d = 8
    g = Tnode.create((d,), label="g")
    g.update_memory_mode(mm.Materialized(), 1)
    parts = []
    for k in range(2):
        data = hosted((4, d), f"data{k}", Prec.single)
        data.set_values(inputs(RANK, Prec.single, (4, d), 200 + k))
        ctx = backend.make_context(backend.new_stream(dev))
        parts.append(
            backend.link(
                ctx, backend.compile(ir.accum(g, "add", data, spec="bi->i"), name=f"part{k}")
            )
        )
    merge = backend.link(
        parts[0].context,
        backend.compile(
            ir.accum(g, "add", ir.merge_buffer(g), initialize_neutral=False), name="merge"
        ),
    )
    out = hosted((d,), "out", Prec.single)
    read = backend.link(merge.context, backend.compile(ir.unop(out, "identity", g), name="rd"))
    comm = Communicator(backend, merge.context)
    for p in parts:
        p()
    assert backend.device_to_device(g, MergeMode.Copy, merge.context, parts[1].context)
    merge()
    comm.all_reduce(g, "add")  # one per process
    read()
    backend.to_host(read.context, out)
    want = sum(inputs(r, Prec.single, (4, d), 200 + k).sum(0) for r in range(SIZE) for k in (0, 1))
    np.testing.assert_allclose(out.get_values(), want, rtol=1e-5, atol=1e-5)
    comm.close()


def expect_usage_error(fn: Any, *needles: str) -> None:
    try:
        fn()
    except UsageError as exc:
        for needle in needles:
            assert needle in str(exc), (needle, str(exc))
        return
    raise AssertionError(f"no UsageError on rank {RANK} (expected {needles})")


def scenario_mismatch(backend: Any) -> None:
    """Disagreeing ranks and invalid calls raise UsageError on every rank; the stream and the
    communicator keep working afterwards."""
    ctx = backend.make_context(backend.new_stream(backend.get_device(0)))
    a = hosted((4 + (RANK == 1),), "a", Prec.single)
    b = hosted((4,), "b", Prec.double if RANK == 1 else Prec.single)
    c = hosted((4,), "c", Prec.int32)
    ok = hosted((4,), "ok", Prec.single)
    big = hosted((SIZE * 2 + 1,), "big", Prec.single)
    small = hosted((2,), "small", Prec.single)
    for tn in (a, b, c, ok, big, small):
        tn.set_values(np.full(tn.dims, RANK + 1.0).astype(tn.prec.numpy_dtype))
    comps = [ir.binop(tn, "add", tn, tn) for tn in (a, b, c, ok, big, small)]
    routine = backend.link(ctx, backend.compile(ir.block(*comps), name="mm"))
    routine()
    comm = Communicator(backend, routine.context)
    expect_usage_error(lambda: comm.all_reduce(a), "disagree", "rank 0", "[4]", "rank 1", "[5]")
    expect_usage_error(lambda: comm.all_reduce(b), "disagree", "single", "double")
    op = "mean" if RANK == 1 else "add"
    expect_usage_error(lambda: comm.all_reduce(c, op), "rank 1: mean of node c")
    expect_usage_error(lambda: comm.all_reduce(ok, "prod"), "unknown reduction 'prod'")
    expect_usage_error(lambda: comm.broadcast(ok, root=SIZE), f"root {SIZE} is not a rank")
    expect_usage_error(lambda: comm.all_gather(small, big), "must have dims")
    r4 = Tnode.create((2,), prec="uint4x32", label="rng")
    expect_usage_error(lambda: comm.all_reduce(r4), "uint4x32, which cannot be reduced")
    stray = hosted((4,), "stray", Prec.single)
    expect_usage_error(lambda: comm.all_reduce(stray), "stray", "has no buffer in the context")
    expect_usage_error(lambda: comm.all_reduce(ok, "max" if RANK == 0 else "min"), "disagree")
    comm.all_reduce(ok, "add")  # after all that, a good collective still works
    backend.to_host(routine.context, ok)
    np.testing.assert_array_equal(ok.get_values(), np.full(4, SIZE * (SIZE + 1), np.float32))
    comm.close()
    expect_usage_error(comm.barrier, "is closed")
    # One rank (MPI.COMM_SELF): the dims of src and dst agree, but one node cannot be both.
    with Communicator(backend, routine.context, MPI.COMM_SELF) as alone:
        expect_usage_error(lambda: alone.all_gather(ok, ok), "src and dst are one node ok")
        expect_usage_error(lambda: alone.reduce_scatter(ok, ok), "src and dst are one node ok")
        alone.all_reduce(ok, "max")  # still usable: one rank's max is its own value
        backend.to_host(routine.context, ok)
        np.testing.assert_array_equal(ok.get_values(), np.full(4, SIZE * (SIZE + 1), np.float32))


def scenario_finalized(backend: Any) -> None:
    """A collective after ``backend.finalize()`` is a UsageError on every rank (it was a
    KeyError that aborted the job on CPU backends, and a hang on OpenCL: the engine waited
    for a task that was never scheduled), and ``close`` still returns. Finalizes the backend:
    run it last."""
    _, x, comm = _doubled_ones(backend)
    backend.finalize()
    expect_usage_error(lambda: comm.all_reduce(x), f"rank {SIZE - 1}: ", "finalized")
    comm.close()


def _doubled_ones(backend: Any) -> tuple[Any, Tnode, Communicator]:
    """A hosted ``x`` of ones doubled by a routine that has run, and a communicator over its
    context (the setup of the failure scenarios)."""
    ctx = backend.make_context(backend.new_stream(backend.get_device(0)))
    x = hosted((4,), "x", Prec.single)
    x.set_values(np.ones(4))
    routine = backend.link(ctx, backend.compile(ir.binop(x, "add", x, x), name="dbl"))
    routine()
    comm = Communicator(backend, routine.context)
    return routine, x, comm


def _reduce_then_expect_abort(backend: Any, routine: Any, x: Tnode, comm: Communicator) -> None:
    """Enter a collective that another rank's failure must abort; a rank still running five
    seconds later says so, which test_distributed refuses."""
    comm.all_reduce(x, "add")
    backend.to_host(routine.context, x)
    x.get_values()
    time.sleep(5)
    print(f"rank {RANK} was not aborted", flush=True)


def scenario_stream_fails(backend: Any) -> None:
    """Rank 1's stream fails before the collective; rank 0 waits inside it. The job must end
    with the cause on every rank, not hang."""
    routine, x, comm = _doubled_ones(backend)
    if RANK == 1:

        def boom() -> None:
            time.sleep(0.2)
            raise RuntimeError("injected failure in rank 1")

        # A device backend runs the task at once (and raises); the collective below then fails.
        with contextlib.suppress(Exception):
            backend.schedule_task(routine.context, boom, writes=[x])
    _reduce_then_expect_abort(backend, routine, x, comm)


def scenario_program_raises(backend: Any) -> None:
    """Rank 1's own program raises while rank 0 waits in a collective."""
    routine, x, comm = _doubled_ones(backend)
    if RANK == 1:
        raise ValueError("rank 1's own code failed")
    _reduce_then_expect_abort(backend, routine, x, comm)


def main() -> None:
    backend = fresh_backend(sys.argv[1])
    backend.initialize()
    for name in sys.argv[2:]:
        globals()[f"scenario_{name}"](backend)
        print(f"rank {RANK} ok {name}", flush=True)


if __name__ == "__main__":
    main()
