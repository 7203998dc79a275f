"""Bounds: no generated routine reads or writes outside its nodes.

Every index expression of low-level code (``Set``, ``Get``, ``Get_merge_buffer``) is an affine
combination of loop symbols and static symbols. :func:`check` evaluates each one as an interval
over the ranges of the loops around it and over the static symbols' ranges, and compares it with
the node's buffer dims (padding included, since low-level indices are buffer indices). A
violation is a :class:`~arrayjit_tnode.UsageError` naming the node, the axis, the index and the
range it spans.

Static symbols (integers bound when a routine runs) get their range here too
(:func:`static_ranges`): a symbol without a declared range gets the largest range that keeps
every access it takes part in within bounds (the sliced node's first dim, for a ``Slice``), a
declared range that exceeds it is refused, and a symbol declared with two different ranges is
refused. The backend layer checks every binding against these ranges, so no value of a static
index can reach memory outside a node.

What the check cannot decide it refuses rather than trusts: a loop symbol used outside its loop,
an index with two static symbols of unknown range, an index with the wrong number of axes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from arrayjit_ir import low_level as L
from arrayjit_ir.indexing import Affine, AxisIndex, Fixed_idx, Iterator, StaticSymbol, Symbol
from arrayjit_tnode import Tnode, UsageError


@dataclass(frozen=True)
class _Access:
    """One axis of one access: the node, what accesses it, the axis and its buffer size, the
    index, the interval its loop part spans, and its static terms ``(coeff, name)``."""

    tn: Tnode
    what: str
    axis: int
    dim: int
    index: AxisIndex
    lo: int
    hi: int
    statics: tuple[tuple[int, str], ...]


def _terms(idx: AxisIndex) -> tuple[tuple[tuple[int, Symbol | StaticSymbol], ...], int]:
    if isinstance(idx, Iterator):
        return ((1, idx.symbol),), 0
    if isinstance(idx, Affine):
        return tuple(idx.terms), idx.offset
    if isinstance(idx, Fixed_idx):
        return (), idx.value
    raise UsageError(f"bounds: {idx!r} is not an axis index")


def show_index(idx: AxisIndex) -> str:
    """An axis index as text, e.g. ``2*i3 + b - 1``."""
    terms, off = _terms(idx)
    parts = [(str(s) if c == 1 else f"{c}*{s}") for c, s in terms]
    if off or not parts:
        parts.append(str(off))
    return " + ".join(parts).replace("+ -", "- ")


class _Walker:
    """Collects every access of a statement with the loop intervals around it."""

    def __init__(self) -> None:
        self.env: dict[Symbol, tuple[int, int]] = {}
        self.accesses: list[_Access] = []
        self.static_decls: dict[str, set[int]] = {}

    def static(self, s: StaticSymbol) -> None:
        decls = self.static_decls.setdefault(s.name, set())
        if s.range is not None:
            decls.add(s.range)

    def access(self, tn: Tnode, what: str, indices: Sequence[AxisIndex]) -> None:
        dims = tn.dims
        if len(indices) != len(dims):
            raise UsageError(
                f"bounds: {what} of node {tn.debug_label} uses {len(indices)} indices "
                f"[{', '.join(show_index(i) for i in indices)}] but the node has "
                f"{len(dims)} axes (dims {list(dims)}, padding included)"
            )
        for axis, (idx, dim) in enumerate(zip(indices, dims)):
            if type(idx) is Fixed_idx:  # the common constant index: no record needed
                if not 0 <= idx.value < dim:
                    _violation(tn, what, axis, dim, idx, idx.value, idx.value, "")
                continue
            if type(idx) is Iterator and type(idx.symbol) is Symbol:
                # The common loop index: the general case below with one term of coefficient 1.
                span = self.env.get(idx.symbol)
                if span is not None:
                    lo, hi = min(span), max(span)
                    if lo < 0 or hi > dim - 1:
                        _violation(tn, what, axis, dim, idx, lo, hi, "")
                    continue
            terms, off = _terms(idx)
            lo = hi = off
            statics: list[tuple[int, str]] = []
            for c, s in terms:
                if isinstance(s, StaticSymbol):
                    self.static(s)
                    if c != 0:
                        statics.append((c, s.name))
                    continue
                span = self.env.get(s)
                if span is None:
                    raise UsageError(
                        f"bounds: {what} of node {tn.debug_label} axis {axis} uses loop symbol "
                        f"{s} outside any loop over it (index {show_index(idx)})"
                    )
                a, b = c * span[0], c * span[1]
                lo, hi = lo + min(a, b), hi + max(a, b)
            if not statics:  # decided now; only accesses with static symbols wait for ranges
                if lo < 0 or hi > dim - 1:
                    _violation(tn, what, axis, dim, idx, lo, hi, "")
                continue
            self.accesses.append(_Access(tn, what, axis, dim, idx, lo, hi, tuple(statics)))

    def stmt(self, s: L.Stmt) -> None:
        # isinstance chains, the most frequent statements first: this walks every statement
        # of every routine (class patterns cost more per test).
        if isinstance(s, L.Set):
            self.access(s.tn, "a write", s.indices)
            self.expr(s.value)
        elif isinstance(s, L.Seq):
            for x in s.stmts:
                self.stmt(x)
        elif isinstance(s, L.For_loop):
            lo, hi, sym = s.from_, s.to_inclusive, s.index
            if hi < lo:
                return  # never runs
            outer = self.env.get(sym)
            self.env[sym] = (lo, hi)
            self.stmt(s.body)
            if outer is None:
                del self.env[sym]
            else:
                self.env[sym] = outer
        elif isinstance(s, (L.Noop, L.Comment, L.Zero_out)):
            pass
        elif isinstance(s, L.Set_local):
            self.expr(s.value)
        else:
            raise UsageError(f"bounds: {s!r} is not a low-level statement")

    def expr(self, e: L.Expr) -> None:
        if isinstance(e, L.Get):
            self.access(e.tn, "a read", e.indices)
        elif isinstance(e, L.Binop):
            self.expr(e.a)
            self.expr(e.b)
        elif isinstance(e, L.Unop):
            self.expr(e.a)
        elif isinstance(e, L.Ternop):
            self.expr(e.a)
            self.expr(e.b)
            self.expr(e.c)
        elif isinstance(e, L.Get_merge_buffer):
            self.access(e.tn, "a merge-buffer read", e.indices)
        elif isinstance(e, L.Local_scope):
            self.stmt(e.body)
        elif isinstance(e, L.Embed_index):
            for _, sym in _terms(e.index)[0]:
                if isinstance(sym, StaticSymbol):
                    self.static(sym)


def _declared(walker: _Walker, extra: Sequence[StaticSymbol]) -> dict[str, int | None]:
    for s in extra:
        if not isinstance(s, StaticSymbol):
            raise UsageError(f"bindings must be StaticSymbol values, got {s!r}")
        walker.static(s)
    out: dict[str, int | None] = {}
    for name, decls in walker.static_decls.items():
        if len(decls) > 1:
            raise UsageError(
                f"static symbol {name} is declared with different ranges {sorted(decls)}"
            )
        out[name] = next(iter(decls)) if decls else None
    return out


def _infer(accesses: list[_Access], declared: dict[str, int | None]) -> dict[str, int]:
    """The largest range of each undeclared static symbol that keeps its accesses in bounds."""
    limits: dict[str, tuple[int, _Access]] = {}
    for a in accesses:
        unknown = [(c, n) for c, n in a.statics if declared.get(n) is None]
        if not unknown:
            continue
        if len(unknown) > 1:
            raise UsageError(
                f"bounds: {a.what} of node {a.tn.debug_label} axis {a.axis} is indexed by "
                f"{show_index(a.index)}, which has several static symbols without a range "
                f"({', '.join(n for _, n in unknown)}); declare their ranges with "
                f"StaticSymbol(name, range=...)"
            )
        c, name = unknown[0]
        lo, hi = a.lo, a.hi
        for c2, n2 in a.statics:  # the other static terms have declared ranges
            if n2 != name:
                r = declared[n2]
                assert r is not None
                x, y = 0, c2 * (r - 1)
                lo, hi = lo + min(x, y), hi + max(x, y)
        # c*s + [lo, hi] must stay within 0..dim-1 for s in 0..limit-1
        most = (a.dim - 1 - hi) // c if c > 0 else lo // -c
        if name not in limits or most + 1 < limits[name][0]:
            limits[name] = (most + 1, a)
    out: dict[str, int] = {}
    for name, (limit, a) in limits.items():
        if limit < 1:
            raise UsageError(
                f"bounds: {a.what} of node {a.tn.debug_label} axis {a.axis} (size {a.dim}, "
                f"padding included) is indexed by {show_index(a.index)}, which is out of "
                f"bounds for every value of static symbol {name}"
            )
        out[name] = limit
    return out


def _walk(code: L.Stmt, extra: Sequence[StaticSymbol]) -> tuple[_Walker, dict[str, int | None]]:
    walker = _Walker()
    walker.stmt(code)
    declared = _declared(walker, extra)
    inferred = _infer(walker.accesses, declared)
    for name, limit in inferred.items():
        declared[name] = limit
    return walker, declared


def _check_declared(walker: _Walker, ranges: dict[str, int | None]) -> None:
    for name, r in ranges.items():
        if r is not None and (isinstance(r, bool) or not isinstance(r, int) or r < 1):
            raise UsageError(f"static symbol {name}: range must be a positive integer, got {r!r}")
    for a in walker.accesses:
        lo, hi = a.lo, a.hi
        for c, n in a.statics:
            r = ranges[n]
            assert r is not None
            x, y = 0, c * (r - 1)
            lo, hi = lo + min(x, y), hi + max(x, y)
        if lo < 0 or hi > a.dim - 1:
            statics = ", ".join(f"{n} in 0..{ranges[n]}" for _, n in a.statics)
            _violation(a.tn, a.what, a.axis, a.dim, a.index, lo, hi, f" with {statics} (exclusive)")


def _violation(
    tn: Tnode, what: str, axis: int, dim: int, idx: AxisIndex, lo: int, hi: int, over: str
) -> None:
    raise UsageError(
        f"bounds: {what} of node {tn.debug_label} axis {axis} is indexed by "
        f"{show_index(idx)}, ranging over {lo}..{hi}{over}, but the axis has "
        f"size {dim} (valid 0..{dim - 1}, padding included)"
    )


def static_ranges(code: L.Stmt, symbols: Sequence[StaticSymbol] = ()) -> dict[str, int | None]:
    """Check every access of ``code`` and return the range of each static symbol it or
    ``symbols`` mention: the declared range, else the largest one that keeps every access in
    bounds, else ``None`` (the symbol indexes no memory, e.g. only ``Embed_symbol``).

    Raises:
        UsageError: an access can leave its node's buffer (names the node, axis, index and the
            range it spans), a declared range exceeds what the accesses allow, a symbol has two
            declared ranges, or the code cannot be checked (a loop symbol outside its loop,
            several unranged static symbols in one index, a wrong number of indices).
    """
    walker, ranges = _walk(code, symbols)
    _check_declared(walker, ranges)
    return ranges


def check(code: L.Stmt) -> L.Stmt:
    """:func:`static_ranges` for its errors; returns ``code`` (what ``lower`` calls).

    Raises:
        UsageError: see :func:`static_ranges`.
    """
    static_ranges(code)
    return code


def with_ranges(
    symbols: Sequence[StaticSymbol], ranges: dict[str, int | None]
) -> tuple[StaticSymbol, ...]:
    """``symbols`` carrying the ranges :func:`static_ranges` found (equal by name, so the
    result can replace them anywhere)."""
    return tuple(StaticSymbol(s.name, ranges.get(s.name, s.range)) for s in symbols)
