"""What the opencl tests share: running many statements as one routine (one PoCL build) on the
backend and on the reference interpreter, tolerances per precision, and op lists."""

from typing import Any

import numpy as np
import pytest

from arrayjit_ir import interpret, ir
from arrayjit_ir.indexing import StaticSymbol
from arrayjit_ir.ops import Binop, Unop
from arrayjit_tnode import Tnode, precision

FLOATS = ["single", "double", "half", "bfloat16", "fp8"]
INTS = ["byte", "uint16", "int32", "uint32", "int64", "uint64"]
SIGNED = {"int32", "int64"}

# Relative and absolute tolerances against the interpreter. The device's math functions are
# within a few ulps of numpy's; fp8 (two mantissa bits) allows one step of rounding the other way.
TOL = {"single": 2e-6, "double": 1e-13, "half": 2e-3, "bfloat16": 8e-3, "fp8": 0.26}

UNOPS = [op.value for op in Unop if op is not Unop.uint4x32_to_prec_uniform]
BINOPS = [op.value for op in Binop if op not in (Binop.threefry4x32, Binop.arg1, Binop.arg2)]
POSITIVE_ONLY = {"log", "log2", "sqrt", "recip_sqrt"}


def node(dims: tuple[int, ...], label: str, prec: str = "single") -> Tnode:
    return Tnode.create(dims, prec=prec, label=label, hosted=True)


def require_prec(be: Any, prec: str) -> None:
    if precision.parse(prec) not in be.capabilities.supported_precs:
        pytest.skip(f"the OpenCL device lacks {prec} (no cl_khr_fp16 / cl_khr_fp64)")


def run_batch(
    be: Any,
    comp: Any,
    inputs: dict[Tnode, np.ndarray],
    outputs: list[Tnode],
    bindings: dict[str, int] | None = None,
    symbols: tuple[StaticSymbol, ...] = (),
    name: str = "batch",
) -> list[tuple[np.ndarray, np.ndarray]]:
    """For each output, the backend's result and the interpreter's."""
    for tn, v in inputs.items():
        tn.set_values(v)
    code = be.compile(comp, name=name, bindings=symbols)
    r = be.link(be.make_context(be.new_stream(be.get_device(0))), code)
    for key, value in (bindings or {}).items():
        r.bindings[key] = value
    r()
    for out in outputs:
        be.to_host(r.context, out)
    bufs = {tn: tn.array.copy() for tn in inputs}  # type: ignore[union-attr]
    for out in outputs:
        bufs[out] = np.zeros_like(out.array)
    interpret(code.optimized, bufs, dict(bindings or {}))
    return [(out.get_values(), bufs[out][out.logical_slices()]) for out in outputs]


def compare(got: np.ndarray, ref: np.ndarray, prec: str, what: str = "") -> None:
    """Floats within the precision's tolerance (NaN where the reference is NaN); integers
    exactly."""
    g, r = got.astype(np.float64), ref.astype(np.float64)
    if prec in TOL:
        np.testing.assert_allclose(g, r, rtol=TOL[prec], atol=TOL[prec], err_msg=what)
    else:
        np.testing.assert_array_equal(g, r, err_msg=what)


def block(*items: Any) -> Any:
    return ir.block(*items)
