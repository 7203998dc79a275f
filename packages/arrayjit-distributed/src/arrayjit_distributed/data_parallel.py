"""Data-parallel training of the MLP of ``arrayjit demo``: each rank computes the gradients of
its shard of the batch in one routine, the gradients are averaged across ranks by all-reduce,
and a second routine applies the SGD update, so every rank keeps identical parameters.

Used by the distributed demo (:mod:`arrayjit_distributed.demo`) and by the weak-scaling
benchmark. The network, its data and the single-process oracle on the whole batch
(``numpy_sgd``) are those of ``arrayjit demo`` (:mod:`arrayjit_backends.cli.demo`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from arrayjit_backends.cli.demo import mlp
from arrayjit_distributed.communicator import Communicator
from arrayjit_tnode import Tnode


@dataclass
class DataParallelMlp:
    """The nodes and routines of one rank's training step."""

    backend: Any
    comm: Communicator
    grads: Any
    update: Any
    w1: Tnode
    w2: Tnode
    g1: Tnode
    g2: Tnode
    loss: Tnode

    def step(self, communicate: bool = True) -> None:
        """One step: local gradients, their mean over the ranks (and the summed loss), the
        update. Only schedules work; nothing waits. ``communicate=False`` skips the
        all-reduces (a benchmark baseline: the ranks then train apart)."""
        self.grads()
        if communicate:
            self.comm.all_reduce(self.g1, "mean")
            self.comm.all_reduce(self.g2, "mean")
            self.comm.all_reduce(self.loss, "add")
        self.update()

    def read(self) -> tuple[np.ndarray, np.ndarray, float]:
        """``(w1, w2, loss)`` on the host (waits for the step)."""
        ctx = self.update.context
        for tn in (self.w1, self.w2, self.loss):
            self.backend.to_host(ctx, tn)
        return self.w1.get_values(), self.w2.get_values(), float(self.loss.get_values())


def build(
    backend: Any,
    xs: np.ndarray,
    ts: np.ndarray,
    w1v: np.ndarray,
    w2v: np.ndarray,
    lr: float,
    comm_world: Any = None,
) -> DataParallelMlp:
    """Compile and link one rank's step for its shard ``xs`` (inputs) and ``ts`` (targets);
    the parameters start as ``w1v``/``w2v`` on every rank (broadcast from rank 0 first).
    ``lr`` is the rate of the whole-batch SGD (the mean of the per-rank gradient sums is
    scaled by ``lr / shard size``)."""
    net = mlp(xs, ts, w1v, w2v, lr)
    codes = backend.compile_batch([net.grads, net.update], ["dp_grads", "dp_update"])
    ctx = backend.make_context(backend.new_stream(backend.get_device(0)))
    grads_r, update_r = backend.link_batch(ctx, codes)
    comm = Communicator(backend, grads_r.context, comm_world)
    comm.broadcast(net.w1)  # parameters at start: rank 0's
    comm.broadcast(net.w2)
    return DataParallelMlp(
        backend, comm, grads_r, update_r, net.w1, net.w2, net.g1, net.g2, net.loss
    )
