"""The result of optimization: what backends compile and link.

:class:`Optimized` is the contract between the optimizer and every backend. A backend:
- declares a kernel-local array for each node whose mode is ``Local``;
- takes a buffer parameter for each node in :attr:`Optimized.context_nodes` (persistent, in the
  linked context);
- never declares ``Virtual`` nodes (they only appear through ``Local_scope`` / ``Get_local``);
- takes one integer parameter per static symbol, in :attr:`Optimized.static_symbols` order;
- takes a merge-buffer parameter when :attr:`Optimized.merge_node` is set.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from arrayjit_ir.indexing import StaticSymbol
from arrayjit_ir.low_level import Stmt

if TYPE_CHECKING:
    from arrayjit_tnode import Tnode


@dataclass
class TracedNode:
    """Facts the tracing pass gathered about one node of one routine."""

    tn: Tnode
    read_only: bool = False
    """Read and never written by this routine."""
    read_before_write: bool = False
    """Some cell is read before this routine writes it (the node is an input)."""
    zero_initialized_by_code: bool = False
    """The routine's first touch of the node is a ``Zero_out`` (no memset needed)."""
    zeroed_out: bool = False
    assigned: bool = False
    """The routine writes the node (``Set`` or ``Zero_out``)."""
    is_scalar_constexpr: bool = False
    """All dims are 1 and the node is assigned once from constants."""


@dataclass(frozen=True)
class Optimized:
    """Optimized low-level code of one routine, with its traced facts."""

    name: str
    code: Stmt
    traced: Mapping[Tnode, TracedNode]
    """Every node the code touches, in first-touch order (deterministic)."""
    static_symbols: tuple[StaticSymbol, ...] = ()
    merge_node: Tnode | None = None
    unoptimized: Stmt | None = field(default=None, compare=False)

    @property
    def context_nodes(self) -> tuple[Tnode, ...]:
        """Nodes that live in a persistent buffer of the context (modes settled by then)."""
        return tuple(tn for tn in self.traced if tn.is_in_context_force(30))

    @property
    def local_nodes(self) -> tuple[Tnode, ...]:
        """Nodes stored only inside one kernel run (``Local``)."""
        return tuple(
            tn for tn in self.traced if not tn.known_virtual() and not tn.is_in_context_force(30)
        )

    @property
    def inputs(self) -> tuple[Tnode, ...]:
        """Context nodes the routine reads before (or without) writing them."""
        return tuple(
            tn
            for tn in self.context_nodes
            if (self.traced[tn].read_only or self.traced[tn].read_before_write)
            and not tn.known_constant()
        )

    @property
    def outputs(self) -> tuple[Tnode, ...]:
        """Context nodes the routine writes."""
        return tuple(tn for tn in self.context_nodes if self.traced[tn].assigned)
