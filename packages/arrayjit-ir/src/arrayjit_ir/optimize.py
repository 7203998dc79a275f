"""The optimizer: trace, virtualize (inline), clean up and settle modes, simplify, CSE, blocked
summation.

Passes, in order (as :func:`optimize` runs them):

1. **trace** — first the routine-wide checks: the static symbols the code needs are bound and
   it reads the merge buffer of at most one node; then per node: written, read, read-only,
   read before written, zero-initialized by code. Nodes that other routines share are made
   ``Materialized`` here, before anything is inlined.
2. **virtualize** — intermediate nodes are inlined where that keeps the meaning of the block
   and repeats no reduction or costly work (:mod:`arrayjit_ir.virtualize`): every read of such
   a node becomes a ``Local_scope`` computing that cell, and its statements disappear.
3. **cleanup** — stores to virtual nodes are gone; every remaining node settles to a leaf mode:
   inputs (read-only or read before written) and outputs (written, never read here) are
   materialized, other intermediates default to ``Local`` (small) or ``On_device``.
4. **simplify** — constant folding and exact identities (``x + 0``, ``x - 0``, ``x * 1``,
   ``x / 1``; never ``x * 0``, which is wrong for NaN and infinity); a local scope that only
   assigns a value becomes that value.
5. **CSE** — within a statement, an inlined computation equal to an earlier one (up to renaming
   of its own loop symbols and locals) reads the earlier local instead; across sibling
   statements inside a loop, such a computation is hoisted into a local before its first user
   when nothing in between writes what it reads (:mod:`arrayjit_ir.cse`). No local crosses the
   routine's top-level statements: each may run as a kernel of its own.
6. **blocked summation** — float sums of more than 64 terms become blocked, pairwise trees, so
   their error grows as log n (:mod:`arrayjit_ir.summation`).
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from arrayjit_ir import low_level as L
from arrayjit_ir import ops
from arrayjit_ir.cse import eliminate_common_subexpressions, hoist_across_statements
from arrayjit_ir.indexing import Affine, AxisIndex, Fixed_idx, Iterator, StaticSymbol
from arrayjit_ir.low_level import natural_prec, rounds_when_stored
from arrayjit_ir.margins import has_margins, is_margin_write
from arrayjit_ir.optimized import Optimized, TracedNode
from arrayjit_ir.summation import block_sums
from arrayjit_ir.virtualize import virtualize
from arrayjit_tnode import MemoryModeError, Prec, Tnode, UsageError
from arrayjit_tnode import memory_mode as mm
from arrayjit_tnode.tnode import STACK_THRESHOLD_BYTES

logger = logging.getLogger(__name__)

# Provenances of the decisions the optimizer takes (they appear in MemoryModeError messages).
PROV_VIRTUAL = 29
PROV_INPUT = 37
PROV_OUTPUT = 38
PROV_INTERMEDIATE = 1
PROV_SHARED = 39
PROV_SETTLE = 40

# ---- traversal helpers ----


def _top_level(s: L.Stmt) -> list[L.Stmt]:
    if isinstance(s, L.Seq):
        return list(s.stmts)
    if isinstance(s, L.Noop):
        return []
    return [s]


def _static_symbols(acc: L.Accesses) -> set[StaticSymbol]:
    """The static symbols the indices of the statements of ``acc`` mention."""
    found: set[StaticSymbol] = set()

    def idx(i: AxisIndex) -> None:
        if isinstance(i, Iterator):
            if isinstance(i.symbol, StaticSymbol):
                found.add(i.symbol)
        elif isinstance(i, Affine):
            found.update(t for _, t in i.terms if isinstance(t, StaticSymbol))

    for ws in acc.writes:
        for w in ws:
            if isinstance(w, L.Set):
                for i in w.indices:
                    idx(i)
    for rs in acc.reads:
        for g in rs:
            for i in g.indices:
                idx(i)
    for es in acc.embeds:
        for x in es:
            idx(x.index)
    return found


# ---- simplification ----


def _is_const(e: L.Expr, v: float | None = None) -> bool:
    return isinstance(e, L.Constant) and (v is None or e.value == v)


def _is_zero(e: L.Expr, prec: Prec | None, sign: float) -> bool:
    """Whether ``e`` is a zero that adding (``sign`` -1.0) or subtracting (1.0) leaves every
    value as it is: any zero in an integer context; in a float one (or an unknown one) only
    -0.0 added or +0.0 subtracted, since ``-0.0 + +0.0`` is +0.0."""
    if not _is_const(e, 0.0):
        return False
    assert isinstance(e, L.Constant)
    return (prec is not None and not prec.is_float) or math.copysign(1.0, e.value) == sign


@functools.cache
def _fold_dtype(prec: Prec | None) -> np.dtype[Any] | None:
    """The dtype constants fold in where an expression is evaluated in ``prec``: only floats
    (integer contexts convert each leaf first, which folding in floats would skip). Cached:
    simplification asks it at every expression node, for a dozen precisions at most."""
    if prec is None or not prec.is_float:
        return None
    return np.dtype(np.float64) if prec is Prec.double else np.dtype(np.float32)


def _operand_precs(e: L.Expr, prec: Prec | None) -> list[Prec | None]:
    """The precision each operand of ``e`` is evaluated in (``None``: its own natural one)."""
    # isinstance chains rather than class patterns: simplification asks at every operation.
    if isinstance(e, L.Binop):
        return [Prec.uint4x32] * 2 if e.op is ops.Binop.threefry4x32 else [prec, prec]
    if isinstance(e, L.Unop):
        return [Prec.uint4x32] if e.op is ops.Unop.uint4x32_to_prec_uniform else [prec]
    if isinstance(e, L.Ternop):
        return [None, prec, prec] if e.op is ops.Ternop.where else [prec, prec, prec]
    return []


_LEAVES = (L.Get, L.Get_local, L.Constant, L.Get_merge_buffer, L.Constant_bits)
"""The expressions simplification leaves as they are."""


def _simplify_expr(e: L.Expr, prec: Prec | None) -> L.Expr:
    """``e``, evaluated in ``prec`` (``None``: in its natural precision, as the condition of
    ``where``), simplified without changing its value in that precision."""
    if isinstance(e, _LEAVES):
        return e  # nothing to simplify (most nodes are these; no case below matches them)
    if prec is None and isinstance(e, L.Binop | L.Unop | L.Ternop):
        # An operation in its natural precision evaluates its operands in that precision, not
        # each in its own: an integer node's scope inside a double condition still converts.
        prec = natural_prec(e)
    if isinstance(e, L.Binop | L.Unop | L.Ternop):
        args = [_simplify_expr(x, p) for x, p in zip(L.children(e), _operand_precs(e, prec))]
    dt = _fold_dtype(prec)
    match e:
        case L.Binop(op=op):
            a, b = args
            if (
                dt is not None
                and op is not ops.Binop.threefry4x32
                and _is_const(a)
                and _is_const(b)
            ):
                assert isinstance(a, L.Constant) and isinstance(b, L.Constant)
                return L.Constant(
                    float(ops.apply_binop(op, dt.type(a.value), dt.type(b.value), dt))
                )
            if (op is ops.Binop.add and _is_zero(b, prec, -1.0)) or (
                op is ops.Binop.sub and _is_zero(b, prec, 1.0)
            ):
                return a
            if op is ops.Binop.add and _is_zero(a, prec, -1.0):
                return b
            if op in (ops.Binop.mul, ops.Binop.div) and _is_const(b, 1.0):
                return a
            if op is ops.Binop.mul and _is_const(a, 1.0):
                return b
            return L.Binop(op, a, b)
        case L.Unop(op=ops.Unop.identity):
            return args[0]
        case L.Unop(op=op):
            (a,) = args
            if (
                dt is not None
                and isinstance(a, L.Constant)
                and op is not ops.Unop.uint4x32_to_prec_uniform
            ):
                return L.Constant(float(ops.apply_unop(op, dt.type(a.value), dt)))
            return L.Unop(op, a)
        case L.Ternop(op=op):
            return L.Ternop(op, *args)
        case L.Embed_index(index=Fixed_idx(value=v)):
            return L.Constant(float(v))
        case L.Local_scope(scope=sc, body=L.Set_local(scope=sc2, value=v)) if (
            sc == sc2
            and not any(isinstance(x, L.Get_local) and x.scope == sc for x in L.sub_exprs(v))
            and sc.prec == (prec if prec is not None else natural_prec(v))
            and not rounds_when_stored(sc.prec)
        ):
            # The scope only converts its value to its node's precision: the reader's own.
            # (A small float's scope also rounds its value: it stays.)
            return _simplify_expr(v, prec)
        case L.Local_scope(scope=sc, body=body, orig_indices=oi):
            return L.Local_scope(sc, _simplify_stmt(body), oi)
    return e


def _simplify_stmt(s: L.Stmt) -> L.Stmt:
    # isinstance chains rather than class patterns: this rebuilds every statement.
    if isinstance(s, L.Set):
        return L.Set(s.tn, s.indices, _simplify_expr(s.value, s.tn.prec))
    if isinstance(s, L.For_loop):
        inner = _simplify_stmt(s.body)
        if isinstance(inner, L.Noop):
            return L.Noop()
        return L.For_loop(s.index, s.from_, s.to_inclusive, inner, s.trace_it)
    if isinstance(s, L.Seq):
        return L.seq(*[_simplify_stmt(x) for x in s.stmts])
    if isinstance(s, L.Set_local):
        return L.Set_local(s.scope, _simplify_expr(s.value, s.scope.prec))
    return s


# ---- the pipeline ----


def _trace(stmts: Sequence[L.Stmt], acc: L.Accesses | None = None) -> dict[Tnode, TracedNode]:
    acc = L.Accesses.of(stmts) if acc is None else acc
    traced: dict[Tnode, TracedNode] = {}
    get = traced.get  # one lookup per access (this runs for every read and store)
    defined: set[Tnode] = set()
    for s, writes, reads in zip(stmts, acc.writes, acc.reads):
        # A merge-buffer read reads another stream's value, not this node's own buffer.
        for g in reads:
            if not isinstance(g, L.Get):
                continue
            tn = g.tn
            t = get(tn)
            if t is None:
                t = traced[tn] = TracedNode(tn)
            # A read of a node this statement also writes reads the previous value unless the
            # node was already written before (accumulation into an initialized cell).
            if tn not in defined:
                t.read_before_write = True
        # A fill of a padded node's margins writes it but does not define its cells.
        margin_only = is_margin_write(s)
        for w in writes:
            t = get(w.tn)
            if t is None:
                t = traced[w.tn] = TracedNode(w.tn)
            if isinstance(w, L.Zero_out):
                if not t.assigned and not t.read_before_write:
                    t.zero_initialized_by_code = True
                t.zeroed_out = True
            t.assigned = True
            if not margin_only:
                defined.add(w.tn)
    for t in traced.values():
        t.read_only = not t.assigned
        if t.read_only:
            t.read_before_write = True
    return traced


def _read_counts(stmts: Sequence[L.Stmt], acc: L.Accesses | None = None) -> dict[Tnode, int]:
    """Reads of each node by statements that do not write it (an accumulation's read of its
    own cell is part of computing the node, not a use of it)."""
    acc = L.Accesses.of(stmts) if acc is None else acc
    counts: dict[Tnode, int] = {}
    for written, reads in zip(acc.written, acc.reads):
        for g in reads:
            if isinstance(g, L.Get) and g.tn not in written:
                counts[g.tn] = counts.get(g.tn, 0) + 1
    return counts


def _explain(
    tn: Tnode,
    t: TracedNode,
    why: dict[Tnode, str],
    shared: set[Tnode],
    merge_nodes: list[Tnode],
    reads: int,
    before: str,
    prior: mm.MemoryMode | None,
) -> str:
    """Why ``tn`` settled to its mode in this routine, in words (for the debug log);
    ``before`` is its mode (as text) when the routine came, ``prior`` its mode just before it
    was settled to a leaf."""
    if tn in why:
        reason = why[tn]
    elif tn in shared:
        reason = "not virtual: other routines of the batch use it (shared)"
    elif t.read_only:
        reason = "input: only read here"
    elif t.read_before_write:
        reason = "input: read before it is written"
    elif reads == 0:
        reason = "output: written, never read here"
    elif tn.is_hosted():
        reason = "hosted: the user declared it so"
    elif tn in merge_nodes:
        reason = "not virtual: its merge buffer is read"
    elif has_margins(tn):
        reason = "not virtual: it is padded (its margins are memory that reads may reach)"
    else:
        reason = f"not virtual: it was {before} before this routine"
    mode = tn.memory_mode
    if isinstance(prior, (mm.Never_virtual, mm.Device_only)) and isinstance(mode, mm.Local):
        reason += f"; Local: {tn.size_in_bytes} bytes fit the {STACK_THRESHOLD_BYTES}-byte stack"
    elif isinstance(prior, (mm.Never_virtual, mm.Device_only)) and isinstance(mode, mm.On_device):
        if tn.sharing is mm.Sharing.Shared_cross_streams:
            reason += "; On_device: shared across streams, so it needs a persistent buffer"
        else:
            reason += (
                f"; On_device: {tn.size_in_bytes} bytes exceed the "
                f"{STACK_THRESHOLD_BYTES}-byte stack"
            )
    elif isinstance(prior, mm.Materialized) and isinstance(mode, mm.On_device):
        reason += "; On_device: materialized, and no host array was asked for"
    elif isinstance(mode, mm.Hosted):
        reason += "; Hosted: it has a host array"
    return reason


def optimize(
    llc: L.Stmt,
    *,
    name: str,
    static_symbols: Sequence[StaticSymbol] = (),
    shared: Iterable[Tnode] = (),
) -> Optimized:
    """Optimize one routine's low-level code; settles the memory mode of every node it touches.

    Args:
        llc: the code (from :func:`arrayjit_ir.lower.lower`).
        name: the routine's name.
        static_symbols: the symbols bound when the routine runs, in parameter order.
        shared: nodes other routines read or write: never made virtual or local.

    Raises:
        UsageError: the code reads a static symbol that is not in ``static_symbols``, or reads
            the merge buffer for two different nodes.
        MemoryModeError: a decision contradicts a node's mode set earlier.
    """
    stmts = _top_level(llc)
    acc = L.Accesses.of(stmts)
    needed = _static_symbols(acc)
    missing = sorted(s.name for s in needed - set(static_symbols))
    if missing:
        raise UsageError(
            f"routine {name}: static symbols {missing} are not bound; pass them in bindings"
        )
    merge_nodes = list(
        dict.fromkeys(
            g.tn for reads in acc.reads for g in reads if isinstance(g, L.Get_merge_buffer)
        )
    )
    if len(merge_nodes) > 1:
        labels = ", ".join(tn.debug_label for tn in merge_nodes)
        raise UsageError(f"routine {name}: reads the merge buffer of several nodes: {labels}")

    traced = _trace(stmts, acc)
    logging_decisions = logger.isEnabledFor(logging.DEBUG)
    before = {tn: tn.debug_memory_mode for tn in traced} if logging_decisions else {}
    saved = {tn: (tn.memory_mode, tn.memory_mode_provenance) for tn in traced}
    try:
        return _optimize_traced(
            stmts, llc, traced, name, static_symbols, set(shared), merge_nodes, before, acc
        )
    except MemoryModeError as exc:
        # A routine that does not compile decides nothing: every node keeps its earlier mode.
        for tn, (mode, prov) in saved.items():
            tn.memory_mode, tn.memory_mode_provenance = mode, prov
        raise MemoryModeError(f"routine {name}: {exc}{_conflict_hint(exc, saved)}") from None


def _conflict_hint(
    exc: MemoryModeError, saved: dict[Tnode, tuple[mm.MemoryMode | None, int | None]]
) -> str:
    """Advice for the common conflict: a node that an earlier, separately compiled routine
    inlined or kept local is used by this one too."""
    for tn, (mode, prov) in saved.items():
        by_optimizer = prov == PROV_VIRTUAL or (prov is not None and prov % 1000 == PROV_SETTLE)
        if isinstance(mode, (mm.Virtual, mm.Local)) and by_optimizer and tn.debug_label in str(exc):
            return (
                f". An earlier routine, compiled on its own, made {tn.debug_label} "
                f"{type(mode).__name__.lower()} (it has no buffer outside that routine): "
                "compile routines that share nodes together (backend.compile_batch), or "
                "declare the node's mode before compiling them (Tnode.create(..., "
                "memory_mode=Materialized()) or tn.update_memory_mode)"
            )
    return ""


def _optimize_traced(
    stmts: list[L.Stmt],
    llc: L.Stmt,
    traced: dict[Tnode, TracedNode],
    name: str,
    static_symbols: Sequence[StaticSymbol],
    shared_set: set[Tnode],
    merge_nodes: list[Tnode],
    before: dict[Tnode, str],
    acc: L.Accesses,
) -> Optimized:
    """:func:`optimize` past its checks and trace: virtualize, settle modes, simplify."""
    logging_decisions = bool(before)
    for tn in shared_set & set(traced):
        tn.update_memory_mode(mm.Materialized(), PROV_SHARED)
    counts = _read_counts(stmts, acc)
    candidates = {
        tn
        for tn, t in traced.items()
        if t.assigned
        and not t.read_before_write
        and counts.get(tn, 0) > 0
        and "V" in (mm.leaves(tn.memory_mode) if tn.memory_mode is not None else "V")
        and not tn.is_hosted()
        and tn not in shared_set
        and tn not in merge_nodes
        and not isinstance(tn.memory_mode, mm.Effectively_constant)
        and not has_margins(tn)
    }
    why: dict[Tnode, str] = {}
    new_stmts, virtual = virtualize(stmts, candidates, why, acc)

    # Settle every node's mode (cleanup).
    prior: dict[Tnode, mm.MemoryMode | None] = {}
    for tn, t in traced.items():
        if tn in virtual:
            tn.update_memory_mode(mm.Virtual(), PROV_VIRTUAL)
        elif t.read_only or t.read_before_write:
            if not tn.known_constant():
                tn.update_memory_mode(mm.Materialized(), PROV_INPUT)
        elif counts.get(tn, 0) == 0:
            tn.update_memory_mode(mm.Materialized(), PROV_OUTPUT)
        else:
            tn.update_memory_mode(mm.Never_virtual(), PROV_INTERMEDIATE)
        if tn.known_constant() and not tn.is_hosted() and tn not in virtual:
            tn.update_memory_mode(mm.Materialized(), PROV_INPUT)
        prior[tn] = tn.memory_mode
        tn.default_to_most_local(PROV_SETTLE)
    if logging_decisions:
        for tn, t in sorted(traced.items()):
            logger.debug(
                "routine %s: node %s is %s: %s",
                name,
                tn.debug_label,
                tn.debug_memory_mode,
                _explain(
                    tn, t, why, shared_set, merge_nodes, counts.get(tn, 0), before[tn], prior[tn]
                ),
            )

    code = block_sums(
        hoist_across_statements(eliminate_common_subexpressions(_simplify_stmt(L.seq(*new_stmts))))
    )
    return Optimized(
        name=name,
        code=code,
        traced=traced,
        static_symbols=tuple(static_symbols),
        merge_node=merge_nodes[0] if merge_nodes else None,
        unoptimized=llc,
    )


def optimize_batch(
    llcs: Sequence[L.Stmt],
    names: Sequence[str],
    static_symbols: Sequence[StaticSymbol] = (),
) -> list[Optimized]:
    """Optimize several routines that will run in one context: nodes that more than one of them
    touches are shared (never virtual or local)."""
    seen: dict[Tnode, int] = {}
    for llc in llcs:
        touched = {g.tn for g in L.reads(llc)} | {w.tn for w in L.writes(llc)}
        for tn in touched:
            seen[tn] = seen.get(tn, 0) + 1
    shared = [tn for tn, n in seen.items() if n > 1]
    return [
        optimize(llc, name=name, static_symbols=static_symbols, shared=shared)
        for llc, name in zip(llcs, names)
    ]
