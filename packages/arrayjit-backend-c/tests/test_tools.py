"""How the CPU backends find their tools: ``$CC`` with arguments (split as a shell would) and
the llvm availability probe, which compiles and runs a tiny module in our IR's syntax."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

import arrayjit_backend_c
from arrayjit_backend_c.cc import toolchain
from arrayjit_backends import fresh_backend
from arrayjit_ir import ir
from arrayjit_tnode import CompileError, Tnode


@pytest.fixture
def uncached_compiler():  # type: ignore[no-untyped-def]
    toolchain.find_compiler.cache_clear()
    yield
    toolchain.find_compiler.cache_clear()


def test_cc_with_arguments_is_split_and_used(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, uncached_compiler: None
) -> None:
    gcc = shutil.which("gcc") or shutil.which("cc")
    assert gcc is not None
    # The macro only exists if the quoted argument reached the compiler whole: without it the
    # source does not compile.
    monkeypatch.setenv("CC", f"{Path(gcc).name} -DAJ_PROBE='\"quoted arg\"'")
    cc = toolchain.find_compiler()
    assert cc is not None
    assert toolchain.argv(cc) == [gcc, '-DAJ_PROBE="quoted arg"']
    src = "#include <string.h>\nint f(void) { return (int)strlen(AJ_PROBE); }\n"
    data = toolchain.compile_shared_object(cc, src, "probe_macro")
    assert data[:4] == b"\x7fELF"
    # The whole backend runs with it, and computes.
    monkeypatch.setenv("ARRAYJIT_NO_CACHE", "1")
    be = fresh_backend("sync_cc")
    be.initialize()
    try:
        x = Tnode.create((8,), label="x", hosted=True)
        y = Tnode.create((8,), label="y", hosted=True)
        values = np.arange(8, dtype=np.float32) - 3
        x.set_values(values)
        ctx = be.make_context(be.new_stream(be.get_device(0)))
        routine = be.link(ctx, be.compile(ir.unop(y, "neg", x), name="cc_args"))
        routine()
        be.to_host(routine.context, y)
        np.testing.assert_array_equal(y.get_values(), -values)
    finally:
        be.finalize()


def test_cc_program_not_found_is_no_compiler(
    monkeypatch: pytest.MonkeyPatch, uncached_compiler: None
) -> None:
    monkeypatch.setenv("CC", "no-such-cc-xyz -O2")
    assert toolchain.find_compiler() is None
    monkeypatch.setenv("CC", "gcc 'unbalanced")
    toolchain.find_compiler.cache_clear()
    assert toolchain.find_compiler() is None


@pytest.mark.parametrize(
    ("cc", "why"),
    [
        ("/nonexistent", "/nonexistent does not exist"),
        ("/nonexistent -O2", "/nonexistent does not exist"),
        ("{tmp}", "{tmp} is a directory"),
        ("{tmp}/not-a-program", "{tmp}/not-a-program is not executable"),
        ("no-such-cc-xyz -O2", "no executable 'no-such-cc-xyz' on PATH"),
        ("gcc 'unbalanced", "it does not split as a shell would (No closing quotation)"),
        ("''", "it names no program"),
    ],
)
def test_a_broken_cc_is_named_not_replaced(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    uncached_compiler: None,
    cc: str,
    why: str,
) -> None:
    """A set ``$CC`` that names no executable is reported with its value, and is not replaced by
    the cc, gcc or clang on PATH (there is one here: the other tests use it)."""
    assert shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    (tmp_path / "not-a-program").write_text("int main(void) { return 0; }\n")
    cc, why = cc.format(tmp=tmp_path), why.format(tmp=tmp_path)
    monkeypatch.setenv("CC", cc)
    assert toolchain.find_compiler() is None
    assert toolchain.compiler_problem() == (
        f"$CC={cc!r} is not an executable compiler: {why}; a set $CC is not replaced by "
        "cc, gcc or clang (fix or unset it)"
    )


def test_no_compiler_on_path_says_cc_is_not_set(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, uncached_compiler: None
) -> None:
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert toolchain.find_compiler() is None
    assert toolchain.compiler_problem() == (
        "no C compiler found ($CC is not set; no cc, gcc or clang on PATH)"
    )


def test_a_usable_compiler_has_no_problem(
    monkeypatch: pytest.MonkeyPatch, uncached_compiler: None
) -> None:
    monkeypatch.delenv("CC", raising=False)
    assert toolchain.find_compiler() is not None
    assert toolchain.compiler_problem() is None
    gcc = shutil.which("gcc") or shutil.which("cc")
    assert gcc is not None
    monkeypatch.setenv("CC", f"{Path(gcc).name} -O2")
    toolchain.find_compiler.cache_clear()
    assert toolchain.compiler_problem() is None


def test_compile_error_names_the_program(
    monkeypatch: pytest.MonkeyPatch, uncached_compiler: None
) -> None:
    gcc = shutil.which("gcc") or shutil.which("cc")
    assert gcc is not None
    monkeypatch.setenv("CC", f"{gcc} -fno-common")
    cc = toolchain.find_compiler()
    assert cc is not None
    with pytest.raises(CompileError, match=rf"^{Path(gcc).name} failed to compile routine bad"):
        toolchain.compile_shared_object(cc, "int f( {", "bad")


def test_llvm_probe_runs_a_module() -> None:
    assert arrayjit_backend_c._probe_llvm.__wrapped__() is None


def test_llvm_probe_reports_ir_it_cannot_compile(monkeypatch: pytest.MonkeyPatch) -> None:
    # Stands for an llvmlite too old for the IR's syntax: the probe says so instead of
    # listing llvm as available.
    monkeypatch.setattr(arrayjit_backend_c, "PROBE_IR", "define i32 @aj_probe(qtr %p) {}")
    reason = arrayjit_backend_c._probe_llvm.__wrapped__()
    assert reason is not None
    assert "cannot compile arrayjit's LLVM IR (needs llvmlite>=0.45)" in reason


@pytest.mark.skipif(toolchain.find_compiler() is None, reason="no C compiler")
def test_stream_baseline_copies_and_triads() -> None:
    from arrayjit_backend_c.cc import stream_baseline

    n = 100_003  # not a multiple of any vector width
    a = np.arange(n, dtype=np.float32)
    b = np.full(n, 0.5, dtype=np.float32)
    y = np.zeros(n, dtype=np.float32)
    stream_baseline.kernel("copy", y, a, b)()
    np.testing.assert_array_equal(y, a)
    stream_baseline.kernel("triad", y, a, b, threads=1)()
    np.testing.assert_array_equal(y, a + np.float32(1.5))
    y[:] = 0
    stream_baseline.kernel("triad", y, a, b, threads=3)()  # three ranges, whatever the cores
    np.testing.assert_array_equal(y, a + np.float32(1.5))
    with pytest.raises(ValueError, match=r"unknown kernel 'scale' \(copy or triad\)"):
        stream_baseline.kernel("scale", y, a, b)
    with pytest.raises(ValueError, match="expected contiguous float32 arrays of one size"):
        stream_baseline.kernel("copy", y, a[:-1], b[:-1])


def test_the_backend_list_names_a_broken_cc(monkeypatch: pytest.MonkeyPatch) -> None:
    """``arrayjit backends`` (the registry's probe) says which ``$CC`` is wrong."""
    monkeypatch.setenv("CC", "/nonexistent")
    toolchain.find_compiler.cache_clear()
    try:
        reason = arrayjit_backend_c._probe_cc()
        assert reason is not None and reason.startswith("$CC='/nonexistent' is not an executable")
    finally:
        monkeypatch.undo()
        toolchain.find_compiler.cache_clear()
