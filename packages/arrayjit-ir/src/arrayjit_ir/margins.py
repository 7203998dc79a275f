"""Margins: the cells of a padded node outside its logical range, and the values they hold.

A node created with ``Padding(axes, value)`` has, per axis, ``left`` and ``right`` margins
around its logical cells (low-level indices are buffer indices, margins included). An affine
read such as ``x[o+k-1]`` reaches them; what it reads there is decided here, by the lowering:

- **A declared value** (``Padding(..., 0.0)``, ``Padding(..., -inf)``): the margins hold it,
  always. Host arrays are created that way; every assignment that writes the node is followed
  by a fill of its margins (:func:`margin_fill`), so a device buffer gets them the first time
  the node is computed, and writes into the margins (a result indexed ``b(o+k-1)c``) are
  discarded. Every reader sees that value, whatever its operation: max pooling over a node
  padded with ``0.0`` treats the margins as zeros.
- **No value** (``Padding(..., None)``): the node is read by operations that need different
  margins (a convolution needs 0, a max pooling -inf). Each assignment whose reads reach the
  margins first fills them with the value its own operation needs (:func:`needed_margin`): the
  value ``v`` for which the term with ``v`` in that operand is the accumulation's neutral
  element, whatever the other operands hold — the neutral element itself for a plain read
  (``max``: -inf, ``add``: 0), 0 for a product that is summed. No such value (a plain
  assignment, ``fma``, ...) is a :class:`~arrayjit_tnode.UsageError`: declare the value. Nothing
  restores the margins after a write.

A margin fill writes only margins; the optimizer's trace does not count it as a definition of
the node (:func:`is_margin_write`): a node whose logical cells another routine computed stays
an input of the routine that resets its margins.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence

import numpy as np

from arrayjit_ir import low_level as L
from arrayjit_ir import ops
from arrayjit_ir.indexing import (
    Affine,
    AxisIndex,
    Fixed_idx,
    Iterator,
    StaticSymbol,
    Symbol,
    fresh_symbol,
)
from arrayjit_tnode import Prec, Tnode, UsageError
from arrayjit_tnode.host_array import margin_value


def constant(value: float, prec: Prec) -> L.Expr:
    """``value`` as a constant stored into a node of ``prec``: an integer node holds an
    infinity as its bound (the IR's saturating conversion), a 64-bit one as a bit pattern."""
    if prec.is_float or prec is Prec.uint4x32 or (math.isfinite(value) and abs(value) < 2**53):
        return L.Constant(value)
    v = int(margin_value(value, np.dtype(prec.numpy_dtype)))
    if abs(v) < 2**53:
        return L.Constant(float(v))
    return L.Constant_bits(v - 2**64 if v >= 2**63 else v)


def has_margins(tn: Tnode) -> bool:
    """Whether ``tn`` has a non-empty margin on some axis."""
    return tn.padding is not None and any(lr != (0, 0) for lr in tn.padding.axes)


def margin_fill(tn: Tnode, value: float) -> L.Stmt:
    """Statements setting every margin cell of ``tn`` (each once) to ``value``: for each axis
    with margins, the cells outside the logical range on that axis and inside it on the axes
    before."""
    if not has_margins(tn):
        return L.Noop()
    assert tn.padding is not None
    dims, logical = tn.dims, tn.dims_without_padding
    margins = tn.padding.axes
    v = constant(value, tn.prec)
    stmts: list[L.Stmt] = []
    for a, (left, right) in enumerate(margins):
        for start, count in ((0, left), (left + logical[a], right)):
            if count == 0:
                continue
            ranges: list[tuple[int, int]] = []  # (start, count) per axis
            for b, ((lb, _), d) in enumerate(zip(margins, dims)):
                if b < a:
                    ranges.append((lb, logical[b]))
                elif b == a:
                    ranges.append((start, count))
                else:
                    ranges.append((0, d))
            if any(n == 0 for _, n in ranges):
                continue
            stmts.append(_box(tn, ranges, v))
    return L.seq(*stmts)


def _box(tn: Tnode, ranges: Sequence[tuple[int, int]], v: L.Expr) -> L.Stmt:
    syms = [None if n == 1 else fresh_symbol() for _, n in ranges]
    idx: list[AxisIndex] = []
    for (start, _), s in zip(ranges, syms):
        if s is None:
            idx.append(Fixed_idx(start))
        else:
            idx.append(Iterator(s) if start == 0 else Affine(((1, s),), start))
    stmt: L.Stmt = L.Set(tn, tuple(idx), v)
    for (_, n), s in reversed(list(zip(ranges, syms))):
        if s is not None:
            stmt = L.For_loop(s, 0, n - 1, stmt)
    return stmt


def _interval(
    idx: AxisIndex, env: Mapping[Symbol | StaticSymbol, tuple[int, int]]
) -> tuple[int, int] | None:
    """The values ``idx`` takes over the loop ranges ``env``; None when it uses something else
    (a static symbol)."""
    match idx:
        case Fixed_idx(value=v):
            return v, v
        case Iterator(symbol=s):
            return env.get(s)
        case Affine(terms=terms, offset=off):
            lo = hi = off
            for c, s in terms:
                r = env.get(s)
                if r is None:
                    return None
                a, b = c * r[0], c * r[1]
                lo, hi = lo + min(a, b), hi + max(a, b)
            return lo, hi
    return None


def is_margin_write(s: L.Stmt) -> bool:
    """Whether ``s`` is a loop nest storing a constant only into margin cells of a padded
    node (what :func:`margin_fill` writes): some axis's index stays outside the logical
    range."""
    # The cheap tests first (the optimizer asks this of every statement): only a constant
    # store into a padded node needs the loop ranges.
    body = s
    while isinstance(body, L.For_loop):
        if body.to_inclusive < body.from_:
            return False
        body = body.body
    if not isinstance(body, L.Set) or not isinstance(body.value, L.Constant | L.Constant_bits):
        return False
    if body.tn.padding is None:
        return False
    env: dict[Symbol | StaticSymbol, tuple[int, int]] = {}
    while isinstance(s, L.For_loop):
        env[s.index] = (s.from_, s.to_inclusive)
        s = s.body
    assert isinstance(s, L.Set)
    tn = s.tn
    padding = tn.padding
    assert padding is not None
    for i, (left, _), d in zip(s.indices, padding.axes, tn.dims_without_padding):
        r = _interval(i, env)
        if r is not None and (r[1] < left or r[0] > left + d - 1):
            return True
    return False


def reaches_margins(tn: Tnode, idx: Sequence[AxisIndex], extents: Mapping[Symbol, int]) -> int:
    """The first axis on which the logical index ``idx`` of ``tn`` (over loops of ``extents``)
    leaves the logical range, or -1 (never, or never evaluated: an empty loop)."""
    if any(n == 0 for n in extents.values()):
        return -1
    env: dict[Symbol | StaticSymbol, tuple[int, int]] = {s: (0, n - 1) for s, n in extents.items()}
    for axis, (i, d) in enumerate(zip(idx, tn.dims_without_padding)):
        r = _interval(i, env)
        if r is not None and (r[0] < 0 or r[1] > d - 1):
            return axis
    return -1


_CANDIDATES = (0.0, -math.inf, math.inf, 1.0)
_SAMPLES = (-2.5, 0.0, 1.0, 3.75)


def needed_margin(
    accum: ops.Binop | None, op: ops.Binop | ops.Unop | ops.Ternop, operand: int
) -> float | None:
    """The margin value that makes a term neutral: the ``v`` for which ``op`` with ``v`` as its
    operand ``operand`` gives ``accum``'s neutral element whatever finite values the other
    operands hold (tried: the neutral element, 0, -inf, +inf, 1); the neutral element for an
    operand ``op`` does not use (``arg1``'s second). None without an accumulation or when no
    such value exists."""
    if accum is None:
        return None
    neutral = ops.neutral(accum)
    if (op, operand) in ((ops.Binop.arg1, 1), (ops.Binop.arg2, 0)):
        return neutral  # the operand is not used: any value does
    dt = np.dtype(np.float64)
    arity = 1 if isinstance(op, ops.Unop) else 2 if isinstance(op, ops.Binop) else 3
    for v in (neutral, *_CANDIDATES):
        ok = True
        for others in itertools.product(_SAMPLES, repeat=arity - 1):
            args = [dt.type(x) for x in others]
            args.insert(operand, dt.type(v))
            try:
                with np.errstate(all="ignore"):
                    match op:
                        case ops.Unop():
                            got = float(ops.apply_unop(op, args[0], dt))
                        case ops.Binop():
                            got = float(ops.apply_binop(op, args[0], args[1], dt))
                        case ops.Ternop():
                            got = float(ops.apply_ternop(op, args[0], args[1], args[2], dt))
            except (TypeError, ValueError, OverflowError):  # random bits: no float meaning
                return None
            if got != neutral:
                ok = False
                break
        if ok:
            return v
    return None


def reset_for_reads(
    lhs: Tnode,
    accum: ops.Binop | None,
    op: ops.Binop | ops.Unop | ops.Ternop,
    reads: Sequence[tuple[Tnode, bool, Sequence[AxisIndex]]],
    extents: Mapping[Symbol, int],
    spec: str,
) -> L.Stmt:
    """The margin fills an assignment runs first: for every operand (node, whether it is a
    merge buffer, logical index) of a node padded without a value whose index reaches its
    margins, a fill with :func:`needed_margin`'s value.

    Raises:
        UsageError: no value makes the term neutral, one node needs two values, or a merge
            buffer's margins would need a value (they are another stream's copy)."""
    values: dict[Tnode, float] = {}
    for k, (tn, merge, idx) in enumerate(reads):
        if tn.padding is None or tn.padding.value is not None:
            continue
        axis = reaches_margins(tn, idx, extents)
        if axis < 0:
            continue
        where = (
            f"assignment to {lhs.debug_label} (spec {spec!r}) reads the margins of "
            f"{tn.debug_label} (operand {k}, axis {axis}), whose Padding value is None"
        )
        if merge:
            raise UsageError(
                f"{where} through the merge buffer, which holds another stream's copy: "
                "declare the padding value"
            )
        v = needed_margin(accum, op, k)
        if v is None:
            how = "without an accumulation" if accum is None else f"for accumulating {accum.value}"
            raise UsageError(
                f"{where}, and no margin value makes {op.value} neutral {how}: declare the "
                f"padding value (Padding(..., value)) the reads should see"
            )
        if tn in values and values[tn] != v and not (math.isnan(v) and math.isnan(values[tn])):
            raise UsageError(
                f"{where}; its operands need margins {values[tn]} and {v} at once: declare "
                "the padding value"
            )
        values[tn] = v
    return L.seq(*(margin_fill(tn, v) for tn, v in values.items()))


__all__ = [
    "constant",
    "has_margins",
    "is_margin_write",
    "margin_fill",
    "needed_margin",
    "reaches_margins",
    "reset_for_reads",
]
