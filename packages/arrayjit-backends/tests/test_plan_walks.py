"""The planners' one-walk helpers (:mod:`arrayjit_backends.codegen.kernel_plan`,
:mod:`arrayjit_backends.codegen.row_plan`), written for speed (issue 38), against plain
definitions written here from :mod:`arrayjit_ir.low_level`'s generators and rebuilt nests: on
every statement, expression and loop of random programs (lowered, and optimized) and of a
two-layer MLP training step, each gives the same answer, the same objects in the same order."""

from __future__ import annotations

import math
from collections.abc import Iterator as Iter
from dataclasses import replace

from hypothesis import HealthCheck, given, settings

from arrayjit_backends.codegen import kernel_plan as K
from arrayjit_backends.codegen import row_plan as R
from arrayjit_conformance.compile_workload import mlp_step
from arrayjit_conformance.programs import Program, programs
from arrayjit_ir import low_level as L
from arrayjit_ir import lower
from arrayjit_ir.indexing import Affine, AxisIndex, Iterator, Symbol, fresh_symbol
from arrayjit_ir.optimize import optimize

# ---- the plain definitions (the oracle) ----


def ref_gets(s: L.Stmt) -> list[L.Get]:
    return [g for e in L.exprs_of(s) for g in L.sub_exprs(e) if isinstance(g, L.Get)]


def ref_loop_work(s: L.Stmt, zeroing: bool = False) -> int:
    match s:
        case L.For_loop(from_=lo, to_inclusive=hi, body=body):
            return max(hi - lo + 1, 0) * ref_loop_work(body, zeroing)
        case L.Seq(stmts=stmts):
            return sum(ref_loop_work(x, zeroing) for x in stmts)
        case L.Set(value=v) | L.Set_local(value=v):
            return max(1, ref_inlined_work(v, zeroing))
        case L.Zero_out(tn=tn) if zeroing:
            return tn.num_elems
    return 1


def ref_inlined_work(e: L.Expr, zeroing: bool) -> int:
    if isinstance(e, L.Local_scope):
        return ref_loop_work(e.body, zeroing)
    return sum(ref_inlined_work(x, zeroing) for x in L.children(e))


def ref_is_parallel(loop: L.For_loop) -> bool:
    it = Iterator(loop.index)
    axis = {}
    for st in K.sets_of(loop.body):
        if it not in st.indices:
            return False
        k = st.indices.index(it)
        if axis.setdefault(st.tn, k) != k:
            return False
    if ref_zeroes(loop.body):
        return False
    return all(
        g.tn not in axis or (len(g.indices) > axis[g.tn] and g.indices[axis[g.tn]] == it)
        for g in ref_gets(loop.body)
    )


def ref_zeroes(s: L.Stmt) -> bool:
    match s:
        case L.Zero_out():
            return True
        case L.For_loop(body=body):
            return ref_zeroes(body)
        case L.Seq(stmts=stmts):
            return any(ref_zeroes(x) for x in stmts)
    return False


def ref_nest(loops: list[L.For_loop], body: L.Stmt) -> L.Stmt:
    for lp in reversed(loops):
        body = replace(lp, body=body)
    return body


def ref_parallel_order(loop: L.For_loop) -> tuple[list[L.For_loop], L.Stmt]:
    """The loops taken one at a time, each tried parallel over a rebuilt nest of the rest."""
    loops, body = [loop], loop.body
    while isinstance(body, L.For_loop):
        loops.append(body)
        body = body.body
    chosen: list[L.For_loop] = []
    rest = loops
    while rest:
        for k, lp in enumerate(rest):
            others = rest[:k] + rest[k + 1 :]
            if ref_is_parallel(replace(lp, body=ref_nest(others, body))):
                chosen.append(lp)
                rest = others
                break
        else:
            break
    return chosen, ref_nest(rest, body)


def ref_renamed(s: L.Stmt, names: dict[Symbol, Symbol]) -> L.Stmt:
    """Every node rebuilt, as a copy."""

    def index(i: AxisIndex) -> AxisIndex:
        match i:
            case Iterator(symbol=x) if isinstance(x, Symbol) and x in names:
                return Iterator(names[x])
            case Affine(terms=terms, offset=off):
                return Affine(
                    tuple((c, names.get(x, x) if isinstance(x, Symbol) else x) for c, x in terms),
                    off,
                )
        return i

    def expr(e: L.Expr) -> L.Expr:
        match e:
            case L.Get(tn=tn, indices=idx):
                return L.Get(tn, tuple(index(i) for i in idx))
            case L.Get_merge_buffer(tn=tn, indices=idx):
                return L.Get_merge_buffer(tn, tuple(index(i) for i in idx))
            case L.Embed_index(index=i):
                return L.Embed_index(index(i))
            case L.Local_scope(scope=sc, body=body, orig_indices=oi):
                return L.Local_scope(sc, stmt(body), oi)
        return L.map_children(e, expr)

    def stmt(s: L.Stmt) -> L.Stmt:
        match s:
            case L.Seq(stmts=stmts):
                return L.Seq(tuple(stmt(x) for x in stmts))
            case L.For_loop(index=i, from_=lo, to_inclusive=hi, body=body, trace_it=t):
                return L.For_loop(i, lo, hi, stmt(body), t)
            case L.Set(tn=tn, indices=idx, value=v):
                return L.Set(tn, tuple(index(i) for i in idx), expr(v))
            case L.Set_local(scope=sc, value=v):
                return L.Set_local(sc, expr(v))
        return s

    return stmt(s)


# ---- walking the programs ----


def statements(s: L.Stmt) -> Iter[L.Stmt]:
    """``s`` and every statement inside it, local-scope bodies included."""
    yield s
    match s:
        case L.Seq(stmts=stmts):
            for x in stmts:
                yield from statements(x)
        case L.For_loop(body=body):
            yield from statements(body)
    for e in L.exprs_of(s) if not isinstance(s, L.Seq | L.For_loop) else ():
        for x in L.sub_exprs(e):
            if isinstance(x, L.Local_scope):
                yield from statements(x.body)


def same(a: list[object], b: list[object]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


def check_code(code: L.Stmt) -> None:
    for s in statements(code):
        assert same(K.gets_of(s), ref_gets(s))
        assert same(K.reads_of(s), L.reads(s))
        assert K.loop_work(s) == ref_loop_work(s)
        assert K.loop_work(s, zeroing=True) == ref_loop_work(s, zeroing=True)
        for e in L.exprs_of(s):
            want = [x for x in L.sub_exprs(e) if isinstance(x, L.Local_scope)]
            assert same(K.local_scopes(e), want)
            assert K.has_loops(e) == any(ref_loop_work(x.body) > 1 for x in want)
        if isinstance(s, L.For_loop):
            assert K.is_parallel_loop(s) == ref_is_parallel(s)
            chosen, rest = K.parallel_order(s)
            want_chosen, want_rest = ref_parallel_order(s)
            assert same(chosen, want_chosen)
            assert rest == want_rest
            syms = [x.index for x in statements(s) if isinstance(x, L.For_loop)]
            syms.append(fresh_symbol())
            for st in K.sets_of(s) + ref_gets(s):
                for sym in syms:
                    it = Iterator(sym)
                    want_axis = st.indices.index(it) if it in st.indices else -1
                    assert K.iterator_axis(st.indices, sym) == want_axis
            row = fresh_symbol()
            assert R._rename(s, row) == ref_renamed(s.body, {s.index: row})
            assert R._rename(s, s.index) == s.body
            assert R.row_bytes([s]) == ref_row_bytes(s)


def ref_row_bytes(lp: L.For_loop) -> int:
    sizes: dict[object, int] = {}
    it = Iterator(lp.index)
    for tn, idx in [(x.tn, x.indices) for x in K.sets_of(lp.body)] + [
        (g.tn, g.indices) for g in ref_gets(lp.body)
    ]:
        if it in idx:
            cells = math.prod(d for k, d in enumerate(tn.dims) if k != idx.index(it))
            sizes[tn] = max(sizes.get(tn, 0), cells * tn.prec.byte_size)
    return sum(sizes.values())


def check_program(program: Program, name: str) -> None:
    _, comp = program.build()
    lowered = lower(comp)
    check_code(lowered)
    check_code(optimize(lowered, name=name, static_symbols=program.symbols).code)


_SETTINGS = settings(
    max_examples=25,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


@_SETTINGS
@given(program=programs())
def test_walks_agree_on_random_programs(program: Program) -> None:
    check_program(program, "walks")


@_SETTINGS
@given(program=programs(big=True, max_stmts=5))
def test_walks_agree_on_random_big_programs(program: Program) -> None:
    check_program(program, "walks_big")


def test_walks_agree_on_an_mlp_step() -> None:
    comp, _ = mlp_step(2)
    lowered = lower(comp)
    check_code(lowered)
    check_code(optimize(lowered, name="mlp").code)
