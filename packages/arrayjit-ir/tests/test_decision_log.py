"""The optimizer's per-node debug log of memory-mode decisions (logger ``arrayjit_ir``), and
nodes over existing arrays (``create_with_reshape``, ``create_from_padded``) computed with.

Each program is also run through the interpreter and compared with numpy, so the decision the
log reports is the one that produced right values.
"""

import logging

import numpy as np
import pytest
from ir_helpers import run

from arrayjit_ir import interpret, ir, lower, optimize, optimize_batch
from arrayjit_tnode import Padding, Tnode, create_from_padded, create_with_reshape

RNG = np.random.default_rng(7)


def node(dims: tuple[int, ...], label: str, **kw: object) -> Tnode:
    return Tnode.create(dims, label=label, **kw)  # type: ignore[arg-type]


def decisions(caplog: pytest.LogCaptureFixture, name: str) -> dict[str, str]:
    """label -> 'mode: reason' from the log records of routine ``name``."""
    out = {}
    prefix = f"routine {name}: node "
    for rec in caplog.records:
        msg = rec.getMessage()
        if rec.name == "arrayjit_ir.optimize" and msg.startswith(prefix):
            label, rest = msg[len(prefix) :].split(" is ", 1)
            out[label.split("#")[0]] = rest
    return out


def test_log_is_silent_unless_debug_enabled(caplog: pytest.LogCaptureFixture) -> None:
    a, y = node((4,), "a", hosted=True), node((4,), "y", hosted=True)
    with caplog.at_level(logging.INFO, logger="arrayjit_ir"):
        optimize(lower(ir.unop(y, "relu", a)), name="quiet")
    assert not caplog.records


def test_virtual_inputs_outputs(caplog: pytest.LogCaptureFixture) -> None:
    a, b, c = (node((16,), n, hosted=True) for n in "abc")
    t1, t2, y = node((16,), "t1"), node((16,), "t2"), node((16,), "y", hosted=True)
    comp = ir.block(ir.binop(t1, "mul", a, b), ir.binop(t2, "add", t1, c), ir.unop(y, "relu", t2))
    with caplog.at_level(logging.DEBUG, logger="arrayjit_ir"):
        optimize(lower(comp), name="chain")
    d = decisions(caplog, "chain")
    assert d["t1"] == "Virtual/29: virtual: inlined at its 1 read(s)"
    assert d["t2"] == "Virtual/29: virtual: inlined at its 1 read(s)"
    assert d["a"] == "Hosted(Unset_hosted)/0: input: only read here; Hosted: it has a host array"
    assert (
        d["y"]
        == "Hosted(Unset_hosted)/0: output: written, never read here; Hosted: it has a host array"
    )
    vals = {tn: RNG.standard_normal(16) for tn in (a, b, c)}
    got = run(comp, vals, [y])[y]
    np.testing.assert_allclose(got, np.maximum(vals[a] * vals[b] + vals[c], 0), rtol=1e-6)


def test_work_rule_and_local(caplog: pytest.LogCaptureFixture) -> None:
    x, y = node((4, 8), "x", hosted=True), node((4, 8), "y", hosted=True)
    s = node((4,), "s")
    comp = ir.block(
        ir.accum(s, "add", x, spec="ij->i"),  # row sums
        ir.binop(y, "sub", x, s, spec="ij,i->ij"),  # read at 8 positions per cell
    )
    with caplog.at_level(logging.DEBUG, logger="arrayjit_ir"):
        optimize(lower(comp), name="center")
    assert decisions(caplog, "center")["s"] == (
        "Local/1040: not virtual (work rule): its one read visits a cell more than once; "
        "Local: 16 bytes fit the 16384-byte stack"
    )
    xv = RNG.standard_normal((4, 8))
    got = run(comp, {x: xv}, [y])[y]
    np.testing.assert_allclose(got, xv - xv.astype(np.float32).sum(1, keepdims=True), rtol=1e-5)


def test_work_rule_two_reads_and_on_device(caplog: pytest.LogCaptureFixture) -> None:
    n = 8192  # 32 KiB in single precision: over the stack threshold
    x = node((n, 2), "x", hosted=True)
    s = node((n,), "s")
    y1, y2 = node((n,), "y1", hosted=True), node((n,), "y2", hosted=True)
    comp = ir.block(
        ir.accum(s, "add", x, spec="ij->i"),
        ir.binop(y1, "mul", s, s),
        ir.unop(y2, "exp", s),
    )
    with caplog.at_level(logging.DEBUG, logger="arrayjit_ir"):
        optimize(lower(comp), name="twice")
    assert decisions(caplog, "twice")["s"] == (
        "On_device(Unset)/1040: not virtual (work rule): inlining would run its reduction "
        "again at each of 3 read(s); On_device: 32768 bytes exceed the 16384-byte stack"
    )
    xv = RNG.standard_normal((n, 2)) * 0.1
    got = run(comp, {x: xv}, [y1, y2])
    sv = xv.astype(np.float32).sum(1)
    np.testing.assert_allclose(got[y1], sv * sv, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(got[y2], np.exp(sv), rtol=1e-5)


def test_work_rule_costly_operations_and_budget(caplog: pytest.LogCaptureFixture) -> None:
    """An exp read twice and a division read inside a loop it does not depend on are stored;
    so is a cheap node whose recomputation at a broadcast would take the routine's arithmetic
    past the budget (a routine of its own: the budget is the routine's)."""
    x, v = node((4, 6), "x", hosted=True), node((6, 5), "v", hosted=True)
    e, p = node((4, 6), "e"), node((4, 6), "p")
    y, o = node((4, 6), "y", hosted=True), node((4, 5), "o", hosted=True)
    costly = ir.block(
        ir.unop(e, "exp", x),
        ir.binop(y, "add", e, x),  # e read twice: exp once per element, so e is stored
        ir.binop(p, "div", e, x),
        ir.accum(o, "add", p, v, op="mul", spec="ik,kj->ij"),  # p read once per j
    )
    c, d = node((4,), "c", hosted=True), node((4, 5), "d", hosted=True)
    q, z = node((4,), "q"), node((4, 5), "z", hosted=True)
    budget = ir.block(
        ir.binop(q, "add", c, c),
        ir.binop(z, "mul", q, d, spec="i,ij->ij"),  # q recomputed 5 times per cell
    )
    with caplog.at_level(logging.DEBUG, logger="arrayjit_ir"):
        optimize(lower(costly), name="costly")
        optimize(lower(budget), name="budget")
    log = decisions(caplog, "costly")
    assert log["e"] == (
        "Local/1040: not virtual (work rule): inlining would run its costly exp again at each "
        "of 2 read(s); Local: 96 bytes fit the 16384-byte stack"
    )
    assert log["p"] == (
        "Local/1040: not virtual (work rule): its one read visits a cell more than once, and "
        "would evaluate its costly div again; Local: 96 bytes fit the 16384-byte stack"
    )
    assert decisions(caplog, "budget")["q"] == (
        "Local/1040: not virtual (work rule): recomputing it at its reads (5 times per cell) "
        "takes the routine's arithmetic past 1.5 times the unoptimized code's; Local: 16 bytes "
        "fit the 16384-byte stack"
    )
    vals = {x: RNG.standard_normal((4, 6)), v: RNG.standard_normal((6, 5))}
    got = run(costly, vals, [y, o])
    ex = np.exp(vals[x].astype(np.float32))
    np.testing.assert_allclose(got[y], ex + vals[x], rtol=1e-5)
    np.testing.assert_allclose(got[o], (ex / vals[x]) @ vals[v], rtol=1e-4)
    vc, vd = RNG.standard_normal(4), RNG.standard_normal((4, 5))
    got = run(budget, {c: vc, d: vd}, [z])
    np.testing.assert_allclose(got[z], (2 * vc)[:, None] * vd, rtol=1e-5)


def test_meaning_rule_and_no_definition(caplog: pytest.LogCaptureFixture) -> None:
    p, y = node((6,), "p", hosted=True), node((6,), "y", hosted=True)
    t, one = node((6,), "t"), node((6,), "one", hosted=True)
    comp = ir.block(
        ir.unop(t, "relu", p),
        ir.binop(p, "sub", p, one),  # p changes before t is read
        ir.unop(y, "identity", t),
    )
    with caplog.at_level(logging.DEBUG, logger="arrayjit_ir"):
        optimize(lower(comp), name="meaning")
    assert decisions(caplog, "meaning")["t"].startswith(
        "Local/1040: not virtual (meaning rule): a node its computation reads is written "
        "between its definition and a read of it; Local: 24 bytes"
    )
    pv = RNG.standard_normal(6)
    got = run(comp, {p: pv, one: np.ones(6)}, [y])[y]
    np.testing.assert_allclose(got, np.maximum(pv, 0), rtol=1e-6)

    a, z, two = (node((6,), n, hosted=True) for n in ("a", "z", "two"))
    u, v = node((6,), "u"), node((6,), "v")
    comp2 = ir.block(  # u is written twice with v's definition between: no single definition
        ir.unop(u, "relu", a),
        ir.unop(v, "neg", a),
        ir.binop(u, "add", u, v),
        ir.binop(z, "mul", u, two),
    )
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="arrayjit_ir"):
        optimize(lower(comp2), name="twowrites")
    assert decisions(caplog, "twowrites")["u"].startswith(
        "Local/1040: not virtual: its writes are not one definition computing each cell"
    )
    av = RNG.standard_normal(6)
    want = (np.maximum(av, 0) - av) * 2
    got = run(comp2, {a: av, two: np.full(6, 2.0)}, [z])[z]
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_shared_nodes_of_a_batch(caplog: pytest.LogCaptureFixture) -> None:
    a, h, y = node((3,), "a", hosted=True), node((3,), "h"), node((3,), "y", hosted=True)
    with caplog.at_level(logging.DEBUG, logger="arrayjit_ir"):
        optimize_batch(
            [lower(ir.unop(h, "relu", a)), lower(ir.unop(y, "neg", h))], ["first", "second"]
        )
    shared = "On_device(Unset)/39040: not virtual: other routines of the batch use it (shared)"
    assert decisions(caplog, "first")["h"] == (
        f"{shared}; On_device: materialized, and no host array was asked for"
    )
    assert decisions(caplog, "second")["h"] == shared  # settled by the first routine


def test_reshaped_and_padded_nodes_compute_like_numpy() -> None:
    base = RNG.standard_normal(12).astype(np.float32)
    x = create_with_reshape(base, (4, 3), label="x")
    w = create_from_padded(
        np.pad(RNG.standard_normal((3, 2)).astype(np.float32), ((0, 0), (0, 1))),
        Padding(((0, 0), (0, 1)), 0.0),
        label="w",
    )
    y = node((4, 2), "y", hosted=True)
    comp = ir.accum(y, "add", x, w, op="mul", spec="bi,ij->bj")
    # The backends' way of running a routine on host arrays: the node's own buffers.
    code = optimize(lower(comp), name="reshaped")
    bufs = {x: x.array, w: w.array, y: y.array}
    result = interpret(code, bufs, {})
    assert y.array is not None
    y.array[...] = result[y]
    want = base.reshape(4, 3).astype(np.float64) @ w.get_values().astype(np.float64)
    np.testing.assert_allclose(y.get_values(), want, rtol=1e-5)


def test_effectively_constant_is_not_inlined(caplog: pytest.LogCaptureFixture) -> None:
    from arrayjit_tnode import memory_mode as mm

    a, y = node((4,), "a", hosted=True), node((4,), "y", hosted=True)
    k = node((4,), "k", memory_mode=(mm.Effectively_constant(), 5))
    comp = ir.block(ir.fetch(k, ir.Constant(3.0)), ir.binop(y, "mul", a, k))
    with caplog.at_level(logging.DEBUG, logger="arrayjit_ir"):
        optimize(lower(comp), name="const")
    assert decisions(caplog, "const")["k"] == (
        "On_device(Unset)/1040: not virtual: it was Effectively_constant/5 before this routine; "
        "On_device: materialized, and no host array was asked for"
    )
    av = RNG.standard_normal(4)
    np.testing.assert_allclose(run(comp, {a: av}, [y])[y], av.astype(np.float32) * 3, rtol=1e-6)
