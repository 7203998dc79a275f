"""Accumulation starts and generated names, on every backend, against numpy.

- Every accumulation op starts from its neutral element whatever the projection (one term per
  cell included: ``sub`` gives ``-x``), integer ``max``/``min`` from the precision's bounds, and a
  reduction over an empty axis gives the neutral element.
- Names a user chooses (static indices, node labels) never collide with the names a renderer
  generates (loop indices, temporaries, locals, its own helpers).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from arrayjit_conformance.harness import assert_close, hosted, new_context, require_precs
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


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "max", "min"])
@pytest.mark.parametrize("j", [1, 3])
def test_one_or_more_terms_per_cell(backend: Any, op: str, j: int) -> None:
    x, y = hosted((4, j), "x"), hosted((4,), "y")
    vals = np.random.default_rng(j).uniform(0.5, 2.0, (4, j))
    x.set_values(vals)
    [got] = _once(backend, ir.accum(y, op, x, spec="ij->i"), [y])  # type: ignore[arg-type]
    expect = {
        "add": vals.sum(1),
        "sub": -vals.sum(1),
        "mul": vals.prod(1),
        "div": 1 / vals.prod(1),
        "max": vals.max(1),
        "min": vals.min(1),
    }[op]
    assert_close(got, expect, "single")


def test_accumulating_without_neutral_init_updates_the_old_value(backend: Any) -> None:
    x, y = hosted((3, 1), "x"), hosted((3,), "y")
    x.set_values(np.array([[1.0], [2.0], [4.0]]))
    y.set_values(np.array([10.0, 20.0, 30.0]))
    comp = ir.accum(y, "sub", x, spec="ij->i", initialize_neutral=False)
    code = backend.compile(comp, name="acc_old")
    routine = backend.link(new_context(backend), code)
    routine()
    routine()
    [got] = _results(backend, routine, [y])
    np.testing.assert_array_equal(got, [8.0, 16.0, 22.0])


def test_empty_reductions_give_the_neutral_element(backend: Any) -> None:
    x = hosted((2, 0), "x")
    s, m = hosted((2,), "s"), hosted((2,), "m")
    a, b, c = hosted((2, 0), "a"), hosted((0, 3), "b"), hosted((2, 3), "c")
    for tn in (s, m, c):
        tn.set_values(np.full(tn.dims, 5.0))
    comp = ir.block(
        ir.accum(s, "add", x, spec="ij->i"),
        ir.accum(m, "max", x, spec="ij->i"),
        ir.accum(c, "add", a, b, op="mul", spec="ik,kj->ij"),
    )
    got_s, got_m, got_c = _once(backend, comp, [s, m, c])
    np.testing.assert_array_equal(got_s, [0.0, 0.0])
    np.testing.assert_array_equal(got_m, [-np.inf, -np.inf])
    np.testing.assert_array_equal(got_c, np.zeros((2, 3)))


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
