"""A tensor-node demo: ``python -m arrayjit_tnode.demo``.

It exercises what arrayjit-tnode offers on its own (the compiler and backends build on it):
nodes with precisions, host values, padding, the memory-mode lattice, and the exact small-float
conversions; each step is checked against numpy or ml_dtypes. Exits non-zero if a check fails.
"""

from __future__ import annotations

import sys

import ml_dtypes
import numpy as np

from arrayjit_tnode import MemoryModeError, Padding, Tnode
from arrayjit_tnode import memory_mode as mm
from arrayjit_tnode import precision as P


def _check(ok: bool, what: str) -> bool:
    print(f"  [{'ok' if ok else 'FAILED'}] {what}")
    return ok


def main() -> int:
    """Run the demo; returns the process exit code."""
    rng = np.random.default_rng(0)
    results = []
    print("arrayjit-tnode demo")

    w = Tnode.create((2, 16), label=["mlp", "w"], hosted=True)
    values = rng.standard_normal((2, 16))
    w.set_values(values)
    print(w)
    results.append(
        _check(np.array_equal(w.get_values(), values.astype(np.float32)), "hosted values")
    )

    b = Tnode.create((3,), prec="bfloat16", label="b", hosted=True, padding=Padding(((1, 1),), 0))
    b.set_values([1.0, np.pi, -2.5])
    expected = np.array([1.0, np.pi, -2.5]).astype(ml_dtypes.bfloat16)
    results.append(_check(np.array_equal(b.get_values(), expected), "bfloat16 node with padding"))

    x = Tnode.create((64, 2), label=["mlp", "x"])
    x.update_memory_mode(mm.Never_virtual(), 1)
    x.update_memory_mode(mm.Device_only(), 2)
    x.default_to_most_local(3)
    results.append(_check(x.memory_mode == mm.Local(), f"memory mode settles: {x.header()}"))
    try:
        x.update_memory_mode(mm.Virtual(), 4)
        results.append(_check(False, "conflicting mode refused"))
    except MemoryModeError as exc:
        results.append(_check("provenance 4" in str(exc), f"conflict refused: {exc}"))

    sample = rng.standard_normal(1 << 16).astype(np.float32)
    fp8 = P.single_to_fp8_bits(sample)
    results.append(
        _check(
            np.array_equal(fp8, sample.astype(ml_dtypes.float8_e5m2).view(np.uint8)),
            "fp8 E5M2 rounding matches ml_dtypes on 65536 values",
        )
    )
    ok = all(results)
    print("all checks passed" if ok else "SOME CHECKS FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
