"""The helper functions of generated LLVM modules, as IR text.

A module defines a helper only when its code calls it (see ``LlvmGen._helper``), always inlined
(attribute group ``#1``): the conversions between float and the stored bits of bfloat16, half
and fp8 (round to nearest-even, as :mod:`arrayjit_tnode` converts), threefry-4x32, and the
math library's float32 transcendentals (:mod:`arrayjit_backends.codegen.math_lib`).
:data:`HELPER_INTRINSICS` lists the intrinsic declarations a helper needs.
"""

from __future__ import annotations

from arrayjit_backends.codegen import math_lib
from arrayjit_ir import ops

# ---- conversion helpers, defined in the module when used (always inlined) ----

HELPERS: dict[str, str] = {
    "aj_bf16_to_f32": """
define internal float @aj_bf16_to_f32(i16 %b) #1 {
  %w = zext i16 %b to i32
  %s = shl i32 %w, 16
  %f = bitcast i32 %s to float
  ret float %f
}""",
    "aj_f32_to_bf16": """
define internal i16 @aj_f32_to_bf16(float %f) #1 {
  %u = bitcast float %f to i32
  %h = lshr i32 %u, 16
  %lsb = and i32 %h, 1
  %a = add i32 %u, 32767
  %b = add i32 %a, %lsb
  %r = lshr i32 %b, 16
  %q = or i32 %h, 64
  %nan = fcmp uno float %f, %f
  %s = select i1 %nan, i32 %q, i32 %r
  %o = trunc i32 %s to i16
  ret i16 %o
}""",
    # The magnitude bits shifted into a float's exponent and mantissa, scaled by 2^(127-bias):
    # exact for normal and subnormal values; infinities and NaNs are rebuilt from the bits.
    "aj_half_to_f32": """
define internal float @aj_half_to_f32(i16 %h) #1 {
  %w = zext i16 %h to i32
  %x = and i32 %w, 32767
  %m = shl i32 %x, 13
  %mf = bitcast i32 %m to float
  %v = fmul float %mf, 0x46F0000000000000
  %vb = bitcast float %v to i32
  %sp = or i32 %m, 2139095040
  %big = icmp uge i32 %x, 31744
  %mag = select i1 %big, i32 %sp, i32 %vb
  %sg = and i32 %w, 32768
  %s = shl i32 %sg, 16
  %r = or i32 %mag, %s
  %f = bitcast i32 %r to float
  ret float %f
}""",
    # Round to nearest even: subnormal results by adding 0.5 (the float adder rounds at the
    # half's subnormal quantum), normal ones by rebiasing the exponent and rounding the bits.
    "aj_f32_to_half": """
define internal i16 @aj_f32_to_half(float %f) #1 {
  %u = bitcast float %f to i32
  %hs = lshr i32 %u, 16
  %sign = and i32 %hs, 32768
  %a = and i32 %u, 2147483647
  %isnan = icmp ugt i32 %a, 2139095040
  %inf = select i1 %isnan, i32 32256, i32 31744
  %af = bitcast i32 %a to float
  %d = fadd float %af, 0x3FE0000000000000
  %db = bitcast float %d to i32
  %sub = sub i32 %db, 1056964608
  %odd0 = lshr i32 %a, 13
  %odd = and i32 %odd0, 1
  %n0 = add i32 %a, -939520001
  %n1 = add i32 %n0, %odd
  %norm = lshr i32 %n1, 13
  %issub = icmp ult i32 %a, 947912704
  %fin = select i1 %issub, i32 %sub, i32 %norm
  %isbig = icmp uge i32 %a, 1199570944
  %mag = select i1 %isbig, i32 %inf, i32 %fin
  %r = or i32 %mag, %sign
  %o = trunc i32 %r to i16
  ret i16 %o
}""",
    # E5M2, round to nearest even: round the magnitude m to a multiple of 2^(e-2), where e is
    # its exponent (at least -14, the subnormal range), then encode; 65536 and up is infinity.
    "aj_f32_to_fp8": """
define internal i8 @aj_f32_to_fp8(float %f) #1 {
  %u = bitcast float %f to i32
  %s32 = lshr i32 %u, 24
  %s8 = trunc i32 %s32 to i8
  %sign = and i8 %s8, -128
  %m = call float @llvm.fabs.f32(float %f)
  %mu = bitcast float %m to i32
  %ef = lshr i32 %mu, 23
  %e0 = sub i32 %ef, 127
  %low = icmp slt i32 %e0, -14
  %e = select i1 %low, i32 -14, i32 %e0
  %sb = sub i32 129, %e
  %sbits = shl i32 %sb, 23
  %scale = bitcast i32 %sbits to float
  %ib = add i32 %e, 125
  %ibits = shl i32 %ib, 23
  %inv = bitcast i32 %ibits to float
  %sc = fmul float %m, %scale
  %ri = call float @llvm.roundeven.f32(float %sc)
  %r = fmul float %ri, %inv
  %rb = bitcast float %r to i32
  %hi = lshr i32 %rb, 21
  %norm = sub i32 %hi, 448
  %small = fmul float %r, 0x40F0000000000000
  %subi = fptoui float %small to i32
  %isnorm = fcmp oge float %r, 0x3F10000000000000
  %c0 = select i1 %isnorm, i32 %norm, i32 %subi
  %big = fcmp oge float %r, 0x40F0000000000000
  %c1 = select i1 %big, i32 124, i32 %c0
  %c8 = trunc i32 %c1 to i8
  %res = or i8 %c8, %sign
  %nan = fcmp uno float %f, %f
  %o = select i1 %nan, i8 126, i8 %res
  ret i8 %o
}""",
}

# Threefry-4x32 (Salmon et al. 2011, the Random123 constants): rotation pairs by round mod 8 and
# the key-schedule parity.
_THREEFRY_ROTATIONS = ((10, 26), (11, 21), (13, 27), (23, 5), (6, 20), (17, 11), (25, 10), (18, 20))
_THREEFRY_PARITY = 0x1BD11BDA


def _threefry_helper() -> str:
    """Threefry-4x32 with 20 rounds, as :func:`arrayjit_ir.ops.threefry4x32` computes it."""
    lines = [
        "define internal <4 x i32> @aj_threefry4x32(<4 x i32> %key, <4 x i32> %ctr) #1 {",
    ]
    n = 0

    def op(text: str) -> str:
        nonlocal n
        n += 1
        lines.append(f"  %v{n} = {text}")
        return f"%v{n}"

    ks = [op(f"extractelement <4 x i32> %key, i32 {i}") for i in range(4)]
    parity = op(f"xor i32 {ks[0]}, {ks[1]}")
    parity = op(f"xor i32 {parity}, {ks[2]}")
    parity = op(f"xor i32 {parity}, {ks[3]}")
    ks.append(op(f"xor i32 {parity}, {_THREEFRY_PARITY}"))
    x = [op(f"extractelement <4 x i32> %ctr, i32 {i}") for i in range(4)]
    x = [op(f"add i32 {x[i]}, {ks[i]}") for i in range(4)]

    def rotl(v: str, r: int) -> str:
        return op(f"call i32 @llvm.fshl.i32(i32 {v}, i32 {v}, i32 {r})")

    for rnd in range(ops.THREEFRY_ROUNDS):
        r0, r1 = _THREEFRY_ROTATIONS[rnd % 8]
        a, b = (1, 3) if rnd % 2 == 0 else (3, 1)
        x[0] = op(f"add i32 {x[0]}, {x[a]}")
        x[a] = op(f"xor i32 {rotl(x[a], r0)}, {x[0]}")
        x[2] = op(f"add i32 {x[2]}, {x[b]}")
        x[b] = op(f"xor i32 {rotl(x[b], r1)}, {x[2]}")
        if rnd % 4 == 3:
            inject = rnd // 4 + 1
            x = [op(f"add i32 {x[i]}, {ks[(inject + i) % 5]}") for i in range(4)]
            x[3] = op(f"add i32 {x[3]}, {inject}")
    vec = "zeroinitializer"
    for i in range(4):
        vec = op(f"insertelement <4 x i32> {vec}, i32 {x[i]}, i32 {i}")
    lines += [f"  ret <4 x i32> {vec}", "}"]
    return "\n".join(lines)


HELPERS["aj_threefry4x32"] = _threefry_helper()

HELPER_INTRINSICS: dict[str, tuple[str, ...]] = {
    "aj_threefry4x32": ("declare i32 @llvm.fshl.i32(i32, i32, i32)",),
    "aj_f32_to_fp8": (
        "declare float @llvm.fabs.f32(float)",
        "declare float @llvm.roundeven.f32(float)",
    ),
}

# The math library's float32 transcendentals (arrayjit_backends.codegen.math_lib), printed as
# LLVM IR from the same steps the C renderers print.
for _name, _fn in math_lib.FUNCTIONS.items():
    HELPERS[_name], HELPER_INTRINSICS[_name] = math_lib.llvm_function(_fn)
