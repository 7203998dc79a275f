"""The builder's checks of fetch values: a user's mistake is a UsageError at ``ir.fetch``, never
a value that fails somewhere in a renderer."""

from __future__ import annotations

import numpy as np
import pytest

from arrayjit_ir import ir
from arrayjit_tnode import Tnode, UsageError


@pytest.mark.parametrize("value", ["x", None, True, 1 + 2j, [1.0]])
def test_constant_must_be_a_number(value: object) -> None:
    y = Tnode.create((3,), label="y")
    with pytest.raises(UsageError, match=r"fetch into y#\d+: Constant value must be a number"):
        ir.fetch(y, ir.Constant(value))  # type: ignore[arg-type]


def test_constant_fill_values_must_be_numbers() -> None:
    y = Tnode.create((3,), label="y")
    with pytest.raises(UsageError, match=r"Constant_fill value 1 must be a number, got 'b'"):
        ir.fetch(y, ir.Constant_fill((1.0, "b", 3.0)))  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="Constant_fill values must be a tuple of numbers"):
        ir.fetch(y, ir.Constant_fill(3.0))  # type: ignore[arg-type]


def test_numpy_scalars_and_special_floats_are_numbers() -> None:
    y = Tnode.create((4,), label="y", prec="double", hosted=True)
    vals = (np.float32(1.5), np.int64(-2), float("nan"), -0.0)
    out = ir.interpret(ir.lower(ir.fetch(y, ir.Constant_fill(vals))), {y: np.zeros(4)})[y]
    np.testing.assert_array_equal(out, [1.5, -2.0, np.nan, -0.0])
    assert np.signbit(out[3])
    z = Tnode.create((2,), label="z", prec="int32", hosted=True)
    got = ir.interpret(ir.lower(ir.fetch(z, ir.Constant(np.int16(7)))), {z: np.zeros(2, np.int32)})
    np.testing.assert_array_equal(got[z], [7, 7])


def test_constant_fill_too_long_or_of_the_wrong_length_says_which() -> None:
    big = Tnode.create((5000,), label="big")
    with pytest.raises(UsageError, match=r"big#\d+ has 5000 cells; Constant_fill takes at most"):
        ir.lower(ir.fetch(big, ir.Constant_fill(tuple(range(5000)))))
    y = Tnode.create((3,), label="y")
    with pytest.raises(UsageError, match=r"y#\d+ has 3 cells but 2 values were given"):
        ir.lower(ir.fetch(y, ir.Constant_fill((1.0, 2.0))))
