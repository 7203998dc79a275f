"""The optimizer keeps the meaning of a block and never repeats reduction or costly work, over
random programs and whole workloads.

Work is counted by executing nothing: :func:`work_counts` walks low-level code and multiplies
loop extents (loops inside inlined ``Local_scope`` bodies included, once per evaluation of the
expression holding them) to count, per node, how many times an accumulation step into it
(``n[i] := n[i] op ...``, or ``v_n := v_n op ...`` for an inlined node) runs (adding a partial
of a blocked sum, a local scope of the same node (:mod:`arrayjit_ir.summation`), adds no term
and is not counted); how many operations run in all (every ``Binop``, ``Unop`` and ``Ternop``
but ``identity``, ``arg1``, ``arg2``); and, per operation, how many costly ones run
(transcendentals, square roots, divisions: :data:`COSTLY`, this file's own list). The optimized
code must never run more accumulation steps into any node, nor more costly operations of any
kind, than the lowered code does; on random programs its arithmetic stays within 1.5 times the
lowered code's. Meaning: the interpreter over the optimized code equals the interpreter over
the lowered code, and both equal numpy.

The random programs and workloads come from ``arrayjit_conformance`` (test-only use: the
``unit`` environment installs it; the IR package itself does not depend on it).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings

from arrayjit_conformance.programs import Program, evaluate_numpy, is_tame, programs
from arrayjit_conformance.workloads import WORKLOADS, Built, Workload
from arrayjit_ir import Optimized, interpret, ir, lower, ops, optimize
from arrayjit_ir import low_level as L
from arrayjit_ir.indexing import Fixed_idx, Iterator, fresh_symbol
from arrayjit_tnode import Tnode

FUZZ = 10 * int(os.environ.get("ARRAYJIT_FUZZ_EXAMPLES", "0") or 0)
"""Under ``tox -e fuzz``: ten times ``ARRAYJIT_FUZZ_EXAMPLES`` fresh random programs (about 20 ms
each: the interpreter only; the optimizer bugs found so far showed up once in several
thousand programs); else a fixed-seed 1000 (about 20 s)."""


COSTLY = frozenset(
    {"exp", "log", "exp2", "log2", "sin", "cos", "tanh", "sqrt", "recip_sqrt", "recip"}
    | {"div", "mod", "pow", "threefry4x32"}
)
"""The operations counted as costly: math-library calls, square roots, divisions (and the
random-bits op, 20 rounds)."""

FREE = frozenset({"identity", "arg1", "arg2"})
"""Operations that compute nothing: not counted as arithmetic."""


@dataclass
class Work:
    """What a piece of low-level code executes (see the module docstring)."""

    steps: Counter[Tnode] = field(default_factory=Counter)
    """Accumulation steps, per node."""
    arithmetic: int = 0
    """Operations of every kind but the free ones."""
    costly: Counter[str] = field(default_factory=Counter)
    """Costly operations, per operation name."""


def work_counts(code: L.Stmt) -> Work:
    """What ``code`` executes, counted by multiplying loop extents (see the module
    docstring)."""
    work = Work()

    def stmt(s: L.Stmt, times: int) -> None:
        match s:
            case L.Seq(stmts=stmts):
                for x in stmts:
                    stmt(x, times)
            case L.For_loop(from_=lo, to_inclusive=hi, body=body):
                stmt(body, times * max(0, hi - lo + 1))
            case L.Set(tn=tn, indices=idx, value=v):
                if isinstance(v, L.Binop) and L.Get(tn, idx) in (v.a, v.b):
                    work.steps[tn] += 0 if _partial(v, L.Get(tn, idx), tn) else times
                expr(v, times)
            case L.Set_local(scope=scope, value=v):
                if isinstance(v, L.Binop) and L.Get_local(scope) in (v.a, v.b):
                    work.steps[scope.tn] += (
                        0 if _partial(v, L.Get_local(scope), scope.tn) else times
                    )
                expr(v, times)

    def expr(e: L.Expr, times: int) -> None:
        match e:
            case L.Local_scope(body=body):
                stmt(body, times)
            case L.Binop(op=op) | L.Unop(op=op) | L.Ternop(op=op):
                if op.value not in FREE:
                    work.arithmetic += times
                if op.value in COSTLY:
                    work.costly[op.value] += times
                for x in L.children(e):
                    expr(x, times)

    stmt(code, 1)
    return work


def _partial(step: L.Binop, cell: L.Expr, tn: Tnode) -> bool:
    """Whether ``step`` adds to ``cell`` a partial sum of the same node (a blocked sum's level:
    a local scope of ``tn``, or a read of one)."""
    other = step.b if step.a == cell else step.a
    return isinstance(other, L.Local_scope | L.Get_local) and other.scope.tn is tn


def accumulation_counts(code: L.Stmt) -> Counter[Tnode]:
    """Per node, how many accumulation steps into it ``code`` executes."""
    return work_counts(code).steps


def assert_no_repeated_work(
    lowered: L.Stmt, optimized: L.Stmt, what: str, arithmetic_factor: float | None = None
) -> None:
    """No node's accumulation steps and no costly operation run more often in ``optimized``
    than in ``lowered``; with ``arithmetic_factor``, all its operations run at most that many
    times as often."""
    before, after = work_counts(lowered), work_counts(optimized)
    worse = {tn.debug_label: (before.steps[tn], n) for tn, n in after.steps.items()}
    worse = {k: v for k, v in worse.items() if v[1] > v[0]}
    assert not worse, (
        f"inlining repeats reduction work in {what}: node: (lowered, optimized) accumulation "
        f"steps {worse}\n{ir.pretty(optimized)}"
    )
    costlier = {op: (before.costly[op], n) for op, n in after.costly.items()}
    costlier = {k: v for k, v in costlier.items() if v[1] > v[0]}
    assert not costlier, (
        f"inlining repeats costly work in {what}: op: (lowered, optimized) evaluations "
        f"{costlier}\n{ir.pretty(optimized)}"
    )
    if arithmetic_factor is not None:
        assert after.arithmetic <= arithmetic_factor * before.arithmetic, (
            f"inlining repeats too much work in {what}: {after.arithmetic} operations, "
            f"{before.arithmetic} lowered\n{ir.pretty(optimized)}"
        )


def test_counter_sees_a_reduction_inlined_at_a_broadcast() -> None:
    """The counter itself: a row sum inlined into every cell of its broadcast reader runs
    rows x cols x cols steps, where the lowered code runs rows x cols."""
    x, y = Tnode.create((5, 7), label="x"), Tnode.create((5, 7), label="y")
    s = Tnode.create((5,), label="s")
    i, j, k = fresh_symbol(), fresh_symbol(), fresh_symbol()
    scope = L.ScopeId(s, 1)
    step = L.Binop(ops.Binop.add, L.Get_local(scope), L.Get(x, (Iterator(i), Iterator(k))))
    inlined = L.Local_scope(
        scope,
        L.Seq((L.Set_local(scope, L.Constant(0.0)), L.For_loop(k, 0, 6, L.Set_local(scope, step)))),
    )
    bad = L.For_loop(
        i,
        0,
        4,
        L.For_loop(
            j,
            0,
            6,
            L.Set(
                y,
                (Iterator(i), Iterator(j)),
                L.Binop(ops.Binop.sub, L.Get(x, (Iterator(i), Iterator(j))), inlined),
            ),
        ),
    )
    assert accumulation_counts(bad) == Counter({s: 5 * 7 * 7})
    lowered = lower(ir.accum(s, "add", x, spec="ij->i"))
    assert accumulation_counts(lowered) == Counter({s: 5 * 7})
    with pytest.raises(AssertionError, match="repeats reduction work"):
        assert_no_repeated_work(lowered, bad, "the hand-made code")
    assert accumulation_counts(L.For_loop(k, 0, -1, L.Set(s, (Fixed_idx(0),), step))) == Counter()


def _interpret_runs(
    code: L.Stmt | Optimized,
    tns: dict[str, Tnode],
    values: dict[str, np.ndarray],
    runs: int,
    batches: Callable[[int], int] = lambda run: 0,
) -> list[dict[str, np.ndarray]]:
    """Interpret ``code`` ``runs`` times from the hosted values (padded host arrays, as a
    backend holds them); the logical values of the hosted nodes after each run."""
    bufs: dict[Tnode, np.ndarray] = {}
    for k, v in values.items():
        tns[k].set_values(v)
        host = tns[k].array
        assert host is not None
        bufs[tns[k]] = host.copy()
    out = []
    for run in range(runs):
        bufs = interpret(code, bufs, {"i": batches(run)})
        out.append({k: bufs[tns[k]][tns[k].logical_slices()].copy() for k in values})
    return out


def _assert_runs_equal(
    got: list[dict[str, np.ndarray]],
    want: list[dict[str, np.ndarray]],
    what: str,
    rtol: float,
    atol: float,
) -> None:
    for run, (g, w) in enumerate(zip(got, want), start=1):
        for name in w:
            np.testing.assert_allclose(
                np.asarray(g[name], np.float64),
                np.asarray(w[name], np.float64),
                rtol=rtol,
                atol=atol,
                equal_nan=True,
                err_msg=f"{what}: run {run}, node {name}",
            )


@settings(
    max_examples=FUZZ or 1000,
    derandomize=not FUZZ,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(program=programs())
def test_random_programs_keep_meaning_and_work(program: Program) -> None:
    assume(is_tame(program))
    tns, comp = program.build()
    lowered = lower(comp)
    opt = optimize(lowered, name="program", static_symbols=program.symbols)
    assert_no_repeated_work(lowered, opt.code, program.source())
    values = program.initial_values()
    plain = _interpret_runs(lowered, tns, values, 2, program.batch)
    optimized = _interpret_runs(opt, tns, values, 2, program.batch)
    state, reference = dict(values), []
    for run in range(2):
        state = evaluate_numpy(program, state, program.batch(run))
        reference.append({k: state[k] for k in values})
    exact = not program.is_float
    tol = 0.0 if exact else (1e-4 if program.tolerance_prec == "single" else 1e-10)
    scale = max([1.0] + [float(np.abs(v).max()) for r in reference for v in r.values() if v.size])
    source = program.source()
    _assert_runs_equal(plain, reference, f"lowering vs numpy\n{source}", tol, tol * scale)
    _assert_runs_equal(
        optimized, plain, f"optimizer bug: optimized vs lowered\n{source}", tol, tol * scale
    )


@pytest.mark.parametrize("workload", WORKLOADS, ids=[w.name for w in WORKLOADS])
def test_workloads_keep_meaning_and_work(workload: Workload) -> None:
    built = workload.make()
    lowered = lower(built.comp)
    opt = optimize(lowered, name=workload.name)
    assert_no_repeated_work(lowered, opt.code, workload.name)
    runs = min(workload.runs, 2)
    plain = _interpret_runs(lowered, built.tns, built.values, runs)
    optimized = _interpret_runs(opt, built.tns, built.values, runs)
    _assert_runs_equal(optimized, plain, f"optimizer bug in {workload.name}", 2e-5, 2e-5)


# ---- costly operations: at most as often as the unoptimized program runs them ----


def test_counter_sees_an_exp_inlined_at_a_broadcast() -> None:
    """The counter itself: ``r = exp(s)`` inlined into every cell of its broadcast reader runs
    rows x cols exps, where the lowered code runs rows."""
    s, x, y = (
        Tnode.create((5,), label="s"),
        Tnode.create((5, 7), label="x"),
        Tnode.create((5, 7), label="y"),
    )
    r = Tnode.create((5,), label="r")
    i, j = fresh_symbol(), fresh_symbol()
    scope = L.ScopeId(r, 1)
    inlined = L.Local_scope(
        scope, L.Set_local(scope, L.Unop(ops.Unop.exp, L.Get(s, (Iterator(i),))))
    )
    cell = (Iterator(i), Iterator(j))
    bad = L.For_loop(
        i,
        0,
        4,
        L.For_loop(j, 0, 6, L.Set(y, cell, L.Binop(ops.Binop.mul, L.Get(x, cell), inlined))),
    )
    work = work_counts(bad)
    assert work.costly == Counter({"exp": 5 * 7}) and work.arithmetic == 2 * 5 * 7
    lowered = lower(ir.block(ir.unop(r, "exp", s), ir.binop(y, "mul", x, r, spec="ij,i->ij")))
    assert work_counts(lowered).costly == Counter({"exp": 5})
    assert work_counts(lowered).arithmetic == 5 + 5 * 7
    with pytest.raises(AssertionError, match="repeats costly work"):
        assert_no_repeated_work(lowered, bad, "the hand-made code")


def _tmp(name: str, dims: tuple[int, ...]) -> Tnode:
    return Tnode.create(dims, label=name)


def softmax_fused(rows: int = 5, cols: int = 9, log: bool = False) -> Built:
    """Softmax (or log-softmax) over rows with ``e = exp(x - m)`` a node of its own, read by
    the row sum and by the output: inlined at both, exp ran twice per element."""
    x = Tnode.create((rows, cols), label="x", hosted=True)
    y = Tnode.create((rows, cols), label="y", hosted=True)
    m, xm, e, se = (
        _tmp("m", (rows,)),
        _tmp("xm", (rows, cols)),
        _tmp("e", (rows, cols)),
        _tmp("se", (rows,)),
    )
    stmts = [
        ir.accum(m, "max", x, spec="rc->r"),
        ir.binop(xm, "sub", x, m, spec="rc,r->rc"),
        ir.unop(e, "exp", xm),
        ir.accum(se, "add", e, spec="rc->r"),
    ]
    if log:
        lse = _tmp("lse", (rows,))
        stmts += [ir.unop(lse, "log", se), ir.binop(y, "sub", xm, lse, spec="rc,r->rc")]
    else:
        stmts.append(ir.binop(y, "div", e, se, spec="rc,r->rc"))
    vx = np.random.default_rng(7).uniform(-4, 4, (rows, cols)).astype(np.float32)
    return Built({"x": x, "y": y}, ir.block(*stmts), {"x": vx, "y": np.zeros((rows, cols))})


def attention_fused(n_q: int = 4, n_k: int = 6, d: int = 5) -> Built:
    """One attention head with ``e = exp(s - m)`` and ``p = e / se`` nodes of their own: ``p``
    inlined into ``o = p @ v`` ran an exp and a division per (query, key, feature)."""
    rng = np.random.default_rng(8)
    names = {"q": (n_q, d), "k": (n_k, d), "v": (n_k, d), "scale": (), "o": (n_q, d)}
    tns = {k: Tnode.create(dims, label=k, hosted=True) for k, dims in names.items()}
    q, k, v, scale, o = (tns[n] for n in names)
    s0, s, m, xm = (
        _tmp("s0", (n_q, n_k)),
        _tmp("s", (n_q, n_k)),
        _tmp("m", (n_q,)),
        _tmp("xm", (n_q, n_k)),
    )
    e, se, p = _tmp("e", (n_q, n_k)), _tmp("se", (n_q,)), _tmp("p", (n_q, n_k))
    comp = ir.block(
        ir.accum(s0, "add", q, k, op="mul", spec="qd,kd->qk"),
        ir.binop(s, "mul", s0, scale),
        ir.accum(m, "max", s, spec="qk->q"),
        ir.binop(xm, "sub", s, m, spec="qk,q->qk"),
        ir.unop(e, "exp", xm),
        ir.accum(se, "add", e, spec="qk->q"),
        ir.binop(p, "div", e, se, spec="qk,q->qk"),
        ir.accum(o, "add", p, v, op="mul", spec="qk,kd->qd"),
    )
    values = {n: rng.uniform(-1, 1, dims).astype(np.float32) for n, dims in names.items()}
    values["scale"] = np.asarray(1 / np.sqrt(d), np.float32)
    return Built(tns, comp, values)


_BY_NAME = {w.name: w.make for w in WORKLOADS}
COSTLY_CASES: dict[str, tuple[Callable[[], Built], dict[str, int]]] = {
    # name: (the program, its costly operations: one per element they are written for)
    "softmax": (_BY_NAME["softmax"], {"exp": 5 * 9, "div": 5 * 9}),
    "softmax_fused": (softmax_fused, {"exp": 5 * 9, "div": 5 * 9}),
    "log_softmax": (lambda: softmax_fused(log=True), {"exp": 5 * 9, "log": 5}),
    "layer_norm": (_BY_NAME["layer_norm"], {"recip_sqrt": 6}),
    "attention": (_BY_NAME["attention"], {"exp": 4 * 6, "div": 4 * 6}),
    "attention_fused": (attention_fused, {"exp": 4 * 6, "div": 4 * 6}),
    "mlp_xent_step": (_BY_NAME["mlp_xent_step"], {"exp": 8 * 3, "div": 8 * 3, "log": 8}),
    "mlp_mse_step": (_BY_NAME["mlp_mse_step"], {}),
}


@pytest.mark.parametrize("name", list(COSTLY_CASES))
def test_costly_operations_run_once_per_element(name: str) -> None:
    """Softmax, log-softmax, layer norm, attention and the MLP step run each transcendental
    and division once per element they compute, as the unoptimized program does (issue 34:
    softmax ran exp twice per element, attention an exp and a division per (i, j, d)); and
    their optimized code computes what the lowered code computes."""
    make, expected = COSTLY_CASES[name]
    built = make()
    lowered = lower(built.comp)
    opt = optimize(lowered, name=name)
    assert work_counts(lowered).costly == Counter(expected)
    assert work_counts(opt.code).costly == Counter(expected), ir.pretty(opt)
    assert_no_repeated_work(lowered, opt.code, name, arithmetic_factor=1.5)
    plain = _interpret_runs(lowered, built.tns, built.values, 1)
    optimized = _interpret_runs(opt, built.tns, built.values, 1)
    _assert_runs_equal(optimized, plain, f"optimizer bug in {name}", 2e-5, 2e-5)


@settings(
    max_examples=FUZZ or 250,
    derandomize=not FUZZ,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(program=programs(max_stmts=10))
def test_random_programs_do_no_more_work(program: Program) -> None:
    """Programs of up to 10 statements: the optimized code runs no costly operation more
    often than the lowered code, and at most 1.5 times its arithmetic (recomputing cheap
    pointwise nodes at their reads is what inlining may add)."""
    assume(is_tame(program))
    _, comp = program.build()
    lowered = lower(comp)
    opt = optimize(lowered, name="program", static_symbols=program.symbols)
    assert_no_repeated_work(lowered, opt.code, program.source(), arithmetic_factor=1.5)
