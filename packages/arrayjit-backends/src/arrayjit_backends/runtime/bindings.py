"""Static-index bindings of a routine, and the checks that compile and link make.

- :class:`Bindings`: the values of a routine's static indices, by symbol name. It is a
  :class:`~collections.abc.MutableMapping`, not a ``dict`` subclass, so every way to change it
  (``b[k] = v``, ``update``, ``setdefault``, ``|=``) goes through one checked ``__setitem__``:
  a value must be an integer within the symbol's range, which compile sets to what keeps every
  access in bounds (:mod:`arrayjit_ir.bounds`). Removing a binding is refused.
- :func:`with_static_ranges`: an optimized routine whose static symbols carry those ranges.
- :func:`check_code_kind`: code compiled by one kind of backend cannot be linked into another's
  context (a cc library in an llvm context, an OpenCL program in another OpenCL context).
- :func:`check_host_memory_types`: a routine may not write a hosted node whose memory type says
  it never changes on devices; the others it writes become ``Changed_on_devices``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from typing import Any

import numpy as np

from arrayjit_ir import bounds
from arrayjit_ir import low_level as L
from arrayjit_ir.assignments import Accum_op, Block, Comp, Fetch, Noop
from arrayjit_ir.indexing import StaticSymbol
from arrayjit_ir.optimized import Optimized
from arrayjit_tnode import MemoryModeError, UsageError
from arrayjit_tnode import memory_mode as mm

INDEX_LIMIT = 1 << 63
"""Static indices are passed to generated code as signed 64-bit integers."""


ASSIGNMENT_TYPES = (Accum_op, Fetch, Block, Noop)


class Bindings(MutableMapping[str, int]):
    """Static-index values of a routine, by symbol name (all 0 at first; the symbol itself is
    accepted as a key too), each checked against its symbol's range whichever way it is set."""

    __slots__ = ("_routine", "_symbols", "_values")

    def __init__(self, symbols: Sequence[StaticSymbol], routine: str) -> None:
        self._symbols = {s.name: s for s in symbols}
        self._values = {s.name: 0 for s in symbols}
        self._routine = routine

    def __getitem__(self, key: str | StaticSymbol) -> int:
        return self._values[key.name if isinstance(key, StaticSymbol) else key]

    def __setitem__(self, key: str | StaticSymbol, value: int) -> None:
        """Set a static index, named or given as its symbol.

        Raises:
            UsageError: the routine has no such static index, ``value`` is not an integer
                (``bool`` and floats are refused, never truncated), or it is out of the
                symbol's range ``0 <= value < range``.
        """
        if isinstance(key, StaticSymbol):
            key = key.name
        sym = self._symbols.get(key)
        if sym is None:
            raise UsageError(
                f"routine {self._routine} has no static index {key!r}; it has "
                f"{sorted(self._symbols)}"
            )
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
            raise UsageError(
                f"routine {self._routine}: static index {key} must be an integer, got {value!r}"
            )
        v = int(value)
        limit = sym.range if sym.range is not None else INDEX_LIMIT
        if v < 0 or v >= limit:
            valid = f"0..{limit - 1}"
            raise UsageError(
                f"routine {self._routine}: static index {key} = {v} is out of range "
                f"(valid: {valid})"
            )
        self._values[key] = v

    def __delitem__(self, key: str) -> None:
        raise UsageError(
            f"routine {self._routine}: static index {key!r} cannot be removed, only set"
        )

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def update(self, other: Any = (), /, **kwargs: int) -> None:
        """Set several static indices at once: all of them, or (on any error) none.

        Raises:
            UsageError: ``other`` is neither a mapping nor pairs of names and values, or a
                value is refused (see :meth:`__setitem__`); nothing was changed.
        """
        try:
            pairs = list(other.items() if isinstance(other, Mapping) else other)
            items = [(k, v) for k, v in pairs] + list(kwargs.items())
        except (TypeError, ValueError):
            raise UsageError(
                f"routine {self._routine}: bindings must map static index names to integers, "
                f"got {other!r} ({type(other).__name__})"
            ) from None
        saved = dict(self._values)
        try:
            for k, v in items:
                self[k] = v
        except BaseException:
            self._values = saved
            raise

    def __ior__(self, other: Mapping[str, int] | Any) -> Bindings:
        self.update(other)
        return self

    def ranges(self) -> dict[str, int | None]:
        """Each static index's range (``None``: any non-negative value)."""
        return {name: s.range for name, s in self._symbols.items()}

    def __repr__(self) -> str:
        return f"Bindings({self._values!r}, routine={self._routine!r})"


def with_static_ranges(
    opt: Optimized, lowered: L.Stmt, symbols: Sequence[StaticSymbol]
) -> Optimized:
    """``opt`` with its static symbols carrying the ranges that keep every access of
    ``lowered`` (its unoptimized code) in bounds.

    Raises:
        UsageError: a declared range exceeds what the accesses allow (see
            :func:`arrayjit_ir.bounds.static_ranges`).
    """
    if not opt.static_symbols and not symbols:
        return opt  # ``lower`` already checked every access; no range to find
    ranges = bounds.static_ranges(lowered, symbols)
    return dataclasses.replace(opt, static_symbols=bounds.with_ranges(opt.static_symbols, ranges))


def check_compile_args(comp: object, name: object, symbols: object) -> tuple[StaticSymbol, ...]:
    """Refuse arguments of ``compile`` of the wrong type; returns the static symbols to bind,
    each once (a symbol given twice is one kernel parameter).

    Raises:
        UsageError: ``comp`` is not a computation or assignment, ``name`` not a string, or
            ``symbols`` not a sequence of :class:`StaticSymbol` (each names the argument).
    """
    if not isinstance(comp, (Comp, *ASSIGNMENT_TYPES)):
        raise UsageError(
            f"compile: expected a Comp or an assignment (ir.block, ir.accum...), got {comp!r}"
        )
    if not isinstance(name, str):
        raise UsageError(f"compile: name must be a string, got {name!r}")
    if isinstance(symbols, (str, bytes)) or not isinstance(symbols, Sequence):
        raise UsageError(
            f"compile {name}: bindings must be a list of StaticSymbol, got {symbols!r}"
        )
    for s in symbols:
        if not isinstance(s, StaticSymbol):
            raise UsageError(f"compile {name}: bindings must be StaticSymbol values, got {s!r}")
    return tuple(dict.fromkeys(symbols))


def check_code_kind(code_kind: str, context_kind: str, routine: str, backend: str) -> None:
    """Refuse code compiled for another kind of backend.

    Raises:
        UsageError: the kinds differ (names the routine and both kinds).
    """
    if code_kind != context_kind:
        raise UsageError(
            f"link {routine}: the code was compiled for {code_kind}, not for backend {backend} "
            f"({context_kind}); compile it with the backend that links it"
        )


PROV_WRITTEN_ON_DEVICE = 60
"""Provenance of the ``Hosted(Changed_on_devices)`` refinement a routine writing a hosted node
makes (see :func:`check_host_memory_types`)."""


def check_host_memory_types(opt: Optimized) -> None:
    """Enforce the seed's host memory types on the hosted nodes a routine writes.

    ``Constant`` never changes after initialization and ``Volatile`` changes only on the host
    (reaching devices by ``from_host``, then maybe ``device_to_device``): a routine writing
    either is refused. Any other hosted node a routine writes changes on devices, so its type is
    refined to ``Changed_on_devices`` (keeping its sharing), as the seed's lattice says.

    Raises:
        MemoryModeError: the routine writes a ``Hosted(Constant)`` or ``Hosted(Volatile)`` node
            (the message names the node and the routine).
    """
    for tn in opt.outputs:
        mode = tn.memory_mode
        if not isinstance(mode, mm.Hosted):
            continue
        if isinstance(mode.memory_type, (mm.Constant, mm.Volatile)):
            meaning = (
                "never changes after initialization"
                if isinstance(mode.memory_type, mm.Constant)
                else "changes only on the host (reaching devices by from_host)"
            )
            raise MemoryModeError(
                f"routine {opt.name} writes node {tn.debug_label}, whose memory mode {mode} "
                f"(provenance {tn.memory_mode_provenance}) says it {meaning}"
            )
        try:
            tn.update_memory_mode(mm.Hosted(mm.Changed_on_devices()), PROV_WRITTEN_ON_DEVICE)
        except MemoryModeError as exc:
            raise MemoryModeError(
                f"routine {opt.name} writes node {tn.debug_label}: {exc}"
            ) from None


__all__ = [
    "PROV_WRITTEN_ON_DEVICE",
    "Bindings",
    "check_code_kind",
    "check_compile_args",
    "check_host_memory_types",
    "with_static_ranges",
]
