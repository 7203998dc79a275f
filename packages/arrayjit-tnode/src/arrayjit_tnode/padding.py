"""Padding: margins around a node's logical dims, and the checked buffer dims they give.

A node's buffer is its logical dims plus, per axis, a left and a right margin holding one value
(a convolution reads past the edges into them). :class:`Padding` is that description; the
functions here check dims given by users and turn logical dims and a padding into the dims of the
buffer, refusing buffers that 64-bit indexing cannot address. :class:`~arrayjit_tnode.tnode.Tnode`
and :class:`~arrayjit_tnode.host_array.HostArrayMixin` both read a node's padding, so it lives
below both of them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from arrayjit_tnode import precision
from arrayjit_tnode.errors import UsageError


@dataclass(frozen=True)
class Padding:
    """Per-axis ``(left, right)`` margins and the value the margins hold (``None``: unspecified,
    so code that relies on the margins resets them itself)."""

    axes: tuple[tuple[int, int], ...]
    value: float | None = 0.0

    def __post_init__(self) -> None:
        v = self.value
        if v is not None and not precision.is_number(v):
            raise UsageError(f"Padding: the value must be a number or None, got {v!r}")


MAX_BYTES = (1 << 63) - 1
"""The largest buffer a node may have: generated code indexes with 64-bit signed integers."""


def check_dims(label: str, what: str, dims: object) -> tuple[int, ...]:
    """``dims`` as a tuple of Python ints, each a non-negative integer (a Python ``int`` or a
    numpy integer; ``bool`` and floats are refused, never truncated).

    Args:
        label: the node, as error messages name it (its ``debug_label``).
        what: what ``dims`` are (``"dims"``, ``"padding"``), for the message.

    Raises:
        UsageError: ``dims`` is not a sequence of non-negative integers (names the node).
    """
    if isinstance(dims, (str, bytes)) or not isinstance(dims, Sequence | np.ndarray):
        raise UsageError(f"node {label}: {what} must be a sequence of integers, got {dims!r}")
    out = []
    for d in dims:
        if isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, np.integer)):
            raise UsageError(
                f"node {label}: {what} must be non-negative integers, got {d!r} "
                f"({type(d).__name__}) in {list(dims)!r}"
            )
        if d < 0:
            raise UsageError(f"node {label}: {what} must be non-negative, got {tuple(dims)}")
        out.append(int(d))
    return tuple(out)


def _check_size(label: str, dims: tuple[int, ...]) -> None:
    """Refuse buffers whose size in elements overflows 64-bit indexing (exact arithmetic)."""
    n = math.prod(dims)
    if n * 16 > MAX_BYTES:  # 16: the widest precision (uint4x32)
        raise UsageError(
            f"node {label}: dims {list(dims)} give {n} elements, more than 64-bit indexing "
            f"can address"
        )


def buffer_dims(label: str, logical: tuple[int, ...], padding: Padding | None) -> tuple[int, ...]:
    """The dims of the buffer of a node with (checked) ``logical`` dims and ``padding``: each
    logical dim plus its left and right margins, or the logical dims without padding.

    Raises:
        UsageError: the padding's rank differs from the dims', a margin is not a non-negative
            integer or not a ``(left, right)`` pair, or the buffer is too large for 64-bit
            indexing; the message names the node (``label``).
    """
    if padding is not None:
        axes = padding.axes
        if not isinstance(axes, (tuple, list)) or len(axes) != len(logical):
            raise UsageError(
                f"node {label}: padding has "
                f"{len(axes) if isinstance(axes, (tuple, list)) else axes!r} axes but the "
                f"node has {len(logical)} dims {logical}"
            )
        margins = [check_dims(label, "padding", lr) for lr in axes]
        # (check_dims says "padding must be non-negative" for a negative margin)
        if any(len(lr) != 2 for lr in margins):
            raise UsageError(f"node {label}: padding must be (left, right) pairs, got {axes}")
        padded = tuple(d + lr[0] + lr[1] for d, lr in zip(logical, margins))
    else:
        padded = logical
    _check_size(label, padded)
    return padded


__all__ = ["MAX_BYTES", "Padding", "buffer_dims", "check_dims"]
