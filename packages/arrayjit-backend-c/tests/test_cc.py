"""The cc backend against the reference interpreter and numpy."""

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cpu_helpers import results_with_threads, run_both

from arrayjit_backend_c.cc import toolchain
from arrayjit_backend_c.cc.compiler import CcCompiler
from arrayjit_backends import fresh_backend, settings
from arrayjit_ir import ir
from arrayjit_ir.indexing import StaticSymbol
from arrayjit_tnode import CompileError, Tnode

RNG = np.random.default_rng(0)


BACKENDS = ["sync_cc", "multicore_cc"]
"""The backends every test taking the ``backend`` fixture runs on (see conftest.py)."""


def test_fetch_ops_and_static_bindings(backend: Any) -> None:
    i = StaticSymbol("i", range=4)
    data = Tnode.create((4, 3), label="data", hosted=True)
    row = Tnode.create((3,), label="row", hosted=True)
    vd = RNG.standard_normal((4, 3))
    got, ref = run_both(backend, ir.fetch(row, ir.Slice(i, data)), {data: vd}, row, {"i": 2}, (i,))
    np.testing.assert_allclose(got, vd[2].astype(np.float32))
    np.testing.assert_array_equal(got, ref)
    r = Tnode.create((2, 3), label="r", hosted=True)
    got, _ = run_both(backend, ir.fetch(r, ir.Range_over_offsets()), {}, r)
    np.testing.assert_array_equal(got, np.arange(6).reshape(2, 3))


def test_merge_buffer_reads(backend: Any) -> None:
    from arrayjit_backends import MergeMode
    from arrayjit_tnode import memory_mode as mm

    dev = backend.get_device(0)
    g = Tnode.create((4,), label="g", memory_mode=(mm.Materialized(), 1))
    src = Tnode.create((4,), label="src", hosted=True)
    src.set_values(np.arange(4.0))
    acc = Tnode.create((4,), label="acc", hosted=True)
    acc.set_values(np.ones(4))
    p = backend.link(
        backend.make_context(backend.new_stream(dev)),
        backend.compile(ir.unop(g, "neg", src), name="p"),
    )
    p()
    use = backend.link(
        backend.make_context(backend.new_stream(dev)),
        backend.compile(
            ir.accum(acc, "add", ir.merge_buffer(g), initialize_neutral=False), name="use"
        ),
    )
    backend.device_to_device(g, MergeMode.Copy, use.context, p.context)
    use()
    backend.to_host(use.context, acc)
    np.testing.assert_array_equal(acc.get_values(), 1 - np.arange(4.0))


def test_warm_cache_runs_no_compiler(backend: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    x = Tnode.create((8,), label="x", hosted=True)
    y = Tnode.create((8,), label="y", hosted=True)
    backend.compile(ir.unop(y, "exp", x), name="warm")
    calls: list[str] = []
    real = toolchain.compile_shared_object

    def counting(*args: Any) -> bytes:
        calls.append(args[2])
        return real(*args)

    monkeypatch.setattr(toolchain, "compile_shared_object", counting)
    fresh = CcCompiler()
    fresh.compile(backend.compile(ir.unop(y, "exp", x), name="warm").optimized)
    assert calls == []
    backend.compile(ir.unop(y, "exp", x), name="cold_name")
    assert calls == ["aj_cold_name"]


def test_compile_error_has_output_and_source() -> None:
    cc = toolchain.find_compiler()
    assert cc is not None
    with pytest.raises(CompileError, match=r"failed to compile routine broken") as info:
        toolchain.compile_shared_object(cc, "void broken(void) { this is not C }", "broken")
    assert "error" in info.value.output
    assert info.value.source_path is not None and Path(info.value.source_path).exists()
    assert "this is not C" in Path(info.value.source_path).read_text()


def _ieee_max_min(x: np.ndarray, op: str) -> float:
    """The IEEE 754-2019 maximum or minimum of the row ``x``, written plainly: NaN if any term
    is NaN, else the extreme value, +0 over -0 for max and -0 over +0 for min."""
    if np.isnan(x).any():
        return math.nan
    best = float(x[0])
    for v in map(float, x[1:]):
        if op == "max" and (v > best or (v == best and not math.copysign(1, v) < 0)):
            best = v
        if op == "min" and (v < best or (v == best and math.copysign(1, v) < 0)):
            best = v
    return best


@pytest.mark.parametrize("prec", ["single", "double"])
def test_keyed_max_min_rows(backend: Any, prec: str) -> None:
    """Row max and min reductions long enough to vectorize (they run on order keys) give the
    IEEE maximum and minimum bit for bit: signed zeros in either order, a NaN anywhere in the
    row (first, middle, last lane of a vector, last term), infinities, subnormals, all NaN."""
    cols = 100
    tiny = float(np.finfo(np.float32 if prec == "single" else np.float64).smallest_subnormal)
    rows = [
        np.full(cols, -0.0),
        np.concatenate([np.full(50, -0.0), np.full(50, 0.0)]),
        np.concatenate([np.full(50, 0.0), np.full(50, -0.0)]),
        np.full(cols, -math.inf),
        np.full(cols, math.inf),
        np.full(cols, math.nan),
        np.array([-tiny, tiny] * 50),
    ]
    for at in (0, 15, 16, 31, 63, 99):
        r = RNG.standard_normal(cols)
        r[at] = math.nan
        rows.append(r)
    for _ in range(4):
        rows.append(RNG.standard_normal(cols) * 10.0 ** RNG.integers(-40, 40))
    v = np.stack(rows)
    x = Tnode.create(v.shape, label="x", prec=prec, hosted=True)
    for op in ("max", "min"):
        out = Tnode.create((len(rows),), label=f"r{op}", prec=prec, hosted=True)
        got, _ = run_both(backend, ir.accum(out, op, x, spec="rc->r"), {x: v}, out, reference=False)
        stored = x.get_values()
        want = np.array([_ieee_max_min(r, op) for r in stored], dtype=got.dtype)
        assert np.array_equal(np.isnan(got), np.isnan(want)), op
        keep = ~np.isnan(want)
        assert np.array_equal(np.signbit(got[keep]), np.signbit(want[keep])), op
        np.testing.assert_array_equal(got[keep], want[keep], err_msg=op)


@pytest.mark.parametrize("prec", ["single", "double"])
@pytest.mark.parametrize(("rows", "cols", "inner"), [(3, 8, 64), (5, 12, 48), (2, 6, 32)])
def test_jammed_dot_loops(backend: Any, prec: str, rows: int, cols: int, inner: int) -> None:
    """Scores as attention computes them, ``s = (q k^T) * scale`` with the sum inlined into
    the scale's loop: the cells of a row run four at a time in lane partials
    (``cc.renderer.DotLoop``; 6 columns are no multiple of 4: one at a time), against numpy
    in double; a row of -0.0 products stays +0.0 (the sum's start) as the serial sum does."""
    from arrayjit_backend_c.cc.renderer import DOT_JAM

    q = Tnode.create((rows, inner), label="q", prec=prec, hosted=True)
    k = Tnode.create((cols, inner), label="k", prec=prec, hosted=True)
    scale = Tnode.create((), label="scale", prec=prec, hosted=True)
    s0 = Tnode.create((rows, cols), label="s0", prec=prec)
    s = Tnode.create((rows, cols), label="s", prec=prec, hosted=True)
    comp = ir.block(
        ir.accum(s0, "add", q, k, op="mul", spec="rd,cd->rc"),
        ir.binop(s, "mul", s0, scale),
    )
    vq, vk = RNG.standard_normal((rows, inner)), RNG.standard_normal((cols, inner))
    vq[0] = -0.0
    vk[0] = np.abs(vk[0]) + 1.0
    src = _source(comp)
    assert (f"[{DOT_JAM}][" in src) == (cols % DOT_JAM == 0)  # the jammed cells' partials
    got, ref = run_both(backend, comp, {q: vq, k: vk, scale: np.array(0.125)}, s)
    dt = np.float32 if prec == "single" else np.float64
    want = (vq.astype(dt).astype(np.float64) @ vk.astype(dt).astype(np.float64).T) * 0.125
    tol = 1e-5 if prec == "single" else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * float(np.abs(want).max()))
    np.testing.assert_allclose(got, ref, rtol=tol, atol=tol * float(np.abs(want).max()))
    assert not np.signbit(got[0, 0]) and got[0, 0] == 0.0


@pytest.mark.parametrize("cols", [128, 200, 40])
def test_lane_sums(backend: Any, cols: int) -> None:
    """Row sums whose blocks are whole vectors of lanes (64 terms; 200 = 3 blocks and 8 terms
    left, summed on their own) run in lane partials summed as a tree (``CcSyntax.lane_sum``),
    40 terms as a vectorized reduction; against numpy in double."""
    x = Tnode.create((6, cols), label="x", hosted=True)
    r = Tnode.create((6,), label="r", hosted=True)
    comp = ir.accum(r, "add", x, spec="rc->r")
    src = _source(comp)
    assert ("lanes" in src) == (cols % 16 == 0 or cols > 64)
    v = RNG.standard_normal((6, cols)) * 10.0 ** RNG.integers(-3, 3, (6, cols))
    got, ref = run_both(backend, comp, {x: v}, r)
    want = v.astype(np.float32).astype(np.float64).sum(1)
    scale = np.abs(v).sum(1)
    assert (np.abs(got - want) <= 8 * 2.0**-24 * scale).all()
    assert (np.abs(got - ref) <= 16 * 2.0**-24 * scale).all()


def _source(comp: Any) -> str:
    from arrayjit_backend_c.cc.renderer import CcSyntax
    from arrayjit_ir import lower, optimize

    source = CcSyntax().render_segments(optimize(lower(comp), name="r"), "f").source
    return source.removeprefix(CcSyntax.prelude)


def test_segment_functions() -> None:
    """A large loop writing disjoint cells is a function of its range, a large reduction a
    partial function and a combining one; small work stays in a serial function; reductions
    vectorize with ``omp simd`` (no OpenMP runtime: no parallel pragma anywhere)."""
    from arrayjit_backends.codegen.kernel_plan import TEAM_MIN_COST

    n = TEAM_MIN_COST
    a, b = Tnode.create((n,), label="a", hosted=True), Tnode.create((n,), label="b", hosted=True)
    src = _source(ir.binop(b, "mul", a, a))
    assert "void f_0(float *restrict a_0, float *restrict b_1, int64_t start, int64_t stop)" in src
    assert "for (int64_t i0 = start; i0 < stop; ++i0) {" in src
    t, u = Tnode.create((8,), label="t", hosted=True), Tnode.create((8,), label="u", hosted=True)
    assert "start" not in _source(ir.unop(t, "neg", u))
    tot = Tnode.create((), label="tot", hosted=True)
    src = _source(ir.accum(tot, "add", a, spec="i->"))
    assert "void *restrict partials, int64_t slot)" in src and "void f_1_combine(" in src
    # Its blocks of 64 terms sum in lane partials (CcSyntax.lane_sum), vectorized.
    assert "#pragma omp simd" in src and "lanes" in src and "omp parallel" not in src
    small = Tnode.create((64,), label="small", hosted=True)
    src = _source(ir.accum(tot, "max", small, spec="i->"))
    # A float max vectorizes on order keys (cc.renderer.ORDER_KEYS): an integer max.
    assert "#pragma omp simd reduction(max:key" in src and "partials" not in src
    assert "acc1 = aj_f32_unkey(key" in src
    half = Tnode.create((64,), label="half", prec="half", hosted=True)
    tot_half = Tnode.create((), label="tot_half", prec="half", hosted=True)
    # A half sum accumulates in a float32 register (arrayjit_ir.lower), stored once, rounded.
    src = _source(ir.accum(tot_half, "add", half, spec="i->"))
    assert "float acc1 = " in src and "#pragma omp simd reduction(aj_add:acc1)" in src
    assert src.count("tot_half_1[0] = ") == 1 and "(_Float16)(acc1)" in src


def test_large_parallel_kernel_is_correct(backend: Any) -> None:
    n = 1 << 17
    a, b = Tnode.create((n,), label="a", hosted=True), Tnode.create((n,), label="b", hosted=True)
    va = RNG.standard_normal(n)
    got, ref = run_both(backend, ir.unop(b, "tanh", a), {a: va}, b)
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-6)
    tot = Tnode.create((), label="tot", hosted=True)
    got, _ = run_both(backend, ir.accum(tot, "add", a, spec="i->"), {a: va}, tot)
    np.testing.assert_allclose(got, va.astype(np.float32).sum(), rtol=1e-4)


def test_debug_dir_gets_the_c_source(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ARRAYJIT_DEBUG_DIR", str(tmp_path))
    be = fresh_backend("sync_cc")
    x, y = (
        Tnode.create((3,), label="xin", hosted=True),
        Tnode.create((3,), label="yout", hosted=True),
    )
    be.compile(ir.unop(y, "exp", x), name="expo")
    source = (tmp_path / "sync_cc-expo.src.txt").read_text()
    assert "void aj_expo_0(" in source and "yout" in source and "expf(" in source
    assert "yout" in (tmp_path / "sync_cc-expo.ir.txt").read_text()
    be.finalize()


def test_large_matmul_is_unrolled_and_jammed(backend: Any) -> None:
    # Float matmuls run as the packed matmul (test_cpu_matmul.py); an integer one keeps the
    # loop nest, unrolled and jammed.
    n = 64
    x, w, h = (
        Tnode.create((n, n), prec="int32", label=name, hosted=True) for name in ("x", "w", "h")
    )
    comp = ir.accum(h, "add", x, w, op="mul", spec="ik,kj->ij")
    src = _source(comp)
    assert "i0 += 4" in src and "((i0 + 3)) * 64" in src
    vx, vw = RNG.integers(-9, 9, (n, n)), RNG.integers(-9, 9, (n, n))
    got, _ = run_both(backend, comp, {x: vx, w: vw}, h, reference=False)
    np.testing.assert_array_equal(got, vx @ vw)
    odd = Tnode.create((30, n), prec="int32", label="odd", hosted=True)
    out = Tnode.create((30, n), prec="int32", label="out", hosted=True)
    assert "+= 4" not in _source(ir.accum(out, "add", odd, w, op="mul", spec="ik,kj->ij"))


def test_cache_key_holds_the_cpu_model_and_flags(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    ident = toolchain.cpu_identity()
    assert "|" in ident and ident.split("|")[0].strip()
    monkeypatch.setenv("ARRAYJIT_CACHE_DIR", str(tmp_path))
    x, y = Tnode.create((4,), label="x", hosted=True), Tnode.create((4,), label="y", hosted=True)
    comp = ir.unop(y, "neg", x)
    b = fresh_backend("sync_cc")
    try:
        cache = b.runtime.compiler.cache
        b.compile(comp, name="k")
        b.compile(comp, name="k")
        assert (cache.builds, cache.hits) == (1, 1)
        monkeypatch.setattr(toolchain, "cpu_identity", lambda: "x86_64 | Other CPU | sse2")
        b.compile(comp, name="k")  # another CPU: never the first CPU's library
        assert (cache.builds, cache.hits) == (2, 1)
    finally:
        b.finalize()


def test_results_equal_with_one_and_all_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """ARRAYJIT_NUM_THREADS changes how many threads a kernel uses, never what it computes
    (a parallel sum's order may change: close, not equal)."""
    y1, s1, cores1 = results_with_threads(monkeypatch, "multicore_cc", "1")
    yn, sn, coresn = results_with_threads(monkeypatch, "multicore_cc", "64")
    assert cores1 == 1
    assert coresn == settings.available_cores()
    np.testing.assert_array_equal(y1, yn)
    np.testing.assert_allclose(s1, sn, rtol=1e-5)
    rng = np.random.default_rng(7)
    a = rng.standard_normal(1 << 18).astype(np.float32)
    b = rng.standard_normal(1 << 18).astype(np.float32)
    np.testing.assert_array_equal(y1, np.maximum(a * b, 0))
    np.testing.assert_allclose(s1, a.astype(np.float64).sum(), rtol=1e-4)


def test_short_routines_run_on_the_caller_of_an_idle_stream() -> None:
    """Routines of at most SHORT_WORK iterations and SHORT_COST estimated cost are marked short
    (an idle multicore stream runs them at once on the calling thread); larger ones are not."""
    from arrayjit_backend_c.cpu.work import SHORT_COST, SHORT_WORK, is_short
    from arrayjit_ir import lower, optimize

    small = Tnode.create((SHORT_WORK,), label="small", hosted=True)
    big = Tnode.create((SHORT_WORK + 1,), label="big", hosted=True)
    assert is_short(optimize(lower(ir.fetch(small, ir.Constant(1.0))), name="s"))
    assert not is_short(optimize(lower(ir.fetch(big, ir.Constant(1.0))), name="b"))
    # Few iterations, each costly (exp is a math-library call): over SHORT_COST, not short.
    n = SHORT_COST // 20
    assert n < SHORT_WORK
    u, v = (Tnode.create((n,), label=f"u{k}", hosted=True) for k in range(2))
    assert not is_short(optimize(lower(ir.unop(v, "exp", u)), name="e"))
    backend = fresh_backend("multicore_cc")
    try:
        ctx = backend.make_context(backend.new_stream(backend.get_device(0)))
        x = Tnode.create((SHORT_WORK,), label="x", hosted=True)
        out = Tnode.create((SHORT_WORK,), label="out", hosted=True)
        x.set_values(np.arange(SHORT_WORK) - 100.0)
        routine = backend.link(ctx, backend.compile(ir.unop(out, "relu", x), name="s"))
        routine()
        backend.await_stream(ctx.stream)  # the first run may queue behind setup copies
        routine()
        assert ctx.stream.queue.is_idle()  # done before the call returned
        backend.to_host(routine.context, out)
        np.testing.assert_array_equal(out.get_values(), np.maximum(np.arange(SHORT_WORK) - 100, 0))
    finally:
        backend.finalize()
