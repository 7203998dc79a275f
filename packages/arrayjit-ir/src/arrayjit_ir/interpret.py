"""The reference interpreter: runs low-level IR in Python over numpy arrays.

It is slow and exact: the oracle of the conformance suite and of the optimizer's tests. The code
is first turned into a tree of Python closures, then run.

Evaluation model: a ``Set`` evaluates its value in the precision of the node it writes (half,
bfloat16 and fp8 compute in float32 and round when stored, and so does a ``Set_local`` of a local
holding such a node's value, so a virtual node rounds as a stored one; a float32 accumulator of
such a node, ``ScopeId.acc_prec``, does not round); every leaf is
converted to that precision; the condition of ``where`` is evaluated in its own natural
precision. uint4x32 values are uint32 vectors of four lanes; a scalar converted to uint4x32
fills lanes 0 (and 1 for 64-bit values), and uint4x32 converted to a scalar takes lane 0. A
float converted to an integer precision saturates (:func:`arrayjit_ir.ops.float_to_int`; to
uint4x32: through int64); an integer converted to another wraps.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from arrayjit_ir import low_level as L
from arrayjit_ir import ops
from arrayjit_ir.indexing import Affine, AxisIndex, Fixed_idx, Iterator, StaticSymbol, Symbol
from arrayjit_ir.low_level import natural_prec, rounds_when_stored
from arrayjit_ir.optimized import Optimized
from arrayjit_tnode import Prec, Tnode, UsageError

Thunk = Callable[[], Any]
_VEC = "uint4x32"


def compute_dtype(prec: Prec) -> np.dtype[Any] | str:
    """The dtype arithmetic of ``prec`` runs in (float32 for the small floats)."""
    if prec is Prec.uint4x32:
        return _VEC
    if prec in (Prec.half, Prec.bfloat16, Prec.fp8):
        return np.dtype(np.float32)
    return prec.numpy_dtype


def _to_vec(v: Any) -> Any:
    if isinstance(v, np.ndarray) and v.shape == (4,):
        return v
    v = np.asarray(v)
    if v.dtype.kind not in "iub":  # a float goes through int64 by the saturating rule
        v = ops.float_to_int(v, np.dtype(np.int64))
    x = int(v.astype(np.int64)) & ((1 << 64) - 1)
    return np.array([x & 0xFFFFFFFF, x >> 32, 0, 0], dtype=np.uint32)


def _convert(v: Any, dt: np.dtype[Any] | str) -> Any:
    if isinstance(dt, str):
        return _to_vec(v)
    if isinstance(v, np.ndarray) and v.shape == (4,):
        v = v[0]
    with np.errstate(all="ignore"):
        if dt.kind in "iu" and not isinstance(v, (int, np.integer)):
            return ops.float_to_int(v, dt)[()]  # saturating, NaN to 0
        return np.array(v).astype(dt)[()]


class _Machine:
    def __init__(
        self,
        buffers: Mapping[Tnode, np.ndarray],
        bindings: Mapping[StaticSymbol | str, int],
        merge_buffer: np.ndarray | None,
    ) -> None:
        self.buffers: dict[Tnode, np.ndarray] = dict(buffers)
        self.env: dict[Symbol | StaticSymbol, int] = {}
        self.static: dict[str, int] = {
            (k.name if isinstance(k, StaticSymbol) else k): int(v) for k, v in bindings.items()
        }
        self.locals: dict[L.ScopeId, Any] = {}
        self.merge_buffer = merge_buffer

    def buffer(self, tn: Tnode) -> np.ndarray:
        arr = self.buffers.get(tn)
        if arr is None:
            arr = np.zeros(tn.prec.host_shape(tn.dims), dtype=tn.prec.numpy_dtype)
            self.buffers[tn] = arr
        return arr

    # ---- indices ----

    def index(self, idx: AxisIndex) -> Callable[[], int]:
        env, static = self.env, self.static
        match idx:
            case Fixed_idx(value=v):
                return lambda: v
            case Iterator(symbol=StaticSymbol(name=name)):
                if name not in static:
                    raise UsageError(f"static symbol {name} is not bound")
                return lambda: static[name]
            case Iterator(symbol=s):
                return lambda: env[s]
            case Affine(terms=terms, offset=off):
                parts = [(c, self.index(Iterator(s))) for c, s in terms]
                return lambda: sum(c * f() for c, f in parts) + off
        raise TypeError(idx)

    def indices(self, idx: tuple[AxisIndex, ...]) -> Callable[[], tuple[int, ...]]:
        fns = [self.index(i) for i in idx]

        def checked() -> tuple[int, ...]:
            t = tuple(f() for f in fns)
            if t and min(t) < 0:  # numpy would silently wrap a negative index
                raise UsageError(f"index {list(t)} is out of bounds (negative)")
            return t

        return checked

    # ---- statements ----

    def stmt(self, s: L.Stmt) -> Thunk:
        match s:
            case L.Noop() | L.Comment():
                return lambda: None
            case L.Seq(stmts=stmts):
                fns = [self.stmt(x) for x in stmts]

                def run_seq() -> None:
                    for f in fns:
                        f()

                return run_seq
            case L.For_loop(index=sym, from_=lo, to_inclusive=hi, body=body):
                fbody, env = self.stmt(body), self.env

                def run_loop() -> None:
                    for i in range(lo, hi + 1):
                        env[sym] = i
                        fbody()

                return run_loop
            case L.Zero_out(tn=tn):
                return lambda: self.buffer(tn).fill(0)
            case L.Set(tn=tn, indices=idx, value=value):
                fidx = self.indices(idx)
                fval = self.expr(value, compute_dtype(tn.prec))

                def run_set() -> None:
                    self.buffer(tn)[fidx()] = fval()

                return run_set
            case L.Set_local(scope=scope, value=value):
                fval = self.expr(value, compute_dtype(scope.prec))
                locals_ = self.locals
                if rounds_when_stored(scope.prec):
                    # A local holds a value of its (virtual) node: rounded as a store would.
                    storage = scope.prec.numpy_dtype

                    def run_set_local() -> None:
                        locals_[scope] = np.float32(fval()).astype(storage).astype(np.float32)

                    return run_set_local

                def run_set_local() -> None:
                    locals_[scope] = fval()

                return run_set_local
        raise TypeError(f"not a statement: {s!r}")

    # ---- expressions ----

    def expr(self, e: L.Expr, dt: np.dtype[Any] | str) -> Thunk:
        match e:
            case L.Get(tn=tn, indices=idx):
                fidx = self.indices(idx)
                return lambda: _convert(self.buffer(tn)[fidx()], dt)
            case L.Get_merge_buffer(tn=tn, indices=idx):
                fidx = self.indices(idx)

                def get_merge() -> Any:
                    if self.merge_buffer is None:
                        raise UsageError(
                            f"the merge buffer holds nothing, expected {tn.debug_label}"
                        )
                    return _convert(self.merge_buffer[fidx()], dt)

                return get_merge
            case L.Constant(value=v):
                c = _convert(v, dt)
                return lambda: c
            case L.Constant_bits(value=v):
                c = _convert(np.int64(np.uint64(v & ((1 << 64) - 1)).astype(np.int64)), dt)
                return lambda: c
            case L.Embed_index(index=idx):
                f = self.index(idx)
                return lambda: _convert(f(), dt)
            case L.Get_local(scope=scope):
                locals_ = self.locals
                return lambda: _convert(locals_[scope], dt)
            case L.Local_scope(scope=scope, body=body):
                fbody, locals_ = self.stmt(body), self.locals
                start = _convert(L.local_start(scope.prec), compute_dtype(scope.prec))

                def run_scope() -> Any:
                    locals_[scope] = start
                    fbody()
                    return _convert(locals_[scope], dt)

                return run_scope
            case L.Binop(op=ops.Binop.threefry4x32, a=a, b=b):
                fa, fb = self.expr(a, _VEC), self.expr(b, _VEC)
                return lambda: _convert(ops.threefry4x32(fa(), fb()), dt)
            case L.Binop(op=op, a=a, b=b):
                if isinstance(dt, str):
                    return self._vec_binop(e)
                fa, fb = self.expr(a, dt), self.expr(b, dt)
                bop: ops.Binop = op
                return lambda: ops.apply_binop(bop, fa(), fb(), dt)[()]
            case L.Unop(op=ops.Unop.uint4x32_to_prec_uniform, a=a):
                fa = self.expr(a, _VEC)
                if isinstance(dt, str):
                    return fa
                name = _target_name(dt)
                return lambda: ops.uint4x32_to_uniform(fa(), dt, name)[()]
            case L.Unop(op=op, a=a):
                if isinstance(dt, str):
                    return self._vec_binop(e)
                fa = self.expr(a, dt)
                uop: ops.Unop = op
                return lambda: ops.apply_unop(uop, fa(), dt)[()]
            case L.Ternop(op=ops.Ternop.where, a=c, b=b, c=d):
                cdt = compute_dtype(natural_prec(c))
                fc = self.expr(c, cdt)
                fb, fd = self.expr(b, dt), self.expr(d, dt)

                def run_where() -> Any:
                    cond = fc()
                    if isinstance(cond, np.ndarray):
                        cond = cond.any()
                    # Both operands run, as in every renderer: common-subexpression
                    # elimination may have left one branch reading a local the other computes.
                    yes, no = fb(), fd()
                    return yes if cond != 0 else no

                return run_where
            case L.Ternop(op=op, a=a, b=b, c=c):
                if isinstance(dt, str):
                    return self._vec_binop(e)
                fa, fb, fc2 = self.expr(a, dt), self.expr(b, dt), self.expr(c, dt)
                return lambda: ops.apply_ternop(op, fa(), fb(), fc2(), dt)[()]
        raise TypeError(f"not an expression: {e!r}")

    def _vec_binop(self, e: L.Expr) -> Thunk:
        # Arithmetic on uint4x32 values other than threefry: compute on lane 0 as uint64.
        f = self.expr(e, np.dtype(np.uint64))
        return lambda: _to_vec(f())


def _target_name(dt: np.dtype[Any]) -> str:
    for p in Prec:
        if p.numpy_dtype == dt and p is not Prec.uint4x32:
            return p.value
    return "single"


def interpret(
    code: Optimized | L.Stmt,
    buffers: Mapping[Tnode, np.ndarray],
    bindings: Mapping[StaticSymbol | str, int] | None = None,
    merge_buffer: np.ndarray | None = None,
) -> dict[Tnode, np.ndarray]:
    """Run ``code`` over ``buffers`` (arrays of each node's numpy dtype and full padded shape,
    ``prec.host_shape(tn.dims)``), writing results into them.

    Nodes the code touches that are absent from ``buffers`` (kernel-local nodes, or any node of
    unoptimized code) get zero-filled scratch arrays. Small floats computed in float32 are
    rounded to their format when stored (ties to even).

    Returns:
        All buffers used, including the scratch ones.

    Raises:
        UsageError: a static symbol the code reads is not bound, or the code reads the merge
            buffer and none is given.
    """
    stmt = code.code if isinstance(code, Optimized) else code
    machine = _Machine(buffers, bindings or {}, merge_buffer)
    with np.errstate(all="ignore"):
        machine.stmt(stmt)()
    return machine.buffers
