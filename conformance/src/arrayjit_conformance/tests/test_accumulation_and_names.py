"""Accumulation starts and generated names, on every backend, against numpy.

- Integer ``max``/``min`` accumulations start from the precision's bounds (the other
  accumulation starts are in ``test_regressions.py``).
- Names a user chooses (static indices, node labels) never collide with the names a renderer
  generates (loop indices, temporaries, locals, its own helpers).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from arrayjit_conformance.harness import hosted, new_context, require_precs
from arrayjit_ir import ir
from arrayjit_ir.indexing import StaticSymbol
from arrayjit_tnode import Tnode

INT_BOUNDS = ("byte", "uint16", "int32", "uint32", "int64", "uint64")


def _results(backend: Any, routine: Any, outs: list[Tnode]) -> list[np.ndarray]:
    for tn in outs:
        assert backend.to_host(routine.context, tn)
    return [tn.get_values() for tn in outs]


def _once(backend: Any, comp: Any, outs: list[Tnode], **kw: Any) -> list[np.ndarray]:
    code = backend.compile(comp, name="acc", **kw)
    routine = backend.link(new_context(backend), code)
    routine()
    return _results(backend, routine, outs)


@pytest.mark.parametrize("prec", INT_BOUNDS)
@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("j", [1, 4])
def test_integer_max_min_start_from_the_precision_bounds(
    backend: Any, prec: str, op: str, j: int
) -> None:
    require_precs(backend, prec)
    x, y = hosted((3, j), "x", prec), hosted((3,), "y", prec)
    info = np.iinfo(x.prec.numpy_dtype)
    vals = np.array([[info.max] * j, [info.min] * j, [7] * j], dtype=x.prec.numpy_dtype)
    vals[2, -1] = 5
    x.set_values(vals)
    [got] = _once(backend, ir.accum(y, op, x, spec="ij->i"), [y])
    expect = vals.max(1) if op == "max" else vals.min(1)
    np.testing.assert_array_equal(got, expect)


@pytest.mark.parametrize("name", ["i0", "i1", "z", "t1", "acc1", "aj_gid", "x_0", "v0_t"])
def test_user_names_never_collide_with_generated_ones(backend: Any, name: str) -> None:
    src = hosted((3, 4), "x")
    t = Tnode.create((4,), label=name)
    row = hosted((4,), "aj_gid")
    total = hosted((), name)
    i = StaticSymbol(name)
    vals = np.arange(12.0).reshape(3, 4)
    src.set_values(vals)
    comp = ir.block(
        ir.fetch(t, ir.Slice(i, src)),
        ir.unop(row, "relu", t),
        ir.accum(total, "add", src, t, op="mul", spec="ij,j->"),
    )
    code = backend.compile(comp, name="names", bindings=(i,))
    routine = backend.link(new_context(backend), code)
    for k in (2, 1):
        routine.bindings[name] = k
        routine()
        got_row, got_total = _results(backend, routine, [row, total])
        np.testing.assert_array_equal(got_row, vals[k])
        np.testing.assert_allclose(got_total, (vals * vals[k]).sum(), rtol=1e-6)
