"""Random programs and the workload catalogue (from ``arrayjit_conformance``, a test-only
import) rendered as CUDA and compiled to PTX with nvcc, without a GPU: every optimized program
must compile on every backend, including the one this machine cannot run. Rendering runs
everywhere; compiling skips with the reason where nvcc is absent.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, assume, given, settings

from arrayjit_backend_cuda.compiler import compile_to, nvcc_path
from arrayjit_backend_cuda.renderer import CudaSyntax
from arrayjit_backends.codegen import math_lib
from arrayjit_backends.gpu.program import GpuProgram, render_program
from arrayjit_conformance.programs import Program, is_tame, programs
from arrayjit_conformance.workloads import WORKLOADS
from arrayjit_ir import lower, optimize
from arrayjit_tnode import CompileError

NVCC = nvcc_path()
FUZZ = int(os.environ.get("ARRAYJIT_FUZZ_EXAMPLES", "0") or 0)
"""Under ``tox -e fuzz``: that many fresh random programs; else a fixed-seed 40."""

MATH = "".join(math_lib.c_function(f, math_lib.CUDA_DIALECT) for f in math_lib.FUNCTIONS.values())
"""Every helper of the math library, once, for a translation unit of several programs."""


def without_math(body: str) -> str:
    """A program's source without the math library's helpers it defines (:data:`MATH` has
    them once)."""
    for fn in math_lib.FUNCTIONS.values():
        body = body.replace(math_lib.c_function(fn, math_lib.CUDA_DIALECT), "")
    return body


def _rendered() -> dict[str, tuple[GpuProgram, str]]:
    """Name -> (CUDA program, what it is) for 40 fixed-seed random programs and every
    workload."""
    out: dict[str, tuple[GpuProgram, str]] = {}

    @settings(
        max_examples=FUZZ or 40,
        derandomize=not FUZZ,
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    @given(program=programs())
    def render(program: Program) -> None:
        assume(is_tame(program))
        name = f"aj_program{len(out)}"
        _, comp = program.build()
        opt = optimize(lower(comp), name=name, static_symbols=program.symbols)
        out[name] = (render_program(CudaSyntax(), opt, name), program.source())

    render()
    for w in WORKLOADS:
        opt = optimize(lower(w.make().comp), name=w.name)
        out[f"aj_{w.name}"] = (render_program(CudaSyntax(), opt, f"aj_{w.name}"), w.name)
    return out


def test_programs_render_to_kernels() -> None:
    rendered = _rendered()
    assert len(rendered) >= 40
    for name, (program, what) in rendered.items():
        assert program.kernels, f"{name} has no kernel:\n{what}"


@pytest.mark.skipif(NVCC is None, reason="nvcc is not on PATH")
def test_programs_compile_to_ptx() -> None:
    """All in one translation unit; where nvcc refuses it, each program alone names the
    failing ones."""
    assert NVCC is not None
    rendered = _rendered()
    prelude = CudaSyntax().prelude
    bodies = [without_math(p.source.removeprefix(prelude)) for p, _ in rendered.values()]
    try:
        ptx = compile_to(prelude + MATH + "\n".join(bodies), NVCC, "sm_80", "ptx", "programs")
    except CompileError:
        failing = []
        for name, (p, what) in rendered.items():
            try:
                compile_to(p.source, NVCC, "sm_80", "ptx", name)
            except CompileError as exc:
                failing.append(f"{name}: {exc.output[:400]}\n{what}")
        pytest.fail("CUDA source that nvcc rejects:\n" + "\n".join(failing))
    text = ptx.decode()
    for p, _ in rendered.values():
        for k in p.kernels:
            assert f".entry {k.name}(" in text
