"""Whole programs as users write them, each with a plain numpy reference: a two-layer MLP
training step in one routine (forward, loss, backward, SGD update in place) with mean squared
error or softmax cross-entropy, a small CNN's training step (convolution, relu, max pooling,
convolution, relu, global average pooling, dense, softmax cross-entropy, SGD; in one routine or
as forward, backward and update routines), layer norm, softmax over rows, single-head
attention, row centring and a running mean accumulated in place across runs.

A :class:`Workload` makes fresh nodes and the ``ir`` block each time (memory modes are decided
once per node), gives the initial host values, a numpy function computing one run from the
previous state (in double precision), the nodes to observe, how many runs in a row to make, and
the new host values fed before some runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from arrayjit_conformance.convolution import (
    ConvShape,
    conv_input_grad_numpy,
    conv_numpy,
    conv_weight_grad_numpy,
    pool_numpy,
)
from arrayjit_ir import ir
from arrayjit_ir.assignments import Assignment
from arrayjit_tnode import Padding, Tnode, UsageError
from arrayjit_tnode import memory_mode as mm

State = dict[str, np.ndarray]


@dataclass(frozen=True)
class Built:
    """A workload's fresh nodes (by name), block and initial host values."""

    tns: dict[str, Tnode]
    comp: Assignment
    values: dict[str, np.ndarray]

    def set_host_values(self) -> None:
        """Set every hosted node to its initial value."""
        for name, v in self.values.items():
            self.tns[name].set_values(v)


@dataclass(frozen=True)
class Workload:
    """A whole program and its numpy reference."""

    name: str
    make: Callable[[], Built]
    step: Callable[[State], State]
    observed: tuple[str, ...]
    runs: int = 1
    feeds: tuple[Mapping[str, np.ndarray], ...] = field(default=())


class _Nodes:
    """Creates the nodes of one workload: hosted ones with values, others without."""

    def __init__(self, prec: str = "single") -> None:
        self.prec = prec
        self.tns: dict[str, Tnode] = {}
        self.values: dict[str, np.ndarray] = {}

    def hosted(self, name: str, value: np.ndarray | float, padding: Padding | None = None) -> Tnode:
        v = np.asarray(value, dtype=np.float64)
        tn = Tnode.create(v.shape, prec=self.prec, label=name, hosted=True, padding=padding)
        self.tns[name] = tn
        # The reference starts from the values the node can hold.
        self.values[name] = v.astype(tn.prec.numpy_dtype).astype(np.float64)
        return tn

    def out(self, name: str, dims: tuple[int, ...]) -> Tnode:
        """A hosted node the program writes (initially zero)."""
        return self.hosted(name, np.zeros(dims))

    def tmp(self, name: str, dims: tuple[int, ...], padding: Padding | None = None) -> Tnode:
        tn = Tnode.create(dims, prec=self.prec, label=name, padding=padding)
        self.tns[name] = tn
        return tn

    def built(self, *stmts: Assignment) -> Built:
        return Built(self.tns, ir.block(*stmts), self.values)


# ---- MLP training steps ----

MLP_DIMS = (8, 5, 6, 3)
"""batch, inputs, hidden, outputs of the small MLP."""


def _mlp_inputs(seed: int, dims: tuple[int, int, int, int]) -> dict[str, np.ndarray]:
    b, i, h, o = dims
    rng = np.random.default_rng(seed)
    return {
        "x": rng.uniform(-1, 1, (b, i)),
        "w1": rng.uniform(-1.2, 1.2, (i, h)) / np.sqrt(i),
        "b1": rng.uniform(-0.1, 0.1, (h,)),
        "w2": rng.uniform(-1.2, 1.2, (h, o)) / np.sqrt(h),
        "b2": rng.uniform(-0.1, 0.1, (o,)),
        "target": rng.uniform(-1, 1, (b, o)),
        "onehot": np.eye(o)[rng.integers(0, o, b)],
    }


def softmax_xent(
    tmp: Callable[[str, tuple[int, ...]], Tnode],
    y: Tnode,
    target: Tnode,
    inv_b: Tnode,
    loss: Tnode,
    dy: Tnode,
) -> list[Assignment]:
    """The mean softmax cross-entropy of logits ``y`` (batch, classes) against one-hot
    ``target`` into ``loss``, and its gradient with respect to ``y`` into ``dy``, with the
    row max subtracted before ``exp``; ``inv_b`` holds 1 / batch; ``tmp`` makes the
    temporaries (a workload's ``tmp``)."""
    b, o = y.dims
    m, e = tmp("m", (b,)), tmp("e", (b, o))
    se, p, lse = tmp("se", (b,)), tmp("p", (b, o)), tmp("lse", (b,))
    picked, lb, total = tmp("picked", (b,)), tmp("lb", (b,)), tmp("total", ())
    d = tmp("d", (b, o))
    return [
        ir.accum(m, "max", y, spec="bo->b"),
        ir.binop(e, "sub", y, m, spec="bo,b->bo"),
        ir.unop(e, "exp", e),
        ir.accum(se, "add", e, spec="bo->b"),
        ir.binop(p, "div", e, se, spec="bo,b->bo"),
        ir.unop(lse, "log", se),
        ir.binop(lse, "add", lse, m),
        ir.accum(picked, "add", target, y, op="mul", spec="bo,bo->b"),
        ir.binop(lb, "sub", lse, picked),
        ir.accum(total, "add", lb, spec="b->"),
        ir.binop(loss, "mul", total, inv_b),
        ir.binop(d, "sub", p, target),
        ir.binop(dy, "mul", d, inv_b),
    ]


def mlp_training_step(
    loss: str = "mse", dims: tuple[int, int, int, int] = MLP_DIMS, lr: float = 0.1, seed: int = 1
) -> Built:
    """One SGD step of a two-layer MLP as one block: forward, loss (``"mse"``: half the mean
    over the batch of the squared error; ``"xent"``: mean softmax cross-entropy against one-hot
    targets), backward, and ``p = p - lr * dp`` in place for every parameter (``b2`` through
    ``accum(b2, "sub", ..., initialize_neutral=False)``)."""
    b, i, h, o = dims
    init = _mlp_inputs(seed, dims)
    n = _Nodes()
    x, w1, b1 = n.hosted("x", init["x"]), n.hosted("w1", init["w1"]), n.hosted("b1", init["b1"])
    w2, b2 = n.hosted("w2", init["w2"]), n.hosted("b2", init["b2"])
    target = n.hosted("target", init["target"] if loss == "mse" else init["onehot"])
    rate, inv_b = n.hosted("lr", lr), n.hosted("inv_b", 1.0 / b)
    z0, z, hh = n.tmp("z0", (b, h)), n.tmp("z", (b, h)), n.tmp("h", (b, h))
    y0, y = n.tmp("y0", (b, o)), n.tmp("y", (b, o))
    loss_node, dy = n.out("loss", ()), n.tmp("dy", (b, o))
    forward = [
        ir.accum(z0, "add", x, w1, op="mul", spec="bi,ih->bh"),
        ir.binop(z, "add", z0, b1),
        ir.unop(hh, "relu", z),
        ir.accum(y0, "add", hh, w2, op="mul", spec="bh,ho->bo"),
        ir.binop(y, "add", y0, b2),
    ]
    if loss == "mse":
        d, sq = n.tmp("d", (b, o)), n.tmp("sq", ())
        half_inv_b = n.hosted("half_inv_b", 0.5 / b)
        loss_stmts: list[Assignment] = [
            ir.binop(d, "sub", y, target),
            ir.accum(sq, "add", d, d, op="mul", spec="bo,bo->"),
            ir.binop(loss_node, "mul", sq, half_inv_b),
            ir.binop(dy, "mul", d, inv_b),
        ]
    else:
        loss_stmts = softmax_xent(n.tmp, y, target, inv_b, loss_node, dy)
    g2, gb2 = n.tmp("g2", (h, o)), n.tmp("gb2", (o,))
    dh, dz = n.tmp("dh", (b, h)), n.tmp("dz", (b, h))
    g1, gb1 = n.tmp("g1", (i, h)), n.tmp("gb1", (h,))
    s1, sb1, s2, sb2 = (
        n.tmp("s1", (i, h)),
        n.tmp("sb1", (h,)),
        n.tmp("s2", (h, o)),
        n.tmp("sb2", (o,)),
    )
    backward = [
        ir.accum(g2, "add", hh, dy, op="mul", spec="bh,bo->ho"),
        ir.accum(gb2, "add", dy, spec="bo->o"),
        ir.accum(dh, "add", dy, w2, op="mul", spec="bo,ho->bh"),
        ir.binop(dz, "relu_gate", z, dh),
        ir.accum(g1, "add", x, dz, op="mul", spec="bi,bh->ih"),
        ir.accum(gb1, "add", dz, spec="bh->h"),
    ]
    update = [
        ir.binop(s1, "mul", g1, rate),
        ir.binop(w1, "sub", w1, s1),
        ir.binop(sb1, "mul", gb1, rate),
        ir.binop(b1, "sub", b1, sb1),
        ir.binop(s2, "mul", g2, rate),
        ir.binop(w2, "sub", w2, s2),
        ir.binop(sb2, "mul", gb2, rate),
        ir.accum(b2, "sub", sb2, initialize_neutral=False),
    ]
    return n.built(*forward, *loss_stmts, *backward, *update)


def mlp_step_numpy(loss: str) -> Callable[[State], State]:
    """numpy: one run of :func:`mlp_training_step` from ``state``."""

    def step(state: State) -> State:
        s = {k: np.array(v, dtype=np.float64) for k, v in state.items()}
        x, w1, b1, w2, b2, t = (s[k] for k in ("x", "w1", "b1", "w2", "b2", "target"))
        batch = x.shape[0]
        z = x @ w1 + b1
        h = np.maximum(z, 0)
        y = h @ w2 + b2
        if loss == "mse":
            d = y - t
            s["loss"] = np.array(0.5 * (d * d).sum() / batch)
        else:
            m = y.max(1, keepdims=True)
            e = np.exp(y - m)
            p = e / e.sum(1, keepdims=True)
            lse = np.log(e.sum(1)) + m[:, 0]
            s["loss"] = np.array((lse - (t * y).sum(1)).sum() / batch)
            d = p - t
        dy = d / batch
        dz = np.where(z > 0, dy @ w2.T, 0.0)
        lr = float(s["lr"])
        s["w1"] = w1 - lr * (x.T @ dz)
        s["b1"] = b1 - lr * dz.sum(0)
        s["w2"] = w2 - lr * (h.T @ dy)
        s["b2"] = b2 - lr * dy.sum(0)
        return s

    return step


# ---- a small CNN ----

CNN_DIMS = (2, 8, 2, 4, 5, 3)
"""batch, image side, input channels, first and second convolution's channels, classes."""


def _cnn_shapes(dims: tuple[int, ...]) -> tuple[ConvShape, ConvShape, ConvShape]:
    """The first 3x3 "same" convolution, the 2x2 max pooling (stride 2) of its relu, the
    second 3x3 "same" convolution."""
    b, side, c0, c1, c2, _ = dims
    same = ((1, 1), (1, 1))
    conv1 = ConvShape(b, (side, side), c0, c1, (3, 3), (1, 1), (1, 1), same)
    pool = ConvShape(b, (side, side), c1, c1, (2, 2), (2, 2), (1, 1), ((0, 0), (0, 0)))
    half = side // 2
    conv2 = ConvShape(b, (half, half), c1, c2, (3, 3), (1, 1), (1, 1), same)
    return conv1, pool, conv2


def _cnn_inputs(seed: int, dims: tuple[int, ...]) -> dict[str, np.ndarray]:
    b, side, c0, c1, c2, k = dims
    rng = np.random.default_rng(seed)
    return {
        "x": rng.uniform(-1, 1, (b, side, side, c0)),
        "w1": rng.uniform(-1, 1, (3, 3, c0, c1)) / np.sqrt(9 * c0),
        "b1": rng.uniform(-0.1, 0.1, (c1,)),
        "w2": rng.uniform(-1, 1, (3, 3, c1, c2)) / np.sqrt(9 * c1),
        "b2": rng.uniform(-0.1, 0.1, (c2,)),
        "wd": rng.uniform(-1, 1, (c2, k)) / np.sqrt(c2),
        "bd": rng.uniform(-0.1, 0.1, (k,)),
        "onehot": np.eye(k)[rng.integers(0, k, b)],
    }


def cnn_training_step_parts(
    dims: tuple[int, ...] = CNN_DIMS, lr: float = 0.2, seed: int = 8
) -> tuple[Built, tuple[Assignment, Assignment, Assignment]]:
    """One SGD step of a small CNN over NHWC images, written with affine axis expressions:
    a 3x3 "same" convolution (the input declared with one cell of zero padding on each side),
    relu, 2x2 max pooling (stride 2) into a zero-padded node, a second 3x3 "same" convolution,
    relu, global average pooling, a dense layer, mean softmax cross-entropy against one-hot
    targets; the backward pass (the pooling's gradient goes to every cell equal to its window's
    maximum) and ``p = p - lr * dp`` for every parameter.

    Returns:
        The whole step as one block (``Built.comp``), and the same statements as three blocks:
        forward (with the loss), backward, update.
    """
    b, side, c0, c1, c2, k = dims
    conv1, pool, conv2 = _cnn_shapes(dims)
    half = side // 2
    init = _cnn_inputs(seed, dims)
    n = _Nodes()
    x = n.hosted("x", init["x"], Padding(conv1.padding_axes, 0.0))
    w1, b1 = n.hosted("w1", init["w1"]), n.hosted("b1", init["b1"])
    w2, b2 = n.hosted("w2", init["w2"]), n.hosted("b2", init["b2"])
    wd, bd = n.hosted("wd", init["wd"]), n.hosted("bd", init["bd"])
    onehot = n.hosted("onehot", init["onehot"])
    rate, inv_b = n.hosted("lr", lr), n.hosted("inv_b", 1.0 / b)
    inv_hw = n.hosted("inv_hw", 1.0 / (half * half))
    img1, img2 = (b, side, side, c1), (b, half, half, c2)
    z1c, z1, a1 = n.tmp("z1c", img1), n.tmp("z1", img1), n.tmp("a1", img1)
    p1 = n.tmp("p1", (b, half, half, c1), Padding(conv2.padding_axes, 0.0))
    z2c, z2, a2 = n.tmp("z2c", img2), n.tmp("z2", img2), n.tmp("a2", img2)
    gs, gm = n.tmp("gs", (b, c2)), n.tmp("gm", (b, c2))
    y0, y = n.tmp("y0", (b, k)), n.tmp("y", (b, k))
    m, e, se, prob = n.tmp("m", (b,)), n.tmp("e", (b, k)), n.tmp("se", (b,)), n.tmp("p", (b, k))
    lse, picked, lb = n.tmp("lse", (b,)), n.tmp("picked", (b,)), n.tmp("lb", (b,))
    total, loss = n.tmp("total", ()), n.out("loss", ())
    d, dy = n.tmp("d", (b, k)), n.tmp("dy", (b, k))
    window = "b(2*h+i)(2*w+j)c"
    forward = ir.block(
        ir.accum(z1c, "add", x, w1, op="mul", spec="b(h+i-1)(w+j-1)c,ijcd->bhwd"),
        ir.binop(z1, "add", z1c, b1),
        ir.unop(a1, "relu", z1),
        ir.accum(p1, "max", a1, spec=f"{window}->bhwc"),
        ir.accum(z2c, "add", p1, w2, op="mul", spec="b(h+i-1)(w+j-1)c,ijcd->bhwd"),
        ir.binop(z2, "add", z2c, b2),
        ir.unop(a2, "relu", z2),
        ir.accum(gs, "add", a2, spec="bhwc->bc"),
        ir.binop(gm, "mul", gs, inv_hw),
        ir.accum(y0, "add", gm, wd, op="mul", spec="bc,ck->bk"),
        ir.binop(y, "add", y0, bd),
        ir.accum(m, "max", y, spec="bk->b"),
        ir.binop(e, "sub", y, m, spec="bk,b->bk"),
        ir.unop(e, "exp", e),
        ir.accum(se, "add", e, spec="bk->b"),
        ir.binop(prob, "div", e, se, spec="bk,b->bk"),
        ir.unop(lse, "log", se),
        ir.binop(lse, "add", lse, m),
        ir.accum(picked, "add", onehot, y, op="mul", spec="bk,bk->b"),
        ir.binop(lb, "sub", lse, picked),
        ir.accum(total, "add", lb, spec="b->"),
        ir.binop(loss, "mul", total, inv_b),
    )
    gwd, gbd, dgm = n.tmp("gwd", (c2, k)), n.tmp("gbd", (k,)), n.tmp("dgm", (b, c2))
    da2, dz2 = n.tmp("da2", img2), n.tmp("dz2", img2)
    gw2, gb2 = n.tmp("gw2", (3, 3, c1, c2)), n.tmp("gb2", (c2,))
    dp1 = n.tmp("dp1", (b, half, half, c1), Padding(conv2.padding_axes, 0.0))
    eq, da1, dz1 = n.tmp("eq", img1), n.tmp("da1", img1), n.tmp("dz1", img1)
    gw1, gb1 = n.tmp("gw1", (3, 3, c0, c1)), n.tmp("gb1", (c1,))
    backward = ir.block(
        ir.binop(d, "sub", prob, onehot),
        ir.binop(dy, "mul", d, inv_b),
        ir.accum(gwd, "add", gm, dy, op="mul", spec="bc,bk->ck"),
        ir.accum(gbd, "add", dy, spec="bk->k"),
        ir.accum(dgm, "add", dy, wd, op="mul", spec="bk,ck->bc"),
        ir.binop(da2, "mul", dgm, inv_hw, spec="bc,->bhwc"),
        ir.binop(dz2, "relu_gate", z2, da2),
        ir.accum(gw2, "add", p1, dz2, op="mul", spec="b(h+i-1)(w+j-1)c,bhwd->ijcd"),
        ir.accum(gb2, "add", dz2, spec="bhwd->d"),
        ir.accum(dp1, "add", dz2, w2, op="mul", spec="bhwd,ijcd->b(h+i-1)(w+j-1)c"),
        # The pooling's gradient: to every cell equal to its window's maximum.
        ir.binop(eq, "cmpeq", a1, p1, spec=f"{window},bhwc->{window}"),
        ir.binop(da1, "mul", eq, dp1, spec=f"{window},bhwc->{window}"),
        ir.binop(dz1, "relu_gate", z1, da1),
        ir.accum(gw1, "add", x, dz1, op="mul", spec="b(h+i-1)(w+j-1)c,bhwd->ijcd"),
        ir.accum(gb1, "add", dz1, spec="bhwd->d"),
    )
    steps = []
    for name, param, grad in (
        ("w1", w1, gw1),
        ("b1", b1, gb1),
        ("w2", w2, gw2),
        ("b2", b2, gb2),
        ("wd", wd, gwd),
        ("bd", bd, gbd),
    ):
        step = n.tmp(f"s_{name}", tuple(param.dims))
        steps += [ir.binop(step, "mul", grad, rate), ir.binop(param, "sub", param, step)]
    update = ir.block(*steps)
    assert pool.out == (half, half)
    return n.built(forward, backward, update), (forward, backward, update)


def cnn_training_step() -> Built:
    """:func:`cnn_training_step_parts` as one block."""
    return cnn_training_step_parts()[0]


def cnn_step_numpy(state: State) -> State:
    """numpy: one run of :func:`cnn_training_step` from ``state`` (the convolutions and the
    pooling one kernel offset at a time, :mod:`arrayjit_conformance.convolution`)."""
    s = {k: np.array(v, dtype=np.float64) for k, v in state.items()}
    x, t = s["x"], s["onehot"]
    b, side = x.shape[0], x.shape[1]
    dims = (b, side, x.shape[3], s["w1"].shape[3], s["w2"].shape[3], t.shape[1])
    conv1, pool, conv2 = _cnn_shapes(dims)
    z1 = conv_numpy(x, s["w1"], conv1) + s["b1"]
    a1 = np.maximum(z1, 0)
    p1 = pool_numpy(a1, pool, 0.0)
    z2 = conv_numpy(p1, s["w2"], conv2) + s["b2"]
    a2 = np.maximum(z2, 0)
    gm = a2.mean(axis=(1, 2))
    y = gm @ s["wd"] + s["bd"]
    m = y.max(1, keepdims=True)
    e = np.exp(y - m)
    prob = e / e.sum(1, keepdims=True)
    lse = np.log(e.sum(1)) + m[:, 0]
    s["loss"] = np.array((lse - (t * y).sum(1)).sum() / b)
    dy = (prob - t) / b
    dgm = dy @ s["wd"].T
    da2 = np.broadcast_to(dgm[:, None, None, :] / (a2.shape[1] * a2.shape[2]), a2.shape)
    dz2 = np.where(z2 > 0, da2, 0.0)
    dp1 = conv_input_grad_numpy(dz2, s["w2"], conv2)
    up = np.repeat(np.repeat(p1, 2, axis=1), 2, axis=2)
    dup = np.repeat(np.repeat(dp1, 2, axis=1), 2, axis=2)
    dz1 = np.where(z1 > 0, np.where(a1 == up, dup, 0.0), 0.0)
    lr = float(s["lr"])
    grads = {
        "w1": conv_weight_grad_numpy(x, dz1, conv1),
        "b1": dz1.sum(axis=(0, 1, 2)),
        "w2": conv_weight_grad_numpy(p1, dz2, conv2),
        "b2": dz2.sum(axis=(0, 1, 2)),
        "wd": gm.T @ dy,
        "bd": dy.sum(0),
    }
    for name, g in grads.items():
        s[name] = s[name] - lr * g
    return s


# ---- normalization, softmax, attention ----


def layer_norm(rows: int = 6, cols: int = 10, seed: int = 2) -> Built:
    """``y = (x - mean) / sqrt(var + eps) * gamma + beta`` over each row."""
    rng = np.random.default_rng(seed)
    n = _Nodes()
    x = n.hosted("x", rng.uniform(-2, 2, (rows, cols)))
    gamma, beta = (
        n.hosted("gamma", rng.uniform(0.5, 1.5, cols)),
        n.hosted("beta", rng.uniform(-0.5, 0.5, cols)),
    )
    inv_n, eps = n.hosted("inv_n", 1.0 / cols), n.hosted("eps", 1e-5)
    s, mean, xc = n.tmp("s", (rows,)), n.tmp("mean", (rows,)), n.tmp("xc", (rows, cols))
    ss, var, ve = n.tmp("ss", (rows,)), n.tmp("var", (rows,)), n.tmp("ve", (rows,))
    rstd, xn, yg = n.tmp("rstd", (rows,)), n.tmp("xn", (rows, cols)), n.tmp("yg", (rows, cols))
    y = n.out("y", (rows, cols))
    return n.built(
        ir.accum(s, "add", x, spec="rc->r"),
        ir.binop(mean, "mul", s, inv_n),
        ir.binop(xc, "sub", x, mean, spec="rc,r->rc"),
        ir.accum(ss, "add", xc, xc, op="mul", spec="rc,rc->r"),
        ir.binop(var, "mul", ss, inv_n),
        ir.binop(ve, "add", var, eps),
        ir.unop(rstd, "recip_sqrt", ve),
        ir.binop(xn, "mul", xc, rstd, spec="rc,r->rc"),
        ir.binop(yg, "mul", xn, gamma),
        ir.binop(y, "add", yg, beta),
    )


def layer_norm_numpy(state: State) -> State:
    s = dict(state)
    x = state["x"]
    mean = x.mean(1, keepdims=True)
    var = ((x - mean) ** 2).mean(1, keepdims=True)
    s["y"] = (x - mean) / np.sqrt(var + float(state["eps"])) * state["gamma"] + state["beta"]
    return s


def _softmax_steps(x: Tnode, out: Tnode, m: Tnode, e: Tnode, se: Tnode) -> list[Assignment]:
    return [
        ir.accum(m, "max", x, spec="rc->r"),
        ir.binop(e, "sub", x, m, spec="rc,r->rc"),
        ir.unop(e, "exp", e),
        ir.accum(se, "add", e, spec="rc->r"),
        ir.binop(out, "div", e, se, spec="rc,r->rc"),
    ]


def _softmax_rows(
    n: _Nodes, x: Tnode, rows: int, cols: int, out: Tnode, tag: str
) -> list[Assignment]:
    m, e = n.tmp(f"{tag}m", (rows,)), n.tmp(f"{tag}e", (rows, cols))
    return _softmax_steps(x, out, m, e, n.tmp(f"{tag}se", (rows,)))


def softmax_rows(x: Tnode, y: Tnode, kernel_local: bool = False) -> Assignment:
    """Softmax over each row of the 2-D node ``x`` into ``y`` as users write it: five
    assignments (row max ``m``, ``e = x - m``, ``e = exp(e)``, row sum ``se``, ``y = e / se``)
    with fresh temporaries of ``x``'s precision. The GPU renderer runs it as one row chain.

    The optimizer persists a temporary larger than the 16 KiB stack threshold (``On_device``:
    another routine may read it), so ``e`` is stored; ``kernel_local`` declares the
    temporaries ``Local`` instead, as a caller that never reads them may: the row chain then
    keeps ``e`` in local memory only.

    Raises:
        UsageError: ``x`` is not 2-D, or ``y``'s shape is not ``x``'s."""
    if len(x.dims) != 2 or tuple(y.dims) != tuple(x.dims):
        raise UsageError(
            f"softmax_rows needs a 2-D {x.debug_label} and {y.debug_label} of its shape, "
            f"got {tuple(x.dims)} and {tuple(y.dims)}"
        )
    rows, cols = x.dims
    mode = mm.Local() if kernel_local else None
    m, se = (
        Tnode.create((rows,), prec=x.prec, label=name, memory_mode=mode) for name in ("m", "se")
    )
    e = Tnode.create((rows, cols), prec=x.prec, label="e", memory_mode=mode)
    return ir.block(*_softmax_steps(x, y, m, e, se))


def softmax(rows: int = 5, cols: int = 9, seed: int = 3) -> Built:
    """Softmax over each row (max subtracted first)."""
    rng = np.random.default_rng(seed)
    n = _Nodes()
    x, y = n.hosted("x", rng.uniform(-4, 4, (rows, cols))), n.out("y", (rows, cols))
    return n.built(*_softmax_rows(n, x, rows, cols, y, "sm_"))


def _softmax_np(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def softmax_numpy(state: State) -> State:
    return {**state, "y": _softmax_np(state["x"])}


def attention(n_q: int = 4, n_k: int = 6, d: int = 5, seed: int = 4) -> Built:
    """One head: ``softmax(Q K^T / sqrt(d)) V``."""
    rng = np.random.default_rng(seed)
    n = _Nodes()
    q, k = n.hosted("q", rng.uniform(-1, 1, (n_q, d))), n.hosted("k", rng.uniform(-1, 1, (n_k, d)))
    v, scale = n.hosted("v", rng.uniform(-1, 1, (n_k, d))), n.hosted("scale", 1 / np.sqrt(d))
    s0, s, p = n.tmp("s0", (n_q, n_k)), n.tmp("s", (n_q, n_k)), n.tmp("p", (n_q, n_k))
    o = n.out("o", (n_q, d))
    return n.built(
        ir.accum(s0, "add", q, k, op="mul", spec="qd,kd->qk"),
        ir.binop(s, "mul", s0, scale),
        *_softmax_rows(n, s, n_q, n_k, p, "att_"),
        ir.accum(o, "add", p, v, op="mul", spec="qk,kd->qd"),
    )


def attention_numpy(state: State) -> State:
    q, k, v = state["q"], state["k"], state["v"]
    p = _softmax_np(q @ k.T * float(state["scale"]))
    return {**state, "o": p @ v}


def row_centring(rows: int = 6, cols: int = 11, seed: int = 5) -> Built:
    """``y = x - rowmean(x)``: a reduction, a pointwise node, a broadcast read."""
    rng = np.random.default_rng(seed)
    n = _Nodes()
    x, inv = n.hosted("x", rng.uniform(-2, 2, (rows, cols))), n.hosted("inv", 1.0 / cols)
    s, m, y = n.tmp("s", (rows,)), n.tmp("m", (rows,)), n.out("y", (rows, cols))
    return n.built(
        ir.accum(s, "add", x, spec="ij->i"),
        ir.binop(m, "mul", s, inv),
        ir.binop(y, "sub", x, m, spec="ij,i->ij"),
    )


def row_centring_numpy(state: State) -> State:
    x = state["x"]
    return {**state, "y": x - x.mean(1, keepdims=True)}


RUNNING_SHAPE = (4, 3)


def running_mean(seed: int = 6) -> Built:
    """A running sum, count and mean of batches, and an exponential moving average, all
    updated in place: ``total += sum_n x``, ``count += 1``, ``mean = total / count``,
    ``ema = ema + alpha * (batchmean - ema)``."""
    rng = np.random.default_rng(seed)
    b, c = RUNNING_SHAPE
    n = _Nodes()
    x = n.hosted("x", rng.uniform(-1, 1, (b, c)))
    total, count = n.out("total", (c,)), n.out("count", ())
    one, alpha, inv_b = n.hosted("one", 1.0), n.hosted("alpha", 0.25), n.hosted("inv_b", 1 / b)
    mean, ema = n.out("mean", (c,)), n.out("ema", (c,))
    bs, bm, gap, step = (
        n.tmp("bs", (c,)),
        n.tmp("bm", (c,)),
        n.tmp("gap", (c,)),
        n.tmp("step", (c,)),
    )
    return n.built(
        ir.accum(total, "add", x, spec="nc->c", initialize_neutral=False),
        ir.accum(count, "add", one, initialize_neutral=False),
        ir.binop(mean, "div", total, count),
        ir.accum(bs, "add", x, spec="nc->c"),
        ir.binop(bm, "mul", bs, inv_b),
        ir.binop(gap, "sub", bm, ema),
        ir.binop(step, "mul", gap, alpha),
        ir.binop(ema, "add", ema, step),
    )


def running_mean_numpy(state: State) -> State:
    s = dict(state)
    x = state["x"]
    s["total"] = state["total"] + x.sum(0)
    s["count"] = state["count"] + 1
    s["mean"] = s["total"] / s["count"]
    s["ema"] = state["ema"] + float(state["alpha"]) * (x.mean(0) - state["ema"])
    return s


def _running_feeds() -> tuple[Mapping[str, np.ndarray], ...]:
    rng = np.random.default_rng(60)
    # Run 1 uses the initial batch; runs 2-4 get new batches from the host.
    return ({}, *({"x": rng.uniform(-1, 1, RUNNING_SHAPE)} for _ in range(3)))


WORKLOADS: tuple[Workload, ...] = (
    Workload(
        "mlp_mse_step",
        lambda: mlp_training_step("mse"),
        mlp_step_numpy("mse"),
        ("loss", "w1", "b1", "w2", "b2"),
        runs=3,
    ),
    Workload(
        "mlp_xent_step",
        lambda: mlp_training_step("xent"),
        mlp_step_numpy("xent"),
        ("loss", "w1", "b1", "w2", "b2"),
        runs=3,
    ),
    Workload(
        "cnn_xent_step",
        cnn_training_step,
        cnn_step_numpy,
        ("loss", "w1", "b1", "w2", "b2", "wd", "bd"),
        runs=3,
    ),
    Workload("layer_norm", layer_norm, layer_norm_numpy, ("y",)),
    Workload("softmax", softmax, softmax_numpy, ("y",)),
    Workload("attention", attention, attention_numpy, ("o",)),
    Workload("row_centring", row_centring, row_centring_numpy, ("y",), runs=2),
    Workload(
        "running_mean",
        running_mean,
        running_mean_numpy,
        ("total", "count", "mean", "ema"),
        runs=4,
        feeds=_running_feeds(),
    ),
)
"""The catalogue, run by ``tests/test_workloads.py`` on every backend."""


__all__ = [
    "CNN_DIMS",
    "MLP_DIMS",
    "WORKLOADS",
    "Built",
    "Workload",
    "attention",
    "cnn_step_numpy",
    "cnn_training_step",
    "cnn_training_step_parts",
    "layer_norm",
    "mlp_step_numpy",
    "mlp_training_step",
    "row_centring",
    "running_mean",
    "softmax",
]
