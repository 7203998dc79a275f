"""Matmul kernels on PoCL: which contractions take a matmul shape, and that its results are the
bits of the serial fma chain (the interpreter's exact fma, k in order) at edge sizes.

This module's backend takes 64 lanes per reduced cell (``ARRAYJIT_GPU_CELL_LANES``), so its
matmuls take the tiled shape GPUs get; ``test_matmul_register.py`` runs the same tests with
PoCL's default, the register shape of CPU devices (``gpu.matmul.render_register_matmul``)."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
from opencl_helpers import node, require_prec, run_batch

from arrayjit_backends.gpu.program import GpuProgram
from arrayjit_ir import interpret, ir
from arrayjit_ir.assignments import Constant
from arrayjit_tnode import Tnode

RNG = np.random.default_rng(19)

GPU_CELL_LANES = 64


def _program(code: Any) -> GpuProgram:
    program: GpuProgram = code.native.rendered
    return program


def _shape(program: GpuProgram) -> str | None:
    """The matmul shape of the program's kernels: tiled, register, or None (the naive nest)."""
    if "__local float aj_ta[" in program.source or "__local double aj_ta[" in program.source:
        return "tiled"
    return "register" if "aj_c0 = fma(" in program.source else None


def _expected(backend: Any) -> str:
    return "tiled" if backend.runtime.renderer.cell_lanes > 1 else "register"


def _matmul_shape(backend: Any, program: GpuProgram) -> bool:
    """Whether the program's matmul took the shape this backend's device gets (tiled groups of
    256 work items, or register work items with no group size)."""
    shape = _expected(backend)
    local = 256 if shape == "tiled" else None
    return _shape(program) == shape and program.kernels[-1].local_size == local


@pytest.mark.parametrize(
    "m,k,n,prec",
    [
        (64, 48, 80, "single"),
        (17, 33, 5, "single"),
        (1, 70, 300, "single"),
        (300, 21, 1, "single"),
        (2, 200, 3, "single"),
        (130, 19, 65, "single"),  # two row tiles and a remainder, one k tile and a remainder
        (40, 35, 45, "double"),
        (2, 40, 300, "double"),
    ],
)
def test_matmul_takes_its_shape_and_is_bit_exact(
    backend: Any, m: int, k: int, n: int, prec: str
) -> None:
    require_prec(backend, prec)
    x, w, h = node((m, k), "x", prec), node((k, n), "w", prec), node((m, n), "h", prec)
    vx, vw = RNG.standard_normal((m, k)), RNG.standard_normal((k, n))
    comp = ir.accum(h, "add", x, w, op="mul", spec="ik,kj->ij")
    [(got, ref)] = run_batch(backend, comp, {x: vx, w: vw}, [h], name=f"mm_{m}_{k}_{n}")
    code = backend.compile(comp, name=f"mm_{m}_{k}_{n}")
    assert _matmul_shape(backend, _program(code))
    # No vector wider than 32 bytes: a double8 argument changes the call ABI on CPUs without
    # AVX-512, and PoCL warned about it at every build.
    assert not re.search(r"\b(?:double(?:8|16)|float16)\b", _program(code).source)
    # The same bits as the fma chain in k order (the interpreter's exact fma)...
    np.testing.assert_array_equal(got.view(np.uint8), ref.view(np.uint8))
    # ...which is numpy's product up to rounding.
    dt = np.float32 if prec == "single" else np.float64
    exact = vx.astype(dt).astype(np.float64) @ vw.astype(dt).astype(np.float64)
    tol = 1e-5 if prec == "single" else 1e-12
    np.testing.assert_allclose(got, exact, rtol=tol, atol=tol * k)


def test_transposed_operand_and_signed_zero_start(backend: Any) -> None:
    """``C += A @ B.T`` without zeroing: cells start from their stored values, -0.0 included
    (a zero-padded step past the end of k would turn it into +0.0: k = 20 is not a whole number
    of tiles), and B is read through its transpose."""
    m, k, n = 33, 20, 18
    x, wt, h = node((m, k), "x"), node((n, k), "wt"), node((m, n), "h")
    vx, vw = RNG.standard_normal((m, k)), RNG.standard_normal((n, k))
    vw[0, :] = np.abs(vw[0, :])  # column 0 of the result: only positive b
    vh = RNG.standard_normal((m, n))
    vh[3, 0] = vh[5, 0] = -0.0
    vx[3, :] = 0.0  # cell (3, 0): -0.0 + (+0 * b) is +0.0 at the first step
    vx[5, :] = -0.0  # cell (5, 0): -0.0 + (-0 * b) stays -0.0 (a padded fma(0, 0, acc) would not)
    comp = ir.accum(h, "add", x, wt, op="mul", spec="ik,jk->ij", initialize_neutral=False)
    for tn, v in ((x, vx), (wt, vw), (h, vh)):
        tn.set_values(v)
    code = backend.compile(comp, name="mm_t")
    assert _matmul_shape(backend, _program(code))
    r = backend.link(backend.make_context(backend.new_stream(backend.get_device(0))), code)
    r()
    backend.to_host(r.context, h)
    got = h.get_values()
    bufs = {tn: v.astype(np.float32) for tn, v in ((x, vx), (wt, vw), (h, vh))}
    interpret(code.optimized, bufs, {})
    ref = bufs[h]
    np.testing.assert_array_equal(got.view(np.uint32), ref.view(np.uint32))
    assert np.signbit(got[5, 0]) and got[5, 0] == 0 and not np.signbit(got[3, 0])
    np.testing.assert_allclose(
        got, vh + vx.astype(np.float32) @ vw.astype(np.float32).T, 1e-5, 1e-5
    )


def test_a_fill_before_the_matmul_is_its_start(backend: Any) -> None:
    """``h = 1.5`` then ``h += x @ w``, run twice: the matmul kernel's cells (either shape)
    start from the fill's constant (the fill's launch goes); the bits of the serial fma chain
    from 1.5, against the interpreter over the unoptimized code, and numpy up to rounding."""
    m, k, n = 70, 37, 66
    x, w, h = node((m, k), "x"), node((k, n), "w"), node((m, n), "h")
    vx, vw = RNG.standard_normal((m, k)), RNG.standard_normal((k, n))
    comp = ir.block(
        ir.fetch(h, Constant(1.5)),
        ir.accum(h, "add", x, w, op="mul", spec="ik,kj->ij", initialize_neutral=False),
    )
    for tn, v in ((x, vx), (w, vw), (h, -np.ones((m, n)))):
        tn.set_values(v)
    code = backend.compile(comp, name="mm_fill")
    program = _program(code)
    assert _matmul_shape(backend, program)
    assert len(program.kernels) == 1 and "((float)1.5)" in program.source
    r = backend.link(backend.make_context(backend.new_stream(backend.get_device(0))), code)
    r()
    r()  # a second run starts from the fill again, not from the first run's result
    backend.to_host(r.context, h)
    bufs = {x: vx.astype(np.float32), w: vw.astype(np.float32), h: np.zeros((m, n), np.float32)}
    interpret(code.optimized.unoptimized, bufs, {})
    got = h.get_values()
    np.testing.assert_array_equal(got.view(np.uint32), bufs[h].view(np.uint32))
    np.testing.assert_allclose(got, 1.5 + bufs[x] @ bufs[w], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "spec,wdims",
    [("bik,bkj->bij", (3, 37, 70)), ("bik,kj->bij", (37, 70)), ("bik,bjk->bij", (3, 70, 37))],
)
def test_batched_matmul_takes_its_shape_and_is_bit_exact(
    backend: Any, spec: str, wdims: tuple[int, ...]
) -> None:
    """A batch axis (both operands batched, or one shared): a group per block of one matrix."""
    b, m, k, n = 3, 20, 37, 70
    x, w, h = node((b, m, k), "x"), node(wdims, "w"), node((b, m, n), "h")
    vx, vw = RNG.standard_normal((b, m, k)), RNG.standard_normal(wdims)
    comp = ir.accum(h, "add", x, w, op="mul", spec=spec)
    name = "mm_b" + spec.replace(",", "_").replace("->", "_")
    [(got, ref)] = run_batch(backend, comp, {x: vx, w: vw}, [h], name=name)
    assert _matmul_shape(backend, _program(backend.compile(comp, name=name)))
    np.testing.assert_array_equal(got.view(np.uint32), ref.view(np.uint32))
    exact = np.einsum(spec, vx.astype(np.float32), vw.astype(np.float32))
    np.testing.assert_allclose(got, exact, rtol=1e-5, atol=1e-4)


def test_other_contractions_keep_the_naive_nest(backend: Any) -> None:
    """A half matmul and a matmul with a computed operand (an inlined product, not a plain
    read) keep one work item per cell."""
    m, k, n = 9, 7, 11
    x, w, v, h = node((m, k), "x"), node((k, n), "w"), node((k, n), "v"), node((m, n), "h")
    wv = Tnode.create((k, n), label="wv")
    xh, wh, hh = node((m, k), "xh", "half"), node((k, n), "wh", "half"), node((m, n), "hh", "half")
    comp = ir.block(
        ir.binop(wv, "add", w, v),
        ir.accum(h, "add", x, wv, op="mul", spec="ik,kj->ij"),
        ir.accum(hh, "add", xh, wh, op="mul", spec="ik,kj->ij"),
    )
    vals = {t: RNG.standard_normal(t.dims) for t in (x, w, v, xh, wh)}
    results = run_batch(backend, comp, vals, [h, hh], name="mm_naive")
    assert _shape(_program(backend.compile(comp, name="mm_naive"))) is None
    for got, ref in results:
        np.testing.assert_array_equal(got, ref)
