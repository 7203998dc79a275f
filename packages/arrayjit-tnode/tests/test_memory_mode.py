"""The memory-mode lattice: every pair of modes refines, keeps, or conflicts."""

import pytest

from arrayjit_tnode import MemoryModeError, Tnode
from arrayjit_tnode import memory_mode as mm
from arrayjit_tnode.memory_mode import Sharing

MODES = {
    "E": mm.Effectively_constant(),
    "V": mm.Virtual(),
    "N": mm.Never_virtual(),
    "L": mm.Local(),
    "DO": mm.Device_only(),
    "D": mm.On_device(),
    "M": mm.Materialized(),
    "H": mm.Hosted(),
}
HC = mm.Hosted(mm.Constant())

# Rows: the current mode; columns: the update (E V N L DO D M H). "X" is a conflict.
TABLE = """
     E   V   N   L   DO  D   M   H
E    E   V   M   X   D   D   M   HC
V    V   V   X   X   X   X   X   X
N    M   X   N   L   DO  D   M   H
L    X   X   L   L   L   X   X   X
DO   D   X   DO  L   DO  D   D   X
D    D   X   D   X   D   D   D   X
M    M   X   M   X   D   D   M   H
H    HC  X   H   X   X   X   H   H
"""


def _cases() -> list[tuple[str, str, str]]:
    lines = [line.split() for line in TABLE.strip().splitlines()]
    cols = lines[0]
    return [(row[0], col, cell) for row in lines[1:] for col, cell in zip(cols, row[1:])]


@pytest.mark.parametrize("old,new,expected", _cases())
def test_every_pair_of_modes(old: str, new: str, expected: str) -> None:
    tn = Tnode.create((4,), label=["pair", f"{old}_{new}"])
    tn.update_memory_mode(MODES[old], 11)
    if expected == "X":
        with pytest.raises(MemoryModeError) as info:
            tn.update_memory_mode(MODES[new], 22)
        msg = str(info.value)
        assert f"pair.{old}_{new}#{tn.id}" in msg
        assert "provenance 22" in msg and "provenance 11" in msg
        assert tn.memory_mode == MODES[old]  # unchanged after a conflict
    else:
        tn.update_memory_mode(MODES[new], 22)
        want = HC if expected == "HC" else MODES[expected]
        assert tn.memory_mode == want
        # A refinement that changes nothing keeps the earlier provenance.
        assert tn.memory_mode_provenance == (11 if want == MODES[old] else 22)


@pytest.mark.parametrize(
    "old,new,expected",
    [
        (mm.Unset_hosted(), mm.Constant(), mm.Constant()),
        (mm.Unset_hosted(), mm.Volatile(), mm.Volatile()),
        (mm.Nonconstant(), mm.Volatile(), mm.Volatile()),
        (mm.Volatile(), mm.Nonconstant(), mm.Volatile()),
        (mm.Nonconstant(), mm.Changed_on_devices(), mm.Changed_on_devices()),
        (
            mm.Changed_on_devices(Sharing.Unset),
            mm.Changed_on_devices(Sharing.Per_stream),
            mm.Changed_on_devices(Sharing.Per_stream),
        ),
        (mm.Constant(), mm.Unset_hosted(), mm.Constant()),
        (mm.Constant(), mm.Volatile(), None),
        (mm.Constant(), mm.Nonconstant(), None),
        (mm.Volatile(), mm.Changed_on_devices(), None),
        (
            mm.Changed_on_devices(Sharing.Per_stream),
            mm.Changed_on_devices(Sharing.Shared_cross_streams),
            None,
        ),
    ],
)
def test_host_memory_types(old: mm.MemoryType, new: mm.MemoryType, expected: object) -> None:
    tn = Tnode.create((2,), label="h")
    tn.update_memory_mode(mm.Hosted(old), 1)
    if expected is None:
        with pytest.raises(MemoryModeError, match=r"h#\d+: memory mode Hosted"):
            tn.update_memory_mode(mm.Hosted(new), 2)
    else:
        tn.update_memory_mode(mm.Hosted(new), 2)
        assert tn.memory_mode == mm.Hosted(expected)  # type: ignore[arg-type]


def test_effectively_constant_meets_volatile_host_conflicts() -> None:
    tn = Tnode.create((2,), label="c")
    tn.update_memory_mode(mm.Effectively_constant(), 1)
    with pytest.raises(MemoryModeError, match="Volatile"):
        tn.update_memory_mode(mm.Hosted(mm.Volatile()), 2)


def test_on_device_sharing_refines_and_conflicts() -> None:
    tn = Tnode.create((2,), label="s")
    tn.update_memory_mode(mm.On_device(), 1)
    tn.update_memory_mode(mm.On_device(Sharing.Per_stream), 2)
    assert tn.memory_mode == mm.On_device(Sharing.Per_stream)
    with pytest.raises(MemoryModeError, match=r"s#\d+.*provenance 3.*provenance 2"):
        tn.update_memory_mode(mm.On_device(Sharing.Shared_cross_streams), 3)


def test_update_memory_sharing_keeps_the_mode() -> None:
    tn = Tnode.create((2,), label="d")
    tn.update_memory_mode(mm.On_device(), 1)
    tn.update_memory_sharing(Sharing.Shared_cross_streams, 2)
    assert tn.memory_mode == mm.On_device(Sharing.Shared_cross_streams)
    assert tn.sharing is Sharing.Shared_cross_streams
    assert tn.potentially_cross_stream() and not tn.known_non_cross_stream()
    with pytest.raises(MemoryModeError, match=r"d#\d+: sharing Per_stream \(provenance 3\)"):
        tn.update_memory_sharing(Sharing.Per_stream, 3)


def test_update_memory_sharing_specializes_hosted_nonconstant() -> None:
    tn = Tnode.create((2,), label="w", hosted=True)
    tn.update_memory_mode(mm.Hosted(mm.Nonconstant()), 1)
    tn.update_memory_sharing(Sharing.Per_stream, 2)
    assert tn.memory_mode == mm.Hosted(mm.Changed_on_devices(Sharing.Per_stream))
    assert tn.memory_mode_provenance == 2
    assert tn.known_non_cross_stream()


def test_sharing_before_mode_is_applied_later() -> None:
    tn = Tnode.create((2,), label="p")
    tn.update_memory_sharing(Sharing.Per_stream, 1)
    assert tn.memory_mode is None and tn.sharing is Sharing.Per_stream
    tn.update_memory_mode(mm.Materialized(), 2)
    tn.update_memory_mode(mm.On_device(), 3)
    assert tn.memory_mode == mm.On_device(Sharing.Per_stream)


def test_leaves_and_is_leaf() -> None:
    assert mm.leaves(mm.Materialized()) == frozenset("DH")
    assert mm.is_leaf(mm.Local()) and mm.is_leaf(mm.Hosted())
    assert not mm.is_leaf(mm.Never_virtual())
    assert mm.refine(None, mm.Local()) == mm.Local()


def test_mode_strings() -> None:
    assert str(mm.On_device(Sharing.Per_stream)) == "On_device(Per_stream)"
    assert str(mm.Hosted(mm.Changed_on_devices())) == "Hosted(Changed_on_devices(Unset))"
    assert [str(k()) for k in mm.ALL_MODE_KINDS][:3] == [
        "Effectively_constant",
        "Virtual",
        "Never_virtual",
    ]


S_U, S_P, S_C = Sharing.Unset, Sharing.Per_stream, Sharing.Shared_cross_streams


@pytest.mark.parametrize(
    "old,new,expected",
    [
        (S_U, S_U, S_U),
        (S_U, S_P, S_P),
        (S_U, S_C, S_C),
        (S_P, S_U, S_P),
        (S_P, S_P, S_P),
        (S_P, S_C, None),
        (S_C, S_U, S_C),
        (S_C, S_P, None),
        (S_C, S_C, S_C),
    ],
)
def test_refine_sharing(old: Sharing, new: Sharing, expected: Sharing | None) -> None:
    if expected is None:
        with pytest.raises(mm.Conflict, match="contradicts"):
            mm.refine_sharing(old, new)
    else:
        assert mm.refine_sharing(old, new) is expected


def test_refine_raises_conflict_and_meets() -> None:
    with pytest.raises(mm.Conflict, match="Virtual contradicts Hosted"):
        mm.refine(mm.Hosted(), mm.Virtual())
    assert mm.refine(mm.Device_only(), mm.Materialized()) == mm.On_device()
    assert mm.refine(mm.Effectively_constant(), mm.Never_virtual()) == mm.Materialized()
    assert mm.refine(mm.Materialized(), mm.Effectively_constant()) == mm.Materialized()
    assert mm.refine(mm.Effectively_constant(), mm.On_device(S_P)) == mm.On_device(S_P)
    assert mm.refine(mm.Hosted(mm.Nonconstant()), mm.Materialized()) == mm.Hosted(mm.Nonconstant())
    with pytest.raises(mm.Conflict, match="memory type"):
        mm.refine_memory_type(mm.Volatile(), mm.Constant())


@pytest.mark.parametrize(
    "mode,sharing,expected",
    [
        (None, S_C, None),
        (mm.On_device(), S_U, mm.On_device()),
        (mm.On_device(), S_P, mm.On_device(S_P)),
        (mm.On_device(S_C), S_C, mm.On_device(S_C)),
        (mm.On_device(S_C), S_P, "X"),
        (mm.Hosted(mm.Nonconstant()), S_C, mm.Hosted(mm.Changed_on_devices(S_C))),
        (mm.Hosted(mm.Changed_on_devices()), S_P, mm.Hosted(mm.Changed_on_devices(S_P))),
        (mm.Hosted(mm.Changed_on_devices(S_P)), S_C, "X"),
        (mm.Hosted(mm.Constant()), S_P, mm.Hosted(mm.Constant())),
        (mm.Hosted(mm.Volatile()), S_C, mm.Hosted(mm.Volatile())),
        (mm.Hosted(), S_P, mm.Hosted()),
        (mm.Virtual(), S_P, mm.Virtual()),
        (mm.Local(), S_P, mm.Local()),
        (mm.Virtual(), S_C, "X"),
        (mm.Local(), S_C, "X"),
        (mm.Never_virtual(), S_C, mm.Never_virtual()),
        (mm.Device_only(), S_P, mm.Device_only()),
        (mm.Materialized(), S_C, mm.Materialized()),
        (mm.Effectively_constant(), S_C, mm.Effectively_constant()),
    ],
    ids=str,
)
def test_apply_sharing(mode: mm.MemoryMode | None, sharing: Sharing, expected: object) -> None:
    if expected == "X":
        with pytest.raises(mm.Conflict):
            mm.apply_sharing(mode, sharing)
    else:
        assert mm.apply_sharing(mode, sharing) == expected


def test_with_sharing_has_no_place() -> None:
    assert mm.with_sharing(mm.Local(), S_P) is None
    assert mm.with_sharing(mm.Hosted(mm.Constant()), S_C) is None
    assert mm.with_sharing(mm.Materialized(), S_C) is None


def test_pending_sharing_conflicts_with_a_later_mode() -> None:
    tn = Tnode.create((2,), label="ps")
    tn.update_memory_sharing(S_P, 5)
    with pytest.raises(
        MemoryModeError,
        match=r"ps#\d+: memory mode On_device\(Shared_cross_streams\) \(provenance 6\) "
        r"contradicts None \(provenance None\) and sharing Per_stream \(provenance 5\)",
    ):
        tn.update_memory_mode(mm.On_device(S_C), 6)
    assert tn.memory_mode is None
    tn2 = Tnode.create((2,), label="ps2")
    tn2.update_memory_sharing(S_C, 7)
    with pytest.raises(MemoryModeError, match=r"Local \(provenance 8\).*provenance 7"):
        tn2.update_memory_mode(mm.Local(), 8)


def test_shared_sharing_on_local_or_virtual_conflicts() -> None:
    tn = Tnode.create((2,), label="loc", memory_mode=(mm.Local(), 3))
    tn.update_memory_sharing(S_P, 4)  # fine: a local node is per stream anyway
    assert tn.memory_mode == mm.Local() and tn.memory_mode_provenance == 3
    v = Tnode.create((2,), label="vir", memory_mode=(mm.Virtual(), 3))
    with pytest.raises(MemoryModeError, match=r"vir#\d+: sharing Shared_cross_streams .*Virtual"):
        v.update_memory_sharing(S_C, 4)


def test_unset_sharing_is_a_no_op() -> None:
    tn = Tnode.create((2,), memory_mode=(mm.On_device(S_P), 1))
    tn.update_memory_sharing(S_U, 2)
    assert tn.memory_mode == mm.On_device(S_P) and tn.memory_mode_provenance == 1


@pytest.mark.parametrize(
    "mode", [None, mm.Effectively_constant(), mm.Never_virtual(), mm.Device_only()], ids=str
)
def test_shared_nodes_settle_on_device(mode: mm.MemoryMode | None) -> None:
    tn = Tnode.create((2,), label="sh")
    if mode is not None:
        tn.update_memory_mode(mode, 1)
    tn.update_memory_sharing(S_C, 2)
    tn.default_to_most_local(3)
    assert tn.memory_mode == mm.On_device(S_C)
    assert tn.potentially_cross_stream()


def test_is_virtual_force_respects_shared_sharing() -> None:
    tn = Tnode.create((2,), label="sv")
    tn.update_memory_sharing(S_C, 1)
    assert not tn.is_virtual_force(2)
    assert tn.memory_mode == mm.On_device(S_C)


def test_constants_are_cross_stream_unless_per_stream() -> None:
    tn = Tnode.create((2,), memory_mode=(mm.Hosted(mm.Constant()), 1))
    assert tn.potentially_cross_stream()
    tn.update_memory_sharing(S_P, 2)
    assert not tn.potentially_cross_stream() and tn.known_non_cross_stream()
    assert tn.memory_mode == mm.Hosted(mm.Constant())
