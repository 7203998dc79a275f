"""Finding and running the system C compiler."""

from __future__ import annotations

import functools
import os
import platform
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from arrayjit_tnode import CompileError

FLAGS = (
    "-O3",
    "-march=native",
    "-fPIC",
    "-shared",
    "-fwrapv",
    "-fno-math-errno",
    # Values are IEEE either way; without it gcc 12 keeps a selection between a float and a
    # double computation as a branch, and the math library's loops do not vectorize.
    "-fno-trapping-math",
    "-ffp-contract=off",  # a*b + c rounds twice, as the IR defines; fma only where written
    "-std=gnu11",
)


FALLBACKS = ("cc", "gcc", "clang")
"""The compilers looked up on PATH, in order, when ``$CC`` is not set."""
_FALLBACK_NAMES = f"{', '.join(FALLBACKS[:-1])} or {FALLBACKS[-1]}"


@functools.cache
def find_compiler() -> str | None:
    """The compiler command: ``$CC`` if set, else the first of ``cc``, ``gcc`` or ``clang`` on
    PATH; ``None`` if there is none (:func:`compiler_problem` says why).

    ``$CC`` may carry arguments (``CC="gcc -fno-common"``); it is split as a POSIX shell
    would, as make and setuptools do, and its program looked up on PATH. The result is one
    string in shell syntax: :func:`argv` splits it again. A ``$CC`` that is set (not empty)
    but names no executable program gives ``None``: it is not replaced by ``cc``, ``gcc`` or
    ``clang``, since a compiler chosen explicitly and silently swapped for another would build
    with flags and a toolchain the user did not ask for.
    """
    env = os.environ.get("CC", "").strip()
    if env:
        try:
            parts = shlex.split(env)
        except ValueError:  # unbalanced quotes: no usable compiler
            return None
        program = shutil.which(parts[0]) if parts else None
        return shlex.join([program, *parts[1:]]) if program else None
    for name in FALLBACKS:
        path = shutil.which(name)
        if path:
            return path
    return None


def compiler_problem() -> str | None:
    """Why :func:`find_compiler` finds no compiler, naming a ``$CC`` that is set; ``None`` when
    it finds one. The reason the ``cc`` backend is unavailable (``arrayjit backends``).

    For example ``$CC='/nonexistent' is not an executable compiler: /nonexistent does not
    exist; a set $CC is not replaced by cc, gcc or clang (fix or unset it)``.
    """
    if find_compiler() is not None:
        return None
    env = os.environ.get("CC", "").strip()
    if not env:
        return f"no C compiler found ($CC is not set; no {_FALLBACK_NAMES} on PATH)"
    try:
        parts = shlex.split(env)
    except ValueError as exc:
        why = f"it does not split as a shell would ({exc})"
    else:
        why = _not_executable(parts[0]) if parts and parts[0] else "it names no program"
    return (
        f"$CC={env!r} is not an executable compiler: {why}; a set $CC is not replaced by "
        f"{_FALLBACK_NAMES} (fix or unset it)"
    )


def _not_executable(program: str) -> str:
    """Why ``shutil.which(program)`` found nothing."""
    if os.sep not in program and not (os.altsep and os.altsep in program):
        return f"no executable {program!r} on PATH"
    path = Path(program)
    if not path.exists():
        return f"{program} does not exist"
    if path.is_dir():
        return f"{program} is a directory"
    return f"{program} is not executable"


def argv(cc: str) -> list[str]:
    """The compiler command ``cc`` (from :func:`find_compiler`) as a list of arguments."""
    return shlex.split(cc)


SIMD_PROBE = """
#pragma omp declare reduction(aj_add : float : omp_out = omp_out + omp_in) \\
    initializer(omp_priv = -0.0f)
float f(const float *x, int n) {
  float s = -0.0f;
#pragma omp simd reduction(aj_add:s)
  for (int i = 0; i < n; ++i) s += x[i];
  return s;
}
"""
"""What the generated code asks of ``-fopenmp-simd``: a declared reduction on a simd loop."""


@functools.cache
def flags(cc: str) -> tuple[str, ...]:
    """The flags for ``cc``: :data:`FLAGS`, plus ``-fopenmp-simd`` where the compiler takes it
    (the ``omp simd`` pragmas that vectorize reductions, reassociated; no OpenMP runtime is
    linked: threads are the crew's, see :mod:`arrayjit_backend_c.cpu.segments`). Without it the
    pragmas are ignored and reductions stay in order."""
    probe = Path(tempfile.mkdtemp(prefix="arrayjit-simd-"))
    (probe / "p.c").write_text(SIMD_PROBE)
    cmd = [
        *argv(cc),
        *FLAGS,
        "-fopenmp-simd",
        "-Werror",
        str(probe / "p.c"),
        "-o",
        str(probe / "p.so"),
    ]
    ok = subprocess.run(cmd, capture_output=True, check=False).returncode == 0
    shutil.rmtree(probe, ignore_errors=True)
    return (*FLAGS, "-fopenmp-simd") if ok else FLAGS


@functools.cache
def compiler_version(cc: str) -> str:
    """The first line of ``cc --version`` (part of the compile-cache key)."""
    done = subprocess.run([*argv(cc), "--version"], capture_output=True, text=True, check=False)
    return (done.stdout or done.stderr).splitlines()[0] if (done.stdout or done.stderr) else "?"


UNIT_FLAGS = ("-c", "-Werror=implicit-function-declaration")
"""Added to :func:`flags` for a compile unit (:mod:`arrayjit_backend_c.cpu.units`): object code
to link, and a call of a function that the unit does not declare is an error (not a symbol left
for the loader to miss)."""


def compile_shared_object(cc: str, source: str, name: str, objects: Sequence[bytes] = ()) -> bytes:
    """Compile C source to a shared object, linked with ``objects`` (object code from
    :func:`compile_object`); returns its bytes.

    Raises:
        CompileError: the compiler failed; the message has its output and the path of the kept
            source.
    """
    workdir = Path(tempfile.mkdtemp(prefix=f"arrayjit-{name}-"))
    src = workdir / f"{name}.c"
    src.write_text(source)
    paths = _write_objects(workdir, objects, name)
    args = [*flags(cc), str(src), *paths]
    return _build(cc, args, workdir / f"{name}.so", name, str(src), "-lm")


def compile_object(cc: str, source: str, name: str) -> bytes:
    """Compile one compile unit of C source to object code (:data:`UNIT_FLAGS`); returns its
    bytes.

    Raises:
        CompileError: as :func:`compile_shared_object`.
    """
    workdir = Path(tempfile.mkdtemp(prefix=f"arrayjit-{name}-"))
    src = workdir / f"{name}.c"
    src.write_text(source)
    return _build(cc, [*flags(cc), *UNIT_FLAGS, str(src)], workdir / f"{name}.o", name, str(src))


def link_shared_object(cc: str, objects: list[bytes], name: str) -> bytes:
    """Link object code (from :func:`compile_object`) into a shared object; returns its bytes.

    Raises:
        CompileError: the linker failed; the message has its output and the kept folder of the
            objects.
    """
    workdir = Path(tempfile.mkdtemp(prefix=f"arrayjit-{name}-"))
    cmd = ["-shared", "-fPIC", *_write_objects(workdir, objects, name)]
    return _build(cc, cmd, workdir / f"{name}.so", name, str(workdir), "-lm")


def _write_objects(workdir: Path, objects: Sequence[bytes], name: str) -> list[str]:
    """Write ``objects`` into ``workdir``; their paths."""
    paths = []
    for k, data in enumerate(objects):
        path = workdir / f"{name}_{k}.o"
        path.write_bytes(data)
        paths.append(str(path))
    return paths


def _build(cc: str, args: list[str], out: Path, name: str, kept: str, *libs: str) -> bytes:
    """Run ``cc args -o out libs`` and return the bytes of ``out`` (checked to be an object);
    the work folder (``out``'s) is removed on success and kept on failure.

    Raises:
        CompileError: the compiler failed, or wrote no object; with its output and ``kept``.
    """
    cmd = [*argv(cc), *args, "-o", str(out), *libs]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    tool = Path(argv(cc)[0]).name
    if done.returncode != 0:
        raise CompileError(
            f"{tool} failed to compile routine {name} (exit {done.returncode}): {shlex.join(cmd)}",
            output=done.stderr + done.stdout,
            source_path=kept,
        )
    try:
        data = out.read_bytes()
    except OSError as exc:
        raise CompileError(
            f"{tool} exited 0 but wrote no readable "
            f"{'library' if out.suffix == '.so' else 'object file'} for routine {name} "
            f"({exc}): {shlex.join(cmd)}",
            output=done.stderr + done.stdout,
            source_path=kept,
        ) from exc
    if not is_shared_object(data):
        what = "shared object" if out.suffix == ".so" else "object file"
        raise CompileError(
            f"{tool} exited 0 but its output for routine {name} is not a "
            f"{what} ({len(data)} bytes starting {data[:8]!r}): {shlex.join(cmd)}",
            output=done.stderr + done.stdout,
            source_path=kept,
        )
    shutil.rmtree(out.parent, ignore_errors=True)
    return data


_OBJECT_MAGICS = (
    b"\x7fELF",  # Linux, BSD
    b"\xcf\xfa\xed\xfe",  # Mach-O 64-bit
    b"\xca\xfe\xba\xbe",  # Mach-O universal
)


def is_shared_object(data: bytes) -> bool:
    """Whether ``data`` starts like a native shared object of a platform we run on (ELF or
    Mach-O); a cheap first check before the loader sees it."""
    return data.startswith(_OBJECT_MAGICS)


@functools.cache
def cpu_identity() -> str:
    """The CPU's model and feature flags (part of the cache key: code is built with
    ``-march=native``, so a cache shared between machines must not hand one CPU code built for
    another). Linux reads ``/proc/cpuinfo``; elsewhere the processor and machine names."""
    model, feature_flags = "", ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                field, _, value = line.partition(":")
                field = field.strip().lower()
                if field in ("model name", "cpu model", "processor name") and not model:
                    model = value.strip()
                elif field in ("flags", "features", "isa") and not feature_flags:
                    feature_flags = " ".join(sorted(value.split()))
                if model and feature_flags:
                    break
    except OSError:
        pass
    return f"{platform.machine()} | {model or platform.processor()} | {feature_flags}"
