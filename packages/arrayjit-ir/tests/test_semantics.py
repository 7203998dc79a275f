"""The optimizer keeps the meaning of a block and never repeats reduction work, over random
programs and whole workloads.

Work is counted by executing nothing: :func:`accumulation_counts` walks low-level code and
multiplies loop extents (loops inside inlined ``Local_scope`` bodies included, once per
evaluation of the expression holding them) to count, per node, how many times an accumulation
step into it (``n[i] := n[i] op ...``, or ``v_n := v_n op ...`` for an inlined node) runs. The
optimized code must never run more of them than the lowered code does. Meaning: the interpreter
over the optimized code equals the interpreter over the lowered code, and both equal numpy.

The random programs and workloads come from ``arrayjit_conformance`` (test-only use: the
``unit`` environment installs it; the IR package itself does not depend on it).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings

from arrayjit_conformance.programs import Program, evaluate_numpy, is_tame, programs
from arrayjit_conformance.workloads import WORKLOADS, Workload
from arrayjit_ir import Optimized, interpret, ir, lower, ops, optimize
from arrayjit_ir import low_level as L
from arrayjit_ir.indexing import Fixed_idx, Iterator, fresh_symbol
from arrayjit_tnode import Tnode

FUZZ = 10 * int(os.environ.get("ARRAYJIT_FUZZ_EXAMPLES", "0") or 0)
"""Under ``tox -e fuzz``: ten times ``ARRAYJIT_FUZZ_EXAMPLES`` fresh random programs (about 20 ms
each: the interpreter only; the optimizer bugs found so far showed up once in several
thousand programs); else a fixed-seed 1000 (about 20 s)."""


def accumulation_counts(code: L.Stmt) -> Counter[Tnode]:
    """Per node, how many accumulation steps into it ``code`` executes (see the module
    docstring)."""
    counts: Counter[Tnode] = Counter()

    def stmt(s: L.Stmt, times: int) -> None:
        match s:
            case L.Seq(stmts=stmts):
                for x in stmts:
                    stmt(x, times)
            case L.For_loop(from_=lo, to_inclusive=hi, body=body):
                stmt(body, times * max(0, hi - lo + 1))
            case L.Set(tn=tn, indices=idx, value=v):
                if isinstance(v, L.Binop) and L.Get(tn, idx) in (v.a, v.b):
                    counts[tn] += times
                expr(v, times)
            case L.Set_local(scope=scope, value=v):
                if isinstance(v, L.Binop) and L.Get_local(scope) in (v.a, v.b):
                    counts[scope.tn] += times
                expr(v, times)

    def expr(e: L.Expr, times: int) -> None:
        match e:
            case L.Local_scope(body=body):
                stmt(body, times)
            case L.Binop(a=a, b=b):
                expr(a, times)
                expr(b, times)
            case L.Unop(a=a):
                expr(a, times)
            case L.Ternop(a=a, b=b, c=c):
                expr(a, times)
                expr(b, times)
                expr(c, times)

    stmt(code, 1)
    return counts


def assert_no_repeated_work(lowered: L.Stmt, optimized: L.Stmt, what: str) -> None:
    """No node's accumulation steps run more often in ``optimized`` than in ``lowered``."""
    before, after = accumulation_counts(lowered), accumulation_counts(optimized)
    worse = {tn.debug_label: (before[tn], n) for tn, n in after.items() if n > before[tn]}
    assert not worse, (
        f"inlining repeats reduction work in {what}: node: (lowered, optimized) accumulation "
        f"steps {worse}\n{ir.pretty(optimized)}"
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
