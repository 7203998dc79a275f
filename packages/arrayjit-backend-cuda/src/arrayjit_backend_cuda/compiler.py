"""The CUDA backend's compiler: the ``nvcc`` driver (CUDA C to PTX or a cubin).

It needs nvcc alone (no pycuda, driver or GPU), so generated CUDA code can be compiled, and
checked, on any machine with the toolkit; :mod:`arrayjit_backend_cuda.device` calls it through
the shared compile cache.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from arrayjit_tnode import CompileError

DEFAULT_ARCH = "sm_80"
NVCC_FLAGS = ("-O3", "--fmad=false")
"""``--fmad=false``: no contraction of ``a*b + c`` into one fma (each operation rounds, as the
IR defines); the explicit ``fma`` op and multiply-accumulate steps still call ``fma``."""


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


__all__ = ["DEFAULT_ARCH", "NVCC_FLAGS", "compile_to", "nvcc_path", "nvcc_version"]
