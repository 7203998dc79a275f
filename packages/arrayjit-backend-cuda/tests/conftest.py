"""Shared set-up of the arrayjit-backend-cuda tests: importing
:mod:`arrayjit_backend_cuda.device` without pycuda or a GPU, over a stand-in ``pycuda.driver``
module that a test fills with what its code path calls."""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Callable, Iterator

import pytest

DEVICE_MODULE = "arrayjit_backend_cuda.device"


@pytest.fixture
def device_module_over(
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Callable[[types.ModuleType], types.ModuleType]]:
    """``import_over(driver)``: the device module imported with ``driver`` as
    ``pycuda.driver``; dropped after the test, so no later import sees the stand-in."""

    def import_over(driver: types.ModuleType) -> types.ModuleType:
        package = types.ModuleType("pycuda")
        package.driver = driver  # type: ignore[attr-defined]
        monkeypatch.setitem(sys.modules, "pycuda", package)
        monkeypatch.setitem(sys.modules, "pycuda.driver", driver)
        monkeypatch.delitem(sys.modules, DEVICE_MODULE, raising=False)
        return importlib.import_module(DEVICE_MODULE)

    try:
        yield import_over
    finally:
        sys.modules.pop(DEVICE_MODULE, None)
