"""Blocked summation (arrayjit_ir.summation): the shape of the trees and their accuracy."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from arrayjit_ir import ir
from arrayjit_ir import low_level as L
from arrayjit_ir.summation import BLOCK, TOP, block_sums, widen_blocks
from arrayjit_tnode import Tnode


def _loops(s: L.Stmt) -> list[L.For_loop]:
    """Every loop in ``s``, those of local scopes included."""
    out: list[L.For_loop] = []

    def stmt(x: L.Stmt) -> None:
        match x:
            case L.Seq(stmts=stmts):
                for y in stmts:
                    stmt(y)
            case L.For_loop(body=body):
                out.append(x)
                stmt(body)
            case L.Set(value=v) | L.Set_local(value=v):
                for e in L.sub_exprs(v):
                    if isinstance(e, L.Local_scope):
                        stmt(e.body)

    stmt(s)
    return out


def _sum(n: int, spec: str = "i->", dims: tuple[int, ...] | None = None) -> tuple:
    x = Tnode.create(dims or (n,), label="x", hosted=True)
    out_dims = (dims[0],) if spec.endswith("->i") and dims else ()
    y = Tnode.create(out_dims, label="y", hosted=True)
    opt = ir.optimize(ir.lower(ir.accum(y, "add", x, spec=spec)), name="sum")
    return x, y, opt


def _run(opt: object, x: Tnode, y: Tnode, xv: np.ndarray) -> np.ndarray:
    bufs = {x: xv, y: np.zeros(y.dims, xv.dtype)}
    ir.interpret(opt, bufs)  # type: ignore[arg-type]
    return bufs[y]


def test_a_long_sum_becomes_blocks_pairs_and_a_short_top() -> None:
    n = 64 * 256 + 5  # 256 blocks: two pairwise levels, a top of 64, then a remainder of 5
    _, _, opt = _sum(n)
    extents = sorted({lp.to_inclusive - lp.from_ + 1 for lp in _loops(opt.code)})
    assert extents == sorted({2, 5, BLOCK, TOP})
    assert isinstance(opt.code, L.Seq)  # zero_out, the top loop, the remainder: flat
    top = [s for s in opt.code.stmts if isinstance(s, L.For_loop)]
    assert [lp.to_inclusive + 1 for lp in top] == [TOP]


def test_short_sums_are_left_alone() -> None:
    _, _, opt = _sum(BLOCK)
    assert [lp.to_inclusive for lp in _loops(opt.code)] == [BLOCK - 1]
    assert block_sums(opt.code) == opt.code


def test_tenths_are_summed_within_a_few_ulps_by_the_interpreter() -> None:
    n = 70000
    x, y, opt = _sum(n)
    got = float(_run(opt, x, y, np.full(n, 0.1, np.float32)))
    exact = n * float(np.float32(0.1))
    ulp = float(np.spacing(np.float32(exact)))
    assert abs(got - exact) <= 2 * math.log2(n) * ulp
    serial = np.float32(0)
    for _ in range(n):  # what the unblocked loop computes
        serial = np.float32(serial + np.float32(0.1))
    assert abs(float(serial) - exact) > 100 * ulp


def test_a_nest_of_long_rows_sums_each_row_as_a_partial() -> None:
    x, y, opt = _sum(0, spec="ij->", dims=(100, 300))
    assert max(lp.to_inclusive - lp.from_ + 1 for lp in _loops(opt.code)) <= TOP
    xv = np.random.default_rng(0).uniform(0, 1, (100, 300)).astype(np.float32)
    got = float(_run(opt, x, y, xv))
    assert abs(got - math.fsum(map(float, xv.reshape(-1)))) <= 2 * math.log2(30000) * float(
        np.spacing(np.float32(got))
    )


def test_a_nest_of_short_rows_makes_blocks_of_several_rows() -> None:
    x, y, opt = _sum(0, spec="ij->", dims=(5000, 4))
    loops = _loops(opt.code)
    assert 16 in {lp.to_inclusive - lp.from_ + 1 for lp in loops}  # 16 rows of 4: one block
    xv = np.arange(20000, dtype=np.float32).reshape(5000, 4)
    assert float(_run(opt, x, y, xv)) == float(xv.astype(np.float64).sum())


def test_widened_blocks_give_the_same_sum_on_exact_data() -> None:
    n = 64 * 512
    x, y, opt = _sum(n)
    wide = dataclasses.replace(opt, code=widen_blocks(opt.code, 4))
    extents = {lp.to_inclusive - lp.from_ + 1 for lp in _loops(wide.code)}
    assert extents == {2, BLOCK * 4, TOP}  # 512 blocks: 3 pairwise levels, 2 merged
    xv = np.arange(n, dtype=np.float32) % 7
    assert float(_run(wide, x, y, xv)) == float(_run(opt, x, y, xv)) == float(xv.sum())


def test_partials_start_at_negative_zero_so_negative_zeros_sum_to_negative_zero() -> None:
    """A block partial starts at -0.0 (the identity of float addition): -0.0 terms into a
    -0.0 cell stay -0.0 after blocking, as the unblocked serial loop gives. A +0.0 start
    would give +0.0."""
    for n in (BLOCK + 1, 64 * 256 + 5):
        x = Tnode.create((2, n), label="x", hosted=True)
        y = Tnode.create((2,), label="y", hosted=True)
        t = Tnode.create((), label="t", hosted=True)
        comp = ir.block(
            ir.accum(y, "add", x, spec="ij->i", initialize_neutral=False),
            ir.accum(t, "add", x, spec="ij->", initialize_neutral=False),
        )
        lowered = ir.lower(comp)
        opt = ir.optimize(lowered, name="negzero")
        assert BLOCK in {lp.to_inclusive - lp.from_ + 1 for lp in _loops(opt.code)}  # blocked
        for code in (lowered, opt):
            bufs = {x: np.full((2, n), -0.0), y: np.full(2, -0.0), t: np.array(-0.0)}
            bufs = {k: v.astype(np.float32) for k, v in bufs.items()}
            ir.interpret(code, bufs)  # type: ignore[arg-type]
            assert (bufs[y] == 0).all() and np.signbit(bufs[y]).all(), (n, code is opt, bufs[y])
            assert bufs[t] == 0 and np.signbit(bufs[t]), (n, code is opt, bufs[t])
