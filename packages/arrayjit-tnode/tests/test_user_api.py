"""The node API as a user reads it in the README: arguments given in the forms it names."""

from __future__ import annotations

import pytest

from arrayjit_tnode import MemoryModeError, Tnode, UsageError
from arrayjit_tnode import memory_mode as mm


def test_create_takes_a_bare_memory_mode_or_a_pair() -> None:
    v = Tnode.create((2,), label="v", memory_mode=mm.Virtual())
    assert v.memory_mode == mm.Virtual() and v.memory_mode_provenance == 0
    d = Tnode.create((2,), label="d", memory_mode=(mm.Device_only(), 5))
    assert d.memory_mode == mm.Device_only() and d.memory_mode_provenance == 5
    with pytest.raises(MemoryModeError, match="v2#"):
        Tnode.create((2,), label="v2", memory_mode=mm.Virtual(), hosted=True)


@pytest.mark.parametrize(
    "bad", [mm.Virtual, "Virtual", (mm.Local(),), (mm.Local(), "1"), (mm.Local(), True), 3]
)
def test_a_memory_mode_that_is_not_a_mode_instance_is_refused(bad: object) -> None:
    with pytest.raises(UsageError, match=r"memory.mode"):
        Tnode.create((2,), label="m", memory_mode=bad)  # type: ignore[arg-type]


def test_update_memory_mode_checks_its_arguments() -> None:
    tn = Tnode.create((2,), label="u")
    with pytest.raises(UsageError, match=r"u#\d+: a memory mode must be an instance"):
        tn.update_memory_mode(mm.Virtual, 1)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="provenance must be an int"):
        tn.update_memory_mode(mm.Virtual(), None)  # type: ignore[arg-type]
    assert tn.memory_mode is None
    tn.update_memory_mode(mm.Never_virtual(), 3)
    assert tn.memory_mode == mm.Never_virtual()


def test_precision_given_as_a_numpy_type_or_dtype() -> None:
    import ml_dtypes
    import numpy as np

    from arrayjit_tnode import Prec

    pairs = [
        (np.float32, Prec.single),
        (np.float64, Prec.double),
        (np.float16, Prec.half),
        (np.int32, Prec.int32),
        (np.uint8, Prec.byte),
        (np.uint64, Prec.uint64),
        (ml_dtypes.bfloat16, Prec.bfloat16),
        (ml_dtypes.float8_e5m2, Prec.fp8),
        (np.dtype("int64"), Prec.int64),
    ]
    for given, want in pairs:
        assert Tnode.create((1,), prec=given).prec is want  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="unknown precision"):
        Tnode.create((1,), prec=np.complex64)  # type: ignore[arg-type]


def test_set_values_reads_python_ints_exactly() -> None:
    """numpy infers float64 for ``[2**64 - 1, 0, 1]``: the node still gets the exact ints."""
    import numpy as np

    u = Tnode.create((3,), prec="uint64", label="u", hosted=True)
    u.set_values([2**64 - 1, 0, 1])
    assert u.get_values().tolist() == [2**64 - 1, 0, 1]
    i = Tnode.create((2, 2), prec="int64", label="i", hosted=True)
    i.set_values([[-(2**63), 2**63 - 1], [0, 5]])
    assert i.get_values().tolist() == [[-(2**63), 2**63 - 1], [0, 5]]
    with pytest.raises(UsageError, match=r"i#\d+: value 18446744073709551615 is out of the range"):
        i.set_values([[2**64 - 1, 0], [0, 0]])
    with pytest.raises(UsageError, match="do not convert"):
        u.set_values([2**64 - 1, 0.5, 1])  # a float among them: refused as before
    f = Tnode.create((2,), prec="double", label="f", hosted=True)
    f.set_values([2**64 - 1, 0])  # a float node takes ints as numpy converts them
    np.testing.assert_array_equal(f.get_values(), [2.0**64, 0.0])


def test_a_bool_is_not_an_index() -> None:
    import numpy as np

    x = Tnode.create((3, 2), label="x", hosted=True)
    x.set_value((1, 0), 5.0)
    for bad in [(True, 0), (np.True_, 0)]:
        with pytest.raises(UsageError, match=r"x#\d+: index .* is not a sequence of integers"):
            x.get_value(bad)
        with pytest.raises(UsageError, match="is not a sequence of integers"):
            x.set_value(bad, 1.0)
    assert x.get_value((np.int8(1), 0)) == 5.0


def test_create_checks_label_and_padding_forms() -> None:
    import numpy as np

    from arrayjit_tnode import Padding

    assert Tnode.create((2,), label=None).label == []
    with pytest.raises(UsageError, match="label 3 or padding"):
        Tnode.create((2,), label=3)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=r"label .* or padding \(\(1, 1\),\) is invalid"):
        Tnode.create((2,), padding=((1, 1),))  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="the value must be a number or None, got 'x'"):
        Padding(((1, 1),), "x")  # type: ignore[arg-type]
    cases = [("int32", 0.5, 0), ("byte", -1.0, 0), ("uint16", 70000, 65535), ("int32", np.nan, 0)]
    cases += [("int64", -2.5, -2), ("int32", -np.inf, -(2**31))]
    for prec, value, held in cases:  # the IR's saturating float-to-integer rule
        tn = Tnode.create((1,), prec=prec, hosted=True, padding=Padding(((1, 0),), value))
        assert tn.array is not None and tn.array.tolist() == [held, 0], (prec, value)
    ok = Tnode.create((2,), prec="byte", hosted=True, padding=Padding(((1, 0),), 255.0))
    np.testing.assert_array_equal(ok.array, [255, 0, 0])
    f = Tnode.create((1,), prec="half", hosted=True, padding=Padding(((0, 1),), np.float32(1.5)))
    np.testing.assert_array_equal(f.array, [0.0, 1.5])
