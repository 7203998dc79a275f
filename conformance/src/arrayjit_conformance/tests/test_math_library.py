"""The float transcendentals of arrayjit's own math library (``exp``, ``exp2``, ``log``,
``log2``, ``tanh``, ``sin``, ``cos``, ``recip_sqrt``, ``pow``), on a few thousand inputs per
precision (special values, random bit patterns: subnormals, huge arguments, NaNs), in one
routine:

- bit for bit the library's C helpers compiled directly by the system C compiler
  (:func:`~arrayjit_conformance.math_oracle.helper_bits`, no backend involved), so that cc,
  llvm, OpenCL and CUDA give the same bits;
- within the documented bound of the exact value (1 ulp of the stored precision, special values
  exact).

The reference interpreter computes these ops with numpy (its own bits, within numpy's bounds):
it runs the bound check only with numpy's float32 accuracy (4 ulps).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from arrayjit_conformance import math_oracle
from arrayjit_conformance.harness import hosted, on_interpreter, require_precs, run_once
from arrayjit_conformance.tests.test_special_floats import STORAGE, bits_equal, specials
from arrayjit_ir import ir

# The inputs overflow the small formats and include NaNs on purpose.
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
PRECS = ("single", "half", "bfloat16", "fp8")
RNG = np.random.default_rng(20261201)


def inputs(prec: str, n: int = 3000) -> np.ndarray:
    """Special values, random bit patterns of the precision, and values where the functions
    change regime (around 0, the reduction boundaries, the overflow of exp)."""
    dt = STORAGE[prec]
    width = dt.itemsize * 8
    bits = RNG.integers(0, 1 << width, n, dtype=np.uint64).astype(f"u{dt.itemsize}").view(dt)
    wide = RNG.uniform(-100, 100, n // 2)
    near = np.array([0.5, 0.70710677, 1.0, 1.4142135, 2.0, 3.1415927, 1.5707964, 0.7853982])
    extra = np.concatenate([near, -near, [88.72, -87.3, -103.9, 89.0, 9.01, 1e-3, 1e5, 1e30]])
    vals = np.concatenate([specials(prec).astype(np.float64), extra, wide, bits.astype(float)])
    return vals.astype(dt)


def _run(backend: Any, prec: str) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    require_precs(backend, prec)
    vx = inputs(prec)
    vz = np.concatenate(
        [np.resize([0.5, -1.0, 2.0, 3.0, -2.5, 0.0, 10.0], vx.size // 2), RNG.permutation(vx)]
    )[: vx.size].astype(STORAGE[prec])
    n = vx.size
    x, z = hosted((n,), "x", prec), hosted((n,), "z", prec)
    unary = list(math_oracle.UNARY)
    outs = {op: hosted((n,), f"y_{op}", prec) for op in [*unary, "pow"]}
    comp = ir.block(*(ir.unop(outs[op], op, x) for op in unary), ir.binop(outs["pow"], "pow", x, z))
    got = run_once(backend, comp, {x: vx, z: vz}, list(outs.values()))
    return vx, vz, dict(zip(outs, got))


@pytest.mark.parametrize("prec", PRECS)
def test_bits_of_the_math_library(backend: Any, prec: str) -> None:
    """Every transcendental gives the bits of the library's helpers compiled directly."""
    if math_oracle.compiler() is None:
        pytest.skip("no C compiler to build the math library's oracle")
    vx, vz, got = _run(backend, prec)
    checked = 0
    for op, g in got.items():
        if not math_oracle.uses_library(backend, op):
            continue
        args = (vx, vz) if op == "pow" else (vx,)
        bits_equal(g, math_oracle.helper_bits(op, prec, *args), prec, op, *args)
        checked += 1
    if not checked:
        pytest.skip(f"backend {backend.name} computes the transcendentals without the library")


@pytest.mark.parametrize("prec", PRECS)
def test_within_the_documented_bound(backend: Any, prec: str) -> None:
    """Every transcendental is within 1 ulp of the exact value (special values exact)."""
    vx, vz, got = _run(backend, prec)
    for op, g in got.items():
        args = (vx, vz) if op == "pow" else (vx,)
        ulps = None
        if on_interpreter(backend) or not math_oracle.uses_library(backend, op):
            ulps = 4.0  # numpy's (or a device's builtin) float32 functions
        math_oracle.assert_within_bound(g, prec, op, *args, ulps=ulps)
