"""OpenCL C: the GPU renderer's dialect for OpenCL devices (:class:`OpenclSyntax`, a
:class:`~arrayjit_backends.gpu.dialect.GpuSyntax`; programs are rendered by
:func:`~arrayjit_backends.gpu.program.render_program`)."""

from __future__ import annotations

from typing import ClassVar

from arrayjit_backends.codegen import math_lib
from arrayjit_backends.gpu.dialect import GpuSyntax
from arrayjit_ir import ops
from arrayjit_tnode import Prec

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
    "rint",
    "frexp",
)


# PoCL's float tanh gives 1 - 2**-24 (not 1) at +-inf and from about 9 on; past 9.1 the
# correctly rounded float result is +-1, so it is given directly (NaN still reaches tanh). Used
# only where the math library's aj_tanhf (float tanh) is not: integer tanh computed in float, on
# a device without fp64.
_TANHF = (
    "inline float aj_cl_tanhf(float x) { return fabs(x) > 9.1f ? copysign(1.0f, x) : tanh(x); }\n"
    "#define tanhf(...) aj_cl_tanhf(__VA_ARGS__)"
)

# Core OpenCL C converts half in memory to and from float (vload_half, vstore_half_rte), also
# through private pointers, so half needs no cl_khr_fp16: it is stored as its bits.
_HALF = """
inline float aj_f16_to_f32(ushort b) { return vload_half(0, (const half*)&b); }
inline ushort aj_f32_to_f16(float f) { ushort b; vstore_half_rte(f, 0, (half*)&b); return b; }
"""


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
    helper_qualifier: ClassVar[str] = "inline"
    storage_types: ClassVar[dict[Prec, str]] = {**GpuSyntax.storage_types, Prec.half: "ushort"}
    math_dialect: ClassVar[math_lib.CDialect] = math_lib.OPENCL_DIALECT
    exact_launch: ClassVar[bool] = True
    """Kernels without a group size are launched with no local size (``OpenclDevices.
    launch_shape``): exactly their global size of work items, so their bodies have no bounds
    check (with one, PoCL does not vectorize the work-group loop: a fused 2^24 elementwise
    kernel took 2x the time)."""
    vector_cells: ClassVar[bool] = True
    """A tiled matmul keeps a work item's row of cells in a float4 (double4) and steps it with
    one vector ``fma`` (:mod:`arrayjit_backends.gpu.matmul`): PoCL runs a scalar ``fma`` as a
    library call, 4.5x slower than a multiply and an add."""

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
        lines.append(_TANHF)
        lines.append(
            self.SMALL_FLOATS.format(
                q="inline",
                flt="as_float",
                bits="as_uint",
                ldexp="ldexp",
                fabs="fabs",
                frexp="frexp",
                rint="rint",
            )
        )
        types = ("float", "double") if self.fp64 else ("float",)
        lines.append(ops.c_minmax("inline", types) + ops.c_int_math("inline", types))
        return "\n".join(lines) + _HALF + self.int_conversions()


__all__ = ["OpenclSyntax"]
