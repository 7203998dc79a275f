"""What the cc and llvm tests share: running a computation on a backend and on the
reference interpreter, tolerances, and the op lists."""

from typing import Any

import numpy as np

from arrayjit_ir import interpret, lower, optimize
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


def run_direct(
    lb: Any,
    comp: Any,
    inputs: dict[Tnode, np.ndarray],
    out: Tnode,
    reference: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """Run ``comp`` through the CPU compiler ``lb`` on plain numpy buffers, and through the
    interpreter when ``reference``."""
    opt = optimize(lower(comp), name="direct")
    bufs = {
        tn: np.zeros(tn.prec.host_shape(tn.dims), tn.prec.numpy_dtype) for tn in opt.context_nodes
    }
    for tn, v in inputs.items():
        if tn in bufs:
            bufs[tn][...] = v
    ref = {tn: a.copy() for tn, a in bufs.items()}
    lb.link(lb.compile(opt), bufs, lambda: None)({})
    if reference:
        interpret(opt, ref)
    return bufs[out], ref[out]


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


def results_with_threads(monkeypatch: Any, name: str, threads: str) -> tuple[Any, ...]:
    """A fused elementwise kernel and a sum, both large enough to run in parallel, on a fresh
    ``name`` backend with ``ARRAYJIT_NUM_THREADS=threads``, run on two busy streams at once
    and on one: the outputs and the backend's thread budget."""
    from arrayjit_backends import fresh_backend
    from arrayjit_ir import ir

    monkeypatch.setenv("ARRAYJIT_NUM_THREADS", threads)
    n = 1 << 18
    rng = np.random.default_rng(7)
    a, b, y = (Tnode.create((n,), label=x, hosted=True) for x in ("a", "b", "y"))
    s = Tnode.create((), label="s", hosted=True)
    a.set_values(rng.standard_normal(n).astype(np.float32))
    b.set_values(rng.standard_normal(n).astype(np.float32))
    t = Tnode.create((n,), label="t")
    comp = ir.block(ir.binop(t, "mul", a, b), ir.unop(y, "relu", t))
    backend = fresh_backend(name)
    try:
        dev = backend.get_device(0)
        fused = backend.link(
            backend.make_context(backend.new_stream(dev)), backend.compile(comp, name="fused")
        )
        total = backend.link(
            backend.make_context(backend.new_stream(dev)),
            backend.compile(ir.accum(s, "add", a, spec="i->"), name="total"),
        )
        for _ in range(3):
            fused()
            total()
        backend.to_host(fused.context, y)
        backend.to_host(total.context, s)
        return y.get_values().copy(), s.get_values().copy(), backend.runtime.budget.cores
    finally:
        backend.finalize()
