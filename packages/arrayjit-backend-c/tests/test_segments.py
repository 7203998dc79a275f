"""Segments (arrayjit_backend_c.cpu.segments), on both CPU compilers: which statements run in
parallel, scratch buffers, chunked reductions, concurrent runs, and the memory they hold; each
result against numpy or the reference interpreter."""

import itertools
import re
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cpu_helpers import compare, run_direct

from arrayjit_backend_c.cc.compiler import CcCompiler
from arrayjit_backend_c.cc.renderer import CcSyntax
from arrayjit_backend_c.cpu.segments import Segment, chunks
from arrayjit_backends import fresh_backend
from arrayjit_backends.codegen import kernel_plan
from arrayjit_backends.codegen.kernel_plan import PARALLEL_MIN_WORK
from arrayjit_ir import ir, lower, optimize
from arrayjit_ir.optimized import Optimized
from arrayjit_tnode import Tnode

RNG = np.random.default_rng(0)

COMPILERS: dict[str, Any] = {"cc": CcCompiler}
RANGE_PARAMS = {"cc": "int64_t start, int64_t stop", "llvm": "i64 %start, i64 %stop"}
try:
    from arrayjit_backend_c.llvm.compiler import LlvmCompiler

    COMPILERS["llvm"] = LlvmCompiler
except ImportError:  # llvmlite missing: the cc rows still run
    pass


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "compiler" in metafunc.fixturenames:
        metafunc.parametrize("compiler", sorted(COMPILERS))


def generate(compiler: str, opt: Optimized) -> Any:
    """The compiler's generated kernel (segments, scratch and source) of ``opt``."""
    if compiler == "cc":
        return CcSyntax().render_segments(opt, "f")
    from arrayjit_backend_c.llvm.renderer import LlvmGen

    return LlvmGen().generate(opt, "f")


def test_parallel_segments_and_scratch(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch, compiler: str
) -> None:
    from arrayjit_tnode import memory_mode as mm

    monkeypatch.setattr(kernel_plan, "TEAM_MIN_COST", 1 << 10)  # split even this cheap work
    n = PARALLEL_MIN_WORK * 2
    u = Tnode.create((4,), label="u", hosted=True)
    s = Tnode.create((4,), label="s", memory_mode=(mm.Local(), 1))  # crosses segments
    x = Tnode.create((4, n), label="x", hosted=True)
    t = Tnode.create((4, n), label="t", memory_mode=(mm.Local(), 1))  # too big for the stack
    tot = Tnode.create((4,), label="tot", hosted=True)
    comp = ir.block(
        ir.binop(s, "mul", u, u),
        ir.binop(t, "add", x, s, spec="ij,i->ij"),
        ir.accum(tot, "add", t, spec="ij->i"),
    )
    opt = optimize(lower(comp), name="seg")
    kernel = generate(compiler, opt)
    assert [seg.parallel for seg in kernel.segments] == [False, True, False, True]
    assert set(kernel.scratch) == {s, t}
    assert RANGE_PARAMS[compiler] in kernel.source
    vu, vx = RNG.standard_normal(4), RNG.standard_normal((4, n))
    lb = COMPILERS[compiler](workers=3)
    calls: list[int] = []
    real = lb.crew.run

    def counting(task: int, common: int, extra: int, n: int, threads: int | None = None) -> None:
        calls.append(n)
        real(task, common, extra, n, threads)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(lb.crew, "run", counting)
        got, _ = run_direct(lb, comp, {u: vu, x: vx}, tot, reference=False)
    assert calls == [4, 4]  # one chunk per row: 4 rows, under 3 workers' 12 chunks
    np.testing.assert_allclose(got, (vx + vu[:, None] ** 2).sum(1), rtol=1e-4)


def test_a_lone_reduction_of_one_chunk_is_folded(cache_dir: Path, compiler: str) -> None:
    """A routine that is only a parallel reduction (accumulating into the cell's value, no
    zeroing segment before it), split into one chunk (one worker): its partial must still be
    folded into the cell (a one-call shortcut once skipped the fold: the cell stayed 0)."""
    n = PARALLEL_MIN_WORK * 64
    x = Tnode.create((n,), label="x", hosted=True)
    s = Tnode.create((), label="s", hosted=True)
    comp = ir.accum(s, "add", x, spec="i->", initialize_neutral=False)
    kernel = generate(compiler, optimize(lower(comp), name="r"))
    assert [seg.reduction is not None for seg in kernel.segments] == [True]
    vx = RNG.standard_normal(n).astype(np.float32)
    for workers in (1, 3):
        got, _ = run_direct(COMPILERS[compiler](workers=workers), comp, {x: vx}, s, False)
        np.testing.assert_allclose(got, vx.sum(dtype=np.float64), rtol=1e-5, atol=1e-3)


def test_segments_only_for_large_disjoint_loops_and_reductions(
    monkeypatch: pytest.MonkeyPatch, compiler: str
) -> None:
    def segments(comp: Any) -> list[str]:
        kernel = generate(compiler, optimize(lower(comp), name="r"))
        kinds = {(False, False): "serial", (True, False): "loop", (True, True): "reduction"}
        return [kinds[seg.parallel, seg.reduction is not None] for seg in kernel.segments]

    n = PARALLEL_MIN_WORK * 2
    a, b = Tnode.create((n,), label="a", hosted=True), Tnode.create((n,), label="b", hosted=True)
    # Enough iterations, too little work for a second thread: one serial function.
    c = Tnode.create((n,), label="c", hosted=True)
    assert segments(ir.block(ir.binop(b, "mul", a, a), ir.binop(c, "add", b, a))) == ["serial"]
    monkeypatch.setattr(kernel_plan, "TEAM_MIN_COST", 1 << 10)  # worth threads from here on
    assert segments(ir.binop(b, "mul", a, a)) == ["loop"]
    s, x = Tnode.create((4,), label="s", hosted=True), Tnode.create((4, n), label="x", hosted=True)
    assert "loop" in segments(ir.accum(s, "add", x, spec="ij->i"))
    t, u = Tnode.create((8,), label="t", hosted=True), Tnode.create((8,), label="u", hosted=True)
    assert segments(ir.unop(t, "neg", u)) == ["serial"]
    # A full reduction writes one cell from every iteration: a parallel reduction when large.
    tot = Tnode.create((), label="tot", hosted=True)
    assert segments(ir.accum(tot, "add", a, spec="i->")) == ["serial", "reduction"]
    assert segments(ir.accum(tot, "max", u, spec="i->")) == ["serial"]
    # Small floats accumulate in a float32 local, stored once (arrayjit_ir.lower): a parallel
    # reduction as well.
    half = Tnode.create((n,), label="half", prec="half", hosted=True)
    tot_half = Tnode.create((), label="tot_half", prec="half", hosted=True)
    assert segments(ir.accum(tot_half, "add", half, spec="i->")) == ["serial", "reduction"]


@pytest.mark.parametrize("n", [64, PARALLEL_MIN_WORK * 2 + 3])
@pytest.mark.parametrize("prec", ["single", "double", "int32", "uint32", "int64", "byte"])
@pytest.mark.parametrize("op", ["add", "mul", "max", "min"])
def test_reductions_into_one_cell(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch, compiler: str, op: str, prec: str, n: int
) -> None:
    monkeypatch.setattr(kernel_plan, "TEAM_MIN_COST", 1 << 10)  # 3 chunks when large
    x = Tnode.create((n,), prec=prec, label="x", hosted=True)
    tot = Tnode.create((), prec=prec, label="tot", hosted=True)
    dt = x.prec.numpy_dtype
    vx: np.ndarray
    if dt.kind == "f":
        vx = RNG.uniform(0.999, 1.001, n) if op == "mul" else RNG.standard_normal(n)
    else:
        vx = RNG.integers(0, 200, n)
    vx = vx.astype(dt)
    lb = COMPILERS[compiler](workers=3)
    got, ref = run_direct(lb, ir.accum(tot, op, x, spec="i->"), {x: vx}, tot, reference=n < 100)
    with np.errstate(over="ignore"):
        ufunc = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}[op]
        # The accumulation starts from the op's neutral element; integer max and min start
        # from the precision's bounds.
        neutral = {"add": 0.0, "mul": 1.0, "max": -np.inf, "min": np.inf}[op]
        init: Any = neutral
        if dt.kind != "f" and not np.isfinite(neutral):
            init = np.iinfo(dt).min if neutral < 0 else np.iinfo(dt).max
        expected = ufunc.reduce(np.append(vx, np.array(init).astype(dt)), dtype=dt)
    if n < 100:  # the interpreter is slow on large loops
        compare(got, ref, "single" if prec == "single" else "double" if dt.kind == "f" else prec)
    if dt.kind == "f":
        # Summation error grows with the sum of magnitudes, not with the (cancelling) result.
        eps = 1e-6 if prec == "single" else 1e-13
        scale = float(np.abs(vx.astype(np.float64)).sum()) if op == "add" else 0.0
        np.testing.assert_allclose(got, expected, rtol=100 * eps, atol=eps * scale)
    else:
        assert got == expected


def test_concurrent_parallel_runs(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch, compiler: str
) -> None:

    monkeypatch.setattr(kernel_plan, "TEAM_MIN_COST", 1 << 10)
    n = PARALLEL_MIN_WORK * 2
    a, b = Tnode.create((n,), label="a", hosted=True), Tnode.create((n,), label="b", hosted=True)
    lb = COMPILERS[compiler](workers=3)
    code = lb.compile(optimize(lower(ir.unop(b, "sqrt", a)), name="conc"))
    results, errors = [], []

    def worker(k: int) -> None:
        try:
            va, vb = np.full(n, float(k * k), np.float32), np.zeros(n, np.float32)
            run = lb.link(code, {a: va, b: vb}, lambda: None)
            for _ in range(20):
                run({})
            results.append(bool((vb == k).all()))
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and results == [True] * 4
    assert lb.crew.size == 2 and lb.crew.started <= 2


def test_used_memory_counts_link_scratch(cache_dir: Path, compiler: str) -> None:
    import gc

    from arrayjit_tnode import memory_mode as mm

    n = PARALLEL_MIN_WORK * 2
    x = Tnode.create((4, n), label="x", hosted=True)
    t = Tnode.create((4, n), label="t", memory_mode=(mm.Local(), 1))  # too big for the stack
    tot = Tnode.create((4,), label="tot", hosted=True)
    comp = ir.block(ir.unop(t, "exp", x), ir.accum(tot, "add", t, spec="ij->i"))
    be = fresh_backend(f"sync_{compiler}")
    try:
        dev = be.get_device(0)
        code = be.compile(comp, name="scratchy")
        assert t in code.native.scratch
        gc.collect()
        before = be.get_used_memory(dev)
        r = be.link(be.make_context(be.new_stream(dev)), code)
        grown = be.get_used_memory(dev) - before
        assert grown >= x.size_in_bytes + tot.size_in_bytes + t.size_in_bytes
        del r
        gc.collect()
        assert be.get_used_memory(dev) <= before
    finally:
        be.finalize()


def test_chunks_start_at_multiples_of_the_grain() -> None:
    """Chunks cover the loop once, in order, each starting a whole number of grains from the
    loop's start (an unroll-and-jammed loop's function runs whole groups of iterations)."""
    from arrayjit_ir import low_level as L
    from arrayjit_ir.indexing import Symbol

    body = L.Noop()
    for lo, hi, grain, workers in [(0, 99, 4, 2), (3, 102, 4, 3), (0, 7, 4, 8), (5, 5, 1, 2)]:
        loop = L.For_loop(Symbol(0), lo, hi, body, trace_it=False)
        seg = Segment("s", loop, grain=grain)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(kernel_plan, "TEAM_MIN_COST", 1)
            ranges = chunks(seg, workers)
        assert ranges[0][0] == lo and ranges[-1][1] == hi + 1
        assert all(a[1] == b[0] for a, b in itertools.pairwise(ranges))
        assert all(start < stop and (start - lo) % grain == 0 for start, stop in ranges)


def test_a_segment_takes_only_the_buffers_it_touches(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch, compiler: str
) -> None:
    """Each segment function (and its task, and a reduction's combining function) takes only
    the buffers it touches, so that the source grows with the program, not with segments
    times nodes (issue 38); the routine still computes the same values."""
    monkeypatch.setattr(kernel_plan, "TEAM_MIN_COST", 1 << 10)  # split even this cheap work
    n = PARALLEL_MIN_WORK * 2
    xin, yout = (Tnode.create((n,), label=name, hosted=True) for name in ("xin", "yout"))
    zin = Tnode.create((n,), label="zin", hosted=True)
    total = Tnode.create((), label="total", hosted=True)
    comp = ir.block(ir.binop(yout, "mul", xin, xin), ir.accum(total, "add", zin, spec="i->"))
    kernel = generate(compiler, optimize(lower(comp), name="touch"))
    # the products; zeroing the total (serial); the sum
    assert [seg.parallel for seg in kernel.segments] == [True, False, True]
    # buffers in kernel_params order: total, xin, yout, zin
    assert [seg.args for seg in kernel.segments] == [(1, 2), (0,), (0, 3)]
    head = "void f_" if compiler == "cc" else "define void @f_"
    signatures = {
        line.split("(")[0].split("f_", 1)[1]: line
        for line in kernel.source.splitlines()
        if line.startswith(head)
    }
    assert set(signatures) == {"0", "1", "2", "2_combine", "0_task", "2_task"}
    wanted = {"0": ("xin", "yout"), "1": ("total",), "2": ("total", "zin")}
    wanted["2_combine"] = wanted["2"]
    for name, labels in wanted.items():
        for label in ("xin", "yout", "zin", "total"):
            assert (label in signatures[name]) == (label in labels), (name, signatures[name])
    vx, vz = RNG.standard_normal(n), RNG.standard_normal(n)
    lb = COMPILERS[compiler](workers=3)
    got, _ = run_direct(lb, comp, {xin: vx, zin: vz}, total, reference=False)
    np.testing.assert_allclose(got, vz.sum(), rtol=1e-4, atol=1e-3)


def _softmax_rows(rows: int, cols: int) -> tuple[Any, Tnode, Tnode]:
    """Softmax over rows as users write it (five statements), its input and output."""
    x = Tnode.create((rows, cols), label="x", hosted=True)
    y = Tnode.create((rows, cols), label="y", hosted=True)
    m, se = Tnode.create((rows,), label="m"), Tnode.create((rows,), label="se")
    e = Tnode.create((rows, cols), label="e")
    comp = ir.block(
        ir.accum(m, "max", x, spec="rc->r"),
        ir.binop(e, "sub", x, m, spec="rc,r->rc"),
        ir.unop(e, "exp", e),
        ir.accum(se, "add", e, spec="rc->r"),
        ir.binop(y, "div", e, se, spec="rc,r->rc"),
    )
    return comp, x, y


def _softmax_np(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


@pytest.mark.parametrize(("rows", "cols", "fused"), [(1027, 256, True), (3, 40000, False)])
def test_row_chain_is_one_parallel_loop(
    cache_dir: Path, compiler: str, rows: int, cols: int, fused: bool
) -> None:
    """Softmax's five statements over the same rows run as one parallel loop over the rows
    (codegen.row_plan.fuse_row_loops): each row of x is read from memory once, its
    intermediates stay in cache; rows over the working-set limit keep their loops apart. The
    result is right either way, with rows that do not divide evenly into chunks."""
    comp, x, y = _softmax_rows(rows, cols)
    kernel = generate(compiler, optimize(lower(comp), name="r"))
    parallel = [seg for seg in kernel.segments if seg.parallel]
    if compiler == "cc":
        # x is read in the functions of the parallel loops only (not their tasks)
        readers = [f for f in kernel.source.split("\nvoid ")[1:] if "_task(" not in f[:40]]
        readers = [f for f in readers if "x_" in f.split("{", 1)[1]]
    if fused:
        assert len(kernel.segments) == 1 and len(parallel) == 1
        assert parallel[0].loop is not None and parallel[0].loop.to_inclusive == rows - 1
        if compiler == "cc":
            assert len(readers) == 1 and readers[0].count(" = start; ") == 1
    else:
        assert len(kernel.segments) >= 2  # the loops apart: several functions
    vx = RNG.uniform(-4, 4, (rows, cols)).astype(np.float32)
    for workers in (1, 3):
        got, _ = run_direct(COMPILERS[compiler](workers=workers), comp, {x: vx}, y, False)
        np.testing.assert_allclose(got, _softmax_np(vx.astype(np.float64)), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("rows", [1027, 5])
def test_row_loop_holds_local_rows(cache_dir: Path, compiler: str, rows: int) -> None:
    """Softmax with its temporaries ``Local`` (no other routine reads them): the row loop
    holds a row of each in an array of its own (codegen.row_plan.resident_rows), so ``e``
    never reaches memory and has no scratch buffer; the result is right on both compilers,
    for rows that do not divide evenly into chunks and for a serial loop."""
    from arrayjit_tnode import memory_mode as mm

    cols = 256
    x = Tnode.create((rows, cols), label="x", hosted=True)
    y = Tnode.create((rows, cols), label="y", hosted=True)
    m, se = (Tnode.create((rows,), label=n, memory_mode=(mm.Local(), 1)) for n in ("m", "se"))
    e = Tnode.create((rows, cols), label="e", memory_mode=(mm.Local(), 1))
    comp = ir.block(
        ir.accum(m, "max", x, spec="rc->r"),
        ir.binop(e, "sub", x, m, spec="rc,r->rc"),
        ir.unop(e, "exp", e),
        ir.accum(se, "add", e, spec="rc->r"),
        ir.binop(y, "div", e, se, spec="rc,r->rc"),
    )
    kernel = generate(compiler, optimize(lower(comp), name="r"))
    assert len(kernel.segments) == 1 and kernel.scratch == ()
    if compiler == "llvm":
        for name in ("e_", "m_", "se_"):
            assert re.search(rf"%n\.{name}\d+\.row = alloca \[", kernel.source)
    else:
        for name in ("row_e[256];", "row_m[1];", "row_se[1];"):
            assert name in kernel.source
        assert "e_" not in kernel.source.split("/* routine r */")[1].replace("row_e", "")
    vx = RNG.uniform(-4, 4, (rows, cols)).astype(np.float32)
    for workers in (1, 3):
        got, _ = run_direct(COMPILERS[compiler](workers=workers), comp, {x: vx}, y, False)
        np.testing.assert_allclose(got, _softmax_np(vx.astype(np.float64)), rtol=1e-5, atol=1e-7)


def _attention(nq: int, nk: int, d: int) -> tuple[Any, dict[str, Tnode]]:
    """One head as users write it: ``s = (q k^T) * scale`` (``q k^T`` a temporary the optimizer
    inlines into ``s``: per cell a ``d``-term dot product), softmax over ``s``'s rows into
    ``p``, ``o = p v``. ``s`` and ``o`` hosted, so both can be read back."""
    t = {
        "q": Tnode.create((nq, d), label="q", hosted=True),
        "k": Tnode.create((nk, d), label="k", hosted=True),
        "v": Tnode.create((nk, d), label="v", hosted=True),
        "scale": Tnode.create((), label="scale", hosted=True),
        "s0": Tnode.create((nq, nk), label="s0"),
        "s": Tnode.create((nq, nk), label="s", hosted=True),
        "m": Tnode.create((nq,), label="m"),
        "e": Tnode.create((nq, nk), label="e"),
        "se": Tnode.create((nq,), label="se"),
        "p": Tnode.create((nq, nk), label="p"),
        "o": Tnode.create((nq, d), label="o", hosted=True),
    }
    comp = ir.block(
        ir.accum(t["s0"], "add", t["q"], t["k"], op="mul", spec="qd,kd->qk"),
        ir.binop(t["s"], "mul", t["s0"], t["scale"]),
        ir.accum(t["m"], "max", t["s"], spec="rc->r"),
        ir.binop(t["e"], "sub", t["s"], t["m"], spec="rc,r->rc"),
        ir.unop(t["e"], "exp", t["e"]),
        ir.accum(t["se"], "add", t["e"], spec="rc->r"),
        ir.binop(t["p"], "div", t["e"], t["se"], spec="rc,r->rc"),
        ir.accum(t["o"], "add", t["p"], t["v"], op="mul", spec="qk,kd->qd"),
    )
    return comp, t


@pytest.mark.parametrize(
    ("nq", "nk", "d", "packed"), [(64, 96, 32, True), (37, 70, 24, True), (8, 8, 4, False)]
)
def test_attention_scores_run_on_the_packed_matmul(
    cache_dir: Path, compiler: str, nq: int, nk: int, d: int, packed: bool
) -> None:
    """Attention's scores, per cell an inlined dot product times the scale, run as the packed
    matmul into ``s`` (codegen.row_plan.packed_dots), the scale then in the softmax's row loop:
    two matmul segments (scores and ``p v``). Packed, ``s`` has the interpreter's bits (each
    cell the same fma steps from the same start, in order); ``o`` is numpy's within float32
    rounding; on shapes that do not fill the matmul's tiles, on several threads, and for a head
    too small for the packed matmul (its loops kept)."""
    comp, t = _attention(nq, nk, d)
    kernel = generate(compiler, optimize(lower(comp), name="att"))
    targets = [seg.matmul.c.tn for seg in kernel.segments if seg.matmul is not None]
    assert targets == ([t["s"], t["o"]] if packed else [])
    vq, vk, vv = (RNG.uniform(-1, 1, (n, d)).astype(np.float32) for n in (nq, nk, nk))
    scale = np.float32(1 / np.sqrt(d))
    inputs = {t["q"]: vq, t["k"]: vk, t["v"]: vv, t["scale"]: scale}
    sd = vq.astype(np.float64) @ vk.T.astype(np.float64) * float(scale)
    want = _softmax_np(sd) @ vv.astype(np.float64)
    for workers in (1, 3):
        lb = COMPILERS[compiler](workers=workers)
        got_s, ref_s = run_direct(lb, comp, inputs, t["s"])
        if packed:
            np.testing.assert_array_equal(got_s, ref_s)
        else:  # the inlined dot products are reassociated for vector lanes
            np.testing.assert_allclose(got_s, ref_s, rtol=1e-5, atol=1e-6)
        got_o, _ = run_direct(lb, comp, inputs, t["o"], False)
        np.testing.assert_allclose(got_o, want, rtol=1e-5, atol=1e-6)
