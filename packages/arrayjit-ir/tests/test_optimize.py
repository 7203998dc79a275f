"""The optimizer: virtualization decisions, settled modes, golden printouts.

Golden files live in tests/golden/. Regenerate them (never done by the tests themselves) with:

    ARRAYJIT_REGEN_GOLDEN=1 pytest packages/arrayjit-ir/tests/test_optimize.py
"""

import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from ir_helpers import run

from arrayjit_ir import interpret, ir, low_level, lower, optimize, optimize_batch, pretty
from arrayjit_tnode import MemoryModeError, Prec, Tnode, UsageError
from arrayjit_tnode import memory_mode as mm

GOLDEN = Path(__file__).parent / "golden"
RNG = np.random.default_rng(1)


def node(dims: tuple[int, ...], label: str, **kw: object) -> Tnode:
    return Tnode.create(dims, label=label, **kw)  # type: ignore[arg-type]


def loops(s: low_level.Stmt) -> int:
    """Number of top-level loop nests."""
    top = s.stmts if isinstance(s, low_level.Seq) else (s,)
    return sum(isinstance(x, low_level.For_loop) for x in top)


def fused_chain() -> tuple[ir.Block, dict[Tnode, np.ndarray], list[Tnode], Callable[..., object]]:
    a, b, c = (node((16,), n, hosted=True) for n in "abc")
    t1, t2, y = node((16,), "t1"), node((16,), "t2"), node((16,), "y", hosted=True)
    comp = ir.block(ir.binop(t1, "mul", a, b), ir.binop(t2, "add", t1, c), ir.unop(y, "relu", t2))
    vals = {a: RNG.standard_normal(16), b: RNG.standard_normal(16), c: RNG.standard_normal(16)}
    return comp, vals, [y], lambda: np.maximum(vals[a] * vals[b] + vals[c], 0)


def test_relu_chain_becomes_one_loop_nest() -> None:
    comp, vals, outs, expect = fused_chain()
    o = optimize(lower(comp), name="chain")
    t1, t2 = [tn for tn in o.traced if tn.label[0] in ("t1", "t2")]
    assert t1.known_virtual() and t2.known_virtual()
    assert loops(o.code) == 1
    writes = {w.tn for w in _writes(o.code)}
    assert writes == set(outs)
    np.testing.assert_allclose(run(comp, vals, outs)[outs[0]], expect(), rtol=1e-5)


def _writes(s: low_level.Stmt) -> list[low_level.Set]:
    return [x for x in low_level.writes(s) if isinstance(x, low_level.Set)]


def test_matmul_feeding_relu_inlines_the_reduction() -> None:
    x, w = node((4, 3), "x", hosted=True), node((3, 5), "w", hosted=True)
    h, y = node((4, 5), "h"), node((4, 5), "y", hosted=True)
    comp = ir.block(ir.accum(h, "add", x, w, op="mul", spec="bi,ij->bj"), ir.unop(y, "relu", h))
    o = optimize(lower(comp), name="mm_relu")
    assert h.known_virtual() and loops(o.code) == 1
    vx, vw = RNG.standard_normal((4, 3)), RNG.standard_normal((3, 5))
    np.testing.assert_allclose(run(comp, {x: vx, w: vw}, [y])[y], np.maximum(vx @ vw, 0), rtol=1e-5)


def test_reduction_read_twice_stays_materialized() -> None:
    x, s, y = node((4, 6), "x", hosted=True), node((4,), "s"), node((4,), "y", hosted=True)
    comp = ir.block(ir.accum(s, "add", x, spec="ij->i"), ir.binop(y, "mul", s, s))
    optimize(lower(comp), name="twice")
    assert not s.known_virtual() and s.memory_mode == mm.Local()
    vx = RNG.standard_normal((4, 6))
    np.testing.assert_allclose(run(comp, {x: vx}, [y])[y], vx.sum(1) ** 2, rtol=1e-5)


def test_node_read_at_shifted_positions_still_correct() -> None:
    a, t, y = node((6,), "a", hosted=True), node((6,), "t"), node((6,), "y", hosted=True)
    comp = ir.block(ir.unop(t, "exp", a), ir.unop(y, "neg", t, spec="i->i"))
    va = RNG.standard_normal(6)
    np.testing.assert_allclose(run(comp, {a: va}, [y])[y], -np.exp(va), rtol=1e-6)


def test_hosted_intermediates_stay_hosted() -> None:
    a, t, y = (
        node((8,), "a", hosted=True),
        node((8,), "t", hosted=True),
        node((8,), "y", hosted=True),
    )
    comp = ir.block(ir.unop(t, "exp", a), ir.unop(y, "neg", t))
    o = optimize(lower(comp), name="hosted")
    assert t.is_hosted() and loops(o.code) == 2


def test_inputs_and_outputs_are_materialized() -> None:
    a, t, y = node((8,), "a"), node((8,), "t"), node((8,), "y")
    o = optimize(lower(ir.block(ir.unop(t, "exp", a), ir.unop(y, "neg", t))), name="io")
    assert a.memory_mode == mm.On_device() and y.memory_mode == mm.On_device()
    assert t.known_virtual()
    assert o.inputs == (a,) and o.outputs == (y,)
    assert set(o.context_nodes) == {a, y} and o.local_nodes == ()


def test_accumulating_into_existing_value_is_an_input() -> None:
    w, g = node((4,), "w"), node((4,), "g")
    o = optimize(lower(ir.accum(w, "sub", g, initialize_neutral=False)), name="sgd")
    assert o.traced[w].read_before_write and w in o.inputs and w in o.outputs


def test_zero_initialized_by_code() -> None:
    x, s = node((4, 6), "x"), node((4,), "s")
    o = optimize(lower(ir.accum(s, "add", x, spec="ij->i")), name="z")
    assert o.traced[s].zero_initialized_by_code and not o.traced[s].read_before_write


def test_user_virtual_decision_conflicts_with_input_use() -> None:
    a, y = node((4,), "a", memory_mode=(mm.Virtual(), 29)), node((4,), "y")
    with pytest.raises(MemoryModeError, match=r"a#\d+: memory mode Materialized \(provenance 37\)"):
        optimize(lower(ir.unop(y, "neg", a)), name="bad")


def test_merge_buffer_reads_of_two_nodes_are_refused() -> None:
    a, b, y = node((4,), "a"), node((4,), "b"), node((4,), "y")
    code = lower(ir.binop(y, "add", ir.merge_buffer(a), ir.merge_buffer(b)))
    with pytest.raises(UsageError, match="reads the merge buffer of several nodes"):
        optimize(code, name="m")


def test_merge_node_recorded() -> None:
    g, acc = node((4,), "g"), node((4,), "acc")
    o = optimize(
        lower(ir.accum(acc, "add", ir.merge_buffer(g), initialize_neutral=False)), name="merge"
    )
    assert o.merge_node == g


def test_batch_shares_nodes_between_routines() -> None:
    a, t, y = node((8,), "a"), node((8,), "t"), node((8,), "y")
    first = lower(ir.unop(t, "exp", a))
    second = lower(ir.unop(y, "neg", t))
    o1, o2 = optimize_batch([first, second], ["f", "g"])
    assert not t.known_virtual() and t.memory_mode == mm.On_device()
    assert t in o1.outputs and t in o2.inputs


def test_simplify_folds_constants_and_identities() -> None:
    from arrayjit_ir.optimize import _simplify_expr

    x = low_level.Get(node((1,), "x"), ())
    two = low_level.Binop(low_level.ops.Binop.add, low_level.Constant(1.0), low_level.Constant(1.0))
    assert _simplify_expr(two, Prec.single) == low_level.Constant(2.0)
    add, sub = low_level.ops.Binop.add, low_level.ops.Binop.sub
    e = low_level.Binop(
        low_level.ops.Binop.mul,
        low_level.Binop(add, x, low_level.Constant(-0.0)),
        low_level.Constant(1.0),
    )
    assert _simplify_expr(e, Prec.single) == x
    assert _simplify_expr(low_level.Binop(sub, x, low_level.Constant(0.0)), Prec.single) == x
    # x + 0.0 is +0.0 where x is -0.0, and so is x - -0.0: kept in floats, folded in integers.
    for op, c in ((add, 0.0), (sub, -0.0)):
        kept = low_level.Binop(op, x, low_level.Constant(c))
        assert _simplify_expr(kept, Prec.single) == kept
        assert _simplify_expr(kept, Prec.int32) == x
    kept = low_level.Binop(add, low_level.Constant(0.0), x)
    assert _simplify_expr(kept, Prec.double) == kept
    zero = low_level.Binop(low_level.ops.Binop.mul, x, low_level.Constant(0.0))
    assert _simplify_expr(zero, Prec.single) == zero  # x * 0 is not 0 for NaN and infinity


# ---- golden printouts ---------------------------------------------------------------------------


def _g_chain() -> ir.Block:
    return fused_chain()[0]


def _g_matmul_relu() -> ir.Block:
    x, w = node((4, 3), "x", hosted=True), node((3, 5), "w", hosted=True)
    h, y = node((4, 5), "h"), node((4, 5), "y", hosted=True)
    return ir.block(ir.accum(h, "add", x, w, op="mul", spec="bi,ij->bj"), ir.unop(y, "relu", h))


def _g_softmax() -> ir.Block:
    x, y = node((2, 4), "x", hosted=True), node((2, 4), "y", hosted=True)
    m, e, s = node((2, 1), "m"), node((2, 4), "e"), node((2, 1), "s")
    return ir.block(
        ir.accum(m, "max", x, spec="ij->ik"),
        ir.binop(e, "sub", x, m),
        ir.unop(e, "exp", e),
        ir.accum(s, "add", e, spec="ij->ik"),
        ir.binop(y, "div", e, s),
    )


def _g_sum() -> ir.Accum_op:
    return ir.accum(
        node((3,), "s", hosted=True), "add", node((3, 7), "x", hosted=True), spec="ij->i"
    )


def _g_dot() -> ir.Accum_op:
    v = node((5,), "v", hosted=True)
    return ir.accum(node((), "d", hosted=True), "add", v, v, op="mul", spec="i,i->")


def _g_broadcast() -> ir.Block:
    a, b, t = node((3, 4), "a", hosted=True), node((4,), "b", hosted=True), node((3, 4), "t")
    return ir.block(ir.binop(t, "add", a, b), ir.unop(node((3, 4), "y", hosted=True), "tanh", t))


def _g_sgd() -> ir.Block:
    w, g = node((4,), "w", hosted=True), node((4,), "g", hosted=True)
    lr, step = node((), "lr", hosted=True), node((4,), "step")
    return ir.block(
        ir.binop(step, "mul", lr, g), ir.accum(w, "sub", step, initialize_neutral=False)
    )


def _g_fetches() -> ir.Block:
    return ir.block(
        ir.fetch(node((2, 3), "r", hosted=True), ir.Range_over_offsets()),
        ir.fetch(node((2,), "c", hosted=True), ir.Constant_fill((1.5, -2.0))),
        ir.fetch(node((3,), "k", hosted=True), ir.Constant(7.0)),
    )


def _g_where() -> ir.Block:
    a, b, m = node((6,), "a", hosted=True), node((6,), "b", hosted=True), node((6,), "m")
    return ir.block(
        ir.binop(m, "cmplt", a, b), ir.ternop(node((6,), "y", hosted=True), "where", m, a, b)
    )


def _g_transpose() -> ir.Block:
    a, t = node((2, 3), "a", hosted=True), node((3, 2), "t")
    return ir.block(
        ir.unop(t, "identity", a, spec="ij->ji"), ir.unop(node((3, 2), "y", hosted=True), "exp", t)
    )


def _g_two_reads() -> ir.Block:
    x, s = node((3, 4), "x", hosted=True), node((3,), "s")
    return ir.block(
        ir.accum(s, "add", x, spec="ij->i"), ir.binop(node((3,), "y", hosted=True), "mul", s, s)
    )


def _g_mlp_layer() -> ir.Block:
    x, w, b = (
        node((8, 3), "x", hosted=True),
        node((3, 4), "w", hosted=True),
        node((4,), "b", hosted=True),
    )
    z, zb = node((8, 4), "z"), node((8, 4), "zb")
    return ir.block(
        ir.accum(z, "add", x, w, op="mul", spec="bi,ih->bh"),
        ir.binop(zb, "add", z, b),
        ir.unop(node((8, 4), "h", hosted=True), "relu", zb),
    )


def _g_row_centring() -> ir.Block:
    x, inv = node((4, 5), "x", hosted=True), node((), "inv", hosted=True)
    s, m = node((4,), "s"), node((4,), "m")
    return ir.block(
        ir.accum(s, "add", x, spec="ij->i"),
        ir.binop(m, "mul", s, inv, spec="i,->i"),
        ir.binop(node((4, 5), "y", hosted=True), "sub", x, m, spec="ij,i->ij"),
    )


def _g_centre_in_place() -> ir.Block:
    p, q = node((4,), "p", hosted=True), node((), "q", hosted=True)
    s, m = node((), "s"), node((), "m")
    return ir.block(
        ir.accum(s, "add", p, spec="i->"), ir.binop(m, "mul", s, q), ir.binop(p, "sub", p, m)
    )


def _g_read_after_update() -> ir.Block:
    p, one, t = node((3,), "p", hosted=True), node((), "one", hosted=True), node((3,), "t")
    return ir.block(
        ir.unop(t, "relu", p),
        ir.binop(p, "sub", p, one),
        ir.unop(node((3,), "y", hosted=True), "identity", t),
    )


def _g_train_step() -> ir.Block:
    x, tgt = node((4, 3), "x", hosted=True), node((4, 2), "target", hosted=True)
    w1, w2, lr = (
        node((3, 5), "w1", hosted=True),
        node((5, 2), "w2", hosted=True),
        node((), "lr", hosted=True),
    )
    z, h, y, dy = node((4, 5), "z"), node((4, 5), "h"), node((4, 2), "y"), node((4, 2), "dy")
    g1, g2, dh, dz = node((3, 5), "g1"), node((5, 2), "g2"), node((4, 5), "dh"), node((4, 5), "dz")
    u1, u2 = node((3, 5), "u1"), node((5, 2), "u2")
    return ir.block(
        ir.accum(z, "add", x, w1, op="mul", spec="bi,ih->bh"),
        ir.unop(h, "relu", z),
        ir.accum(y, "add", h, w2, op="mul", spec="bh,ho->bo"),
        ir.binop(dy, "sub", y, tgt),
        ir.accum(g2, "add", h, dy, op="mul", spec="bh,bo->ho"),
        ir.accum(dh, "add", dy, w2, op="mul", spec="bo,ho->bh"),
        ir.binop(dz, "relu_gate", z, dh),
        ir.accum(g1, "add", x, dz, op="mul", spec="bi,bh->ih"),
        ir.binop(u1, "mul", lr, g1, spec=",ih->ih"),
        ir.binop(w1, "sub", w1, u1),
        ir.binop(u2, "mul", lr, g2, spec=",ho->ho"),
        ir.binop(w2, "sub", w2, u2),
    )


GOLDENS = {
    "chain": _g_chain,
    "matmul_relu": _g_matmul_relu,
    "softmax": _g_softmax,
    "sum": _g_sum,
    "dot": _g_dot,
    "broadcast": _g_broadcast,
    "sgd": _g_sgd,
    "fetches": _g_fetches,
    "where": _g_where,
    "transpose": _g_transpose,
    "two_reads": _g_two_reads,
    "mlp_layer": _g_mlp_layer,
    "row_centring": _g_row_centring,
    "centre_in_place": _g_centre_in_place,
    "read_after_update": _g_read_after_update,
    "train_step": _g_train_step,
}


@pytest.mark.parametrize("name", list(GOLDENS))
def test_golden(name: str) -> None:
    comp = GOLDENS[name]()
    text = pretty(comp) + "\n---\n" + pretty(optimize(lower(comp), name=name)) + "\n"
    path = GOLDEN / f"{name}.txt"
    if os.environ.get("ARRAYJIT_REGEN_GOLDEN") == "1":
        path.write_text(text)
    assert path.exists(), f"missing golden {path}; regenerate with ARRAYJIT_REGEN_GOLDEN=1"
    assert text == path.read_text()


def test_cse_reuses_an_equal_inlined_reduction() -> None:
    x, s = node((3, 4), "x", hosted=True), node((3,), "s")
    y = node((3,), "y", hosted=True)
    # s is read twice in one statement at the same position: computed once, read twice.
    comp = ir.block(ir.accum(s, "add", x, spec="ij->i"), ir.binop(y, "mul", s, s))
    from arrayjit_ir.cse import eliminate_common_subexpressions
    from arrayjit_ir.indexing import Iterator

    sc1 = low_level.ScopeId(s, 101)
    sc2 = low_level.ScopeId(s, 102)
    i, j1, j2 = (low_level.Symbol(n) for n in (9001, 9002, 9003))

    def scope(sc: low_level.ScopeId, j: low_level.Symbol) -> low_level.Local_scope:
        body = low_level.For_loop(
            j,
            0,
            3,
            low_level.Set_local(
                sc,
                low_level.Binop(
                    low_level.ops.Binop.add,
                    low_level.Get_local(sc),
                    low_level.Get(x, (Iterator(i), Iterator(j))),
                ),
            ),
        )
        return low_level.Local_scope(sc, body, (Iterator(i),))

    stmt = low_level.Set(
        y, (Iterator(i),), low_level.Binop(low_level.ops.Binop.mul, scope(sc1, j1), scope(sc2, j2))
    )
    out = eliminate_common_subexpressions(stmt)
    assert isinstance(out, low_level.Set) and isinstance(out.value, low_level.Binop)
    assert out.value.b == low_level.Get_local(sc1)
    # A scope over another row (a different free symbol) is not merged.
    k = low_level.Symbol(9004)
    other = low_level.Set(
        y,
        (Iterator(i),),
        low_level.Binop(
            low_level.ops.Binop.mul,
            scope(sc1, j1),
            low_level.Local_scope(
                sc2,
                low_level.For_loop(
                    j2,
                    0,
                    3,
                    low_level.Set_local(sc2, low_level.Get(x, (Iterator(k), Iterator(j2)))),
                ),
                (),
            ),
        ),
    )
    assert isinstance(eliminate_common_subexpressions(other).value.b, low_level.Local_scope)
    vx = RNG.standard_normal((3, 4))
    np.testing.assert_allclose(run(comp, {x: vx}, [y])[y], vx.sum(1) ** 2, rtol=1e-6)


def test_cse_hoists_across_sibling_statements() -> None:
    from arrayjit_ir.cse import hoist_across_statements
    from arrayjit_ir.indexing import Fixed_idx, Iterator

    x, y, z, w = node((4,), "x"), node((), "y"), node((), "z"), node((), "w")
    sc1, sc2 = low_level.ScopeId(x, 201), low_level.ScopeId(x, 202)

    def total(sc: low_level.ScopeId) -> low_level.Local_scope:
        j = low_level.Symbol(9100 + sc.id)
        body = low_level.seq(
            low_level.Set_local(sc, low_level.Constant(0.0)),
            low_level.For_loop(
                j,
                0,
                3,
                low_level.Set_local(
                    sc,
                    low_level.Binop(
                        low_level.ops.Binop.add,
                        low_level.Get_local(sc),
                        low_level.Get(x, (Iterator(j),)),
                    ),
                ),
            ),
        )
        return low_level.Local_scope(sc, body, ())

    def in_loop(*stmts: low_level.Stmt) -> low_level.Stmt:
        return low_level.For_loop(low_level.Symbol(9200), 0, 0, low_level.seq(*stmts))

    code = in_loop(low_level.Set(y, (), total(sc1)), low_level.Set(z, (), total(sc2)))
    out = hoist_across_statements(code)
    assert isinstance(out, low_level.For_loop) and isinstance(out.body, low_level.Seq)
    assert len(out.body.stmts) == 4
    assert out.body.stmts[2] == low_level.Set(y, (), low_level.Get_local(sc1))
    assert out.body.stmts[3] == low_level.Set(z, (), low_level.Get_local(sc1))
    vals = interpret_code(out, {x: np.arange(4.0, dtype=np.float32)}, [y, z])
    assert vals[y] == 6.0 and vals[z] == 6.0
    # A write in between to a node the computation reads blocks the hoist.
    blocked = in_loop(
        low_level.Set(y, (), total(sc1)),
        low_level.Set(x, (Fixed_idx(0),), low_level.Constant(5.0)),
        low_level.Set(w, (), total(sc2)),
    )
    assert hoist_across_statements(blocked) == blocked
    # A routine's top-level statements may run as separate kernels (GPU): no local crosses
    # them (issue 34: OpenCL's "use of undeclared identifier").
    top = low_level.seq(low_level.Set(y, (), total(sc1)), low_level.Set(z, (), total(sc2)))
    assert hoist_across_statements(top) == top


def interpret_code(
    code: low_level.Stmt, inputs: dict[Tnode, np.ndarray], outs: list[Tnode]
) -> dict[Tnode, np.ndarray]:
    from arrayjit_ir import interpret

    bufs = dict(inputs)
    for tn in outs:
        bufs[tn] = np.zeros(tn.dims, np.float32)
    return interpret(code, bufs)


def _loop_symbols(s: low_level.Stmt) -> list[object]:
    out: list[object] = []
    while True:
        match s:
            case low_level.For_loop(index=i, body=body):
                out.append(i)
                s = body
            case low_level.Seq(stmts=stmts):
                s = stmts[-1]
            case _:
                return out


def test_large_reductions_get_the_contiguous_axis_innermost() -> None:
    from arrayjit_ir.indexing import Iterator

    n = 64  # 64^3 iterations: above REORDER_MIN_WORK
    x, w, h = (
        node((n, n), "x", hosted=True),
        node((n, n), "w", hosted=True),
        node((n, n), "h", hosted=True),
    )
    code = lower(ir.accum(h, "add", x, w, op="mul", spec="ik,kj->ij"))
    order = _loop_symbols(code)
    assert len(order) == 3  # h[i, j] is stored with j innermost: the reduction axis k is middle
    last_axis_of_h = [s for s in order if Iterator(s) == _lhs_index(code)[1]]
    assert order[-1] == last_axis_of_h[0]
    vx, vw = RNG.standard_normal((n, n)), RNG.standard_normal((n, n))
    np.testing.assert_allclose(
        run(ir.accum(h, "add", x, w, op="mul", spec="ik,kj->ij"), {x: vx, w: vw}, [h])[h],
        vx @ vw,
        rtol=1e-4,
        atol=1e-4,
    )
    # A row sum keeps its reduction innermost (contiguous in x, a register accumulator).
    s = node((n,), "s", hosted=True)
    code = lower(ir.accum(s, "add", x, spec="ij->i"))
    assert _loop_symbols(code)[0] == _lhs_index(code)[0].symbol


def _lhs_index(s: low_level.Stmt) -> tuple:  # type: ignore[type-arg]
    while not isinstance(s, low_level.Set):
        s = s.body if isinstance(s, low_level.For_loop) else s.stmts[-1]  # type: ignore[attr-defined]
    return s.indices


def test_simplify_keeps_what_a_precision_changes() -> None:
    from arrayjit_ir.optimize import _simplify_expr

    add = low_level.ops.Binop.add
    halves = low_level.Binop(add, low_level.Constant(0.6), low_level.Constant(0.6))
    # In int32 each leaf converts first (0 + 0): folding in floats would give 1.
    assert _simplify_expr(halves, Prec.int32) == halves
    # In single, 0.1 + 0.2 folds in float32 arithmetic, not in double.
    tenths = low_level.Binop(add, low_level.Constant(0.1), low_level.Constant(0.2))
    expect = float(np.float32(0.1) + np.float32(0.2))
    assert _simplify_expr(tenths, Prec.single) == low_level.Constant(expect)


def test_inlined_node_keeps_the_rounding_to_its_precision() -> None:
    x, y = node((1,), "x", hosted=True, prec="double"), node((1,), "y", hosted=True, prec="double")
    t = node((1,), "t", prec="single")
    c = node((), "c", prec="int32")
    comp = ir.block(
        ir.binop(t, "mul", x, x), ir.fetch(c, ir.Constant(2.75)), ir.binop(y, "sub", t, c)
    )
    o = optimize(lower(comp), name="round")
    assert t.known_virtual() and c.known_virtual()
    bufs = {x: np.array([1 / 3]), y: np.zeros(1)}
    interpret(o, bufs)
    third = np.float32(1 / 3)  # t = x * x is computed in single: leaves converted first
    assert bufs[y][0] == float(third * third) - 2
