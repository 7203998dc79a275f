"""The builder: short, readable construction of assignments.

::

    from arrayjit_ir import ir
    comp = ir.block(
        ir.accum(h, "add", x, w, op="mul", spec="bi,ij->bj"),   # h =+ x * w  (matmul)
        ir.unop(y, "relu", h),                                   # y =: relu h
    )
    print(ir.pretty(comp))
"""

from __future__ import annotations

from collections.abc import Mapping

from arrayjit_ir import ops
from arrayjit_ir.assignments import (
    Accum_op,
    Assignment,
    Block,
    Comp,
    Constant,
    Constant_fill,
    Embed_symbol,
    Fetch,
    FetchOp,
    Merge_buffer,
    Noop,
    Range_over_offsets,
    Rhs,
    Slice,
    rhs_node,
)
from arrayjit_ir.indexing import StaticSymbol
from arrayjit_ir.interpret import interpret
from arrayjit_ir.lower import lower
from arrayjit_ir.optimize import optimize, optimize_batch
from arrayjit_ir.pretty import pretty
from arrayjit_ir.projections import Projections
from arrayjit_tnode import Tnode, UsageError, precision

OpName = str | ops.Binop | ops.Unop | ops.Ternop


_ARITY: dict[int, type[ops.Binop] | type[ops.Unop] | type[ops.Ternop]] = {
    1: ops.Unop,
    2: ops.Binop,
    3: ops.Ternop,
}


def _op(name: OpName, arity: int) -> ops.Binop | ops.Unop | ops.Ternop:
    table = _ARITY
    if not isinstance(name, str):
        kind = table.get(arity)
        if kind is None or not isinstance(name, kind):
            valid = [o.value for o in table.get(arity, ops.Binop)]
            raise UsageError(
                f"op must be the name of a {arity}-argument op (or an arrayjit_ir.ops value), "
                f"got {name!r} ({type(name).__name__}); valid: {', '.join(valid)}"
            )
        return name
    try:
        return table[arity](name)
    except (KeyError, ValueError):
        valid = [o.value for o in table.get(arity, ops.Binop)]
        raise UsageError(
            f"unknown {arity}-argument op {name!r}; valid: {', '.join(valid)}"
        ) from None


def _check_node(what: str, tn: object) -> None:
    if not isinstance(tn, Tnode):
        raise UsageError(f"{what} must be a Tnode, got {tn!r} ({type(tn).__name__})")


def _check_rhs(out: Tnode, rhs: tuple[object, ...]) -> None:
    for k, r in enumerate(rhs):
        if not isinstance(r, (Tnode, Merge_buffer)):
            raise UsageError(
                f"assignment to {out.debug_label}: operand {k} must be a Tnode or "
                f"merge_buffer(node), got {r!r} ({type(r).__name__})"
            )


def _projections(
    spec: str | None, lhs: Tnode, rhs: tuple[Rhs, ...], sizes: Mapping[str, int] | None
) -> Projections:
    if spec is not None and not isinstance(spec, str):
        raise UsageError(
            f"assignment to {lhs.debug_label}: spec must be a string such as 'ik,kj->ij' or "
            f"None, got {spec!r}"
        )
    if sizes is not None and (spec is None or not isinstance(sizes, Mapping)):
        raise UsageError(
            f"assignment to {lhs.debug_label}: sizes must be a mapping from letters of the "
            f"spec to ranges, and needs a spec; got sizes={sizes!r}, spec={spec!r}"
        )
    nodes = tuple(rhs_node(r) for r in rhs)
    if spec is None:
        return Projections.pointwise(lhs, *nodes)
    return Projections.from_einsum(spec, lhs, *nodes, sizes=sizes)


def accum(
    out: Tnode,
    accum_op: str | ops.Binop | None,
    *rhs: Rhs,
    op: OpName | None = None,
    spec: str | None = None,
    initialize_neutral: bool = True,
    sizes: Mapping[str, int] | None = None,
) -> Accum_op:
    """``out =accum_op op(rhs...)``: e.g. ``accum(h, "add", x, w, op="mul",
    spec="bi,ij->bj")`` is a matmul, ``accum(y, "add", x, w, op="mul",
    spec="b(o+k)c,kcd->bod")`` a convolution, ``accum(y, "max", x,
    spec="b(2*h+i)(2*w+j)c->bhwc")`` a 2x2 max pooling. ``op`` defaults to ``identity`` for one
    right-hand side. ``sizes`` gives the range of letters that appear only inside the spec's
    expressions (by default the largest that keeps each expression within its axis).

    Raises:
        UsageError: an argument of the wrong type (names it), unknown op names, a spec that
            is malformed or does not match the nodes (see
            :meth:`~arrayjit_ir.projections.Projections.from_einsum`), or a reduction (an axis
            absent from ``out``, or an expression of ``out`` that reaches a cell more than
            once) without an accumulation op.
    """
    _check_node("accum: out", out)
    _check_rhs(out, rhs)
    if op is None:
        if len(rhs) != 1:
            raise UsageError(f"accum into {out.debug_label}: give op= for {len(rhs)} operands")
        op = "identity"
    the_op = _op(op, len(rhs))
    acc = None
    if accum_op is not None:
        if not isinstance(accum_op, (str, ops.Binop)):
            raise UsageError(
                f"accum into {out.debug_label}: accum_op must be a binary op name or None, got "
                f"{accum_op!r} ({type(accum_op).__name__})"
            )
        try:
            acc = ops.parse_binop(accum_op)
        except ValueError:
            raise UsageError(
                f"accum into {out.debug_label}: unknown accumulation op {accum_op!r}; valid: "
                f"{', '.join(o.value for o in ops.Binop)}"
            ) from None
    proj = _projections(spec, out, rhs, sizes)
    if acc is None and not proj.is_injective():
        reduced = proj.reduced_axes()
        what = (
            f"reduces over axes {reduced}"
            if reduced
            else "writes some cells more than once (an expression of the result such as "
            "(o+k) is not injective)"
        )
        raise UsageError(
            f"assignment to {out.debug_label} {what} of spec {proj.spec!r} without an "
            "accumulation op (use accum(out, 'add', ...))"
        )
    return Accum_op(out, the_op, tuple(rhs), acc, initialize_neutral and acc is not None, proj)


def unop(
    out: Tnode,
    op: OpName,
    x: Rhs,
    *,
    spec: str | None = None,
    sizes: Mapping[str, int] | None = None,
) -> Accum_op:
    """``out =: op(x)``.

    Raises:
        UsageError: see :func:`accum`.
    """
    _check_node("unop: out", out)
    return accum(out, None, x, op=_op(op, 1), spec=spec, sizes=sizes)


def binop(
    out: Tnode,
    op: OpName,
    x: Rhs,
    y: Rhs,
    *,
    spec: str | None = None,
    sizes: Mapping[str, int] | None = None,
) -> Accum_op:
    """``out =: op(x, y)`` (pointwise with broadcasting unless a spec is given).

    Raises:
        UsageError: see :func:`accum`.
    """
    _check_node("binop: out", out)
    return accum(out, None, x, y, op=_op(op, 2), spec=spec, sizes=sizes)


def ternop(
    out: Tnode,
    op: OpName,
    a: Rhs,
    b: Rhs,
    c: Rhs,
    *,
    spec: str | None = None,
    sizes: Mapping[str, int] | None = None,
) -> Accum_op:
    """``out =: op(a, b, c)`` (``where`` or ``fma``).

    Raises:
        UsageError: see :func:`accum`.
    """
    _check_node("ternop: out", out)
    return accum(out, None, a, b, c, op=_op(op, 3), spec=spec, sizes=sizes)


def fetch(out: Tnode, fetch_op: FetchOp) -> Fetch:
    """Fill ``out`` (``Constant``, ``Range_over_offsets``, ``Slice``, ``Embed_symbol``,
    ``Constant_fill``).

    Raises:
        UsageError: ``out`` is not a node, or ``fetch_op`` is not a fetch op (or a ``Slice``
            or ``Embed_symbol`` without a ``StaticSymbol``, a ``Slice`` of a non-node, a
            ``Constant`` or ``Constant_fill`` value that is not a number).
    """
    _check_node("fetch: out", out)
    if not isinstance(fetch_op, (Constant, Range_over_offsets, Slice, Embed_symbol, Constant_fill)):
        raise UsageError(
            f"fetch into {out.debug_label}: fetch_op must be Constant, Range_over_offsets, "
            f"Slice, Embed_symbol or Constant_fill, got {fetch_op!r}"
        )
    sym = getattr(fetch_op, "batch", getattr(fetch_op, "symbol", None))
    if isinstance(fetch_op, (Slice, Embed_symbol)) and not isinstance(sym, StaticSymbol):
        raise UsageError(
            f"fetch into {out.debug_label}: {type(fetch_op).__name__} needs a StaticSymbol, "
            f"got {sym!r}"
        )
    if isinstance(fetch_op, Slice):
        _check_node(f"fetch into {out.debug_label}: Slice source", fetch_op.source)
    if isinstance(fetch_op, Constant):
        _check_number(f"fetch into {out.debug_label}: Constant value", fetch_op.value)
    if isinstance(fetch_op, Constant_fill):
        if not isinstance(fetch_op.values, (tuple, list)):
            raise UsageError(
                f"fetch into {out.debug_label}: Constant_fill values must be a tuple of numbers, "
                f"got {fetch_op.values!r}"
            )
        for k, v in enumerate(fetch_op.values):
            _check_number(f"fetch into {out.debug_label}: Constant_fill value {k}", v)
    return Fetch(out, fetch_op)


def _check_number(what: str, v: object) -> None:
    """``v`` is a real number (:func:`arrayjit_tnode.precision.is_number`)."""
    if not precision.is_number(v):
        raise UsageError(f"{what} must be a number, got {v!r} ({type(v).__name__})")


def block(*items: Assignment) -> Block:
    """Assignments run in order.

    Raises:
        UsageError: an item is not an assignment.
    """
    for k, item in enumerate(items):
        if not isinstance(item, (Accum_op, Fetch, Block, Noop)):
            raise UsageError(f"block: item {k} is not an assignment, got {item!r}")
    return Block(tuple(items))


def merge_buffer(tn: Tnode) -> Merge_buffer:
    """A right-hand side reading the stream's merge buffer, which holds a value of ``tn``.

    Raises:
        UsageError: ``tn`` is not a node.
    """
    _check_node("merge_buffer", tn)
    return Merge_buffer(tn)


__all__ = [
    "Accum_op",
    "Block",
    "Comp",
    "Constant",
    "Constant_fill",
    "Embed_symbol",
    "Fetch",
    "Merge_buffer",
    "Noop",
    "Range_over_offsets",
    "Slice",
    "accum",
    "binop",
    "block",
    "fetch",
    "interpret",
    "lower",
    "merge_buffer",
    "optimize",
    "optimize_batch",
    "pretty",
    "ternop",
    "unop",
]
