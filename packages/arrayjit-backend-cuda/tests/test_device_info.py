"""``CudaDevices.info`` without a GPU: the device module imported over a stand-in for
``pycuda.driver`` whose devices answer ``get_attribute`` with the CUDA driver's attribute names
(``CU_DEVICE_ATTRIBUTE_*`` without the prefix, as pycuda spells them)."""

from __future__ import annotations

import types
from typing import Any

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


def test_info_reads_the_device_attributes(device_module_over: Any) -> None:
    driver = types.ModuleType("pycuda.driver")
    driver.device_attribute = types.SimpleNamespace(**{k: k for k in ATTRIBUTES})  # type: ignore[attr-defined]
    device = device_module_over(driver)
    devices = object.__new__(device.CudaDevices)  # no driver to initialize
    devices.devices = [FakeDevice()]
    info = devices.info(0)
    assert info.name == "Fake A100 (sm_80)" and info.kind == "gpu" and not info.unified_memory
    assert info.max_shared_memory == 49152 and info.max_workgroup_total == 1024
    assert info.max_workgroup_size == (1024, 1024, 64)
    assert info.compute_units == 108 and info.global_memory == 40 << 30
    assert info.smem_prefix == "__shared__" and info.barrier == "__syncthreads();"
    assert info.float4_type == "float4" and info.supports_dtype(Prec.half)
