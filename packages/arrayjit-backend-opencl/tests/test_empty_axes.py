"""Nodes with an empty axis (shape ``(3, 0)``, ``(0, 3)``, ...): their loop nests are empty, and
the rendered source must not divide or take a remainder by the zero extent, even in code no work
item runs (PoCL printed "2 warnings generated." and pyopencl raised a ``CompilerWarning`` for
``aj_r % 0u``). Values against numpy: a sum over an empty axis is 0, a max ``-inf``, a matmul
with an empty ``k`` axis 0; statements over an empty node store nothing.

The routines run on two backends: PoCL's default shape (one work item per cell) and the GPU
shape (``ARRAYJIT_GPU_CELL_LANES=64``: grid reductions, work groups per row); the source check
also renders 1 and 256 lanes."""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from opencl_helpers import node

from arrayjit_backend_opencl.renderer import OpenclSyntax
from arrayjit_backends.gpu.program import render_program
from arrayjit_conformance.harness import assert_close, run_against_interpreter
from arrayjit_conformance.workloads import softmax_rows
from arrayjit_ir import ir, lower, optimize
from arrayjit_ir.assignments import Assignment
from arrayjit_tnode import Tnode

RNG = np.random.default_rng(11)
DIVISION_BY_ZERO = re.compile(r"[%/]=?\s*\(?\s*0+[uUlL]*(?![\w.])")
"""``% 0u``, ``/= 0u``, ``/ (0)``...: a division or remainder by a constant 0 (not ``0.5``,
``0x1p8``, ``0 + i``)."""

Case = tuple[Assignment, dict[Tnode, np.ndarray], dict[Tnode, np.ndarray]]
"""A computation, the host values it starts from, and numpy's values of its outputs."""


def _values(dims: tuple[int, ...]) -> np.ndarray:
    return RNG.uniform(-3, 3, dims).astype(np.float32)


def _sum(dims: tuple[int, ...], spec: str, out_dims: tuple[int, ...], neutral: bool) -> Case:
    x, s = node(dims, "x"), node(out_dims, "s")
    vx, vs = _values(dims), np.full(out_dims, 7.0, np.float32)  # the fill must replace the 7s
    lhs, rhs = spec.split("->")
    want = np.einsum(f"{lhs}->{rhs}", vx) + (0 if neutral else vs)
    return ir.accum(s, "add", x, spec=spec, initialize_neutral=neutral), {x: vx, s: vs}, {s: want}


def _row_max() -> Case:
    x, m = node((3, 0), "x"), node((3,), "m")
    return ir.accum(m, "max", x, spec="ij->i"), {x: _values((3, 0))}, {m: np.full(3, -np.inf)}


def _pointwise(dims: tuple[int, ...]) -> Case:
    x, w, y, z = node(dims, "x"), node(dims, "w"), node(dims, "y"), node(dims, "z")
    vx, vw = _values(dims), _values(dims)
    comp = ir.block(ir.unop(y, "neg", x), ir.binop(z, "add", x, w))
    return comp, {x: vx, w: vw}, {y: -vx, z: vx + vw}


def _matmul(m: int, k: int, n: int) -> Case:
    a, b, c = node((m, k), "a"), node((k, n), "b"), node((m, n), "c")
    va, vb = _values((m, k)), _values((k, n))
    comp = ir.accum(c, "add", a, b, op="mul", spec="ik,kj->ij")
    return comp, {a: va, b: vb, c: np.full((m, n), 7.0, np.float32)}, {c: va @ vb}


def _softmax(rows: int, cols: int) -> Case:
    """Softmax as users write it (a row chain on the GPU shape), over rows of no cells."""
    x, o = node((rows, cols), "x"), node((rows, cols), "o")
    return softmax_rows(x, o), {x: _values((rows, cols))}, {o: np.zeros((rows, cols))}


CASES: dict[str, Callable[[], Case]] = {
    "row_sum_3x0": lambda: _sum((3, 0), "ij->i", (3,), neutral=True),
    "row_sum_3x0_accumulating": lambda: _sum((3, 0), "ij->i", (3,), neutral=False),
    "column_sum_0x3": lambda: _sum((0, 3), "ij->j", (3,), neutral=True),
    "full_sum_3x0": lambda: _sum((3, 0), "ij->", (), neutral=True),
    "full_sum_2x3x0": lambda: _sum((2, 3, 0), "ijk->", (), neutral=True),
    "row_max_3x0": _row_max,
    "pointwise_3x0": lambda: _pointwise((3, 0)),
    "pointwise_0x3": lambda: _pointwise((0, 3)),
    "pointwise_2x0x4": lambda: _pointwise((2, 0, 4)),
    "matmul_k0": lambda: _matmul(4, 0, 5),
    "matmul_m0": lambda: _matmul(0, 64, 64),
    "matmul_n0": lambda: _matmul(64, 64, 0),
    "softmax_300x0": lambda: _softmax(300, 0),
    "softmax_0x300": lambda: _softmax(0, 300),
}


@pytest.mark.parametrize("lanes", [0, 1, 64, 256])
@pytest.mark.parametrize("case", list(CASES))
def test_source_has_no_division_by_zero(case: str, lanes: int) -> None:
    comp, _, _ = CASES[case]()
    source = render_program(OpenclSyntax(cell_lanes=lanes), optimize(lower(comp), name=case), case)
    kernels = source.source[source.source.index("/* routine") :]
    assert not [line for line in kernels.splitlines() if DIVISION_BY_ZERO.search(line)], kernels


@pytest.fixture(scope="module", params=[None, 64], ids=["default_lanes", "64_lanes"])
def lanes_backend(
    request: pytest.FixtureRequest, backend: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    """The module's backend, and one with 64 lanes per reduced cell (the GPU shape)."""
    if request.param is None:
        yield backend
        return
    from arrayjit_backends import fresh_backend

    patch = pytest.MonkeyPatch()
    patch.setenv("ARRAYJIT_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    patch.setenv("ARRAYJIT_GPU_CELL_LANES", str(request.param))
    be = fresh_backend("opencl")
    be.initialize()
    yield be
    be.finalize()
    patch.undo()


@pytest.mark.parametrize("case", list(CASES))
def test_builds_quietly_and_matches_numpy(
    lanes_backend: Any, case: str, capfd: pytest.CaptureFixture[str]
) -> None:
    """The program builds without compiler output (no ``CompilerWarning``, nothing on the
    process's stderr: PoCL writes its warnings there) and gives numpy's values."""
    comp, inputs, expected = CASES[case]()
    capfd.readouterr()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # Named for the case: a distinct source, so each backend builds it (no cache hit).
        pairs = run_against_interpreter(lanes_backend, comp, inputs, list(expected), name=case)
    for (tn, want), (got, ref) in zip(expected.items(), pairs, strict=True):
        assert_close(ref, want, "single", what=f"oracle vs numpy, {tn.debug_label}")
        assert_close(got, want, "single", what=f"opencl vs numpy, {tn.debug_label}")
    compiler_warnings = [w for w in caught if "Compiler" in type(w.message).__name__]
    assert not compiler_warnings, [str(w.message) for w in compiler_warnings]
    assert "warning" not in capfd.readouterr().err
