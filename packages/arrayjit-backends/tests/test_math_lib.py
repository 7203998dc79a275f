"""The math library (``arrayjit_backends.codegen.math_lib``) on a sample: its C helpers compiled
by the system C compiler with the cc backend's flags, run over 2^20 random float32 inputs (bit
patterns, and values where the functions change regime) plus every special value, each result
within 1 ulp of the exact value (numpy in double) and special values exact; ``pow`` on random
and special pairs. The exhaustive proof over all 2^32 inputs is ``tools/math_accuracy.py``
(``tox -e math-exhaustive``). Also: every helper's loop vectorizes (gcc), and the LLVM and
OpenCL/CUDA texts print every step."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from arrayjit_backends.codegen import math_lib
from arrayjit_ir.ops import ieee_pow

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
CC = shutil.which("gcc") or shutil.which("cc") or shutil.which("clang")
FLAGS = [
    "-O3",
    "-march=native",
    "-fPIC",
    "-shared",
    "-fwrapv",
    "-fno-math-errno",
    "-fno-trapping-math",
    "-ffp-contract=off",
    "-std=gnu11",
]
"""The cc backend's flags (arrayjit_backend_c.cc.toolchain.FLAGS)."""
UNARY = {
    "aj_expf": np.exp,
    "aj_exp2f": np.exp2,
    "aj_logf": np.log,
    "aj_log2f": np.log2,
    "aj_tanhf": np.tanh,
    "aj_sinf": np.sin,
    "aj_cosf": np.cos,
    "aj_rsqrtf": lambda v: 1.0 / np.sqrt(v),
}
needs_cc = pytest.mark.skipif(CC is None, reason="no C compiler")


def _source() -> str:
    src = "#include <stdint.h>\n#include <math.h>\n"
    src += math_lib.c_functions(tuple(math_lib.FUNCTIONS), math_lib.C_DIALECT)
    for name in UNARY:
        src += (
            f"void ev_{name}(const float *restrict x, float *restrict y, long n) "
            f"{{ for (long i = 0; i < n; ++i) y[i] = {name}(x[i]); }}\n"
        )
    src += (
        "void ev_aj_powf(const float *restrict x, const float *restrict z, float *restrict y, "
        "long n) { for (long i = 0; i < n; ++i) y[i] = aj_powf(x[i], z[i]); }\n"
    )
    return src


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> tuple[ctypes.CDLL, str]:
    """The helpers compiled into a shared library, and the compiler's vectorizer report."""
    if CC is None:
        pytest.skip("no C compiler")
    folder = tmp_path_factory.mktemp("math_lib")
    (folder / "m.c").write_text(_source())
    report = "-fopt-info-vec-optimized" if "gcc" in Path(CC).name else "-Rpass=loop-vectorize"
    done = subprocess.run(
        [CC, *FLAGS, report, str(folder / "m.c"), "-o", str(folder / "m.so"), "-lm"],
        capture_output=True,
        text=True,
        check=True,
    )
    return ctypes.CDLL(str(folder / "m.so")), done.stderr


def ulp_errors(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """float32 ulps of the exact value ``want`` (double); special values must be exact."""
    g, w = got.astype(np.float64), want
    e = np.floor(np.log2(np.abs(w)))
    e = np.maximum(np.where(np.isfinite(e), e, 0.0), -126.0)
    err = np.abs(g - w) / np.exp2(e - 23)
    err = np.where(np.isinf(g) & (np.abs(w) > 3.4028234663852886e38) & (g * w > 0), 0.0, err)
    special = np.isnan(w) | np.isinf(w) | (w == 0)
    same = (np.isnan(g) & np.isnan(w)) | ((g == w) & (np.signbit(g) == np.signbit(w)))
    err = np.where(special, np.where(same, 0.0, np.inf), err)
    return np.where(np.isnan(g) & ~np.isnan(w), np.inf, err)


SPECIALS = np.array(
    [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1.1754942e-38, 1.1754944e-38,
     3.4028235e38, -3.4028235e38, 1.0, -1.0, 0.5, 2.0, 88.72283, 88.72284, -87.33654,
     -103.97208, -103.97209, 128.0, -149.0, -150.0, 9.010913, 1e-8, 3.1415927, 1.5707964,
     1e10, 1.7e38, 2.0**-126, 2.0**-149],
    dtype=np.float32,
)  # fmt: skip


def sample(n: int = 1 << 20) -> np.ndarray:
    rng = np.random.default_rng(20261202)
    bits = rng.integers(0, 1 << 32, n // 2, dtype=np.uint64).astype(np.uint32).view(np.float32)
    near = rng.uniform(-120, 120, n // 4).astype(np.float32)
    small = (rng.uniform(0.25, 4, n // 4) * rng.choice([-1, 1], n // 4)).astype(np.float32)
    return np.concatenate([SPECIALS, bits, near, small])


def run(lib: ctypes.CDLL, name: str, *args: np.ndarray) -> np.ndarray:
    xs = [np.ascontiguousarray(a, dtype=np.float32) for a in args]
    y = np.empty_like(xs[0])
    fp = ctypes.POINTER(ctypes.c_float)
    getattr(lib, f"ev_{name}")(*(x.ctypes.data_as(fp) for x in xs), y.ctypes.data_as(fp), y.size)
    return y


@needs_cc
@pytest.mark.parametrize("name", list(UNARY))
def test_unary_within_one_ulp(library: tuple[ctypes.CDLL, str], name: str) -> None:
    x = sample()
    got = run(library[0], name, x)
    with np.errstate(all="ignore"):
        want = UNARY[name](x.astype(np.float64))
    err = ulp_errors(got, want)
    worst = int(np.argmax(np.where(np.isnan(err), np.inf, err)))
    assert err[worst] <= 1.0, f"{name}({x[worst]!r}) = {got[worst]!r}: {err[worst]:.3g} ulps"


@needs_cc
def test_pow_within_one_ulp(library: tuple[ctypes.CDLL, str]) -> None:
    rng = np.random.default_rng(7)
    n = 1 << 18
    x = np.concatenate(
        [np.exp2(rng.uniform(-150, 128, n)), rng.uniform(-4, 4, n), np.repeat(SPECIALS, 31)]
    ).astype(np.float32)
    y = np.concatenate(
        [rng.uniform(-4, 4, n), rng.integers(-40, 40, n) * rng.choice([1, 0.5], n),
         np.tile(SPECIALS, 31)]
    ).astype(np.float32)  # fmt: skip
    got = run(library[0], "aj_powf", x, y)
    want = ieee_pow(x.astype(np.float64), y.astype(np.float64))
    err = ulp_errors(got, want)
    worst = int(np.argmax(np.where(np.isnan(err), np.inf, err)))
    assert err[worst] <= 1.0, f"pow({x[worst]!r}, {y[worst]!r}) = {got[worst]!r}: {err[worst]}"


@needs_cc
def test_every_helper_loop_vectorizes(library: tuple[ctypes.CDLL, str]) -> None:
    """Each ``ev_`` loop calling one helper is reported vectorized (branch-free, no calls)."""
    report = library[1]
    lines = _source().splitlines()
    loops = [k + 1 for k, line in enumerate(lines) if line.startswith("void ev_")]
    vectorized = {int(r.split(":")[1]) for r in report.splitlines() if "vectorized" in r}
    missing = [lines[k - 1].split("(")[0] for k in loops if k not in vectorized]
    assert not missing, f"not vectorized: {missing}"


def test_every_dialect_prints_every_step() -> None:
    """The C dialects and LLVM print each helper in full, without the others' spellings."""
    for name, fn in math_lib.FUNCTIONS.items():
        ll, decls = math_lib.llvm_function(fn)
        assert ll.count("\n  %t") == len(fn.steps) and f"@{name}(" in ll
        assert all(d.startswith("declare ") for d in decls)
        for dialect, absent in (
            (math_lib.OPENCL_DIALECT, "__float_as"),
            (math_lib.CUDA_DIALECT, "aj_f32_bits"),
            (math_lib.C_DIALECT, "as_uint("),
        ):
            text = math_lib.c_function(fn, dialect)
            assert text.count("\n  const ") == len(fn.steps) and absent not in text
    assert {"aj_sinf", "aj_cosf", "aj_powf"} == math_lib.NEEDS_FP64
