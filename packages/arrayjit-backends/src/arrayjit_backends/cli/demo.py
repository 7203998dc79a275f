"""The end-to-end demo behind ``arrayjit demo``: a fused computation and a few training steps
of a small MLP, each checked against numpy, plus a one-line timing against numpy."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO

import numpy as np

from arrayjit_ir import ir
from arrayjit_ir.assignments import Block
from arrayjit_tnode import Tnode


def _median_time(fn: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def fused_check(backend: Any, n: int, out: TextIO) -> bool:
    """``relu(a*b + c)`` written as three assignments, run as one kernel; checked and timed."""
    rng = np.random.default_rng(0)
    a, b, c = (Tnode.create((n,), label=s, hosted=True) for s in "abc")
    t1, t2 = Tnode.create((n,), label="t1"), Tnode.create((n,), label="t2")
    y = Tnode.create((n,), label="y", hosted=True)
    for tn in (a, b, c):
        tn.set_values(rng.standard_normal(n, dtype=np.float32))
    comp = ir.block(ir.binop(t1, "mul", a, b), ir.binop(t2, "add", t1, c), ir.unop(y, "relu", t2))
    stream = backend.new_stream(backend.get_device(0))
    routine = backend.link(backend.make_context(stream), backend.compile(comp, name="fused"))
    routine()
    backend.to_host(routine.context, y)
    va, vb, vc = a.get_values(), b.get_values(), c.get_values()
    expected = np.maximum(va * vb + vc, 0)
    ok = bool(np.allclose(y.get_values(), expected, rtol=1e-5, atol=1e-6))
    print(
        f"  [{'ok' if ok else 'FAILED'}] relu(a*b+c) on {n} float32 values matches numpy "
        f"(t1, t2 virtual: {t1.known_virtual() and t2.known_virtual()})",
        file=out,
    )

    def ours() -> None:
        routine()
        backend.await_stream(stream)

    ours_t = _median_time(ours, 5)
    numpy_t = _median_time(lambda: np.maximum(va * vb + vc, 0), 5)
    print(
        f"  timing: {backend.name} {ours_t * 1e3:.3f} ms, numpy {numpy_t * 1e3:.3f} ms "
        f"(numpy/ours = {numpy_t / ours_t:.2f}x)",
        file=out,
    )
    return ok


def _node(dims: tuple[int, ...], label: str, value: Any = None) -> Tnode:
    tn = Tnode.create(dims, label=label, hosted=value is not None)
    if value is not None:
        tn.set_values(value)
    return tn


@dataclass
class Mlp:
    """A 2-layer MLP ``relu(x @ w1) @ w2`` trained by SGD on the squared error: the nodes and
    the two halves of a training step (``grads`` computes ``loss``, ``g1``, ``g2``; ``update``
    applies ``w -= lr / batch * g``). The demo runs both halves as one routine; the
    data-parallel demo of arrayjit-distributed all-reduces the gradients in between."""

    w1: Tnode
    w2: Tnode
    g1: Tnode
    g2: Tnode
    loss: Tnode
    grads: Block
    update: Block


def mlp(xs: np.ndarray, ts: np.ndarray, w1v: np.ndarray, w2v: np.ndarray, lr: float) -> Mlp:
    """The MLP's nodes (inputs ``xs``, targets ``ts``, parameters starting at ``w1v``, ``w2v``;
    hosted) and its step."""
    bsz, din = xs.shape
    hid = w1v.shape[1]
    x, t = _node((bsz, din), "x", xs), _node((bsz, 1), "t", ts)
    w1, w2 = _node((din, hid), "w1", w1v), _node((hid, 1), "w2", w2v)
    rate = _node((), "lr", np.float32(lr / bsz))
    z, h, dh, dz = (_node((bsz, hid), label) for label in ("z", "h", "dh", "dz"))
    p, dp = _node((bsz, 1), "p"), _node((bsz, 1), "dp")
    g1, g2 = _node((din, hid), "g1"), _node((hid, 1), "g2")
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
    return Mlp(w1, w2, g1, g2, loss, grads, update)


def mlp_data(
    bsz: int, din: int, hid: int, seed: int = 1
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A batch of ``bsz`` samples (inputs in [-1, 1], targets ``sin(2 x0) + x1^2``) and
    starting parameters: ``(xs, ts, w1v, w2v)``, float32."""
    rng = np.random.default_rng(seed)
    xs = rng.uniform(-1, 1, (bsz, din)).astype(np.float32)
    ts = (np.sin(2 * xs[:, :1]) + xs[:, 1:2] ** 2).astype(np.float32)
    w1v = (rng.standard_normal((din, hid)) * 0.5).astype(np.float32)
    w2v = (rng.standard_normal((hid, 1)) * 0.5).astype(np.float32)
    return xs, ts, w1v, w2v


def numpy_sgd(
    xs: np.ndarray, ts: np.ndarray, w1v: np.ndarray, w2v: np.ndarray, lr: float, steps: int
) -> tuple[np.ndarray, np.ndarray, list[float]]:
    """The oracle: the same SGD on the whole batch in float64, written plainly in numpy;
    ``(w1, w2, losses)`` with the loss before each step's update."""
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


def mlp_check(backend: Any, steps: int, out: TextIO) -> bool:
    """SGD on a 2-8-1 MLP: forward, backward and update compiled as one routine."""
    hid, lr = 8, 0.05
    xs, ts, w1v, w2v = mlp_data(32, 2, hid)
    net = mlp(xs, ts, w1v, w2v, lr)
    step = ir.block(net.grads, net.update)
    stream = backend.new_stream(backend.get_device(0))
    routine = backend.link(backend.make_context(stream), backend.compile(step, name="sgd_step"))
    losses = []
    for _ in range(steps):
        routine()
        backend.to_host(routine.context, net.loss)
        losses.append(float(net.loss.get_values()))
    a1, _, ref_losses = numpy_sgd(xs, ts, w1v, w2v, lr, steps)
    backend.to_host(routine.context, net.w1)
    ok = bool(
        np.allclose(losses, ref_losses, rtol=1e-3)
        and np.allclose(net.w1.get_values(), a1, rtol=1e-3, atol=1e-4)
        # Each loss is taken before its step's update: one step has nothing to compare.
        and (steps == 1 or losses[-1] < losses[0])
    )
    print(
        f"  [{'ok' if ok else 'FAILED'}] {steps} SGD steps of a 2-{hid}-1 MLP match numpy "
        f"(loss {losses[0]:.4f} -> {losses[-1]:.4f})",
        file=out,
    )
    return ok


def run_demo(backend: Any, out: TextIO, *, n: int, steps: int) -> bool:
    """Run both checks on ``backend``; True when both pass."""
    print(f"arrayjit demo on {backend.name}", file=out)
    ok = fused_check(backend, n, out)
    ok = mlp_check(backend, steps, out) and ok
    print("all checks passed" if ok else "SOME CHECKS FAILED", file=out)
    return ok
