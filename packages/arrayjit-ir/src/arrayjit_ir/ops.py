"""Operations of the IR: binary, unary and ternary ops with their neutral elements.

Reference semantics (numpy) and C spellings are attached to each op in this module; the
renderers and the reference interpreter read them from here.
"""

from __future__ import annotations

import enum
import math


class Binop(enum.Enum):
    """Binary ops. ``arg1``/``arg2`` return their first/second argument."""

    arg1 = "arg1"
    arg2 = "arg2"
    add = "add"
    sub = "sub"
    mul = "mul"
    div = "div"
    pow = "pow"
    relu_gate = "relu_gate"  # v1 > 0 ? v2 : 0
    satur01_gate = "satur01_gate"  # 0 < v1 < 1 ? v2 : 0
    max = "max"
    min = "min"
    mod = "mod"
    cmplt = "cmplt"
    cmpeq = "cmpeq"
    cmpne = "cmpne"
    or_ = "or"
    and_ = "and"
    threefry4x32 = "threefry4x32"  # (key, counter) -> random bits, on uint4x32


class Unop(enum.Enum):
    """Unary ops."""

    identity = "identity"
    relu = "relu"
    satur01 = "satur01"
    exp = "exp"
    log = "log"
    exp2 = "exp2"
    log2 = "log2"
    sin = "sin"
    cos = "cos"
    sqrt = "sqrt"
    recip = "recip"
    recip_sqrt = "recip_sqrt"
    neg = "neg"
    trunc = "trunc"
    tanh = "tanh"
    not_ = "not"
    uint4x32_to_prec_uniform = "uint4x32_to_prec_uniform"


class Ternop(enum.Enum):
    """Ternary ops: ``where(c, a, b)`` is ``c != 0 ? a : b``; ``fma(a, b, c)`` is ``a*b + c``."""

    where = "where"
    fma = "fma"


# Neutral elements for accumulation: the value `x` with accum(x, v) == v.
NEUTRAL: dict[Binop, float] = {
    Binop.add: 0.0,
    Binop.sub: 0.0,
    Binop.mul: 1.0,
    Binop.div: 1.0,
    Binop.max: -math.inf,
    Binop.min: math.inf,
    Binop.or_: 0.0,
    Binop.and_: 1.0,
    Binop.arg2: 0.0,
}


def neutral(op: Binop) -> float:
    """The neutral element of ``op`` used to initialize accumulations (0 when it has none)."""
    return NEUTRAL.get(op, 0.0)


def parse_binop(name: str | Binop) -> Binop:
    """Look up a binary op by name (``"add"``, ``"or"``, ...)."""
    if isinstance(name, Binop):
        return name
    return Binop(name)


def parse_unop(name: str | Unop) -> Unop:
    """Look up a unary op by name (``"relu"``, ``"not"``, ...)."""
    if isinstance(name, Unop):
        return name
    return Unop(name)


def parse_ternop(name: str | Ternop) -> Ternop:
    """Look up a ternary op by name (``"where"``, ``"fma"``)."""
    if isinstance(name, Ternop):
        return name
    return Ternop(name)
