"""Projections: the product space of a computation and how each side indexes into it.

``Projections.from_einsum("ik,kj->ij", lhs, a, b)`` derives them from an einsum-like spec (one
letter per axis; letters absent from the output are reduced). ``Projections.pointwise(lhs,
*rhs)`` is numpy broadcasting: trailing axes align, size-1 axes broadcast.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from arrayjit_ir.indexing import AxisIndex, Fixed_idx, Iterator, Symbol, fresh_symbol
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

    def _lhs_symbols(self) -> list[Symbol]:
        return [i.symbol for i in self.project_lhs if isinstance(i, Iterator)]  # type: ignore[misc]

    def is_injective(self) -> bool:
        """Each point of the product space writes a different left-hand-side cell (no loop axis
        with more than one iteration is missing from the left-hand side)."""
        lhs = set(self._lhs_symbols())
        return all(
            extent <= 1 or sym in lhs
            for extent, sym in zip(self.product_space, self.product_iterators)
        )

    def is_surjective(self, lhs_dims: Sequence[int]) -> bool:
        """Every left-hand-side cell is written: the product space is not empty (unless the
        left-hand side is) and each axis of size > 1 is indexed by its own loop symbol spanning
        the whole axis."""
        if 0 in self.product_space and 0 not in lhs_dims:
            return False  # an empty product space writes nothing
        extents = dict(zip(self.product_iterators, self.product_space))
        seen: set[Symbol] = set()
        for idx, dim in zip(self.project_lhs, lhs_dims):
            if dim <= 1:
                continue
            if not isinstance(idx, Iterator) or not isinstance(idx.symbol, Symbol):
                return False
            if idx.symbol in seen or extents.get(idx.symbol) != dim:
                return False
            seen.add(idx.symbol)
        return True

    def reduced_axes(self) -> list[int]:
        """Product axes (with more than one iteration) absent from the left-hand side."""
        lhs = set(self._lhs_symbols())
        return [
            k
            for k, (extent, sym) in enumerate(zip(self.product_space, self.product_iterators))
            if extent > 1 and sym not in lhs
        ]

    # ---- constructors ----

    @classmethod
    def from_einsum(cls, spec: str, lhs: Tnode, *rhs: Tnode) -> Projections:
        """Projections from an einsum-like spec such as ``"ik,kj->ij"``, ``"bij->bji"``,
        ``"i,i->"``. Sizes come from the nodes' logical dims; a size-1 axis broadcasts.

        Raises:
            UsageError: the spec is malformed, its number of operands or axes differs from the
                nodes', one operand repeats a letter (a diagonal such as ``ii->i`` or a trace
                ``ii->`` is not an einsum here), or one letter has two different sizes (the
                message names the letter, both sizes and both nodes).
        """
        text = spec.replace(" ", "")
        if "->" not in text:
            raise UsageError(f"einsum spec {spec!r}: expected 'inputs->output', e.g. 'ik,kj->ij'")
        ins, out = text.split("->", 1)
        in_specs = ins.split(",") if ins else [""]
        if len(in_specs) != len(rhs):
            raise UsageError(
                f"einsum spec {spec!r} has {len(in_specs)} inputs but {len(rhs)} nodes were given"
            )
        operands = [
            (out, lhs, "output"),
            *((s, t, f"input {k}") for k, (s, t) in enumerate(zip(in_specs, rhs))),
        ]
        sizes: dict[str, tuple[int, Tnode, str]] = {}
        for letters, tn, role in operands:
            dims = tn.dims_without_padding
            if len(letters) != len(dims):
                raise UsageError(
                    f"einsum spec {spec!r}: {role} {letters!r} has {len(letters)} axes but node "
                    f"{tn.debug_label} has dims {list(dims)}"
                )
            if len(set(letters)) != len(letters):
                raise UsageError(f"einsum spec {spec!r}: {role} {letters!r} repeats an axis")
            for letter, dim in zip(letters, dims):
                if not letter.isalpha():
                    raise UsageError(f"einsum spec {spec!r}: axis names must be letters")
                if dim == 1 and role != "output":
                    continue  # broadcasts
                prev = sizes.get(letter)
                if prev is None or prev[0] == 1:
                    sizes[letter] = (dim, tn, role)
                elif prev[0] != dim:
                    raise UsageError(
                        f"einsum spec {spec!r}: axis '{letter}' has size {prev[0]} in "
                        f"{prev[2]} {prev[1].debug_label} but {dim} in {role} {tn.debug_label}"
                    )
        for letter in out:
            if sizes[letter][0] == 1:
                for letters, tn, role in operands[1:]:
                    if letter in letters:
                        d = tn.dims_without_padding[letters.index(letter)]
                        if d != 1:
                            raise UsageError(
                                f"einsum spec {spec!r}: axis '{letter}' has size 1 in the "
                                f"output {lhs.debug_label} but {d} in {role} {tn.debug_label}"
                            )
        order = list(dict.fromkeys(out + "".join(in_specs)))
        for letter in order:
            sizes.setdefault(letter, (1, lhs, "output"))
        symbols = {letter: fresh_symbol() for letter in order}

        def index(letters: str, tn: Tnode) -> tuple[AxisIndex, ...]:
            return tuple(
                Fixed_idx(0) if dim == 1 else Iterator(symbols[letter])
                for letter, dim in zip(letters, tn.dims_without_padding)
            )

        return cls(
            product_space=tuple(sizes[letter][0] for letter in order),
            product_iterators=tuple(symbols[letter] for letter in order),
            project_lhs=index(out, lhs),
            project_rhs=tuple(index(s, t) for s, t in zip(in_specs, rhs)),
            spec=spec,
        )

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
