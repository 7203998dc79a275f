"""Every op in every precision the device supports, against the reference interpreter.

Each test builds one routine holding a statement per op (one PoCL build per precision instead of
one per op); each statement is its own kernel, and each output is compared on its own.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from opencl_helpers import (
    BINOPS,
    FLOATS,
    INTS,
    POSITIVE_ONLY,
    SIGNED,
    UNOPS,
    compare,
    node,
    require_prec,
    run_batch,
)

from arrayjit_ir import ir

RNG = np.random.default_rng(7)


def _ints(prec: str, shape: tuple[int, ...], lo: int, hi: int) -> np.ndarray:
    return RNG.integers(lo if prec in SIGNED else 0, hi, shape)


@pytest.mark.parametrize("prec", FLOATS + INTS)
def test_unops(backend: Any, prec: str) -> None:
    require_prec(backend, prec)
    shape = (4, 8)
    xs, xp = node(shape, "xs", prec), node(shape, "xp", prec)
    if prec in FLOATS:
        vs, vp = RNG.uniform(-3, 3, shape), RNG.uniform(0.1, 3, shape)
        vs[0, :4] = [0.0, 1.0, -0.5, 2.5]  # ties and edges of relu, satur01, trunc, not
    else:
        vs, vp = _ints(prec, shape, -5, 9), RNG.integers(0, 9, shape)  # log 0: 0, as the oracle
    outs = {op: node(shape, f"y_{op}", prec) for op in UNOPS}
    comp = ir.block(*(ir.unop(y, op, xp if op in POSITIVE_ONLY else xs) for op, y in outs.items()))
    results = run_batch(backend, comp, {xs: vs, xp: vp}, list(outs.values()), name=f"u_{prec}")
    for op, (got, ref) in zip(outs, results):
        compare(got, ref, prec, f"{op} in {prec}")


@pytest.mark.parametrize("prec", FLOATS + INTS)
def test_binops_broadcasting(backend: Any, prec: str) -> None:
    require_prec(backend, prec)
    a, b = node((3, 5), "a", prec), node((5,), "b", prec)  # b broadcasts along the rows
    ap, bp = node((3, 5), "ap", prec), node((5,), "bp", prec)  # operands of pow
    if prec in FLOATS:
        va, vb = RNG.uniform(-3, 3, (3, 5)), RNG.uniform(0.5, 3, 5)
        va[0, :3] = [0.0, 0.5, 1.0]  # the gates' edges
        vap, vbp = np.abs(va), vb
    else:
        va, vb = _ints(prec, (3, 5), -9, 9), RNG.integers(0, 4, 5)
        vb[0] = 0  # integer division and remainder by zero give 0
        vap, vbp = np.abs(va), vb % 3
    outs = {op: node((3, 5), f"y_{op}", prec) for op in BINOPS}
    comp = ir.block(
        *(ir.binop(y, op, *((ap, bp) if op == "pow" else (a, b))) for op, y in outs.items())
    )
    inputs = {a: va, b: vb, ap: vap, bp: vbp}
    results = run_batch(backend, comp, inputs, list(outs.values()), name=f"b_{prec}")
    for op, (got, ref) in zip(outs, results):
        compare(got, ref, prec, f"{op} in {prec}")


@pytest.mark.parametrize("prec", [*FLOATS, "int32", "uint16"])
def test_ternops(backend: Any, prec: str) -> None:
    require_prec(backend, prec)
    c, a, b = (node((4, 6), n, prec) for n in ("c", "a", "b"))
    w, f = node((4, 6), "w", prec), node((4, 6), "f", prec)
    if prec in FLOATS:
        vals = [RNG.integers(0, 2, (4, 6)), RNG.uniform(-2, 2, (4, 6)), RNG.uniform(-2, 2, (4, 6))]
    else:
        vals = [
            RNG.integers(0, 2, (4, 6)),
            RNG.integers(0, 50, (4, 6)),
            RNG.integers(0, 50, (4, 6)),
        ]
    comp = ir.block(ir.ternop(w, "where", c, a, b), ir.ternop(f, "fma", a, b, c))
    results = run_batch(backend, comp, dict(zip((c, a, b), vals)), [w, f], name=f"t_{prec}")
    for what, (got, ref) in zip(("where", "fma"), results):
        compare(got, ref, prec, f"{what} in {prec}")
