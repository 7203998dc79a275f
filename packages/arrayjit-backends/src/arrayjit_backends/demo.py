"""The end-to-end demo behind ``arrayjit demo``: a fused computation and a few training steps
of a small MLP, each checked against numpy, plus a one-line timing against numpy."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TextIO

import numpy as np

from arrayjit_ir import ir
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


def mlp_check(backend: Any, steps: int, out: TextIO) -> bool:
    """SGD on a 2-8-1 MLP: forward, backward and update compiled as one routine."""
    rng = np.random.default_rng(1)
    bsz, hid, lr = 32, 8, 0.05
    xs = rng.uniform(-1, 1, (bsz, 2)).astype(np.float32)
    ts = (np.sin(2 * xs[:, :1]) + xs[:, 1:] ** 2).astype(np.float32)
    w1v = (rng.standard_normal((2, hid)) * 0.5).astype(np.float32)
    w2v = (rng.standard_normal((hid, 1)) * 0.5).astype(np.float32)

    def node(dims: tuple[int, ...], label: str, value: Any = None) -> Tnode:
        tn = Tnode.create(dims, label=label, hosted=value is not None)
        if value is not None:
            tn.set_values(value)
        return tn

    x, t, w1, w2 = (
        node((bsz, 2), "x", xs),
        node((bsz, 1), "t", ts),
        node((2, hid), "w1", w1v),
        node((hid, 1), "w2", w2v),
    )
    rate = node((), "lr", np.float32(lr / bsz))
    z, h, p, dp = (
        node((bsz, hid), "z"),
        node((bsz, hid), "h"),
        node((bsz, 1), "p"),
        node((bsz, 1), "dp"),
    )
    g1, g2, dh, dz = (
        node((2, hid), "g1"),
        node((hid, 1), "g2"),
        node((bsz, hid), "dh"),
        node((bsz, hid), "dz"),
    )
    loss = node((), "loss", np.float32(0))
    step = ir.block(
        ir.accum(z, "add", x, w1, op="mul", spec="bi,ih->bh"),
        ir.unop(h, "relu", z),
        ir.accum(p, "add", h, w2, op="mul", spec="bh,ho->bo"),
        ir.binop(dp, "sub", p, t),
        ir.accum(loss, "add", dp, dp, op="mul", spec="bo,bo->"),
        ir.accum(g2, "add", h, dp, op="mul", spec="bh,bo->ho"),
        ir.accum(dh, "add", dp, w2, op="mul", spec="bo,ho->bh"),
        ir.binop(dz, "relu_gate", z, dh),
        ir.accum(g1, "add", x, dz, op="mul", spec="bi,bh->ih"),
        ir.accum(w1, "sub", rate, g1, op="mul", spec=",ih->ih", initialize_neutral=False),
        ir.accum(w2, "sub", rate, g2, op="mul", spec=",ho->ho", initialize_neutral=False),
    )
    stream = backend.new_stream(backend.get_device(0))
    routine = backend.link(backend.make_context(stream), backend.compile(step, name="sgd_step"))
    losses = []
    a1, a2 = w1v.astype(np.float64), w2v.astype(np.float64)
    ref_losses = []
    for _ in range(steps):
        routine()
        backend.to_host(routine.context, loss)
        losses.append(float(loss.get_values()))
        zz = xs @ a1
        hh = np.maximum(zz, 0)
        d = hh @ a2 - ts
        ref_losses.append(float((d * d).sum()))
        g2v, g1v = hh.T @ d, xs.T @ ((zz > 0) * (d @ a2.T))
        a1, a2 = a1 - lr / bsz * g1v, a2 - lr / bsz * g2v
    backend.to_host(routine.context, w1)
    ok = bool(
        np.allclose(losses, ref_losses, rtol=1e-3)
        and np.allclose(w1.get_values(), a1, rtol=1e-3, atol=1e-4)
        and losses[-1] < losses[0]
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
