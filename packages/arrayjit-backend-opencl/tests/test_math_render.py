"""The math library in OpenCL C, without a device: a routine of every float transcendental
renders the library's helpers (those it calls, once each; the double-based ones only with
fp64, the device's builtins without), and the helpers are valid C once the OpenCL builtins
they use (``as_uint``...) are given as C functions (PoCL cannot build programs on every
machine CI runs on)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from arrayjit_backend_opencl.renderer import INLINE, OpenclSyntax
from arrayjit_backends.codegen import math_lib
from arrayjit_backends.gpu.program import render_program
from arrayjit_ir import ir, lower, optimize
from arrayjit_tnode import Tnode

OPS = ("exp", "exp2", "log", "log2", "tanh", "sin", "cos", "recip_sqrt")


def _source(fp64: bool) -> str:
    x = Tnode.create((8,), label="x", hosted=True, prec="single")
    z = Tnode.create((8,), label="z", hosted=True, prec="single")
    outs = [Tnode.create((8,), label=op, hosted=True, prec="single") for op in OPS]
    p = Tnode.create((8,), label="p", hosted=True, prec="single")
    comp = ir.block(*(ir.unop(y, op, x) for y, op in zip(outs, OPS)), ir.binop(p, "pow", x, z))
    return render_program(OpenclSyntax(fp64=fp64), optimize(lower(comp), name="m"), "m").source


def test_helpers_rendered_once_each() -> None:
    source = _source(fp64=True)
    for name in math_lib.FUNCTIONS:
        assert source.count(f"{INLINE} float {name}(") == 1, name
        assert f"= {name}(" in source, name
    assert "union" not in source  # bit casts are as_uint / as_float


def test_without_fp64_the_double_based_ones_are_builtins() -> None:
    source = _source(fp64=False)
    for name in math_lib.FUNCTIONS:
        defined = f"{INLINE} float {name}(" in source
        assert defined == (name not in math_lib.NEEDS_FP64), name
    assert "sinf(" in source and "powf(" in source  # the builtins, through the prelude's macros


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_helpers_are_valid_c(tmp_path: Path) -> None:
    shim = (
        "#include <stdint.h>\n#include <math.h>\n#include <string.h>\n"
        + "".join(
            f"static inline {r} {n}({a} v) {{ {r} o; memcpy(&o, &v, sizeof o); return o; }}\n"
            for n, r, a in (
                ("as_uint", "uint32_t", "float"),
                ("as_float", "float", "uint32_t"),
                ("as_ulong", "uint64_t", "double"),
                ("as_double", "double", "uint64_t"),
            )
        )
        + "#define inline static inline\n"
    )
    src = tmp_path / "m.c"
    names = tuple(math_lib.FUNCTIONS)
    src.write_text(shim + math_lib.c_functions(names, math_lib.OPENCL_DIALECT))
    done = subprocess.run(
        ["cc", "-std=gnu11", "-Wall", "-Werror", "-Wno-unused-function", "-c", str(src),
         "-o", str(tmp_path / "m.o")],
        capture_output=True,
        text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
