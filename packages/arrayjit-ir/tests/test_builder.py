"""The builder, projections and lowering, checked through the interpreter against numpy."""

import numpy as np
import pytest
from ir_helpers import run

from arrayjit_ir import ir
from arrayjit_ir.indexing import StaticSymbol
from arrayjit_ir.projections import Projections
from arrayjit_tnode import Padding, Tnode, UsageError

RNG = np.random.default_rng(0)


def node(dims: tuple[int, ...], label: str, **kw: object) -> Tnode:
    return Tnode.create(dims, label=label, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("optimized", [False, True])
def test_matmul(optimized: bool) -> None:
    x, w, h = (
        node((4, 3), "x", hosted=True),
        node((3, 5), "w", hosted=True),
        node((4, 5), "h", hosted=True),
    )
    vx, vw = RNG.standard_normal((4, 3)), RNG.standard_normal((3, 5))
    out = run(
        ir.accum(h, "add", x, w, op="mul", spec="ik,kj->ij"),
        {x: vx, w: vw},
        [h],
        optimized=optimized,
    )
    np.testing.assert_allclose(out[h], vx @ vw, rtol=1e-5)


def test_transpose_and_dot() -> None:
    a = node((2, 3, 4), "a", hosted=True)
    t = node((2, 4, 3), "t", hosted=True)
    va = RNG.standard_normal((2, 3, 4))
    np.testing.assert_allclose(
        run(ir.unop(t, "identity", a, spec="bij->bji"), {a: va}, [t])[t],
        va.transpose(0, 2, 1),
        rtol=1e-6,
    )
    u, v, s = node((5,), "u", hosted=True), node((5,), "v", hosted=True), node((), "s", hosted=True)
    vu, vv = RNG.standard_normal(5), RNG.standard_normal(5)
    got = run(ir.accum(s, "add", u, v, op="mul", spec="i,i->"), {u: vu, v: vv}, [s])[s]
    np.testing.assert_allclose(got, vu @ vv, rtol=1e-5)


def test_softmax() -> None:
    x, y = node((3, 6), "x", hosted=True), node((3, 6), "y", hosted=True)
    m, e, s = node((3, 1), "m"), node((3, 6), "e"), node((3, 1), "s")
    comp = ir.block(
        ir.accum(m, "max", x, spec="ij->ik"),
        ir.binop(e, "sub", x, m),
        ir.unop(e, "exp", e),
        ir.accum(s, "add", e, spec="ij->ik"),
        ir.binop(y, "div", e, s),
    )
    vx = RNG.standard_normal((3, 6)) * 3
    got = run(comp, {x: vx}, [y])[y]
    ex = np.exp(vx - vx.max(axis=1, keepdims=True))
    np.testing.assert_allclose(got, ex / ex.sum(axis=1, keepdims=True), rtol=1e-5)


def test_mlp_forward_and_backward() -> None:
    b, i, hdim, o = 8, 3, 5, 2
    x, w1, w2 = (
        node((b, i), "x", hosted=True),
        node((i, hdim), "w1", hosted=True),
        node((hdim, o), "w2", hosted=True),
    )
    target = node((b, o), "t", hosted=True)
    z, h, y = node((b, hdim), "z"), node((b, hdim), "h"), node((b, o), "y", hosted=True)
    dy, dh, dz = node((b, o), "dy"), node((b, hdim), "dh"), node((b, hdim), "dz")
    g1, g2 = node((i, hdim), "g1", hosted=True), node((hdim, o), "g2", hosted=True)
    comp = ir.block(
        ir.accum(z, "add", x, w1, op="mul", spec="bi,ih->bh"),  # z = x @ w1
        ir.unop(h, "relu", z),  # h = relu z
        ir.accum(y, "add", h, w2, op="mul", spec="bh,ho->bo"),  # y = h @ w2
        ir.binop(dy, "sub", y, target),  # dL/dy of 0.5*|y - t|^2
        ir.accum(g2, "add", h, dy, op="mul", spec="bh,bo->ho"),  # g2 = h^T dy
        ir.accum(dh, "add", dy, w2, op="mul", spec="bo,ho->bh"),  # dh = dy w2^T
        ir.binop(dz, "relu_gate", z, dh),  # dz = (z > 0) * dh
        ir.accum(g1, "add", x, dz, op="mul", spec="bi,bh->ih"),  # g1 = x^T dz
    )
    vx, v1, v2, vt = (RNG.standard_normal(s) for s in ((b, i), (i, hdim), (hdim, o), (b, o)))
    got = run(comp, {x: vx, w1: v1, w2: v2, target: vt}, [y, g1, g2])
    zz = vx @ v1
    hh = np.maximum(zz, 0)
    yy = hh @ v2
    ddy = yy - vt
    np.testing.assert_allclose(got[y], yy, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got[g2], hh.T @ ddy, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got[g1], vx.T @ ((zz > 0) * (ddy @ v2.T)), rtol=1e-4, atol=1e-5)


def test_broadcasting() -> None:
    a, bias, out = (
        node((4, 3), "a", hosted=True),
        node((3,), "bias", hosted=True),
        node((4, 3), "out", hosted=True),
    )
    col = node((4, 1), "col", hosted=True)
    va, vb, vc = RNG.standard_normal((4, 3)), RNG.standard_normal(3), RNG.standard_normal((4, 1))
    comp = ir.block(ir.binop(out, "add", a, bias), ir.binop(out, "mul", out, col))
    got = run(comp, {a: va, bias: vb, col: vc}, [out])[out]
    np.testing.assert_allclose(got, (va + vb) * vc, rtol=1e-5)


def test_accumulate_without_neutral_init_keeps_old_value() -> None:
    acc, x = node((3,), "acc", hosted=True), node((3, 4), "x", hosted=True)
    va, vx = np.array([10.0, 20.0, 30.0]), RNG.standard_normal((3, 4))
    got = run(
        ir.accum(acc, "add", x, spec="ij->i", initialize_neutral=False), {acc: va, x: vx}, [acc]
    )[acc]
    np.testing.assert_allclose(got, va + vx.sum(1), rtol=1e-5)
    got = run(ir.accum(acc, "add", x, spec="ij->i"), {acc: va, x: vx}, [acc])[acc]
    np.testing.assert_allclose(got, vx.sum(1), rtol=1e-5)


@pytest.mark.parametrize("reduce,np_fn", [("max", np.max), ("min", np.min), ("mul", np.prod)])
def test_reductions_use_their_neutral_element(reduce: str, np_fn: object) -> None:
    x, r = node((2, 5), "x", hosted=True), node((2,), "r", hosted=True)
    vx = RNG.standard_normal((2, 5))
    got = run(ir.accum(r, reduce, x, spec="ij->i"), {x: vx}, [r])[r]
    np.testing.assert_allclose(got, np_fn(vx, axis=1), rtol=1e-5)  # type: ignore[operator]


def test_fetch_ops() -> None:
    c, rng_, fill = (
        node((2, 3), "c", hosted=True),
        node((2, 3), "r", hosted=True),
        node((2, 2), "f", hosted=True),
    )
    z = node((3,), "z", hosted=True)
    comp = ir.block(
        ir.fetch(c, ir.Constant(2.5)),
        ir.fetch(rng_, ir.Range_over_offsets()),
        ir.fetch(fill, ir.Constant_fill((1.0, 2.0, 3.0, 4.0))),
        ir.fetch(z, ir.Constant(0.0)),
    )
    got = run(comp, {z: np.ones(3)}, [c, rng_, fill, z])
    assert (got[c] == 2.5).all()
    np.testing.assert_array_equal(got[rng_], np.arange(6).reshape(2, 3))
    np.testing.assert_array_equal(got[fill], [[1, 2], [3, 4]])
    np.testing.assert_array_equal(got[z], [0, 0, 0])


def test_static_symbols_slice_and_embed() -> None:
    i = StaticSymbol("i", range=4)
    data, row, k = (
        node((4, 3), "data", hosted=True),
        node((3,), "row", hosted=True),
        node((), "k", hosted=True),
    )
    vd = RNG.standard_normal((4, 3))
    comp = ir.block(ir.fetch(row, ir.Slice(i, data)), ir.fetch(k, ir.Embed_symbol(i)))
    got = run(comp, {data: vd}, [row, k], bindings={"i": 2})
    np.testing.assert_allclose(got[row], vd[2], rtol=1e-6)
    assert got[k] == 2.0


def test_unbound_static_symbol() -> None:
    from arrayjit_ir import lower, optimize

    i = StaticSymbol("batch")
    k = node((), "k", hosted=True)
    with pytest.raises(UsageError, match=r"routine r: static symbols \['batch'\] are not bound"):
        optimize(lower(ir.fetch(k, ir.Embed_symbol(i))), name="r")


def test_padding_is_respected() -> None:
    x = node((3,), "x", hosted=True, padding=Padding(((1, 2),), 0.0))
    y = node((3,), "y", hosted=True)
    vx = np.zeros(6)
    vx[1:4] = [1.0, 2.0, 3.0]
    got = run(ir.binop(y, "mul", x, x), {x: vx}, [y])[y]
    np.testing.assert_allclose(got, [1.0, 4.0, 9.0])


def test_precisions_round_on_store() -> None:
    a = node((3,), "a", hosted=True, prec="bfloat16")
    b = node((3,), "b", hosted=True, prec="int32")
    vals = np.array([1.0, np.pi, 1 / 3])
    got = run(ir.binop(b, "add", a, a), {a: vals.astype(a.prec.numpy_dtype)}, [b])[b]
    assert got.tolist() == [2, 6, 0]


def test_where_and_fma() -> None:
    c, x, y, out = (node((4,), n, hosted=True) for n in ("c", "x", "y", "out"))
    f = node((4,), "f", hosted=True)
    vc, vx, vy = np.array([1, 0, 1, 0.0]), RNG.standard_normal(4), RNG.standard_normal(4)
    got = run(
        ir.block(ir.ternop(out, "where", c, x, y), ir.ternop(f, "fma", x, y, x)),
        {c: vc, x: vx, y: vy},
        [out, f],
    )
    np.testing.assert_allclose(got[out], np.where(vc != 0, vx, vy), rtol=1e-6)
    np.testing.assert_allclose(got[f], vx * vy + vx, rtol=1e-5)


def test_random_uniform_through_the_ir() -> None:
    key = node((), "key", hosted=True, prec="uint4x32")
    ctr = node((64,), "ctr", hosted=True, prec="uint4x32")
    bits = node((64,), "bits", prec="uint4x32")
    u = node((64,), "u", hosted=True)
    comp = ir.block(
        ir.binop(bits, "threefry4x32", key, ctr),
        ir.unop(u, "uint4x32_to_prec_uniform", bits),
    )
    vkey = np.array([1, 2, 3, 4], np.uint32)
    vctr = np.zeros((64, 4), np.uint32)
    vctr[:, 0] = np.arange(64)
    got = run(comp, {key: vkey, ctr: vctr}, [u])[u]
    from arrayjit_ir import ops

    expected = ops.uint4x32_to_uniform(ops.threefry4x32(vkey, vctr), np.dtype(np.float32), "single")
    np.testing.assert_array_equal(got, expected)


def test_unsupported_precision_for_threefry() -> None:
    a, b, c = node((2,), "a"), node((2,), "b"), node((2,), "c")
    with pytest.raises(UsageError, match=r"threefry4x32 writes uint4x32, but c#\d+ has precision"):
        from arrayjit_ir import lower

        lower(ir.binop(c, "threefry4x32", a, b))


def test_spec_errors_name_the_axis() -> None:
    x, w, h = node((4, 3), "x"), node((2, 5), "w"), node((4, 5), "h")
    with pytest.raises(UsageError, match=r"axis 'k' has size 3 in input 0 x#\d+ but 2 in input 1"):
        ir.accum(h, "add", x, w, op="mul", spec="ik,kj->ij")
    with pytest.raises(UsageError, match=r"output 'ij' has 2 axes but node s#\d+ has dims \[\]"):
        Projections.from_einsum("i,i->ij", node((), "s"), x, x)
    with pytest.raises(UsageError, match="has 1 inputs but 2 nodes"):
        Projections.from_einsum("ij->ij", h, x, w)
    with pytest.raises(UsageError, match="expected 'inputs->output'"):
        Projections.from_einsum("ij", h, x)
    with pytest.raises(UsageError, match="repeats an axis"):
        Projections.from_einsum("ii->i", node((4,), "d"), node((4, 4), "e"))


def test_pointwise_shape_errors() -> None:
    with pytest.raises(UsageError, match=r"b#\d+ with dims \[3\] does not broadcast to the result"):
        ir.binop(node((4, 2), "out"), "add", node((4, 2), "a"), node((3,), "b"))
    with pytest.raises(UsageError, match="has more axes than the result"):
        ir.unop(node((2,), "out"), "neg", node((3, 2), "a"))


def test_reduction_without_accumulation_is_refused() -> None:
    with pytest.raises(UsageError, match=r"assignment to r#\d+ reduces over axes \[1\]"):
        ir.unop(node((3,), "r"), "identity", node((3, 4), "x"), spec="ij->i")


def test_unknown_op_names() -> None:
    with pytest.raises(UsageError, match="unknown 1-argument op 'frobnicate'"):
        ir.unop(node((1,), "o"), "frobnicate", node((1,), "x"))
    with pytest.raises(UsageError, match="give op= for 2 operands"):
        ir.accum(node((1,), "o"), "add", node((1,), "x"), node((1,), "y"))


def test_constant_fill_count_checked() -> None:
    from arrayjit_ir import lower

    with pytest.raises(UsageError, match=r"f#\d+ has 4 cells but 3 values"):
        lower(ir.fetch(node((2, 2), "f"), ir.Constant_fill((1.0, 2.0, 3.0))))


def test_surjective_injective_predicates() -> None:
    x, y = node((3, 4), "x"), node((3,), "y")
    p = Projections.from_einsum("ij->i", y, x)
    assert not p.is_injective() and p.is_surjective((3,))
    q = Projections.pointwise(x, x)
    assert q.is_injective() and q.is_surjective((3, 4))


def _nodes() -> tuple[Tnode, Tnode]:
    return Tnode.create((3,), label="x"), Tnode.create((3,), label="y")


@pytest.mark.parametrize(
    "call,message",
    [
        (lambda x, y: ir.accum(y, "sum", x), r"accum into y#\d+: unknown accumulation op 'sum'"),
        (lambda x, y: ir.accum(y, 3, x), r"accum_op must be a binary op name or None, got 3"),
        (lambda x, y: ir.unop(y, 42, x), r"op must be the name of a 1-argument op .* got 42"),
        (lambda x, y: ir.binop(y, ir.ops.Unop.neg, x, x), r"2-argument op .* got <Unop.neg"),
        (lambda x, y: ir.unop(y, "relu", 5), r"operand 0 must be a Tnode or merge_buffer"),
        (lambda x, y: ir.unop("y", "relu", x), r"unop: out must be a Tnode, got 'y'"),
        (lambda x, y: ir.binop(y, "add", x, x, spec=3), r"spec must be a string"),
        (lambda x, y: ir.fetch(y, 1.0), r"fetch_op must be Constant, Range_over_offsets"),
        (lambda x, y: ir.fetch(y, ir.Slice("i", x)), r"Slice needs a StaticSymbol, got 'i'"),
        (lambda x, y: ir.block(ir.unop(y, "neg", x), "oops"), r"block: item 1 is not an"),
        (lambda x, y: ir.merge_buffer(None), r"merge_buffer must be a Tnode, got None"),
    ],
)
def test_bad_arguments_are_usage_errors(call: object, message: str) -> None:
    x, y = _nodes()
    with pytest.raises(UsageError, match=message):
        call(x, y)  # type: ignore[operator]
