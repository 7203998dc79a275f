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
