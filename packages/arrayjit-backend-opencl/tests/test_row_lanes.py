"""Row lanes on PoCL's CPU device (``arrayjit_backends.gpu.row_lanes``): nests whose cells each
run an ``fma`` reduction (a dot product per cell, layer norm's sum of squares inlined into
``rstd``, attention's ``q @ k^T * scale``) as vectors of neighbouring cells per work item.

Values against the interpreter over the unoptimized code (within the precision's tolerance:
the optimizer fuses ``x * w + acc`` into ``fma``), and bit for bit against the same routine
compiled with row lanes off (``ARRAYJIT_GPU_ROW_LANES=0``: one work item per cell, the serial
code's steps), on extents that leave a partial vector of lanes and with batch axes outside the
lanes' loop; each case checks that the shape is the one under test."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from opencl_helpers import TOL, node, require_prec

from arrayjit_backend_opencl.renderer import OpenclSyntax
from arrayjit_backends.gpu.program import render_program
from arrayjit_conformance.harness import new_context, run_against_interpreter
from arrayjit_ir import ir, lower, optimize
from arrayjit_ir.assignments import Assignment
from arrayjit_tnode import Tnode

RNG = np.random.default_rng(11)


def _case(kind: str, prec: str) -> tuple[Any, dict[Tnode, np.ndarray], list[Tnode]]:
    """A program of shape ``kind``, its inputs and its observed outputs."""
    dtype = np.float32 if prec == "single" else np.float64
    stmts: list[Assignment]
    if kind == "layer_norm_rows":  # 13 rows: a vector of 8 (or 4) lanes and a partial one
        rows, cols = 13, 70
        x, y = node((rows, cols), "x", prec), node((rows,), "y", prec)
        eps = node((), "eps", prec)
        ss, ve = (Tnode.create((rows,), prec=prec, label=n) for n in ("ss", "ve"))
        stmts = [
            ir.accum(ss, "add", x, x, op="mul", spec="rc,rc->r"),
            ir.binop(ve, "add", ss, eps),
            ir.unop(y, "recip_sqrt", ve),
        ]
        inputs = {x: RNG.uniform(-2, 2, (rows, cols)).astype(dtype), eps: np.array(1e-5, dtype)}
        return ir.block(*stmts), inputs, [y]
    if kind == "batched_dots":  # a dot product per cell of (3, 11), scaled: batch axis outside
        a, b = node((3, 11, 40), "a", prec), node((3, 11, 40), "b", prec)
        c, y = node((), "c", prec), node((3, 11), "y", prec)
        t = Tnode.create((3, 11), prec=prec, label="t")
        stmts = [
            ir.accum(t, "add", a, b, op="mul", spec="bik,bik->bi"),
            ir.binop(y, "mul", t, c),
        ]
        inputs = {
            a: RNG.uniform(-1, 1, (3, 11, 40)).astype(dtype),
            b: RNG.uniform(-1, 1, (3, 11, 40)).astype(dtype),
            c: np.array(0.5, dtype),
        }
        return ir.block(*stmts), inputs, [y]
    # Attention's scores: rows along the queries (5: a partial block of rows), lanes along the
    # keys (19: a partial vector); with heads, an outer axis decoded from the work item.
    assert kind in ("scaled_scores", "scaled_scores_heads")
    h = (3,) if kind == "scaled_scores_heads" else ()
    hs = "h" if h else ""
    q, k = node((*h, 5, 16), "q", prec), node((*h, 19, 16), "k", prec)
    scale, s = node((), "scale", prec), node((*h, 5, 19), "s", prec)
    raw = Tnode.create((*h, 5, 19), prec=prec, label="raw")
    stmts = [
        ir.accum(raw, "add", q, k, op="mul", spec=f"{hs}id,{hs}jd->{hs}ij"),
        ir.binop(s, "mul", raw, scale),
    ]
    inputs = {
        q: RNG.uniform(-1, 1, (*h, 5, 16)).astype(dtype),
        k: RNG.uniform(-1, 1, (*h, 19, 16)).astype(dtype),
        scale: np.array(0.25, dtype),
    }
    return ir.block(*stmts), inputs, [s]


@pytest.mark.parametrize("prec", ["single", "double"])
@pytest.mark.parametrize(
    "kind", ["layer_norm_rows", "batched_dots", "scaled_scores", "scaled_scores_heads"]
)
def test_row_lanes_give_the_one_cell_per_work_item_bits(
    backend: Any, kind: str, prec: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_prec(backend, prec)
    comp, inputs, outputs = _case(kind, prec)
    lanes = 8 if prec == "single" else 4
    source = render_program(OpenclSyntax(cell_lanes=1), optimize(lower(comp), name="f"), "f")
    assert f"aj_r{lanes - 1} " in source.source  # the shape under test
    results = run_against_interpreter(backend, comp, inputs, outputs, name=f"{kind}_on")
    for got, ref in results:
        np.testing.assert_allclose(got, ref, rtol=TOL[prec] * 50, atol=TOL[prec])
    monkeypatch.setenv("ARRAYJIT_GPU_ROW_LANES", "0")
    off = render_program(OpenclSyntax(cell_lanes=1), optimize(lower(comp), name="f"), "f")
    assert f"aj_r{lanes - 1} " not in off.source
    for tn, v in inputs.items():
        tn.set_values(v)
    routine = backend.link(new_context(backend), backend.compile(comp, name=f"{kind}_off"))
    routine()
    for tn, (got, _) in zip(outputs, results, strict=True):
        assert backend.to_host(routine.context, tn)
        want = tn.get_values()
        assert np.array_equal(got.view(np.uint8), np.asarray(want).view(np.uint8)), kind
