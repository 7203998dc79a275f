"""``CudaDevices.info`` without a GPU: the runtime module imported over a stand-in for
``pycuda.driver`` whose devices answer ``get_attribute`` with the CUDA driver's attribute names
(``CU_DEVICE_ATTRIBUTE_*`` without the prefix, as pycuda spells them)."""

from __future__ import annotations

import importlib
import sys
import types

import pytest

from arrayjit_tnode import Prec

ATTRIBUTES = {  # a GPU like an A100
    "MAX_THREADS_PER_BLOCK": 1024,
    "MAX_BLOCK_DIM_X": 1024,
    "MAX_BLOCK_DIM_Y": 1024,
    "MAX_BLOCK_DIM_Z": 64,
    "MAX_SHARED_MEMORY_PER_BLOCK": 49152,
    "MULTIPROCESSOR_COUNT": 108,
    "INTEGRATED": 0,
}


class FakeDevice:
    def get_attribute(self, attribute: str) -> int:
        return ATTRIBUTES[attribute]

    def name(self) -> str:
        return "Fake A100"

    def total_memory(self) -> int:
        return 40 << 30

    def compute_capability(self) -> tuple[int, int]:
        return (8, 0)


def test_info_reads_the_device_attributes(monkeypatch: pytest.MonkeyPatch) -> None:
    driver = types.ModuleType("pycuda.driver")
    driver.device_attribute = types.SimpleNamespace(**{k: k for k in ATTRIBUTES})  # type: ignore[attr-defined]
    package = types.ModuleType("pycuda")
    package.driver = driver  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pycuda", package)
    monkeypatch.setitem(sys.modules, "pycuda.driver", driver)
    monkeypatch.delitem(sys.modules, "arrayjit_backend_cuda.runtime", raising=False)
    try:
        runtime = importlib.import_module("arrayjit_backend_cuda.runtime")
        devices = object.__new__(runtime.CudaDevices)  # no driver to initialize
        devices.devices = [FakeDevice()]
        info = devices.info(0)
    finally:
        sys.modules.pop("arrayjit_backend_cuda.runtime", None)  # never keep the stand-in
    assert info.name == "Fake A100 (sm_80)" and info.kind == "gpu" and not info.unified_memory
    assert info.max_shared_memory == 49152 and info.max_workgroup_total == 1024
    assert info.max_workgroup_size == (1024, 1024, 64)
    assert info.compute_units == 108 and info.global_memory == 40 << 30
    assert info.smem_prefix == "__shared__" and info.barrier == "__syncthreads();"
    assert info.float4_type == "float4" and info.supports_dtype(Prec.half)
