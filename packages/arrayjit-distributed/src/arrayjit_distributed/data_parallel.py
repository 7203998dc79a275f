"""Data-parallel training of the MLP of ``arrayjit demo``: each rank computes the gradients of
its shard of the batch in one routine, the gradients are averaged across ranks by all-reduce,
and a second routine applies the SGD update, so every rank keeps identical parameters.

Used by the distributed demo (:mod:`arrayjit_distributed.demo`) and by the weak-scaling
benchmark; :func:`numpy_training` is the single-process oracle on the whole batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from arrayjit_distributed.communicator import Communicator
from arrayjit_ir import ir
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


def _node(dims: tuple[int, ...], label: str, value: Any = None) -> Tnode:
    tn = Tnode.create(dims, label=label, hosted=value is not None)
    if value is not None:
        tn.set_values(value)
    return tn


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
    bsz, din = xs.shape
    hid = w1v.shape[1]
    x, t = _node((bsz, din), "x", xs), _node((bsz, 1), "t", ts)
    w1, w2 = _node((din, hid), "w1", w1v), _node((hid, 1), "w2", w2v)
    rate = _node((), "lr", np.float32(lr / bsz))
    z, h, p, dp = (_node((bsz, hid), "z"), _node((bsz, hid), "h"), _node((bsz, 1), "p"),
                   _node((bsz, 1), "dp"))  # fmt: skip
    g1, g2 = _node((din, hid), "g1"), _node((hid, 1), "g2")
    dh, dz = _node((bsz, hid), "dh"), _node((bsz, hid), "dz")
    loss = _node((), "loss", np.float32(0))
    grads = ir.block(
        ir.accum(z, "add", x, w1, op="mul", spec="bi,ih->bh"),
        ir.unop(h, "relu", z),
        ir.accum(p, "add", h, w2, op="mul", spec="bh,ho->bo"),
        ir.binop(dp, "sub", p, t),
        ir.accum(loss, "add", dp, dp, op="mul", spec="bo,bo->"),
        ir.accum(g2, "add", h, dp, op="mul", spec="bh,bo->ho"),
        ir.accum(dh, "add", dp, w2, op="mul", spec="bo,ho->bh"),
        ir.binop(dz, "relu_gate", z, dh),
        ir.accum(g1, "add", x, dz, op="mul", spec="bi,bh->ih"),
    )
    update = ir.block(
        ir.accum(w1, "sub", rate, g1, op="mul", spec=",ih->ih", initialize_neutral=False),
        ir.accum(w2, "sub", rate, g2, op="mul", spec=",ho->ho", initialize_neutral=False),
    )
    codes = backend.compile_batch([grads, update], ["dp_grads", "dp_update"])
    ctx = backend.make_context(backend.new_stream(backend.get_device(0)))
    grads_r, update_r = backend.link_batch(ctx, codes)
    comm = Communicator(backend, grads_r.context, comm_world)
    comm.broadcast(w1)  # parameters at start: rank 0's
    comm.broadcast(w2)
    return DataParallelMlp(backend, comm, grads_r, update_r, w1, w2, g1, g2, loss)


def numpy_training(
    xs: np.ndarray, ts: np.ndarray, w1v: np.ndarray, w2v: np.ndarray, lr: float, steps: int
) -> tuple[np.ndarray, np.ndarray, list[float]]:
    """Single-process SGD on the whole batch in float64: ``(w1, w2, losses)``."""
    a1, a2 = w1v.astype(np.float64), w2v.astype(np.float64)
    xs64, ts64 = xs.astype(np.float64), ts.astype(np.float64)
    losses = []
    for _ in range(steps):
        zz = xs64 @ a1
        hh = np.maximum(zz, 0)
        d = hh @ a2 - ts64
        losses.append(float((d * d).sum()))
        g2v, g1v = hh.T @ d, xs64.T @ ((zz > 0) * (d @ a2.T))
        a1, a2 = a1 - lr / len(xs) * g1v, a2 - lr / len(xs) * g2v
    return a1, a2, losses


def make_data(
    global_bsz: int, din: int, hid: int, seed: int = 1
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The whole batch and the initial parameters (the same on every rank)."""
    rng = np.random.default_rng(seed)
    xs = rng.uniform(-1, 1, (global_bsz, din)).astype(np.float32)
    ts = (np.sin(2 * xs[:, :1]) + xs[:, 1:2] ** 2).astype(np.float32)
    w1v = (rng.standard_normal((din, hid)) * 0.5).astype(np.float32)
    w2v = (rng.standard_normal((hid, 1)) * 0.5).astype(np.float32)
    return xs, ts, w1v, w2v
