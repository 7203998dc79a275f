"""Projections: the product space of a computation and how each side indexes into it.

``Projections.from_einsum("ik,kj->ij", lhs, a, b)`` derives them from an einsum-like spec (one
loop per letter; letters absent from the output are reduced); an axis may be an affine
expression of letters (``"b(2*h+i)(2*w+j)c,ijcd->bhwd"``, a strided convolution; the grammar is
in :mod:`arrayjit_ir.spec`). ``Projections.pointwise(lhs, *rhs)`` is numpy broadcasting:
trailing axes align, size-1 axes broadcast.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from arrayjit_ir.indexing import (
    Affine,
    AxisIndex,
    Fixed_idx,
    Iterator,
    Symbol,
    fresh_symbol,
    index_symbols,
)
from arrayjit_ir.spec import AxisSpec, OperandSpec, ParsedSpec, parse_spec, spec_error
from arrayjit_tnode import Tnode, UsageError


@dataclass(frozen=True)
class Projections:
    """The loops of a computation and the indices of its operands.

    Attributes:
        product_space: extent of each loop axis (0 or more; an extent of 1 needs no loop).
        product_iterators: the loop symbol of each product axis.
        project_lhs: the index of each left-hand-side axis.
        project_rhs: per right-hand side, the index of each of its axes.
        spec: the spec the projections were derived from (for printing).
    """

    product_space: tuple[int, ...]
    product_iterators: tuple[Symbol, ...]
    project_lhs: tuple[AxisIndex, ...]
    project_rhs: tuple[tuple[AxisIndex, ...], ...]
    spec: str = ""

    def _extents(self) -> dict[Symbol, int]:
        return dict(zip(self.product_iterators, self.product_space))

    def _lhs_symbols(self) -> set[Symbol]:
        return {s for i in self.project_lhs for s in index_symbols(i) if isinstance(s, Symbol)}

    def is_injective(self) -> bool:
        """Each point of the product space writes a different left-hand-side cell: every loop
        axis with more than one iteration takes part in the left-hand side's indices, and each
        affine index of it is injective over its loops' ranges (:func:`affine_is_injective`:
        ``2*h+i`` with ``i < 2`` is, ``o+k`` is not)."""
        extents: dict[Symbol, int] | None = None  # only affine indices need them
        for idx in self.project_lhs:
            if isinstance(idx, Affine):
                if extents is None:
                    extents = self._extents()
                if not affine_is_injective(idx, extents):
                    return False
        lhs = self._lhs_symbols()
        return all(
            extent <= 1 or sym in lhs
            for extent, sym in zip(self.product_space, self.product_iterators)
        )

    def is_surjective(self, lhs_dims: Sequence[int]) -> bool:
        """Every left-hand-side cell is written: the product space is not empty (unless the
        left-hand side is) and each axis of size > 1 is indexed by its own loop symbol spanning
        the whole axis, or by an affine index of its own loops that enumerates exactly the
        axis's cells (:func:`affine_covers`: ``2*h+i`` with ``h < 4``, ``i < 2`` covers 8
        cells)."""
        if 0 in self.product_space and 0 not in lhs_dims:
            return False  # an empty product space writes nothing
        extents = self._extents()
        seen: set[Symbol] = set()
        for idx, dim in zip(self.project_lhs, lhs_dims):
            if dim <= 1:
                continue
            syms = {s for s in index_symbols(idx) if isinstance(s, Symbol)}
            if not syms or len(syms) != len(index_symbols(idx)):
                return False  # a fixed index, or a static symbol
            if isinstance(idx, Iterator):
                if extents.get(next(iter(syms))) != dim:
                    return False
            elif not (isinstance(idx, Affine) and affine_covers(idx, extents, dim)):
                return False
            if seen & syms:
                return False
            seen |= syms
        return True

    def reduced_axes(self) -> list[int]:
        """Product axes (with more than one iteration) absent from the left-hand side."""
        lhs = self._lhs_symbols()
        return [
            k
            for k, (extent, sym) in enumerate(zip(self.product_space, self.product_iterators))
            if extent > 1 and sym not in lhs
        ]

    # ---- constructors ----

    @classmethod
    def from_einsum(
        cls, spec: str, lhs: Tnode, *rhs: Tnode, sizes: Mapping[str, int] | None = None
    ) -> Projections:
        """Projections from an einsum-like spec such as ``"ik,kj->ij"``, ``"bij->bji"``,
        ``"i,i->"``, or one with affine axes (``"b(2*h+i)(2*w+j)c,ijcd->bhwd"``; the grammar is
        :mod:`arrayjit_ir.spec`'s). Each letter is one loop. Its range comes from the axes where
        it appears alone (the nodes' logical dims; a size-1 axis of an input broadcasts unless
        the letter also appears in an expression), else from ``sizes``, else (a letter only
        inside expressions) it is the largest range that keeps every expression it is in
        within its axis, margins included, as static symbols get theirs. Every expression is
        then checked against its axis: it may leave the node's logical range only into the
        node's padding.

        Raises:
            UsageError: the spec is malformed (:func:`arrayjit_ir.spec.parse_spec`), its
                number of operands or axes differs from the nodes', one letter has two
                different sizes (the message names the letter, both sizes and both nodes), a
                letter inside expressions cannot be given a range, or an expression leaves its
                axis (beyond the padding). Messages about one place name the spec and the
                position.
        """
        return from_einsum(cls, spec, lhs, rhs, sizes)

    @classmethod
    def pointwise(cls, lhs: Tnode, *rhs: Tnode) -> Projections:
        """Element-wise projections with numpy broadcasting of the right-hand sides.

        Raises:
            UsageError: a right-hand side does not broadcast to the left-hand side's shape
                (the message names the nodes, shapes and axis).
        """
        out = lhs.dims_without_padding
        symbols = [fresh_symbol() for _ in out]
        rhs_idx = []
        for tn in rhs:
            dims = tn.dims_without_padding
            if len(dims) > len(out):
                raise UsageError(
                    f"pointwise: {tn.debug_label} with dims {list(dims)} has more axes than the "
                    f"result {lhs.debug_label} with dims {list(out)}"
                )
            shift = len(out) - len(dims)
            idx: list[AxisIndex] = []
            for k, dim in enumerate(dims):
                target = out[shift + k]
                if dim == 1 and target != 1:
                    idx.append(Fixed_idx(0))
                elif dim == target:
                    idx.append(Fixed_idx(0) if dim == 1 else Iterator(symbols[shift + k]))
                else:
                    raise UsageError(
                        f"pointwise: {tn.debug_label} with dims {list(dims)} does not broadcast "
                        f"to the result {lhs.debug_label} with dims {list(out)} (axis "
                        f"{shift + k}: {dim} vs {target})"
                    )
            rhs_idx.append(tuple(idx))
        return cls(
            product_space=out,
            product_iterators=tuple(symbols),
            project_lhs=tuple(
                Fixed_idx(0) if d == 1 else Iterator(s) for d, s in zip(out, symbols)
            ),
            project_rhs=tuple(rhs_idx),
            spec="",
        )


# ---- affine indices: injectivity and coverage ----


def _looping_terms(idx: Affine, extents: Mapping[Symbol, int]) -> list[tuple[int, int]] | None:
    """``(|coefficient|, extent)`` of the terms of ``idx`` over loops with more than one
    iteration, smallest coefficient first; None when a term is a static symbol or an unknown
    loop."""
    out = []
    for c, s in idx.terms:
        if not isinstance(s, Symbol) or s not in extents:
            return None
        if extents[s] > 1:
            out.append((abs(c), extents[s]))
    return sorted(out)


def affine_is_injective(idx: Affine, extents: Mapping[Symbol, int]) -> bool:
    """Whether different points of the loops ``idx`` uses (ranges ``0..extents[s]-1``) give
    different values: sorted by size, each coefficient exceeds the span of the smaller terms
    (a mixed radix: ``2*h+i`` over ``i < 2`` is injective, ``o+k`` over ``k < 3`` is not).
    A term over a static symbol or an unknown loop: False."""
    terms = _looping_terms(idx, extents)
    if terms is None:
        return False
    span = 0
    for c, n in terms:
        if c <= span:
            return False
        span += c * (n - 1)
    return True


def affine_covers(idx: Affine, extents: Mapping[Symbol, int], dim: int) -> bool:
    """Whether ``idx`` takes every value ``0..dim-1`` exactly once over its loops: positive
    coefficients forming an exact mixed radix (each one more than the span of the smaller
    terms), offset 0 and span ``dim - 1`` (``2*h+i`` with ``h < 4``, ``i < 2`` covers 8)."""
    if any(c <= 0 for c, _ in idx.terms) or idx.offset != 0:
        return False
    terms = _looping_terms(idx, extents)
    if terms is None:
        return False
    span = 0
    for c, n in terms:
        if c != span + 1:
            return False
        span += c * (n - 1)
    return span + 1 == dim


# ---- from an einsum spec ----


@dataclass(frozen=True)
class _Use:
    """One axis of one operand of a spec, with its node."""

    operand: OperandSpec
    tn: Tnode
    axis: int
    spec: AxisSpec

    @property
    def dim(self) -> int:
        return self.tn.dims_without_padding[self.axis]

    @property
    def valid(self) -> tuple[int, int]:
        """The logical indices the axis may take: ``-left .. dim - 1 + right`` (its margins
        included)."""
        left, right = (0, 0) if self.tn.padding is None else self.tn.padding.axes[self.axis]
        return -left, self.dim - 1 + right

    def where(self) -> str:
        return f"{self.operand.role} {self.tn.debug_label} axis {self.axis}"


def _span(
    terms: Sequence[tuple[int, str]], offset: int, sizes: Mapping[str, int]
) -> tuple[int, int]:
    lo = hi = offset
    for c, letter in terms:
        a, b = 0, c * (sizes[letter] - 1)
        lo, hi = lo + min(a, b), hi + max(a, b)
    return lo, hi


def _plain_sizes(
    parsed: ParsedSpec, uses: list[_Use], in_exprs: set[str]
) -> dict[str, tuple[int, Tnode, str]]:
    """The size of each letter that appears alone somewhere (with the node and role giving it),
    the broadcast rule applied: a size-1 axis of an input does not size a letter that appears
    only alone."""
    spec = parsed.text
    sizes: dict[str, tuple[int, Tnode, str]] = {}
    for u in uses:
        letter = u.spec.letter
        if letter is None:
            continue
        role, dim, tn = u.operand.role, u.dim, u.tn
        if dim == 1 and role != "output" and letter not in in_exprs:
            continue  # broadcasts
        prev = sizes.get(letter)
        if prev is None or (prev[0] == 1 and letter not in in_exprs):
            sizes[letter] = (dim, tn, role)
        elif prev[0] != dim:
            raise UsageError(
                f"einsum spec {spec!r}: axis '{letter}' has size {prev[0]} in "
                f"{prev[2]} {prev[1].debug_label} but {dim} in {role} {tn.debug_label}"
            )
    for u in uses:
        letter = u.spec.letter
        if u.operand.role != "output" or letter is None or sizes[letter][0] != 1:
            continue
        for v in uses:
            if v.operand.role != "output" and v.spec.letter == letter and v.dim != 1:
                raise UsageError(
                    f"einsum spec {spec!r}: axis '{letter}' has size 1 in the output "
                    f"{u.tn.debug_label} but {v.dim} in {v.operand.role} {v.tn.debug_label}"
                )
    return sizes


def _infer_sizes(spec: str, exprs: list[_Use], sizes: dict[str, int], unknown: set[str]) -> None:
    """Give each letter of ``unknown`` (it appears only inside expressions) the largest range
    keeping every expression it is in within its axis, margins included; in rounds, since a
    range found can bound another expression.

    Raises:
        UsageError: an expression leaves its axis for every value of its letter, or a letter
            cannot be bounded (each of its expressions has another letter without a range)."""
    while unknown:
        found: dict[str, tuple[int, _Use]] = {}
        for u in exprs:
            open_terms = [(c, x) for c, x in u.spec.terms if x in unknown]
            if len(open_terms) != 1:
                continue
            known = [(c, x) for c, x in u.spec.terms if x not in unknown]
            if any(sizes[x] == 0 for _, x in known):
                continue  # never evaluated: no constraint
            c, letter = open_terms[0]
            lo, hi = _span(known, u.spec.offset, sizes)
            v_lo, v_hi = u.valid
            n = (v_hi - hi) // c + 1 if c > 0 else (lo - v_lo) // -c + 1
            if letter not in found or n < found[letter][0]:
                found[letter] = (n, u)
        if not found:
            break
        for letter, (n, u) in found.items():
            if n < 1:
                raise spec_error(
                    spec,
                    u.spec.pos,
                    f"{u.spec.text} leaves {u.where()} (valid {u.valid[0]}..{u.valid[1]}, "
                    f"padding included) for every value of '{letter}'",
                )
            sizes[letter] = n
            unknown.discard(letter)
    for letter in sorted(unknown):
        holding = [u for u in exprs if letter in u.spec.letters]
        if all(any(sizes.get(x) == 0 for x in u.spec.letters) for u in holding):
            sizes[letter] = 1  # every expression it is in is empty: its range does not matter
            continue
        u = holding[0]
        others = ", ".join(f"'{x}'" for x in u.spec.letters if x in unknown)
        raise spec_error(
            spec,
            u.spec.pos,
            f"the range check cannot bound {u.spec.text} of {u.where()}: letters {others} "
            "have no range (use a letter alone in an operand or in the result, or give its "
            "range with sizes=)",
        )


def _index(
    axis: AxisSpec, dim: int, symbols: Mapping[str, Symbol], sizes: Mapping[str, int]
) -> AxisIndex:
    """The index of one axis: a letter alone is its loop (a size-1 axis a fixed 0); an
    expression is affine in its letters' loops (a size-1 letter contributes 0)."""
    if axis.letter is not None and dim == 1:
        return Fixed_idx(0)
    terms = tuple((c, symbols[x]) for c, x in axis.terms if sizes[x] != 1)
    if not terms:
        return Fixed_idx(axis.offset)
    if len(terms) == 1 and terms[0][0] == 1 and axis.offset == 0:
        return Iterator(terms[0][1])
    return Affine(terms, axis.offset)


def _check_ranges(spec: str, exprs: list[_Use], sizes: Mapping[str, int]) -> None:
    """Every expression stays within its axis, margins included.

    Raises:
        UsageError: one leaves it (names the spec, the position, the node and the ranges)."""
    for u in exprs:
        if any(sizes[x] == 0 for x in u.spec.letters):
            continue  # never evaluated
        lo, hi = _span(u.spec.terms, u.spec.offset, sizes)
        v_lo, v_hi = u.valid
        if lo < v_lo or hi > v_hi:
            ranges = ", ".join(f"{x} in 0..{sizes[x] - 1}" for x in u.spec.letters)
            pad = "no padding" if u.tn.padding is None else f"padding {u.tn.padding.axes[u.axis]}"
            raise spec_error(
                spec,
                u.spec.pos,
                f"{u.spec.text} of {u.where()} spans {lo}..{hi} ({ranges}), but the axis has "
                f"{u.dim} cells and {pad} (valid {v_lo}..{v_hi}): an index may leave a node's "
                "range only into its padding",
            )


def from_einsum(
    cls: type[Projections],
    spec: str,
    lhs: Tnode,
    rhs: Sequence[Tnode],
    given: Mapping[str, int] | None,
) -> Projections:
    """:meth:`Projections.from_einsum` (see there)."""
    parsed = parse_spec(spec)
    if len(parsed.inputs) != len(rhs):
        raise UsageError(
            f"einsum spec {spec!r} has {len(parsed.inputs)} inputs but {len(rhs)} nodes were given"
        )
    uses: list[_Use] = []
    for op, tn in zip(parsed.operands, (lhs, *rhs)):
        dims = tn.dims_without_padding
        if len(op.axes) != len(dims):
            raise UsageError(
                f"einsum spec {spec!r}: {op.role} {op.text!r} has {len(op.axes)} axes but node "
                f"{tn.debug_label} has dims {list(dims)}"
            )
        uses.extend(_Use(op, tn, k, axis) for k, axis in enumerate(op.axes))
    exprs = [u for u in uses if u.spec.letter is None]
    in_exprs = {x for u in exprs for x in u.spec.letters}
    plain = _plain_sizes(parsed, uses, in_exprs)
    sizes = {x: n for x, (n, _, _) in plain.items()}
    for x, n in (given or {}).items():
        if x not in parsed.letters:
            raise UsageError(f"einsum spec {spec!r}: sizes names {x!r}, which is not in the spec")
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise UsageError(
                f"einsum spec {spec!r}: sizes[{x!r}] must be a non-negative integer, got {n!r}"
            )
        if x in sizes and sizes[x] != n:
            _, tn, role = plain[x]
            raise UsageError(
                f"einsum spec {spec!r}: sizes gives '{x}' {n}, but it has size {sizes[x]} in "
                f"{role} {tn.debug_label}"
            )
        sizes[x] = n
    unknown = {x for x in in_exprs if x not in sizes}
    for x in parsed.letters:
        if x not in sizes and x not in unknown:
            sizes[x] = 1  # only on broadcast axes
    _infer_sizes(spec, exprs, sizes, unknown)
    _check_ranges(spec, exprs, sizes)
    order = parsed.letters
    symbols = {x: fresh_symbol() for x in order}
    indices = [
        tuple(_index(u.spec, u.dim, symbols, sizes) for u in uses if u.operand is op)
        for op in parsed.operands
    ]
    return cls(
        product_space=tuple(sizes[x] for x in order),
        product_iterators=tuple(symbols[x] for x in order),
        project_lhs=indices[0],
        project_rhs=tuple(indices[1:]),
        spec=spec,
    )
