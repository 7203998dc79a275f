"""Nodes over existing arrays: create_with_reshape and create_from_padded, checked against
numpy's own reshape and slicing of the same data."""

import ml_dtypes
import numpy as np
import pytest

from arrayjit_tnode import Padding, UsageError, create_from_padded, create_with_reshape
from arrayjit_tnode import memory_mode as mm
from arrayjit_tnode import precision as P


def test_with_reshape_shares_the_base() -> None:
    base = np.arange(24, dtype=np.float32)
    tn = create_with_reshape(base, (2, 3, 4), label="x")
    assert tn.dims == (2, 3, 4) and tn.prec is P.single and tn.label == ["x"]
    assert tn.memory_mode == mm.Hosted(mm.Unset_hosted())
    np.testing.assert_array_equal(tn.get_values(), base.reshape(2, 3, 4))
    tn.set_value((1, 2, 3), -5.0)  # the node writes into the base ...
    assert base[23] == -5.0
    base[0] = 7.0  # ... and sees the base's writes
    assert tn.get_value((0, 0, 0)) == 7.0
    assert np.shares_memory(tn.array, base)


def test_with_reshape_precision_from_dtype_or_given() -> None:
    ints = create_with_reshape(np.arange(6, dtype=np.int64).reshape(2, 3), (3, 2))
    assert ints.prec is P.int64
    np.testing.assert_array_equal(ints.get_values(), [[0, 1], [2, 3], [4, 5]])
    bf = np.arange(4, dtype=ml_dtypes.bfloat16)
    assert create_with_reshape(bf, (2, 2)).prec is P.bfloat16
    lanes = np.arange(8, dtype=np.uint32)
    rng = create_with_reshape(lanes, (2,), prec="uint4x32")
    assert rng.prec is P.uint4x32 and rng.array is not None and rng.array.shape == (2, 4)
    with pytest.raises(UsageError, match=r"precision half keeps its host array as float16, the"):
        create_with_reshape(np.zeros(4, np.float32), (4,), prec="half", label="h")
    with pytest.raises(UsageError, match=r"no arrayjit precision has numpy dtype complex64"):
        create_with_reshape(np.zeros(4, np.complex64), (4,))


def test_with_reshape_refuses_wrong_sizes_and_copies() -> None:
    with pytest.raises(UsageError, match=r"the base has 6 elements \(shape \[2, 3\]\), the dims"):
        create_with_reshape(np.zeros((2, 3), np.float32), (4, 2), label="w")
    transposed = np.zeros((3, 4), np.float32).T
    with pytest.raises(UsageError, match=r"is not C-contiguous, so the node cannot share it"):
        create_with_reshape(transposed, (12,))
    with pytest.raises(UsageError, match=r"is not C-contiguous, so the node cannot share it"):
        create_with_reshape(np.zeros(8, np.float32)[::2], (2, 2))  # a view would not be one block
    with pytest.raises(UsageError, match=r"expects a numpy array, got list"):
        create_with_reshape([1.0, 2.0], (2,), label="l")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=r"padding must be a Padding or None, got tuple"):
        create_with_reshape(np.zeros(4, np.float32), (2,), padding=((1, 1),))  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=r"padding must be a Padding or None, got list"):
        create_from_padded(np.zeros(4, np.float32), [(1, 1)])  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=r"from_padded=True needs the padding"):
        create_with_reshape(np.zeros(4, np.float32), (4,), from_padded=True)


def test_with_reshape_adds_margins_by_copying() -> None:
    base = np.arange(6, dtype=np.float32)
    pad = Padding(((1, 0), (2, 1)), -1.0)
    tn = create_with_reshape(base, (2, 3), padding=pad)
    assert tn.dims == (3, 6) and tn.dims_without_padding == (2, 3)
    expected = np.pad(base.reshape(2, 3), ((1, 0), (2, 1)), constant_values=-1.0)
    np.testing.assert_array_equal(tn.array, expected)
    np.testing.assert_array_equal(tn.get_values(), base.reshape(2, 3))
    assert not np.shares_memory(tn.array, base)  # numpy cannot view margins onto an array
    # A non-contiguous base is fine here: its values are copied anyway.
    transposed = np.arange(6, dtype=np.float32).reshape(2, 3).T
    tn2 = create_with_reshape(transposed, (2, 3), padding=Padding(((0, 0), (1, 1)), 0.0))
    np.testing.assert_array_equal(tn2.get_values(), [[0, 3, 1], [4, 2, 5]])


def test_with_reshape_from_padded_base() -> None:
    padded = np.pad(np.arange(1, 7, dtype=np.float64).reshape(2, 3), ((1, 1), (0, 2)))
    base = padded.ravel()  # a flat buffer holding the padded layout
    tn = create_with_reshape(base, (2, 3), padding=Padding(((1, 1), (0, 2)), 0.0), from_padded=True)
    assert tn.dims == (4, 5) and tn.prec is P.double
    np.testing.assert_array_equal(tn.get_values(), padded[1:3, 0:3])
    tn.set_value((0, 0), 9.0)
    assert base[5] == 9.0  # row 1 (after the top margin), column 0
    with pytest.raises(UsageError, match=r"the padded dims \[4, 5\] need 20"):
        create_with_reshape(base[:-1], (2, 3), padding=tn.padding, from_padded=True)


def test_from_padded_shares_and_reads_the_logical_region() -> None:
    data = np.arange(12, dtype=np.float32).reshape(3, 4)
    arr = np.pad(data, ((2, 1), (0, 3)), constant_values=0.5)
    tn = create_from_padded(arr, Padding(((2, 1), (0, 3)), 0.5), label=["conv", "input"])
    assert tn.dims == arr.shape and tn.dims_without_padding == (3, 4)
    assert tn.array is arr
    np.testing.assert_array_equal(tn.get_values(), data)
    tn.set_values(-data)
    np.testing.assert_array_equal(arr[2:5, 0:4], -data)
    assert (arr[:2] == 0.5).all() and (arr[:, 4:] == 0.5).all()  # margins untouched


def test_from_padded_without_padding_and_unspecified_value() -> None:
    arr = np.arange(5, dtype=np.int32)
    tn = create_from_padded(arr, None)
    assert tn.padding is None and tn.dims == (5,) and tn.prec is P.int32
    np.testing.assert_array_equal(tn.get_values(), arr)
    junk = np.full((4,), 3.0, np.float32)  # value None: whatever the margins hold is accepted
    tn2 = create_from_padded(junk, Padding(((1, 1),), None))
    np.testing.assert_array_equal(tn2.get_values(), [3.0, 3.0])


def test_from_padded_checks_margins_and_shapes() -> None:
    arr = np.zeros((4, 4), np.float32)
    arr[0, 3] = 2.0
    with pytest.raises(UsageError, match=r"margins must hold the padding value 0.0, found 2.0"):
        create_from_padded(arr, Padding(((1, 1), (1, 1)), 0.0), label="m")
    nan_pad = np.pad(np.ones((2, 2), np.float32), 1, constant_values=np.nan)
    tn = create_from_padded(nan_pad, Padding(((1, 1), (1, 1)), float("nan")))
    np.testing.assert_array_equal(tn.get_values(), np.ones((2, 2), np.float32))
    nan_pad[0, 0] = 1.0
    with pytest.raises(UsageError, match=r"found 1.0"):
        create_from_padded(nan_pad, Padding(((1, 1), (1, 1)), float("nan")))
    with pytest.raises(UsageError, match=r"padding has 1 axes but the array has 2 dims"):
        create_from_padded(np.zeros((2, 2), np.float32), Padding(((0, 0),), 0.0))
    with pytest.raises(UsageError, match=r"margins \[\(2, 1\)\] are larger than the array's dims"):
        create_from_padded(np.zeros(2, np.float32), Padding(((2, 1),), 0.0))
    with pytest.raises(UsageError, match=r"uint4x32 array needs a trailing axis of 4 lanes"):
        create_from_padded(np.zeros((2, 3), np.uint32), None, prec="uint4x32")
    with pytest.raises(UsageError, match=r"is not C-contiguous: backends copy host arrays"):
        create_from_padded(np.zeros((3, 2), np.float32).T, None)
    lanes = create_from_padded(np.arange(12, dtype=np.uint32).reshape(3, 4), None, prec="uint4x32")
    assert lanes.dims == (3,)
