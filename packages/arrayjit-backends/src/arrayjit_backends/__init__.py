"""arrayjit_backends: the shared backend layer.

Turns any device backend (a :class:`DeviceBackend`: OpenCL, CUDA) or CPU compiler (a
:class:`CpuCompiler` plus a scheduler) into the full Backend: devices, streams, events,
contexts, slab memory, routines, automatic synchronization, hosted nodes and merge buffers.
Backends are found through the ``arrayjit.backends`` entry points.
"""

from arrayjit_backends.__about__ import __version__
from arrayjit_backends.backend import Backend, Capabilities, Config
from arrayjit_backends.backend_intf import BackendInterface
from arrayjit_backends.impl.cpu_compiler import CpuCompiler, kernel_name
from arrayjit_backends.impl.device import DeviceBackend, DeviceInfo, ImmediateQueue
from arrayjit_backends.missing import MissingBackend
from arrayjit_backends.registry import (
    BackendEntry,
    BackendStatus,
    available_backends,
    backend_names,
    device_entry,
    fresh_backend,
    make_cpu_backend,
    no_device_entry,
    register,
)
from arrayjit_backends.runtime.cpu_devices import CpuDevices
from arrayjit_backends.runtime.interop import ArrayExport
from arrayjit_backends.runtime.routine import Routine
from arrayjit_backends.runtime.trace import trace
from arrayjit_backends.runtime.transfers import MergeMode
from arrayjit_backends.runtime.values import Buffer, Code, Context, Device, Stream
from arrayjit_tnode.errors import (
    ArrayjitError,
    BackendMissingError,
    CompileError,
    MemoryModeError,
    StreamError,
    UsageError,
)

__all__ = [
    "ArrayExport",
    "ArrayjitError",
    "Backend",
    "BackendEntry",
    "BackendInterface",
    "BackendMissingError",
    "BackendStatus",
    "Buffer",
    "Capabilities",
    "Code",
    "CompileError",
    "Config",
    "Context",
    "CpuCompiler",
    "CpuDevices",
    "Device",
    "DeviceBackend",
    "DeviceInfo",
    "ImmediateQueue",
    "MemoryModeError",
    "MergeMode",
    "MissingBackend",
    "Routine",
    "Stream",
    "StreamError",
    "UsageError",
    "__version__",
    "available_backends",
    "backend_names",
    "device_entry",
    "fresh_backend",
    "kernel_name",
    "make_cpu_backend",
    "no_device_entry",
    "register",
    "trace",
]
