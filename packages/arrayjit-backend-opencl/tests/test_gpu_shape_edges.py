"""Programs shaped almost like the GPU renderer's special kernels, where a legality check or
an edge of the kernel would give other values than the serial code; values against the
interpreter over the unoptimized lowered code. So far: a fill folded into a small-float full
reduction's final combine; a row step's inlined reductions of two compute types; the grid
reduction's launch shape.

This module's backend takes 64 lanes per reduced cell (``ARRAYJIT_GPU_CELL_LANES``), the shape
GPUs get: only then is a half, bfloat16 or fp8 full reduction a grid reduction on PoCL."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest
from opencl_helpers import node

from arrayjit_backend_opencl.renderer import OpenclSyntax
from arrayjit_backends.gpu.program import GpuProgram, render_program
from arrayjit_conformance.harness import run_against_interpreter
from arrayjit_ir import ir, lower, optimize
from arrayjit_ir.assignments import Constant
from arrayjit_tnode import Tnode

RNG = np.random.default_rng(5)
GPU_CELL_LANES = 64
"""The GPU shape on PoCL (read by the ``backend`` fixture)."""


@pytest.mark.parametrize(
    ("prec", "fill", "terms", "want"),
    [
        # half(1000.3) is 1000.5; 1000.5 + 0.3 rounds to 1001, 1000.3 + 0.3 to 1000.5.
        ("half", 1000.3, [0.1, 0.1, 0.1], 1001.0),
        # bfloat16(1001.9) is 1000; 1000 + 2 ties to even (1000), 1003.9 rounds to 1004.
        ("bfloat16", 1001.9, [1.0, 1.0], 1000.0),
        # fp8(970) is 1024; 1024 + 160 rounds to 1280, 970 + 160 to 1024.
        ("fp8", 970.0, [160.0], 1280.0),
    ],
)
def test_small_float_full_reduction_starts_from_the_stored_fill(
    backend: Any, prec: str, fill: float, terms: list[float], want: float
) -> None:
    """A fill of a small-float scalar, then a sum into it: the grid reduction's last kernel
    combines the fill's constant instead of reading the cell, which must be the constant as
    the cell holds it (rounded to the node's precision), not the unrounded constant."""
    x, y = node((256,), "x", prec), node((), "y", prec)
    comp = ir.block(
        ir.fetch(y, Constant(fill)), ir.accum(y, "add", x, spec="i->", initialize_neutral=False)
    )
    dtype = {"half": np.float16, "bfloat16": ml_dtypes.bfloat16, "fp8": ml_dtypes.float8_e5m2}[prec]
    vx = np.zeros(256, dtype)
    vx[: len(terms)] = terms
    [(got, ref)] = run_against_interpreter(backend, comp, {x: vx}, [y])
    assert float(ref) == want
    assert float(got) == want
    # The shape under test: one grid reduction (two kernels), the fill folded into it.
    program = render_program(OpenclSyntax(cell_lanes=64), optimize(lower(comp), name="f"), "f")
    assert len(program.kernels) == 2


@pytest.mark.parametrize("other", ["int32", "double"])
@pytest.mark.parametrize("swap", [False, True], ids=["s-t", "t-s"])
def test_inlined_row_reductions_of_two_compute_types(backend: Any, other: str, swap: bool) -> None:
    """A per-row statement into which the optimizer inlined a float32 row sum and a row sum of
    another compute type: they cannot share one local array of lanes (the float32 tree ran in
    an ``int32_t`` array: 102.07 became 103; a double tree in a float array rounds). The terms
    are chosen so that every order of addition is exact: values are compared exactly."""
    rows, cols = 4, 300
    x, xo, y = (
        node((rows, cols), "x"),
        node((rows, cols), "xo", other),
        node((rows,), "y", "double"),
    )
    s = Tnode.create((rows,), prec="single", label="s")
    t = Tnode.create((rows,), prec=other, label="t")
    comp = ir.block(
        ir.accum(s, "add", x, spec="ij->i"),
        ir.accum(t, "add", xo, spec="ij->i"),
        ir.binop(y, "sub", *((t, s) if swap else (s, t))),
    )
    rng = np.random.default_rng(3)
    vx = rng.integers(-8, 8, (rows, cols)) * np.float32(0.125) + np.float32(0.25)
    vo = rng.integers(-5, 5, (rows, cols)).astype(np.float64)
    if other == "double":
        vo += 2.0**-30  # exact in double, lost in float
    vo = vo.astype(xo.prec.numpy_dtype)
    [(got, ref)] = run_against_interpreter(backend, comp, {x: vx, xo: vo}, [y])
    want = vx.astype(np.float64).sum(1) - vo.astype(np.float64).sum(1)
    np.testing.assert_array_equal(ref, -want if swap else want)
    np.testing.assert_array_equal(got, ref)


def test_full_reduction_is_a_tree_over_work_groups(backend: Any) -> None:
    """The GPU shape of a full reduction: partials of many work groups, each a tree in local
    memory, then one group combining them (CPU devices run ranges of the serial loop instead:
    ``test_device.py``)."""
    n = (1 << 18) + 3
    x, total, top = node((n,), "x"), node((), "total"), node((), "top", "int32")
    xi = node((n,), "xi", "int32")
    vx, vi = RNG.standard_normal(n), RNG.integers(-1000, 1000, n)
    x.set_values(vx)
    xi.set_values(vi)
    code = backend.compile(
        ir.block(ir.accum(total, "add", x, spec="i->"), ir.accum(top, "max", xi, spec="i->")),
        name="tree",
    )
    program: GpuProgram = code.native.rendered
    sizes = [(k.global_size, k.local_size) for k in program.kernels]
    group = backend.runtime.renderer.group_size
    # Per reduction: partials from many groups, one group combining them with the cell's
    # neutral value (the fill is folded into it: no launch of its own); the sum's 3 terms
    # past the blocked part are one work item's; then the max's two kernels.
    tree = [(min(1024, -(-n // group)) * group, group), (group, group)]
    assert sizes == [*tree, (1, 1), *tree]
    assert "__local" in program.source
    r = backend.link(backend.make_context(backend.new_stream(backend.get_device(0))), code)
    for _ in range(2):  # the cell is re-initialized by every run (neutral element)
        r()
    backend.to_host(r.context, total)
    backend.to_host(r.context, top)
    exact = vx.astype(np.float32).astype(np.float64).sum()
    assert abs(float(total.get_values()) - exact) <= 1e-5 * np.abs(vx).sum()
    assert int(top.get_values()) == vi.max()
