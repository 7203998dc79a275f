"""The packed matmul of the cc and llvm backends (:mod:`arrayjit_backend_c.cpu.matmul`): used
for plain matmuls, bit for bit the interpreter's result over the unoptimized code on shapes that
fill no block or tile evenly, and not used for what is no plain float matmul."""

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from arrayjit_backend_c.cpu import matmul as cpu_matmul
from arrayjit_conformance.harness import hosted, run_against_interpreter, run_once
from arrayjit_ir import ir
from arrayjit_tnode import Prec, Tnode

BACKENDS = ["sync_cc", "multicore_cc", "sync_llvm", "multicore_llvm"]
"""The backends every test taking the ``backend`` fixture runs on (see conftest.py)."""

MARKERS = {"cc": "aj_mm_block_", "llvm": "@aj_mm_block_"}
"""Text that only the packed matmul puts into a kernel's source."""

Build = Callable[[Tnode, Tnode, Tnode], Any]

_ORACLE: dict[tuple[Any, ...], np.ndarray] = {}
"""The interpreter's result (over the unoptimized code) of each case, computed on the first
backend that runs it: the inputs depend only on the case, and the reference run is the slow
part of these tests."""

SPECS: dict[str, tuple[str, str, Build]] = {
    # name: (x's axes, w's axes, the computation of h from x and w)
    "ik,kj": ("ik", "kj", lambda h, x, w: ir.accum(h, "add", x, w, op="mul", spec="ik,kj->ij")),
    "ki,kj": ("ki", "kj", lambda h, x, w: ir.accum(h, "add", x, w, op="mul", spec="ki,kj->ij")),
    "ik,jk": ("ik", "jk", lambda h, x, w: ir.accum(h, "add", x, w, op="mul", spec="ik,jk->ij")),
    # w first: fma(w, x, cell), the operands in the IR's order
    "kj,ik": ("ik", "kj", lambda h, x, w: ir.accum(h, "add", w, x, op="mul", spec="kj,ik->ij")),
    # no zeroing: each cell starts from its stored value (some of them -0.0)
    "into": (
        "ik",
        "kj",
        lambda h, x, w: ir.accum(
            h, "add", x, w, op="mul", spec="ik,kj->ij", initialize_neutral=False
        ),
    ),
}


def _dims(axes: str, m: int, k: int, n: int) -> tuple[int, ...]:
    return tuple({"i": m, "k": k, "j": n}[a] for a in axes)


def _run(
    backend: Any, spec: str, m: int, k: int, n: int, prec: str = "single", seed: int = 0
) -> str:
    """Run ``spec`` on ``backend`` and on the interpreter over the unoptimized code; assert the
    bits agree; return the kernel's source."""
    x_axes, w_axes, build = SPECS[spec]
    rng = np.random.default_rng(seed)
    x = hosted(_dims(x_axes, m, k, n), "x", prec)
    w = hosted(_dims(w_axes, m, k, n), "w", prec)
    h = hosted((m, n), "h", prec)
    xv, wv = rng.standard_normal(x.dims), rng.standard_normal(w.dims)
    # Zeros, and a start of -0.0 in some cells: fma(0, y, -0.0) is +0.0, a padded step would show.
    xv[rng.random(x.dims) < 0.1] = 0.0
    hv = rng.standard_normal((m, n))
    hv[rng.random((m, n)) < 0.3] = -0.0
    comp = build(h, x, w)
    inputs = {x: xv, w: wv, h: hv}
    key = (spec, m, k, n, prec, seed)
    if key not in _ORACLE:  # the interpreters' bits, once per case (they are slow)
        [(got, _ORACLE[key])] = run_against_interpreter(backend, comp, inputs, [h])
    else:
        [got] = run_once(backend, comp, inputs, [h])
    ref = _ORACLE[key]
    dtype = np.float32 if prec == "single" else np.float64
    got, ref = np.asarray(got, dtype), np.asarray(ref, dtype)
    bits = np.uint32 if prec == "single" else np.uint64
    differ = np.flatnonzero(got.view(bits) != ref.view(bits))
    assert differ.size == 0, (
        f"{differ.size} of {got.size} cells differ from the interpreter's bits, first at "
        f"{np.unravel_index(differ[0], got.shape)}: {got.flat[differ[0]]!r} against "
        f"{ref.flat[differ[0]]!r}"
    )
    source: str = backend.compile(comp, name="mm_source").native.source
    return source


def _marker(backend: Any) -> str:
    return MARKERS["llvm" if "llvm" in backend.name else "cc"]


@pytest.mark.parametrize(
    ("m", "k", "n"),
    [(37, 29, 41), (1, 300, 200), (200, 300, 1), (200, 1, 200), (40, 0, 50), (7, 64, 100)],
)
def test_odd_shapes_bit_exact(backend: Any, m: int, k: int, n: int) -> None:
    source = _run(backend, "ik,kj", m, k, n)
    # With one step the optimizer leaves no k loop (a product, fused with the zeroing), with
    # none no loop at all: no matmul any more, and the loop nest's bits.
    assert (_marker(backend) in source) == (k > 1)


@pytest.fixture
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks small enough that a shape the interpreter runs quickly crosses every block edge
    (``k`` blocks of 8, row blocks of 12, column blocks of ``2 * NR + 8`` for float32, 40 or
    72: two full column panels, then a partial one, and not a multiple of a tile's columns in
    either precision), and no size threshold."""
    monkeypatch.setattr(cpu_matmul, "KC", 8)
    monkeypatch.setattr(cpu_matmul, "MC", 12)
    monkeypatch.setattr(cpu_matmul, "NC", 2 * cpu_matmul.nr_of(Prec.single) + 8)
    monkeypatch.setattr(cpu_matmul, "MATMUL_MIN_WORK", 1)


@pytest.mark.parametrize(
    ("spec", "prec", "m", "k", "n"),
    [
        ("ik,kj", "single", 23, 19, 45),
        ("ik,kj", "single", 23, 19, 90),  # full column panels past a block's first
        ("ik,kj", "double", 23, 19, 45),
        ("ik,kj", "single", 1, 17, 50),
        ("ik,kj", "double", 25, 9, 1),
        ("ki,kj", "single", 23, 19, 45),
        ("ik,jk", "double", 23, 19, 45),
        ("kj,ik", "single", 23, 19, 45),
        ("into", "single", 23, 19, 45),
        ("into", "double", 25, 9, 1),
    ],
)
@pytest.mark.usefixtures("small_blocks")
def test_blocks_bit_exact(backend: Any, spec: str, prec: str, m: int, k: int, n: int) -> None:
    source = _run(backend, spec, m, k, n, prec, seed=m * 1000 + k)
    assert _marker(backend) in source


def test_non_matmuls_keep_the_loop_nest(backend: Any) -> None:
    marker = _marker(backend)
    # Below the size threshold.
    x, w, h = hosted((4, 5), "x"), hosted((5, 6), "w"), hosted((4, 6), "h")
    code = backend.compile(ir.accum(h, "add", x, w, op="mul", spec="ik,kj->ij"), name="small")
    assert marker not in code.native.source
    # Integers.
    x, w = hosted((64, 64), "x", "int32"), hosted((64, 64), "w", "int32")
    h = hosted((64, 64), "h", "int32")
    code = backend.compile(ir.accum(h, "add", x, w, op="mul", spec="ik,kj->ij"), name="ints")
    assert marker not in code.native.source
    # A batch of matmuls.
    x, w, h = hosted((3, 40, 40), "x"), hosted((3, 40, 40), "w"), hosted((3, 40, 40), "h")
    code = backend.compile(ir.accum(h, "add", x, w, op="mul", spec="bik,bkj->bij"), name="batched")
    assert marker not in code.native.source
