"""The low-level IR: loops, stores and scalar expressions over tensor nodes.

Statements: :class:`Noop`, :class:`Comment`, :class:`Seq`, :class:`For_loop`,
:class:`Zero_out`, :class:`Set`, :class:`Set_local`.
Scalar expressions: :class:`Get`, :class:`Get_merge_buffer`, :class:`Local_scope`,
:class:`Get_local`, :class:`Embed_index`, :class:`Constant`, :class:`Constant_bits`,
:class:`Binop`, :class:`Unop`, :class:`Ternop`.

Evaluation model: a scalar expression is evaluated in the precision of the node it is stored
into (the ``Set`` target, or the node of the ``Local_scope``); every leaf is converted to that
precision. The condition of ``where`` keeps its own natural precision (:func:`natural_prec`),
and both of its operands are evaluated (common-subexpression elimination may leave one
reading a local scope the other computes);
half, bfloat16 and fp8 compute wider and round when stored (:func:`rounds_when_stored`). A
local's precision is its scope's (:attr:`ScopeId.prec`): a float32 accumulator of a small-float
reduction does not round until its value is stored.
A ``Local_scope``'s local starts as :func:`local_start` of its precision (-0.0 for floats, 0
for integers) and holds what its body last set; producers that need another start (an
inlined reduction's neutral fill, a cell's old value) set it first.
``For_loop`` bounds are inclusive. Indices are buffer indices (padding already applied).

All IR values are frozen dataclasses compared structurally; tensor nodes compare by id.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from arrayjit_ir import ops
from arrayjit_ir.indexing import AxisIndex, Symbol
from arrayjit_tnode import Prec, precision

if TYPE_CHECKING:
    from arrayjit_tnode import Tnode


@dataclass(frozen=True)
class ScopeId:
    """A scalar local variable holding one value of the (virtual) node ``tn``, or (with
    ``acc_prec``) a wider accumulator of a reduction into ``tn``.

    Rendered as ``v<id>_<node name>``; its precision (:attr:`prec`) is ``acc_prec`` when set,
    else ``tn``'s. The lowering gives reductions into half, bfloat16 and fp8 cells a float32
    accumulator this way (see :mod:`arrayjit_ir.lower`)."""

    tn: Tnode
    id: int
    acc_prec: Prec | None = None

    @property
    def prec(self) -> Prec:
        """The precision the local holds and computes in."""
        return self.acc_prec if self.acc_prec is not None else self.tn.prec


# ---- statements ----


@dataclass(frozen=True)
class Noop:
    """Does nothing."""


@dataclass(frozen=True)
class Comment:
    """A comment carried into generated code."""

    text: str


@dataclass(frozen=True)
class Seq:
    """Statements run in order."""

    stmts: tuple[Stmt, ...]


@dataclass(frozen=True)
class For_loop:
    """``for index in from_ .. to_inclusive: body``. ``trace_it=False`` means the loop must not
    be unrolled while tracing and the nodes it writes are not virtualizable."""

    index: Symbol
    from_: int
    to_inclusive: int
    body: Stmt
    trace_it: bool = True

    @property
    def extent(self) -> int:
        """How many times the body runs (0 for an empty range)."""
        return max(self.to_inclusive - self.from_ + 1, 0)


@dataclass(frozen=True)
class Zero_out:
    """Set every cell of ``tn`` to zero."""

    tn: Tnode


@dataclass(frozen=True)
class Set:
    """``tn[indices] = value`` (value evaluated in ``tn``'s precision)."""

    tn: Tnode
    indices: tuple[AxisIndex, ...]
    value: Expr


@dataclass(frozen=True)
class Set_local:
    """Assign a scalar local."""

    scope: ScopeId
    value: Expr


Stmt = Noop | Comment | Seq | For_loop | Zero_out | Set | Set_local


# ---- scalar expressions ----


@dataclass(frozen=True)
class Get:
    """Read ``tn[indices]``."""

    tn: Tnode
    indices: tuple[AxisIndex, ...]


@dataclass(frozen=True)
class Get_merge_buffer:
    """Read ``indices`` of the stream's merge buffer, which holds a value of ``tn``."""

    tn: Tnode
    indices: tuple[AxisIndex, ...]


@dataclass(frozen=True)
class Local_scope:
    """The value of local ``scope`` after running ``body``: an inlined virtual computation.
    The local starts as :func:`local_start` (-0.0 for a float local, the identity of ``add``,
    so a body that only accumulates sums into it exactly, signed zeros included).

    ``orig_indices`` are the indices of the read it replaced (used to revert it)."""

    scope: ScopeId
    body: Stmt
    orig_indices: tuple[AxisIndex, ...] = field(default=())


@dataclass(frozen=True)
class Get_local:
    """Read a scalar local."""

    scope: ScopeId


@dataclass(frozen=True)
class Embed_index:
    """The integer value of an axis index, used as a number."""

    index: AxisIndex


@dataclass(frozen=True)
class Constant:
    """A numeric literal (converted to the precision of the consumer)."""

    value: float


@dataclass(frozen=True)
class Constant_bits:
    """An exact integer bit pattern (for integers wider than a double's mantissa, uint4x32)."""

    value: int


@dataclass(frozen=True)
class Binop:
    """``op(a, b)``."""

    op: ops.Binop
    a: Expr
    b: Expr


@dataclass(frozen=True)
class Unop:
    """``op(a)``."""

    op: ops.Unop
    a: Expr


@dataclass(frozen=True)
class Ternop:
    """``op(a, b, c)``."""

    op: ops.Ternop
    a: Expr
    b: Expr
    c: Expr


Expr = (
    Get
    | Get_merge_buffer
    | Local_scope
    | Get_local
    | Embed_index
    | Constant
    | Constant_bits
    | Binop
    | Unop
    | Ternop
)


def map_children(e: Expr, f: Callable[[Expr], Expr]) -> Expr:
    """``e`` with ``f`` applied to each operand of an op, left to right (``e`` itself when it
    has none)."""
    # isinstance chains rather than class patterns: every pass over expressions comes here.
    if isinstance(e, Binop):
        a2 = f(e.a)
        return Binop(e.op, a2, f(e.b))
    if isinstance(e, Unop):
        return Unop(e.op, f(e.a))
    if isinstance(e, Ternop):
        a2 = f(e.a)
        b2 = f(e.b)
        return Ternop(e.op, a2, b2, f(e.c))
    return e


def local_start(prec: Prec) -> float:
    """The value a :class:`Local_scope`'s local of precision ``prec`` holds before its body
    sets it: the start of an add-accumulation (:func:`ops.partial_start`), -0.0 for floats and
    0 for integers. Blocked summation's partials rely on it; a user's fill stays +0.0."""
    return ops.partial_start(ops.Binop.add, prec.is_float)


def rounds_when_stored(prec: Prec) -> bool:
    """Whether values of ``prec`` are computed in a wider type and rounded when stored (half,
    bfloat16, fp8): in memory, and in a scalar local holding a virtual node's value alike."""
    return prec in (Prec.half, Prec.bfloat16, Prec.fp8)


def natural_prec(e: Expr) -> Prec:
    """The precision an expression has on its own (used for the condition of ``where``)."""
    match e:
        case Get(tn=tn) | Get_merge_buffer(tn=tn):
            return tn.prec
        case Local_scope(scope=s) | Get_local(scope=s):
            return s.prec
        case Constant():
            return Prec.single
        case Constant_bits() | Embed_index():
            return Prec.int64
        case Binop(op=ops.Binop.threefry4x32):
            return Prec.uint4x32
        case Binop(a=a, b=b):
            return precision.promote(natural_prec(a), natural_prec(b))
        case Unop(op=ops.Unop.uint4x32_to_prec_uniform):
            return Prec.single
        case Unop(a=a):
            return natural_prec(a)
        case Ternop(op=ops.Ternop.where, b=b, c=c):
            return precision.promote(natural_prec(b), natural_prec(c))
        case Ternop(a=a, b=b, c=c):
            return precision.promote(
                precision.promote(natural_prec(a), natural_prec(b)), natural_prec(c)
            )
    raise TypeError(f"not an expression: {e!r}")


def map_exprs(s: Stmt, f: Callable[[Expr], Expr]) -> Stmt:
    """``s`` with ``f`` applied to the value of every ``Set`` and ``Set_local`` (loops and
    sequences rebuilt around them, other statements kept)."""
    if isinstance(s, Set):
        return Set(s.tn, s.indices, f(s.value))
    if isinstance(s, For_loop):
        return For_loop(s.index, s.from_, s.to_inclusive, map_exprs(s.body, f), s.trace_it)
    if isinstance(s, Seq):
        return Seq(tuple([map_exprs(x, f) for x in s.stmts]))
    if isinstance(s, Set_local):
        return Set_local(s.scope, f(s.value))
    return s


def children(e: Expr) -> tuple[Expr, ...]:
    """The operands of an op (no others: a local scope's body is statements)."""
    if isinstance(e, Binop):
        return (e.a, e.b)
    if isinstance(e, Unop):
        return (e.a,)
    if isinstance(e, Ternop):
        return (e.a, e.b, e.c)
    return ()


def seq(*stmts: Stmt) -> Stmt:
    """Sequence statements, flattening nested ``Seq`` and dropping ``Noop``; a single
    statement is returned as is and none gives ``Noop()``."""
    flat: list[Stmt] = []
    for s in stmts:
        if isinstance(s, Seq):
            flat.extend([x for x in s.stmts if not isinstance(x, Noop)])
        elif not isinstance(s, Noop):
            flat.append(s)
    if not flat:
        return Noop()
    if len(flat) == 1:
        return flat[0]
    return Seq(tuple(flat))


def exprs_of(s: Stmt) -> Iterable[Expr]:
    """The value of every ``Set`` and ``Set_local`` in ``s`` (not descending into values)."""
    out: list[Expr] = []
    _collect_exprs(s, out)
    return out


def _collect_exprs(s: Stmt, out: list[Expr]) -> None:
    # A list filled in place: the optimizer walks every statement several times, and nested
    # generators cost a frame per level per value.
    if isinstance(s, Seq):
        for x in s.stmts:
            _collect_exprs(x, out)
    elif isinstance(s, For_loop):
        _collect_exprs(s.body, out)
    elif isinstance(s, (Set, Set_local)):
        out.append(s.value)


def sub_exprs(e: Expr) -> Iterable[Expr]:
    """``e`` and every expression inside it, local-scope bodies included (pre-order)."""
    out: list[Expr] = []
    stack: list[Expr] = [e]
    while stack:
        x = stack.pop()
        out.append(x)
        # Operands pushed last to first, so that they are visited first to last.
        if isinstance(x, Binop):
            stack.append(x.b)
            stack.append(x.a)
        elif isinstance(x, Unop):
            stack.append(x.a)
        elif isinstance(x, Ternop):
            stack.append(x.c)
            stack.append(x.b)
            stack.append(x.a)
        elif isinstance(x, Local_scope):
            inner: list[Expr] = []
            _collect_exprs(x.body, inner)
            stack.extend(reversed(inner))
    return out


def reads(s: Stmt) -> list[Get | Get_merge_buffer]:
    """Every node read in ``s``, inlined computations included, in order."""
    return [x for e in exprs_of(s) for x in sub_exprs(e) if isinstance(x, (Get, Get_merge_buffer))]


def writes(s: Stmt) -> list[Set | Zero_out]:
    """Every store to a node in ``s``, in order."""
    out: list[Set | Zero_out] = []
    _collect_writes(s, out)
    return out


def _collect_writes(s: Stmt, out: list[Set | Zero_out]) -> None:
    if isinstance(s, Seq):
        for x in s.stmts:
            _collect_writes(x, out)
    elif isinstance(s, For_loop):
        _collect_writes(s.body, out)
    elif isinstance(s, (Set, Zero_out)):
        out.append(s)


@dataclass(frozen=True, eq=False)
class Accesses:
    """The stores and reads of each statement of a sequence (:func:`writes`, :func:`reads`),
    gathered once: the optimizer's passes each consult them for every top-level statement.
    Built per routine and dropped with it (it refers to the statements' nodes)."""

    writes: tuple[list[Set | Zero_out], ...]
    reads: tuple[list[Get | Get_merge_buffer], ...]
    written: tuple[set[Tnode], ...]
    """The nodes each statement stores to."""
    embeds: tuple[list[Embed_index], ...] = ()
    """The indices each statement uses as numbers (with the reads' and stores' indices, every
    index it mentions)."""

    @staticmethod
    def of(stmts: Iterable[Stmt]) -> Accesses:
        """The accesses of ``stmts``, in their order."""
        ws: list[list[Set | Zero_out]] = []
        rs: list[list[Get | Get_merge_buffer]] = []
        es: list[list[Embed_index]] = []
        for s in stmts:
            ws.append(writes(s))
            r: list[Get | Get_merge_buffer] = []
            em: list[Embed_index] = []
            for e in exprs_of(s):  # one walk for both (reads is the first half)
                for x in sub_exprs(e):
                    if isinstance(x, (Get, Get_merge_buffer)):
                        r.append(x)
                    elif isinstance(x, Embed_index):
                        em.append(x)
            rs.append(r)
            es.append(em)
        written = tuple({w.tn for w in w_} for w_ in ws)
        return Accesses(tuple(ws), tuple(rs), written, tuple(es))
