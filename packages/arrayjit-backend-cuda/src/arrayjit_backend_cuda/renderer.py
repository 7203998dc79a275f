"""CUDA C: the GPU renderer's dialect for NVIDIA GPUs (compiled by nvcc): :class:`CudaSyntax`, a
:class:`~arrayjit_backends.gpu.dialect.GpuSyntax`; programs are rendered by
:func:`~arrayjit_backends.gpu.program.render_program`."""

from __future__ import annotations

from typing import ClassVar

from arrayjit_backends.codegen import math_lib
from arrayjit_backends.gpu.dialect import GpuSyntax
from arrayjit_ir import ops
from arrayjit_tnode import Prec


class CudaSyntax(GpuSyntax):
    """CUDA C++: buffers are device pointers (the runtime adds each buffer's offset), half is
    ``__half`` from ``cuda_fp16.h``, bfloat16 and fp8 stored as bits and computed in float."""

    kernel_prefix = 'extern "C" __global__ void'
    buffer_prefix = ""
    global_qualifier = ""
    local_qualifier = "__shared__"
    restrict = "__restrict__"
    global_id = "(blockIdx.x * (long long)blockDim.x + threadIdx.x)"
    local_id = "threadIdx.x"
    group_id = "blockIdx.x"
    barrier = "__syncthreads();"
    global_barrier = "__syncthreads();"  # orders the block's global stores too
    index_type = "long long"
    helper_qualifier: ClassVar[str] = "__device__ inline"
    math_dialect: ClassVar[math_lib.CDialect] = math_lib.CUDA_DIALECT
    storage_types: ClassVar[dict[Prec, str]] = {**GpuSyntax.storage_types, Prec.half: "__half"}

    def buffer_params(self, name: str, ctype: str) -> list[str]:
        # The merge buffer may alias a node's own buffer (Streaming mode): not restrict.
        qualifier = "" if name == "merge_buffer" else " __restrict__"
        return [f"{ctype}*{qualifier} {name}"]

    def buffer_prologue(self, name: str, ctype: str) -> str:
        return ""

    def local_array(self, ct: str, name: str, dims: tuple[int, ...]) -> str:
        shape = "".join(f"[{d}]" for d in dims)
        return f"__shared__ __align__(16) {ct} {name}{shape};"

    def local_vector(self, ct: str, width: int, lvalue: str) -> str:
        return f"(*(const {ct}{width}*)&{lvalue})"  # aligned: see local_array

    def load(self, prec: Prec, text: str) -> str:
        if prec is Prec.half:
            return f"__half2float({text})"
        return super().load(prec, text)

    def store(self, prec: Prec, text: str) -> str:
        if prec is Prec.half:
            return f"__float2half_rn({text})"
        return super().store(prec, text)

    @property
    def prelude(self) -> str:  # type: ignore[override]
        helpers = self.SMALL_FLOATS.format(
            q="__device__ inline",
            flt="__uint_as_float",
            bits="__float_as_uint",
            ldexp="ldexpf",
            fabs="fabsf",
            frexp="frexpf",
            rint="rintf",
        )
        minmax = ops.c_minmax("__device__ inline") + ops.c_int_math("__device__ inline")
        return (
            "#include <cstdint>\n#include <cuda_fp16.h>\n"
            + helpers
            + minmax
            + self.int_conversions()
        )


__all__ = ["CudaSyntax"]
