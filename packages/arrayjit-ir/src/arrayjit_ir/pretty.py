"""Stable text forms of assignments, low-level code and optimized routines.

Loop symbols print as ``i<N>`` and locals as ``v<N>_<node>``; with ``renumber=True`` (the
default) both are numbered in order of first appearance, so the text does not depend on global
counters and golden files stay stable.
"""

from __future__ import annotations

import math

from arrayjit_ir import assignments as A
from arrayjit_ir import low_level as L
from arrayjit_ir import ops
from arrayjit_ir.indexing import AxisIndex, StaticSymbol, Symbol, format_index
from arrayjit_ir.optimized import Optimized
from arrayjit_tnode import Tnode


class _Names:
    def __init__(self, renumber: bool) -> None:
        self.renumber = renumber
        self.symbols: dict[Symbol, int] = {}
        self.scopes: dict[L.ScopeId, int] = {}

    def sym(self, s: Symbol | StaticSymbol) -> str:
        if isinstance(s, StaticSymbol):
            return s.name
        if not self.renumber:
            return str(s)
        return f"i{self.symbols.setdefault(s, len(self.symbols) + 1)}"

    def scope(self, s: L.ScopeId) -> str:
        n = self.scopes.setdefault(s, len(self.scopes) + 1) if self.renumber else s.id
        wide = f":{s.acc_prec.value}" if s.acc_prec is not None else ""
        return f"v{n}_{s.tn.debug_name}{wide}"

    def index(self, i: AxisIndex) -> str:
        return format_index(i, self.sym)

    def indices(self, idx: tuple[AxisIndex, ...]) -> str:
        return "[" + ", ".join(self.index(i) for i in idx) + "]"


def _num(v: float) -> str:
    if v != v or v in (float("inf"), float("-inf")):
        return {"nan": "NAN", "inf": "INFINITY", "-inf": "-INFINITY"}[repr(v)]
    if v == int(v) and abs(v) < 1e15:
        return f"{int(v)}.0" if math.copysign(1.0, v) > 0 or int(v) != 0 else "-0.0"
    return f"{v:.16g}"


def _expr(e: L.Expr, n: _Names, indent: str) -> str:
    match e:
        case L.Get(tn=tn, indices=idx):
            return f"{tn.debug_name}{n.indices(idx)}"
        case L.Get_merge_buffer(tn=tn, indices=idx):
            return f"{tn.debug_name}.merge{n.indices(idx)}"
        case L.Get_local(scope=s):
            return n.scope(s)
        case L.Local_scope(scope=s, body=body):
            inner = _stmt(body, n, indent + "  ")
            return f"{n.scope(s)} {{\n{inner}\n{indent}}}"
        case L.Embed_index(index=i):
            return f"idx({n.index(i)})"
        case L.Constant(value=v):
            return _num(v)
        case L.Constant_bits(value=v):
            return f"bits({v})"
        case L.Binop(op=op, a=a, b=b) if op in ops.INFIX:
            return f"({_expr(a, n, indent)} {ops.INFIX[op]} {_expr(b, n, indent)})"
        case L.Binop(op=op, a=a, b=b):
            return f"{op.value}({_expr(a, n, indent)}, {_expr(b, n, indent)})"
        case L.Unop(op=op, a=a):
            return f"{op.value}({_expr(a, n, indent)})"
        case L.Ternop(op=op, a=a, b=b, c=c):
            args = ", ".join(_expr(x, n, indent) for x in (a, b, c))
            return f"{op.value}({args})"
    raise TypeError(e)


def _stmt(s: L.Stmt, n: _Names, indent: str) -> str:
    match s:
        case L.Noop():
            return f"{indent}noop;"
        case L.Comment(text=t):
            return f"{indent}/* {t} */"
        case L.Seq(stmts=stmts):
            return "\n".join(_stmt(x, n, indent) for x in stmts)
        case L.For_loop(index=i, from_=lo, to_inclusive=hi, body=body):
            head = f"{indent}for {n.sym(i)} = {lo} to {hi} {{"
            return f"{head}\n{_stmt(body, n, indent + '  ')}\n{indent}}}"
        case L.Zero_out(tn=tn):
            return f"{indent}zero_out {tn.debug_name};"
        case L.Set(tn=tn, indices=idx, value=v):
            return f"{indent}{tn.debug_name}{n.indices(idx)} := {_expr(v, n, indent)};"
        case L.Set_local(scope=sc, value=v):
            return f"{indent}{n.scope(sc)} := {_expr(v, n, indent)};"
    raise TypeError(s)


def _rhs(r: A.Rhs) -> str:
    return f"{r.tn.debug_name}.merge" if isinstance(r, A.Merge_buffer) else r.debug_name


def _assignment(a: A.Assignment) -> list[str]:
    match a:
        case A.Block(items=items):
            return [line for item in items for line in _assignment(item)]
        case A.Noop():
            return ["noop;"]
        case A.Accum_op(lhs=lhs, op=op, rhs=rhs, accum=acc, initialize_neutral=init):
            sign = (
                "=:"
                if acc is None
                else ("=:" if init else "=")
                + (ops.INFIX.get(acc, acc.value) if acc is not None else "")
            )
            args = [_rhs(r) for r in rhs]
            if isinstance(op, ops.Binop) and op in ops.INFIX:
                body = f"{args[0]} {ops.INFIX[op]} {args[1]}"
            elif op in (ops.Unop.identity,):
                body = args[0]
            else:
                body = f"{op.value}({', '.join(args)})"
            spec = f' ~spec:"{a.projections.spec}"' if a.projections.spec else ""
            return [f"{lhs.debug_name} {sign} {body}{spec};"]
        case A.Fetch(lhs=lhs, fetch_op=f):
            match f:
                case A.Constant(value=v):
                    text = _num(v)
                case A.Range_over_offsets():
                    text = "range_over_offsets()"
                case A.Slice(batch=b, source=src):
                    text = f"{src.debug_name} @| {b.name}"
                case A.Embed_symbol(symbol=sym):
                    text = f"!@{sym.name}"
                case A.Constant_fill(values=vals):
                    text = "[" + ", ".join(_num(v) for v in vals) + "]"
            return [f"{lhs.debug_name} =: {text};"]
    raise TypeError(a)


def _mode(tn: Tnode) -> str:
    return "undecided" if tn.memory_mode is None else str(tn.memory_mode)


def pretty(x: object, *, renumber: bool = True) -> str:
    """The stable text form of assignments, a computation, low-level code, or an optimized
    routine (its name, static symbols and node modes, then the code)."""
    n = _Names(renumber)
    match x:
        case A.Comp(assignments=a):
            return "\n".join(_assignment(a))
        case A.Accum_op() | A.Fetch() | A.Block() | A.Noop():
            return "\n".join(_assignment(x))
        case Optimized(name=name, code=code, traced=traced, static_symbols=syms):
            head = f"routine {name}({', '.join(s.name for s in syms)}):"
            modes = [f"  {tn.debug_name}: {_mode(tn)}" for tn in traced]
            return "\n".join([head, *modes, "code:", _stmt(code, n, "  ")])
        case _:
            return _stmt(x, n, "")  # type: ignore[arg-type]
