"""Assignments: the high-level IR a front end writes.

- :class:`Accum_op`: for every point ``p`` of the product space,
  ``lhs[p] = accum(lhs[p], op(rhs1[p1], ...))``; without ``accum`` it is plain assignment.
  ``initialize_neutral`` pre-fills the left-hand side with the neutral element of ``accum``
  unless the projections cover every cell exactly once (surjective and injective).
- :class:`Fetch` fills a node: :class:`Constant`, :class:`Range_over_offsets`, :class:`Slice`,
  :class:`Embed_symbol`, :class:`Constant_fill`.
- :class:`Block` sequences assignments; :class:`Noop` does nothing.
- A right-hand side may be :class:`Merge_buffer` of a node: the value another stream sent with
  ``device_to_device(into_merge_buffer=...)``.
- :class:`Comp`: assignments plus the nodes they embed.
"""

from __future__ import annotations

from collections.abc import Iterator as PyIterator
from dataclasses import dataclass, field

from arrayjit_ir import ops
from arrayjit_ir.indexing import StaticSymbol
from arrayjit_ir.projections import Projections
from arrayjit_tnode import Tnode


@dataclass(frozen=True)
class Merge_buffer:
    """The merge buffer of the stream, holding a value of ``tn``."""

    tn: Tnode


Rhs = Tnode | Merge_buffer


def rhs_node(r: Rhs) -> Tnode:
    """The node a right-hand side reads (the node whose value a merge buffer holds)."""
    return r.tn if isinstance(r, Merge_buffer) else r


@dataclass(frozen=True)
class Accum_op:
    """``lhs =accum op(rhs...)`` over ``projections``."""

    lhs: Tnode
    op: ops.Binop | ops.Unop | ops.Ternop
    rhs: tuple[Rhs, ...]
    accum: ops.Binop | None
    initialize_neutral: bool
    projections: Projections


# ---- fetch ops ----


@dataclass(frozen=True)
class Constant:
    """Fill with one value."""

    value: float

    def __post_init__(self) -> None:
        # A numpy scalar (np.float32(0.5)) becomes the Python number it holds: the renderers
        # write values as Python literals, and "np.float32(0.5)" is not one.
        item = getattr(self.value, "item", None)
        if type(self.value) not in (int, float, bool) and callable(item):
            object.__setattr__(self, "value", item())


@dataclass(frozen=True)
class Range_over_offsets:
    """Each cell gets its row-major offset."""


@dataclass(frozen=True)
class Slice:
    """``lhs[idx...] = source[batch, idx...]`` with ``batch`` bound when the routine runs."""

    batch: StaticSymbol
    source: Tnode


@dataclass(frozen=True)
class Embed_symbol:
    """Every cell gets the run-time value of a static symbol."""

    symbol: StaticSymbol


@dataclass(frozen=True)
class Constant_fill:
    """Row-major values, one per cell (unrolled into the code)."""

    values: tuple[float, ...]


FetchOp = Constant | Range_over_offsets | Slice | Embed_symbol | Constant_fill


@dataclass(frozen=True)
class Fetch:
    """Fill ``lhs`` by ``fetch_op``."""

    lhs: Tnode
    fetch_op: FetchOp


@dataclass(frozen=True)
class Block:
    """Assignments run in order."""

    items: tuple[Assignment, ...]


@dataclass(frozen=True)
class Noop:
    """Does nothing."""


Assignment = Accum_op | Fetch | Block | Noop


def flatten(a: Assignment) -> PyIterator[Accum_op | Fetch]:
    """The leaf assignments of ``a``, in order."""
    match a:
        case Block(items=items):
            for item in items:
                yield from flatten(item)
        case Noop():
            return
        case _:
            yield a


def nodes(a: Assignment) -> list[Tnode]:
    """Every node ``a`` reads or writes, in first-appearance order."""
    seen: dict[Tnode, None] = {}
    for leaf in flatten(a):
        seen[leaf.lhs] = None
        if isinstance(leaf, Accum_op):
            for r in leaf.rhs:
                seen[rhs_node(r)] = None
        elif isinstance(leaf.fetch_op, Slice):
            seen[leaf.fetch_op.source] = None
    return list(seen)


def static_symbols(a: Assignment) -> list[StaticSymbol]:
    """Static symbols ``a`` mentions directly (fetch ops), in first-appearance order."""
    found: dict[StaticSymbol, None] = {}
    for leaf in flatten(a):
        if isinstance(leaf, Fetch):
            if isinstance(leaf.fetch_op, Slice):
                found[leaf.fetch_op.batch] = None
            elif isinstance(leaf.fetch_op, Embed_symbol):
                found[leaf.fetch_op.symbol] = None
    return list(found)


@dataclass(frozen=True)
class Comp:
    """A computation: assignments plus the nodes they embed (nodes whose values the
    computation itself initializes, so a linked context need not provide them)."""

    assignments: Assignment
    embedded_nodes: frozenset[Tnode] = field(default_factory=frozenset)

    @staticmethod
    def of(x: Comp | Assignment) -> Comp:
        """``x`` as a computation."""
        return x if isinstance(x, Comp) else Comp(x)
