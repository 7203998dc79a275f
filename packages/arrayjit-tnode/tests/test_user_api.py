"""The node API as a user reads it in the README: arguments given in the forms it names."""

from __future__ import annotations

import pytest

from arrayjit_tnode import MemoryModeError, Tnode, UsageError
from arrayjit_tnode import memory_mode as mm
from arrayjit_tnode import precision as P


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
    with pytest.raises(UsageError, match=r"label must be a str, a sequence of str or None, got 3"):
        Tnode.create((2,), label=3)  # type: ignore[arg-type]
    with pytest.raises(
        UsageError, match=r"node node#\d+: padding must be a Padding or None, got \(\(1, 1\),\)"
    ):
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


@pytest.mark.parametrize(
    "label,message",
    [
        (b"x", r"label must be a str, a sequence of str or None, got b'x' \(bytes\)"),
        (bytearray(b"x"), r"label must be a str, a sequence of str or None, got bytearray"),
        (5, r"label must be a str, a sequence of str or None, got 5 \(int\)"),
        ({"a": 1}, r"label must be a str, a sequence of str or None, got \{'a': 1\} \(dict\)"),
        (["a", 3], r"label components must be str, got 3 \(int\) in \['a', 3\]"),
        ([None], r"label components must be str, got None \(NoneType\) in \[None\]"),
        (["a", ["b"]], r"label components must be str, got \['b'\] \(list\) in \['a', \['b'\]\]"),
        (("a", b"b"), r"label components must be str, got b'b' \(bytes\)"),
    ],
)
def test_a_label_that_is_not_str_or_a_sequence_of_str_is_refused(
    label: object, message: str
) -> None:
    """Nothing is converted with ``str``: ``b"x"`` never becomes ``'120'``, ``[None]`` never
    ``'None'``."""
    with pytest.raises(UsageError, match=r"^Tnode.create: " + message):
        Tnode.create((2,), label=label)  # type: ignore[arg-type]


def test_label_accepted_forms() -> None:
    assert Tnode.create((2,), label="w").label == ["w"]
    assert Tnode.create((2,), label=["mlp", "x"]).label == ["mlp", "x"]
    assert Tnode.create((2,), label=("mlp", "x")).label == ["mlp", "x"]
    assert Tnode.create((2,), label=[]).label == []
    assert Tnode.create((2,)).label == []


def test_a_wrong_padding_is_blamed_alone() -> None:
    """A fine label with a wrong padding: the message is about the padding and names the node."""
    with pytest.raises(UsageError, match=r"node p#\d+: padding must be a Padding or None") as exc:
        Tnode.create((2,), label="p", padding=[(1, 1)])  # type: ignore[arg-type]
    assert "got [(1, 1)] (list)" in str(exc.value)
    assert "label" not in str(exc.value)


def test_a_specified_precision_cannot_change_even_unread() -> None:
    """The README's two rules: a specified precision never changes to another one (read or
    not); a default one can change until read."""
    spec = Tnode.create((2,), prec=P.single, label="s")
    with pytest.raises(
        UsageError,
        match=r"node s#\d+: precision already specified as single, cannot change it to double",
    ):
        spec.update_prec(P.double)
    spec.update_prec(P.single)  # the same one: fine
    assert spec.prec_state == "specified" and spec.prec is P.single
    default = Tnode.create((2,), label="d")
    default.update_prec(P.double)  # a default, unread: replaced
    assert default.prec is P.double
    read = Tnode.create((2,), label="r")
    assert read.prec is P.single
    with pytest.raises(
        UsageError, match=r"node r#\d+: precision single was already used, cannot change it to half"
    ):
        read.update_prec(P.half)


@pytest.mark.parametrize("bad", ["my-name", "9lives", "", "a b", "caf\u00e9", "x\n", 5, b"x"])
def test_code_name_must_be_a_c_identifier(bad: object) -> None:
    tn = Tnode.create((2,), label="cn")
    with pytest.raises(UsageError, match=r"node cn#\d+: code_name must be a C identifier") as exc:
        tn.code_name = bad  # type: ignore[assignment]
    text = str(exc.value)
    assert f"got {bad!r} ({type(bad).__name__})" in text
    assert "ASCII letters, digits and underscores, not starting with a digit" in text
    assert tn.code_name is None and tn.debug_name == "cn"


def test_code_name_accepts_identifiers_and_none() -> None:
    tn = Tnode.create((2,), label="cn")
    for good in ["custom", "_x", "x9", "X_1_y"]:
        tn.code_name = good
        assert tn.code_name == good and tn.debug_name == good
    tn.code_name = None
    assert tn.debug_name == "cn"


def test_update_memory_sharing_checks_its_arguments() -> None:
    tn = Tnode.create((2,), label="u")
    for bad in ["Shared_cross_streams", mm.Sharing, 1, None]:
        with pytest.raises(
            UsageError, match=r"node u#\d+: a sharing must be a member of Sharing"
        ) as exc:
            tn.update_memory_sharing(bad, 1)  # type: ignore[arg-type]
        assert f"got {bad!r} ({type(bad).__name__})" in str(exc.value)
    for prov in [None, "1", True, 1.0]:
        with pytest.raises(
            UsageError, match=r"node u#\d+: a sharing provenance must be an int, got"
        ):
            tn.update_memory_sharing(mm.Sharing.Per_stream, prov)  # type: ignore[arg-type]
    assert tn.sharing is mm.Sharing.Unset and tn.memory_mode is None
    tn.update_memory_sharing(mm.Sharing.Shared_cross_streams, 1)
    tn.update_memory_mode(mm.On_device(), 3)
    assert tn.memory_mode == mm.On_device(mm.Sharing.Shared_cross_streams)


def test_mode_constructors_check_their_fields() -> None:
    """A sharing or memory type given to a mode as a name, class or number is refused where
    the mode is built, not when it is printed or refined later."""
    for make, bad in [
        (mm.On_device, "Shared_cross_streams"),
        (mm.On_device, 1),
        (mm.Changed_on_devices, "Per_stream"),
    ]:
        with pytest.raises(UsageError, match=r"a sharing must be a member of Sharing") as exc:
            make(bad)
        assert str(exc.value).startswith(f"{make.__name__}: ")
        assert f"got {bad!r} ({type(bad).__name__})" in str(exc.value)
    for bad_type in [mm.Constant, "Constant", None]:
        with pytest.raises(UsageError, match=r"Hosted: the memory type must be an instance"):
            mm.Hosted(bad_type)  # type: ignore[arg-type]
    assert str(mm.Hosted(mm.Changed_on_devices(mm.Sharing.Per_stream))) == (
        "Hosted(Changed_on_devices(Per_stream))"
    )
