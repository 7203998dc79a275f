"""The accuracy of arrayjit's float32 math library (``arrayjit_backends.codegen.math_lib``)
over every float32 input: compiles the library's C helpers (as the cc backend emits them) with
the system C compiler into a small shared library together with a scan loop, runs all 2^32
inputs of each unary op in chunks against a reference (the input widened to double, the C
library's double function: ``exp``, ``exp2``, ``log``, ``log2``, ``tanh``, ``sin``, ``cos``,
``1/sqrt``; accurate to well under 2^-20 float32 ulps), and prints per op the largest error in
float32 ulps of the exact value and the number of inputs over 1 ulp.

The error of a result ``y`` for an exact value ``v``: ``|y - v| / ulp(v)``, where ``ulp(v)`` is
the spacing of float32 numbers at ``v`` (``2^-149`` below ``2^-126``). Special values must be
exact: a NaN reference needs a NaN, an infinite one the same infinity, a zero the same zero
(its sign included); a value beyond the largest float may give it or the infinity.

``pow`` has two inputs: it runs on a random sample (``--pow-samples``, uniform bit patterns and
values near 1 and near the overflow boundary) plus every pair of special values; not
exhaustive.

    python tools/math_accuracy.py                 # every op, all 2^32 inputs (minutes)
    python tools/math_accuracy.py --stride 4099   # every 4099th input: a quick look
    python tools/math_accuracy.py --ops exp,log

Exits 1 if any op has an input over 1 ulp (``tox -e math-exhaustive`` runs it).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from arrayjit_backends.codegen import math_lib

OPS = {
    "exp": ("aj_expf", "exp(d)"),
    "exp2": ("aj_exp2f", "exp2(d)"),
    "log": ("aj_logf", "log(d)"),
    "log2": ("aj_log2f", "log2(d)"),
    "tanh": ("aj_tanhf", "tanh(d)"),
    "sin": ("aj_sinf", "sin(d)"),
    "cos": ("aj_cosf", "cos(d)"),
    "recip_sqrt": ("aj_rsqrtf", "1.0 / sqrt(d)"),
}

HARNESS = r"""
#include <stdint.h>
#include <math.h>
#include <string.h>
{helpers}

/* |y - v| / ulp(v) in float32 ulps; special values must be exact (see the module docstring). */
static double ulp_error(float y, double v) {{
  if (v != v) return y != y ? 0.0 : INFINITY;
  if (y != y) return INFINITY;
  if (isinf(v)) return (double)y == v ? 0.0 : INFINITY;
  if (v == 0) return (y == 0 && !signbit(y) == !signbit(v)) ? 0.0 : INFINITY;
  uint64_t vb; memcpy(&vb, &v, 8);
  int k = (int)((vb >> 52) & 0x7ff) - 1023;  /* v's binary exponent (v is a double normal) */
  if (k < -126) k = -126;
  uint64_t ub = (uint64_t)(k - 23 + 1023) << 52;
  double ulp; memcpy(&ulp, &ub, 8);
  if (isinf(y)) {{
    /* beyond the largest float, the infinity of the same sign is faithful */
    return (fabs(v) > 0x1.fffffep127 && !signbit(y) == !signbit(v)) ? 0.0 : INFINITY;
  }}
  return fabs((double)y - v) / ulp;
}}

{scans}

void pow_errors(const float *x, const float *y, long n, double *err, float *got) {{
  #pragma omp parallel for
  for (long i = 0; i < n; ++i) {{
    float r = aj_powf(x[i], y[i]);
    got[i] = r;
    err[i] = ulp_error(r, pow((double)x[i], (double)y[i]));
  }}
}}
"""

SCAN = r"""
/* Inputs with bit patterns [lo, hi): the largest error, its input, the count over 1 ulp. The
   helper runs over blocks of inputs (a vectorized loop, as in generated code). */
void scan_{op}(uint64_t lo, uint64_t hi, uint64_t stride, double *max_err, uint32_t *worst,
               uint64_t *over) {{
  double m = 0; uint32_t w = 0; uint64_t c = 0;
  int64_t blocks = (int64_t)((hi - lo + stride * 1024 - 1) / (stride * 1024));
  #pragma omp parallel
  {{
    double lm = 0; uint32_t lw = 0; uint64_t lc = 0;
    float xs[1024], ys[1024];
    #pragma omp for schedule(dynamic, 16)
    for (int64_t blk = 0; blk < blocks; ++blk) {{
      uint64_t b0 = lo + (uint64_t)blk * stride * 1024;
      int n = 0;
      for (; n < 1024 && b0 + n * stride < hi; ++n) {{
        uint32_t u = (uint32_t)(b0 + n * stride); memcpy(&xs[n], &u, 4);
      }}
      for (int j = 0; j < n; ++j) ys[j] = {fn}(xs[j]);
      for (int j = 0; j < n; ++j) {{
        double d = (double)xs[j];
        double e = ulp_error(ys[j], {ref});
        if (e > 1.0) lc++;
        if (e > lm || e != e) {{ lm = e; memcpy(&lw, &xs[j], 4); }}
      }}
    }}
    #pragma omp critical
    {{ if (lm > m) {{ m = lm; w = lw; }} c += lc; }}
  }}
  *max_err = m; *worst = w; *over = c;
}}
"""

FLAGS = (
    "-O3",
    "-march=native",
    "-ffp-contract=off",
    "-fno-math-errno",
    "-fno-trapping-math",
    "-fwrapv",
    "-std=gnu11",
)
"""The cc backend's code-generation flags (arrayjit_backend_c.cc.toolchain), plus OpenMP."""


def build(folder: Path) -> ctypes.CDLL:
    """Compile the helpers and the scans into a shared library in ``folder``; load it."""
    helpers = math_lib.c_functions(tuple(math_lib.FUNCTIONS), math_lib.C_DIALECT)
    scans = "".join(SCAN.format(op=op, fn=fn, ref=ref) for op, (fn, ref) in OPS.items())
    src = folder / "math_accuracy.c"
    src.write_text(HARNESS.format(helpers=helpers, scans=scans))
    lib = folder / "math_accuracy.so"
    cc = os.environ.get("CC") or shutil.which("cc") or "gcc"
    cmd = [cc, *FLAGS, "-fopenmp", "-fPIC", "-shared", str(src), "-o", str(lib), "-lm"]
    subprocess.run(cmd, check=True)
    return ctypes.CDLL(str(lib))


def scan(lib: ctypes.CDLL, op: str, stride: int, chunk: int = 1 << 28) -> tuple[float, int, int]:
    """The largest error of ``op`` over every ``stride``-th float32 bit pattern, the bit pattern
    where it occurs, and how many inputs are over 1 ulp."""
    fn = getattr(lib, f"scan_{op}")
    worst_err, worst_in, over = 0.0, 0, 0
    m, w, c = ctypes.c_double(), ctypes.c_uint32(), ctypes.c_uint64()
    for lo in range(0, 1 << 32, chunk):
        start = lo + (-lo) % stride
        fn(
            ctypes.c_uint64(start),
            ctypes.c_uint64(lo + chunk),
            ctypes.c_uint64(stride),
            ctypes.byref(m),
            ctypes.byref(w),
            ctypes.byref(c),
        )
        over += c.value
        if m.value > worst_err or m.value != m.value:
            worst_err, worst_in = m.value, w.value
    return worst_err, worst_in, over


def pow_sample(lib: ctypes.CDLL, n: int, seed: int = 1) -> tuple[float, tuple[float, float], int]:
    """``pow`` over ``n`` random pairs and every pair of special values: the largest error, its
    inputs, the count over 1 ulp."""
    import numpy as np

    rng = np.random.default_rng(seed)
    k = n // 4
    bits = rng.integers(0, 1 << 32, (k, 2), dtype=np.uint64).astype(np.uint32).view(np.float32)
    near1 = np.stack([rng.uniform(0.5, 2.0, k), rng.uniform(-300, 300, k)], axis=1).astype(
        np.float32
    )
    wide = np.stack([np.exp2(rng.uniform(-150, 128, k)), rng.uniform(-4, 4, k)], axis=1).astype(
        np.float32
    )
    # near overflow and underflow: y log2 x close to 128 or -149
    xs = np.exp2(rng.uniform(-20, 20, k)).astype(np.float32)
    target = rng.choice([128.0, -126.0, -149.0], k) + rng.uniform(-1, 1, k)
    edge = np.stack([xs, (target / np.log2(xs.astype(np.float64)))], axis=1).astype(np.float32)
    sp = np.array(
        [
            0.0,
            -0.0,
            1.0,
            -1.0,
            0.5,
            -0.5,
            2.0,
            -2.0,
            3.0,
            -3.0,
            np.inf,
            -np.inf,
            np.nan,
            1e-45,
            -1e-45,
            1.17549435e-38,
            3.4028235e38,
            -3.4028235e38,
            0.25,
            1.5,
            -1.5,
            1e10,
        ],
        dtype=np.float32,
    )
    a, b = np.meshgrid(sp, sp, indexing="ij")
    pairs = np.concatenate(
        [bits, near1, wide, edge, np.stack([a.ravel(), b.ravel()], axis=1)]
    ).astype(np.float32)
    x = np.ascontiguousarray(pairs[:, 0])
    y = np.ascontiguousarray(pairs[:, 1])
    err = np.empty(x.size)
    got = np.empty(x.size, np.float32)
    fptr = ctypes.POINTER(ctypes.c_float)
    lib.pow_errors(
        x.ctypes.data_as(fptr),
        y.ctypes.data_as(fptr),
        ctypes.c_long(x.size),
        err.ctypes.data_as(ctypes.POINTER(ctypes.c_double)),
        got.ctypes.data_as(fptr),
    )
    i = int(np.argmax(np.where(np.isnan(err), np.inf, err)))
    return float(err[i]), (float(x[i]), float(y[i])), int(np.sum(~(err <= 1.0)))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ops", default=",".join([*OPS, "pow"]))
    ap.add_argument("--stride", type=int, default=1, help="every N-th bit pattern (1: all)")
    ap.add_argument("--pow-samples", type=int, default=1 << 24)
    args = ap.parse_args()
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        lib = build(Path(tmp))
        lib.pow_errors.restype = None
        print(f"{'op':<11} {'inputs':>12} {'max ulp':>9} {'over 1 ulp':>10}  worst input")
        for op in args.ops.split(","):
            t0 = time.perf_counter()
            if op == "pow":
                err, (x, y), over = pow_sample(lib, args.pow_samples)
                where, count = f"pow({x!r}, {y!r})", f"{args.pow_samples}+"
            else:
                err, u, over = scan(lib, op, args.stride)
                x = ctypes.c_uint32(u)
                xf = ctypes.cast(ctypes.pointer(x), ctypes.POINTER(ctypes.c_float)).contents.value
                where, count = f"{xf!r} (0x{u:08x})", str(-(-(1 << 32) // args.stride))
            secs = time.perf_counter() - t0
            print(f"{op:<11} {count:>12} {err:>9.4f} {over:>10}  {where}  [{secs:.0f} s]")
            sys.stdout.flush()
            failed |= over > 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
