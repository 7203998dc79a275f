"""Affine axis expressions in specs (convolutions, strided and dilated windows, pooling):
the parser's errors, letters' ranges, the range check, injectivity and coverage of affine
result indices, padding margins and the bounds of the lowered code."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from arrayjit_ir import bounds, interpret, ir, lower, ops, optimize
from arrayjit_ir import low_level as L
from arrayjit_ir.assignments import Accum_op
from arrayjit_ir.indexing import Affine, AxisIndex, Fixed_idx, Iterator, Symbol, fresh_symbol
from arrayjit_ir.margins import is_margin_write, margin_fill, needed_margin
from arrayjit_ir.projections import Projections, affine_covers, affine_is_injective
from arrayjit_ir.spec import parse_spec
from arrayjit_tnode import Padding, Tnode, UsageError

RNG = np.random.default_rng(36)


def _cells(code: L.Stmt) -> list[tuple[Tnode, tuple[int, ...], bool]]:
    """Every cell ``code`` stores (True) or reads (False), loops enumerated."""
    out: list[tuple[Tnode, tuple[int, ...], bool]] = []

    def at(i: AxisIndex, env: dict[Symbol, int]) -> int:
        match i:
            case Fixed_idx(value=v):
                return v
            case Iterator(symbol=Symbol() as x):
                return env[x]
            case Affine(terms=terms, offset=off):
                return sum(c * env[x] for c, x in terms if isinstance(x, Symbol)) + off
        raise TypeError(i)

    def visit(s: L.Stmt, env: dict[Symbol, int]) -> None:
        match s:
            case L.Seq(stmts=stmts):
                for x in stmts:
                    visit(x, env)
            case L.For_loop(index=i, from_=lo, to_inclusive=hi, body=body):
                for v in range(lo, hi + 1):
                    visit(body, {**env, i: v})
            case L.Set(tn=tn, indices=idx, value=value):
                out.append((tn, tuple(at(i, env) for i in idx), True))
                for g in L.sub_exprs(value):
                    if isinstance(g, L.Get):
                        out.append((g.tn, tuple(at(i, env) for i in g.indices), False))

    visit(code, {})
    return out


def node(dims: tuple[int, ...], label: str, **kw: object) -> Tnode:
    return Tnode.create(dims, label=label, **kw)  # type: ignore[arg-type]


# ---- the parser ----


def test_parse_letters_expressions_and_positions() -> None:
    p = parse_spec("b(2*h+i-1)( w + 2 * j )c,ijcd->bhwd")
    x = p.inputs[0]
    assert [a.text for a in x.axes] == ["b", "(2*h+i-1)", "( w + 2 * j )", "c"]
    assert x.axes[1].terms == ((2, "h"), (1, "i")) and x.axes[1].offset == -1
    assert x.axes[2].terms == ((1, "w"), (2, "j")) and x.axes[2].pos == 10
    assert p.output.axes[0].letter == "b" and x.axes[1].letter is None
    assert parse_spec("b(o)->b").inputs[0].axes[1].letter == "o"  # (o) is o
    assert p.letters == ("b", "h", "w", "d", "i", "j", "c")
    assert parse_spec("b(-k+4)->b").inputs[0].axes[1].terms == ((-1, "k"),)
    assert parse_spec("(3)->").inputs[0].axes[0].terms == ()


@pytest.mark.parametrize(
    ("spec", "message", "pos"),
    [
        ("b(0*k)c->bc", "letter 'k' has coefficient 0", 2),
        ("bo->b(o-k)", "negative coefficient in the result", 8),
        ("b(o+o)->b", "letter 'o' appears twice in one expression", 4),
        ("b(h*i)->b", "a product of letters is not affine", 4),
        ("b(o+k->b", "the expression opened at position 1 is not closed", 5),
        ("b()->b", "an empty expression", 2),
        ("b1->b", "axis names must be letters", 1),
        ("b(o k)->b", "expected '\\+', '-' or '\\)'", 4),
        ("b(2*)->b", "expected a letter after '\\*'", 4),
        ("b(o+k)k->b", "input 0 repeats an axis: letter 'k'", 6),
        ("b(o+k),->b(k)", "", 0),  # well formed: refused later, by the nodes
        ("a->b->c", "a second '->'", 4),
        ("b(o+(k))->b", "expected a term", 4),
        ("b(o+k)c->b@", "axis names must be letters", 10),
    ],
)
def test_parser_errors_name_the_spec_and_the_position(spec: str, message: str, pos: int) -> None:
    if not message:
        parse_spec(spec)
        return
    with pytest.raises(UsageError, match=message) as info:
        parse_spec(spec)
    text = str(info.value)
    assert text.startswith(f"einsum spec {spec!r}: ") and f"(at position {pos})" in text
    assert text.splitlines()[-1] == "    " + " " * pos + "^"


def test_missing_arrow() -> None:
    with pytest.raises(UsageError, match="expected 'inputs->output'"):
        parse_spec("b(o+k)c")


# ---- ranges ----


def test_letters_alone_range_the_loops_and_windows_are_inferred() -> None:
    x, w, y = node((2, 7, 3), "x"), node((3, 3, 4), "w"), node((2, 5, 4), "y")
    p = Projections.from_einsum("b(o+k)c,kcd->bod", y, x, w)
    assert p.product_space == (2, 5, 4, 3, 3)  # b, o, d, k, c
    # A pooling window appears only inside expressions: the largest range that fits.
    img, pooled = node((2, 8, 6, 3), "img"), node((2, 4, 3, 3), "pooled")
    q = Projections.from_einsum("b(2*h+i)(2*w+j)c->bhwc", pooled, img)
    assert q.product_space == (2, 4, 3, 3, 2, 2)
    # An odd size: the largest window is 3 (2*3+2 = 8); sizes= asks for 2 (floor pooling).
    odd = node((2, 9, 6, 3), "odd")
    assert Projections.from_einsum("b(2*h+i)(2*w+j)c->bhwc", pooled, odd).product_space[4] == 3
    r = Projections.from_einsum("b(2*h+i)(2*w+j)c->bhwc", pooled, odd, sizes={"i": 2})
    assert r.product_space[4:] == (2, 2)
    # The input gradient: the kernel's range comes from the result's size.
    dy, dx = node((2, 5, 4), "dy"), node((2, 7, 3), "dx")
    g = Projections.from_einsum("bod->b(o+k)c", dx, dy, sizes={"c": 3})
    assert dict(zip("bokcd", g.product_space)) == {"b": 2, "o": 5, "k": 3, "c": 3, "d": 4}


def test_range_errors() -> None:
    x, w, y = node((2, 7, 3), "x"), node((3, 3, 4), "w"), node((2, 6, 4), "y")
    with pytest.raises(
        UsageError,
        match=r"\(o\+k\) of input 0 x#\d+ axis 1 spans 0\.\.7 "
        r"\(o in 0\.\.5, k in 0\.\.2\), but the axis has 7 cells and no padding "
        r"\(valid 0\.\.6\)",
    ) as info:
        Projections.from_einsum("b(o+k)c,kcd->bod", y, x, w)
    assert "(at position 1)" in str(info.value)
    padded = node((2, 7, 3), "xp", padding=Padding(((0, 0), (1, 1), (0, 0))))
    Projections.from_einsum("b(o+k-1)c,kcd->bod", node((2, 7, 4), "same"), padded, w)
    with pytest.raises(UsageError, match=r"spans -2\.\.6 .* padding \(1, 1\) \(valid -1\.\.7\)"):
        Projections.from_einsum("b(o+k-2)c,kcd->bod", node((2, 7, 4), "same"), padded, w)
    with pytest.raises(
        UsageError,
        match=r"cannot bound \(o\+k\) of input 0 x#\d+ axis 1: "
        r"letters 'o', 'k' have no range",
    ):
        Projections.from_einsum("b(o+k)c->bc", node((2, 3), "s"), x)
    with pytest.raises(
        UsageError,
        match=r"\(2\*h\+i\) leaves input 0 x#\d+ axis 1 .* for every "
        r"value of 'i'",
    ):
        Projections.from_einsum("b(2*h+i)c->bhc", node((2, 5, 3), "big"), x)
    with pytest.raises(UsageError, match=r"sizes gives 'k' 2, but it has size 3 in input 1"):
        Projections.from_einsum("b(o+k)c,kcd->bod", node((2, 5, 4), "y5"), x, w, sizes={"k": 2})
    with pytest.raises(UsageError, match=r"sizes names 'z', which is not in the spec"):
        Projections.from_einsum("b(o+k)c,kcd->bod", node((2, 5, 4), "y5"), x, w, sizes={"z": 2})
    with pytest.raises(UsageError, match=r"sizes\['k'\] must be a non-negative integer"):
        Projections.from_einsum("b(o+k)c->boc", node((2, 5, 3), "y5"), x, sizes={"k": -1})
    with pytest.raises(UsageError, match=r"sizes must be a mapping .* needs a spec"):
        ir.unop(node((2, 7, 3), "c"), "neg", x, sizes={"k": 1})


def test_empty_and_size_one_axes() -> None:
    x, w = node((0, 7, 3), "x"), node((1, 3, 4), "w")
    p = Projections.from_einsum("b(2*o+k)c,kcd->bod", node((0, 4, 4), "y"), x, w)
    assert p.product_space == (0, 4, 4, 1, 3)
    assert p.project_rhs[0][1] == Affine(((2, p.product_iterators[1]),), 0)  # k < 1: dropped
    # An empty output axis: nothing is evaluated and nothing is checked.
    Projections.from_einsum("b(o+k+9)c,kcd->bod", node((2, 0, 4), "e"), node((2, 7, 3), "z"), w)


def test_non_injective_result_needs_an_accumulation() -> None:
    a, k, out = node((2, 5), "a"), node((2, 3), "k"), node((2, 7), "out")
    with pytest.raises(
        UsageError,
        match=r"assignment to out#\d+ writes some cells more than "
        r"once \(an expression of the result such as \(o\+k\) is not injective\)",
    ):
        ir.binop(out, "mul", a, k, spec="bo,bk->b(o+k)")
    ir.accum(out, "add", a, k, op="mul", spec="bo,bk->b(o+k)")
    dy, w, dx = node((2, 5, 4), "dy"), node((3, 3, 4), "w"), node((2, 7, 3), "dx")
    with pytest.raises(UsageError, match=r"reduces over axes \[4\]"):
        ir.binop(dx, "mul", dy, w, spec="bod,kcd->b(o+k)c")


# ---- injectivity and coverage ----


def test_injectivity_and_coverage_of_affine_results() -> None:
    h, i, o, k = (fresh_symbol() for _ in range(4))
    ext = {h: 4, i: 2, o: 5, k: 3}
    assert affine_is_injective(Affine(((2, h), (1, i))), ext)
    assert affine_covers(Affine(((2, h), (1, i))), ext, 8)
    assert not affine_covers(Affine(((2, h), (1, i))), ext, 9)
    assert not affine_covers(Affine(((2, h), (1, i)), 1), ext, 8)
    assert not affine_is_injective(Affine(((1, o), (1, k))), ext)
    assert affine_is_injective(Affine(((3, h), (1, i))), ext)  # gaps: injective, not covering
    assert not affine_covers(Affine(((3, h), (1, i))), ext, 11)
    assert not affine_is_injective(Affine(((2, h), (1, k))), ext)  # windows of 3, stride 2
    assert affine_is_injective(Affine(((-2, h), (1, i)), 7), ext)
    assert affine_is_injective(Affine(((1, o), (5, k))), ext)
    assert affine_covers(Affine(((1, o), (5, k))), ext, 15)
    pool = Projections.from_einsum(
        "b(2*h+i)(2*w+j)c,bhwc->b(2*h+i)(2*w+j)c",
        node((2, 8, 6, 3), "up"),
        node((2, 8, 6, 3), "x"),
        node((2, 4, 3, 3), "g"),
    )
    assert pool.is_injective() and pool.is_surjective((2, 8, 6, 3))
    odd = Projections.from_einsum(
        "bhwc->b(2*h+i)(2*w+j)c",
        node((2, 9, 6, 3), "up9"),
        node((2, 4, 3, 3), "g"),
        sizes={"i": 2, "j": 2},
    )
    assert odd.is_injective() and not odd.is_surjective((2, 9, 6, 3))
    grad = Projections.from_einsum(
        "bod,kcd->b(o+k)c", node((2, 7, 3), "dx"), node((2, 5, 4), "dy"), node((3, 3, 4), "w")
    )
    assert not grad.is_injective() and grad.reduced_axes() == [4]  # d only


def test_neutral_fill_only_where_an_affine_result_misses_cells() -> None:
    """An injective, covering affine result is assigned without a neutral fill; one that
    misses cells (an odd size) is filled first, and the values agree with numpy."""
    g = node((2, 4, 3), "g", hosted=True)
    for rows in (8, 9):
        up = node((2, rows, 3), f"up{rows}", hosted=True)
        comp = ir.accum(up, "add", g, spec="bhc->b(2*h+i)c", sizes={"i": 2})
        code = lower(comp)
        fills = (
            [s for s in code.stmts if isinstance(s, L.Zero_out)] if isinstance(code, L.Seq) else []
        )
        assert bool(fills) == (rows == 9)
        vg = RNG.standard_normal((2, 4, 3)).astype(np.float32)
        got = interpret(optimize(code, name="up"), {g: vg})[up]
        want = np.zeros((2, rows, 3), np.float32)
        want[:, :8] = np.repeat(vg, 2, axis=1)
        np.testing.assert_array_equal(got, want)


# ---- margins ----


def test_needed_margins() -> None:
    assert needed_margin(ops.Binop.add, ops.Binop.mul, 0) == 0.0
    assert needed_margin(ops.Binop.add, ops.Binop.mul, 1) == 0.0
    assert needed_margin(ops.Binop.max, ops.Unop.identity, 0) == -math.inf
    assert needed_margin(ops.Binop.min, ops.Unop.identity, 0) == math.inf
    assert needed_margin(ops.Binop.mul, ops.Unop.identity, 0) == 1.0
    assert needed_margin(ops.Binop.max, ops.Binop.add, 0) == -math.inf
    assert needed_margin(ops.Binop.add, ops.Unop.relu, 0) == 0.0
    assert needed_margin(ops.Binop.add, ops.Binop.arg1, 1) == 0.0  # not read: anything
    assert needed_margin(ops.Binop.add, ops.Binop.arg1, 0) == 0.0
    assert needed_margin(ops.Binop.add, ops.Binop.sub, 0) is None
    assert needed_margin(ops.Binop.add, ops.Ternop.fma, 0) is None
    assert needed_margin(ops.Binop.max, ops.Unop.exp, 0) is None
    assert needed_margin(None, ops.Unop.identity, 0) is None


def test_margin_fill_writes_each_margin_cell_once() -> None:
    tn = node((2, 3, 4), "t", padding=Padding(((0, 1), (2, 0), (1, 1))))
    stmt = margin_fill(tn, 5.0)
    assert isinstance(stmt, L.Seq) and all(is_margin_write(s) for s in stmt.stmts)
    buf = np.zeros(tn.dims, np.float32)
    counts = np.zeros(tn.dims, int)
    for _, cell, _ in _cells(stmt):
        counts[cell] += 1
    logical = np.zeros(tn.dims, bool)
    logical[tn.logical_slices()] = True
    assert (counts[~logical] == 1).all() and (counts[logical] == 0).all()
    interpret(L.seq(stmt), {tn: buf})
    assert not is_margin_write(L.Set(tn, (Iterator(fresh_symbol()),) * 3, L.Constant(1.0)))


def test_margins_without_a_value_need_a_neutral_reader() -> None:
    x = node((2, 5, 3), "x", hosted=True, padding=Padding(((0, 0), (1, 1), (0, 0)), None))
    w = node((3, 3, 4), "w", hosted=True)
    y = node((2, 5, 4), "y", hosted=True)
    with pytest.raises(
        UsageError,
        match=r"reads the margins of x#\d+ \(operand 0, axis 1\), "
        r"whose Padding value is None, and no margin value makes sub neutral for "
        r"accumulating add",
    ):
        lower(ir.accum(y, "add", x, w, op="sub", spec="b(o+k-1)c,kcd->bod"))
    copy = node((2, 5, 3), "copy", hosted=True)
    with pytest.raises(UsageError, match="without an accumulation: declare the padding value"):
        lower(ir.unop(copy, "identity", x, spec="b(o-1)c->boc"))
    with pytest.raises(UsageError, match="through the merge buffer"):
        lower(ir.accum(y, "add", ir.merge_buffer(x), w, op="mul", spec="b(o+k-1)c,kcd->bod"))
    # Reads inside the logical range need no value.
    lower(ir.unop(node((2, 4, 3), "inner"), "identity", x, spec="b(o+1)c->boc"))


def test_a_margin_reset_does_not_define_the_node() -> None:
    """A routine that resets the margins of a node another routine computed, then reads it:
    the node stays an input (materialized, never local or inlined)."""
    x = node((2, 5, 3), "xn", padding=Padding(((0, 0), (1, 1), (0, 0)), None))
    w, y = node((3, 3, 4), "w", hosted=True), node((2, 5, 4), "y", hosted=True)
    opt = optimize(lower(ir.accum(y, "add", x, w, op="mul", spec="b(o+k-1)c,kcd->bod")), name="r")
    t = opt.traced[x]
    assert t.assigned and t.read_before_write and x in opt.inputs and x in opt.outputs
    assert x in opt.context_nodes


def test_padded_nodes_are_never_inlined(caplog: pytest.LogCaptureFixture) -> None:
    import logging

    src, w = node((2, 5, 3), "src", hosted=True), node((3, 3, 4), "w", hosted=True)
    a = node((2, 5, 3), "a", padding=Padding(((0, 0), (1, 1), (0, 0)), 0.0))
    y = node((2, 5, 4), "y", hosted=True)
    comp = ir.block(
        ir.unop(a, "relu", src), ir.accum(y, "add", a, w, op="mul", spec="b(o+k-1)c,kcd->bod")
    )
    with caplog.at_level(logging.DEBUG, logger="arrayjit_ir"):
        opt = optimize(lower(comp), name="pad")
    assert not a.known_virtual() and a in opt.traced
    assert any("a#" in r.message and "it is padded" in r.message for r in caplog.records)


# ---- bounds ----


def test_bounds_of_lowered_convolutions() -> None:
    """Every access of a lowered strided, dilated, padded convolution, its gradients and a
    pooling lies in its node's buffer (enumerated), reads past the logical range land only
    in margins, and the bounds check agrees; an index past the margins is refused."""
    pad = Padding(((0, 0), (2, 1), (0, 0)), 0.0)
    x, w = node((2, 9, 3), "x", padding=pad), node((3, 3, 2), "w")
    y, dy = node((2, 4, 2), "y"), node((2, 4, 2), "dy")
    dx, dw = node((2, 9, 3), "dx", padding=pad), node((3, 3, 2), "dw")
    p = node((2, 4, 3), "p")
    window = "b(2*o+2*k-2)c"
    comp = ir.block(
        ir.accum(y, "add", x, w, op="mul", spec=f"{window},kcd->bod"),
        ir.accum(dx, "add", dy, w, op="mul", spec=f"bod,kcd->{window}"),
        ir.accum(dw, "add", x, dy, op="mul", spec=f"{window},bod->kcd"),
        ir.accum(p, "max", x, spec=f"{window}->boc", sizes={"k": 3}),
    )
    code = lower(comp)
    bounds.check(code)
    seen: dict[str, set[int]] = {}
    for tn, cell, _ in _cells(code):
        assert all(0 <= c < d for c, d in zip(cell, tn.dims)), (tn.debug_label, cell)
        seen.setdefault(tn.label[-1], set()).add(cell[1])
    assert min(seen["x"]) == 0 and max(seen["x"]) == 10  # left margin read; 12 buffer rows
    # A hand-made projection past the margins (4*o+k-2 reaches logical 12, buffer row 14 of
    # 12) is refused at lowering by the bounds check.
    b, o, d, k, c = (fresh_symbol() for _ in range(5))
    bad = Accum_op(
        y,
        ops.Binop.mul,
        (x, w),
        ops.Binop.add,
        True,
        Projections(
            (2, 4, 2, 3, 3),
            (b, o, d, k, c),
            (Iterator(b), Iterator(o), Iterator(d)),
            (
                (Iterator(b), Affine(((4, o), (1, k)), -2), Iterator(c)),
                (Iterator(k), Iterator(c), Iterator(d)),
            ),
        ),
    )
    with pytest.raises(
        UsageError,
        match=r"a read of node x#\d+ axis 1 is indexed by .* ranging "
        r"over 0\.\.14, but the axis has size 12",
    ):
        lower(bad)


def test_window_reads_through_inlined_nodes_compute_like_numpy() -> None:
    """A pointwise node inlined at window reads, a "same" convolution, a 2x2 pooling: the
    optimized and unoptimized interpretations equal numpy. One output channel: ``relu`` is
    then recomputed at 2 reads per cell of ``a`` on average, within the optimizer's work
    budget (more output channels multiply its reads and get ``a`` stored:
    :mod:`arrayjit_ir.virtualize`)."""
    x = node((2, 6, 3), "x", hosted=True)
    a = node((2, 6, 3), "a")
    w, y = node((3, 3, 1), "w", hosted=True), node((2, 4, 1), "y")
    p = node((2, 2, 1), "p", hosted=True)
    comp = ir.block(
        ir.unop(a, "relu", x),
        ir.accum(y, "add", a, w, op="mul", spec="b(o+k)c,kcd->bod"),
        ir.accum(p, "max", y, spec="b(2*o+k)d->bod"),
    )
    vx, vw = RNG.standard_normal((2, 6, 3)), RNG.standard_normal((3, 3, 1))
    bufs = {x: vx.astype(np.float32), w: vw.astype(np.float32)}
    ra = np.maximum(vx, 0)
    conv = sum(np.einsum("boc,cd->bod", ra[:, k : k + 4], vw[k]) for k in range(3))
    want = conv.reshape(2, 2, 2, 1).max(axis=2)
    low = lower(comp)
    opt = optimize(low, name="chain")
    assert a.known_virtual()
    for code in (low, opt):
        got = interpret(code, {t: v.copy() for t, v in bufs.items()})[p]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_all_small_windows_against_numpy() -> None:
    """Every 1-D window with stride 1-3, dilation 1-2, kernel 1-3 and margins 0-2, as a sum
    over a zero-padded input, by the interpreter over the unoptimized code."""
    for s, d, k, lo, hi in itertools.product((1, 2, 3), (1, 2), (1, 2, 3), (0, 1, 2), (0, 2)):
        n = 5
        o = max(0, (n + lo + hi - d * (k - 1) - 1) // s + 1)
        x = node((n,), "x", hosted=True, padding=Padding(((lo, hi),), 0.0))
        y = node((o,), "y", hosted=True)
        spec = f"({s}*o+{d}*k-{lo})->o"
        vx = RNG.standard_normal(n)
        x.set_values(vx)
        assert x.array is not None
        got = interpret(lower(ir.accum(y, "add", x, spec=spec, sizes={"k": k})), {x: x.array})[y]
        xp = np.pad(vx, (lo, hi))
        want = [sum(xp[s * i + d * j] for j in range(k)) for i in range(o)]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=spec)
