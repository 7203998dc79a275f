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
from arrayjit_ir.interpret import interpret
from arrayjit_ir.lower import lower
from arrayjit_ir.optimize import optimize, optimize_batch
from arrayjit_ir.pretty import pretty
from arrayjit_ir.projections import Projections
from arrayjit_tnode import Tnode, UsageError

OpName = str | ops.Binop | ops.Unop | ops.Ternop


def _op(name: OpName, arity: int) -> ops.Binop | ops.Unop | ops.Ternop:
    if not isinstance(name, str):
        return name
    table: dict[int, type[ops.Binop] | type[ops.Unop] | type[ops.Ternop]] = {
        1: ops.Unop,
        2: ops.Binop,
        3: ops.Ternop,
    }
    try:
        return table[arity](name)
    except (KeyError, ValueError):
        valid = [o.value for o in table.get(arity, ops.Binop)]
        raise UsageError(
            f"unknown {arity}-argument op {name!r}; valid: {', '.join(valid)}"
        ) from None


def _projections(spec: str | None, lhs: Tnode, rhs: tuple[Rhs, ...]) -> Projections:
    nodes = tuple(rhs_node(r) for r in rhs)
    if spec is None:
        return Projections.pointwise(lhs, *nodes)
    return Projections.from_einsum(spec, lhs, *nodes)


def accum(
    out: Tnode,
    accum_op: str | ops.Binop | None,
    *rhs: Rhs,
    op: OpName | None = None,
    spec: str | None = None,
    initialize_neutral: bool = True,
) -> Accum_op:
    """``out =accum_op op(rhs...)``: e.g. ``accum(h, "add", x, w, op="mul",
    spec="bi,ij->bj")`` is a matmul. ``op`` defaults to ``identity`` for one right-hand side.

    Raises:
        UsageError: unknown op names, a spec that does not match the nodes, or a reduction
            (an axis absent from ``out``) without an accumulation op.
    """
    if op is None:
        if len(rhs) != 1:
            raise UsageError(f"accum into {out.debug_label}: give op= for {len(rhs)} operands")
        op = "identity"
    the_op = _op(op, len(rhs))
    acc = ops.parse_binop(accum_op) if accum_op is not None else None
    proj = _projections(spec, out, rhs)
    if acc is None and not proj.is_injective():
        raise UsageError(
            f"assignment to {out.debug_label} reduces over axes {proj.reduced_axes()} of spec "
            f"{proj.spec!r} without an accumulation op (use accum(out, 'add', ...))"
        )
    return Accum_op(out, the_op, tuple(rhs), acc, initialize_neutral and acc is not None, proj)


def unop(out: Tnode, op: OpName, x: Rhs, *, spec: str | None = None) -> Accum_op:
    """``out =: op(x)``."""
    return accum(out, None, x, op=_op(op, 1), spec=spec)


def binop(out: Tnode, op: OpName, x: Rhs, y: Rhs, *, spec: str | None = None) -> Accum_op:
    """``out =: op(x, y)`` (pointwise with broadcasting unless a spec is given)."""
    return accum(out, None, x, y, op=_op(op, 2), spec=spec)


def ternop(out: Tnode, op: OpName, a: Rhs, b: Rhs, c: Rhs, *, spec: str | None = None) -> Accum_op:
    """``out =: op(a, b, c)`` (``where`` or ``fma``)."""
    return accum(out, None, a, b, c, op=_op(op, 3), spec=spec)


def fetch(out: Tnode, fetch_op: FetchOp) -> Fetch:
    """Fill ``out`` (``Constant``, ``Range_over_offsets``, ``Slice``, ``Embed_symbol``,
    ``Constant_fill``)."""
    return Fetch(out, fetch_op)


def block(*items: Assignment) -> Block:
    """Assignments run in order."""
    return Block(tuple(items))


def merge_buffer(tn: Tnode) -> Merge_buffer:
    """A right-hand side reading the stream's merge buffer, which holds a value of ``tn``."""
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
