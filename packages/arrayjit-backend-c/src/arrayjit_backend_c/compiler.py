"""Finding and running the system C compiler."""

from __future__ import annotations

import functools
import os
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

from arrayjit_tnode import CompileError

FLAGS = ("-O3", "-march=native", "-fPIC", "-shared", "-fwrapv", "-fno-math-errno", "-std=gnu11")


@functools.cache
def find_compiler() -> str | None:
    """The compiler command: ``$CC``, else ``cc``, ``gcc`` or ``clang`` on PATH; ``None`` if
    there is none.

    ``$CC`` may carry arguments (``CC="gcc -fno-common"``); it is split as a POSIX shell
    would, as make and setuptools do, and its program looked up on PATH. The result is one
    string in shell syntax: :func:`argv` splits it again.
    """
    env = os.environ.get("CC", "").strip()
    if env:
        try:
            parts = shlex.split(env)
        except ValueError:  # unbalanced quotes: no usable compiler
            return None
        program = shutil.which(parts[0]) if parts else None
        return shlex.join([program, *parts[1:]]) if program else None
    for name in ("cc", "gcc", "clang"):
        path = shutil.which(name)
        if path:
            return path
    return None


def argv(cc: str) -> list[str]:
    """The compiler command ``cc`` (from :func:`find_compiler`) as a list of arguments."""
    return shlex.split(cc)


@functools.cache
def flags(cc: str) -> tuple[str, ...]:
    """The flags for ``cc``: :data:`FLAGS`, plus ``-fopenmp`` where the compiler can build an
    OpenMP shared object (clang without libomp cannot; its kernels then run on one core)."""
    probe = Path(tempfile.mkdtemp(prefix="arrayjit-omp-"))
    (probe / "p.c").write_text("#include <omp.h>\nint f(void) { return omp_get_max_threads(); }\n")
    cmd = [*argv(cc), *FLAGS, "-fopenmp", str(probe / "p.c"), "-o", str(probe / "p.so")]
    ok = subprocess.run(cmd, capture_output=True, check=False).returncode == 0
    shutil.rmtree(probe, ignore_errors=True)
    return (*FLAGS, "-fopenmp") if ok else FLAGS


@functools.cache
def compiler_version(cc: str) -> str:
    """The first line of ``cc --version`` (part of the compile-cache key)."""
    done = subprocess.run([*argv(cc), "--version"], capture_output=True, text=True, check=False)
    return (done.stdout or done.stderr).splitlines()[0] if (done.stdout or done.stderr) else "?"


def compile_shared_object(cc: str, source: str, name: str) -> bytes:
    """Compile C source to a shared object; returns its bytes.

    Raises:
        CompileError: the compiler failed; the message has its output and the path of the kept
            source.
    """
    workdir = Path(tempfile.mkdtemp(prefix=f"arrayjit-{name}-"))
    src = workdir / f"{name}.c"
    lib = workdir / f"{name}.so"
    src.write_text(source)
    cmd = [*argv(cc), *flags(cc), str(src), "-o", str(lib), "-lm"]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise CompileError(
            f"{Path(argv(cc)[0]).name} failed to compile routine {name} (exit {done.returncode}): "
            f"{shlex.join(cmd)}",
            output=done.stderr + done.stdout,
            source_path=str(src),
        )
    data = lib.read_bytes()
    shutil.rmtree(workdir, ignore_errors=True)
    return data
