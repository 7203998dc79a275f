"""How compile time and generated source grow with the program (issue 38): an L-layer MLP
training step (batch 32, width 64, tanh; forward, mean-squared-error gradient, backward and SGD
update in one block, 13 statements a layer: :mod:`arrayjit_conformance.compile_workload`)
compiled with ``ARRAYJIT_NO_CACHE=1`` on each backend (after a first compile that builds the
CPU backends' kernel library, once per process, reported apart), reporting compile seconds,
source bytes, bytes per statement, the compile units the source was cut into, the seconds spent
rendering the source and in the toolchain (the C compiler and linker; for llvm, parse,
optimize, emit: every unit), and, with ``--jax``, ``jax.jit(step).lower(...).compile()`` of the
same step in the same run and our time over jax's.

    python tools/compile_scaling.py
    python tools/compile_scaling.py --layers 2,8,32 --backends sync_cc --jax
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from typing import Any

os.environ["ARRAYJIT_NO_CACHE"] = "1"

from arrayjit_backend_c.cc.compiler import CcCompiler
from arrayjit_backend_c.cc.renderer import CcSyntax
from arrayjit_backend_c.cpu import units
from arrayjit_backend_c.llvm.compiler import LlvmCompiler
from arrayjit_backend_c.llvm.renderer import LlvmGen
from arrayjit_backends import fresh_backend
from arrayjit_conformance.compile_workload import jax_mlp_step, mlp_step

PHASES: dict[str, float] = {"render": 0.0, "toolchain": 0.0}
SOURCE: list[int] = [0]
UNITS: list[int] = [0]


def timed(phase: str, fn: Callable[..., Any], source: bool = False) -> Callable[..., Any]:
    """``fn`` adding its seconds to ``PHASES[phase]`` (and, with ``source``, the size of the
    source it returned to ``SOURCE``)."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            result = fn(*args, **kwargs)
        finally:
            PHASES[phase] += time.perf_counter() - t0
        if source:
            SOURCE[0] += len(result.source.encode())
        return result

    return wrapper


def counted(fn: Callable[[str], units.SplitRoutine]) -> Callable[[str], units.SplitRoutine]:
    """``fn`` adding the number of units it cut to ``UNITS``."""

    def wrapper(source: str) -> units.SplitRoutine:
        result = fn(source)
        UNITS[0] += len(result.units)
        return result

    return wrapper


def instrument() -> None:
    """Time the renderers and the compilers' builds (every unit, the link) where the
    compilers call them; count the units."""
    from arrayjit_backend_c.cc import compiler as cc_compiler
    from arrayjit_backend_c.llvm import compiler as llvm_compiler

    CcSyntax.render_segments = timed("render", CcSyntax.render_segments, source=True)  # type: ignore[method-assign]
    LlvmGen.generate = timed("render", LlvmGen.generate, source=True)  # type: ignore[method-assign]
    CcCompiler.build = timed("toolchain", CcCompiler.build)  # type: ignore[method-assign]
    LlvmCompiler.build = timed("toolchain", LlvmCompiler.build)  # type: ignore[method-assign]
    cc_compiler.split_c = counted(units.split_c)  # type: ignore[assignment]
    llvm_compiler.split_llvm = counted(units.split_llvm)  # type: ignore[assignment]


def jax_seconds(layers: int) -> float:
    """Seconds of ``jax.jit(step).lower(...).compile()`` of the L-layer step."""
    import jax

    step, args = jax_mlp_step(jax, layers)
    t0 = time.perf_counter()
    jax.jit(step).lower(*args).compile()
    return time.perf_counter() - t0


def measure(backend_name: str, layers: int) -> dict[str, float]:
    """Compile the L-layer step once on a fresh backend; its numbers."""
    backend = fresh_backend(backend_name)
    comp, statements = mlp_step(layers)
    for phase in PHASES:
        PHASES[phase] = 0.0
    SOURCE[0] = UNITS[0] = 0
    t0 = time.perf_counter()
    backend.compile(comp, name=f"mlp{layers}")
    total = time.perf_counter() - t0
    backend.finalize()
    return {
        "statements": statements,
        "compile_s": total,
        "source_bytes": SOURCE[0],
        "bytes_per_stmt": SOURCE[0] / statements,
        "render_s": PHASES["render"],
        "toolchain_s": PHASES["toolchain"],
        "units": UNITS[0],
    }


def warm_up(backend_name: str) -> float:
    """Seconds of a first compile of the 2-layer step on ``backend_name`` (the CPU backends
    build their kernel library in it, once per process)."""
    backend = fresh_backend(backend_name)
    t0 = time.perf_counter()
    backend.compile(mlp_step(2)[0], name="warm_up")
    seconds = time.perf_counter() - t0
    backend.finalize()
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", default="2,8,32,64", help="comma-separated layer counts")
    parser.add_argument("--backends", default="sync_cc,sync_llvm")
    parser.add_argument("--jax", action="store_true", help="time jax.jit's compile too")
    args = parser.parse_args()
    instrument()
    layer_counts = [int(n) for n in args.layers.split(",")]
    jax_s = {n: jax_seconds(n) for n in layer_counts} if args.jax else {}
    columns = ["backend", "layers", "statements", "compile s", "source bytes", "bytes/stmt"]
    columns += ["units", "render s", "toolchain s", *(["jax s", "ours / jax"] if jax_s else [])]
    print("| " + " | ".join(columns) + " |")
    print("| --- " + "| ---: " * (len(columns) - 1) + "|")
    for name in args.backends.split(","):
        # The CPU backends build their kernel library (the packed matmul's kernels) once per
        # process: a first compile pays for it, so that the rows time routines alone.
        print(f"<!-- {name}: first compile (kernel library) {warm_up(name):.2f} s -->", flush=True)
        for layers in layer_counts:
            r = measure(name, layers)
            line = (
                f"| {name} | {layers} | {r['statements']:.0f} | {r['compile_s']:.2f} "
                f"| {r['source_bytes']:.0f} | {r['bytes_per_stmt']:.0f} | {r['units']:.0f} "
                f"| {r['render_s']:.2f} | {r['toolchain_s']:.2f} |"
            )
            if jax_s:
                line += f" {jax_s[layers]:.2f} | {r['compile_s'] / jax_s[layers]:.1f} |"
            print(line, flush=True)


if __name__ == "__main__":
    main()
