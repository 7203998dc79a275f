"""The size bound of inlining: a computation copied to several reads stays small, so chains
whose links read the previous one twice do not grow the code exponentially."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from arrayjit_ir import ir
from arrayjit_ir.virtualize import INLINE_SIZE_LIMIT, INLINE_WORK_FACTOR, arithmetic
from arrayjit_tnode import Tnode
from arrayjit_tnode import memory_mode as mm


def _doubling_chain(links: int) -> tuple[ir.Block, Tnode, Tnode, list[Tnode]]:
    x = Tnode.create((8,), prec="double", label="x", hosted=True)
    y = Tnode.create((8,), prec="double", label="y", hosted=True)
    ts = [x]
    for k in range(links):
        t = y if k == links - 1 else Tnode.create((8,), prec="double", label=f"t{k}")
        ts.append(t)
    stmts = [ir.binop(ts[k + 1], "add", ts[k], ts[k]) for k in range(links)]
    return ir.block(*stmts), x, y, ts[1:-1]


def test_a_doubling_chain_stays_linear_in_size() -> None:
    comp, x, y, inner = _doubling_chain(14)  # fully inlined: 2**15 expression nodes
    lowered = ir.lower(comp)
    opt = ir.optimize(lowered, name="chain")
    assert len(ir.pretty(opt)) < 14 * 400, "the code grows faster than the chain"
    stored = [t for t in inner if not t.known_virtual()]
    assert 1 <= len(stored) < len(inner), [t.debug_memory_mode for t in inner]
    # Each inlined link doubles the work of the links it inlines: the work budget stores
    # links until the routine computes at most 1.5 times what the plain chain computes.
    assert arithmetic(opt.code) <= INLINE_WORK_FACTOR * arithmetic(lowered)
    vx = np.linspace(0.5, 1.0, 8)
    out = ir.interpret(opt, {x: vx, y: np.zeros(8)} | {t: np.zeros(8) for t in stored})
    np.testing.assert_array_equal(out[y], vx * 2.0**14)


def test_short_chains_and_single_reads_are_still_inlined() -> None:
    # t0 = x + x; y = t0 + t0: 3 additions a cell inlined, 2 stored: within the work budget.
    comp, _, _, inner = _doubling_chain(2)
    ir.optimize(ir.lower(comp), name="short")
    assert all(t.memory_mode == mm.Virtual() for t in inner)
    # 15 additions a cell inlined, 4 stored: under the size bound (31 expression nodes), over
    # the work budget. Storing the middle link saves the most: 3 additions into it, 3 after.
    comp, _, _, inner = _doubling_chain(4)
    ir.optimize(ir.lower(comp), name="short")
    assert [t.memory_mode == mm.Virtual() for t in inner] == [True, False, True]
    x = Tnode.create((8,), label="x", hosted=True)
    y = Tnode.create((8,), label="y", hosted=True)
    ts = [x] + [Tnode.create((8,), label=f"s{k}") for k in range(40)]
    chain = [ir.binop(ts[k + 1], "add", ts[k], x) for k in range(40)]  # each read once
    ir.optimize(ir.lower(ir.block(*chain, ir.unop(y, "neg", ts[-1]))), name="long")
    assert all(t.memory_mode == mm.Virtual() for t in ts[1:])


def test_the_decision_log_names_the_size_bound(caplog: pytest.LogCaptureFixture) -> None:
    comp, *_ = _doubling_chain(10)
    with caplog.at_level(logging.DEBUG, logger="arrayjit_ir.optimize"):
        ir.optimize(ir.lower(comp), name="logged")
    text = caplog.text
    assert f"would be copied to 2 reads (at most {INLINE_SIZE_LIMIT} are)" in text


def test_a_long_chain_of_single_reads_is_stored_every_few_links(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """300 links ``t[k+1] = t[k] + x``: inlined whole, the optimizer's recursion failed."""
    from arrayjit_ir.virtualize import INLINE_DEPTH_LIMIT

    x = Tnode.create((4,), prec="double", label="x", hosted=True)
    y = Tnode.create((4,), prec="double", label="y", hosted=True)
    ts: list[Tnode] = [x]
    for k in range(300):
        ts.append(y if k == 299 else Tnode.create((4,), prec="double", label=f"t{k}"))
    stmts = [ir.binop(ts[k + 1], "add", ts[k], x) for k in range(300)]
    with caplog.at_level(logging.DEBUG, logger="arrayjit_ir.optimize"):
        opt = ir.optimize(ir.lower(ir.block(*stmts)), name="long")
    stored = [t for t in ts[1:-1] if not t.known_virtual()]
    assert 300 // INLINE_DEPTH_LIMIT <= len(stored) <= 300 // (INLINE_DEPTH_LIMIT // 2)
    assert f"would nest {INLINE_DEPTH_LIMIT + 1} deep (at most {INLINE_DEPTH_LIMIT})" in caplog.text
    vx = np.array([1.0, 0.5, -2.0, 0.0])
    out = ir.interpret(opt, {x: vx, y: np.zeros(4)} | {t: np.zeros(4) for t in stored})
    np.testing.assert_array_equal(out[y], vx * 301)


def test_choosing_virtual_nodes_is_linear_in_the_offenders(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every link of a ``sin`` chain read twice breaks the work rule, after as many light
    nodes that stay virtual: the choice judges each node a bounded number of times, not the
    light ones again after each store (it did: quadratic, 45,000 verdicts for a 64-layer
    training step), and stores exactly the links."""
    from arrayjit_ir import virtualize

    links = 120
    x = Tnode.create((8,), label="x", hosted=True)
    y = Tnode.create((8,), label="y", hosted=True)
    ts = [x] + [Tnode.create((8,), label=f"s{k}") for k in range(links)]
    light = [Tnode.create((8,), label=f"a{k}") for k in range(links)]
    outs = [Tnode.create((8,), label=f"z{k}", hosted=True) for k in range(links)]
    stmts = [ir.binop(a, "add", x, x) for a in light]
    stmts += [ir.binop(z, "mul", a, x) for a, z in zip(light, outs, strict=True)]
    stmts += [ir.unop(ts[k + 1], "sin", ts[k]) for k in range(links)]
    stmts += [ir.binop(y, "add", t, t) for t in ts[1:]]  # each link read again, twice
    verdicts = [0]
    judge = virtualize._Plan.repeats_work

    def counted(self: virtualize._Plan, tn: Tnode) -> bool:
        verdicts[0] += 1
        return judge(self, tn)

    monkeypatch.setattr(virtualize._Plan, "repeats_work", counted)
    opt = ir.optimize(ir.lower(ir.block(*stmts)), name="sin_chain")
    assert all(not t.known_virtual() for t in ts[1:]), [t.debug_memory_mode for t in ts[1:]]
    assert all(a.known_virtual() for a in light), [a.debug_memory_mode for a in light]
    assert verdicts[0] <= 3 * links, verdicts[0]
    vx = np.linspace(-1.0, 1.0, 8, dtype=np.float32)
    zeros = {t: np.zeros(8, np.float32) for t in ts[1:]}
    zeros |= {z: np.zeros(8, np.float32) for z in outs}
    out = ir.interpret(opt, {x: vx, y: np.zeros(8, np.float32)} | zeros)
    s = vx
    for _ in range(links):
        s = np.sin(s)
    np.testing.assert_allclose(out[y], s + s, rtol=1e-5)
    np.testing.assert_array_equal(out[outs[-1]], (vx + vx) * vx)
