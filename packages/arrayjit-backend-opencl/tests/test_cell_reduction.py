"""Cooperative row reductions (``arrayjit_backends.gpu.cell_reduction``): a long reduction per
output cell runs as a work group per cell whose lanes walk the row, combined in local memory,
with the neutral-element fill before it folded in; values against numpy.

PoCL's CPU devices keep one work item per row by default (faster there): this module's backend
takes 64 lanes (``ARRAYJIT_GPU_CELL_LANES``), the shape GPUs get."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from opencl_helpers import node

from arrayjit_backend_opencl.renderer import OpenclSyntax
from arrayjit_backends.gpu.program import GpuProgram, render_program
from arrayjit_ir import ir, lower, optimize

RNG = np.random.default_rng(19)


GPU_CELL_LANES = 64
"""The GPU shape on PoCL (read by the ``backend`` fixture)."""


def test_the_backend_runs_the_cooperative_shape(backend: Any) -> None:
    assert backend.runtime.renderer.cell_lanes == 64


def _program(comp: Any, lanes: int = 64) -> GpuProgram:
    opt = optimize(lower(comp), name="rows")
    return render_program(OpenclSyntax(cell_lanes=lanes), opt, "rows")


def _run_all(be: Any, comp: Any, inputs: dict[Any, np.ndarray], outs: list[Any]) -> list[Any]:
    for tn, v in inputs.items():
        tn.set_values(v)
    code = be.compile(comp, name="rows")
    r = be.link(be.make_context(be.new_stream(be.get_device(0))), code)
    r()
    for out in outs:
        be.to_host(r.context, out)
    return [np.asarray(out.get_values()) for out in outs]


def _run(be: Any, comp: Any, inputs: dict[Any, np.ndarray], out: Any) -> np.ndarray:
    return _run_all(be, comp, inputs, [out])[0]


def test_row_sum_gets_a_work_group_per_row_and_no_fill_kernel() -> None:
    x, y = node((512, 4096), "x"), node((512,), "y")
    program = _program(ir.accum(y, "add", x, spec="ij->i"), lanes=256)
    assert [(k.global_size, k.local_size) for k in program.kernels] == [(512 * 256, 256)]
    src = program.source
    assert "__local float aj_sh[256];" in src
    assert "barrier(CLK_LOCAL_MEM_FENCE);" in src
    assert "aj_t += 256" in src  # lane l takes terms l, l + 256, ...
    assert "if (aj_lid == 0) y_1[i0] = ((float)(((float)0.0) + aj_sh[0]));" in src
    # Fewer lanes on short rows (8 terms a lane on average, at least 32).
    short = _program(ir.accum(y, "add", node((512, 300), "xs"), spec="ij->i"), lanes=256)
    assert [(k.global_size, k.local_size) for k in short.kernels] == [(512 * 32, 32)]


def test_shapes_that_keep_one_work_item_per_cell() -> None:
    # Short rows: one work item per row, which zeroes its own cell first (no zeroing kernel).
    y = node((512,), "y")
    short = _program(ir.accum(y, "add", node((512, 100), "x"), spec="ij->i"))
    assert [(k.global_size, k.local_size) for k in short.kernels] == [(512, None)]
    assert "aj_sh" not in short.source and "y_1[i0] = ((float)0.0);" in short.source
    # A column sum: neighbouring work items already read neighbouring addresses.
    cols = _program(ir.accum(node((512,), "c"), "add", node((4096, 512), "x"), spec="ij->j"))
    assert "aj_sh" not in cols.source
    # A matmul (the right operand is read along the cells' axis).
    a, b, h = node((64, 512), "a"), node((512, 64), "b"), node((64, 64), "h")
    mm = _program(ir.accum(h, "add", a, b, op="mul", spec="ik,kj->ij"))
    assert "aj_sh" not in mm.source
    # Half accumulators round at every step: their order stays.
    half = _program(
        ir.accum(node((64,), "yh", "half"), "add", node((64, 4096), "xh", "half"), spec="ij->i")
    )
    assert "aj_sh" not in half.source


def test_long_rows_sum_in_blocks_within_the_bound(backend: Any) -> None:
    rows, n = 8, 1 << 17  # 2048 terms a lane: blocks of 64 into lane partials
    x, y = node((rows, n), "x"), node((rows,), "y")
    comp = ir.accum(y, "add", x, spec="ij->i")
    assert "aj_part" in _program(comp).source
    vx = RNG.uniform(0, 1, (rows, n)).astype(np.float32)
    vx[1] = 0.1  # one value repeated: a plain chain would drift by about n/2 ulps
    got = _run(backend, comp, {x: vx}, y)
    exact = vx.astype(np.float64).sum(axis=1)
    ulp = np.spacing(np.abs(vx).astype(np.float64).sum(axis=1).astype(np.float32))
    assert np.all(np.abs(got - exact) <= 2 * np.log2(n) * ulp), (got - exact) / ulp


@pytest.mark.parametrize("cols", [256, 1000, 4096])
def test_row_sums_match_numpy(backend: Any, cols: int) -> None:
    x, y = node((37, cols), "x"), node((37,), "y")
    comp = ir.accum(y, "add", x, spec="ij->i")
    assert "aj_sh" in _program(comp).source
    vx = RNG.standard_normal((37, cols)).astype(np.float32)
    vx[3] = -0.0  # a row of negative zeros sums to +0 after the +0 fill, as serially
    got = _run(backend, comp, {x: vx}, y)
    exact = vx.astype(np.float64).sum(axis=1)
    np.testing.assert_allclose(got, exact, rtol=0, atol=1e-5 * np.abs(vx).sum(axis=1).max())
    assert got[3] == 0 and not np.signbit(got[3])


def test_row_max_and_min_propagate_nan(backend: Any) -> None:
    x, mx, mn = node((16, 2000), "x"), node((16,), "mx"), node((16,), "mn")
    comp = ir.block(ir.accum(mx, "max", x, spec="ij->i"), ir.accum(mn, "min", x, spec="ij->i"))
    program = _program(comp)
    assert program.source.count("aj_sh[") > 2 and "aj_fmaxf(" in program.source
    # The -inf and +inf fills are folded in; both rows reductions share one row kernel.
    assert [(k.global_size, k.local_size) for k in program.kernels] == [(16 * 64, 64)]
    vx = RNG.standard_normal((16, 2000)).astype(np.float32)
    vx[2, 1999] = np.nan  # the last term of a row, the last lane's
    vx[5, 0] = np.nan  # the first
    vx[7, 777] = np.nan
    vx[9] = -np.inf
    vx[11] = np.inf
    got_max, got_min = _run_all(backend, comp, {x: vx}, [mx, mn])
    np.testing.assert_array_equal(got_max, np.max(vx, axis=1))  # np.max propagates NaN
    np.testing.assert_array_equal(got_min, np.min(vx, axis=1))
    assert np.isnan(got_max[[2, 5, 7]]).all() and got_max[9] == -np.inf and got_min[11] == np.inf


def test_row_dot_product_is_fma_per_step(backend: Any) -> None:
    x, w, y = node((33, 3000), "x"), node((33, 3000), "w"), node((33,), "y")
    comp = ir.accum(y, "add", x, w, op="mul", spec="ij,ij->i")
    src = _program(comp).source
    assert "aj_sh" in src and "fmaf(" in src
    vx, vw = (RNG.standard_normal((33, 3000)).astype(np.float32) for _ in "xw")
    got = _run(backend, comp, {x: vx, w: vw}, y)
    exact = (vx.astype(np.float64) * vw.astype(np.float64)).sum(axis=1)
    scale = np.abs(vx.astype(np.float64) * vw).sum(axis=1)
    assert np.all(np.abs(got - exact) <= 1e-5 * scale)


def test_integer_row_sums_wrap_and_max_is_exact(backend: Any) -> None:
    x, s, m = node((9, 5000), "x", "int32"), node((9,), "s", "int32"), node((9,), "m", "int32")
    comp = ir.block(ir.accum(s, "add", x, spec="ij->i"), ir.accum(m, "max", x, spec="ij->i"))
    assert "aj_sh" in _program(comp).source
    vx = RNG.integers(-(2**31), 2**31 - 1, (9, 5000), dtype=np.int64)
    got_s, got_m = _run_all(backend, comp, {x: vx}, [s, m])
    wrapped = (vx.sum(axis=1) + 2**31) % 2**32 - 2**31
    np.testing.assert_array_equal(got_s, wrapped)
    np.testing.assert_array_equal(got_m, vx.max(axis=1))


def test_double_row_sums(backend: Any) -> None:
    from opencl_helpers import require_prec

    require_prec(backend, "double")
    x, y = node((10, 4096), "x", "double"), node((10,), "y", "double")
    comp = ir.accum(y, "add", x, spec="ij->i")
    vx = RNG.standard_normal((10, 4096))
    got = _run(backend, comp, {x: vx}, y)
    np.testing.assert_allclose(
        got, vx.sum(axis=1), rtol=0, atol=1e-12 * np.abs(vx).sum(axis=1).max()
    )
