"""The distributed demo: ``mpiexec -n 2 python -m arrayjit_distributed.demo [--backend B]``.

Each rank trains the 2-8-1 MLP of ``arrayjit demo`` on its shard of the batch, with gradients
averaged by all-reduce; after the steps every rank must hold parameters identical to every
other rank's (bit for bit) and equal, within float tolerance, to single-process SGD on the whole
batch computed with numpy in float64. Exit status 0 when every check passes on every rank.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
from mpi4py import MPI

from arrayjit_backends import fresh_backend
from arrayjit_backends.cli.demo import mlp_data, numpy_sgd
from arrayjit_backends.cli.main import positive_int
from arrayjit_distributed.data_parallel import build
from arrayjit_tnode import UsageError


def main(argv: list[str] | None = None) -> int:
    """Run the demo on this rank; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m arrayjit_distributed.demo")
    parser.add_argument("--backend", default=None, help="backend name (default: the best)")
    parser.add_argument("--steps", type=positive_int, default=20, help="training steps (>= 1)")
    parser.add_argument(
        "--per-rank", type=positive_int, default=16, help="shard size of each rank (>= 1)"
    )
    args = parser.parse_args(argv)
    world = MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    try:  # every rank gets the same answer: each exits 2 with the message, none hangs
        backend = fresh_backend(args.backend)
    except UsageError as exc:
        parser.error(str(exc))
    backend.initialize()
    lr, hid = 0.05, 8
    xs, ts, w1v, w2v = mlp_data(args.per_rank * size, 2, hid)
    shard = slice(rank * args.per_rank, (rank + 1) * args.per_rank)
    # Only rank 0's starting parameters count: the others start from noise until broadcast.
    start = (w1v, w2v) if rank == 0 else (w1v + 1, w2v - 1)
    mlp = build(backend, xs[shard], ts[shard], start[0], start[1], lr)
    losses = []
    for _ in range(args.steps):
        mlp.step()
        losses.append(mlp.read()[2])
    w1, w2, _ = mlp.read()
    ref1, ref2, ref_losses = numpy_sgd(xs, ts, w1v, w2v, lr, args.steps)
    everyone = world.allgather((w1.tobytes(), w2.tobytes()))
    identical = all(e == everyone[0] for e in everyone)
    close = bool(
        np.allclose(w1, ref1, rtol=1e-3, atol=1e-4)
        and np.allclose(w2, ref2, rtol=1e-3, atol=1e-4)
        and np.allclose(losses, ref_losses, rtol=1e-3)
    )
    ok = identical and close and losses[-1] < losses[0]
    all_ok = world.allreduce(int(ok), MPI.MIN) == 1
    if rank == 0:
        print(f"arrayjit distributed demo on {backend.name}, {size} rank(s)")
        print(
            f"  [{'ok' if identical else 'FAILED'}] every rank holds identical parameters after "
            f"{args.steps} steps"
        )
        print(
            f"  [{'ok' if close else 'FAILED'}] they match single-process SGD on the whole batch "
            f"of {len(xs)} (numpy, float64; loss {losses[0]:.4f} -> {losses[-1]:.4f})"
        )
        print("all checks passed" if all_ok else "SOME CHECKS FAILED", flush=True)
    mlp.comm.close()
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
