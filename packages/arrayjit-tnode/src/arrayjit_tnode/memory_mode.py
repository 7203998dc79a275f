"""Memory modes: where a tensor node lives, as a lattice of decisions.

Every mode stands for a set of *leaf* choices: ``Virtual`` (never stored), ``Local`` (stored
inside one kernel run), ``On_device`` (persistent device buffer) and ``Hosted`` (device buffers
plus a host array). Refining a mode intersects those sets; an empty intersection is a conflict.

======================  =========================================
mode                    leaf choices it allows
======================  =========================================
``Effectively_constant``  Virtual, On_device, Hosted(Constant)
``Virtual``               Virtual
``Never_virtual``         Local, On_device, Hosted
``Local``                 Local
``Device_only``           Local, On_device
``On_device(sharing)``    On_device
``Materialized``          On_device, Hosted
``Hosted(memory_type)``   Hosted
======================  =========================================

The family is closed under intersection, so every refinement lands on one of these modes. The
sharing of ``On_device`` and of ``Hosted(Changed_on_devices(..))`` and the host memory type refine
in their own small lattices: ``Sharing.Unset`` refines to ``Per_stream`` or
``Shared_cross_streams`` (which conflict); ``Unset_hosted`` refines to ``Constant`` or
``Nonconstant``, and ``Nonconstant`` to ``Changed_on_devices`` or ``Volatile``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from arrayjit_tnode.errors import UsageError


class Sharing(enum.Enum):
    """How the streams of one device share a node's buffer."""

    Unset = "Unset"
    Per_stream = "Per_stream"
    """Each stream of a device has its own buffer."""
    Shared_cross_streams = "Shared_cross_streams"
    """One buffer per device, shared by its streams; a within-device copy is then a no-op."""


@dataclass(frozen=True)
class _Named:
    """A mode or memory type without fields: it prints as its name (``Virtual``)."""

    def __str__(self) -> str:
        return type(self).__name__


# ---- host memory types --------------------------------------------------------------------------


@dataclass(frozen=True)
class Unset_hosted(_Named):
    """Hosted, memory type not decided yet."""


@dataclass(frozen=True)
class Constant(_Named):
    """Never changes after initialization."""


@dataclass(frozen=True)
class Nonconstant(_Named):
    """One of ``Changed_on_devices`` or ``Volatile``."""


@dataclass(frozen=True)
class Changed_on_devices:
    """Changes on devices; reaches the host only by ``to_host``."""

    sharing: Sharing = Sharing.Unset

    def __post_init__(self) -> None:
        _check_sharing_field("Changed_on_devices", self.sharing)

    def __str__(self) -> str:
        return f"Changed_on_devices({self.sharing.value})"


@dataclass(frozen=True)
class Volatile(_Named):
    """Changes on the host; reaches devices by ``from_host`` (then maybe ``device_to_device``)."""


MemoryType = Unset_hosted | Constant | Nonconstant | Changed_on_devices | Volatile


def _check_sharing_field(who: str, sharing: object) -> None:
    if not isinstance(sharing, Sharing):
        names = ", ".join(f"Sharing.{s.name}" for s in Sharing)
        raise UsageError(
            f"{who}: a sharing must be a member of Sharing such as Sharing.Per_stream, got "
            f"{sharing!r} ({type(sharing).__name__}); sharings: {names}"
        )


# ---- memory modes -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Effectively_constant(_Named):
    """Does not change after initialization: ``Hosted(Constant)`` or a subset of ``Virtual``."""


@dataclass(frozen=True)
class Virtual(_Named):
    """Never stored: its computation is inlined, per scalar, wherever it is read."""


@dataclass(frozen=True)
class Never_virtual(_Named):
    """One of ``Local``, ``On_device``, ``Hosted``."""


@dataclass(frozen=True)
class Local(_Named):
    """Stored only inside one kernel run; never across calls, never merged across devices."""


@dataclass(frozen=True)
class Device_only(_Named):
    """One of ``Local``, ``On_device``."""


@dataclass(frozen=True)
class On_device:
    """Stored on the devices that compute it, persisted across calls; not on the host."""

    sharing: Sharing = Sharing.Unset

    def __post_init__(self) -> None:
        _check_sharing_field("On_device", self.sharing)

    def __str__(self) -> str:
        return f"On_device({self.sharing.value})"


@dataclass(frozen=True)
class Materialized(_Named):
    """One of ``On_device``, ``Hosted``."""


@dataclass(frozen=True)
class Hosted:
    """Has a host array as well as device copies."""

    memory_type: MemoryType = Unset_hosted()

    def __post_init__(self) -> None:
        if not isinstance(self.memory_type, MemoryType):
            raise UsageError(
                f"Hosted: the memory type must be an instance such as Constant() or Volatile(), "
                f"got {self.memory_type!r} ({type(self.memory_type).__name__})"
            )

    def __str__(self) -> str:
        return f"Hosted({self.memory_type})"


MemoryMode = (
    Effectively_constant
    | Virtual
    | Never_virtual
    | Local
    | Device_only
    | On_device
    | Materialized
    | Hosted
)

ALL_MODE_KINDS: tuple[type, ...] = (
    Effectively_constant,
    Virtual,
    Never_virtual,
    Local,
    Device_only,
    On_device,
    Materialized,
    Hosted,
)

# Leaf letters: V(irtual), L(ocal), D (On_device), H(osted).
_LEAVES: dict[type, frozenset[str]] = {
    Effectively_constant: frozenset("VDH"),
    Virtual: frozenset("V"),
    Never_virtual: frozenset("LDH"),
    Local: frozenset("L"),
    Device_only: frozenset("LD"),
    On_device: frozenset("D"),
    Materialized: frozenset("DH"),
    Hosted: frozenset("H"),
}
_BY_LEAVES: dict[frozenset[str], type] = {v: k for k, v in _LEAVES.items()}


class Conflict(Exception):
    """Raised by :func:`refine` when two decisions contradict each other (internal: the tensor
    node turns it into a :class:`~arrayjit_tnode.errors.MemoryModeError` with provenances)."""


def check_mode(who: str, mode: object, provenance: object) -> None:
    """Check ``(mode, provenance)``: ``mode`` an instance of one of the mode classes (not the
    class itself, not its name), ``provenance`` an ``int`` (not a ``bool``).

    Raises:
        UsageError: either is of the wrong type; the message starts with ``who``.
    """
    if not isinstance(mode, ALL_MODE_KINDS):
        names = ", ".join(f"{k.__name__}()" for k in ALL_MODE_KINDS)
        raise UsageError(
            f"{who}: a memory mode must be an instance such as Virtual() or On_device(), got "
            f"{mode!r} ({type(mode).__name__}); modes: {names}"
        )
    _check_provenance(who, "memory-mode", provenance)


def check_sharing(who: str, sharing: object, provenance: object) -> None:
    """Check ``(sharing, provenance)``: ``sharing`` a member of :class:`Sharing` (not its name),
    ``provenance`` an ``int`` (not a ``bool``).

    Raises:
        UsageError: either is of the wrong type; the message starts with ``who``.
    """
    _check_sharing_field(who, sharing)
    _check_provenance(who, "sharing", provenance)


def _check_provenance(who: str, what: str, provenance: object) -> None:
    if isinstance(provenance, bool) or not isinstance(provenance, int):
        raise UsageError(
            f"{who}: a {what} provenance must be an int, got {provenance!r} "
            f"({type(provenance).__name__})"
        )


def leaves(mode: MemoryMode) -> frozenset[str]:
    """The leaf choices (letters V, L, D, H) ``mode`` allows."""
    return _LEAVES[type(mode)]


def is_leaf(mode: MemoryMode) -> bool:
    """Whether ``mode`` is fully decided (Virtual, Local, On_device or Hosted)."""
    return len(leaves(mode)) == 1


def refine_sharing(old: Sharing, new: Sharing) -> Sharing:
    """The meet of two sharing decisions; raises :class:`Conflict` when they contradict."""
    if old is Sharing.Unset:
        return new
    if new is Sharing.Unset or new is old:
        return old
    raise Conflict(f"sharing {new.value} contradicts {old.value}")


def refine_memory_type(old: MemoryType, new: MemoryType) -> MemoryType:
    """The meet of two host memory types; raises :class:`Conflict` when they contradict."""
    if isinstance(old, Unset_hosted):
        return new
    if isinstance(new, Unset_hosted) or new == old:
        return old
    if isinstance(old, Nonconstant) and isinstance(new, (Changed_on_devices, Volatile)):
        return new
    if isinstance(new, Nonconstant) and isinstance(old, (Changed_on_devices, Volatile)):
        return old
    if isinstance(old, Changed_on_devices) and isinstance(new, Changed_on_devices):
        return Changed_on_devices(refine_sharing(old.sharing, new.sharing))
    raise Conflict(f"memory type {new} contradicts {old}")


def sharing_of(mode: MemoryMode | None) -> Sharing:
    """The sharing ``mode`` carries (``On_device`` and ``Hosted(Changed_on_devices)`` do),
    else ``Unset``."""
    if isinstance(mode, On_device):
        return mode.sharing
    if isinstance(mode, Hosted) and isinstance(mode.memory_type, Changed_on_devices):
        return mode.memory_type.sharing
    return Sharing.Unset


def _memory_type_of(mode: MemoryMode) -> MemoryType:
    if isinstance(mode, Hosted):
        return mode.memory_type
    if isinstance(mode, Effectively_constant):
        return Constant()
    return Unset_hosted()


def refine(old: MemoryMode | None, new: MemoryMode) -> MemoryMode:
    """The mode that satisfies both ``old`` and ``new`` (their meet in the lattice).

    Raises:
        Conflict: no mode satisfies both (e.g. ``Virtual`` after ``Hosted``, ``Local`` after
            ``On_device``, ``Hosted(Volatile)`` after ``Hosted(Constant)``).
    """
    if old is None:
        return new
    common = leaves(old) & leaves(new)
    if not common:
        raise Conflict(f"{new} contradicts {old}")
    kind = _BY_LEAVES[common]
    if kind is On_device:
        return On_device(refine_sharing(sharing_of(old), sharing_of(new)))
    if kind is Hosted:
        mem = refine_memory_type(_memory_type_of(old), _memory_type_of(new))
        return Hosted(mem)
    result: MemoryMode = kind()
    return result


def with_sharing(mode: MemoryMode, sharing: Sharing) -> MemoryMode | None:
    """``mode`` with its sharing refined to ``sharing``, or ``None`` if the mode has no place
    for sharing (Virtual, Local, undecided modes, other host memory types).
    ``Hosted(Nonconstant)`` specializes to ``Hosted(Changed_on_devices(sharing))``.

    Raises:
        Conflict: the mode already has a contradicting sharing.
    """
    match mode:
        case On_device(sharing=s):
            return On_device(refine_sharing(s, sharing))
        case Hosted(memory_type=Changed_on_devices(sharing=s)):
            return Hosted(Changed_on_devices(refine_sharing(s, sharing)))
        case Hosted(memory_type=Nonconstant()):
            return Hosted(Changed_on_devices(sharing))
    return None


def apply_sharing(mode: MemoryMode | None, sharing: Sharing) -> MemoryMode | None:
    """``mode`` once the node's sharing is known to be ``sharing``: specialized where the mode
    carries a sharing (see :func:`with_sharing`), unchanged where it has no place for one.

    Raises:
        Conflict: the mode already has a contradicting sharing, or the node is ``Virtual`` or
            ``Local`` (never in a persistent buffer, so never shared across streams) and
            ``sharing`` is ``Shared_cross_streams``.
    """
    if sharing is Sharing.Unset or mode is None:
        return mode
    if isinstance(mode, (Virtual, Local)) and sharing is Sharing.Shared_cross_streams:
        raise Conflict(f"a {mode} node has no buffer to share across streams")
    shared = with_sharing(mode, sharing)
    return mode if shared is None else shared


__all__ = [
    "ALL_MODE_KINDS",
    "Changed_on_devices",
    "Conflict",
    "Constant",
    "Device_only",
    "Effectively_constant",
    "Hosted",
    "Local",
    "Materialized",
    "MemoryMode",
    "MemoryType",
    "Never_virtual",
    "Nonconstant",
    "On_device",
    "Sharing",
    "Unset_hosted",
    "Virtual",
    "Volatile",
    "apply_sharing",
    "check_mode",
    "check_sharing",
    "is_leaf",
    "leaves",
    "refine",
    "refine_memory_type",
    "refine_sharing",
    "sharing_of",
    "with_sharing",
]
