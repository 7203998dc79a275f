"""Virtualization: which intermediate nodes are inlined at their reads, and the inlining itself.

A *candidate* is a node the optimizer may make ``Virtual`` (no user decision against it, not
hosted, not shared with other routines, written before it is read). It becomes virtual when its
writes are consecutive top-level statements that compute it cell by cell (a definition,
:class:`~arrayjit_ir.definitions.Definition`) and when inlining it at every read keeps both
rules below. Every read of a virtual node is then replaced by a ``Local_scope`` computing that
cell, and its statements go.

The two rules (see the package README, "The optimizer"):

1. **Meaning.** A block means its statements run one after another. A definition is inlined at
   a read only if nothing it reads, directly or through other inlined definitions, is written
   between the definition and that read, the reading statement included (at any of its cells).
   Reads inside another virtual node's definition happen where *that* node is inlined.
2. **Work.** Inlining never makes a reduction loop body or a costly operation (a
   transcendental, a square root, a division: :func:`arrayjit_ir.ops.is_costly`) run more
   often than the unoptimized program runs it, counted per cell. A node is *heavy* when its
   definition has reduction loops or a costly operation, or reads a heavy virtual node; a heavy
   node is inlined only where it is read exactly once, at positions that visit each of its
   cells at most once (every loop around the read, with more than one iteration, indexes it).
   Since a node that reads a heavy virtual node is heavy itself, the rule composes through
   pointwise readers and broadcasts: a row sum read through ``mean = sum * inv`` at broadcast
   positions keeps ``mean`` materialized (once per row) and inlines the sum into it; softmax's
   ``e = exp(x - m)``, read by the row sum and by ``y = e / s``, is stored, and so is
   attention's ``p = e / s``, read inside ``o = p @ v``'s loop over a feature axis ``p`` does
   not have. Storing is how loop-invariant work leaves the loop: the node's own loop nest
   computes each cell once, before the readers run.
   Cheap pointwise work may be repeated (a node recomputed at each of its reads, broadcasts
   included), within a budget: the routine's arithmetic (:func:`arithmetic`, loops multiplied)
   stays within :data:`INLINE_WORK_FACTOR` times the unoptimized code's.
   The same rule bounds code size: a node read at more than one place is inlined only while its
   inlined computation has at most :data:`INLINE_SIZE_LIMIT` expression nodes, and no inlined
   computation nests deeper than :data:`INLINE_DEPTH_LIMIT`.

Candidates that break a rule are materialized one at a time until every remaining candidate
keeps both (see :func:`choose_virtual` for the order). The decision is deterministic: it depends
on the statements only (ties go to the earliest definition).
"""

from __future__ import annotations

import bisect
import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from arrayjit_ir import low_level as L
from arrayjit_ir import ops
from arrayjit_ir.definitions import Definition, as_definition, loop_nest
from arrayjit_ir.indexing import Affine, AxisIndex, Iterator, StaticSymbol, Symbol
from arrayjit_tnode import Tnode

# ---- the decision ----


@dataclass
class _Site:
    """One read of a node: the top-level statement holding it, whether it visits each cell at
    most once (every enclosing loop with more than one iteration indexes it), and how many
    times the statement runs it (the product of the extents of its enclosing loops)."""

    stmt: int
    once: bool
    iters: int = 1


@dataclass
class _Candidate:
    tn: Tnode
    first: int
    last: int
    reduction: bool
    reads: set[Tnode]
    sites: list[_Site] = field(default_factory=list)
    own_size: int = 1
    """Expression nodes of its definition's value, reads of other nodes excluded."""
    read_counts: dict[Tnode, int] = field(default_factory=dict)
    """How many times the definition's value reads each other node."""
    value: L.Expr | None = None
    """The definition's value (a cell's term for a reduction)."""
    costly: str | None = None
    """The first costly operation (:func:`arrayjit_ir.ops.is_costly`) its value evaluates."""
    cells: int = 1
    """The cells its definition computes (the extents of its output loops multiplied)."""
    definition: Definition | None = None
    """Its definition, from the statements as the routine gives them."""


INLINE_SIZE_LIMIT = 64
"""The largest inlined computation (in expression nodes, inlined inputs included) that may be
copied to more than one read: beyond it a node read at several places is stored, so that
chains such as ``t2 = t1 + t1; t3 = t2 + t2; ...`` do not double the code at every link."""

INLINE_DEPTH_LIMIT = 48
"""The deepest inlined computation (in nested expression nodes, inlined inputs included): a
long chain ``t2 = t1 + x; t3 = t2 + x; ...`` is stored every so many links, so that the code
nests no deeper than compilers (clang's 256 brackets) and the optimizer's recursion allow."""

_ONE = Fraction(1)
"""What :meth:`_Plan.runs` gives a statement that stays (fractions are immutable)."""

INLINE_WORK_FACTOR = Fraction(3, 2)
"""The most arithmetic a routine may run, in multiples of the unoptimized program's, for
recomputing cheap pointwise nodes at their reads (:func:`arithmetic` counts it): beyond it the
recomputed node whose storing saves the most is stored, until the routine is within it."""


def arithmetic(s: L.Stmt) -> int:
    """The operations ``s`` evaluates (every ``Binop``, ``Unop`` and ``Ternop`` but the free
    ones, :data:`arrayjit_ir.ops.FREE_OPS`), each counted once per run of the loops around it,
    loops inside local scopes included: the work cost model's measure of arithmetic."""
    # isinstance chains rather than class patterns: it runs over every statement of a routine.
    if isinstance(s, L.For_loop):
        return s.extent * arithmetic(s.body)
    if isinstance(s, (L.Set, L.Set_local)):
        return _expr_arithmetic(s.value)
    if isinstance(s, L.Seq):
        return sum(arithmetic(y) for y in s.stmts)
    return 0


def _expr_arithmetic(e: L.Expr) -> int:
    if isinstance(e, L.Binop):
        own = 0 if e.op in ops.FREE_OPS else 1
        return own + _expr_arithmetic(e.a) + _expr_arithmetic(e.b)
    if isinstance(e, L.Unop):
        own = 0 if e.op in ops.FREE_OPS else 1
        return own + _expr_arithmetic(e.a)
    if isinstance(e, L.Ternop):  # no ternary op is free (FREE_OPS holds unary and binary ones)
        return 1 + _expr_arithmetic(e.a) + _expr_arithmetic(e.b) + _expr_arithmetic(e.c)
    if isinstance(e, L.Local_scope):
        return arithmetic(e.body)
    return 0


def _distinct_axes(idx: tuple[AxisIndex, ...]) -> set[Symbol | StaticSymbol]:
    """Loop symbols that alone select an axis of the index (``i`` or ``c*i + o``): different
    values of such a symbol read different cells."""
    found: set[Symbol | StaticSymbol] = set()
    for i in idx:
        if isinstance(i, Iterator):
            found.add(i.symbol)
        elif isinstance(i, Affine) and len(i.terms) == 1 and i.terms[0][0] != 0:
            found.add(i.terms[0][1])
    return found


def _read_sites(stmts: Sequence[L.Stmt], acc: L.Accesses) -> dict[Tnode, list[_Site]]:
    """Every read of every node by a statement that does not write it (an accumulation's read
    of its own cell is part of computing the node)."""
    sites: dict[Tnode, list[_Site]] = {}
    # isinstance chains rather than class patterns: this walks every statement of a routine.

    def visit(e: L.Expr, k: int, loops: frozenset[Symbol], iters: int, written: set[Tnode]) -> None:
        if isinstance(e, L.Get):
            if e.tn not in written:
                once = loops <= _distinct_axes(e.indices)
                sites.setdefault(e.tn, []).append(_Site(k, once, iters))
        elif isinstance(e, L.Binop):
            visit(e.a, k, loops, iters, written)
            visit(e.b, k, loops, iters, written)
        elif isinstance(e, L.Unop):
            visit(e.a, k, loops, iters, written)
        elif isinstance(e, L.Ternop):
            visit(e.a, k, loops, iters, written)
            visit(e.b, k, loops, iters, written)
            visit(e.c, k, loops, iters, written)
        elif isinstance(e, L.Local_scope):
            walk(e.body, k, loops, iters, written)

    def walk(s: L.Stmt, k: int, loops: frozenset[Symbol], iters: int, written: set[Tnode]) -> None:
        if isinstance(s, L.For_loop):
            inner = loops | {s.index} if s.to_inclusive > s.from_ else loops
            walk(s.body, k, inner, iters * s.extent, written)
        elif isinstance(s, (L.Set, L.Set_local)):
            visit(s.value, k, loops, iters, written)
        elif isinstance(s, L.Seq):
            for x in s.stmts:
                walk(x, k, loops, iters, written)

    for k, s in enumerate(stmts):
        walk(s, k, frozenset(), 1, acc.written[k])
    return sites


def _candidates(
    stmts: Sequence[L.Stmt], allowed: set[Tnode], acc: L.Accesses
) -> dict[Tnode, _Candidate]:
    """The nodes of ``allowed`` whose writes are consecutive statements that write only them
    and form a definition (``acc``: the accesses of ``stmts``)."""
    writers: dict[Tnode, list[int]] = {}
    only_writes = acc.written
    for k, written in enumerate(only_writes):
        for tn in written:
            writers.setdefault(tn, []).append(k)
    found: dict[Tnode, _Candidate] = {}
    for tn, ks in writers.items():
        if tn not in allowed or ks != list(range(ks[0], ks[-1] + 1)):
            continue
        if any(len(only_writes[k]) != 1 or tn not in only_writes[k] for k in ks):
            continue
        d = as_definition([stmts[k] for k in ks], tn)
        if d is None:
            continue
        reads = {g.tn for k in ks for g in acc.reads[k] if isinstance(g, L.Get)} - {tn}
        counts: dict[Tnode, int] = {}
        own = 0
        costly: str | None = None  # the first costly operation, in pre-order
        tid = tn.id  # nodes are equal when their ids are
        for x in L.sub_exprs(d.value):
            if isinstance(x, L.Get) and x.tn.id != tid:
                counts[x.tn] = counts.get(x.tn, 0) + 1
            else:
                own += 1
                if (
                    costly is None
                    and isinstance(x, L.Binop | L.Unop | L.Ternop)
                    and ops.is_costly(x.op)
                ):
                    costly = x.op.value
        loops, _ = loop_nest(stmts[ks[-1]])
        cells = math.prod(lp.extent for lp in loops if lp.index in d.out_symbols)
        found[tn] = _Candidate(
            tn,
            ks[0],
            ks[-1],
            bool(d.reduction),
            reads,
            [],
            own,
            counts,
            d.value,
            costly,
            cells,
            d,
        )
    sites = _read_sites(stmts, acc)
    for tn, c in found.items():
        c.sites = sites.get(tn, [])
    return found


def _reads_earlier(cands: dict[Tnode, _Candidate]) -> bool:
    """Whether every candidate's computation reads only candidates whose definitions end
    before its own starts (the optimizer's candidates are never read before written, so
    theirs do)."""
    return all(cands[r].last < c.first for c in cands.values() for r in c.reads if r in cands)


def _owners(cands: dict[Tnode, _Candidate]) -> dict[int, Tnode]:
    """The candidate each top-level statement of a definition belongs to."""
    return {k: c.tn for c in cands.values() for k in range(c.first, c.last + 1)}


class _Plan:
    """Facts about a set of virtual nodes, computed on demand."""

    def __init__(
        self,
        cands: dict[Tnode, _Candidate],
        virtual: set[Tnode],
        work: Sequence[int] = (),
        owner: dict[int, Tnode] | None = None,
    ) -> None:
        self.cands = cands
        self.virtual = virtual
        self.work = work
        """The arithmetic of each top-level statement (:func:`arithmetic`)."""
        self.owner = _owners(cands) if owner is None else owner
        """The candidate each top-level statement defines (``owner`` given: the same for
        ``cands``, shared between plans so that each store does not rebuild it)."""
        self._inputs: dict[Tnode, frozenset[Tnode]] = {}
        self._heavy: dict[Tnode, str | None] = {}
        self._evals: dict[Tnode, Fraction | int] = {}
        self._positions: dict[Tnode, frozenset[int]] = {}
        self._size: dict[Tnode, int] = {}
        self._depth: dict[Tnode, int] = {}

    def stored(self, tn: Tnode, keep_facts: bool = False) -> _Plan:
        """The plan after removing ``tn`` from :attr:`virtual` (in place: the set is shared):
        a fresh one, its facts computed anew, the statement owners reused; or, with
        ``keep_facts``, this one, its facts kept (for a sweep that never asks a fact that
        storing ``tn`` changes; see :func:`_store_repeated_work`)."""
        self.virtual.discard(tn)
        if keep_facts:
            return self
        return _Plan(self.cands, self.virtual, self.work, self.owner)

    def inputs(self, tn: Tnode) -> frozenset[Tnode]:
        """The stored nodes the inlined computation of ``tn`` reads."""
        if tn not in self._inputs:
            out: set[Tnode] = set()
            for r in self.cands[tn].reads:
                out |= self.inputs(r) if r in self.virtual else {r}
            self._inputs[tn] = frozenset(out)
        return self._inputs[tn]

    def heavy(self, tn: Tnode) -> str | None:
        """What makes the inlined computation of ``tn`` heavy, in words (``"reduction"``, or a
        costly operation's name), when it runs a reduction loop or evaluates a costly
        operation, its own or a virtual input's; else ``None``."""
        if tn not in self._heavy:
            c = self.cands[tn]
            found = "reduction" if c.reduction else c.costly
            for r in sorted(r for r in c.reads if r in self.virtual):
                if found == "reduction":
                    break
                inner = self.heavy(r)
                found = inner if found is None or inner == "reduction" else found
            self._heavy[tn] = found
        return self._heavy[tn]

    def runs(self, k: int) -> Fraction:
        """How many times the top-level statement ``k`` runs in the optimized routine, per
        run in the unoptimized one: its node's evaluations per cell (:meth:`evals`) when that
        node is virtual, else 1."""
        tn = self.owner.get(k)
        if tn not in self.virtual:
            return _ONE
        assert tn is not None
        cells = self.cands[tn].cells
        if not cells:
            return Fraction(0)
        ev = self.evals(tn)
        return Fraction(ev, cells) if isinstance(ev, int) else ev / cells

    def evals(self, tn: Tnode) -> Fraction | int:
        """How many times the inlined computation of (one cell of) ``tn`` runs: at each read,
        the runs of the loops around it, times the runs of the statement holding it (an
        ``int`` when every read is by a statement that runs once)."""
        if tn not in self._evals:
            # Reads by statements that run once add as integers; exact fractions only for the
            # others (the same sum, fewer fraction operations).
            whole = 0
            part: Fraction | None = None
            for site in self.cands[tn].sites:
                r = self.runs(site.stmt)
                if r is _ONE:
                    whole += site.iters
                else:
                    part = site.iters * r if part is None else part + site.iters * r
            self._evals[tn] = whole if part is None else part + whole
        return self._evals[tn]

    def arithmetic(self) -> Fraction:
        """The arithmetic of the routine with these nodes inlined (:func:`arithmetic` of each
        top-level statement times its :meth:`runs`)."""
        # The same exact sum with few fraction operations: a statement that stays (the most of
        # them) runs once and adds as an integer; an inlined node whose evaluations are whole
        # adds ``work * evals`` to the numerator over its cell count, one fraction per count.
        whole = 0
        over: dict[int, int] = {}
        part = Fraction(0)
        for k, w in enumerate(self.work):
            tn = self.owner.get(k)
            if tn not in self.virtual:
                whole += w
                continue
            assert tn is not None
            cells = self.cands[tn].cells
            if not cells:
                continue  # it runs 0 times per cell
            ev = self.evals(tn)
            if isinstance(ev, int):
                over[cells] = over.get(cells, 0) + w * ev
            else:
                part += w * (ev / cells)
        for cells, n in over.items():
            part += Fraction(n, cells)
        return part + whole

    def positions(self, tn: Tnode) -> frozenset[int]:
        """The top-level statements where the inlined computation of ``tn`` will run."""
        if tn not in self._positions:
            out: set[int] = set()
            for site in self.cands[tn].sites:
                user = self.owner.get(site.stmt)
                out |= self.positions(user) if user in self.virtual else {site.stmt}
            self._positions[tn] = frozenset(out)
        return self._positions[tn]

    def repeats_work(self, tn: Tnode) -> bool:
        """Inlining ``tn`` would run a reduction loop or a costly operation more often than
        its cells, or copy a computation larger than :data:`INLINE_SIZE_LIMIT` to several
        reads."""
        c = self.cands[tn]
        if len(c.sites) > 1 and self.size(tn) > INLINE_SIZE_LIMIT:
            return True
        if self.depth(tn) > INLINE_DEPTH_LIMIT:
            return True
        return self.heavy(tn) is not None and not (len(c.sites) == 1 and c.sites[0].once)

    def depth(self, tn: Tnode) -> int:
        """Nesting depth of the inlined computation of ``tn``, its virtual inputs inlined (one
        more for a reduction's loops)."""
        if tn not in self._depth:
            c = self.cands[tn]

            def walk(e: L.Expr) -> int:
                if isinstance(e, L.Get) and e.tn in self.virtual and e.tn in self.cands:
                    return self.depth(e.tn)
                deepest = 0
                for x in L.children(e):
                    d = walk(x)
                    if d > deepest:
                        deepest = d
                return 1 + deepest

            value = c.value
            self._depth[tn] = (walk(value) if value is not None else 1) + int(c.reduction)
        return self._depth[tn]

    def size(self, tn: Tnode) -> int:
        """Expression nodes of the inlined computation of ``tn``, its virtual inputs inlined."""
        if tn not in self._size:
            c = self.cands[tn]
            self._size[tn] = c.own_size + sum(
                n * (self.size(r) if r in self.virtual else 1) for r, n in c.read_counts.items()
            )
        return self._size[tn]

    def changes_meaning(self, tn: Tnode, writers: dict[Tnode, list[int]]) -> bool:
        """Something ``tn``'s inlined computation reads is written after its definition and
        up to (including) the last statement where that computation runs."""
        last = self.cands[tn].last
        end = max(self.positions(tn), default=last)
        return any(
            bisect.bisect_right(writers.get(x, []), last)
            < bisect.bisect_right(writers.get(x, []), end)
            for x in self.inputs(tn)
        )


def _work_reason(plan: _Plan, tn: Tnode) -> str:
    """Why ``tn`` breaks the work rule (:meth:`_Plan.repeats_work`), in words."""
    sites = plan.cands[tn].sites
    heavy = plan.heavy(tn)
    what = "reduction" if heavy == "reduction" else f"costly {heavy}"
    if plan.depth(tn) > INLINE_DEPTH_LIMIT:
        return (
            f"not virtual (work rule): its inlined computation would nest "
            f"{plan.depth(tn)} deep (at most {INLINE_DEPTH_LIMIT})"
        )
    if heavy is None:
        return (
            f"not virtual (work rule): its computation of {plan.size(tn)} expression nodes "
            f"would be copied to {len(sites)} reads (at most {INLINE_SIZE_LIMIT} are)"
        )
    if len(sites) > 1:
        return (
            f"not virtual (work rule): inlining would run its {what} again at each of "
            f"{len(sites)} read(s)"
        )
    return "not virtual (work rule): its one read visits a cell more than once" + (
        "" if heavy == "reduction" else f", and would evaluate its {what} again"
    )


def _store_repeated_work(
    cands: dict[Tnode, _Candidate],
    virtual: set[Tnode],
    work: Sequence[int],
    reasons: dict[Tnode, str],
    owner: dict[int, Tnode] | None = None,
) -> None:
    """Remove from ``virtual`` every node that breaks the work rule, the earliest first, each
    judged with the earlier offenders already stored.

    One sweep in definition order gives what removing the earliest offender and judging every
    node again would: storing a node only makes the inlined computations that read it lighter
    (less heavy, shallower, smaller), so the nodes before it keep their verdicts, and so does
    every node after a later store (by either rule). Each removal starts a fresh
    :class:`_Plan`, whose facts about later nodes it changes.

    When every candidate reads only candidates defined before it (:func:`_reads_earlier`; so
    it is for the optimizer's candidates, which are never read before written), the facts
    the sweep has asked so far are about the node just judged and the nodes its computation
    reads, all defined no later than it, none reading it: storing it changes none of them,
    and the plan keeps them."""
    keep = _reads_earlier(cands)
    plan = _Plan(cands, virtual, work, owner)
    for tn in sorted(virtual, key=lambda tn: cands[tn].first):
        if plan.repeats_work(tn):
            reasons[tn] = _work_reason(plan, tn)
            plan = plan.stored(tn, keep)


def _store_changed_meaning(
    cands: dict[Tnode, _Candidate],
    virtual: set[Tnode],
    work: Sequence[int],
    writers: dict[Tnode, list[int]],
    reasons: dict[Tnode, str],
    owner: dict[int, Tnode] | None = None,
) -> None:
    """Remove from ``virtual`` every node that breaks the meaning rule, the latest first, each
    judged with the later offenders already stored.

    One sweep in reverse definition order gives what removing the latest offender and judging
    every node again would: storing a node moves the computations it reads to its own
    statement, earlier than its reads (so the earlier nodes' spans only shrink), and a node
    read by a later one is written only by its own definition, before that reader's (so the
    later nodes keep their verdicts); storing breaks no work rule either (see
    :func:`_store_repeated_work`).

    When every candidate reads only candidates defined before it (:func:`_reads_earlier`),
    the plan keeps its facts across stores: those storing a node changes (where the nodes it
    reads run, the inputs of the nodes reading it) are about nodes this sweep has not reached
    or will not ask again."""
    keep = _reads_earlier(cands)
    plan = _Plan(cands, virtual, work, owner)
    for tn in sorted(virtual, key=lambda tn: cands[tn].first, reverse=True):
        if plan.changes_meaning(tn, writers):
            reasons[tn] = (
                "not virtual (meaning rule): a node its computation reads is written "
                "between its definition and a read of it"
            )
            plan = plan.stored(tn, keep)


def choose_virtual(
    stmts: Sequence[L.Stmt],
    allowed: set[Tnode],
    why: dict[Tnode, str] | None = None,
    acc: L.Accesses | None = None,
) -> set[Tnode]:
    """The nodes of ``allowed`` to make virtual: see the module docstring.

    Candidates breaking a rule are materialized one at a time. Work first, the earliest
    first: whether a node is heavy depends on earlier nodes only, so materializing the earliest
    offender can make later ones light. Meaning next, the latest first: where a node's
    computation runs depends on later (reading) nodes only. Each is one sweep over the nodes
    (:func:`_store_repeated_work`, :func:`_store_changed_meaning`: the same choices as judging
    every node again after each store, in linear time). Then the work budget: while the
    routine's arithmetic exceeds :data:`INLINE_WORK_FACTOR` times the unoptimized code's, the
    recomputed node whose storing saves the most is stored (the earliest of equals).

    When ``why`` is given, it receives, for every node of ``allowed``, the reason for the
    decision in words (the optimizer logs it). ``acc``: the accesses of ``stmts``, when the
    caller has them (:meth:`arrayjit_ir.low_level.Accesses.of`)."""
    return _choose(stmts, allowed, why, acc)[0]


def _choose(
    stmts: Sequence[L.Stmt],
    allowed: set[Tnode],
    why: dict[Tnode, str] | None = None,
    acc: L.Accesses | None = None,
) -> tuple[set[Tnode], dict[Tnode, _Candidate]]:
    """:func:`choose_virtual`, and the candidates it judged (their definitions)."""
    acc = L.Accesses.of(stmts) if acc is None else acc
    cands = _candidates(stmts, allowed, acc)
    work = [arithmetic(st) for st in stmts]
    budget = INLINE_WORK_FACTOR * sum(work)
    writers: dict[Tnode, list[int]] = {}
    for k, ws in enumerate(acc.writes):
        for tn in dict.fromkeys(w.tn for w in ws):
            writers.setdefault(tn, []).append(k)
    virtual = {tn for tn, c in cands.items() if c.sites}
    owner = _owners(cands)
    reasons: dict[Tnode, str] = {}
    for tn in allowed - cands.keys():
        reasons[tn] = (
            "not virtual: its writes are not one definition computing each cell "
            "(consecutive statements writing only it, reduction loops innermost)"
        )
    for tn in cands.keys() - virtual:
        reasons[tn] = "not virtual: no other statement reads it"
    while True:
        _store_repeated_work(cands, virtual, work, reasons, owner)
        _store_changed_meaning(cands, virtual, work, writers, reasons, owner)
        plan = _Plan(cands, virtual, work, owner)
        total = plan.arithmetic()
        if total <= budget:
            for tn in virtual:
                n = len(cands[tn].sites)
                reasons[tn] = f"virtual: inlined at its {n} read(s)"
            if why is not None:
                why.update(reasons)
            return virtual, cands

        # Store the recomputed node whose storing saves the most (the earliest of equals).
        def saving(tn: Tnode, total: Fraction = total) -> tuple[Fraction, int]:
            kept = _Plan(cands, virtual - {tn}, work, owner).arithmetic()
            return total - kept, -cands[tn].first

        recomputed = (tn for tn in virtual if plan.runs(cands[tn].last) > 1)
        offender = max(recomputed, key=saving)
        per_cell = float(plan.runs(cands[offender].last))
        reasons[offender] = (
            f"not virtual (work rule): recomputing it at its reads ({per_cell:g} times per "
            f"cell) takes the routine's arithmetic past {float(INLINE_WORK_FACTOR):g} times "
            "the unoptimized code's"
        )
        virtual.discard(offender)


# ---- the rewrite ----


def _map_gets(e: L.Expr, defs: dict[Tnode, Definition]) -> L.Expr:
    # isinstance chains rather than class patterns; operands left to right, so that inlined
    # copies get their fresh names in the same order.
    if isinstance(e, L.Get):
        d = defs.get(e.tn)
        return e if d is None else d.inline(e)
    if isinstance(e, L.Binop):
        a = _map_gets(e.a, defs)
        return L.Binop(e.op, a, _map_gets(e.b, defs))
    if isinstance(e, L.Unop):
        return L.Unop(e.op, _map_gets(e.a, defs))
    if isinstance(e, L.Ternop):
        a = _map_gets(e.a, defs)
        b = _map_gets(e.b, defs)
        return L.Ternop(e.op, a, b, _map_gets(e.c, defs))
    if isinstance(e, L.Local_scope):
        return L.Local_scope(e.scope, _map_gets_stmt(e.body, defs), e.orig_indices)
    return e


def _map_gets_stmt(s: L.Stmt, defs: dict[Tnode, Definition]) -> L.Stmt:
    return L.map_exprs(s, lambda e: _map_gets(e, defs))


def virtualize(
    stmts: Sequence[L.Stmt],
    allowed: set[Tnode],
    why: dict[Tnode, str] | None = None,
    acc: L.Accesses | None = None,
) -> tuple[list[L.Stmt], set[Tnode]]:
    """Inline the nodes :func:`choose_virtual` picks from ``allowed`` (``why``, ``acc``: see
    there).

    Returns:
        The remaining top-level statements (reads of virtual nodes replaced by local scopes)
        and the set of virtual nodes.
    """
    acc = L.Accesses.of(stmts) if acc is None else acc
    virtual, cands = _choose(stmts, allowed, why, acc)
    defs: dict[Tnode, Definition] = {}
    out: list[L.Stmt] = []
    for k, s in enumerate(stmts):
        written = acc.written[k]
        if len(written) == 1 and (tn := next(iter(written))) in virtual:
            c = cands[tn]
            if k == c.last:
                # The definition judged, with the reads of nodes inlined before it inlined in
                # its value: what the definition of its statements so rewritten is (their
                # other parts read no node), computed without rewriting them.
                d = c.definition
                assert d is not None
                defs[tn] = dataclasses.replace(d, value=_map_gets(d.value, defs))
            continue
        # A statement that reads no inlined node stays as it is (rebuilding it would give an
        # equal copy).
        if any(g.tn in defs for g in acc.reads[k] if isinstance(g, L.Get)):
            s = _map_gets_stmt(s, defs)
        out.append(s)
    return out, virtual
