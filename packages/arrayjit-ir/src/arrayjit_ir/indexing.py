"""Indexing: symbols, static symbols, axis indices.

(Projections and einsum specs are defined in :mod:`arrayjit_ir.projections`.)
"""

from __future__ import annotations

import itertools
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from arrayjit_tnode import UsageError

_symbol_ids = itertools.count(1)
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # rendered as a C parameter name
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
    ``0 <= value < range``. Identity is the name; the range does not take part in equality.
    A symbol without a range gets, at compile, the largest one that keeps every access in
    bounds (:mod:`arrayjit_ir.bounds`); a declared range larger than that is refused.

    Raises:
        UsageError: the name is not an identifier, or the range is not a positive integer.
    """

    name: str
    range: int | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _IDENT.fullmatch(self.name):
            raise UsageError(f"StaticSymbol: name must be an identifier, got {self.name!r}")
        r = self.range
        if r is not None and (isinstance(r, bool) or not isinstance(r, int) or r < 1):
            raise UsageError(
                f"StaticSymbol {self.name}: range must be a positive integer or None, got {r!r}"
            )

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
    if isinstance(idx, Iterator):  # isinstance chains: lowering asks for every index
        return (idx.symbol,)
    if isinstance(idx, Fixed_idx):
        return ()
    if isinstance(idx, Affine):
        return tuple([s for _, s in idx.terms])
    raise TypeError(f"not an axis index: {idx!r}")


def format_index(
    idx: AxisIndex,
    name: Callable[[Symbol | StaticSymbol], str],
    times: str = "*",
    plus: str = "+",
) -> str:
    """The text of an axis index, each symbol written as ``name`` gives it: a fixed index is its
    number, an affine one ``c*s+...+offset`` (a coefficient of 1 left out; ``0`` when it has no
    term). The pretty-printer and the C-like renderers write indices this one way, with their own
    spacing (``times``, ``plus``) and names."""
    match idx:
        case Fixed_idx(value=v):
            return str(v)
        case Iterator(symbol=s):
            return name(s)
        case Affine(terms=terms, offset=off):
            parts = [name(s) if c == 1 else f"{c}{times}{name(s)}" for c, s in terms]
            if off:
                parts.append(str(off))
            return plus.join(parts) or "0"
    raise TypeError(idx)
