"""The ``arrayjit`` command.

- ``arrayjit backends``: each registered backend, available or why not, devices, streams.
- ``arrayjit demo [--backend B] [--size N] [--steps K]``: an end-to-end check against numpy.
- ``arrayjit show FILE.py``: the optimized IR of the computations a file defines: every
  module-level value that is an assignment or a computation, in definition order.
- ``arrayjit bench [--from-json FILE]``: the benchmark table of a ``tox -e bench`` run, each
  implementation's ratio to numpy in the same run.
"""

from __future__ import annotations

import argparse
import runpy
import sys
from collections.abc import Sequence

from arrayjit_backends.registry import available_backends, fresh_backend
from arrayjit_ir import lower, optimize, pretty
from arrayjit_ir.assignments import Accum_op, Block, Comp, Fetch
from arrayjit_tnode import ArrayjitError


def _backends() -> int:
    for status in available_backends():
        if not status.available:
            hint = f" (install: {status.install_hint})" if status.install_hint else ""
            print(f"{status.name:20} unavailable: {status.reason}{hint}")
            continue
        be = fresh_backend(status.name)
        dev = be.get_device(0)
        print(
            f"{status.name:20} available: {be.num_devices()} device(s), "
            f"{be.suggested_num_streams(dev)} suggested stream(s); {status.description}"
        )
        be.finalize()
    return 0


def _demo(name: str | None, size: int | None, steps: int) -> int:
    from arrayjit_backends.demo import run_demo

    be = fresh_backend(name)
    be.initialize()
    n = size if size is not None else (1 << 12 if "interp" in be.name else 1 << 20)
    try:
        ok = run_demo(be, sys.stdout, n=n, steps=steps)
    finally:
        be.finalize()
    return 0 if ok else 1


def _show(path: str) -> int:
    namespace = runpy.run_path(path)
    found = 0
    for key, value in namespace.items():
        if isinstance(value, (Accum_op, Fetch, Block, Comp)):
            found += 1
            print(f"# {key}\n{pretty(value)}\n")
            print(pretty(optimize(lower(value), name=key)))
            print()
    if not found:
        print(f"{path} defines no computation at module level", file=sys.stderr)
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``arrayjit`` command; returns the exit code."""
    parser = argparse.ArgumentParser(prog="arrayjit", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("backends", help="list registered backends")
    demo = sub.add_parser("demo", help="run a small end-to-end check against numpy")
    demo.add_argument("--backend", default=None, help="backend name (default: the best)")
    demo.add_argument("--size", type=int, default=None, help="elements of the fused check")
    demo.add_argument("--steps", type=int, default=10, help="MLP training steps")
    show = sub.add_parser("show", help="print the optimized IR of a file's computations")
    show.add_argument("file")
    bench = sub.add_parser("bench", help="print the table of a benchmark run (tox -e bench)")
    bench.add_argument("--from-json", default="bench-results/bench.json", metavar="FILE")
    args = parser.parse_args(argv)
    try:
        if args.command == "backends":
            return _backends()
        if args.command == "demo":
            return _demo(args.backend, args.size, args.steps)
        if args.command == "bench":
            from pathlib import Path

            from arrayjit_backends.bench_table import load_rows, render

            print(render(load_rows(Path(args.from_json))))
            return 0
        return _show(args.file)
    except ArrayjitError as exc:
        print(f"arrayjit: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
