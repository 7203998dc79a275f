"""CUDA C: the GPU renderer's dialect for NVIDIA GPUs (compiled by nvcc)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import ClassVar

from arrayjit_backends.gpu_syntax import GpuSyntax
from arrayjit_ir import ops
from arrayjit_tnode import CompileError, Prec

DEFAULT_ARCH = "sm_80"
NVCC_FLAGS = ("-O3", "--fmad=false")
"""``--fmad=false``: no contraction of ``a*b + c`` into one fma (each operation rounds, as the
IR defines); the explicit ``fma`` op and multiply-accumulate steps still call ``fma``."""


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
    index_type = "long long"
    helper_qualifier: ClassVar[str] = "__device__ inline"
    storage_types: ClassVar[dict[Prec, str]] = {**GpuSyntax.storage_types, Prec.half: "__half"}

    def buffer_params(self, name: str, ctype: str) -> list[str]:
        # The merge buffer may alias a node's own buffer (Streaming mode): not restrict.
        qualifier = "" if name == "merge_buffer" else " __restrict__"
        return [f"{ctype}*{qualifier} {name}"]

    def buffer_prologue(self, name: str, ctype: str) -> str:
        return ""

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
        minmax = ops.c_minmax("__device__ inline")
        return (
            "#include <cstdint>\n#include <cuda_fp16.h>\n"
            + helpers
            + minmax
            + self.int_conversions()
        )


def nvcc_path() -> str | None:
    """``$NVCC``, else ``nvcc`` on PATH, else the usual install location."""
    for candidate in (os.environ.get("NVCC"), shutil.which("nvcc"), "/usr/local/cuda/bin/nvcc"):
        if candidate and Path(candidate).exists():
            return candidate
    return None


def nvcc_version(nvcc: str) -> str:
    """The last line of ``nvcc --version`` (its build), for cache keys."""
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=False)
    return out.stdout.strip().splitlines()[-1] if out.stdout.strip() else "unknown"


def compile_to(
    source: str, nvcc: str, arch: str = DEFAULT_ARCH, target: str = "ptx", name: str = "routine"
) -> bytes:
    """Compile CUDA source with ``nvcc --<target>`` (``ptx`` or ``cubin``).

    Raises:
        CompileError: nvcc failed; with its output and the path of the kept source.
    """
    folder = Path(tempfile.mkdtemp(prefix="arrayjit-cuda-"))
    src = folder / f"{name}.cu"
    src.write_text(source)
    out = folder / f"{name}.{target}"
    proc = subprocess.run(
        [nvcc, f"--{target}", f"-arch={arch}", *NVCC_FLAGS, "-o", str(out), str(src)],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise CompileError(
            f"nvcc failed to compile routine {name}", proc.stdout + proc.stderr, str(src)
        )
    data = out.read_bytes()
    shutil.rmtree(folder, ignore_errors=True)
    return data


__all__ = ["DEFAULT_ARCH", "NVCC_FLAGS", "CudaSyntax", "compile_to", "nvcc_path", "nvcc_version"]
