"""Shared set-up of the arrayjit-backend-opencl tests: one backend per module (PoCL contexts and
builds are slow), a compile cache in a temporary folder, and a skip where no OpenCL platform
with a device exists."""

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

# Tests import their helpers module (pytest runs with --import-mode=importlib).
sys.path.insert(0, os.path.dirname(__file__))


def _why_unusable() -> str | None:
    try:
        from arrayjit_backend_opencl.device import find_platform
    except ImportError as exc:
        return f"pyopencl cannot be imported: {exc}"
    found = find_platform()
    return found if isinstance(found, str) else None


@pytest.fixture(scope="module")
def backend(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    """A fresh, initialized ``opencl`` backend shared by one test module. A module that sets
    ``GPU_CELL_LANES`` gets that many lanes per reduced cell (``ARRAYJIT_GPU_CELL_LANES``: the
    work-group shapes GPUs get, which PoCL's CPU device skips by default)."""
    reason = _why_unusable()
    if reason is not None:
        pytest.skip(f"no usable OpenCL platform: {reason}")
    from arrayjit_backends import fresh_backend

    patch = pytest.MonkeyPatch()
    patch.setenv("ARRAYJIT_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    lanes = getattr(request.module, "GPU_CELL_LANES", None)
    if lanes is not None:
        patch.setenv("ARRAYJIT_GPU_CELL_LANES", str(lanes))
    be = fresh_backend("opencl")
    be.initialize()
    yield be
    be.finalize()
    patch.undo()
