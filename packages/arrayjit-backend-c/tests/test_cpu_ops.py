"""Every op on every precision, and a few compositions, on both CPU backends under both
schedulers, against the reference interpreter (and numpy)."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cpu_helpers import BINOPS, FLOATS, INTS, UNOPS, compare, run_both

from arrayjit_backends import fresh_backend
from arrayjit_ir import ir
from arrayjit_tnode import Tnode

RNG = np.random.default_rng(0)


@pytest.fixture(params=["sync_cc", "multicore_cc", "sync_llvm", "multicore_llvm"])
def backend(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Any]:
    monkeypatch.setenv("ARRAYJIT_CACHE_DIR", str(tmp_path))
    be = fresh_backend(request.param)
    be.initialize()
    yield be
    be.finalize()


def unop_inputs(op: str, prec: str, n: int) -> np.ndarray:
    if prec in INTS:
        lo = 0 if prec in ("byte", "uint16", "uint32", "uint64") else -5
        return RNG.integers(lo, 9, n)
    if op in ("log", "log2", "sqrt", "recip_sqrt"):
        return RNG.uniform(0.1, 3, n)
    return RNG.uniform(-3, 3, n)


@pytest.mark.parametrize("op", UNOPS)
@pytest.mark.parametrize("prec", FLOATS + INTS)
def test_unops(backend: Any, op: str, prec: str) -> None:
    x = Tnode.create((16,), prec=prec, label="x", hosted=True)
    y = Tnode.create((16,), prec=prec, label="y", hosted=True)
    got, ref = run_both(backend, ir.unop(y, op, x), {x: unop_inputs(op, prec, 16)}, y)
    compare(got, ref, prec)


@pytest.mark.parametrize("op", BINOPS)
@pytest.mark.parametrize("prec", FLOATS + INTS)
def test_binops(backend: Any, op: str, prec: str) -> None:
    a = Tnode.create((3, 5), prec=prec, label="a", hosted=True)
    b = Tnode.create((5,), prec=prec, label="b", hosted=True)
    y = Tnode.create((3, 5), prec=prec, label="y", hosted=True)
    va: np.ndarray
    vb: np.ndarray
    if prec in FLOATS:
        va, vb = RNG.uniform(-3, 3, (3, 5)), RNG.uniform(0.5, 3, 5)
        if op == "pow":
            va = np.abs(va)
    else:
        va, vb = RNG.integers(0, 9, (3, 5)), RNG.integers(0, 4, 5)
        if op == "pow":
            vb = vb % 3
    got, ref = run_both(backend, ir.binop(y, op, a, b), {a: va, b: vb}, y)
    compare(got, ref, prec)


def test_ternops_matmul_reductions(backend: Any) -> None:
    c, a, b = (Tnode.create((4, 6), label=n, hosted=True) for n in ("c", "a", "b"))
    w, f = (
        Tnode.create((4, 6), label="w", hosted=True),
        Tnode.create((4, 6), label="f", hosted=True),
    )
    vals = {
        c: RNG.integers(0, 2, (4, 6)).astype(float),
        a: RNG.standard_normal((4, 6)),
        b: RNG.standard_normal((4, 6)),
    }
    got, ref = run_both(backend, ir.ternop(w, "where", c, a, b), vals, w)
    compare(got, ref, "single")
    got, ref = run_both(backend, ir.ternop(f, "fma", a, b, c), vals, f)
    compare(got, ref, "single")
    x, m = (
        Tnode.create((5, 7), label="x", hosted=True),
        Tnode.create((7, 3), label="m", hosted=True),
    )
    h, out = Tnode.create((5, 3), label="h"), Tnode.create((5, 3), label="out", hosted=True)
    comp = ir.block(ir.accum(h, "add", x, m, op="mul", spec="ik,kj->ij"), ir.unop(out, "relu", h))
    vx, vm = RNG.standard_normal((5, 7)), RNG.standard_normal((7, 3))
    got, _ = run_both(backend, comp, {x: vx, m: vm}, out)
    np.testing.assert_allclose(got, np.maximum(vx @ vm, 0), rtol=1e-5, atol=1e-6)
    s = Tnode.create((5,), label="s", hosted=True)
    got, _ = run_both(backend, ir.accum(s, "max", x, spec="ij->i"), {x: vx}, s)
    np.testing.assert_allclose(got, vx.max(1).astype(np.float32))
