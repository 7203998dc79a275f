"""Golden sources of the GPU renderer (``arrayjit_backends.gpu``): a few computations rendered by
both dialects, compared byte for byte with the files in ``tests/golden/gpu/``.

Rendering needs no OpenCL runtime, no CUDA driver and no GPU: only the renderer modules of the
device packages (``arrayjit_backend_opencl.renderer``, ``arrayjit_backend_cuda.renderer``),
which import neither pyopencl nor pycuda. Where a device package is not installed its cases
skip.

Each computation is rendered three ways: OpenCL C for a GPU device (work groups of 256, as
many lanes per reduced cell), OpenCL C for a CPU device (one lane per cell, as on PoCL: the
register matmul and range reductions) and CUDA C. A golden file is the program's launches (a
comment: kernel name, global size, local size) followed by its source after the dialect's fixed
prelude, which has one golden file per language (``prelude.cl``, ``prelude.cu``).

Golden files are regenerated only on purpose (never by the tests themselves), after checking
that a change of the generated source is intended:

    ARRAYJIT_REGEN_GOLDEN=1 .venv/bin/pytest packages/arrayjit-backends/tests/test_gpu_render.py
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from arrayjit_backends.gpu.program import render_program
from arrayjit_ir import ir, lower, optimize
from arrayjit_tnode import Tnode

GOLDEN = Path(__file__).parent / "golden" / "gpu"


def _node(dims: tuple[int, ...], label: str, **kw: Any) -> Tnode:
    return Tnode.create(dims, label=label, **kw)


def _chain() -> ir.Block:
    """A fused element-wise chain, ``relu(a * b + c)``: one kernel, ``t1`` and ``t2`` virtual."""
    a, b, c = (_node((1000,), n, hosted=True) for n in "abc")
    t1, t2, y = _node((1000,), "t1"), _node((1000,), "t2"), _node((1000,), "y", hosted=True)
    return ir.block(ir.binop(t1, "mul", a, b), ir.binop(t2, "add", t1, c), ir.unop(y, "relu", t2))


def _softmax() -> ir.Block:
    """Softmax over 512 rows of 1000, as users write it (five statements): one row chain,
    ``e`` held in local memory row by row."""
    x, y = _node((512, 1000), "x", hosted=True), _node((512, 1000), "y", hosted=True)
    m, e, se = _node((512,), "m"), _node((512, 1000), "e"), _node((512,), "se")
    return ir.block(
        ir.accum(m, "max", x, spec="rc->r"),
        ir.binop(e, "sub", x, m, spec="rc,r->rc"),
        ir.unop(e, "exp", e),
        ir.accum(se, "add", e, spec="rc->r"),
        ir.binop(y, "div", e, se, spec="rc,r->rc"),
    )


def _layer_norm() -> ir.Block:
    """A layer norm over 300 rows of 700: a row chain whose lane-0 steps hold inlined row
    sums (shared by the lanes first)."""
    rows, cols = 300, 700
    x = _node((rows, cols), "x", hosted=True)
    gamma, beta = _node((cols,), "gamma", hosted=True), _node((cols,), "beta", hosted=True)
    inv_n, eps = _node((), "inv_n", hosted=True), _node((), "eps", hosted=True)
    s, mean, ss, var = (_node((rows,), n) for n in ("s", "mean", "ss", "var"))
    ve, rstd = _node((rows,), "ve"), _node((rows,), "rstd")
    xc, xn, yg = (_node((rows, cols), n) for n in ("xc", "xn", "yg"))
    y = _node((rows, cols), "y", hosted=True)
    return ir.block(
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


def _row_sums() -> ir.Block:
    """Row sums of 64 rows of 3000: a cooperative reduction per cell (blocked lanes)."""
    x, s = _node((64, 3000), "x", hosted=True), _node((64,), "s", hosted=True)
    return ir.block(ir.accum(s, "add", x, spec="ij->i"))


def _matmul() -> ir.Block:
    """``relu(x @ w)`` of 96x72 by 72x80: a tiled matmul (its zero fill folded in), then the
    element-wise kernel."""
    x, w = _node((96, 72), "x", hosted=True), _node((72, 80), "w", hosted=True)
    h, y = _node((96, 80), "h"), _node((96, 80), "y", hosted=True)
    return ir.block(ir.accum(h, "add", x, w, op="mul", spec="ik,kj->ij"), ir.unop(y, "relu", h))


def _matvec() -> ir.Block:
    """A matrix-vector product, ``1 x 200`` by ``200 x 300``: the wide tiling."""
    v, w = _node((1, 200), "v", hosted=True), _node((200, 300), "w", hosted=True)
    y = _node((1, 300), "y", hosted=True)
    return ir.block(ir.accum(y, "add", v, w, op="mul", spec="ik,kj->ij"))


def _max_pool() -> ir.Block:
    """2x2 max pooling with stride 2 over 4 x 10 x 10 x 8: the ``-inf`` fill of each cell is
    stored by the work item that reduces its window (one kernel, no fill launch)."""
    x, p = _node((4, 10, 10, 8), "x", hosted=True), _node((4, 5, 5, 8), "p", hosted=True)
    return ir.block(ir.accum(p, "max", x, spec="b(2*o+k)(2*p+l)c->bopc", sizes={"k": 2, "l": 2}))


def _full_sum() -> ir.Block:
    """A full sum of 2^16 values: a grid reduction (GPU) or ranges (CPU), two kernels."""
    x, s = _node((1 << 16,), "x", hosted=True), _node((), "s", hosted=True)
    return ir.block(ir.accum(s, "add", x, spec="i->"))


def _two_layers() -> ir.Block:
    """Two identical layers, ``h2 = tanh(tanh(x w1 + b1) w2 + b2)``, 16 x 32: the second
    layer's kernels are the first's (one definition each, launched with the second layer's
    buffers)."""
    x = _node((16, 32), "x", hosted=True)
    stmts = []
    for k in (1, 2):
        w, b = _node((32, 32), f"w{k}", hosted=True), _node((32,), f"b{k}", hosted=True)
        z, h = _node((16, 32), f"z{k}"), _node((16, 32), f"h{k}", hosted=True)
        stmts += [
            ir.accum(z, "add", x, w, op="mul", spec="bi,ih->bh"),
            ir.binop(z, "add", z, b, spec="bh,h->bh"),
            ir.unop(h, "tanh", z),
        ]
        x = h
    return ir.block(*stmts)


CASES: dict[str, Callable[[], ir.Block]] = {
    "elementwise_chain": _chain,
    "softmax_rows": _softmax,
    "layer_norm": _layer_norm,
    "row_sums": _row_sums,
    "matmul_relu": _matmul,
    "matvec": _matvec,
    "max_pool": _max_pool,
    "full_sum": _full_sum,
    "two_layers": _two_layers,
}

DIALECTS: dict[str, tuple[str, str, dict[str, int], str]] = {
    "opencl": ("arrayjit_backend_opencl.renderer", "OpenclSyntax", {}, "cl"),
    "opencl_cpu": ("arrayjit_backend_opencl.renderer", "OpenclSyntax", {"cell_lanes": 1}, "cl"),
    "cuda": ("arrayjit_backend_cuda.renderer", "CudaSyntax", {}, "cu"),
}
"""Dialect name -> (renderer module, class, constructor arguments, golden file suffix)."""


def _syntax(dialect: str) -> Any:
    module, cls, kwargs, _ = DIALECTS[dialect]
    return getattr(pytest.importorskip(module), cls)(**kwargs)


def render(case: str, dialect: str) -> str:
    """The golden text of ``case`` rendered by ``dialect``: launches, then the source after the
    dialect's fixed prelude (checked once per dialect by :func:`test_golden_prelude`); the math
    helpers a program calls stay in its text."""
    syntax = _syntax(dialect)
    program = render_program(syntax, optimize(lower(CASES[case]()), name=case), f"aj_{case}")
    launches = "".join(
        f"   {k.name}: global {k.global_size}, local {k.local_size}\n" for k in program.kernels
    )
    assert program.source.startswith(syntax.prelude), f"{case}: the source starts elsewhere"
    return f"/* launches:\n{launches}*/\n{program.source[len(syntax.prelude) :]}"


def _check_golden(text: str, path: Path) -> None:
    if os.environ.get("ARRAYJIT_REGEN_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"missing golden {path}; regenerate with ARRAYJIT_REGEN_GOLDEN=1"
    assert text == path.read_text(), f"{path.name} changed; see this module's docstring"


@pytest.mark.parametrize("dialect", list(DIALECTS))
@pytest.mark.parametrize("case", list(CASES))
def test_golden_source(case: str, dialect: str) -> None:
    _check_golden(render(case, dialect), GOLDEN / f"{case}.{dialect}.{DIALECTS[dialect][3]}")


@pytest.mark.parametrize("dialect", list(DIALECTS))
def test_golden_prelude(dialect: str) -> None:
    """The text every program of the dialect starts with, one golden per language (both OpenCL
    settings share it)."""
    suffix = DIALECTS[dialect][3]
    _check_golden(_syntax(dialect).prelude, GOLDEN / f"prelude.{suffix}")


@pytest.mark.parametrize("dialect", list(DIALECTS))
def test_identical_kernels_are_defined_once(dialect: str) -> None:
    """The two identical layers launch each of their kernels twice under one name, defined
    once in the source; every launch names a kernel the source defines."""
    syntax = _syntax(dialect)
    program = render_program(syntax, optimize(lower(_two_layers()), name="two"), "aj_two")
    names = [k.name for k in program.kernels]
    defined = [n for n in names if f"{syntax.kernel_prefix} {n}(" in program.source]
    assert set(defined) == set(names)
    assert len(set(names)) == len(names) // 2 and len(names) % 2 == 0
    assert names[: len(names) // 2] == names[len(names) // 2 :]
    assert program.kernels[0].buffers != program.kernels[len(names) // 2].buffers
