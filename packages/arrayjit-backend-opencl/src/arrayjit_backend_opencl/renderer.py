"""OpenCL C: the GPU renderer's dialect for OpenCL devices (:class:`OpenclSyntax`, a
:class:`~arrayjit_backends.gpu.dialect.GpuSyntax`; programs are rendered by
:func:`~arrayjit_backends.gpu.program.render_program`)."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace
from typing import ClassVar

from arrayjit_backends.codegen import math_lib
from arrayjit_backends.codegen.c_syntax import Out
from arrayjit_backends.codegen.kernel_plan import ScalarReduction, has_loops
from arrayjit_backends.gpu.dialect import GpuSyntax
from arrayjit_ir import ops
from arrayjit_tnode import Prec

INLINE = "inline __attribute__((always_inline))"
"""The qualifier of every helper function the programs define. PoCL vectorizes a kernel across
the work items of a group only where no call is left in its body, and its inliner left the
math library's larger helpers as calls: an elementwise tanh of 2^22 floats took 64 ms as a
call, 4.9 ms inlined (exp, whose helper is smaller, was inlined and vectorized either way)."""

_MATH = (
    "exp",
    "log",
    "exp2",
    "log2",
    "sin",
    "cos",
    "sqrt",
    "trunc",
    "pow",
    "fmod",
    "fma",
    "fabs",
    "frexp",
)

# PoCL's rint is a scalar library call that keeps a kernel from vectorizing across work items:
# an elementwise exp of 2^22 floats (whose range reduction rounds with rint) took 60 ms, 5.7 ms
# with this (one process, this 2-core EPYC, PoCL 3.1). Adding and subtracting 2^23 (2^52)
# rounds to the nearest integer, ties to even, in the default rounding mode for magnitudes
# below it; larger ones, infinities and NaN are integral already, and copysign keeps -0.0 and
# the sign of results that round to zero: the bits of rint for every input. (PoCL's headers
# define rint as a macro: undefined first, or the build warns.)
_RINT_FLOAT = f"""{INLINE} float aj_rintf(float x) {{
  const float a = fabs(x);
  return a < 0x1p23f ? copysign((a + 0x1p23f) - 0x1p23f, x) : x;
}}
#define rintf(...) aj_rintf(__VA_ARGS__)"""
_RINT_DOUBLE = f"""{INLINE} double aj_rint(double x) {{
  const double a = fabs(x);
  return a < 0x1p52 ? copysign((a + 0x1p52) - 0x1p52, x) : x;
}}
#undef rint
#define rint(...) aj_rint(__VA_ARGS__)"""


# PoCL's float tanh gives 1 - 2**-24 (not 1) at +-inf and from about 9 on; past 9.1 the
# correctly rounded float result is +-1, so it is given directly (NaN still reaches tanh). Used
# only where the math library's aj_tanhf (float tanh) is not: integer tanh computed in float, on
# a device without fp64.
_TANHF = (
    f"{INLINE} float aj_cl_tanhf(float x) "
    "{ return fabs(x) > 9.1f ? copysign(1.0f, x) : tanh(x); }\n"
    "#define tanhf(...) aj_cl_tanhf(__VA_ARGS__)"
)

# Core OpenCL C converts half in memory to and from float (vload_half, vstore_half_rte), also
# through private pointers, so half needs no cl_khr_fp16: it is stored as its bits.
_HALF = f"""
{INLINE} float aj_f16_to_f32(ushort b) {{ return vload_half(0, (const half*)&b); }}
{INLINE} ushort aj_f32_to_f16(float f) {{ ushort b; vstore_half_rte(f, 0, (half*)&b); return b; }}
"""


UNROLL_STEPS = 16
"""On CPU devices, a work item's reduction of at most this many steps (a pooling window) is
written out step by step (:meth:`OpenclSyntax.register_reduction`)."""


class OpenclSyntax(GpuSyntax):
    """OpenCL C 1.2: C type names through typedefs; double only with ``cl_khr_fp64``; half,
    bfloat16 and fp8 stored as bits and computed in float (half through the core
    ``vload_half``/``vstore_half_rte``, so every device has it, ``cl_khr_fp16`` or not)."""

    kernel_prefix = "__kernel void"
    buffer_prefix = "__global "
    global_qualifier = "__global"
    local_qualifier = "__local"
    restrict = "restrict"
    global_id = "get_global_id(0)"
    local_id = "get_local_id(0)"
    group_id = "get_group_id(0)"
    barrier = "barrier(CLK_LOCAL_MEM_FENCE);"
    global_barrier = "barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);"
    index_type = "long"
    helper_qualifier: ClassVar[str] = INLINE
    storage_types: ClassVar[dict[Prec, str]] = {**GpuSyntax.storage_types, Prec.half: "ushort"}
    math_dialect: ClassVar[math_lib.CDialect] = replace(math_lib.OPENCL_DIALECT, qualifier=INLINE)
    exact_launch: ClassVar[bool] = True
    """Kernels without a group size are launched with no local size (``OpenclDevices.
    launch_shape``): exactly their global size of work items, so their bodies have no bounds
    check (with one, PoCL does not vectorize the work-group loop: a fused 2^24 elementwise
    kernel took 2x the time)."""
    vector_cells: ClassVar[bool] = True
    """A tiled matmul keeps a work item's row of cells in a float4 (double4) and steps it with
    one vector ``fma`` (:mod:`arrayjit_backends.gpu.matmul`): PoCL runs a scalar ``fma`` as a
    library call, 4.5x slower than a multiply and an add."""

    def register_reduction(self, red: ScalarReduction, out: Out, indent: int) -> None:
        """A work item's reduction into its cell; on a CPU device (one lane per cell) one of at
        most :data:`UNROLL_STEPS` steps is written out, the loops' indices as constants, in the
        loops' order (the same steps): PoCL vectorizes a kernel across work items only where
        its body has no loop (a 2x2 max pooling ran as scalar code)."""
        steps = math.prod(lp.extent for lp in red.loops)
        if self.cell_lanes != 1 or not 0 < steps <= UNROLL_STEPS or has_loops(red.term):
            super().register_reduction(red, out, indent)
            return
        tn, idx = red.target.tn, red.target.indices
        ct = self.compute_type(tn.prec)
        acc = self.temp("acc")
        out.add(indent, "{")
        out.add(indent + 1, f"{ct} {acc} = (({ct}){self.load(tn.prec, self.cell(tn, idx))});")
        ranges = [range(lp.from_, lp.to_inclusive + 1) for lp in red.loops]
        saved = {lp.index: self._syms.get(lp.index) for lp in red.loops}
        for values in itertools.product(*ranges):
            for lp, v in zip(red.loops, values, strict=True):
                self._syms[lp.index] = f"({v})"
            pre: list[str] = []
            step = self.reduction_step(red, acc, pre, indent + 1)
            self._emit(out, indent + 1, pre, f"{acc} = {step};")
        for s, name in saved.items():
            if name is None:
                del self._syms[s]
            else:
                self._syms[s] = name
        out.add(indent + 1, self.assign(tn, idx, self.store(tn.prec, acc)))
        out.add(indent, "}")

    def local_array(self, ct: str, name: str, dims: tuple[int, ...]) -> str:
        shape = "".join(f"[{d}]" for d in dims)
        return f"{self.local_qualifier} {ct} {name}{shape} __attribute__((aligned(16)));"

    def local_vector(self, ct: str, width: int, lvalue: str) -> str:
        return f"vload{width}(0, &{lvalue})"

    def load(self, prec: Prec, text: str) -> str:
        if prec is Prec.half:
            return f"aj_f16_to_f32({text})"
        return super().load(prec, text)

    def store(self, prec: Prec, text: str) -> str:
        if prec is Prec.half:
            return f"aj_f32_to_f16({text})"
        return super().store(prec, text)

    @property
    def prelude(self) -> str:  # type: ignore[override]
        # No contraction of a*b + c into one fma: each operation rounds (the IR's rule).
        lines = ["#pragma OPENCL FP_CONTRACT OFF"]
        if self.fp64:
            lines.append("#pragma OPENCL EXTENSION cl_khr_fp64 : enable")
        lines += [
            "typedef uchar uint8_t; typedef ushort uint16_t; typedef int int32_t;",
            "typedef uint uint32_t; typedef long int64_t; typedef ulong uint64_t;",
        ]
        # The renderer writes C's float functions (expf...); OpenCL C overloads the plain names.
        lines += [f"#define {f}f(...) {f}(__VA_ARGS__)" for f in _MATH]
        lines.append(_RINT_FLOAT)
        if self.fp64:
            lines.append(_RINT_DOUBLE)
        lines.append(_TANHF)
        lines.append(
            self.SMALL_FLOATS.format(
                q=INLINE,
                flt="as_float",
                bits="as_uint",
                ldexp="ldexp",
                fabs="fabs",
                frexp="frexp",
                rint="rintf",
            )
        )
        types = ("float", "double") if self.fp64 else ("float",)
        lines.append(ops.c_minmax(INLINE, types) + ops.c_int_math(INLINE, types))
        return "\n".join(lines) + _HALF + self.int_conversions()


__all__ = ["OpenclSyntax"]
