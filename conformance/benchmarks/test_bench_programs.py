"""Whole programs as users write them, next to the same programs in numpy, in ``jax.jit`` on the
CPU (where jax is installed) and, on the ``cuda`` backend's groups, in CuPy (where CuPy is
installed): softmax, log-softmax with the negative log-likelihood of integer labels and layer
norm over the rows of a 2048x1024 matrix, an attention head, two MLP training steps (relu and
GELU(tanh), cross-entropy, SGD), an RNN over 8 time steps, and the elementwise transcendentals
``exp``, ``log``, ``tanh``, ``sin`` over 2^22 elements.

Each arrayjit program is one routine (:data:`PROGRAMS`: the builders of
``arrayjit_conformance.workloads`` where they exist, else written here the same way), checked
against a numpy reference in double precision after its first run, before it is timed; the
numpy, jax and CuPy rows are checked against the same reference. A primitive at the machine's
limit says little about a program with ``exp`` in it: these groups show what users get.

The numpy and CuPy rows run one array-API function (``xp`` is ``numpy`` or ``cupy``) on float32
inputs; jax runs the same function with ``jax.numpy`` (the MLP steps take their gradients with
``jax.value_and_grad`` instead), compiled before timing. The training steps feed their updated
parameters back, as a training loop does; every other program is a pure function of its inputs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import pytest

from arrayjit_conformance.benchmarking import (
    JAX_IMPL,
    cupy_or_skip,
    cupy_timed,
    handwritten,
    jax_or_skip,
    jax_timed,
    measure,
    runner,
)
from arrayjit_conformance.harness import new_context
from arrayjit_conformance.workloads import (
    Built,
    attention,
    attention_numpy,
    layer_norm,
    layer_norm_numpy,
    mlp_step_numpy,
    mlp_training_step,
    softmax,
    softmax_numpy,
    softmax_xent,
)
from arrayjit_ir import ir
from arrayjit_ir.assignments import Assignment
from arrayjit_tnode import Tnode

Values = dict[str, Any]

ROWS, COLS = 2048, 1024
"""The matrix of the row-wise programs (softmax, log-softmax + NLL, layer norm)."""
HEAD_S, HEAD_D = 512, 64
"""Sequence length and head dimension of the attention head."""
MLP_DIMS = (256, 784, 256, 10)
"""Batch, inputs, hidden and outputs of the MLP training steps."""
MLP_LR = 0.05
RNN_BATCH, RNN_IN, RNN_HIDDEN, RNN_STEPS = 64, 128, 256, 8
TRANSCENDENTAL_K = 22
"""2^22 float32 elements for each elementwise transcendental."""
GELU_C, GELU_K = math.sqrt(2 / math.pi), 0.044715
"""``gelu(z) = z/2 (1 + tanh(GELU_C (z + GELU_K z^3)))`` (the tanh approximation)."""
MLP_PARAMS = ("w1", "b1", "w2", "b2")


class _Nodes:
    """The nodes of one program: hosted ones with their values (rounded to the node's
    precision, kept in float64 for the reference), temporaries without."""

    def __init__(self) -> None:
        self.tns: dict[str, Tnode] = {}
        self.values: dict[str, np.ndarray] = {}

    def hosted(self, name: str, value: np.ndarray | float, prec: str = "single") -> Tnode:
        v = np.asarray(value)
        tn = Tnode.create(v.shape, prec=prec, label=name, hosted=True)
        self.tns[name] = tn
        v = v.astype(tn.prec.numpy_dtype)
        self.values[name] = v.astype(np.float64) if v.dtype.kind == "f" else v
        return tn

    def tmp(self, name: str, dims: tuple[int, ...], prec: str = "single") -> Tnode:
        tn = Tnode.create(dims, prec=prec, label=name)
        self.tns[name] = tn
        return tn

    def built(self, *stmts: Assignment) -> Built:
        return Built(self.tns, ir.block(*stmts), self.values)


# ---- log-softmax and the negative log-likelihood of integer labels ----


def log_softmax_nll(rows: int = ROWS, cols: int = COLS, seed: int = 21) -> Built:
    """``loss = -mean_r logp[r, labels[r]]`` with ``logp = x - logsumexp(x)`` over each row:
    the labels are int32, picked through ``labels[r] == c`` against a range over the columns."""
    rng = np.random.default_rng(seed)
    n = _Nodes()
    x = n.hosted("x", rng.uniform(-4, 4, (rows, cols)))
    labels = n.hosted("labels", rng.integers(0, cols, rows), prec="int32")
    neg_inv_r = n.hosted("neg_inv_r", -1.0 / rows)
    cls, hit = n.tmp("cls", (cols,), prec="int32"), n.tmp("hit", (rows, cols))
    m, e, se = n.tmp("m", (rows,)), n.tmp("e", (rows, cols)), n.tmp("se", (rows,))
    lse, logp = n.tmp("lse", (rows,)), n.tmp("logp", (rows, cols))
    picked, total, loss = n.tmp("picked", (rows,)), n.tmp("total", ()), n.hosted("loss", 0.0)
    return n.built(
        ir.accum(m, "max", x, spec="rc->r"),
        ir.binop(e, "sub", x, m, spec="rc,r->rc"),
        ir.unop(e, "exp", e),
        ir.accum(se, "add", e, spec="rc->r"),
        ir.unop(lse, "log", se),
        ir.binop(lse, "add", lse, m),
        ir.binop(logp, "sub", x, lse, spec="rc,r->rc"),
        ir.fetch(cls, ir.Range_over_offsets()),
        ir.binop(hit, "cmpeq", labels, cls, spec="r,c->rc"),
        ir.accum(picked, "add", hit, logp, op="mul", spec="rc,rc->r"),
        ir.accum(total, "add", picked, spec="r->"),
        ir.binop(loss, "mul", total, neg_inv_r),
    )


def _log_softmax_nll(xp: Any, v: Values) -> Values:
    x, labels = v["x"], v["labels"]
    m = x.max(1, keepdims=True)
    logp = x - m - xp.log(xp.exp(x - m).sum(1, keepdims=True))
    return {"loss": -logp[xp.arange(x.shape[0]), labels].mean()}


# ---- softmax, layer norm, attention (the workloads' builders) ----


def _softmax(xp: Any, v: Values) -> Values:
    x = v["x"]
    e = xp.exp(x - x.max(1, keepdims=True))
    return {"y": e / e.sum(1, keepdims=True)}


def _layer_norm(xp: Any, v: Values) -> Values:
    x = v["x"]
    mean = x.mean(1, keepdims=True)
    xc = x - mean
    var = (xc * xc).mean(1, keepdims=True)
    return {"y": xc / xp.sqrt(var + v["eps"]) * v["gamma"] + v["beta"]}


def _attention(xp: Any, v: Values) -> Values:
    s = v["q"] @ v["k"].T * v["scale"]
    e = xp.exp(s - s.max(1, keepdims=True))
    return {"o": e / e.sum(1, keepdims=True) @ v["v"]}


# ---- MLP training steps: relu (the workloads' builder) and GELU(tanh) ----


def gelu_mlp_training_step(
    dims: tuple[int, int, int, int] = MLP_DIMS, lr: float = MLP_LR, seed: int = 9
) -> Built:
    """One SGD step of the two-layer MLP of ``workloads.mlp_training_step("xent")`` (the same
    inputs) with ``gelu(z) = z/2 (1 + tanh(c (z + k z^3)))`` instead of relu: forward, mean
    softmax cross-entropy, backward (``gelu'(z) = (1 + t)/2 + z/2 (1 - t^2) c (1 + 3k z^2)``)
    and the update in place, as one block."""
    b, i, h, o = dims
    init = mlp_training_step("xent", dims, lr=lr, seed=seed).values
    n = _Nodes()
    x, w1, b1, w2, b2, target, rate, inv_b = (
        n.hosted(k, init[k]) for k in ("x", *MLP_PARAMS, "target", "lr", "inv_b")
    )
    constants = {"half": 0.5, "one": 1.0, "c": GELU_C, "k": GELU_K, "k3": 3 * GELU_K}
    half, one, c, k, k3 = (n.hosted(name, value) for name, value in constants.items())
    z0, z, z2, z3 = (
        n.tmp("z0", (b, h)),
        n.tmp("z", (b, h)),
        n.tmp("z2", (b, h)),
        n.tmp("z3", (b, h)),
    )
    u, t, opt, hz, hh = (n.tmp(name, (b, h)) for name in ("u", "t", "opt", "hz", "hh"))
    y0, y = n.tmp("y0", (b, o)), n.tmp("y", (b, o))
    loss = n.hosted("loss", 0.0)
    dy, dh = n.tmp("dy", (b, o)), n.tmp("dh", (b, h))
    gz, dg, dz = (n.tmp(name, (b, h)) for name in ("gz", "dg", "dz"))
    g2, gb2, g1, gb1 = (
        n.tmp("g2", (h, o)),
        n.tmp("gb2", (o,)),
        n.tmp("g1", (i, h)),
        n.tmp("gb1", (h,)),
    )
    forward = [
        ir.accum(z0, "add", x, w1, op="mul", spec="bi,ih->bh"),
        ir.binop(z, "add", z0, b1),
        ir.binop(z2, "mul", z, z),
        ir.binop(z3, "mul", z2, z),
        ir.binop(u, "mul", z3, k),
        ir.binop(u, "add", u, z),
        ir.binop(u, "mul", u, c),
        ir.unop(t, "tanh", u),
        ir.binop(opt, "add", t, one),
        ir.binop(hz, "mul", z, half),
        ir.binop(hh, "mul", hz, opt),
        ir.accum(y0, "add", hh, w2, op="mul", spec="bh,ho->bo"),
        ir.binop(y, "add", y0, b2),
    ]
    loss_stmts = softmax_xent(n.tmp, y, target, inv_b, loss, dy)
    backward = [
        ir.accum(g2, "add", hh, dy, op="mul", spec="bh,bo->ho"),
        ir.accum(gb2, "add", dy, spec="bo->o"),
        ir.accum(dh, "add", dy, w2, op="mul", spec="bo,ho->bh"),
        # gelu'(z) = opt/2 + hz (1 - t^2) c (1 + 3k z^2)
        ir.binop(gz, "mul", z2, k3),
        ir.binop(gz, "add", gz, one),
        ir.binop(gz, "mul", gz, c),
        ir.binop(dg, "mul", t, t),
        ir.binop(dg, "sub", one, dg),
        ir.binop(dg, "mul", dg, hz),
        ir.binop(dg, "mul", dg, gz),
        ir.binop(gz, "mul", opt, half),
        ir.binop(dg, "add", dg, gz),
        ir.binop(dz, "mul", dh, dg),
        ir.accum(g1, "add", x, dz, op="mul", spec="bi,bh->ih"),
        ir.accum(gb1, "add", dz, spec="bh->h"),
    ]
    update = [
        ir.binop(g1, "mul", g1, rate),
        ir.binop(w1, "sub", w1, g1),
        ir.binop(gb1, "mul", gb1, rate),
        ir.binop(b1, "sub", b1, gb1),
        ir.binop(g2, "mul", g2, rate),
        ir.binop(w2, "sub", w2, g2),
        ir.binop(gb2, "mul", gb2, rate),
        ir.binop(b2, "sub", b2, gb2),
    ]
    return n.built(*forward, *loss_stmts, *backward, *update)


def _mlp_step(xp: Any, v: Values, act: str) -> Values:
    """One SGD step as numpy users write it (the backward by hand); ``act``: relu or gelu."""
    x, w1, b1, w2, b2, t, lr = (v[k] for k in ("x", *MLP_PARAMS, "target", "lr"))
    batch = x.shape[0]
    z = x @ w1 + b1
    if act == "relu":
        h = xp.maximum(z, 0)
    else:
        th = xp.tanh(GELU_C * (z + GELU_K * z * z * z))
        h = 0.5 * z * (1 + th)
    y = h @ w2 + b2
    m = y.max(1, keepdims=True)
    e = xp.exp(y - m)
    se = e.sum(1, keepdims=True)
    loss = ((xp.log(se) + m)[:, 0] - (t * y).sum(1)).sum() / batch
    dy = (e / se - t) / batch
    dh = dy @ w2.T
    if act == "relu":
        dz = xp.where(z > 0, dh, 0)
    else:
        dz = dh * (0.5 * (1 + th) + 0.5 * z * (1 - th * th) * GELU_C * (1 + 3 * GELU_K * z * z))
    return {
        "loss": loss,
        "w1": w1 - lr * (x.T @ dz),
        "b1": b1 - lr * dz.sum(0),
        "w2": w2 - lr * (h.T @ dy),
        "b2": b2 - lr * dy.sum(0),
    }


def _mlp_step_jax(jax: Any, act: str) -> Callable[[Values], Values]:
    """The same step as jax users write it: the loss, its gradient by ``jax.value_and_grad``."""
    jnp = jax.numpy

    def loss_of(params: tuple[Any, ...], x: Any, target: Any) -> Any:
        w1, b1, w2, b2 = params
        z = x @ w1 + b1
        h = jax.nn.relu(z) if act == "relu" else jax.nn.gelu(z, approximate=True)
        return -jnp.mean(jnp.sum(target * jax.nn.log_softmax(h @ w2 + b2), axis=1))

    def step(v: Values) -> Values:
        params = tuple(v[k] for k in MLP_PARAMS)
        loss, grads = jax.value_and_grad(loss_of)(params, v["x"], v["target"])
        return {"loss": loss, **{k: p - v["lr"] * g for k, p, g in zip(MLP_PARAMS, params, grads)}}

    return step


# ---- an RNN over a few time steps ----


def rnn_forward(
    batch: int = RNN_BATCH,
    n_in: int = RNN_IN,
    hidden: int = RNN_HIDDEN,
    steps: int = RNN_STEPS,
    seed: int = 22,
) -> Built:
    """``h_t = tanh(x_t wx + h_(t-1) wh + b)`` for ``steps`` steps from ``h0``, unrolled in one
    block (a Python loop writing the statements of each step); ``h`` is the last state."""
    rng = np.random.default_rng(seed)
    n = _Nodes()
    xs = [n.hosted(f"x{s}", rng.uniform(-1, 1, (batch, n_in))) for s in range(steps)]
    wx = n.hosted("wx", rng.uniform(-1, 1, (n_in, hidden)) / np.sqrt(n_in))
    wh = n.hosted("wh", rng.uniform(-1, 1, (hidden, hidden)) / np.sqrt(hidden))
    b = n.hosted("b", rng.uniform(-0.1, 0.1, hidden))
    prev = n.hosted("h0", rng.uniform(-0.5, 0.5, (batch, hidden)))
    last = n.hosted("h", np.zeros((batch, hidden)))
    stmts: list[Assignment] = []
    for s, x in enumerate(xs):
        xw, hw, z = (n.tmp(f"{name}{s}", (batch, hidden)) for name in ("xw", "hw", "z"))
        h = last if s == steps - 1 else n.tmp(f"h{s + 1}", (batch, hidden))
        stmts += [
            ir.accum(xw, "add", x, wx, op="mul", spec="bi,ih->bh"),
            ir.accum(hw, "add", prev, wh, op="mul", spec="bk,kh->bh"),
            ir.binop(z, "add", xw, hw),
            ir.binop(z, "add", z, b),
            ir.unop(h, "tanh", z),
        ]
        prev = h
    return n.built(*stmts)


def _rnn(xp: Any, v: Values) -> Values:
    h = v["h0"]
    for s in range(RNN_STEPS):
        h = xp.tanh(v[f"x{s}"] @ v["wx"] + h @ v["wh"] + v["b"])
    return {"h": h}


# ---- elementwise transcendentals ----


def elementwise(op: str, lo: float, hi: float, k: int = TRANSCENDENTAL_K, seed: int = 23) -> Built:
    """``y = op(x)`` over 2^k elements drawn uniformly from ``[lo, hi)``."""
    n = _Nodes()
    x = n.hosted("x", np.random.default_rng(seed).uniform(lo, hi, 1 << k))
    return n.built(ir.unop(n.hosted("y", np.zeros(1 << k)), op, x))


def _elementwise(op: str, xp: Any, v: Values) -> Values:
    return {"y": getattr(xp, op)(v["x"])}


# ---- the catalogue ----


@dataclass(frozen=True)
class Program:
    """One whole program and its baselines.

    ``build`` makes the arrayjit routine's nodes, block and inputs; ``reference`` gives the
    observed outputs after one run from those inputs in double precision; ``xp`` is the program
    as array code for ``xp`` = numpy (and cupy, where ``cupy``), run on float32 inputs; ``jax``
    gives the function jitted for the jax row (default: ``xp`` with ``jax.numpy``). ``carried``
    outputs replace the inputs of the same name after each run (the parameters of a training
    step) and are checked through their change (``lr`` times the gradient), not their value.
    Outputs compare within ``rtol`` and ``atol`` times the largest magnitude of the reference."""

    group: str
    build: Callable[[], Built]
    reference: Callable[[Values], Values]
    xp: Callable[[Any, Values], Values]
    observed: tuple[str, ...]
    rtol: float
    atol: float
    rounds: int
    nbytes: int = 0
    carried: tuple[str, ...] = ()
    jax: Callable[[Any], Callable[[Values], Values]] | None = None
    cupy: bool = False


def _float64(xp: Callable[[Any, Values], Values]) -> Callable[[Values], Values]:
    """The reference of a program that has no other: its array code in numpy on the float64
    inputs."""
    return partial(xp, np)


ROW_BYTES = 2 * ROWS * COLS * 4
"""A read of the matrix and a write of one as large: the traffic a row-wise program needs."""
ELEMENTWISE_BYTES = 8 << TRANSCENDENTAL_K
MLP_SHAPE = "batch {}, {}-{}-{}".format(*MLP_DIMS)
TRANSCENDENTALS = {
    "exp": (-10.0, 10.0, 0.0),  # relative error only: the values span 4.5e-5 to 2.2e4
    "log": (1e-3, 1e3, 1e-6),
    "tanh": (-6.0, 6.0, 1e-6),
    "sin": (-32.0, 32.0, 1e-6),
}
"""Each transcendental's input range and its ``atol`` (times the largest value)."""

PROGRAMS: dict[str, Program] = {
    "softmax": Program(
        f"softmax over rows {ROWS}x{COLS} f32",
        partial(softmax, ROWS, COLS, seed=24),
        softmax_numpy,
        _softmax,
        ("y",),
        rtol=1e-4,
        atol=1e-6,
        rounds=30,
        nbytes=ROW_BYTES,
        cupy=True,
    ),
    "log_softmax_nll": Program(
        f"log-softmax + NLL of int labels over rows {ROWS}x{COLS} f32",
        log_softmax_nll,
        _float64(_log_softmax_nll),
        _log_softmax_nll,
        ("loss",),
        rtol=1e-4,
        atol=0.0,
        rounds=30,
        nbytes=ROWS * COLS * 4,
    ),
    "layer_norm": Program(
        f"layer norm over rows {ROWS}x{COLS} f32",
        partial(layer_norm, ROWS, COLS, seed=25),
        layer_norm_numpy,
        _layer_norm,
        ("y",),
        rtol=1e-4,
        atol=1e-5,
        rounds=30,
        nbytes=ROW_BYTES,
        cupy=True,
    ),
    "attention": Program(
        f"attention head S={HEAD_S} D={HEAD_D} f32",
        partial(attention, HEAD_S, HEAD_S, HEAD_D, seed=26),
        attention_numpy,
        _attention,
        ("o",),
        rtol=1e-4,
        atol=1e-5,
        rounds=50,
    ),
    "mlp_relu": Program(
        f"MLP training step (one routine) {MLP_SHAPE}, relu, cross-entropy f32",
        partial(mlp_training_step, "xent", MLP_DIMS, lr=MLP_LR, seed=9),
        mlp_step_numpy("xent"),
        partial(_mlp_step, act="relu"),
        ("loss", *MLP_PARAMS),
        rtol=2e-3,
        atol=2e-4,
        rounds=30,
        carried=MLP_PARAMS,
        jax=partial(_mlp_step_jax, act="relu"),
    ),
    "mlp_gelu": Program(
        f"MLP training step (one routine) {MLP_SHAPE}, gelu(tanh), cross-entropy f32",
        gelu_mlp_training_step,
        _float64(partial(_mlp_step, act="gelu")),
        partial(_mlp_step, act="gelu"),
        ("loss", *MLP_PARAMS),
        rtol=2e-3,
        atol=2e-4,
        rounds=30,
        carried=MLP_PARAMS,
        jax=partial(_mlp_step_jax, act="gelu"),
    ),
    "rnn": Program(
        f"RNN forward, {RNN_STEPS} steps, batch {RNN_BATCH}, {RNN_IN}-{RNN_HIDDEN} tanh f32",
        rnn_forward,
        _float64(_rnn),
        _rnn,
        ("h",),
        rtol=1e-4,
        atol=1e-5,
        rounds=50,
    ),
    **{
        op: Program(
            f"{op} 2^{TRANSCENDENTAL_K} f32",
            partial(elementwise, op, lo, hi),
            _float64(partial(_elementwise, op)),
            partial(_elementwise, op),
            ("y",),
            rtol=1e-5,
            atol=atol,
            rounds=20,
            nbytes=ELEMENTWISE_BYTES,
            cupy=True,
        )
        for op, (lo, hi, atol) in TRANSCENDENTALS.items()
    },
}
"""The whole programs by name (the last part of each test id)."""


def _float32(values: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The inputs as the float32 rows get them (integer inputs unchanged)."""
    return {k: v.astype(np.float32) if v.dtype.kind == "f" else v for k, v in values.items()}


def _check(name: str, got: Mapping[str, Any], initial: Mapping[str, np.ndarray]) -> None:
    """``got`` (one run's observed outputs) against the program's reference from ``initial``."""
    prog = PROGRAMS[name]
    want = prog.reference(dict(initial))
    for key in prog.observed:
        g, w = np.asarray(got[key], np.float64), np.asarray(want[key], np.float64)
        if key in prog.carried:  # the update: lr times the gradient
            g, w = g - initial[key], w - initial[key]
        np.testing.assert_allclose(
            g, w, rtol=prog.rtol, atol=prog.atol * float(np.abs(w).max()), err_msg=f"{name}: {key}"
        )


def _stepping(
    fn: Callable[[Values], Values], inputs: Values, carried: tuple[str, ...]
) -> Callable[[], Values]:
    """A call of ``fn`` on ``inputs`` that feeds the ``carried`` outputs back into them."""

    def run() -> Values:
        out = fn(inputs)
        inputs.update((k, out[k]) for k in carried)
        return out

    return run


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_program(benchmark: Any, backend: Any, name: str) -> None:
    """The arrayjit routine: its first run checked against the reference, then timed."""
    prog = PROGRAMS[name]
    benchmark.group = prog.group
    built = prog.build()
    built.set_host_values()
    routine = backend.link(new_context(backend), backend.compile(built.comp, name=name))
    run = runner(backend, routine)
    run()
    for key in prog.observed:
        backend.to_host(routine.context, built.tns[key])
    _check(name, {k: built.tns[k].get_values() for k in prog.observed}, built.values)
    measure(benchmark, run, backend.name, prog.rounds, prog.nbytes)


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_program_numpy(benchmark: Any, name: str) -> None:
    prog = PROGRAMS[name]
    benchmark.group = prog.group
    initial = prog.build().values
    run = _stepping(partial(prog.xp, np), _float32(initial), prog.carried)
    _check(name, run(), initial)
    measure(benchmark, run, "numpy", prog.rounds, prog.nbytes)


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_program_jax(benchmark: Any, name: str) -> None:
    """``jax.jit`` of the program on jax's CPU device, compiled before timing (skips where jax
    is not installed)."""
    jax = jax_or_skip()
    prog = PROGRAMS[name]
    benchmark.group = prog.group
    initial = prog.build().values
    fn = prog.jax(jax) if prog.jax is not None else partial(prog.xp, jax.numpy)
    run = jax_timed(jax, fn, _float32(initial), prog.carried)
    _check(name, run(), initial)
    measure(benchmark, run, JAX_IMPL, prog.rounds, prog.nbytes)


@pytest.mark.parametrize("name", [name for name, prog in PROGRAMS.items() if prog.cupy])
def test_program_cupy(benchmark: Any, name: str) -> None:
    """The program in CuPy (one kernel per operation), the ``cuda`` rows' hand-written
    baseline (skips where CuPy or a GPU is absent)."""
    cp = cupy_or_skip()
    prog = PROGRAMS[name]
    benchmark.group = prog.group
    initial = prog.build().values
    inputs = {k: cp.asarray(v) for k, v in _float32(initial).items()}
    fn = partial(prog.xp, cp)
    _check(name, {k: cp.asnumpy(v) for k, v in fn(inputs).items()}, initial)
    handwritten(benchmark, "cuda")
    measure(benchmark, cupy_timed(cp, lambda: fn(inputs)), "cupy", prog.rounds, prog.nbytes)
