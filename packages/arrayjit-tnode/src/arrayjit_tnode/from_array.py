"""Nodes over existing host arrays: a reshape of a base array, or an array already padded.

:meth:`Tnode.create <arrayjit_tnode.tnode.Tnode.create>` makes a node whose host array is
created zero-filled on first use. Data loaders and front ends often hold the data already: a
flat buffer to be seen as a batch of images, or an array padded for a convolution. The two
constructors here make a hosted node whose host array *is* that data (a numpy view, no copy
where numpy can give one), so writes through the node are seen in the base array and the other
way round, as with the seeds' ``Tnode.create_with_reshape`` and ``Tnode.create_from_padded``.

The node's precision is the array's (:func:`arrayjit_tnode.precision.of_dtype`) unless given;
its mode is ``Hosted(Unset_hosted)``: it has a host array from the start.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from arrayjit_tnode import precision
from arrayjit_tnode.errors import UsageError
from arrayjit_tnode.host_array import margin_value
from arrayjit_tnode.padding import Padding
from arrayjit_tnode.precision import Prec
from arrayjit_tnode.tnode import Tnode


def _as_array(what: str, label: str | Sequence[str], values: object) -> np.ndarray:
    if not isinstance(values, np.ndarray):
        raise UsageError(
            f"{what} {label!r}: expects a numpy array, got {type(values).__name__} "
            f"(an existing array is shared, not copied; use Tnode.create and set_values to copy)"
        )
    return values


def _check_padding(what: str, label: str | Sequence[str], padding: object) -> None:
    if padding is not None and not isinstance(padding, Padding):
        raise UsageError(
            f"{what} {label!r}: padding must be a Padding or None, got {type(padding).__name__}"
        )


def _prec_of(
    what: str, label: str | Sequence[str], arr: np.ndarray, prec: Prec | str | None
) -> Prec:
    """The node's precision: ``prec`` if given (the array's dtype must be its host dtype), else
    the one whose host dtype is the array's."""
    if prec is None:
        try:
            return precision.of_dtype(arr.dtype)
        except UsageError as exc:
            raise UsageError(f"{what} {label!r}: {exc}") from None
    p = precision.parse(prec)
    if arr.dtype != p.numpy_dtype:
        raise UsageError(
            f"{what} {label!r}: precision {p} keeps its host array as {p.numpy_dtype}, "
            f"the array is {arr.dtype}"
        )
    return p


def _check_margins(what: str, tn: Tnode, arr: np.ndarray) -> None:
    """Refuse an "already padded" array whose margins do not hold the padding value: code that
    relies on the margins (a convolution reading past the border) would read garbage."""
    pad = tn.padding
    if pad is None or pad.value is None:
        return
    inside = np.zeros(arr.shape, dtype=bool)
    inside[tn.logical_slices()] = True
    margins = arr[~inside]
    expected = np.asarray(margin_value(pad.value, arr.dtype)).astype(arr.dtype)
    wrong = margins != expected
    if tn.prec.is_float and np.isnan(expected):
        wrong = ~np.isnan(margins)
    if wrong.any():
        raise UsageError(
            f"{what}: node {tn.debug_label}: the margins must hold the padding "
            f"value {pad.value}, found {margins[wrong][0]}"
        )


def create_from_padded(
    array: np.ndarray,
    padding: Padding | None,
    *,
    label: str | Sequence[str] = (),
    prec: Prec | str | None = None,
) -> Tnode:
    """A hosted node whose host array is ``array``, which already holds the padding margins.

    The node's buffer dims are ``array``'s shape (less the trailing lane axis of ``uint4x32``);
    its logical dims are those less the margins of ``padding``. ``array`` is shared, not copied:
    ``get_values()`` reads its logical region, and a write to either is seen by the other.

    Args:
        array: the padded host array.
        padding: per-axis ``(left, right)`` margins and their value; ``None``: no padding.
        label: display components.
        prec: the precision (default: the one whose host dtype is ``array.dtype``).

    Raises:
        UsageError: ``array`` is not a numpy array or not C-contiguous, ``padding`` not a
            :class:`Padding`, the dtype is no precision's host dtype (or not ``prec``'s), the
            margins do not fit the shape, or they do not hold ``padding.value`` (when it is
            not ``None``).
    """
    arr = _as_array("create_from_padded", label, array)
    _check_padding("create_from_padded", label, padding)
    p = _prec_of("create_from_padded", label, arr, prec)
    dims = arr.shape[:-1] if p is Prec.uint4x32 else arr.shape
    if p is Prec.uint4x32 and (arr.ndim == 0 or arr.shape[-1] != 4):
        raise UsageError(
            f"create_from_padded {label!r}: a uint4x32 array needs a trailing axis of 4 lanes, "
            f"got shape {list(arr.shape)}"
        )
    if padding is not None:
        if len(padding.axes) != len(dims):
            raise UsageError(
                f"create_from_padded {label!r}: padding has {len(padding.axes)} axes but the "
                f"array has {len(dims)} dims {list(dims)}"
            )
        logical = tuple(d - left - right for d, (left, right) in zip(dims, padding.axes))
        if any(d < 0 for d in logical):
            raise UsageError(
                f"create_from_padded {label!r}: margins {list(padding.axes)} are larger than "
                f"the array's dims {list(dims)}"
            )
    else:
        logical = tuple(dims)
    if not arr.flags.c_contiguous:
        raise UsageError(
            f"create_from_padded {label!r}: the array (shape {list(arr.shape)}, strides "
            f"{list(arr.strides)}) is not C-contiguous: backends copy host arrays as one block; "
            f"pass np.ascontiguousarray(array), a copy"
        )
    tn = Tnode.create(logical, prec=p, label=label, hosted=True, padding=padding)
    _check_margins("create_from_padded", tn, arr)
    tn.array = arr
    return tn


def create_with_reshape(
    base: np.ndarray,
    dims: Sequence[int],
    *,
    padding: Padding | None = None,
    from_padded: bool = False,
    label: str | Sequence[str] = (),
    prec: Prec | str | None = None,
) -> Tnode:
    """A hosted node of logical ``dims`` over the data of ``base``, read in row-major order.

    Without padding, the host array is ``base`` reshaped to ``dims`` (``base`` must have as many
    elements). With ``from_padded=True``, ``base`` already holds the margins: it has as many
    elements as the *padded* dims and is reshaped to them (its margins must hold the padding
    value). In both cases ``base`` must be C-contiguous (backends copy a host array as one
    block), and the node's host array is a view of it: the node and ``base`` share their data.

    With padding and ``from_padded=False``, ``base`` holds only the logical values: the host
    array is a new padded array (margins set to the padding value, or 0 when ``None``) whose
    logical region is a copy of ``base`` reshaped; ``base`` is not shared, since numpy cannot
    view an array with margins added.

    Args:
        base: the base array.
        dims: the node's logical dims.
        padding: margins around the logical dims.
        from_padded: ``base`` already includes the margins.
        label: display components.
        prec: the precision (default: the one whose host dtype is ``base.dtype``).

    Raises:
        UsageError: ``base`` is not a numpy array or has the wrong number of elements,
            ``padding`` is not a :class:`Padding`, a base to share is not C-contiguous,
            ``from_padded`` comes without padding, the dtype is no precision's host dtype (or
            not ``prec``'s), or (with ``from_padded``) the margins do not hold
            ``padding.value``.
    """
    arr = _as_array("create_with_reshape", label, base)
    _check_padding("create_with_reshape", label, padding)
    p = _prec_of("create_with_reshape", label, arr, prec)
    if from_padded and padding is None:
        raise UsageError(
            f"create_with_reshape {label!r}: from_padded=True needs the padding the base holds"
        )
    tn = Tnode.create(dims, prec=p, label=label, hosted=True, padding=padding)
    target = tn.dims if from_padded or padding is None else tn.dims_without_padding
    shape = p.host_shape(target)
    if arr.size != math.prod(shape):
        which = "padded dims" if from_padded else "dims"
        raise UsageError(
            f"create_with_reshape: node {tn.debug_label}: the base has {arr.size} elements "
            f"(shape {list(arr.shape)}), the {which} {list(target)} need {math.prod(shape)}"
        )
    shared = from_padded or padding is None
    if shared and not arr.flags.c_contiguous:
        # A view of it would not be one block: backends copy host arrays as one block.
        raise UsageError(
            f"create_with_reshape: node {tn.debug_label}: the base (shape {list(arr.shape)}, "
            f"strides {list(arr.strides)}) is not C-contiguous, so the node cannot share it; "
            f"pass np.ascontiguousarray(base), a copy"
        )
    view = arr.reshape(shape)
    if shared:
        _check_margins("create_with_reshape", tn, view)
        tn.array = view
    else:
        host = tn.array  # created with the margins set to the padding value
        assert host is not None
        host[tn.logical_slices()] = view
    return tn


__all__ = ["create_from_padded", "create_with_reshape"]
