"""The llvm backend against the reference interpreter and numpy."""

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cpu_helpers import compare, results_with_threads, run_both, run_direct

pytest.importorskip("llvmlite")

from arrayjit_backend_c.cpu import llvm_jit
from arrayjit_backend_c.llvm import compiler as llvm_compiler
from arrayjit_backend_c.llvm.compiler import LlvmCompiler
from arrayjit_backend_c.llvm.renderer import LlvmGen
from arrayjit_backends import fresh_backend, settings
from arrayjit_ir import ir, lower, optimize
from arrayjit_ir.indexing import StaticSymbol
from arrayjit_tnode import CompileError, Tnode

RNG = np.random.default_rng(0)


BACKENDS = ["sync_llvm", "multicore_llvm"]
"""The backends every test taking the ``backend`` fixture runs on (see conftest.py)."""


@pytest.mark.parametrize("prec", ["int32", "int64", "byte", "uint64"])
def test_integer_ternops(backend: Any, prec: str) -> None:
    c = Tnode.create((8,), prec="half", label="c", hosted=True)
    a, b = (Tnode.create((8,), prec=prec, label=n, hosted=True) for n in "ab")
    y = Tnode.create((8,), prec=prec, label="y", hosted=True)
    vals = {c: RNG.integers(0, 2, 8), a: RNG.integers(0, 100, 8), b: RNG.integers(0, 100, 8)}
    got, ref = run_both(backend, ir.ternop(y, "where", c, a, b), vals, y)
    compare(got, ref, prec)
    got, ref = run_both(backend, ir.ternop(y, "fma", a, b, a), vals, y)
    compare(got, ref, prec)


def test_warm_cache_runs_no_optimizer(backend: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    x = Tnode.create((8,), label="x", hosted=True)
    y = Tnode.create((8,), label="y", hosted=True)
    code = backend.compile(ir.unop(y, "exp", x), name="warm")
    calls: list[str] = []
    real_compile, real_optimize = llvm_jit.compile_object, llvm_jit.optimize

    def counting_compile(*args: Any) -> bytes:
        calls.append(args[1])
        return real_compile(*args)

    def counting_optimize(*args: Any) -> None:
        calls.append("optimize")
        real_optimize(*args)

    monkeypatch.setattr(llvm_compiler, "compile_object", counting_compile)
    monkeypatch.setattr(llvm_jit, "optimize", counting_optimize)
    fresh = LlvmCompiler()
    warm = fresh.compile(code.optimized)
    assert calls == []
    vx = RNG.standard_normal(8).astype(np.float32)
    vy = np.zeros(8, np.float32)
    fresh.link(warm, {x: vx, y: vy}, lambda: None)({})
    np.testing.assert_allclose(vy, np.exp(vx), rtol=1e-6)
    backend.compile(ir.unop(y, "exp", x), name="cold_name")
    assert calls == ["aj_cold_name", "optimize"]


def test_compile_error_has_output_and_ir() -> None:
    target = llvm_jit.host_target()
    with pytest.raises(CompileError, match=r"failed to compile routine broken") as info:
        llvm_jit.compile_object("define void @broken() { this is not IR }", "broken", target)
    assert "error" in info.value.output
    assert info.value.source_path is not None and Path(info.value.source_path).exists()
    assert "this is not IR" in Path(info.value.source_path).read_text()
    # Parses, but the verifier rejects it: a use before its definition.
    bad = "define i32 @f() {\nentry:\n  %x = add i32 %y, 1\n  %y = add i32 1, 1\n  ret i32 %x\n}\n"
    with pytest.raises(CompileError, match=r"routine f") as info:
        llvm_jit.compile_object(bad, "f", target)
    assert "dominate" in info.value.output


# ---- the CpuCompiler directly: conversions, integer corners, segments ----


def same_values(got: np.ndarray, ref: np.ndarray) -> None:
    """Equal values, signed zeros included; any NaN equals any NaN (fp8 stores C's 0x7E)."""
    with np.errstate(invalid="ignore"):
        g, r = got.astype(np.float64), ref.astype(np.float64)
    assert np.array_equal(g, r, equal_nan=True), (got[g != r], ref[g != r])
    num = ~np.isnan(r)
    np.testing.assert_array_equal(np.signbit(g[num]), np.signbit(r[num]))


SPECIALS = np.array(
    [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, 1e-8, 6e-5, 6.1e-5, 65504, 65519.9, 65520,
     57344, 61440, 3e38, -3e38, 1.0 + 2**-11, 1.0 + 3 * 2**-11, 2**-16, 3 * 2**-17, 1.5 * 2**-16],
    dtype=np.float32,
)  # fmt: skip


@pytest.mark.parametrize("native_half", [True, False])
@pytest.mark.parametrize("prec", ["half", "bfloat16", "fp8"])
def test_small_float_rounding_is_exact(cache_dir: Path, prec: str, native_half: bool) -> None:
    lb = LlvmCompiler()
    lb.generator = LlvmGen(lb.target.cpu, lb.target.features, native_half=native_half)
    rnd = RNG.integers(0, 2**32, 4096, dtype=np.uint64).astype(np.uint32).view(np.float32)
    vals = np.concatenate([SPECIALS, -SPECIALS, rnd, RNG.standard_normal(4096).astype(np.float32)])
    n = len(vals)
    x = Tnode.create((n,), prec="single", label="x", hosted=True)
    y = Tnode.create((n,), prec=prec, label="y", hosted=True)
    got, ref = run_direct(lb, ir.unop(y, "identity", x), {x: vals}, y)
    same_values(got, ref)
    # Every stored pattern back to float.
    bits = 256 if prec == "fp8" else 65536
    dt = np.uint8 if prec == "fp8" else np.uint16
    z = Tnode.create((bits,), prec="single", label="z", hosted=True)
    pats = np.arange(bits, dtype=np.uint64).astype(dt).view(y.prec.numpy_dtype)
    y2 = Tnode.create((bits,), prec=prec, label="y2", hosted=True)
    got, ref = run_direct(lb, ir.unop(z, "identity", y2), {y2: pats}, z)
    same_values(got, ref)


@pytest.mark.parametrize("prec", ["byte", "uint16", "int32", "uint32", "int64", "uint64"])
def test_float_to_integer_conversions(cache_dir: Path, prec: str) -> None:
    vals = np.array([-2.7, 2.7, 0.5, -0.5, 300.5, 70000.25, -1.0, 1e6], dtype=np.float32)
    vals = np.concatenate([vals, [np.nan, np.inf, -np.inf]]).astype(np.float32)
    x = Tnode.create((len(vals),), prec="single", label="x", hosted=True)
    y = Tnode.create((len(vals),), prec=prec, label="y", hosted=True)
    got, ref = run_direct(LlvmCompiler(), ir.unop(y, "identity", x), {x: vals}, y)
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("prec", ["int32", "int64"])
@pytest.mark.parametrize("op", ["div", "mod"])
def test_signed_division_corners(cache_dir: Path, prec: str, op: str) -> None:
    info = np.iinfo(np.dtype(prec))
    va = np.array([7, -7, 7, -7, info.min, info.min, info.max, 5, -5, 0])
    vb = np.array([2, 2, -2, -2, -1, 1, -1, 0, 0, -1])
    a, b, y = (Tnode.create((10,), prec=prec, label=n, hosted=True) for n in "aby")
    lb = LlvmCompiler()
    got, ref = run_direct(lb, ir.binop(y, op, a, b), {a: va, b: vb}, y)
    np.testing.assert_array_equal(got, ref)
    r = Tnode.create((10,), prec=prec, label="r", hosted=True)
    got, ref = run_direct(lb, ir.unop(r, "recip", b), {b: vb}, r)
    np.testing.assert_array_equal(got, ref)


def test_in_place_selections_store_every_cell(cache_dir: Path) -> None:
    """``y = relu(y)`` reads the cell it stores: its load is frozen, so that x86 code generation
    cannot turn the store of the selection into a (slow, on AMD) masked store; an accumulation
    ``y = y + x`` keeps its plain load. Values: the interpreter's, signed zeros and NaN too."""
    n = 1000
    x = Tnode.create((n,), label="x", hosted=True)
    y = Tnode.create((n,), label="y", hosted=True)
    relu = ir.unop(y, "relu", y)
    assert "freeze float" in LlvmGen().generate(optimize(lower(relu), name="r"), "f").source
    add = ir.binop(y, "add", y, x)
    assert "freeze" not in LlvmGen().generate(optimize(lower(add), name="a"), "f").source
    vy = np.resize(SPECIALS, n) * np.resize(np.float32([1.0, -1.0, -0.5]), n)
    got, ref = run_direct(LlvmCompiler(), relu, {y: vy}, y)
    same_values(got, ref)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(ref))


def test_blocks_of_row_sums_stay_loops(cache_dir: Path) -> None:
    """The block loop of each row's blocked sum carries ``llvm.loop.unroll.disable``: fully
    unrolled, the loop over blocks became the innermost and LLVM vectorized it across rows'
    blocks (scalar loads, 3x slower). Values: numpy's, to the blocked sum's error."""
    rows, cols = 8, 4096
    x = Tnode.create((rows, cols), label="x", hosted=True)
    s = Tnode.create((rows,), label="s", hosted=True)
    comp = ir.accum(s, "add", x, spec="ij->i")
    source = LlvmGen().generate(optimize(lower(comp), name="rs"), "f").source
    assert '!{!"llvm.loop.unroll.disable"}' in source and "!llvm.loop !0" in source
    vx = RNG.standard_normal((rows, cols)).astype(np.float32)
    got, _ = run_direct(LlvmCompiler(), comp, {x: vx}, s, reference=False)
    np.testing.assert_allclose(got, vx.sum(1, dtype=np.float64), rtol=1e-5, atol=1e-4)


def test_mixed_precisions(cache_dir: Path) -> None:
    lb = LlvmCompiler()
    a = Tnode.create((12,), prec="single", label="a", hosted=True)
    i = Tnode.create((12,), prec="byte", label="i", hosted=True)
    h = Tnode.create((12,), prec="half", label="h", hosted=True)
    d = Tnode.create((12,), prec="double", label="d", hosted=True)
    inputs = {
        a: RNG.uniform(-300, 300, 12),
        i: RNG.integers(0, 255, 12),
        h: RNG.uniform(-3, 3, 12),
        d: RNG.uniform(-3, 3, 12),
    }
    for prec in ("int32", "byte", "uint64", "half", "fp8", "double"):
        y = Tnode.create((12,), prec=prec, label="y", hosted=True)
        got, ref = run_direct(lb, ir.binop(y, "add", a, i), inputs, y)
        compare(got, ref, prec)
        got, ref = run_direct(lb, ir.ternop(y, "where", h, d, i), inputs, y)
        compare(got, ref, prec)


def test_large_parallel_kernel_is_correct(backend: Any) -> None:
    n = 1 << 17
    a, b = Tnode.create((n,), label="a", hosted=True), Tnode.create((n,), label="b", hosted=True)
    va = RNG.standard_normal(n)
    got, _ = run_both(backend, ir.unop(b, "tanh", a), {a: va}, b, reference=False)
    np.testing.assert_allclose(got, np.tanh(va.astype(np.float32)), rtol=1e-6, atol=1e-6)
    tot = Tnode.create((), label="tot", hosted=True)
    got, _ = run_both(backend, ir.accum(tot, "add", a, spec="i->"), {a: va}, tot, reference=False)
    np.testing.assert_allclose(got, va.astype(np.float32).sum(), rtol=1e-4)
    i = StaticSymbol("i", range=3)
    data = Tnode.create((3, n), label="data", hosted=True)
    row = Tnode.create((n,), label="row", hosted=True)
    vd = RNG.standard_normal((3, n))
    fetch = ir.fetch(row, ir.Slice(i, data))
    got, _ = run_both(backend, fetch, {data: vd}, row, {"i": 1}, (i,), reference=False)
    np.testing.assert_array_equal(got, vd[1].astype(np.float32))


def test_debug_dir_gets_the_llvm_ir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ARRAYJIT_DEBUG_DIR", str(tmp_path / "debug"))
    monkeypatch.setenv("ARRAYJIT_CACHE_DIR", str(tmp_path / "cache"))
    be = fresh_backend("sync_llvm")
    x, y = (
        Tnode.create((3,), label="xin", hosted=True),
        Tnode.create((3,), label="yout", hosted=True),
    )
    be.compile(ir.unop(y, "exp", x), name="expo")
    source = (tmp_path / "debug" / "sync_llvm-expo.src.txt").read_text()
    assert "define void @aj_expo_0(" in source and "yout" in source
    # float exp is the math library's helper, defined in the module (arrayjit_backends math_lib)
    assert "call float @aj_expf(" in source and "define internal float @aj_expf(" in source
    be.finalize()


def test_results_equal_with_one_and_all_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    y1, s1, cores1 = results_with_threads(monkeypatch, "multicore_llvm", "1")
    yn, sn, coresn = results_with_threads(monkeypatch, "multicore_llvm", "64")
    assert (cores1, coresn) == (1, settings.available_cores())
    np.testing.assert_array_equal(y1, yn)
    np.testing.assert_allclose(s1, sn, rtol=1e-5)


def _optimized(source: str) -> tuple[str, str]:
    """``source`` through the ``O3`` pipeline for the host, as the compiler runs it: the IR and
    the assembly."""
    import llvmlite.binding as llvm

    target = llvm_jit.host_target()
    with llvm_jit.LLVM_LOCK:
        module = llvm.parse_assembly(source)
        machine = target.machine()
        module.triple = machine.triple
        module.data_layout = str(machine.target_data)
        llvm_jit.optimize(module, machine)
        return str(module), machine.emit_assembly(module)


def test_multiply_accumulate_reductions_vectorize(cache_dir: Path) -> None:
    """A row's ``fma(x, w, acc)`` steps are ``llvm.fmuladd`` with ``reassoc`` and no other
    fast-math flag (``llvm.fma`` without a fusing target), and on a host with FMA the loop
    vectorizer turns them into vector multiply-adds, in several vector accumulators (a scalar
    fma chain ran a layer norm's variance 10x slower than cc's). Values: the interpreter's
    sequential fma; NaN, infinities and signed zeros exactly (-0.0 products into a -0.0 cell
    stay -0.0), others to rounding."""
    rows, cols = 6, 1000
    x = Tnode.create((rows, cols), label="x", hosted=True)
    w = Tnode.create((cols,), label="w", hosted=True)
    y = Tnode.create((rows,), label="y", hosted=True)
    comp = ir.accum(y, "add", x, w, op="mul", spec="ij,j->i", initialize_neutral=False)
    opt = optimize(lower(comp), name="mv")
    source = LlvmGen(fused_mul_add=True).generate(opt, "f").source
    steps = [ln for ln in source.splitlines() if "@llvm.fmuladd.f32(" in ln and "call" in ln]
    assert steps and all("call reassoc float" in ln for ln in steps), source
    assert "@llvm.fma.f32(" not in source
    unfused = LlvmGen(fused_mul_add=False).generate(opt, "f").source
    assert "fmuladd" not in unfused and "call reassoc float @llvm.fma.f32(" in unfused
    # The row loop of 1000 steps runs 4 vector accumulators (LLVM's cost model chose 1).
    assert '!{!"llvm.loop.interleave.count", i32 4}' in source
    lb = LlvmCompiler()
    if lb.generator.fused_mul_add:  # the host's code: its CPU and features
        opt_ir, asm = _optimized(lb.generator.generate(opt, "f").source)
        vector = re.findall(r"<(\d+) x float> @llvm\.fmuladd\.v\d+f32\(", opt_ir)
        assert len(vector) >= 4 and all(int(n) >= 4 for n in vector)
        if "+fma" in lb.target.features.split(","):  # fused: one rounding a step
            assert re.search(r"vfmadd\w*ps\s[^\n]*%[yz]mm", asm), asm
    vx = RNG.standard_normal((rows, cols)).astype(np.float32)
    vw = (np.abs(RNG.standard_normal(cols)) + 0.1).astype(np.float32)  # positive: signs of x
    vy = np.float32([0.5, -0.0, 0.0, 1.0, 2.0, -3.0])
    vx[1] = -0.0  # -0 products into a -0 cell: -0 (a +0 lane start would give +0)
    vx[2] = 0.0
    vx[2, 7] = np.inf
    vx[3, 500] = np.nan
    vx[4, 10], vx[4, 990] = np.inf, -np.inf  # inf - inf
    vx[5] = -0.0
    vx[5, 999] = -1.0  # a nonzero product last, after a run of -0 products
    got, ref = run_direct(lb, comp, {x: vx, w: vw, y: vy}, y)
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-5)
    same_values(got[1:], ref[1:])
    np.testing.assert_array_equal(np.signbit(got[1:]), np.signbit(ref[1:]))
    assert np.signbit(got[1]) and np.isinf(got[2]) and np.isnan(got[3]) and np.isnan(got[4])
