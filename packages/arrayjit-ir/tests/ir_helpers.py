"""Run computations through lowering, optimization and the interpreter."""

from __future__ import annotations

import numpy as np

from arrayjit_ir import interpret, lower, optimize
from arrayjit_ir.assignments import Assignment, Comp
from arrayjit_tnode import Tnode


def run(
    comp: Comp | Assignment,
    inputs: dict[Tnode, np.ndarray],
    outputs: list[Tnode],
    *,
    optimized: bool = True,
    bindings: dict[str, int] | None = None,
) -> dict[Tnode, np.ndarray]:
    """Lower (and optimize) ``comp``, run it on copies of ``inputs``; returns output arrays."""
    code = lower(comp)
    if optimized:
        from arrayjit_ir.assignments import static_symbols

        syms = static_symbols(comp.assignments if isinstance(comp, Comp) else comp)
        code = optimize(code, name="test", static_symbols=tuple(syms))  # type: ignore[assignment]
    bufs = {tn: np.array(v, dtype=tn.prec.numpy_dtype, copy=True) for tn, v in inputs.items()}
    for tn in outputs:
        bufs.setdefault(tn, np.zeros(tn.prec.host_shape(tn.dims), dtype=tn.prec.numpy_dtype))
    result = interpret(code, bufs, bindings or {})
    return {tn: result[tn] for tn in outputs}
