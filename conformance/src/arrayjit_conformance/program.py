"""A generated program: its description (:class:`Program`, :class:`Node`, :class:`Stmt`) and its
numpy oracle.

A :class:`Program` describes a computation without any IR object in it (letters with sizes,
nodes named by letters, statements), so that it prints as Python that rebuilds it, shrinks well
under hypothesis and can be pasted into a regression test. :meth:`Program.build` makes *fresh*
tensor nodes and the ``ir`` block (memory modes are decided once per node, so a node is never
reused across programs); :func:`evaluate_numpy` is the independent oracle: plain numpy executing
the statements one after another, each over its whole product space, in the precision of the
node it writes. The hypothesis strategy that draws programs is
:func:`arrayjit_conformance.programs.programs`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

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


__all__ = [
    "BATCH",
    "BATCH_LETTER",
    "BIG_VALUE_LIMIT",
    "FLOAT_PROGRAM_PRECS",
    "INT_PROGRAM_PRECS",
    "LETTERS",
    "PAD_VALUE",
    "VALUE_LIMIT",
    "Node",
    "Program",
    "Stmt",
    "evaluate_numpy",
    "evaluate_statement",
    "is_tame",
]
