"""How node values travel through MPI: the MPI datatype of each precision and the reduction
operations (add, max, min) over it.

Integers, ``single`` and ``double`` use MPI's own types and operations. MPI has no 16- or 8-bit
floats, so ``half``, ``bfloat16`` and ``fp8`` travel as their bits (``UINT16_T``/``UINT8_T``)
and reduce through user-defined operations that widen to float32, combine, and round back: the
result is the correctly rounded combination of each pair, as a device kernel would compute it.
Data movement (broadcast, all-gather) always sends the raw bytes. ``uint4x32`` (random-number
state) can be moved but not reduced.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from mpi4py import MPI

from arrayjit_tnode import Prec

REDUCE_OPS = ("add", "max", "min", "mean")
"""Reductions a collective takes; ``mean`` is ``add`` then a division by the number of ranks."""

_NATIVE: dict[Prec, MPI.Datatype] = {
    Prec.byte: MPI.UINT8_T,
    Prec.uint16: MPI.UINT16_T,
    Prec.int32: MPI.INT32_T,
    Prec.uint32: MPI.UINT32_T,
    Prec.int64: MPI.INT64_T,
    Prec.uint64: MPI.UINT64_T,
    Prec.single: MPI.FLOAT,
    Prec.double: MPI.DOUBLE,
}
_BITS: dict[Prec, tuple[MPI.Datatype, Any]] = {
    Prec.half: (MPI.UINT16_T, np.uint16),
    Prec.bfloat16: (MPI.UINT16_T, np.uint16),
    Prec.fp8: (MPI.UINT8_T, np.uint8),
}
_NATIVE_OPS = {"add": MPI.SUM, "mean": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN}
_WIDE_OPS: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "add": np.add,
    "mean": np.add,
    "max": np.maximum,
    "min": np.minimum,
}


def reducible(prec: Prec) -> bool:
    """Whether values of ``prec`` can be reduced (all but ``uint4x32``)."""
    return prec in _NATIVE or prec in _BITS


class Reductions:
    """The MPI operations of one communicator. User-defined operations are created on first use
    and freed by :meth:`free` (they belong to the MPI library, not to Python)."""

    def __init__(self) -> None:
        self._user: dict[tuple[Prec, str], MPI.Op] = {}

    def typed(self, arr: np.ndarray, prec: Prec, op: str) -> tuple[list[Any], MPI.Op]:
        """``([buffer, datatype], operation)`` for reducing the C-contiguous ``arr`` (values of
        the reducible precision ``prec``) with ``op`` (one of :data:`REDUCE_OPS`)."""
        if prec in _NATIVE:
            return [arr.reshape(-1), _NATIVE[prec]], _NATIVE_OPS[op]
        mpi_type, bits = _BITS[prec]
        return [arr.reshape(-1).view(bits), mpi_type], self._user_op(prec, op)

    def _user_op(self, prec: Prec, op: str) -> MPI.Op:
        found = self._user.get((prec, op))
        if found is None:
            dtype, combine = prec.numpy_dtype, _WIDE_OPS[op]

            def reduce_bits(inbuf: Any, inoutbuf: Any, datatype: Any) -> None:
                a = np.frombuffer(inbuf, dtype=dtype)
                b = np.frombuffer(inoutbuf, dtype=dtype)
                b[...] = combine(a.astype(np.float32), b.astype(np.float32)).astype(dtype)

            found = MPI.Op.Create(reduce_bits, commute=True)
            self._user[(prec, op)] = found
        return found

    def free(self) -> None:
        """Free the user-defined operations."""
        for op in self._user.values():
            op.Free()
        self._user.clear()


def byte_view(arr: np.ndarray) -> list[Any]:
    """``[bytes, MPI.BYTE]`` over the C-contiguous ``arr``, for data movement."""
    return [arr.reshape(-1).view(np.uint8), MPI.BYTE]
