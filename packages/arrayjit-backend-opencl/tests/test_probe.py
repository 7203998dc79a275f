"""The availability probe builds a trivial kernel: a platform that lists devices but cannot
compile (PoCL 3.0 of pyopencl's wheel, LLVM 14, on an AMD Zen 5) is a MissingBackend whose
reason quotes the build log, not a backend whose every compile fails."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("pyopencl")
import pyopencl as cl

import arrayjit_backend_opencl as pkg
from arrayjit_backend_opencl import device
from arrayjit_backends import fresh_backend
from arrayjit_backends.missing import MissingBackend

# What PoCL 3.0-rc2 of pyopencl's wheel logs on a CPU that LLVM 14 does not know.
ZEN5_LOG = (
    "error: unknown target CPU 'generic'\nDevice pthread-AMD EPYC failed to build the program\n"
)
BUNDLED_POCL = SimpleNamespace(
    name="Portable Computing Language",
    version=(
        "OpenCL 3.0 PoCL 3.0-rc2  Linux, Release, RELOC, LLVM 14.0.6, SLEEF, DISTRO, POCL_DEBUG"
    ),
)
CPU = SimpleNamespace(name="pthread-AMD EPYC", driver_version="3.0-rc2")


class _FailingProgram:
    """Stands in for pyopencl's raw program: its build fails with ``log`` on every device."""

    builds = 0

    def __init__(self, context: Any, source: str) -> None:
        self.source = source

    def build(self, options: bytes, devices: list[Any]) -> None:
        type(self).builds += 1
        raise cl.RuntimeError("clBuildProgram failed: BUILD_PROGRAM_FAILURE")

    def get_build_info(self, dev: Any, param: Any) -> str:
        assert param == cl.program_build_info.LOG
        return ZEN5_LOG


@pytest.fixture
def unbuildable_pocl(monkeypatch: pytest.MonkeyPatch) -> type[_FailingProgram]:
    """The bundled PoCL on a Zen 5, whatever this machine has: its platform and device, a
    context, and a build that fails with its log; a fresh per-process probe cache."""
    monkeypatch.setattr(pkg, "_BUILDS", {})
    monkeypatch.setattr(device, "find_platform", lambda: (BUNDLED_POCL, [CPU]))
    monkeypatch.setattr(cl, "Context", lambda devices: object())
    monkeypatch.setattr(cl._cl, "_Program", _FailingProgram)
    _FailingProgram.builds = 0
    return _FailingProgram


def test_a_platform_that_cannot_build_is_missing_with_the_build_log(
    unbuildable_pocl: type[_FailingProgram],
) -> None:
    be = fresh_backend("opencl")
    assert isinstance(be, MissingBackend)
    assert "PoCL 3.0-rc2 cannot compile for this CPU (pthread-AMD EPYC)" in be.reason
    assert "unknown target CPU 'generic' (LLVM 14 does not know it)" in be.reason
    assert "pocl-opencl-icd" in be.reason
    assert be.install_hint == pkg.INSTALL_HINT
    # Once per process: the next probes reuse the answer.
    assert fresh_backend("opencl").reason == be.reason
    assert pkg.opencl_entry.probe() == be.reason
    assert unbuildable_pocl.builds == 1


def test_another_build_failure_quotes_its_first_error_line(
    monkeypatch: pytest.MonkeyPatch, unbuildable_pocl: type[_FailingProgram]
) -> None:
    log = "warning: x\nerror: no libclc\n"
    monkeypatch.setattr(unbuildable_pocl, "get_build_info", lambda self, dev, param: log)
    reason = pkg.opencl_entry.probe()
    assert reason == (
        "the OpenCL platform Portable Computing Language (OpenCL 3.0 PoCL 3.0-rc2  Linux, "
        "Release, RELOC, LLVM 14.0.6, SLEEF, DISTRO, POCL_DEBUG) cannot build a trivial kernel "
        "for pthread-AMD EPYC: no libclc"
    )


def test_a_platform_that_builds_is_available(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pkg, "_BUILDS", {})
    monkeypatch.setattr(device, "find_platform", lambda: (BUNDLED_POCL, [CPU]))
    monkeypatch.setattr(pkg, "_build_log", lambda platform, devices: None)
    assert pkg.opencl_entry.probe() is None


def test_the_real_platform_builds_where_the_backend_is_available() -> None:
    # The probe's own build on this machine's platform agrees with a real compile: where the
    # probe says available, the backend compiles and runs (the other tests of this folder).
    found = device.find_platform()
    if isinstance(found, str):
        pytest.skip(f"no OpenCL platform: {found}")
    reason = pkg.opencl_entry.probe()
    be = fresh_backend("opencl")
    if reason is not None:
        assert isinstance(be, MissingBackend) and be.reason == reason
        assert pkg._build_log(*found) is not None
    else:
        assert not isinstance(be, MissingBackend)
