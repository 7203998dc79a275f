"""arrayjit_backend_opencl: the ``opencl`` backend (pyopencl; PoCL runs it on any CPU)."""

import contextlib
import re
import threading
from typing import TYPE_CHECKING, Any

from arrayjit_backend_opencl.__about__ import __version__
from arrayjit_backends.registry import device_entry

if TYPE_CHECKING:
    from arrayjit_backend_opencl.device import OpenclDevices

INSTALL_HINT = 'pip install "arrayjit-backend-opencl[pocl]" (a CPU OpenCL runtime), or a GPU driver'

# Built once per process and platform by the probe: a platform that lists devices but cannot
# compile (PoCL 3.0 of pyopencl's wheel, LLVM 14, on a CPU newer than LLVM 14: "unknown target
# CPU 'generic'") would otherwise pass for available and fail every compile.
PROBE_SOURCE = "__kernel void aj_probe(__global float *a) { a[0] = 1.0f; }"
NEWER_RUNTIME = (
    "install a newer OpenCL runtime, e.g. Debian's pocl-opencl-icd (PoCL 3.1, LLVM 15: "
    "apt-get install pocl-opencl-icd), which pyopencl's ICD loader lists before its own PoCL"
)

_BUILDS: dict[tuple[str, ...], str | None] = {}
_BUILDS_LOCK = threading.Lock()


def _probe() -> str | None:
    try:
        from arrayjit_backend_opencl.device import find_platform
    except ImportError as exc:  # pyopencl itself or its ICD loader is absent
        return f"pyopencl cannot be imported: {exc}"
    found = find_platform()
    if isinstance(found, str):
        return found
    platform, devices = found
    return _build_check(platform, devices)


def _build_check(platform: Any, devices: list[Any]) -> str | None:
    """``None`` where a trivial kernel builds on every device of the platform (tried once per
    process and platform), else why not, quoting the build log."""
    key = (
        str(platform.name),
        str(platform.version),
        *(f"{d.name} | {d.driver_version}" for d in devices),
    )
    with _BUILDS_LOCK:
        if key not in _BUILDS:
            log = _build_log(platform, devices)
            _BUILDS[key] = None if log is None else _unbuildable(platform, devices, log)
        return _BUILDS[key]


def _build_log(platform: Any, devices: list[Any]) -> str | None:
    """Build :data:`PROBE_SOURCE` for ``devices`` as the backend builds its sources (a raw
    program, the backend's options): ``None`` if it builds, else the build log (or the error)."""
    import pyopencl as cl

    from arrayjit_backend_opencl.device import BUILD_OPTIONS

    try:
        raw = cl._cl._Program(cl.Context(devices), PROBE_SOURCE)
    except cl.Error as exc:
        return f"error: {exc}"
    try:
        raw.build(BUILD_OPTIONS.encode(), devices)
    except cl.Error as exc:
        logs = []
        for d in devices:
            with contextlib.suppress(cl.Error):
                logs.append(str(raw.get_build_info(d, cl.program_build_info.LOG)))
        return "\n".join(logs).strip() or f"error: {exc}"
    return None


def _unbuildable(platform: Any, devices: list[Any], log: str) -> str:
    """The reason a platform whose build of a trivial kernel failed with ``log`` is missing."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    line = next((ln for ln in lines if "error" in ln.lower()), lines[0] if lines else "no log")
    detail = re.sub(r"^(fatal )?error:\s*", "", line)
    version = str(platform.version)
    if "unknown target cpu" in line.lower():
        llvm = re.search(r"LLVM (\d+)", version)
        pocl = re.search(r"PoCL (\S+)", version)
        runtime = f"PoCL {pocl.group(1)}" if pocl else str(platform.name)
        known = f"LLVM {llvm.group(1)}" if llvm else "its compiler"
        return (
            f"{runtime} cannot compile for this CPU ({devices[0].name}): {detail} "
            f"({known} does not know it); {NEWER_RUNTIME}"
        )
    return (
        f"the OpenCL platform {platform.name} ({version.strip()}) cannot build a trivial kernel "
        f"for {', '.join(str(d.name) for d in devices)}: {detail}"
    )


def _make() -> "OpenclDevices":  # imported lazily: pyopencl may be absent
    from arrayjit_backend_opencl.device import OpenclDevices

    return OpenclDevices()


opencl_entry = device_entry(
    "opencl",
    _make,
    priority=5,
    probe=_probe,
    install_hint=INSTALL_HINT,
    description="OpenCL devices through pyopencl",
)

__all__ = ["__version__", "opencl_entry"]
