"""Oracles for the float transcendentals (``exp``, ``log``, ``tanh``, ``sin``, ``pow``...):

- :func:`helper_bits`: the math library's C helpers (``arrayjit_backends.codegen.math_lib``)
  compiled directly by the system C compiler, outside any backend (no renderer, planner,
  scheduler or backend compiler flags), evaluated on float32 inputs and rounded once to the
  precision. Every backend that computes the op with the library must give these bits.
- :func:`exact`: the value in double (numpy float64 of the stored inputs), the reference the
  documented bound (:data:`MATH_ULPS`) is measured against, with :func:`ulp_errors`.
"""

from __future__ import annotations

import ctypes
import functools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np

from arrayjit_backends.codegen import math_lib

UNARY = {op.value: name for op, name in math_lib.UNOP_FUNCTIONS.items()}
"""The float unary ops the library computes, with their helper's name."""
BINARY = {op.value: name for op, name in math_lib.BINOP_FUNCTIONS.items()}
"""The float binary ops the library computes (``pow``)."""

MATH_ULPS: dict[str, float] = {"single": 1.0, "half": 1.0, "bfloat16": 1.0, "fp8": 1.0}
"""The documented bound of the library's transcendentals (arrayjit-ir's README), per precision:
the stored result is within this many ulps of the precision of the exact value (float32:
proved over every input by ``tools/math_accuracy.py``; the small floats compute in float32 and
round once). Double precision calls the platform's math library: not bounded here."""

STORAGE = {
    "single": np.dtype(np.float32),
    "double": np.dtype(np.float64),
    "half": np.dtype(np.float16),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "fp8": np.dtype(ml_dtypes.float8_e5m2),
}

_NUMPY: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "exp": np.exp,
    "exp2": np.exp2,
    "log": np.log,
    "log2": np.log2,
    "tanh": np.tanh,
    "sin": np.sin,
    "cos": np.cos,
    "recip_sqrt": lambda v: 1.0 / np.sqrt(v),
}


def compiler() -> str | None:
    """The system C compiler (``$CC``, else ``cc``, ``gcc`` or ``clang`` on PATH), or None."""
    cc = os.environ.get("CC", "").split()
    if cc and shutil.which(cc[0]):
        return cc[0]
    return next((c for c in ("cc", "gcc", "clang") if shutil.which(c)), None)


@functools.cache
def _library() -> ctypes.CDLL:
    cc = compiler()
    if cc is None:
        raise RuntimeError("no C compiler: set CC or install cc, gcc or clang")
    src = "#include <stdint.h>\n#include <math.h>\n" + math_lib.c_functions(
        tuple(math_lib.FUNCTIONS), math_lib.C_DIALECT
    )
    for name in UNARY.values():
        src += (
            f"void ev_{name}(const float *x, float *y, long n) "
            f"{{ for (long i = 0; i < n; ++i) y[i] = {name}(x[i]); }}\n"
        )
    for name in BINARY.values():
        src += (
            f"void ev_{name}(const float *x, const float *z, float *y, long n) "
            f"{{ for (long i = 0; i < n; ++i) y[i] = {name}(x[i], z[i]); }}\n"
        )
    folder = Path(tempfile.mkdtemp(prefix="arrayjit-math-oracle-"))
    (folder / "oracle.c").write_text(src)
    lib = folder / "oracle.so"
    # IEEE arithmetic, each operation rounded as written (fma only where the helpers call it).
    flags = ["-O1", "-fPIC", "-shared", "-ffp-contract=off", "-fno-fast-math", "-std=gnu11"]
    subprocess.run([cc, *flags, str(folder / "oracle.c"), "-o", str(lib), "-lm"], check=True)
    return ctypes.CDLL(str(lib))


def helper_bits(op: str, prec: str, *args: np.ndarray) -> np.ndarray:
    """``op`` of the stored values ``args`` (arrays of ``prec``'s storage dtype) as the
    library computes it: in float32, rounded once to ``prec``."""
    lib = _library()
    name = UNARY.get(op) or BINARY[op]
    xs = [np.ascontiguousarray(np.asarray(a).astype(np.float32).ravel()) for a in args]
    y = np.empty_like(xs[0])
    fp = ctypes.POINTER(ctypes.c_float)
    getattr(lib, f"ev_{name}")(*(x.ctypes.data_as(fp) for x in xs), y.ctypes.data_as(fp), y.size)
    return y.astype(STORAGE[prec]).reshape(np.shape(args[0]))


def exact(op: str, *args: np.ndarray) -> np.ndarray:
    """``op`` of the stored values in double (numpy float64): the exact value within far less
    than a float32 ulp, the C99 special cases of ``pow`` included (``ieee_pow``)."""
    from arrayjit_ir.ops import ieee_pow

    vals = [np.asarray(a).astype(np.float64) for a in args]
    with np.errstate(all="ignore"):
        if op == "pow":
            return np.asarray(ieee_pow(vals[0], vals[1]), dtype=np.float64)
        return np.asarray(_NUMPY[op](vals[0]), dtype=np.float64)


def ulp_errors(got: np.ndarray, want: np.ndarray, prec: str) -> np.ndarray:
    """``|got - want| / ulp(want)`` in ``prec``'s ulps (``want`` in double); special values
    must match exactly: NaN for NaN, the same infinity, the same zero (sign included), where a
    ``want`` beyond the largest finite value may also give it or the infinity (``inf`` marks a
    mismatch)."""
    info = ml_dtypes.finfo(STORAGE[prec])
    g = np.asarray(got).astype(np.float64).ravel()
    w = np.asarray(want, dtype=np.float64).ravel()
    big = float(info.max)
    with np.errstate(all="ignore"):
        e = np.floor(np.log2(np.abs(w)))
        e = np.maximum(np.where(np.isfinite(e), e, 0.0), float(info.minexp))
        ulp = np.exp2(e - int(info.nmant))
        err = np.abs(g - w) / ulp
    err = np.where(np.isinf(g) & (np.abs(w) > big) & (np.sign(g) == np.sign(w)), 0.0, err)
    special = np.isnan(w) | np.isinf(w) | (w == 0)
    same = (np.isnan(g) & np.isnan(w)) | (
        (g == w) & (np.signbit(g) == np.signbit(w)) & ~np.isnan(w)
    )
    err = np.where(special, np.where(same, 0.0, np.inf), err)
    return np.where(np.isnan(g) & ~np.isnan(w), np.inf, err)


def assert_within_bound(
    got: np.ndarray, prec: str, op: str, *args: np.ndarray, ulps: float | None = None
) -> None:
    """The backend's ``got`` for ``op(*args)`` is within the documented bound
    (:data:`MATH_ULPS`, or ``ulps``) of the exact value, special values exact.

    Raises:
        AssertionError: naming the worst inputs.
    """
    bound = MATH_ULPS[prec] if ulps is None else ulps
    err = ulp_errors(got, exact(op, *args), prec)
    bad = ~(err <= bound)
    if bad.any():
        rows = [
            f"  {op}{tuple(float(np.ravel(a)[k]) for a in args)} = "
            f"{float(np.ravel(got)[k])!r}: {err[k]:.3g} ulps"
            for k in np.flatnonzero(bad)[:8]
        ]
        raise AssertionError(
            f"{op} ({prec}): {int(bad.sum())} of {bad.size} results over {bound} ulp\n"
            + "\n".join(rows)
        )


def uses_library(backend: Any, op: str) -> bool:
    """Whether ``backend`` computes the float ``op`` with the math library: every compiled
    backend does, except the reference interpreter (numpy's functions) and, for the helpers
    that compute in double, a device without double precision (its builtins)."""
    if backend.name.endswith("interp"):
        return False
    name = UNARY.get(op) or BINARY.get(op)
    if name is None:
        return False
    from arrayjit_tnode import Prec

    return name not in math_lib.NEEDS_FP64 or Prec.double in backend.capabilities.supported_precs


__all__ = [
    "BINARY",
    "MATH_ULPS",
    "UNARY",
    "assert_within_bound",
    "compiler",
    "exact",
    "helper_bits",
    "ulp_errors",
    "uses_library",
]
