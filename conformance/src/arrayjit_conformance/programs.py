"""Random multi-statement programs for differential testing of the optimizer and the backends.

A :class:`Program` describes a computation without any IR object in it (letters with sizes,
nodes named by letters, statements), so that it prints as Python that rebuilds it, shrinks well
under hypothesis and can be pasted into a regression test. :func:`programs` is the hypothesis
strategy; :meth:`Program.build` makes *fresh* tensor nodes and the ``ir`` block (memory modes are
decided once per node, so a node is never reused across programs); :func:`evaluate_numpy` is the
independent oracle: plain numpy executing the statements one after another, each over its whole
product space, in the precision of the node it writes.

What the strategy generates: pointwise chains (unary and binary ops), broadcasts, reductions
(``add``/``max``/``min``/``sub`` accumulation over some, all or no axes, contractions such as
``ab,bc->ac``), in-place updates of nodes that earlier statements read (``p = p - t`` written as
``binop(p, "sub", p, t)``, and ``accum(p, "sub", g, initialize_neutral=False)``), nodes written
twice, a node read twice at different positions (a transposed or re-lettered read), reduction ->
pointwise -> broadcast chains, hosted and non-hosted intermediates, size-1 axes and (for float
programs) empty axes. Values stay small: inputs are multiples of 1/8 in [-2, 2] (so most results
are exact in every precision), ``exp`` only reads bounded values, and a statement whose values
could grow past :data:`VALUE_LIMIT` is not generated.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hypothesis import strategies as st

from arrayjit_ir import ir
from arrayjit_ir.assignments import Assignment
from arrayjit_ir.indexing import StaticSymbol
from arrayjit_tnode import Padding, Prec, Tnode

LETTERS = "abc"
FLOAT_PROGRAM_PRECS = ("single", "double")
INT_PROGRAM_PRECS = ("int32", "int64")
VALUE_LIMIT = 1e3
BATCH_LETTER = "s"
BATCH = StaticSymbol("i", range=3)
"""The static symbol slices read with (bound per run); sources have 3 batches."""
PAD_VALUE = 0.5
BIG_VALUE_LIMIT = 1e5
"""Bound on the magnitude of any value a generated program computes (estimated per statement;
:func:`is_tame` checks the real values)."""

UNOPS = ("relu", "neg", "identity", "tanh", "exp")
INT_UNOPS = ("relu", "neg", "identity")
BINOPS = ("add", "sub", "mul", "max", "min", "relu_gate")
INT_BINOPS = ("add", "sub", "max", "min", "mul", "relu_gate")
FLOAT_ACCUMS = ("add", "max", "min", "sub")
INT_ACCUMS = ("add", "sub", "max", "min")


@dataclass(frozen=True)
class Node:
    """A node of a program: its axes are letters (``"ab"``: dims ``(size a, size b)``)."""

    name: str
    letters: str
    hosted: bool
    prec: str | None = None
    """The node's own precision where it differs from the program's (mixed programs)."""
    padded: bool = False
    """Margins of 1 (left) and 2 (right) on every axis, holding :data:`PAD_VALUE`: buffer
    indices differ from logical ones."""


@dataclass(frozen=True)
class Stmt:
    """One assignment: ``out[out_letters] (accum)= op(args[arg_letters]...)``.

    ``arg_letters`` are the spec letters each operand is read with: a relabeling of the
    operand's own letters onto letters of equal size (a transpose, or a second reading of the
    same node at other positions). ``accum=None`` is plain assignment (every product letter is
    in ``out``); ``init`` is ``initialize_neutral``. ``use_spec=False`` writes the statement
    without a spec (numpy broadcasting), which is possible where each operand's letters are a
    trailing part of the output's."""

    out: str
    op: str
    args: tuple[str, ...]
    arg_letters: tuple[str, ...]
    accum: str | None = None
    init: bool = True
    use_spec: bool = True
    const: float | None = None
    """For ``op="constant"``: ``fetch(out, Constant(const))``; ``op="range"`` is
    ``fetch(out, Range_over_offsets())``; ``op="slice"`` is ``fetch(out, Slice(i, args[0]))``
    with the static symbol :data:`BATCH` (the source's first letter is :data:`BATCH_LETTER`)."""


@dataclass(frozen=True)
class Program:
    """A random program: precision, letter sizes, nodes (inputs first) and statements. Its
    ``repr`` is Python that rebuilds it (``Program(...)`` with :class:`Node` and :class:`Stmt`
    from this module); ``seed`` picks the initial values of the hosted nodes."""

    prec: str
    sizes: tuple[tuple[str, int], ...]
    nodes: tuple[Node, ...]
    stmts: tuple[Stmt, ...]
    seed: int = 0
    batches: tuple[int, ...] = ()
    """The value of the static symbol :data:`BATCH` in each run (programs with slices)."""

    # ---- shapes ----

    @property
    def size_of(self) -> dict[str, int]:
        """Size of each letter."""
        return dict(self.sizes)

    def node(self, name: str) -> Node:
        """The node called ``name``."""
        return next(n for n in self.nodes if n.name == name)

    def dims(self, name: str) -> tuple[int, ...]:
        """Dims of node ``name``."""
        sizes = self.size_of
        return tuple(sizes[letter] for letter in self.node(name).letters)

    def batch(self, run: int) -> int:
        """The value of :data:`BATCH` in run ``run`` (counted from 0)."""
        return self.batches[run % len(self.batches)] if self.batches else 0

    @property
    def symbols(self) -> tuple[StaticSymbol, ...]:
        """The static symbols the program needs bound."""
        return (BATCH,) if any(s.op == "slice" for s in self.stmts) else ()

    def padding(self, name: str) -> Padding | None:
        """The padding of node ``name`` (``None``: unpadded)."""
        n = self.node(name)
        if not n.padded or not n.letters:
            return None
        return Padding(tuple((1, 2) for _ in n.letters), PAD_VALUE)

    def spec(self, s: Stmt) -> str:
        """The einsum spec of statement ``s``."""
        return f"{','.join(s.arg_letters)}->{self.node(s.out).letters}"

    @property
    def is_float(self) -> bool:
        """The program computes in a float precision."""
        return self.prec in FLOAT_PROGRAM_PRECS

    @property
    def dtype(self) -> np.dtype[Any]:
        """The numpy dtype of the program's precision."""
        return Prec[self.prec].numpy_dtype

    def prec_of(self, name: str) -> str:
        """The precision of node ``name``."""
        return self.node(name).prec or self.prec

    def dtype_of(self, name: str) -> np.dtype[Any]:
        """The numpy dtype of node ``name``."""
        return Prec[self.prec_of(name)].numpy_dtype

    @property
    def tolerance_prec(self) -> str:
        """The least precise precision of the program's nodes (its tolerance applies)."""
        precs = {self.prec_of(n.name) for n in self.nodes}
        return "single" if "single" in precs else self.prec

    def initial_values(self) -> dict[str, np.ndarray]:
        """Initial values of the hosted nodes: multiples of 1/8 in [-2, 2] (floats), integers
        in [-4, 4] (integers)."""
        rng = np.random.default_rng(self.seed)
        out: dict[str, np.ndarray] = {}
        for n in self.nodes:
            if n.hosted:
                dims = self.dims(n.name)
                if self.is_float:
                    out[n.name] = (rng.integers(-16, 17, dims) / 8).astype(self.dtype_of(n.name))
                else:
                    out[n.name] = rng.integers(-4, 5, dims).astype(self.dtype_of(n.name))
        return out

    # ---- building ----

    def build(self) -> tuple[dict[str, Tnode], Assignment]:
        """Fresh tensor nodes (name -> node) and the ``ir`` block of the program."""
        tns = {
            n.name: Tnode.create(
                self.dims(n.name),
                prec=self.prec_of(n.name),
                label=n.name,
                hosted=n.hosted,
                padding=self.padding(n.name),
            )
            for n in self.nodes
        }
        return tns, ir.block(*(self._assignment(s, tns) for s in self.stmts))

    def build_split(self, cut: int) -> tuple[dict[str, Tnode], Assignment, Assignment]:
        """Fresh nodes and the program as two blocks: statements before ``cut`` and the rest
        (two routines of one context lineage, compiled together)."""
        tns, _ = self.build()
        first = ir.block(*(self._assignment(s, tns) for s in self.stmts[:cut]))
        return tns, first, ir.block(*(self._assignment(s, tns) for s in self.stmts[cut:]))

    def _assignment(self, s: Stmt, tns: dict[str, Tnode]) -> Assignment:
        spec = self.spec(s) if s.use_spec else None
        args = [tns[a] for a in s.args]
        out = tns[s.out]
        if s.op == "constant":
            return ir.fetch(out, ir.Constant(float(s.const or 0.0)))
        if s.op == "range":
            return ir.fetch(out, ir.Range_over_offsets())
        if s.op == "slice":
            return ir.fetch(out, ir.Slice(BATCH, args[0]))
        if len(args) == 3:
            return ir.ternop(out, s.op, args[0], args[1], args[2], spec=spec)
        if s.accum is not None:
            return ir.accum(out, s.accum, *args, op=s.op, spec=spec, initialize_neutral=s.init)
        if len(args) == 1:
            return ir.unop(out, s.op, args[0], spec=spec)
        return ir.binop(out, s.op, args[0], args[1], spec=spec)

    def source(self) -> str:
        """The program as builder calls (for reports)."""
        lines = [f"# {self.prec}, sizes {dict(self.sizes)}, seed {self.seed}"]
        for n in self.nodes:
            pad = self.padding(n.name)
            pad_text = f", padding=Padding({pad.axes}, {pad.value})" if pad else ""
            lines.append(
                f"{n.name} = Tnode.create({self.dims(n.name)}, prec={self.prec_of(n.name)!r}, "
                f"label={n.name!r}, hosted={n.hosted}{pad_text})"
            )
        lines.append("comp = ir.block(")
        for s in self.stmts:
            args = ", ".join(s.args)
            spec = f", spec={self.spec(s)!r}" if s.use_spec else ""
            if s.op == "constant":
                lines.append(f"    ir.fetch({s.out}, ir.Constant({s.const!r})),")
            elif s.op == "range":
                lines.append(f"    ir.fetch({s.out}, ir.Range_over_offsets()),")
            elif s.op == "slice":
                lines.append(
                    f"    ir.fetch({s.out}, ir.Slice(StaticSymbol('i', range=3), {args})),"
                )
            elif len(s.args) == 3:
                lines.append(f"    ir.ternop({s.out}, {s.op!r}, {args}{spec}),")
            elif s.accum is not None:
                init = "" if s.init else ", initialize_neutral=False"
                lines.append(
                    f"    ir.accum({s.out}, {s.accum!r}, {args}, op={s.op!r}{spec}{init}),"
                )
            elif len(s.args) == 1:
                lines.append(f"    ir.unop({s.out}, {s.op!r}, {args}{spec}),")
            else:
                lines.append(f"    ir.binop({s.out}, {s.op!r}, {args}{spec}),")
        lines.append(")")
        if self.batches:
            lines.append(f"# i = {list(self.batches)} in the successive runs")
        return "\n".join(lines)


# ---- the numpy oracle ----

_UNARY: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "relu": lambda v: np.maximum(v, v.dtype.type(0)),
    "neg": np.negative,
    "identity": lambda v: v,
    "tanh": np.tanh,
    "exp": np.exp,
}
_BINARY: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "max": np.maximum,
    "min": np.minimum,
    "relu_gate": lambda a, b: np.where(a > 0, b, np.zeros_like(b)),
}
_NEUTRAL = {"add": 0.0, "sub": 0.0, "mul": 1.0, "max": -math.inf, "min": math.inf}


def _operand(arr: np.ndarray, letters: str, product: str, sizes: dict[str, int]) -> np.ndarray:
    """``arr`` (read with spec ``letters``) as an array over the product space."""
    shape = tuple(sizes[p] for p in product)
    if not letters:
        return np.broadcast_to(arr, shape)
    grids = []
    for letter in letters:
        g = np.arange(sizes[letter]).reshape(
            [-1 if p == letter else 1 for p in product] or [sizes[letter]]
        )
        grids.append(g)
    return np.broadcast_to(arr[tuple(grids)], shape)


def evaluate_statement(
    program: Program, s: Stmt, state: dict[str, np.ndarray], batch: int = 0
) -> None:
    """Run one statement of ``program`` on ``state`` (name -> array), plainly, in numpy;
    ``batch`` is the value of :data:`BATCH`."""
    sizes, dt = program.size_of, program.dtype_of(s.out)
    out_letters = program.node(s.out).letters
    if s.op == "constant":
        state[s.out] = np.full(program.dims(s.out), s.const).astype(dt)
        return
    if s.op == "range":
        dims = program.dims(s.out)
        state[s.out] = np.arange(math.prod(dims)).reshape(dims).astype(dt)
        return
    if s.op == "slice":
        state[s.out] = state[s.args[0]][batch].astype(dt)
        return
    product = "".join(dict.fromkeys(out_letters + "".join(s.arg_letters)))
    # Every leaf converts to the precision written, except the condition of where.
    operands = [
        _operand(
            state[a] if k == 0 and s.op == "where" else state[a].astype(dt), letters, product, sizes
        )
        for k, (a, letters) in enumerate(zip(s.args, s.arg_letters))
    ]
    with np.errstate(all="ignore"):
        if len(operands) == 3:
            value = np.where(operands[0] != 0, operands[1], operands[2]).astype(dt)
        elif len(operands) == 2:
            value = _BINARY[s.op](*operands).astype(dt)
        else:
            value = _UNARY[s.op](operands[0]).astype(dt)
        if s.accum is None:
            state[s.out] = np.array(value, dtype=dt).reshape(program.dims(s.out))
            return
        out_shape = program.dims(s.out)
        if s.init and dt.kind in "iu" and s.accum in ("max", "min"):
            # Integer max/min start from the precision's bounds.
            info = np.iinfo(dt)
            acc = np.full(out_shape, info.min if s.accum == "max" else info.max, dtype=dt)
        elif s.init:
            acc = np.full(out_shape, _NEUTRAL[s.accum]).astype(dt)
        else:
            acc = state[s.out].astype(dt).copy()
        reduced = [sizes[p] for p in product[len(out_letters) :]]
        fn = _BINARY[s.accum]
        # Terms accumulate one after another, in the order of the product space's loops.
        for r in itertools.product(*(range(n) for n in reduced)):
            term: tuple[Any, ...] = (Ellipsis, *r)
            acc = fn(acc, value[term]).astype(dt)
        state[s.out] = acc


def evaluate_numpy(
    program: Program, state: dict[str, np.ndarray], batch: int = 0
) -> dict[str, np.ndarray]:
    """One run of ``program`` from ``state`` (hosted values; other nodes start at zero):
    every statement in order, each over its whole product space, with :data:`BATCH` =
    ``batch``. Returns the new state (every node)."""
    new = {n.name: np.zeros(program.dims(n.name), program.dtype_of(n.name)) for n in program.nodes}
    new.update({k: np.array(v, dtype=program.dtype_of(k), copy=True) for k, v in state.items()})
    for s in program.stmts:
        evaluate_statement(program, s, new, batch)
    return new


def is_tame(program: Program, runs: int = 2, limit: float = VALUE_LIMIT) -> bool:
    """The program's values stay finite and below ``10 * limit`` over ``runs`` runs (in
    double precision, so that rounding never decides it)."""
    wide = Program(
        "double" if program.is_float else "int64",
        program.sizes,
        tuple(Node(n.name, n.letters, n.hosted, None, n.padded) for n in program.nodes),
        program.stmts,
        program.seed,
        program.batches,
    )
    state: dict[str, np.ndarray] = dict(wide.initial_values())
    for run in range(runs):
        state = evaluate_numpy(wide, state, program.batch(run))
        for v in state.values():
            if v.size and not (np.all(np.isfinite(v)) and np.abs(v).max() <= 10 * limit):
                return False
    return True


# ---- the strategy ----


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
    letters = next(n.letters for n in draft.nodes if n.name == name)
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


def _stmt_inplace(draw: st.DrawFn, draft: _Draft) -> None:
    """``p = p op t`` with ``t`` read at (some of) ``p``'s positions."""
    defined = _defined(draft)
    p = draw(st.sampled_from(defined))
    p_letters = next(n.letters for n in draft.nodes if n.name == p)
    fits = [
        (t, r)
        for t in defined
        for r in _relabelings(draft, next(n.letters for n in draft.nodes if n.name == t))
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
    defined = _defined(draft)
    p = draw(st.sampled_from(defined))
    p_letters = next(n.letters for n in draft.nodes if n.name == p)
    fits = [
        (g, r)
        for g in defined
        if g != p
        for r in _relabelings(draft, next(n.letters for n in draft.nodes if n.name == g))
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


__all__ = [
    "BATCH",
    "BATCH_LETTER",
    "BIG_VALUE_LIMIT",
    "LETTERS",
    "VALUE_LIMIT",
    "Node",
    "Program",
    "Stmt",
    "evaluate_numpy",
    "evaluate_statement",
    "is_tame",
    "programs",
]
