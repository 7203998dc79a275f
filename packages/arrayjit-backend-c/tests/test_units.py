"""Compile units (:mod:`arrayjit_backend_c.cpu.units`): editing one layer of an MLP training step
recompiles only the units whose text changed, and the recompiled step computes what numpy
computes; the split source compiles and runs like the whole one."""

import logging
import re
import threading
from typing import Any

import numpy as np
import pytest

from arrayjit_backend_c.cc import toolchain
from arrayjit_backend_c.cpu import units
from arrayjit_backend_c.llvm import compiler as llvm_compiler
from arrayjit_conformance.compile_workload import BATCH, WIDTH
from arrayjit_conformance.compile_workload import mlp_step as workload_step
from arrayjit_ir import ir
from arrayjit_ir.assignments import Assignment, nodes
from arrayjit_tnode import Tnode

BACKENDS = ["sync_cc", "sync_llvm"]
LAYERS = 8
RATE = 0.05


def mlp_step(acts: list[str]) -> tuple[Assignment, dict[str, Tnode]]:
    """The training step of :mod:`arrayjit_conformance.compile_workload` with one layer per
    entry of ``acts``, the op that adds the layer's bias (``add``, or ``sub`` for the one
    edited layer); the step and its nodes by label."""
    edited = [k for k, act in enumerate(acts) if act == "sub"]
    comp, _ = workload_step(len(acts), edited[0] if edited else None)
    return comp, {".".join(tn.label): tn for tn in nodes(comp)}


def numpy_step(acts: list[str], values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The same step in numpy, in float64: the updated weights and biases."""
    v = {k: a.astype(np.float64) for k, a in values.items()}
    sign = {"add": 1.0, "sub": -1.0}
    hs = [v["x"]]
    for k, act in enumerate(acts):
        hs.append(np.tanh(hs[-1] @ v[f"w{k}"] + sign[act] * v[f"b{k}"]))
    dh = (hs[-1] - v["target"]) * v["inv_b"]
    out = {}
    for k in reversed(range(len(acts))):
        dz = dh * (v["one"] - hs[k + 1] * hs[k + 1])
        g, gb = hs[k].T @ dz, dz.sum(axis=0)
        dh = dz @ v[f"w{k}"].T
        out[f"w{k}"] = v[f"w{k}"] - g * v["lr"]
        out[f"b{k}"] = v[f"b{k}"] - gb * v["lr"]
    return out


def run(backend: Any, acts: list[str], name: str) -> dict[str, np.ndarray]:
    """Compile, run once and read back the step of ``acts``; checked against numpy."""
    comp, hosted = mlp_step(acts)
    rng = np.random.default_rng(7)
    values = {
        "x": rng.standard_normal((BATCH, WIDTH)),
        "target": rng.standard_normal((BATCH, WIDTH)),
        "lr": np.array(RATE),
        "inv_b": np.array(1.0 / BATCH),
        "one": np.array(1.0),
    }
    for k in range(len(acts)):
        values[f"w{k}"] = rng.standard_normal((WIDTH, WIDTH)) / np.sqrt(WIDTH)
        values[f"b{k}"] = rng.standard_normal(WIDTH) * 0.1
    values = {k: v.astype(np.float32) for k, v in values.items()}
    for label, v in values.items():
        hosted[label].set_values(v)
    code = backend.compile(comp, name=name)
    r = backend.link(backend.make_context(backend.new_stream(backend.get_device(0))), code)
    r()
    expected = numpy_step(acts, values)
    for label, want in expected.items():
        backend.to_host(r.context, hosted[label])
        np.testing.assert_allclose(hosted[label].get_values(), want, rtol=2e-4, atol=2e-5)
    return expected


def small_units(monkeypatch: pytest.MonkeyPatch) -> None:
    """Units an eighth of the usual minimum and a sixteenth of the maximum, however small the
    routine: the eight-layer step splits as a larger program does."""
    monkeypatch.setattr(units, "C_ONE_UNIT_BYTES", 0)
    monkeypatch.setattr(units, "SPLIT_MIN_BYTES", 0)
    monkeypatch.setattr(units, "MIN_UNIT_BYTES", units.MIN_UNIT_BYTES // 8)
    monkeypatch.setattr(units, "MAX_UNIT_BYTES", units.MAX_UNIT_BYTES // 16)


def test_editing_one_layer_compiles_only_its_units(
    backend: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Editing one layer of eight (its bias subtracted, not added) compiles exactly the units
    whose source is new (counted at the compiler; the kernel library, built once per process,
    is not a unit), fewer than half; both steps compute what numpy computes. (Eight identical
    layers shrink to one layer's distinct functions, one unit: split as a larger program is, in
    smaller units (an eighth of the usual minimum, a sixteenth of the maximum): with few units,
    a moved boundary reaches the neighbouring units before the grouping falls back into step,
    as it does within a unit or two in a larger program.)"""
    small_units(monkeypatch)
    compiled: list[str] = []
    split: list[tuple[str, ...]] = []
    is_cc = backend.name.endswith("cc")
    module: Any = toolchain if is_cc else llvm_compiler
    real_compile = module.compile_object
    real_split = units.split_c if is_cc else units.split_llvm

    def counting(source: str, *args: Any) -> bytes:
        compiled.append(source)
        return real_compile(source, *args)

    def counting_c(cc: str, source: str, name: str) -> bytes:
        compiled.append(source)
        return real_compile(cc, source, name)

    libraries: set[str | None] = set()

    def splitting(source: str) -> units.SplitRoutine:
        result = real_split(source)
        split.append(result.units)
        libraries.add(result.library)
        return result

    def compiled_units() -> list[str]:
        return sorted(c for c in compiled if c not in libraries)

    monkeypatch.setattr(module, "compile_object", counting_c if is_cc else counting)
    compiler_module = "arrayjit_backend_c.cc.compiler" if is_cc else llvm_compiler.__name__
    monkeypatch.setattr(f"{compiler_module}.split_{'c' if is_cc else 'llvm'}", splitting)

    acts = ["add"] * LAYERS
    run(backend, acts, "step")
    assert len(split[0]) > 2 and compiled_units() == sorted(set(split[0]))
    compiled.clear()
    acts[5] = "sub"
    run(backend, acts, "step")
    new = set(split[1]) - set(split[0])
    assert compiled_units() and compiled_units() == sorted(new)
    assert len(new) < len(split[1]) / 2


@pytest.mark.parametrize("language", ["c", "llvm"])
def test_functions_are_renamed_within_themselves(
    language: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two routines that differ only in numbering (node ids, loop symbols, the routine's name)
    split into the same units."""
    monkeypatch.setattr(units, "SPLIT_MIN_BYTES", 0)  # split however small
    c = """#include <stdint.h>
/* routine r */
void aj_r_0(float *restrict a_3, float *restrict b_4) {
  for (int64_t i7 = 0; i7 <= 3; ++i7) b_4[i7] = a_3[i7] * 2.0e+1f;
}
void aj_r_0_task(const int64_t *restrict common,
    const int64_t *restrict extra, int64_t chunk) {
  aj_r_0((void *)(intptr_t)common[0], (void *)(intptr_t)common[1]);
}
"""
    ll = """declare void @llvm.memset.p0.i64(ptr, i8, i64, i1)
define void @aj_r_0(ptr noalias %n.a_3) #0 {
entry:
  call void @llvm.memset.p0.i64(ptr %n.a_3, i8 0, i64 16, i1 0)
  br label %L4
L4:
  br label %L5, !llvm.loop !3
L5:
  ret void
}
attributes #0 = { nounwind }
!3 = distinct !{!3, !{!"llvm.loop.unroll.disable"}}
"""
    split = units.split_c if language == "c" else units.split_llvm
    source = c if language == "c" else ll
    other = (
        source.replace("aj_r_", "aj_other_")
        .replace("a_3", "a_9")
        .replace("b_4", "b_1")
        .replace("i7", "i12")
        .replace("L4", "L8")
        .replace("!3", "!0")
    )
    one, two = split(source), split(other)
    assert one.units == two.units
    assert one.symbols["aj_r_0"] == two.symbols["aj_other_0"]
    assert "a_3" not in "".join(one.units) and "aj_r_" not in "".join(one.units)


def test_repeated_layers_compile_once(backend: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The eight layers' identical functions are one function each in the compiled code (as
    one unit for C, several for LLVM), and the step computes what numpy computes."""
    split: list[units.SplitRoutine] = []
    is_cc = backend.name.endswith("cc")
    real_split = units.split_c if is_cc else units.split_llvm

    def splitting(source: str) -> units.SplitRoutine:
        split.append(real_split(source))
        return split[-1]

    compiler_module = "arrayjit_backend_c.cc.compiler" if is_cc else llvm_compiler.__name__
    monkeypatch.setattr(f"{compiler_module}.split_{'c' if is_cc else 'llvm'}", splitting)
    run(backend, ["add"] * LAYERS, "repeated")
    symbols = split[0].symbols
    assert len(set(symbols.values())) < len(symbols) / 2
    text = "".join(split[0].units)
    for symbol in set(symbols.values()):  # defined once (declarations end in ";")
        heads = re.findall(rf"^(?:void |define [^@\n]*@){symbol}\(.*$", text, re.MULTILINE)
        assert len([h for h in heads if not h.endswith(";")]) == 1, symbol


def test_corrupt_unit_entries_are_rebuilt(
    backend: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Every cache entry of a compiled step truncated: compiling the step edited (whose units
    are mostly the same) finds no entry it can trust, rebuilds every unit with a warning per bad
    entry, and computes what numpy computes."""
    small_units(monkeypatch)
    monkeypatch.setattr(units, "_libraries", {})  # the library is read from the cache too
    compiled: list[str] = []
    is_cc = backend.name.endswith("cc")
    module: Any = toolchain if is_cc else llvm_compiler
    real_compile = module.compile_object

    def counting(*args: Any) -> bytes:
        compiled.append(args[1] if is_cc else args[0])
        return real_compile(*args)

    monkeypatch.setattr(module, "compile_object", counting)
    acts = ["add"] * LAYERS
    run(backend, acts, "step")
    first = len(compiled)
    entries = [p for p in tmp_path.rglob("*") if p.is_file() and len(p.name) == 64]
    assert len(entries) > first  # the units' entries and the routine's
    for path in entries:
        path.write_bytes(path.read_bytes()[:100])
    compiled.clear()
    acts[5] = "sub"
    monkeypatch.setattr(units, "_libraries", {})
    with caplog.at_level(logging.WARNING, logger="arrayjit_backends.impl.compile_cache"):
        run(backend, acts, "step")
    assert len(compiled) >= first > 2  # nothing of the truncated entries was used
    bad = [r for r in caplog.records if "rebuilding it" in r.getMessage()]
    assert len(bad) >= first - 2  # every unit the edit left as it was, found bad


def test_the_kernel_library_compiles_once_per_process(
    backend: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two different steps (the second with one layer edited), each with packed matmuls,
    compiled in a process that has no kernel library yet and no cache: the library is compiled
    once, for the first; both compute what numpy computes."""
    monkeypatch.setenv("ARRAYJIT_NO_CACHE", "1")
    monkeypatch.setattr(units, "_libraries", {})
    libraries: list[str | None] = []
    compiled: list[str] = []
    is_cc = backend.name.endswith("cc")
    module: Any = toolchain if is_cc else llvm_compiler
    real_compile = module.compile_object
    real_split = units.split_c if is_cc else units.split_llvm

    def counting(*args: Any) -> bytes:
        compiled.append(args[1] if is_cc else args[0])
        return real_compile(*args)

    def splitting(source: str) -> units.SplitRoutine:
        result = real_split(source)
        libraries.append(result.library)
        return result

    monkeypatch.setattr(module, "compile_object", counting)
    compiler_module = "arrayjit_backend_c.cc.compiler" if is_cc else llvm_compiler.__name__
    monkeypatch.setattr(f"{compiler_module}.split_{'c' if is_cc else 'llvm'}", splitting)
    acts = ["add"] * 2
    run(backend, acts, "first")
    acts[1] = "sub"
    run(backend, acts, "second")
    assert libraries[0] is not None and libraries[0] == libraries[1]
    assert compiled.count(libraries[0]) == 1


def test_eight_threads_compiling_their_first_matmuls_at_once(
    backend: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Eight threads of a process that has no kernel library yet compile and run a matmul each
    (different shapes) on one backend at the same instant: every product is numpy's, and the
    process keeps one library (the threads that built it too keep the first)."""
    monkeypatch.setattr(units, "_libraries", {})
    threads = 8
    rng = np.random.default_rng(11)
    jobs = []
    for i in range(threads):
        a = Tnode.create((24, 40 + i), label=f"a{i}", hosted=True)
        b = Tnode.create((40 + i, 32), label=f"b{i}", hosted=True)
        c = Tnode.create((24, 32), label=f"c{i}", hosted=True)
        va = rng.standard_normal((24, 40 + i)).astype(np.float32)
        vb = rng.standard_normal((40 + i, 32)).astype(np.float32)
        a.set_values(va)
        b.set_values(vb)
        jobs.append((ir.accum(c, "add", a, b, op="mul", spec="ik,kj->ij"), c, va @ vb))
    start = threading.Barrier(threads, timeout=120)
    got: list[Any] = [None] * threads

    def work(i: int) -> None:
        try:
            comp, c, _ = jobs[i]
            start.wait()
            code = backend.compile(comp, name=f"mm{i}")
            r = backend.link(backend.make_context(backend.new_stream(backend.get_device(0))), code)
            r()
            backend.to_host(r.context, c)
            got[i] = c.get_values()
        except BaseException as exc:  # reported below, with the thread
            got[i] = exc

    workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    for i, (_, _, want) in enumerate(jobs):
        assert isinstance(got[i], np.ndarray), f"thread {i}: {got[i]!r}"
        np.testing.assert_allclose(got[i], want, rtol=1e-4, atol=1e-4)
    assert len(units._libraries) == 1
