"""How compile time and generated source grow with the program (issue 38): an L-layer MLP
training step (batch 32, width 64, tanh; forward, mean-squared-error gradient, backward and SGD
update in one block, 13 statements a layer) compiled with ``ARRAYJIT_NO_CACHE=1`` on each
backend, reporting compile seconds, source bytes, bytes per statement, and the seconds spent
rendering the source and in the toolchain (the C compiler; for llvm, parse, optimize, emit).

    python tools/compile_scaling.py
    python tools/compile_scaling.py --layers 2,8,32 --backends sync_cc
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from typing import Any

os.environ["ARRAYJIT_NO_CACHE"] = "1"

from arrayjit_backend_c.cc import compiler as cc_compiler
from arrayjit_backend_c.cc import toolchain
from arrayjit_backend_c.cc.renderer import CcSyntax
from arrayjit_backend_c.llvm import compiler as llvm_compiler
from arrayjit_backend_c.llvm.renderer import LlvmGen
from arrayjit_backends import fresh_backend
from arrayjit_ir import ir
from arrayjit_ir.assignments import Assignment
from arrayjit_tnode import Tnode

BATCH, WIDTH = 32, 64

PHASES: dict[str, float] = {"render": 0.0, "toolchain": 0.0}
SOURCE: list[int] = [0]


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


def instrument() -> None:
    """Time the renderers and the toolchains where the compilers call them."""
    CcSyntax.render_segments = timed("render", CcSyntax.render_segments, source=True)  # type: ignore[method-assign]
    LlvmGen.generate = timed("render", LlvmGen.generate, source=True)  # type: ignore[method-assign]
    toolchain.compile_shared_object = timed("toolchain", toolchain.compile_shared_object)
    llvm_compiler.compile_object = timed("toolchain", llvm_compiler.compile_object)
    assert cc_compiler.toolchain is toolchain


def mlp_step(layers: int) -> tuple[Assignment, int]:
    """The L-layer training step and its number of statements."""
    count = [0]

    def node(label: str, dims: tuple[int, ...], hosted: bool = False) -> Tnode:
        return Tnode.create(dims, label=label, hosted=hosted)

    x = node("x", (BATCH, WIDTH), hosted=True)
    target = node("target", (BATCH, WIDTH), hosted=True)
    rate, inv_b, one = (node(n, (), hosted=True) for n in ("lr", "inv_b", "one"))
    ws = [node(f"w{k}", (WIDTH, WIDTH), hosted=True) for k in range(layers)]
    bs = [node(f"b{k}", (WIDTH,), hosted=True) for k in range(layers)]
    stmts: list[Assignment] = []
    hs = [x]
    for k in range(layers):  # forward
        z0, z, h = (
            node(f"z0_{k}", (BATCH, WIDTH)),
            node(f"z{k}", (BATCH, WIDTH)),
            node(f"h{k}", (BATCH, WIDTH)),
        )
        stmts += [
            ir.accum(z0, "add", hs[-1], ws[k], op="mul", spec="bi,ih->bh"),
            ir.binop(z, "add", z0, bs[k]),
            ir.unop(h, "tanh", z),
        ]
        hs.append(h)
    d, dh = node("d", (BATCH, WIDTH)), node(f"dh{layers - 1}", (BATCH, WIDTH))
    stmts += [ir.binop(d, "sub", hs[-1], target), ir.binop(dh, "mul", d, inv_b)]
    for k in reversed(range(layers)):  # backward and update
        h = hs[k + 1]
        hsq, omh, dz = (node(f"{n}{k}", (BATCH, WIDTH)) for n in ("hsq", "omh", "dz"))
        g, gb = node(f"g{k}", (WIDTH, WIDTH)), node(f"gb{k}", (WIDTH,))
        s, sb = node(f"s{k}", (WIDTH, WIDTH)), node(f"sb{k}", (WIDTH,))
        stmts += [
            ir.binop(hsq, "mul", h, h),
            ir.binop(omh, "sub", one, hsq),
            ir.binop(dz, "mul", dh, omh),
            ir.accum(g, "add", hs[k], dz, op="mul", spec="bi,bh->ih"),
            ir.accum(gb, "add", dz, spec="bh->h"),
        ]
        if k > 0:
            dh = node(f"dh{k - 1}", (BATCH, WIDTH))
            stmts.append(ir.accum(dh, "add", dz, ws[k], op="mul", spec="bh,ih->bi"))
        stmts += [
            ir.binop(s, "mul", g, rate),
            ir.binop(ws[k], "sub", ws[k], s),
            ir.binop(sb, "mul", gb, rate),
            ir.binop(bs[k], "sub", bs[k], sb),
        ]
    count[0] = len(stmts)
    return ir.block(*stmts), count[0]


def measure(backend_name: str, layers: int) -> dict[str, float]:
    """Compile the L-layer step once on a fresh backend; its numbers."""
    backend = fresh_backend(backend_name)
    comp, statements = mlp_step(layers)
    for phase in PHASES:
        PHASES[phase] = 0.0
    SOURCE[0] = 0
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
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", default="2,8,32,64", help="comma-separated layer counts")
    parser.add_argument("--backends", default="sync_cc,sync_llvm")
    args = parser.parse_args()
    instrument()
    columns = ["backend", "layers", "statements", "compile s", "source bytes", "bytes/stmt"]
    print("| " + " | ".join([*columns, "render s", "toolchain s"]) + " |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name in args.backends.split(","):
        for layers in (int(n) for n in args.layers.split(",")):
            r = measure(name, layers)
            print(
                f"| {name} | {layers} | {r['statements']:.0f} | {r['compile_s']:.2f} "
                f"| {r['source_bytes']:.0f} | {r['bytes_per_stmt']:.0f} "
                f"| {r['render_s']:.2f} | {r['toolchain_s']:.2f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
