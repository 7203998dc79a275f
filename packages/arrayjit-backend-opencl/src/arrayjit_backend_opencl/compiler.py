"""The OpenCL backend's compiler: OpenCL C source to a device's program binary, and a binary
back to a program ready for kernels.

The driver compiles (pyopencl's ``Program``), so this needs a device: a program is built for one
device, in a context of that device alone (:mod:`arrayjit_backend_opencl.device` keeps those
contexts and calls this through the shared compile cache, which keeps the binaries). pyopencl's
own on-disk cache is bypassed: the raw program object builds the source as it is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyopencl as cl

from arrayjit_backends.gpu.devices import keep_failed_source
from arrayjit_tnode import CompileError

BUILD_OPTIONS = "-cl-std=CL1.2"
"""The options of every build, from source or from a binary (and part of each cache key)."""


def build_program(context: Any, device: Any, source: str, name: str, failed_dir: Path) -> Any:
    """``source`` built for ``device`` (in ``context``, which holds it), as a program ready for
    kernels on that device.

    Args:
        name: the routine, for the error message.
        failed_dir: the compile cache's folder; a source that fails to build is kept under it
            (see :func:`~arrayjit_backends.gpu.devices.keep_failed_source`).

    Raises:
        CompileError: the driver failed to build the source; with the build log and the path of
            the kept source.
    """
    # pyopencl's Program(context, source) would consult its own on-disk cache; the raw
    # program object builds the source as it is (our compile cache keeps the binary).
    raw = cl._cl._Program(context, source)
    try:
        raw.build(BUILD_OPTIONS.encode(), [device])
    except cl.Error as exc:
        log = str(raw.get_build_info(device, cl.program_build_info.LOG))
        path = keep_failed_source(failed_dir, source, ".cl")
        raise CompileError(
            f"OpenCL failed to build routine {name} on {device.name}", log, str(path)
        ) from exc
    return cl.Program(raw)


def build_binary(context: Any, device: Any, source: str, name: str, failed_dir: Path) -> bytes:
    """Build ``source`` for ``device`` (in ``context``, a context of that device alone) and
    return the program's binary for it (arguments and errors: :func:`build_program`)."""
    program = build_program(context, device, source, name, failed_dir)
    binaries: list[bytes] = program.get_info(cl.program_info.BINARIES)
    return bytes(binaries[0])


def load_binary(context: Any, device: Any, binary: bytes, name: str, from_cache: bool) -> Any:
    """The built program of ``binary`` for ``device`` alone, in ``context`` (pyopencl builds a
    program from a binary without its cache).

    Args:
        name: the routine, for the error message.
        from_cache: the binary came from the compile cache (not from :func:`build_binary` now).

    Raises:
        ValueError: the driver rejects a binary ``from_cache`` (the cache discards it with a
            warning and builds the source again).
        CompileError: the driver rejects the binary it has just built.
    """
    try:
        return cl.Program(context, [device], [binary]).build(BUILD_OPTIONS)
    except cl.Error as exc:
        if from_cache:  # the cache discards it with a warning and builds from source
            raise ValueError(f"the OpenCL driver rejects its binary: {exc}") from exc
        raise CompileError(
            f"OpenCL rejects the binary it built for routine {name} on {device.name}",
            str(exc),
        ) from exc


__all__ = ["BUILD_OPTIONS", "build_binary", "build_program", "load_binary"]
