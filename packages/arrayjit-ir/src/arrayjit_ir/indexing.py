"""Indexing: symbols, static symbols, axis indices.

(Projections and einsum specs are defined in :mod:`arrayjit_ir.projections`.)
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass, field

_symbol_ids = itertools.count(1)
_symbol_lock = threading.Lock()


@dataclass(frozen=True, order=True)
class Symbol:
    """A loop iterator. Printed as ``i<id>``."""

    id: int

    def __str__(self) -> str:
        return f"i{self.id}"


def fresh_symbol() -> Symbol:
    """A new, unique loop symbol."""
    with _symbol_lock:
        return Symbol(next(_symbol_ids))


@dataclass(frozen=True)
class StaticSymbol:
    """An integer bound when a routine runs (e.g. a batch index), optionally with a range
    ``0 <= value < range``. Identity is the name; the range does not take part in equality."""

    name: str
    range: int | None = field(default=None, compare=False)

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Fixed_idx:
    """A constant position."""

    value: int


@dataclass(frozen=True)
class Iterator:
    """The value of a loop symbol or static symbol."""

    symbol: Symbol | StaticSymbol


@dataclass(frozen=True)
class Affine:
    """``sum(coeff * symbol) + offset``."""

    terms: tuple[tuple[int, Symbol | StaticSymbol], ...]
    offset: int = 0


AxisIndex = Fixed_idx | Iterator | Affine


def index_symbols(idx: AxisIndex) -> tuple[Symbol | StaticSymbol, ...]:
    """The symbols an axis index mentions."""
    match idx:
        case Fixed_idx():
            return ()
        case Iterator(symbol=s):
            return (s,)
        case Affine(terms=terms):
            return tuple(s for _, s in terms)
    raise TypeError(f"not an axis index: {idx!r}")
