"""DLPack, written out: the C structs of the protocol (``dlpack.h``, version 1.0) as ctypes
structures, the capsule a producer's ``__dlpack__`` returns (:func:`capsule`), taking the
tensor out of another producer's capsule (:func:`take`, the device import), and the checks of
the protocol's ``stream`` argument.

numpy makes the capsule of a host buffer itself (the CPU export,
:class:`~arrayjit_backends.runtime.interop.ArrayExport`); device memory that numpy cannot
describe (a CUDA pointer) gets its capsule here (:func:`capsule`), for any device backend.

A capsule's tensor lives in a ctypes structure kept by :data:`_LIVE` (with its shape and
strides arrays and the ``owner`` that keeps the memory alive) until its deleter runs: the
consumer calls it once done with the memory (a ctypes callback takes the interpreter lock
itself, so a consumer may call it from any thread), or the capsule's destructor does where no
consumer took the capsule. That table is the module's one piece of global state: what
consumers hold, found again by address when they hand it back.

Imports only numpy and arrayjit_tnode.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from arrayjit_tnode import Prec, UsageError

# Device types (DLDeviceType).
KDL_CPU = 1
KDL_CUDA = 2
KDL_CUDA_HOST = 3
KDL_CUDA_MANAGED = 13

# Type codes (DLDataTypeCode).
KDL_INT = 0
KDL_UINT = 1
KDL_FLOAT = 2
KDL_BFLOAT = 4
KDL_BOOL = 6

VERSION = (1, 0)
"""The DLPack version of the versioned capsules made here."""

FLAG_READ_ONLY = 1 << 0
"""``DLPACK_FLAG_BITMASK_READ_ONLY`` of a versioned tensor's ``flags``."""


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


Deleter = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
"""``void (*deleter)(DLManagedTensor*)`` (or of the versioned struct): the argument is the
address of the managed tensor."""


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", Deleter)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("version", DLPackVersion),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", Deleter),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", DLTensor),
    ]


NAME = b"dltensor"
USED_NAME = b"used_dltensor"
VERSIONED_NAME = b"dltensor_versioned"
USED_VERSIONED_NAME = b"used_dltensor_versioned"

_LIVE: dict[int, tuple[object, ...]] = {}
"""Per managed tensor handed out and not yet deleted (by address): the structure, its shape and
strides arrays, and the owner of the memory."""


@Deleter
def _delete(address: int | None) -> None:
    # The consumer is done (or the capsule died untaken): drop the tensor and its owner.
    if address is not None:
        _LIVE.pop(address, None)


# Function objects of our own (``ctypes.pythonapi.X`` is one object shared by every user,
# who may set other argument types on it).
_capsule_new = ctypes.PYFUNCTYPE(
    ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p
)(("PyCapsule_New", ctypes.pythonapi))
_capsule_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_IsValid", ctypes.pythonapi)
)
_capsule_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi)
)

# The same calls on a live capsule (a Python object), for a capsule another producer made.
_is_capsule = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_IsValid", ctypes.pythonapi)
)
_pointer_of = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi)
)
# PyCapsule_SetName keeps the pointer it is given: only the module's constants are passed.
_set_name = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_SetName", ctypes.pythonapi)
)

_Destructor = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


def _destructor_for(name: bytes) -> Any:
    # The capsule is passed as a bare address: it is being destroyed, and a Python reference
    # to it would revive it. A consumer renames the capsule it takes (USED_*): then it owns the
    # tensor and calls the deleter itself.
    @_Destructor
    def destroy(capsule: int | None) -> None:
        if capsule is not None and _capsule_is_valid(capsule, name):
            _LIVE.pop(_capsule_pointer(capsule, name), None)

    return destroy


_DESTROY = _destructor_for(NAME)
_DESTROY_VERSIONED = _destructor_for(VERSIONED_NAME)


def dtype_code(dtype: np.dtype[Any]) -> tuple[int, int]:
    """DLPack's ``(type code, bits)`` of a numpy dtype.

    Raises:
        UsageError: DLPack has no type of this dtype here (fp8 and other ml_dtypes types but
            bfloat16, structured and object dtypes).
    """
    if dtype.name == "bfloat16":
        return KDL_BFLOAT, 16
    if not is_standard(dtype):
        raise UsageError(f"DLPack has no data type for numpy dtype {dtype}")
    kinds = {"i": KDL_INT, "u": KDL_UINT, "f": KDL_FLOAT, "b": KDL_BOOL}
    return kinds[dtype.kind], dtype.itemsize * 8


def numpy_dtype(code: int, bits: int, lanes: int) -> np.dtype[Any] | None:
    """The numpy dtype of DLPack's data type ``(code, bits, lanes)``; None where numpy (with
    the precisions' bfloat16) has none: vector lanes, complex numbers, odd sizes."""
    if lanes != 1:
        return None
    if code == KDL_BFLOAT and bits == 16:
        return np.dtype(Prec.bfloat16.numpy_dtype)
    kinds = {KDL_INT: "i", KDL_UINT: "u", KDL_FLOAT: "f", KDL_BOOL: "b"}
    if code not in kinds or bits % 8 or (code == KDL_BOOL and bits != 8):
        return None
    try:
        dtype = np.dtype(f"{kinds[code]}{bits // 8}")
    except TypeError:  # no such size of the kind (f1, i16)
        return None
    return dtype if is_standard(dtype) else None


def is_standard(dtype: np.dtype[Any]) -> bool:
    """Whether ``dtype`` is one of numpy's own integer, IEEE float or bool types (which the
    array interfaces' typestrs name), not an ml_dtypes type (bfloat16, fp8: kind ``f`` or
    ``V`` too, sizes 1 and 2)."""
    return dtype.kind in "iub" or dtype.name in ("float16", "float32", "float64")


def capsule(
    address: int,
    shape: Sequence[int],
    dtype: np.dtype[Any],
    device: tuple[int, int],
    owner: object,
    *,
    versioned: bool = False,
    read_only: bool = False,
) -> Any:
    """A DLPack capsule of the C-contiguous array of ``dtype`` and ``shape`` at ``address`` on
    ``device`` (``(device type, id)``), keeping ``owner`` alive until the consumer deletes it
    (or the capsule dies untaken). ``versioned``: a ``dltensor_versioned`` capsule (DLPack
    1.0, for a consumer that passed ``max_version >= (1, 0)``), else a ``dltensor`` one.

    Raises:
        UsageError: DLPack has no type of ``dtype`` (:func:`dtype_code`).
    """
    code, bits = dtype_code(dtype)
    ndim = len(shape)
    dims = (ctypes.c_int64 * max(ndim, 1))(*shape)
    strides = (ctypes.c_int64 * max(ndim, 1))()
    step = 1
    for axis in reversed(range(ndim)):  # in elements, as DLPack counts them
        strides[axis] = step
        step *= int(shape[axis])
    managed: DLManagedTensor | DLManagedTensorVersioned
    if versioned:
        managed = DLManagedTensorVersioned()
        managed.version = DLPackVersion(*VERSION)
        managed.flags = FLAG_READ_ONLY if read_only else 0
        name, destroy = VERSIONED_NAME, _DESTROY_VERSIONED
    else:
        managed = DLManagedTensor()
        name, destroy = NAME, _DESTROY
    tensor = managed.dl_tensor
    tensor.data = address or None
    tensor.device = DLDevice(*device)
    tensor.ndim = ndim
    tensor.dtype = DLDataType(code, bits, 1)
    tensor.shape = ctypes.cast(dims, ctypes.POINTER(ctypes.c_int64))
    tensor.strides = ctypes.cast(strides, ctypes.POINTER(ctypes.c_int64))
    tensor.byte_offset = 0
    managed.manager_ctx = None
    managed.deleter = _delete
    pointer = ctypes.addressof(managed)
    _LIVE[pointer] = (managed, dims, strides, owner)
    return _capsule_new(pointer, name, ctypes.cast(destroy, ctypes.c_void_p))


@dataclass
class Taken:
    """A tensor taken out of another producer's DLPack capsule (:func:`take`): where its memory
    is and how it is laid out. The taker owns it: :meth:`release` (once, idempotent) calls the
    producer's deleter, which lets the producer free the memory.

    Attributes:
        address: the first element's address (``data + byte_offset``).
        device: DLPack's ``(device type, device id)``.
        code, bits, lanes: DLPack's data type; ``dtype`` its numpy dtype (None: none).
        shape: the shape.
        strides: the strides in elements, None where the producer left them out (row-major).
        read_only: the versioned capsule's read-only flag.
    """

    address: int
    device: tuple[int, int]
    code: int
    bits: int
    lanes: int
    dtype: np.dtype[Any] | None
    shape: tuple[int, ...]
    strides: tuple[int, ...] | None
    read_only: bool
    _managed: int = 0
    _deleter: Any = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def release(self) -> None:
        """Hand the tensor back to its producer (its deleter), once."""
        with self._lock:
            managed, deleter = self._managed, self._deleter
            self._managed, self._deleter = 0, None
        if managed and deleter:
            deleter(managed)


def take(capsule: object) -> Taken:
    """The tensor of a DLPack capsule (``dltensor`` or ``dltensor_versioned``), taken as a
    consumer takes it: the capsule is renamed ``used_*`` (its destructor then leaves the tensor
    alone) and the caller owns the tensor until :meth:`Taken.release`.

    Raises:
        UsageError: ``capsule`` is no DLPack capsule, or one already taken.
    """
    versioned = bool(_is_capsule(capsule, VERSIONED_NAME))
    if not versioned and not _is_capsule(capsule, NAME):
        raise UsageError(
            f"__dlpack__ returned {type(capsule).__name__}, not an untaken DLPack capsule "
            f"(named dltensor or dltensor_versioned)"
        )
    name, used = (VERSIONED_NAME, USED_VERSIONED_NAME) if versioned else (NAME, USED_NAME)
    pointer = int(_pointer_of(capsule, name))
    managed: DLManagedTensor | DLManagedTensorVersioned
    if versioned:
        managed = DLManagedTensorVersioned.from_address(pointer)
        read_only = bool(managed.flags & FLAG_READ_ONLY)
    else:
        managed = DLManagedTensor.from_address(pointer)
        read_only = False
    _set_name(capsule, used)
    t = managed.dl_tensor
    ndim = int(t.ndim)
    shape = tuple(int(t.shape[k]) for k in range(ndim))
    strides = tuple(int(t.strides[k]) for k in range(ndim)) if t.strides else None
    dtype = (int(t.dtype.code), int(t.dtype.bits), int(t.dtype.lanes))
    return Taken(
        address=int(t.data or 0) + int(t.byte_offset),
        device=(int(t.device.device_type), int(t.device.device_id)),
        code=dtype[0],
        bits=dtype[1],
        lanes=dtype[2],
        dtype=numpy_dtype(*dtype),
        shape=shape,
        strides=strides,
        read_only=read_only,
        _managed=pointer,
        _deleter=managed.deleter,
    )


def consumer_stream(stream: object, what: str) -> int | None:
    """The CUDA stream a consumer passed to ``__dlpack__(stream=...)``, as the array API
    defines it: ``None`` is the legacy default stream (handle 1), ``1`` that stream, ``2`` the
    per-thread default stream, a larger integer a stream's handle; ``-1`` asks for no
    synchronization (returned as None). ``what`` names the export for messages.

    Raises:
        UsageError: ``stream`` is not an integer (a bool included), or is 0 (ambiguous: the
            protocol forbids it) or below -1.
    """
    if stream is None:
        return 1
    if isinstance(stream, bool) or not isinstance(stream, int):
        raise UsageError(
            f"{what}: __dlpack__(stream=...) takes a CUDA stream handle (an int), None or -1; "
            f"got {stream!r}"
        )
    if stream == -1:
        return None
    if stream == 0 or stream < -1:
        raise UsageError(
            f"{what}: __dlpack__(stream={stream}) is not a stream: 1 is the legacy default "
            f"stream, 2 the per-thread default stream, a larger integer a stream handle, -1 no "
            f"synchronization (0 is ambiguous, the protocol forbids it)"
        )
    return stream


__all__ = [
    "FLAG_READ_ONLY",
    "KDL_BFLOAT",
    "KDL_BOOL",
    "KDL_CPU",
    "KDL_CUDA",
    "KDL_CUDA_HOST",
    "KDL_CUDA_MANAGED",
    "KDL_FLOAT",
    "KDL_INT",
    "KDL_UINT",
    "NAME",
    "USED_NAME",
    "USED_VERSIONED_NAME",
    "VERSION",
    "VERSIONED_NAME",
    "DLDataType",
    "DLDevice",
    "DLManagedTensor",
    "DLManagedTensorVersioned",
    "DLPackVersion",
    "DLTensor",
    "Deleter",
    "Taken",
    "capsule",
    "consumer_stream",
    "dtype_code",
    "is_standard",
    "numpy_dtype",
    "take",
]
