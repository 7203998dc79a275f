"""The C text every C-like kernel starts with (C, OpenCL C and CUDA C dialects add their own):
conversions between the small float types and float, Threefry-4x32 for ``uint4x32``, the
NaN-propagating ``max``/``min``, exact integer math, the OpenMP reductions that keep the
serial rules (NaN, ``-0.0``), and the saturating float-to-integer conversions
(:func:`float_to_int_helpers`)."""

from __future__ import annotations

from arrayjit_ir import ops

INT_CTYPES: dict[str, tuple[int, bool]] = {
    "uint8_t": (8, False),
    "uint16_t": (16, False),
    "int32_t": (32, True),
    "uint32_t": (32, False),
    "int64_t": (64, True),
    "uint64_t": (64, False),
}
"""The integer compute types (the renderers' names for them): width and signedness."""


def int_literal(v: int, ctype: str) -> str:
    """The C literal of the integer ``v`` (in ``ctype``'s range) as a ``ctype``."""
    if v == -(1 << 63):
        return f"(({ctype})(-0x7FFFFFFFFFFFFFFFLL - 1))"
    return f"(({ctype}){v}{'ULL' if v >= 1 << 63 else 'LL'})"


def float_to_int_helpers(qualifier: str, sources: tuple[str, ...] = ("float", "double")) -> str:
    """C functions ``aj_<src>_to_<dst>(x)`` converting the float type ``src`` to each integer
    compute type by the saturating rule of :func:`arrayjit_ir.ops.float_to_int`. The comparisons
    use the range's bounds as powers of two, exact in every float type, so the final cast only
    sees values C defines it on (a truncation toward zero that fits)."""
    out = []
    for src in sources:
        f = "f" if src == "float" else ""
        for dst, (bits, signed) in INT_CTYPES.items():
            if signed:
                lo, hi = f"-0x1p{bits - 1}{f}", f"0x1p{bits - 1}{f}"
                low = int_literal(-(1 << (bits - 1)), dst)
                high = int_literal((1 << (bits - 1)) - 1, dst)
                below = f"x <= {lo} ? {low}"
            else:
                hi, high = f"0x1p{bits}{f}", int_literal((1 << bits) - 1, dst)
                below = f"x <= -1.0{f} ? ({dst})0"
            out.append(
                f"{qualifier} {dst} aj_{src}_to_{dst}({src} x) {{ return x != x ? ({dst})0 : "
                f"{below} : x >= {hi} ? {high} : ({dst})x; }}"
            )
    return "\n".join(out) + "\n"


C_PRELUDE = (
    "#include <stdint.h>\n#include <math.h>\n"
    "static inline float aj_bf16_to_f32(uint16_t b) { union { uint32_t u; float f; } v; "
    "v.u = (uint32_t)b << 16; return v.f; }\n"
    "static inline uint16_t aj_f32_to_bf16(float f) { union { uint32_t u; float f; } v; "
    "v.f = f; if (f != f) return (uint16_t)((v.u >> 16) | 0x40); "
    "return (uint16_t)((v.u + 0x7FFFu + ((v.u >> 16) & 1u)) >> 16); }\n"
    "static inline float aj_fp8_to_f32(uint8_t b) { union { uint16_t u; _Float16 h; } v; "
    "v.u = (uint16_t)b << 8; return (float)v.h; }\n"
    "static inline uint8_t aj_f32_to_fp8(float f) {\n"
    "  if (f != f) return 0x7E;\n"
    "  uint8_t sign = signbit(f) ? 0x80 : 0; double m = fabs((double)f);\n"
    "  if (m == 0) return sign; int e; frexp(m, &e); e -= 1; if (e < -14) e = -14;\n"
    "  double q = ldexp(1.0, e - 2); double r = nearbyint(m / q) * q;\n"
    "  union { uint16_t u; _Float16 h; } v; v.h = r >= 65536.0 ? (_Float16)INFINITY :"
    " (_Float16)r;\n  return sign | (uint8_t)(v.u >> 8);\n}\n"
    # uint4x32: lanes, conversions, and Threefry-4x32 with 20 rounds (arrayjit_ir.ops).
    "typedef struct { uint32_t v[4]; } aj_u4;\n"
    "static inline aj_u4 aj_u4_of(uint64_t w) "
    "{ aj_u4 r = {{(uint32_t)w, (uint32_t)(w >> 32), 0, 0}}; return r; }\n"
    "static inline uint64_t aj_u4_wide(aj_u4 x) "
    "{ return (uint64_t)x.v[0] | ((uint64_t)x.v[1] << 32); }\n"
    "static inline int aj_u4_any(aj_u4 x) "
    "{ return (x.v[0] | x.v[1] | x.v[2] | x.v[3]) != 0; }\n"
    "static inline aj_u4 aj_threefry4x32(aj_u4 key, aj_u4 ctr) {\n"
    "  static const int rot[8][2] = "
    "{{10, 26}, {11, 21}, {13, 27}, {23, 5}, {6, 20}, {17, 11}, {25, 10}, {18, 20}};\n"
    "  uint32_t ks[5], x[4];\n"
    "  ks[4] = 0x1BD11BDAu;\n"
    "  for (int i = 0; i < 4; ++i) { ks[i] = key.v[i]; ks[4] ^= key.v[i]; "
    "x[i] = ctr.v[i] + key.v[i]; }\n"
    "  for (int r = 0; r < 20; ++r) {\n"
    "    int a = r % 2 ? 3 : 1, b = r % 2 ? 1 : 3;\n"
    "    int ra = rot[r % 8][0], rb = rot[r % 8][1];\n"
    "    x[0] += x[a]; x[a] = ((x[a] << ra) | (x[a] >> (32 - ra))) ^ x[0];\n"
    "    x[2] += x[b]; x[b] = ((x[b] << rb) | (x[b] >> (32 - rb))) ^ x[2];\n"
    "    if (r % 4 == 3) { int j = r / 4 + 1; "
    "for (int i = 0; i < 4; ++i) x[i] += ks[(j + i) % 5]; x[3] += (uint32_t)j; }\n"
    "  }\n"
    "  aj_u4 out = {{x[0], x[1], x[2], x[3]}};\n  return out;\n}\n"
    + ops.c_minmax("static inline")
    + ops.c_int_math("static inline")
    # OpenMP's own max/min reductions combine partial results with C's rule, which drops
    # NaN: reductions of floats name these instead (see omp_reduction_op).
    + "".join(
        f"#pragma omp declare reduction(aj_{op} : {t} : omp_out = aj_f{op}{f}(omp_out, "
        f"omp_in)) initializer(omp_priv = {'-' if op == 'max' else ''}INFINITY)\n"
        for op in ("max", "min")
        for t, f in (("float", "f"), ("double", ""))
    )
    # OpenMP's + starts each private copy at +0.0, so a sum of -0.0 terms into a -0.0 cell
    # came out +0.0 (the serial sum keeps -0.0): float sums start their copies at -0.0,
    # the exact neutral element of float addition.
    + "".join(
        f"#pragma omp declare reduction(aj_add : {t} : omp_out = omp_out + omp_in) "
        f"initializer(omp_priv = -0.0{f})\n"
        for t, f in (("float", "f"), ("double", ""))
    )
    + float_to_int_helpers("static inline")
)
"""The prelude of :class:`~arrayjit_backends.codegen.c_syntax.CSyntax` (its ``prelude``)."""
