"""Random multi-statement programs for differential testing of the optimizer and the backends:
the hypothesis strategy :func:`programs`.

A drawn :class:`~arrayjit_conformance.program.Program` is a description without IR objects (see
:mod:`arrayjit_conformance.program`, which also holds its numpy oracle); the names of it that
tests use with the strategy are re-exported here.

What the strategy generates: pointwise chains (unary and binary ops), broadcasts, reductions
(``add``/``max``/``min``/``sub`` accumulation over some, all or no axes, contractions such as
``ab,bc->ac``), in-place updates of nodes that earlier statements read (``p = p - t`` written as
``binop(p, "sub", p, t)``, and ``accum(p, "sub", g, initialize_neutral=False)``), nodes written
twice, a node read twice at different positions (a transposed or re-lettered read), reduction ->
pointwise -> broadcast chains, hosted and non-hosted intermediates, size-1 axes and (for float
programs) empty axes. Values stay small: inputs are multiples of 1/8 in [-2, 2] (so most results
are exact in every precision), ``exp`` only reads bounded values, and a statement whose values
could grow past :data:`~arrayjit_conformance.program.VALUE_LIMIT` is not generated.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

from hypothesis import strategies as st

from arrayjit_conformance.program import (
    BATCH_LETTER,
    BIG_VALUE_LIMIT,
    FLOAT_PROGRAM_PRECS,
    LETTERS,
    VALUE_LIMIT,
    Node,
    Program,
    Stmt,
    evaluate_numpy,
    is_tame,
)

# The operations drawn, per kind of program.
UNOPS = ("relu", "neg", "identity", "tanh", "exp")
INT_UNOPS = ("relu", "neg", "identity")
BINOPS = ("add", "sub", "mul", "max", "min", "relu_gate")
INT_BINOPS = ("add", "sub", "max", "min", "mul", "relu_gate")
FLOAT_ACCUMS = ("add", "max", "min", "sub")
INT_ACCUMS = ("add", "sub", "max", "min")


@dataclass
class _Draft:
    """A program being drawn: defined nodes with estimated magnitudes."""

    prec: str
    sizes: dict[str, int]
    nodes: list[Node] = field(default_factory=list)
    stmts: list[Stmt] = field(default_factory=list)
    bound: dict[str, float] = field(default_factory=dict)
    limit: float = VALUE_LIMIT
    bounded_input: set[str] = field(default_factory=set)

    def new_node(
        self, letters: str, hosted: bool, prec: str | None = None, padded: bool = False
    ) -> Node:
        name = f"{'x' if hosted and not self.stmts else 't'}{len(self.nodes)}"
        n = Node(name, letters, hosted, prec, padded)
        self.nodes.append(n)
        return n

    def other_prec(self, draw: st.DrawFn) -> str | None:
        """Mostly ``None`` (the program's precision); in float programs sometimes the other
        float precision or int32 (mixed programs: every leaf converts to the precision
        written)."""
        if self.prec in FLOAT_PROGRAM_PRECS:
            k = draw(st.integers(0, 9))
            if k < 2:
                return "double" if self.prec == "single" else "single"
            if k == 2:
                return "int32"
        return None

    def letters_of(self, name: str) -> str:
        """The letters of the defined node ``name``."""
        return next(n.letters for n in self.nodes if n.name == name)

    def product_size(self, letters: str) -> int:
        return math.prod(self.sizes[x] for x in letters)


def _relabelings(draft: _Draft, letters: str) -> list[str]:
    """Ways to read a node with ``letters``: itself first, then each relabeling onto distinct
    letters of equal sizes (transposes, or another set of axes)."""
    out = [letters]
    for perm in itertools.permutations(LETTERS, len(letters)):
        cand = "".join(perm)
        if cand != letters and all(draft.sizes[a] == draft.sizes[b] for a, b in zip(letters, cand)):
            out.append(cand)
    return out


def _draw_read(draw: st.DrawFn, draft: _Draft, name: str) -> str:
    letters = draft.letters_of(name)
    options = _relabelings(draft, letters)
    # Mostly read as is; sometimes at other positions.
    if len(options) > 1 and draw(st.integers(0, 3)) == 0:
        return draw(st.sampled_from(options[1:]))
    return letters


def _defined(draft: _Draft) -> list[str]:
    return list(draft.bound)


def _draw_letters(draw: st.DrawFn, must: str, max_extra: int = 1) -> str:
    extra = [x for x in LETTERS if x not in must]
    k = draw(st.integers(0, min(max_extra, len(extra))))
    chosen = must + "".join(draw(st.permutations(extra))[:k])
    return "".join(draw(st.permutations(chosen))) if len(chosen) > 1 else chosen


def _pick_out(
    draw: st.DrawFn, draft: _Draft, letter_set: set[str] | None, want: str, exclude: set[str]
) -> Node:
    """An existing defined node with exactly ``letter_set`` (a node written twice), or a new
    node with the letters ``want``."""
    if letter_set is not None:
        existing = [
            n
            for n in draft.nodes
            if n.name in draft.bound and set(n.letters) == letter_set and n.name not in exclude
        ]
        if existing and draw(st.integers(0, 3)) == 0:
            return draw(st.sampled_from(existing))
    padded = draw(st.integers(0, 7)) == 0
    return draft.new_node(want, draw(st.booleans()), draft.other_prec(draw), padded)


def _unop_choice(draw: st.DrawFn, draft: _Draft, x: str) -> tuple[str, float]:
    floats = draft.prec in FLOAT_PROGRAM_PRECS
    ops = UNOPS if floats else INT_UNOPS
    op = draw(st.sampled_from(ops))
    b = draft.bound[x]
    if op == "exp":
        if b > 3.0:
            op = "tanh"
        else:
            return op, math.exp(b)
    if op == "tanh":
        return op, 1.0
    return op, b


def _stmt_pointwise(draw: st.DrawFn, draft: _Draft, arity: int) -> None:
    defined = _defined(draft)
    args = [draw(st.sampled_from(defined)) for _ in range(arity)]
    reads = [_draw_read(draw, draft, a) for a in args]
    union = "".join(dict.fromkeys("".join(reads)))
    if arity == 1:
        op, bound = _unop_choice(draw, draft, args[0])
    elif arity == 3:
        op, bound = "where", max(draft.bound[args[1]], draft.bound[args[2]])
    else:
        op = draw(st.sampled_from(BINOPS if draft.prec in FLOAT_PROGRAM_PRECS else INT_BINOPS))
        b1, b2 = draft.bound[args[0]], draft.bound[args[1]]
        bound = {"add": b1 + b2, "sub": b1 + b2, "mul": b1 * b2}.get(op, max(b1, b2))
        if bound > draft.limit:
            op, bound = "max", max(b1, b2)
        if op == "relu_gate":
            bound = b2
    out = _pick_out(draw, draft, set(union), _draw_letters(draw, union), set(args))
    use_spec = not all(out.letters.endswith(r) for r in reads) or draw(st.booleans())
    draft.stmts.append(Stmt(out.name, op, tuple(args), tuple(reads), use_spec=use_spec))
    draft.bound[out.name] = bound


def _stmt_reduce(draw: st.DrawFn, draft: _Draft, arity: int) -> None:
    defined = _defined(draft)
    args = [draw(st.sampled_from(defined)) for _ in range(arity)]
    reads = [_draw_read(draw, draft, a) for a in args]
    union = "".join(dict.fromkeys("".join(reads)))
    keep = draw(st.lists(st.booleans(), min_size=len(union), max_size=len(union)))
    kept = "".join(x for x, k in zip(union, keep) if k)
    want = "".join(draw(st.permutations(kept))) if len(kept) > 1 else kept
    reduced = [x for x in union if x not in kept]
    terms = math.prod(draft.sizes[x] for x in reduced)
    floats = draft.prec in FLOAT_PROGRAM_PRECS
    accums: tuple[str, ...] = FLOAT_ACCUMS if floats else INT_ACCUMS
    if any(draft.sizes[x] == 0 for x in reduced):
        accums = ("add", "sub")  # max/min of nothing is infinite
    accum = draw(st.sampled_from(accums))
    if arity == 1:
        op, b = "identity", draft.bound[args[0]]
    else:
        op = draw(st.sampled_from(("mul", "add")))
        b1, b2 = draft.bound[args[0]], draft.bound[args[1]]
        b = b1 * b2 if op == "mul" else b1 + b2
        if b * max(terms, 1) > draft.limit:
            op, b = "add", b1 + b2
    out = _pick_out(draw, draft, set(kept), want, set(args))
    init = True
    if out.name in draft.bound and draw(st.integers(0, 2)) == 0:
        init = False
    if accum in ("add", "sub"):
        b = b * max(terms, 1) + (0.0 if init else draft.bound.get(out.name, 0.0))
    if b > draft.limit:
        draft.nodes = [n for n in draft.nodes if n.name in draft.bound or n is not out]
        return
    draft.stmts.append(Stmt(out.name, op, tuple(args), tuple(reads), accum=accum, init=init))
    draft.bound[out.name] = b


def _draw_updated(draw: st.DrawFn, draft: _Draft) -> tuple[list[str], str, str]:
    """The defined nodes, one of them drawn to be updated in place, and its letters."""
    defined = _defined(draft)
    p = draw(st.sampled_from(defined))
    return defined, p, draft.letters_of(p)


def _stmt_inplace(draw: st.DrawFn, draft: _Draft) -> None:
    """``p = p op t`` with ``t`` read at (some of) ``p``'s positions."""
    defined, p, p_letters = _draw_updated(draw, draft)
    fits = [
        (t, r)
        for t in defined
        for r in _relabelings(draft, draft.letters_of(t))
        # p read at other positions than it is written would depend on the loop order
        if set(r) <= set(p_letters) and (t != p or r == p_letters)
    ]
    t, r = draw(st.sampled_from(fits))
    floats = draft.prec in FLOAT_PROGRAM_PRECS
    op = draw(st.sampled_from(("sub", "add", "mul", "max", "min") if floats else INT_BINOPS))
    bp, bt = draft.bound[p], draft.bound[t]
    bound = {"add": bp + bt, "sub": bp + bt, "mul": bp * bt}.get(op, max(bp, bt))
    if bound > draft.limit:
        op, bound = "max", max(bp, bt)
    use_spec = not p_letters.endswith(r) or draw(st.booleans())
    draft.stmts.append(Stmt(p, op, (p, t), (p_letters, r), use_spec=use_spec))
    draft.bound[p] = bound


def _stmt_accum_inplace(draw: st.DrawFn, draft: _Draft) -> None:
    """``accum(p, "sub", g, initialize_neutral=False)``: ``p = p - g`` (summed over ``g``'s
    extra axes)."""
    defined, p, p_letters = _draw_updated(draw, draft)
    fits = [
        (g, r)
        for g in defined
        if g != p
        for r in _relabelings(draft, draft.letters_of(g))
        if set(p_letters) <= set(r)
    ]
    if not fits:
        return
    g, r = draw(st.sampled_from(fits))
    reduced = [x for x in r if x not in p_letters]
    accum = draw(st.sampled_from(("sub", "add")))
    bound = draft.bound[p] + draft.bound[g] * max(1, draft.product_size("".join(reduced)))
    if bound > draft.limit:
        return
    draft.stmts.append(Stmt(p, "identity", (g,), (r,), accum=accum, init=False))
    draft.bound[p] = bound


def _stmt_fetch(draw: st.DrawFn, draft: _Draft) -> None:
    """``fetch(out, Constant(c))`` or ``fetch(out, Range_over_offsets())``: a new node, or a
    reset of a defined one."""
    letters = _draw_letters(draw, "", max_extra=2)
    out = _pick_out(draw, draft, set(letters), letters, set())
    if draw(st.integers(0, 3)) == 0:
        op, const, bound = "range", None, float(draft.product_size(out.letters))
    else:
        op, const = "constant", draw(st.sampled_from((0.0, 1.5, -0.25)))
        bound = abs(const)
    draft.stmts.append(Stmt(out.name, op, (), (), const=const))
    draft.bound[out.name] = bound


def _stmt_slice(draw: st.DrawFn, draft: _Draft) -> None:
    """``fetch(out, Slice(i, src))`` from a new hosted source with a leading batch axis."""
    draft.sizes[BATCH_LETTER] = 3
    letters = _draw_letters(draw, "", max_extra=2)
    out = _pick_out(draw, draft, set(letters), letters, set())
    src = draft.new_node(BATCH_LETTER + out.letters, hosted=True)
    draft.bound[src.name] = 2.0 if draft.prec in FLOAT_PROGRAM_PRECS else 4.0
    draft.stmts.append(Stmt(out.name, "slice", (src.name,), (src.letters,)))
    draft.bound[out.name] = draft.bound[src.name]


_KINDS = (
    "unop",
    "binop",
    "reduce",
    "contract",
    "inplace",
    "accum_inplace",
    "binop",
    "reduce",
    "fetch",
    "where",
    "slice",
)


@st.composite
def programs(
    draw: st.DrawFn,
    precs: tuple[str, ...] = ("single", "double", "single", "double", "int32", "int64"),
    max_stmts: int = 7,
    allow_empty: bool = True,
    big: bool = False,
) -> Program:
    """A random :class:`Program` (see the module docstring for what it covers). ``big``: axes
    of 33 to 64 (loop nests large enough for the renderers' parallel and reordered forms; too
    large for the interpreter)."""
    prec = draw(st.sampled_from(precs))
    floats = prec in FLOAT_PROGRAM_PRECS
    size_options = [2, 3, 1, 4, 2, 3, 1] + ([0] if floats and allow_empty else [])
    if big:
        size_options = [33, 64, 40, 1, 64]
    sizes = {x: draw(st.sampled_from(size_options)) for x in LETTERS}
    draft = _Draft(prec, sizes, limit=BIG_VALUE_LIMIT if big else VALUE_LIMIT)
    for _ in range(draw(st.integers(1, 3))):
        letters = "".join(draw(st.lists(st.sampled_from(LETTERS), unique=True, max_size=3)))
        padded = draw(st.integers(0, 5)) == 0
        n = draft.new_node(letters, hosted=True, prec=draft.other_prec(draw), padded=padded)
        draft.bound[n.name] = 2.0 if floats else 4.0
    for _ in range(draw(st.integers(2, max_stmts))):
        kind = draw(st.sampled_from(_KINDS))
        match kind:
            case "unop":
                _stmt_pointwise(draw, draft, 1)
            case "binop":
                _stmt_pointwise(draw, draft, 2)
            case "reduce":
                _stmt_reduce(draw, draft, 1)
            case "contract":
                _stmt_reduce(draw, draft, 2)
            case "inplace":
                _stmt_inplace(draw, draft)
            case "accum_inplace":
                _stmt_accum_inplace(draw, draft)
            case "fetch":
                _stmt_fetch(draw, draft)
            case "where":
                _stmt_pointwise(draw, draft, 3)
            case "slice":
                _stmt_slice(draw, draft)
    if not draft.stmts:
        _stmt_pointwise(draw, draft, 1)
    # The last result is observable.
    last = draft.stmts[-1].out
    draft.nodes = [
        Node(n.name, n.letters, True, n.prec, n.padded) if n.name == last else n
        for n in draft.nodes
    ]
    used = {s.out for s in draft.stmts} | {a for s in draft.stmts for a in s.args}
    nodes = tuple(n for n in draft.nodes if n.name in used)
    batches: tuple[int, ...] = ()
    if any(s.op == "slice" for s in draft.stmts):
        batches = (draw(st.integers(0, 2)), draw(st.integers(0, 2)))
    return Program(
        prec,
        tuple(sorted(draft.sizes.items())),
        nodes,
        tuple(draft.stmts),
        draw(st.integers(0, 2**16)),
        batches,
    )


# What tests import from here: the strategy, and program's names they use with it.
__all__ = ["BIG_VALUE_LIMIT", "Node", "Program", "Stmt", "evaluate_numpy", "is_tame", "programs"]
