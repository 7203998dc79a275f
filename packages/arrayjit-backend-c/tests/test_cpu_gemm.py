"""The implicit GEMM of the cc and llvm backends (convolutions run as the packed matmul, its
operands packed through their walks, :func:`arrayjit_backend_c.cpu.matmul.c_gemm_helpers` and
its LLVM IR): taken for the conformance suite's random convolutions (strides, dilations,
margins) and the gather form of the input gradient, and bit for bit the interpreter's result
over the unoptimized code, with blocks small enough that every block and tile edge is crossed."""

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from arrayjit_backend_c.cpu import matmul as cpu_matmul
from arrayjit_conformance.convolution import ConvShape
from arrayjit_conformance.harness import hosted, run_against_interpreter
from arrayjit_conformance.tests.test_convolution import random_shape
from arrayjit_ir import ir
from arrayjit_tnode import Padding, Prec

BACKENDS = ["sync_cc", "multicore_cc", "sync_llvm", "multicore_llvm"]
"""The backends every test taking the ``backend`` fixture runs on (see conftest.py)."""

MARKER = "aj_gemm_walk_"
"""Text that only the implicit GEMM puts into a kernel's source (cc and llvm alike)."""
SCATTER = "aj_scatter"
"""Text that only a scatter's runs of GEMMs put into a kernel's source (cc and llvm alike)."""


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """``k`` blocks of 8 (one block up to 20 steps), row blocks of 12, column blocks of
    ``2 * NR + 8`` (two full column panels, then a partial one), and no size threshold."""
    monkeypatch.setattr(cpu_matmul, "KC", 8)
    monkeypatch.setattr(cpu_matmul, "KC_WHOLE", 20)
    monkeypatch.setattr(cpu_matmul, "MC", 12)
    monkeypatch.setattr(cpu_matmul, "NC", 2 * cpu_matmul.nr_of(Prec.single) + 8)
    monkeypatch.setattr(cpu_matmul, "MATMUL_MIN_WORK", 1)


def _run(backend: Any, shape: ConvShape, which: str, prec: str, seed: int) -> str:
    """Run one convolution on ``backend`` and on the interpreter over the unoptimized code;
    assert the bits agree; return the kernel's source."""
    rng = np.random.default_rng(seed)
    pad = Padding(shape.padding_axes, 0.0)
    if which == "forward":
        a, b = hosted(shape.x_dims, "x", prec, padding=pad), hosted(shape.w_dims, "w", prec)
        out = hosted(shape.y_dims, "y", prec)
        spec = shape.forward_spec()
    elif which == "weight_grad":
        a, b = hosted(shape.x_dims, "x", prec, padding=pad), hosted(shape.y_dims, "dy", prec)
        out = hosted(shape.w_dims, "dw", prec)
        spec = shape.weight_grad_spec()
    elif which == "scatter":  # the input gradient in scatter form: the result indexed affinely
        a, b = hosted(shape.y_dims, "dy", prec), hosted(shape.w_dims, "w", prec)
        out = hosted(shape.x_dims, "dx", prec, padding=pad)
        spec = shape.input_grad_spec()
    else:  # the input gradient in gather form: stride 1, one cell of margin on each side
        a = hosted(shape.y_dims, "dy", prec, padding=Padding(shape.padding_axes, 0.0))
        b, out = hosted(shape.w_dims, "w", prec), hosted(shape.x_dims, "dx", prec)
        spec = "b(h-i+1)(w-j+1)d,ijcd->bhwc"
    comp = ir.accum(out, "add", a, b, op="mul", spec=spec)
    inputs = {t: rng.standard_normal(t.dims_without_padding) for t in (a, b)}
    # Zeros: fma(0, y, -0.0) is +0.0, a padded step would show.
    for v in inputs.values():
        v[rng.random(v.shape) < 0.1] = 0.0
    [(got, ref)] = run_against_interpreter(backend, comp, inputs, [out])
    dtype, bits = (np.float32, np.uint32) if prec == "single" else (np.float64, np.uint64)
    got, ref = np.asarray(got, dtype), np.asarray(ref, dtype)
    differ = np.flatnonzero(got.view(bits) != ref.view(bits))
    assert differ.size == 0, (
        f"{differ.size} of {got.size} cells differ from the interpreter's bits, first at "
        f"{np.unravel_index(differ[0], got.shape)}: {got.flat[differ[0]]!r} against "
        f"{ref.flat[differ[0]]!r}"
    )
    source: str = backend.compile(comp, name="gemm_source").native.source
    return source


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 5, 6, 7, 8, 10, 11])
@pytest.mark.parametrize("which", ["forward", "weight_grad"])
def test_random_convolutions_bit_exact(backend: Any, seed: int, which: str) -> None:
    shape = random_shape(seed)
    shape = replace(
        shape,
        batch=max(2, shape.batch),
        channels=max(2, shape.channels),
        out_channels=max(3, shape.out_channels),
        spatial=tuple(n + 3 for n in shape.spatial),  # every output axis of two points or more
    )
    assert min(shape.out) >= 2
    source = _run(backend, shape, which, "single", seed)
    assert MARKER in source or "aj_mm_block_" in source  # strided walks: the plain matmul
    if max(shape.kernel) > 1:
        assert MARKER in source


@pytest.mark.parametrize("prec", ["single", "double"])
@pytest.mark.parametrize("which", ["forward", "input_grad", "weight_grad"])
def test_same_convolutions_bit_exact(backend: Any, which: str, prec: str) -> None:
    """3x3 "same" over 2 x 7 x 5 images, 3 -> 83 channels: 70 rows (tiles of 6 cut), 27 or 70
    steps (blocks of 8 cut), 83 columns (full panels after the first of a column block, a
    partial one, then a second column block)."""
    shape = ConvShape(2, (7, 5), 3, 83, (3, 3), (1, 1), (1, 1), ((1, 1), (1, 1)))
    if which == "input_grad":
        shape = ConvShape(2, (7, 5), 83, 3, (3, 3), (1, 1), (1, 1), ((1, 1), (1, 1)))
    assert MARKER in _run(backend, shape, which, prec, 36)


@pytest.mark.parametrize("prec", ["single", "double"])
def test_one_stride_walks_run_as_the_plain_matmul(backend: Any, prec: str) -> None:
    """A 1x1 convolution, ``"bhwc,cd->bhwd"``: its rows ``b, h, w`` walk with one stride in
    both ``x`` and ``y``, so the plain matmul runs it (no walks), bit-exact; before implicit
    GEMMs its batch loops kept the loop nest."""
    rng = np.random.default_rng(7)
    x, w = hosted((2, 5, 7, 19), "x", prec), hosted((19, 70), "w", prec)
    y = hosted((2, 5, 7, 70), "y", prec)
    comp = ir.accum(y, "add", x, w, op="mul", spec="bhwc,cd->bhwd")
    inputs = {t: rng.standard_normal(t.dims) for t in (x, w)}
    [(got, ref)] = run_against_interpreter(backend, comp, inputs, [y])
    dtype, bits = (np.float32, np.uint32) if prec == "single" else (np.float64, np.uint64)
    got, ref = np.asarray(got, dtype), np.asarray(ref, dtype)
    assert np.array_equal(got.view(bits), ref.view(bits))
    source = backend.compile(comp, name="plain_source").native.source
    assert "aj_mm_block_" in source and MARKER not in source


@pytest.mark.parametrize("prec", ["single", "double"])
def test_same_scatter_input_grad_bit_exact(backend: Any, prec: str) -> None:
    """The input gradient in scatter form, ``"bhwd,ijcd->b(h+i-1)(w+j-1)c"`` into a node with
    one cell of margin: one GEMM per run (``b, h``) and shift (``i, j``), bit for bit the
    serial nest (whose writes reach the margins, which the routine then resets), with tiles,
    ``k`` blocks and column blocks cut."""
    shape = ConvShape(2, (7, 5), 83, 21, (3, 3), (1, 1), (1, 1), ((1, 1), (1, 1)))
    source = _run(backend, shape, "scatter", prec, 36)
    assert SCATTER in source


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 5, 6, 7, 8, 10, 11])
def test_random_scatter_input_grads_bit_exact(backend: Any, seed: int) -> None:
    """Random strides, dilations and margins, 1-D and 2-D: bit for bit the interpreter; the
    scatter path taken where a window has two offsets or more."""
    shape = random_shape(seed)
    shape = replace(
        shape,
        batch=max(2, shape.batch),
        channels=max(3, shape.channels),
        out_channels=max(2, shape.out_channels),
        spatial=tuple(n + 3 for n in shape.spatial),
    )
    assert min(shape.out) >= 2
    source = _run(backend, shape, "scatter", "single", seed)
    if max(shape.kernel) > 1:
        assert SCATTER in source
