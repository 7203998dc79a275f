"""Time the float32 transcendentals of arrayjit's math library on the CPU backends against
numpy, in one run: ``y = op(x)`` over ``2^22`` values (``--log2n``), best of ``--repeat`` runs
of each, and the ratio to numpy's time (below 1: faster than numpy). ``--prec double`` times
the double-precision ops instead (the platform's math library).

    python tools/bench_math.py
    python tools/bench_math.py --backends multicore_cc,multicore_llvm --ops exp,log,tanh,sin
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

from arrayjit_backends import fresh_backend
from arrayjit_ir import ir
from arrayjit_tnode import Tnode

NUMPY: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "exp": np.exp,
    "exp2": np.exp2,
    "log": np.log,
    "log2": np.log2,
    "tanh": np.tanh,
    "sin": np.sin,
    "cos": np.cos,
    "recip_sqrt": lambda v: np.reciprocal(np.sqrt(v)),
}


def best(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backends", default="multicore_cc,multicore_llvm")
    ap.add_argument("--ops", default="exp,log,tanh,sin")
    ap.add_argument("--log2n", type=int, default=22)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--prec", default="single", help="single, or double (the C library's)")
    args = ap.parse_args()
    n = 1 << args.log2n
    rng = np.random.default_rng(0)
    backends = [fresh_backend(b) for b in args.backends.split(",")]
    dtype = np.float32 if args.prec == "single" else np.float64
    print(f"{args.prec}, {n} elements, best of {args.repeat}; ratio = time / numpy's time")
    print(f"{'op':<11}{'numpy ms':>10}" + "".join(f"{b.name:>26}" for b in backends))
    for op in args.ops.split(","):
        lo = 0.0 if op in ("log", "log2", "recip_sqrt") else -10.0
        vals = rng.uniform(lo, 10.0, n).astype(dtype)
        t_np = best(lambda f=NUMPY[op], v=vals: f(v), args.repeat)
        row = f"{op:<11}{t_np * 1e3:>10.2f}"
        for be in backends:
            x = Tnode.create((n,), label="x", hosted=True, prec=args.prec)
            y = Tnode.create((n,), label="y", hosted=True, prec=args.prec)
            x.set_values(vals)
            ctx = be.make_context(be.new_stream(be.get_device(0)))
            routine = be.link(ctx, be.compile(ir.unop(y, op, x), name=f"bench_{op}"))

            def run(routine: object = routine, be: object = be) -> None:
                routine()  # type: ignore[operator]
                be.await_stream(routine.context.stream)  # type: ignore[attr-defined]

            run()
            t = best(run, args.repeat)
            row += f"{t * 1e3:>14.2f} ms {t / t_np:>6.2f}x"
        print(row)


if __name__ == "__main__":
    main()
