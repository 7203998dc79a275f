"""Benchmarks of arrayjit-distributed (not timed tests): run under ``mpiexec``.

- ``mpiexec -n 2 python -m arrayjit_distributed.bench allreduce [--mib 64]``: all-reduce (add)
  of a float32 node in place on the device, against mpi4py's ``Allreduce`` on a numpy array of
  the same size, interleaved in the same run; prints the medians and their ratio.
- ``OMP_NUM_THREADS=1 mpiexec -n P python -m arrayjit_distributed.bench step``: the
  data-parallel training step with a fixed per-rank batch (weak scaling); prints samples per
  second over all ranks. Run it with P = 1 and P = 2 and divide; ``--no-comm`` gives the same
  step without its all-reduces (what the machine gives ranks that never talk).

Rank 0 prints one JSON line per result (``{"bench": ..., ...}``) after a human-readable line.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import numpy as np
from mpi4py import MPI

from arrayjit_backends import fresh_backend
from arrayjit_backends.cli.demo import mlp_data
from arrayjit_backends.cli.main import positive_int
from arrayjit_distributed.communicator import Communicator
from arrayjit_distributed.data_parallel import build
from arrayjit_ir import ir
from arrayjit_tnode import Tnode
from arrayjit_tnode import memory_mode as mm


def _report(rank: int, text: str, record: dict[str, Any]) -> None:
    if rank == 0:
        print(text)
        print(json.dumps(record), flush=True)


def bench_allreduce(backend_name: str, mib: int, repeat: int) -> None:
    """Median time of our all-reduce and of mpi4py's on numpy, interleaved."""
    world = MPI.COMM_WORLD
    backend = fresh_backend(backend_name)
    backend.initialize()
    n = mib * (1 << 20) // 4
    x = Tnode.create((n,), label="x", prec="single")
    x.update_memory_mode(mm.Materialized(), 1)
    ctx = backend.make_context(backend.new_stream(backend.get_device(0)))
    fill = backend.link(ctx, backend.compile(ir.fetch(x, ir.Constant(0.0)), name="fill"))
    fill()
    backend.await_stream(ctx.stream)
    comm = Communicator(backend, fill.context)
    arr = np.zeros(n, np.float32)
    ours, theirs = [], []

    def time_ours() -> float:
        comm.barrier()
        t0 = time.perf_counter()
        backend.sync(comm.all_reduce(x, "add"))
        return time.perf_counter() - t0

    def time_theirs() -> float:
        comm.barrier()
        t0 = time.perf_counter()
        world.Allreduce(MPI.IN_PLACE, arr, MPI.SUM)
        return time.perf_counter() - t0

    for k in range(repeat + 1):  # the first round warms up both; the order alternates
        if k % 2:
            t_theirs, t_ours = time_theirs(), time_ours()
        else:
            t_ours, t_theirs = time_ours(), time_theirs()
        if k:
            ours.append(t_ours)
            theirs.append(t_theirs)
    mo, mt = float(np.median(ours)), float(np.median(theirs))
    _report(
        world.Get_rank(),
        f"all-reduce of {mib} MiB float32 over {world.Get_size()} ranks on {backend.name}: "
        f"ours {mo * 1e3:.2f} ms, mpi4py Allreduce on numpy {mt * 1e3:.2f} ms, "
        f"ratio {mo / mt:.3f}x (median of {repeat})",
        {
            "bench": "allreduce",
            "backend": backend.name,
            "ranks": world.Get_size(),
            "mib": mib,
            "ours_s": mo,
            "mpi4py_s": mt,
            "ratio": mo / mt,
        },
    )
    comm.close()


def bench_step(
    backend_name: str, per_rank: int, hid: int, din: int, steps: int, communicate: bool
) -> None:
    """Samples per second of the data-parallel step over all ranks (fixed per-rank batch);
    without ``communicate`` the same step without its all-reduces (what the machine gives
    ranks that never talk: the baseline that separates communication from contention)."""
    world = MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    backend = fresh_backend(backend_name)
    backend.initialize()
    xs, ts, w1v, w2v = mlp_data(per_rank * size, din, hid)
    shard = slice(rank * per_rank, (rank + 1) * per_rank)
    mlp = build(backend, xs[shard], ts[shard], w1v, w2v, 1e-3)
    for _ in range(3):
        mlp.step()
    mlp.read()
    times = []
    for _ in range(5):
        mlp.comm.barrier()
        t0 = time.perf_counter()
        for _ in range(steps):
            mlp.step(communicate)
        mlp.read()
        times.append(time.perf_counter() - t0)
    per_step = float(np.median(times)) / steps
    rate = per_rank * size / per_step
    _report(
        rank,
        f"data-parallel step{'' if communicate else ' WITHOUT all-reduce'} on {backend.name}, "
        f"{size} rank(s), {per_rank} samples per rank "
        f"(MLP {din}-{hid}-1): {per_step * 1e3:.3f} ms per step, {rate:.0f} samples/s",
        {
            "bench": "step",
            "backend": backend.name,
            "ranks": size,
            "per_rank": per_rank,
            "communicate": communicate,
            "step_s": per_step,
            "samples_per_s": rate,
        },
    )
    mlp.comm.close()


def main(argv: list[str] | None = None) -> int:
    """Parse the command line and run one benchmark on this rank."""
    parser = argparse.ArgumentParser(prog="python -m arrayjit_distributed.bench")
    parser.add_argument("which", choices=["allreduce", "step"])
    parser.add_argument("--backend", default="multicore_cc")
    parser.add_argument("--mib", type=positive_int, default=64)
    parser.add_argument("--repeat", type=positive_int, default=15)
    parser.add_argument("--per-rank", type=positive_int, default=4096)
    parser.add_argument("--hid", type=positive_int, default=128)
    parser.add_argument("--din", type=positive_int, default=32)
    parser.add_argument("--steps", type=positive_int, default=20)
    parser.add_argument("--no-comm", action="store_true", help="step without its all-reduces")
    args = parser.parse_args(argv)
    if args.which == "allreduce":
        bench_allreduce(args.backend, args.mib, args.repeat)
    else:
        bench_step(args.backend, args.per_rank, args.hid, args.din, args.steps, not args.no_comm)
    return 0


if __name__ == "__main__":
    sys.exit(main())
