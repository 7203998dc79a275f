"""The program whose compile time issue 38 follows: an L-layer MLP training step (batch 32,
width 64, tanh; forward, mean-squared-error gradient, backward and SGD update in one block, 13
statements a layer), as arrayjit nodes (:func:`mlp_step`) and as the same step in ``jax.numpy``
(:func:`jax_mlp_step`: the same statements, the backward pass written out, not taken by
``jax.grad``). ``tools/compile_scaling.py`` and ``conformance/benchmarks/test_bench_compile.py``
compile it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from arrayjit_ir import ir
from arrayjit_ir.assignments import Assignment
from arrayjit_tnode import Tnode

BATCH, WIDTH = 32, 64


def mlp_step(layers: int, edited: int | None = None, tag: str = "") -> tuple[Assignment, int]:
    """The L-layer training step and its number of statements. Layer ``edited`` (if given)
    subtracts its bias instead of adding it: the one-layer edit whose recompile the benchmark
    times. Every node's label starts with ``tag`` (names in the generated source too: a
    driver's kernel cache keyed by the source cannot serve one tag's step to another's)."""

    def node(label: str, dims: tuple[int, ...], hosted: bool = False) -> Tnode:
        return Tnode.create(dims, label=f"{tag}{label}", hosted=hosted)

    x = node("x", (BATCH, WIDTH), hosted=True)
    target = node("target", (BATCH, WIDTH), hosted=True)
    rate, inv_b, one = (node(n, (), hosted=True) for n in ("lr", "inv_b", "one"))
    ws = [node(f"w{k}", (WIDTH, WIDTH), hosted=True) for k in range(layers)]
    bs = [node(f"b{k}", (WIDTH,), hosted=True) for k in range(layers)]
    stmts: list[Assignment] = []
    hs = [x]
    for k in range(layers):  # forward
        z0, z, h = (
            node(f"z0_{k}", (BATCH, WIDTH)),
            node(f"z{k}", (BATCH, WIDTH)),
            node(f"h{k}", (BATCH, WIDTH)),
        )
        stmts += [
            ir.accum(z0, "add", hs[-1], ws[k], op="mul", spec="bi,ih->bh"),
            ir.binop(z, "sub" if k == edited else "add", z0, bs[k]),
            ir.unop(h, "tanh", z),
        ]
        hs.append(h)
    d, dh = node("d", (BATCH, WIDTH)), node(f"dh{layers - 1}", (BATCH, WIDTH))
    stmts += [ir.binop(d, "sub", hs[-1], target), ir.binop(dh, "mul", d, inv_b)]
    for k in reversed(range(layers)):  # backward and update
        h = hs[k + 1]
        hsq, omh, dz = (node(f"{n}{k}", (BATCH, WIDTH)) for n in ("hsq", "omh", "dz"))
        g, gb = node(f"g{k}", (WIDTH, WIDTH)), node(f"gb{k}", (WIDTH,))
        s, sb = node(f"s{k}", (WIDTH, WIDTH)), node(f"sb{k}", (WIDTH,))
        stmts += [
            ir.binop(hsq, "mul", h, h),
            ir.binop(omh, "sub", one, hsq),
            ir.binop(dz, "mul", dh, omh),
            ir.accum(g, "add", hs[k], dz, op="mul", spec="bi,bh->ih"),
            ir.accum(gb, "add", dz, spec="bh->h"),
        ]
        if k > 0:
            dh = node(f"dh{k - 1}", (BATCH, WIDTH))
            stmts.append(ir.accum(dh, "add", dz, ws[k], op="mul", spec="bh,ih->bi"))
        stmts += [
            ir.binop(s, "mul", g, rate),
            ir.binop(ws[k], "sub", ws[k], s),
            ir.binop(sb, "mul", gb, rate),
            ir.binop(bs[k], "sub", bs[k], sb),
        ]
    return ir.block(*stmts), len(stmts)


def jax_mlp_step(jax: Any, layers: int) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """The same step in ``jax.numpy`` (a new function object each call, so that ``jax.jit``
    compiles it afresh) and example arguments for ``jax.jit(step).lower(*args)``: ``(x,
    target, ws, bs)``, returning the updated ``(ws, bs)``."""
    jnp = jax.numpy
    rate, inv_b = 0.05, 1.0 / BATCH

    def step(x: Any, target: Any, ws: list[Any], bs: list[Any]) -> tuple[Any, Any]:
        hs = [x]
        for w, b in zip(ws, bs, strict=True):
            hs.append(jnp.tanh(hs[-1] @ w + b))
        dh = (hs[-1] - target) * inv_b
        new_ws, new_bs = list(ws), list(bs)
        for k in reversed(range(len(ws))):
            dz = dh * (1.0 - hs[k + 1] * hs[k + 1])
            g, gb = hs[k].T @ dz, dz.sum(axis=0)
            dh = dz @ ws[k].T
            new_ws[k] = ws[k] - g * rate
            new_bs[k] = bs[k] - gb * rate
        return new_ws, new_bs

    f32 = jnp.float32
    args = (
        jnp.zeros((BATCH, WIDTH), f32),
        jnp.zeros((BATCH, WIDTH), f32),
        [jnp.zeros((WIDTH, WIDTH), f32) for _ in range(layers)],
        [jnp.zeros((WIDTH,), f32) for _ in range(layers)],
    )
    return step, args
