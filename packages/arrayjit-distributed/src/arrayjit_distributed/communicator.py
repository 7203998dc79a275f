"""The communicator: collectives of node values across MPI ranks, bound to a backend and a
context, ordered through the stream model.

Each collective (``all_reduce``, ``broadcast``, ``all_gather``, ``reduce_scatter``):

1. checks its arguments locally and exchanges a small header with every rank (what collective,
   which operation and root, each node's dims and precision); any problem on any rank, or any
   disagreement, raises :class:`UsageError` on *every* rank, naming each rank's nodes, before
   anything is scheduled (the caller waits only for the other ranks to reach the same call);
2. becomes a task of the context's stream through
   :meth:`~arrayjit_backends.backend.Backend.schedule_task`, so it waits for the nodes' writers
   like a routine, and later readers and writers on any stream wait for it;
3. runs its MPI call in its turn (see :mod:`arrayjit_distributed.engine`): on CPU backends in
   the stream's own task, directly on the device buffer (device memory is host memory: no
   copy); otherwise on the engine's thread, on a host staging array (OpenCL, CUDA: device ->
   host, MPI, host -> device).

The call returns the stream's event after the collective at once; nothing blocks until a value
is asked for (``get_values`` after ``to_host``, ``await_stream``, ``sync``).
"""

from __future__ import annotations

import atexit
import os
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from mpi4py import MPI

from arrayjit_backends import settings
from arrayjit_backends.backend import Backend
from arrayjit_backends.backend_intf import BackendInterface
from arrayjit_backends.impl.stream_queue import Event
from arrayjit_backends.runtime.slab import typed_view
from arrayjit_backends.runtime.values import Context
from arrayjit_distributed.engine import Engine, Job
from arrayjit_distributed.failure import Alarm, ExceptHooks
from arrayjit_distributed.mpi_types import REDUCE_OPS, Reductions, byte_view, reducible
from arrayjit_tnode import Tnode, UsageError

Compute = Callable[[list[np.ndarray]], None]


class Communicator:
    """Collectives of node values over the ranks of an MPI communicator.

    ``backend`` and ``context`` say where the nodes' buffers are: every collective uses
    ``context`` unless given another context of the same backend (``ctx=``). ``comm`` defaults
    to ``MPI.COMM_WORLD``; it is duplicated, so the collectives never mix with the caller's own
    MPI traffic. With ``abort_on_error`` (the default), an exception that escapes the program
    while the communicator is open aborts the whole job with its message on every rank.

    Creating it is collective (every rank creates it: the MPI communicator is duplicated).
    One thread calls a communicator's collectives (as with MPI itself), in the same order on
    every rank.

    Raises:
        UsageError: the MPI library gives less than ``MPI_THREAD_MULTIPLE`` (the engine and
            failure threads call MPI beside the caller), the backend is a missing one, or the
            context belongs to another backend.
    """

    def __init__(
        self,
        backend: BackendInterface,
        context: Context,
        comm: MPI.Intracomm | None = None,
        *,
        abort_on_error: bool = True,
    ) -> None:
        if MPI.Query_thread() < MPI.THREAD_MULTIPLE:
            raise UsageError(
                "arrayjit-distributed needs MPI_THREAD_MULTIPLE; this MPI library was "
                f"initialized with thread level {MPI.Query_thread()} (keep mpi4py's default "
                "mpi4py.rc.thread_level = 'multiple')"
            )
        if not isinstance(backend, Backend):
            raise UsageError(
                f"Communicator: backend {getattr(backend, 'name', backend)!r} is not a usable "
                f"backend ({type(backend).__name__}); collectives need a real one"
            )
        if context.backend is not backend:
            raise UsageError(
                f"Communicator: the context on {context.stream.name} belongs to backend "
                f"{context.backend.name}, not {backend.name}"
            )
        base = comm if comm is not None else MPI.COMM_WORLD
        self.backend = backend
        self.context = context
        """The default context of the collectives (may be replaced, e.g. by a routine's)."""
        self.rank: int = base.Get_rank()
        self.size: int = base.Get_size()
        self._control = base.Dup()  # headers, on the caller's thread
        self._data = base.Dup()  # collectives, on the engine thread
        self.alarm = Alarm(base, base)
        self._engine = Engine(self.alarm, f"arrayjit-distributed-engine-{self.rank}")
        self._hooks = ExceptHooks(self.alarm) if abort_on_error else None
        self._reductions = Reductions()
        self._count = 0
        self._closed = False
        self._lock = threading.Lock()
        _share_node_cores(backend, base)
        atexit.register(self.close)  # before MPI finalizes (atexit runs last-in first-out)

    # ---- the collectives ----

    def all_reduce(self, tn: Tnode, op: str = "add", *, ctx: Context | None = None) -> Event:
        """Replace ``tn``'s value in the context by its reduction over all ranks: ``add``,
        ``max``, ``min``, or ``mean`` (``add``, then divided by the number of ranks; floats
        only). Returns the stream's event after the collective.

        Raises:
            UsageError: on every rank, when any rank's call is invalid (unknown operation,
                ``mean`` of integers, ``uint4x32``, a node without a buffer in the context, a
                padded node) or the ranks disagree on the operation, dims or precision.
            StreamError: an earlier task of the stream failed (the job is then aborted).
        """
        problem = _check_op(tn, op)

        def compute(arrays: list[np.ndarray]) -> None:
            (a,) = arrays
            buf, mpi_op = self._reductions.typed(a, tn.prec, op)
            self._data.Allreduce(MPI.IN_PLACE, buf, mpi_op)
            if op == "mean":
                _divide(a, self.size)

        return self._collective(f"all_reduce({op})", op, -1, [tn], [tn], ctx, compute, problem)

    def broadcast(self, tn: Tnode, root: int = 0, *, ctx: Context | None = None) -> Event:
        """Replace ``tn``'s value on every rank by its value on rank ``root`` (parameters at
        start). Returns the stream's event after the collective.

        Raises:
            UsageError: on every rank, when ``root`` is not a rank, a node lacks a buffer or is
                padded, or the ranks disagree on root, dims or precision.
        """
        problem = None
        if not 0 <= root < self.size:
            problem = f"root {root} is not a rank (0..{self.size - 1})"

        def compute(arrays: list[np.ndarray]) -> None:
            (a,) = arrays
            self._data.Bcast(byte_view(a), root)

        return self._collective("broadcast", "", root, [tn], [tn], ctx, compute, problem)

    def all_gather(self, src: Tnode, dst: Tnode, *, ctx: Context | None = None) -> Event:
        """Concatenate every rank's ``src`` along the first axis, in rank order, into ``dst``
        (dims ``(size * n, ...)`` for ``src`` of dims ``(n, ...)``, the same precision).
        Returns the stream's event after the collective.

        Raises:
            UsageError: on every rank, for dims or precisions that do not fit, or ranks that
                disagree.
        """
        problem = _check_split(dst, src, self.size, "all_gather", "dst", "src")

        def compute(arrays: list[np.ndarray]) -> None:
            a, b = arrays
            self._data.Allgather(byte_view(a), byte_view(b))

        return self._collective("all_gather", "", -1, [src], [dst], ctx, compute, problem)

    def reduce_scatter(
        self, src: Tnode, dst: Tnode, op: str = "add", *, ctx: Context | None = None
    ) -> Event:
        """Reduce ``src`` (dims ``(size * n, ...)``) over all ranks with ``op`` and leave rank
        ``r``'s block ``r * n : (r + 1) * n`` of the result in ``dst`` (dims ``(n, ...)``, the
        same precision). Returns the stream's event after the collective.

        Raises:
            UsageError: on every rank, as for :meth:`all_reduce` and :meth:`all_gather`.
        """
        problem = _check_op(src, op) or _check_split(
            src, dst, self.size, "reduce_scatter", "src", "dst"
        )

        def compute(arrays: list[np.ndarray]) -> None:
            a, b = arrays
            sbuf, mpi_op = self._reductions.typed(a, src.prec, op)
            dbuf, _ = self._reductions.typed(b, dst.prec, op)
            self._data.Reduce_scatter_block(sbuf, dbuf, mpi_op)
            if op == "mean":
                _divide(b, self.size)

        return self._collective(
            f"reduce_scatter({op})", op, -1, [src], [dst], ctx, compute, problem
        )

    # ---- the common path ----

    def _collective(
        self,
        what: str,
        op: str,
        root: int,
        reads: Sequence[Tnode],
        writes: Sequence[Tnode],
        ctx: Context | None,
        compute: Compute,
        problem: str | None,
    ) -> Event:
        if self._closed:
            raise UsageError(f"{what}: the communicator (rank {self.rank}) is closed")
        ctx = self.context if ctx is None else ctx
        nodes = list(dict.fromkeys([*reads, *writes]))
        problem = problem or self._check_context(ctx, nodes)
        self._count += 1
        name = f"{what} #{self._count} on {ctx.stream.name}"
        self._exchange_headers(name, what, root, nodes, problem)
        job_reads = [tn for tn in nodes if tn not in writes]
        if self.backend.runtime.unified_memory:
            arrays = [_view(ctx, tn) for tn in nodes]
            job = Job(name, ctx.stream.queue, lambda: compute(arrays), on_stream=True)
            task: Callable[[], None] = job.run_on_stream
        else:
            job, task = self._staged(name, ctx, nodes, reads, writes, compute)
        self._engine.submit(job)  # first: a sync stream runs the task while scheduling it
        try:
            event = self.backend.schedule_task(ctx, task, reads=job_reads, writes=list(writes))
        except BaseException as exc:  # the engine must not wait for a task never scheduled
            job.not_scheduled = exc
            raise
        job.passed = event
        return event

    def _staged(
        self,
        name: str,
        ctx: Context,
        nodes: list[Tnode],
        reads: Sequence[Tnode],
        writes: Sequence[Tnode],
        compute: Compute,
    ) -> tuple[Job, Callable[[], None]]:
        """A job on host staging arrays for a backend whose memory is not host memory: the
        stream copies the read nodes out, waits for the engine to open its gate
        (:meth:`~arrayjit_backends.impl.stream_queue.StreamQueue.host_gate`: on the device
        where the queue can wait there, as OpenCL's does; else a blocking host wait), and
        copies the written nodes back in."""
        staging = [np.empty(tn.prec.host_shape(tn.dims), tn.prec.numpy_dtype) for tn in nodes]
        stream_queue = ctx.stream.queue
        gate = stream_queue.host_gate()
        runtime = self.backend.runtime

        def work() -> None:
            try:
                compute(staging)
            finally:
                gate.open()

        job = Job(name, stream_queue, work, on_stream=False)

        def task() -> None:
            for tn, arr in zip(nodes, staging):
                if tn in reads:
                    runtime.to_host(stream_queue, arr, ctx.buf(tn))
            job.staged = stream_queue.all_work()
            stream_queue.wait_for(gate.event)
            for tn, arr in zip(nodes, staging):
                if tn in writes:
                    runtime.to_device(stream_queue, ctx.buf(tn), arr)
            job.reached.set()

        return job, task

    def _check_context(self, ctx: Context, nodes: Sequence[Tnode]) -> str | None:
        try:
            self.backend.check_live()
        except UsageError as exc:
            return str(exc)
        if ctx.backend is not self.backend:
            return (
                f"the context on {ctx.stream.name} belongs to backend {ctx.backend.name}, "
                f"not {self.backend.name}"
            )
        for tn in nodes:
            if tn not in ctx.buffers:
                return (
                    f"node {tn.debug_label} has no buffer in the context on {ctx.stream.name} "
                    "(link a routine that computes it first)"
                )
            if tn.dims != tn.dims_without_padding:
                return f"node {tn.debug_label} is padded; collectives take unpadded nodes"
        return None

    def _exchange_headers(
        self, name: str, what: str, root: int, nodes: Sequence[Tnode], problem: str | None
    ) -> None:
        """Raise :class:`UsageError` on every rank when any rank has a problem or the ranks
        disagree on the collective or its nodes' dims and precisions."""
        mine = (what, root, tuple((tn.dims, tn.prec.name) for tn in nodes))
        labels = [tn.debug_label for tn in nodes]
        headers: list[Any] = self._control.allgather((mine, labels, problem))
        problems = [(r, h[2]) for r, h in enumerate(headers) if h[2] is not None]
        where = f"{name} (backend {self.backend.name})"
        if problems:
            text = "; ".join(f"rank {r}: {p}" for r, p in problems)
            raise UsageError(f"{where}: {text}")
        if any(h[0] != mine for h in headers):
            ranks = "; ".join(
                f"rank {r}: {h[0][0]}"
                + (f" root {h[0][1]}" if h[0][1] >= 0 else "")
                + " of "
                + ", ".join(
                    f"{label} {list(dims)} {prec}" for label, (dims, prec) in zip(h[1], h[0][2])
                )
                for r, h in enumerate(headers)
            )
            raise UsageError(
                f"{where}: the ranks disagree on the collective, its nodes' dims or precisions: "
                f"{ranks}"
            )

    # ---- life cycle ----

    def barrier(self) -> None:
        """Block until every rank has called it (for tests and benchmarks).

        Raises:
            UsageError: the communicator is closed.
        """
        if self._closed:
            raise UsageError(f"barrier: the communicator (rank {self.rank}) is closed")
        self._control.Barrier()

    def close(self) -> None:
        """Run the collectives still queued, stop the engine and failure watcher, and free the
        MPI resources. Local (not collective); safe to call again."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if MPI.Is_finalized():
            return
        self._engine.close()
        if self._hooks is not None:
            self._hooks.uninstall()
        self.alarm.close()
        self._reductions.free()
        for c in (self._control, self._data):
            c.Free()
        atexit.unregister(self.close)

    def __enter__(self) -> Communicator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Communicator rank {self.rank} of {self.size} on {self.context.stream.name}>"


def _share_node_cores(backend: Backend, base: MPI.Intracomm) -> None:
    """Give each rank of a node its share of the cores it may run on, when the user chose no
    thread count (:func:`arrayjit_backends.settings.threads_chosen`): a CPU
    device's kernels then use ``cores // k`` threads, ``k`` the ranks of this node whose CPU
    affinity overlaps this rank's, instead of ``k`` full thread teams fighting for the same
    cores (``mpiexec -n 2`` on 2 cores: one thread per rank). Ranks the launcher bound to
    disjoint cores keep theirs. Collective (every rank of ``base`` calls it)."""
    node = base.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        mine = frozenset(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
        everyone: list[frozenset[int] | None] = node.allgather(mine)
    finally:
        node.Free()
    budget = getattr(backend.runtime, "budget", None)
    if budget is None or mine is None or settings.threads_chosen():
        return
    sharing = sum(1 for other in everyone if other is not None and other & mine)
    budget.cores = max(1, min(budget.cores, len(mine) // max(1, sharing)))


def _check_op(tn: Tnode, op: str) -> str | None:
    if op not in REDUCE_OPS:
        return f"unknown reduction {op!r}; valid: {', '.join(REDUCE_OPS)}"
    if not reducible(tn.prec):
        return f"node {tn.debug_label} has precision {tn.prec.name}, which cannot be reduced"
    if op == "mean" and not tn.prec.is_float:
        return (
            f"mean of node {tn.debug_label} of integer precision {tn.prec.name}; "
            "use add and divide as you need"
        )
    return None


def _check_split(
    whole: Tnode, part: Tnode, size: int, what: str, whole_name: str, part_name: str
) -> str | None:
    if whole is part:
        return f"{what}: src and dst are one node {whole.debug_label}; give two nodes"
    if whole.prec != part.prec:
        return (
            f"{what}: {whole_name} {whole.debug_label} is {whole.prec.name} but {part_name} "
            f"{part.debug_label} is {part.prec.name}"
        )
    pd = part.dims
    want = (size * pd[0], *pd[1:]) if pd else None
    if want is None or whole.dims != want:
        return (
            f"{what}: {whole_name} {whole.debug_label} has dims {list(whole.dims)}, but with "
            f"{size} ranks and {part_name} {part.debug_label} of dims {list(pd)} it must have "
            f"dims {list(want) if want else '(a first axis)'}"
        )
    return None


def _view(ctx: Context, tn: Tnode) -> np.ndarray:
    """The node's buffer itself, as a numpy array (device memory is host memory here)."""
    mem, off = ctx.buf(tn)
    return typed_view(mem, off, tn)


def _divide(a: np.ndarray, n: int) -> None:
    """``a /= n`` in place, rounding once (small floats through float32)."""
    if a.dtype in (np.float32, np.float64):
        np.divide(a, a.dtype.type(n), out=a)
    else:
        a[...] = (a.astype(np.float32) / np.float32(n)).astype(a.dtype)
