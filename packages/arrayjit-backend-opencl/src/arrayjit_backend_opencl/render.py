"""OpenCL C: the GPU renderer's dialect for OpenCL devices."""

from __future__ import annotations

from typing import ClassVar

from arrayjit_backends.gpu_syntax import GpuSyntax
from arrayjit_tnode import Prec

_MATH = (
    "exp",
    "log",
    "exp2",
    "log2",
    "sin",
    "cos",
    "sqrt",
    "tanh",
    "trunc",
    "fmax",
    "fmin",
    "pow",
    "fmod",
    "fma",
    "fabs",
)


class OpenclSyntax(GpuSyntax):
    """OpenCL C 1.2: C type names through typedefs, half only with ``cl_khr_fp16``, double only
    with ``cl_khr_fp64``, bfloat16 and fp8 stored as bits and computed in float."""

    storage_types: ClassVar[dict[Prec, str]] = {**GpuSyntax.storage_types, Prec.half: "half"}

    def __init__(self, group_size: int = 256, fp64: bool = True, fp16: bool = False) -> None:
        super().__init__(group_size, fp64)
        self.fp16 = fp16

    @property
    def prelude(self) -> str:  # type: ignore[override]
        lines = []
        if self.fp64:
            lines.append("#pragma OPENCL EXTENSION cl_khr_fp64 : enable")
        if self.fp16:
            lines.append("#pragma OPENCL EXTENSION cl_khr_fp16 : enable")
        lines += [
            "typedef uchar uint8_t; typedef ushort uint16_t; typedef int int32_t;",
            "typedef uint uint32_t; typedef long int64_t; typedef ulong uint64_t;",
        ]
        # The renderer writes C's float functions (expf...); OpenCL C overloads the plain names.
        lines += [f"#define {f}f(...) {f}(__VA_ARGS__)" for f in _MATH]
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
        return "\n".join(lines) + "\n"


__all__ = ["OpenclSyntax"]
