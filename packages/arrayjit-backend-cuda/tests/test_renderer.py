"""CUDA source for the conformance computation catalogue, compiled to PTX with nvcc.

Runs without pycuda, a driver or a GPU: where ``nvcc`` is on PATH (CI has it), generated CUDA
code that does not compile fails here. Without nvcc the compile checks skip with the reason; the
rendering checks still run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from arrayjit_backend_cuda.compiler import compile_to, nvcc_path
from arrayjit_backend_cuda.renderer import CudaSyntax
from arrayjit_backends.codegen import math_lib
from arrayjit_backends.gpu.program import GpuProgram, render_program
from arrayjit_backends.impl.cpu_compiler import kernel_name
from arrayjit_ir import ir, lower, optimize
from arrayjit_ir.indexing import StaticSymbol
from arrayjit_ir.ops import Binop, Unop
from arrayjit_tnode import CompileError, Padding, Prec, Tnode
from arrayjit_tnode import memory_mode as mm

FLOATS = ["single", "double", "half", "bfloat16", "fp8"]
ALL = [*FLOATS, "byte", "uint16", "int32", "uint32", "int64", "uint64"]

MATH = "".join(math_lib.c_function(f, math_lib.CUDA_DIALECT) for f in math_lib.FUNCTIONS.values())
"""Every helper of the math library, once, for a translation unit of several programs."""


def without_math(body: str) -> str:
    """A program's source without the math library's helpers it defines (:data:`MATH` has
    them once)."""
    for fn in math_lib.FUNCTIONS.values():
        body = body.replace(math_lib.c_function(fn, math_lib.CUDA_DIALECT), "")
    return body


def _node(dims: tuple[int, ...], label: str, prec: str = "single", **kw: Any) -> Tnode:
    return Tnode.create(dims, prec=prec, label=label, hosted=True, **kw)


def _cases() -> dict[str, Callable[[], Any]]:
    cases: dict[str, Callable[[], Any]] = {}
    for prec in FLOATS:
        for op in Unop:
            if op is not Unop.uint4x32_to_prec_uniform:
                cases[f"unop_{op.value}_{prec}"] = lambda op=op, p=prec: ir.unop(
                    _node((3, 7), "y", p), op, _node((3, 7), "x", p)
                )
    for prec in ALL:
        for bop in Binop:
            if bop not in (Binop.threefry4x32, Binop.arg1, Binop.arg2):
                cases[f"binop_{bop.value}_{prec}"] = lambda op=bop, p=prec: ir.binop(
                    _node((3, 5), "y", p), op, _node((3, 5), "a", p), _node((5,), "b", p)
                )
    for prec in FLOATS:
        cases[f"ternops_{prec}"] = lambda p=prec: ir.block(
            ir.ternop(_node((4,), "w", p), "where", *(_node((4,), n, p) for n in "cab")),
            ir.ternop(_node((4,), "f", p), "fma", *(_node((4,), n, p) for n in "abc")),
        )
    for accum in ("add", "max", "min", "mul"):
        for spec, out in (("ij->i", (6,)), ("ij->j", (11,)), ("ij->", ())):
            cases[f"reduce_{accum}_{spec}"] = lambda a=accum, s=spec, o=out: ir.accum(
                _node(o, "s", "double"), a, _node((6, 11), "x", "double"), spec=s
            )
    cases["full_sum_large"] = lambda: ir.accum(
        _node((), "s"), "add", _node((1 << 18,), "x"), spec="i->"
    )
    cases["int_max_reduction"] = lambda: ir.accum(
        _node((), "s", "int32"), "max", _node((100,), "x", "int32"), spec="i->"
    )
    cases["matmul_relu"] = lambda: ir.block(
        ir.accum(
            h := Tnode.create((33, 65), label="h"),
            "add",
            _node((33, 17), "x"),
            _node((17, 65), "w"),
            op="mul",
            spec="ik,kj->ij",
        ),
        ir.unop(_node((33, 65), "y"), "relu", h),
    )
    cases["matmul_large"] = lambda: ir.accum(
        _node((64, 64), "h"),
        "add",
        _node((64, 64), "x"),
        _node((64, 64), "w"),
        op="mul",
        spec="ik,kj->ij",
    )
    cases["accumulate_no_init"] = lambda: ir.accum(
        _node((4,), "acc"), "add", _node((4, 3), "x"), spec="ij->i", initialize_neutral=False
    )
    i = StaticSymbol("i", range=4)
    cases["fetches"] = lambda: ir.block(
        ir.fetch(_node((2, 3), "r", "int32"), ir.Range_over_offsets()),
        ir.fetch(_node((2, 2), "f", "double"), ir.Constant_fill((1.5, -2.0, 3.25, 0.0))),
        ir.fetch(_node((3,), "row"), ir.Slice(i, _node((4, 3), "data"))),
        ir.fetch(_node((2,), "e", "int32"), ir.Embed_symbol(i)),
        ir.fetch(_node((5,), "c", "half"), ir.Constant(5.0)),
    )
    cases["padding"] = lambda: ir.binop(
        _node((3,), "y"), "mul", x := _node((3,), "x", padding=Padding(((1, 2),), 0.0)), x
    )
    cases["merge_buffer"] = lambda: ir.accum(
        _node((4,), "acc"),
        "add",
        ir.merge_buffer(Tnode.create((4,), label="g", memory_mode=(mm.Materialized(), 1))),
        initialize_neutral=False,
    )
    cases["local_reduction"] = lambda: ir.block(
        ir.accum(
            s := Tnode.create((5,), label="s", prec="double"),
            "add",
            _node((5, 8), "x", "double"),
            spec="ij->i",
        ),
        ir.binop(_node((5,), "y", "double"), "mul", s, s),
    )
    pad = Padding(((0, 0), (1, 1), (1, 1), (0, 0)), 0.0)
    window = "b(2*h+i-1)(2*w+j-1)c"
    cases["conv2d_strided_padded"] = lambda: ir.accum(
        _node((2, 4, 4, 5), "y"),
        "add",
        _node((2, 7, 8, 3), "x", padding=pad),
        _node((3, 3, 3, 5), "w"),
        op="mul",
        spec=f"{window},ijcd->bhwd",
    )
    cases["conv2d_input_grad"] = lambda: ir.accum(
        _node((2, 7, 8, 3), "dx", padding=pad),
        "add",
        _node((2, 4, 4, 5), "dy"),
        _node((3, 3, 3, 5), "w"),
        op="mul",
        spec=f"bhwd,ijcd->{window}",
    )
    cases["conv2d_weight_grad"] = lambda: ir.accum(
        _node((3, 3, 3, 5), "dw"),
        "add",
        _node((2, 7, 8, 3), "x", padding=pad),
        _node((2, 4, 4, 5), "dy"),
        op="mul",
        spec=f"{window},bhwd->ijcd",
    )
    cases["max_pool_margins_reset"] = lambda: ir.block(
        ir.accum(
            _node((2, 4, 4, 3), "p"),
            "max",
            x := _node((2, 7, 8, 3), "x", padding=Padding(pad.axes, None)),
            spec=f"{window}->bhwc",
            sizes={"i": 3, "j": 3},
        ),
        ir.accum(
            _node((2, 4, 4, 5), "y"),
            "add",
            x,
            _node((3, 3, 3, 5), "w"),
            op="mul",
            spec=f"{window},ijcd->bhwd",
        ),
    )
    return cases


CASES = _cases()
_STATIC = {"fetches": (StaticSymbol("i", range=4),)}


def _render(name: str) -> GpuProgram:
    comp = CASES[name]()
    symbols: tuple[StaticSymbol, ...] = ()
    if name == "fetches":
        symbols = tuple({s for s in _symbols_of(comp)})
    opt = optimize(lower(comp), name=name, static_symbols=symbols)
    return render_program(CudaSyntax(), opt, kernel_name(name))


def _symbols_of(comp: Any) -> list[StaticSymbol]:
    found = []
    for item in comp.items:
        op = getattr(item, "fetch_op", None)
        for attr in ("batch", "symbol"):
            if isinstance(getattr(op, attr, None), StaticSymbol):
                found.append(getattr(op, attr))
    return found


def test_catalogue_renders_parallel_kernels() -> None:
    programs = {name: _render(name) for name in CASES}
    assert len(programs) > 250
    sizes = [k.global_size for k in programs["binop_add_single"].kernels]
    assert sizes == [15]  # one thread per output cell
    # Whole blocks are launched: the threads past the last cell return (OpenCL launches
    # exactly the global size and has no such check).
    assert "if (aj_gid >= 15) return;" in programs["binop_add_single"].source
    red = programs["full_sum_large"].kernels
    assert [k.local_size for k in red[-2:]] == [256, 256] and red[-2].global_size > 256
    assert "__syncthreads();" in programs["full_sum_large"].source
    assert "__float2half_rn(" in programs["unop_exp_half"].source
    assert 'extern "C" __global__ void aj_matmul_large_k' in programs["matmul_large"].source
    # A matmul: one tiled block of 256 threads per 64 x 64 cells, its tiles in shared memory
    # (aligned rows: each step's 4 values of each tile are one float4 load); the zeroing
    # before it folded in (cells start from 0, no launch of its own).
    mm = programs["matmul_large"]
    assert [(k.global_size, k.local_size) for k in mm.kernels] == [(256, 256)]
    assert "__shared__ __align__(16) float aj_ta[16][68];" in mm.source
    assert "fmaf(aj_a3, aj_b3," in mm.source and mm.source.count("(*(const float4*)&") == 2
    assert "= (aj_i0 < 64 && aj_j0 < 64) ? (((float)0.0)) : 0;" in mm.source
    # Independent statements of one size share a kernel.
    assert len(programs["ternops_single"].kernels) == 1


NVCC = nvcc_path()
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc is not on PATH")


@needs_nvcc
def test_catalogue_compiles_to_ptx() -> None:
    """All cases in one translation unit (one prelude), then each failing case on its own."""
    assert NVCC is not None
    programs = {name: _render(name) for name in CASES}
    prelude = CudaSyntax().prelude
    bodies = [without_math(p.source.removeprefix(prelude)) for p in programs.values()]
    assert all(p.source.startswith(prelude) for p in programs.values())
    try:
        ptx = compile_to(prelude + MATH + "\n".join(bodies), NVCC, "sm_80", "ptx", "catalogue")
    except CompileError:
        failing = []
        for name, p in programs.items():
            try:
                compile_to(p.source, NVCC, "sm_80", "ptx", name)
            except CompileError as exc:
                failing.append(f"{name}: {exc.output[:400]}")
        pytest.fail("CUDA source that nvcc rejects:\n" + "\n".join(failing))
    text = ptx.decode()
    for p in programs.values():
        for k in p.kernels:
            assert f".entry {k.name}(" in text


@needs_nvcc
def test_nvcc_errors_raise_compile_error_with_output() -> None:
    assert NVCC is not None
    with pytest.raises(CompileError, match="nvcc failed to compile routine broken") as info:
        compile_to('extern "C" __global__ void k() { not cuda }', NVCC, name="broken")
    assert "error" in info.value.output
    assert info.value.source_path and info.value.source_path.endswith("broken.cu")


def test_missing_backend_without_pycuda() -> None:
    from arrayjit_backends import BackendMissingError, fresh_backend

    try:
        import pycuda.driver  # noqa: F401
    except ImportError:
        be = fresh_backend("cuda")
        assert be.num_devices() == 0 and "pycuda is not installed" in be.reason
        with pytest.raises(BackendMissingError, match="arrayjit-backend-cuda\\[pycuda\\]"):
            be.get_device(0)
    else:
        pytest.skip("pycuda is installed here")


def test_supported_precisions_are_declared() -> None:
    assert Prec.half in CudaSyntax.storage_types and CudaSyntax.storage_types[Prec.half] == "__half"


def _row_reductions() -> GpuProgram:
    """Row sums (blocked, with a leftover part), row max and min, an fma row dot product, an
    int64 row sum and a double row sum: a block per row (cooperative reductions); those of one
    compute type over the same rows share one kernel (a row chain)."""
    x, w = _node((64, 3000), "x"), _node((64, 3000), "w")
    xl = _node((4, 1 << 17), "xl")
    xi, xd = _node((64, 4096), "xi", "int64"), _node((64, 4096), "xd", "double")
    ys = {
        n: _node((64,), n, p)
        for n, p in [
            ("s", "single"),
            ("mx", "single"),
            ("mn", "single"),
            ("d", "single"),
            ("i", "int64"),
            ("f", "double"),
        ]
    }
    comp = ir.block(
        ir.accum(ys["s"], "add", x, spec="ij->i"),
        ir.accum(ys["mx"], "max", x, spec="ij->i"),
        ir.accum(ys["mn"], "min", x, spec="ij->i"),
        ir.accum(ys["d"], "add", x, w, op="mul", spec="ij,ij->i"),
        ir.accum(ys["i"], "add", xi, spec="ij->i"),
        ir.accum(ys["f"], "add", xd, spec="ij->i"),
        ir.accum(_node((4,), "l"), "add", xl, spec="ij->i"),
    )
    opt = optimize(lower(comp), name="rows")
    return render_program(CudaSyntax(), opt, "aj_rows")


def test_row_reductions_render_a_block_per_row() -> None:
    program = _row_reductions()
    shapes = [(k.global_size, k.local_size) for k in program.kernels]
    # float (s, mx, mn, d), int64, double, then the 4 long rows; no fill kernels
    assert shapes == [(64 * 256, 256)] * 3 + [(4 * 256, 256)]
    assert program.source.count("__shared__") == 4
    assert program.source.count("__syncthreads();") == 7 * 2 + 3  # 7 trees, 3 phase barriers
    assert "aj_fmaxf(" in program.source and "fmaf(" in program.source
    assert "aj_part" in program.source  # the long rows sum in blocks per lane


@needs_nvcc
def test_row_reductions_compile_to_ptx() -> None:
    assert NVCC is not None
    text = compile_to(_row_reductions().source, NVCC, "sm_80", "ptx", "rows").decode()
    assert text.count(".shared") >= 7 and text.count("bar.sync") >= 7


def _row_chains() -> GpuProgram:
    """Softmax over 4096x4096 rows as the GPU benchmark writes it (five assignments), then a
    layer norm over 512x1000 rows (row sums the optimizer inlined, lane-0 steps): one row
    kernel each (``arrayjit_backends.gpu.row_chain``)."""
    x, y = _node((4096, 4096), "x"), _node((4096, 4096), "y")
    from arrayjit_conformance.workloads import layer_norm, softmax_rows  # test-only

    comp = ir.block(softmax_rows(x, y), layer_norm(rows=512, cols=1000).comp)
    return render_program(CudaSyntax(), optimize(lower(comp), name="chains"), "aj_chains")


def test_softmax_and_layer_norm_render_one_block_per_row_each() -> None:
    program = _row_chains()
    assert [(k.global_size, k.local_size) for k in program.kernels] == [
        (4096 * 256, 256),
        (512 * 64, 64),  # 1000 terms a row: 64 lanes (at least 8 terms a lane)
    ]
    # Phase barriers: softmax 3, layer norm 2 (mean | sum of squares | y) + 2 after the
    # inlined sums; 4 trees of 2 each.
    assert program.source.count("__syncthreads();") == 3 + 4 + 4 * 2


@needs_nvcc
def test_row_chains_compile_to_ptx() -> None:
    assert NVCC is not None
    text = compile_to(_row_chains().source, NVCC, "sm_80", "ptx", "chains").decode()
    assert text.count(".entry") == 2 and text.count("bar.sync") >= 7


def _folded_small_float_fills() -> GpuProgram:
    """A fill of a half and of a bfloat16 scalar, each then summed into: the grid reduction's
    last kernel combines the fill's constant as the cell holds it (rounded)."""
    items = []
    for prec in ("half", "bfloat16"):
        x, y = _node((4096,), f"x_{prec}", prec), _node((), f"y_{prec}", prec)
        items += [
            ir.fetch(y, ir.Constant(1000.3)),
            ir.accum(y, "add", x, spec="i->", initialize_neutral=False),
        ]
    return render_program(CudaSyntax(), optimize(lower(ir.block(*items)), name="f"), "aj_fills")


def test_folded_small_float_fills_round_the_constant() -> None:
    program = _folded_small_float_fills()
    assert len(program.kernels) == 4  # two grid reductions, no fill kernels
    src = program.source
    assert "__half2float(__float2half_rn(((float)1000.3)))" in src
    assert "aj_bf16_to_f32(aj_f32_to_bf16(((float)1000.3)))" in src


@needs_nvcc
def test_folded_small_float_fills_compile_to_ptx() -> None:
    assert NVCC is not None
    text = compile_to(_folded_small_float_fills().source, NVCC, "sm_80", "ptx", "fills").decode()
    assert text.count(".entry") == 4


def _mixed_inlined_sums() -> GpuProgram:
    """A per-row statement with an inlined float32 and an inlined int32 row sum (1000 terms):
    they cannot share one shared-memory array of lanes, so the row keeps one thread."""
    x, xi, y = _node((64, 1000), "x"), _node((64, 1000), "xi", "int32"), _node((64,), "y")
    s = Tnode.create((64,), prec="single", label="s")
    t = Tnode.create((64,), prec="int32", label="t")
    comp = ir.block(
        ir.accum(s, "add", x, spec="ij->i"),
        ir.accum(t, "add", xi, spec="ij->i"),
        ir.binop(y, "sub", s, t),
    )
    return render_program(CudaSyntax(), optimize(lower(comp), name="mixed"), "aj_mixed")


def test_inlined_sums_of_two_compute_types_keep_a_thread_per_row() -> None:
    program = _mixed_inlined_sums()
    assert [(k.global_size, k.local_size) for k in program.kernels] == [(64, None)]
    assert "__shared__" not in program.source


@needs_nvcc
def test_inlined_sums_of_two_compute_types_compile_to_ptx() -> None:
    assert NVCC is not None
    text = compile_to(_mixed_inlined_sums().source, NVCC, "sm_80", "ptx", "mixed").decode()
    assert text.count(".entry") == 1
