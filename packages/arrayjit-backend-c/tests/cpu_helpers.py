"""What the cc and llvm tests share: running a computation on a backend and on the
reference interpreter, tolerances, and the op lists."""

from typing import Any

import numpy as np

from arrayjit_ir import interpret
from arrayjit_ir.indexing import StaticSymbol
from arrayjit_tnode import Tnode

TOL = {"single": 1e-5, "double": 1e-12, "half": 2e-3, "bfloat16": 1e-2, "fp8": 0.13}
FLOATS = ["single", "double", "half", "bfloat16", "fp8"]
INTS = ["byte", "uint16", "int32", "uint32", "int64", "uint64"]


def run_both(
    be: Any,
    comp: Any,
    inputs: dict[Tnode, np.ndarray],
    out: Tnode,
    bindings: dict[str, int] | None = None,
    symbols: tuple[StaticSymbol, ...] = (),
    reference: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """The backend's result, and the interpreter's (or the backend's again when ``reference``
    is false: the interpreter is slow on large nodes)."""
    for tn, v in inputs.items():
        tn.set_values(v)
    code = be.compile(comp, name="t", bindings=symbols)
    r = be.link(be.make_context(be.new_stream(be.get_device(0))), code)
    for name, value in (bindings or {}).items():
        r.bindings[name] = value
    r()
    be.to_host(r.context, out)
    if not reference:
        return out.get_values(), out.get_values()
    bufs = {tn: tn.array.copy() for tn in inputs}  # type: ignore[union-attr]
    bufs[out] = np.zeros_like(out.array)
    values: dict[StaticSymbol | str, int] = {k: v for k, v in (bindings or {}).items()}
    interpret(code.optimized, bufs, values)
    return out.get_values(), bufs[out][out.logical_slices()]


def compare(got: np.ndarray, ref: np.ndarray, prec: str) -> None:
    g, r = got.astype(np.float64), ref.astype(np.float64)
    if prec in TOL:
        np.testing.assert_allclose(g, r, rtol=TOL[prec], atol=TOL[prec])
    else:
        np.testing.assert_array_equal(g, r)


UNOPS = [
    "identity",
    "relu",
    "satur01",
    "exp",
    "log",
    "exp2",
    "log2",
    "sin",
    "cos",
    "sqrt",
    "recip",
    "recip_sqrt",
    "neg",
    "trunc",
    "tanh",
    "not",
]
BINOPS = [
    "add",
    "sub",
    "mul",
    "div",
    "pow",
    "relu_gate",
    "satur01_gate",
    "max",
    "min",
    "mod",
    "cmplt",
    "cmpeq",
    "cmpne",
    "or",
    "and",
]
