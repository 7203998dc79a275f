"""Memory-mode conflicts between routines compiled one by one, as a user meets them."""

from __future__ import annotations

import numpy as np
import pytest

from arrayjit_ir import ir
from arrayjit_tnode import MemoryModeError, Tnode
from arrayjit_tnode import memory_mode as mm


def test_reading_a_node_an_earlier_routine_inlined_says_what_to_do() -> None:
    x = Tnode.create((4,), label="x", hosted=True)
    h = Tnode.create((4,), label="h")
    y = Tnode.create((4,), label="y", hosted=True)
    z = Tnode.create((4,), label="z", hosted=True)
    ir.optimize(ir.lower(ir.block(ir.unop(h, "exp", x), ir.unop(y, "relu", h))), name="fwd")
    assert h.memory_mode == mm.Virtual()
    with pytest.raises(MemoryModeError, match=r"routine bwd: node h#\d+.*compile_batch"):
        ir.optimize(ir.lower(ir.binop(z, "mul", h, x)), name="bwd")


def test_a_routine_that_fails_to_settle_its_modes_changes_no_node() -> None:
    """Every node of a routine whose modes conflict keeps the mode it had before, so that a
    corrected program compiles as if the failed attempt never happened."""
    x = Tnode.create((4,), label="x", hosted=True)
    t = Tnode.create((4,), label="t")
    u = Tnode.create((4,), label="u")
    v = Tnode.create((4,), label="v", memory_mode=mm.Virtual())  # read before written: an input
    y = Tnode.create((4,), label="y", hosted=True)
    bad = ir.block(
        ir.unop(t, "exp", x),
        ir.binop(u, "add", t, x),
        ir.binop(y, "add", u, v),
        ir.unop(v, "neg", x),
    )
    with pytest.raises(MemoryModeError, match=r"routine bad: node v#\d+"):
        ir.optimize(ir.lower(bad), name="bad")
    assert (t.memory_mode, u.memory_mode, v.memory_mode) == (None, None, mm.Virtual())
    assert y.memory_mode == mm.Hosted() and y.memory_mode_provenance == 0
    # The same nodes in a correct program: t and u inlined, as if alone.
    good = ir.block(ir.unop(t, "exp", x), ir.binop(u, "add", t, x), ir.binop(y, "add", u, x))
    opt = ir.optimize(ir.lower(good), name="good")
    assert t.memory_mode == mm.Virtual() and u.memory_mode == mm.Virtual()
    vx = np.arange(4, dtype=np.float32)
    out = ir.interpret(opt, {x: vx, y: np.zeros(4, np.float32)})
    np.testing.assert_allclose(out[y], np.exp(vx) + 2 * vx, rtol=1e-6)
