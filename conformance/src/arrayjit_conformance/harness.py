"""What conformance tests share: running a computation on a backend and on the reference
interpreter, the per-precision tolerance table, input values per precision, capability skips.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pytest

from arrayjit_ir import interpret
from arrayjit_ir.indexing import StaticSymbol
from arrayjit_tnode import Prec, Tnode

FLOAT_PRECS = ("single", "double", "half", "bfloat16", "fp8")
INT_PRECS = ("byte", "uint16", "int32", "uint32", "int64", "uint64")
ALL_PRECS = (*FLOAT_PRECS, *INT_PRECS)

TOLERANCE: dict[str, float] = {
    "single": 2e-5,
    "double": 1e-12,
    "half": 4e-3,
    "bfloat16": 2e-2,
    "fp8": 0.13,
}
"""Relative and absolute tolerance against the interpreter, per precision (exact for integers).

Values are stored in their own format on both sides, so the tolerance covers differences in
the compute path (fused multiply-add, library math functions, float vs double evaluation) of
one rounding step of the format, not accumulated error."""


def prec_of(name: str) -> Prec:
    """The precision called ``name``."""
    return Prec[name]


def require_precs(backend: Any, *names: str) -> None:
    """Skip the test (with the reason) unless the backend supports every precision named."""
    supported = backend.capabilities.supported_precs
    for n in names:
        if prec_of(n) not in supported:
            pytest.skip(f"backend {backend.name} does not support precision {n}")


def require_devices(backend: Any, count: int) -> None:
    """Skip the test unless the backend has at least ``count`` devices."""
    if backend.num_devices() < count:
        pytest.skip(f"backend {backend.name} has {backend.num_devices()} device(s), need {count}")


def new_context(backend: Any, ordinal: int = 0) -> Any:
    """A context on a new stream of device ``ordinal``."""
    return backend.make_context(backend.new_stream(backend.get_device(ordinal)))


def sample(
    rng: np.random.Generator, prec: str, shape: tuple[int, ...], lo: float = -3.0, hi: float = 3.0
) -> np.ndarray:
    """Input values that every precision represents well: floats in ``[lo, hi)``, small
    non-negative integers (``[0, 9)``) for integer precisions."""
    if prec in FLOAT_PRECS:
        return rng.uniform(lo, hi, shape)
    return rng.integers(0, 9, shape)


def hosted(dims: tuple[int, ...], label: str, prec: str = "single", **kw: Any) -> Tnode:
    """A hosted node."""
    return Tnode.create(dims, prec=prec, label=label, hosted=True, **kw)


def run_against_interpreter(
    backend: Any,
    comp: Any,
    inputs: Mapping[Tnode, np.ndarray],
    outputs: Sequence[Tnode],
    bindings: Mapping[str, int] | None = None,
    symbols: tuple[StaticSymbol, ...] = (),
    name: str = "case",
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Set ``inputs`` on the host, compile, link and run ``comp`` once on ``backend``, read
    ``outputs`` back; run the same optimized code on the reference interpreter from the same
    host values. Returns ``(backend value, interpreter value)`` per output."""
    for tn, v in inputs.items():
        tn.set_values(v)
    start = {tn: tn.array.copy() for tn in inputs if tn.array is not None}
    code = backend.compile(comp, name=name, bindings=symbols)
    routine = backend.link(new_context(backend), code)
    for sym, value in (bindings or {}).items():
        routine.bindings[sym] = value
    routine()
    for tn in outputs:
        assert backend.to_host(routine.context, tn), f"{tn.debug_label} is not in the context"
    bufs: dict[Tnode, np.ndarray] = {}
    for tn in code.optimized.context_nodes:
        bufs[tn] = start[tn] if tn in start else _zeros(tn)
    for tn in outputs:
        bufs.setdefault(tn, _zeros(tn))
    values: dict[StaticSymbol | str, int] = {k: v for k, v in (bindings or {}).items()}
    interpret(code.optimized, bufs, values)
    return [(tn.get_values(), bufs[tn][tn.logical_slices()]) for tn in outputs]


def _zeros(tn: Tnode) -> np.ndarray:
    return np.zeros(tn.prec.host_shape(tn.dims), dtype=tn.prec.numpy_dtype)


def assert_close(got: np.ndarray, ref: np.ndarray, prec: str) -> None:
    """``got`` equals ``ref`` within the precision's tolerance (exactly for integers), with
    NaNs in the same places."""
    assert got.shape == ref.shape, f"shape {got.shape} != {ref.shape}"
    g, r = np.asarray(got, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    if prec in TOLERANCE:
        tol = TOLERANCE[prec]
        np.testing.assert_allclose(g, r, rtol=tol, atol=tol, equal_nan=True)
    else:
        np.testing.assert_array_equal(g, r)


__all__ = [
    "ALL_PRECS",
    "FLOAT_PRECS",
    "INT_PRECS",
    "TOLERANCE",
    "assert_close",
    "hosted",
    "new_context",
    "prec_of",
    "require_devices",
    "require_precs",
    "run_against_interpreter",
    "sample",
]
