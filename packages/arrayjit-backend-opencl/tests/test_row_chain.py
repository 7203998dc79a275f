"""Row chains (``arrayjit_backends.gpu.row_chain``): row reductions and the pointwise work
between them over the same rows (softmax, layer norm, row centring) run as one kernel with a
work group per row; values against numpy and against the interpreter over the unoptimized code.

PoCL's CPU devices keep one work item per row by default (no cooperative reductions, so no
chains): this module's backend takes 64 lanes (``ARRAYJIT_GPU_CELL_LANES``), the shape GPUs
get."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arrayjit_backends.gpu.program import GpuProgram
from arrayjit_conformance.harness import check_runs, hosted, new_context, run_once
from arrayjit_conformance.workloads import (
    Built,
    attention,
    attention_numpy,
    layer_norm,
    layer_norm_numpy,
    row_centring,
    row_centring_numpy,
    softmax,
    softmax_numpy,
    softmax_rows,
)
from arrayjit_ir import interpret, ir, lower
from arrayjit_tnode import Tnode, UsageError

RNG = np.random.default_rng(29)


GPU_CELL_LANES = 64
"""The GPU shape on PoCL (read by the ``backend`` fixture)."""


def _shapes(backend: Any, comp: Any, name: str = "rows") -> tuple[GpuProgram, list[Any]]:
    program: GpuProgram = backend.compile(comp, name=name).native.rendered
    return program, [(k.global_size, k.local_size) for k in program.kernels]


def _softmax_block(rows: int, cols: int) -> tuple[Any, Tnode, Tnode]:
    """The softmax of ``conformance/benchmarks/test_bench_gpu.py``: five assignments."""
    x, y = hosted((rows, cols), "x"), hosted((rows, cols), "y")
    return softmax_rows(x, y), x, y


def _softmax_np(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def test_the_benchmarks_softmax_is_one_launch(backend: Any) -> None:
    assert backend.runtime.renderer.cell_lanes == 64
    comp, x, y = _softmax_block(4096, 4096)
    program, shapes = _shapes(backend, comp, "softmax")
    assert shapes == [(4096 * 64, 64)]
    src = program.source
    # Phases: row max | x - m and exp (one walk of the row) | row sum | divide.
    assert src.count("barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);") == 3
    assert src.count("aj_b += 64") == 2 and src.count("aj_t += 64") == 2
    assert "aj_fmaxf(" in src  # the NaN-propagating max of the cell reductions
    vx = RNG.uniform(-4, 4, (4096, 4096)).astype(np.float32)
    vx[7, 100] = np.nan  # a NaN anywhere in a row makes the whole row NaN
    vx[9, 4095] = np.inf  # e = exp(inf - inf): NaN too
    vx[11] = -1e30  # a constant row: uniform
    [got] = run_once(backend, comp, {x: vx}, [y])
    want = _softmax_np(vx.astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-9)
    assert np.isnan(got[[7, 9]]).all() and np.all(got[11] == np.float32(1 / 4096))


@pytest.mark.parametrize(
    ("make", "step", "observed", "kernels"),
    [
        (lambda: softmax(rows=8, cols=700), softmax_numpy, ("y",), 1),
        (lambda: layer_norm(rows=8, cols=700), layer_norm_numpy, ("y",), 1),
        (lambda: row_centring(rows=8, cols=1000), row_centring_numpy, ("y",), 1),
        # the scores' scaling and the division by the row sums join the softmax's kernel; then
        # the product with V, a tiled matmul (p is stored: one exp and division per score)
        (lambda: attention(n_q=6, n_k=300, d=4), attention_numpy, ("o",), 2),
    ],
    ids=["softmax", "layer_norm", "row_centring", "attention"],
)
def test_workloads_run_their_rows_in_one_kernel(
    backend: Any, make: Any, step: Any, observed: tuple[str, ...], kernels: int
) -> None:
    built: Built = make()
    program, _ = _shapes(backend, built.comp)
    # A row chain's group is this module's 64 lanes; a tiled matmul's is larger.
    chains = [k for k in program.kernels if 32 <= (k.local_size or 0) <= 64]
    assert len(chains) == 1 and len(program.kernels) == kernels, program.source
    check_runs(
        backend,
        built.comp,
        built.tns,
        built.values,
        step,
        runs=2,
        prec="single",
        observed=observed,
        numpy_rtol=1e-4,
    )


def test_layer_norm_inlined_sums_are_cooperative(backend: Any) -> None:
    """The optimizer inlines the row sums into ``mean`` and ``rstd`` (local scopes): their
    lanes share them, as a cell reduction's do, and lane 0 finishes the row's value."""
    program, shapes = _shapes(backend, layer_norm(rows=300, cols=2000).comp)
    assert shapes == [(300 * 64, 64)]
    src = program.source
    assert src.count("aj_sh[aj_lid] = aj_acc;") == 2 and src.count("if (aj_lid == 0) {") == 2
    assert "aj_acc = fmaf(" in src  # the sum of squares steps with fma, as serially
    # 79 terms a lane: both sums add them in blocks of 64 per lane.
    program, _ = _shapes(backend, layer_norm(rows=300, cols=5000).comp)
    src = program.source
    assert "aj_part = ((float)(aj_part + " in src and "aj_part = fmaf(" in src


def test_a_read_of_another_rows_result_ends_the_chain(backend: Any) -> None:
    """``y[r, c] = x[r, c] - m[c]`` reads the maximum of row ``c``, which another work group
    computes: it must wait for the whole reduction (a kernel of its own)."""
    n = 512
    x, y = hosted((n, n), "x"), hosted((n, n), "y")
    m, t = Tnode.create((n,), label="m"), hosted((n, n), "t")
    comp = ir.block(
        ir.accum(m, "max", x, spec="rc->r"),
        ir.binop(t, "mul", x, x),  # joins: each row's own cells
        ir.binop(y, "sub", t, m, spec="rc,c->rc"),
    )
    _, shapes = _shapes(backend, comp)
    assert shapes == [(n * 64, 64), (n * n, None)]
    vx = RNG.standard_normal((n, n)).astype(np.float32)
    [got] = run_once(backend, comp, {x: vx}, [y])
    np.testing.assert_array_equal(got, vx * vx - vx.max(1)[None, :])


def test_few_long_rows_keep_their_pointwise_kernels(backend: Any) -> None:
    """Four rows of 2^15: the pointwise step keeps a work item per cell (a chain would give it
    four work groups)."""
    x, y = hosted((4, 1 << 15), "x"), hosted((4, 1 << 15), "y")
    s = Tnode.create((4,), label="s")
    comp = ir.block(ir.accum(s, "add", x, spec="ij->i"), ir.binop(y, "div", x, s, spec="ij,i->ij"))
    _, shapes = _shapes(backend, comp)
    assert shapes == [(4 * 64, 64), (4 << 15, None)]
    vx = RNG.uniform(0, 1, (4, 1 << 15)).astype(np.float32)
    [got] = run_once(backend, comp, {x: vx}, [y])
    np.testing.assert_allclose(got, vx / vx.sum(1, dtype=np.float64)[:, None], rtol=1e-5)


def test_mixed_compute_types_split_the_chain(backend: Any) -> None:
    """A double row sum next to a float one: one local array type per kernel, so two kernels;
    the values stay right."""
    from opencl_helpers import require_prec

    require_prec(backend, "double")
    x, xd = hosted((300, 512), "x"), hosted((300, 512), "xd", "double")
    s, sd = hosted((300,), "s"), hosted((300,), "sd", "double")
    comp = ir.block(ir.accum(s, "add", x, spec="ij->i"), ir.accum(sd, "add", xd, spec="ij->i"))
    _, shapes = _shapes(backend, comp)
    assert shapes == [(300 * 64, 64)] * 2
    vx, vd = RNG.standard_normal((300, 512)).astype(np.float32), RNG.standard_normal((300, 512))
    got, got_d = run_once(backend, comp, {x: vx, xd: vd}, [s, sd])
    np.testing.assert_allclose(got, vx.sum(1, dtype=np.float64), atol=1e-4)
    np.testing.assert_allclose(got_d, vd.sum(1), atol=1e-12)


# ---- random row programs ----

ROWS, COLS = 8, 300
"""Rows long enough for cooperative reductions (256 terms), few enough for the interpreter."""

_MAT_UNOPS = ["tanh", "relu", "neg"]


@st.composite
def _row_program(draw: st.DrawFn) -> list[tuple[str, str, str, tuple[str, ...]]]:
    """Statements ``(kind, out, op, args)`` over matrices (``ROWS x COLS``: ``x``, ``w``, then
    ``m<k>``) and row vectors (``v<k>``, and ``s<k>`` never hosted): row reductions (fresh, or
    into an existing vector without the neutral fill), row dot products, pointwise work on
    matrices, in place or not, broadcasts of row vectors over their rows, and vector
    arithmetic."""
    mats, vecs = ["x", "w"], ["v0"]
    stmts: list[tuple[str, str, str, tuple[str, ...]]] = [
        ("reduce", "v0", draw(st.sampled_from(["add", "max", "min"])), ("x",))
    ]
    for k in range(1, draw(st.integers(2, 7))):
        kinds = ["reduce", "reduce_into", "dot", "bcast", "unop", "vec", "scaled"]
        kind = draw(st.sampled_from(kinds))
        m1, m2 = draw(st.sampled_from(mats)), draw(st.sampled_from(mats))
        v1, v2 = draw(st.sampled_from(vecs)), draw(st.sampled_from(vecs))
        if kind == "reduce":
            stmts.append((kind, f"v{k}", draw(st.sampled_from(["add", "max", "min"])), (m1,)))
            vecs.append(f"v{k}")
        elif kind == "reduce_into":
            stmts.append((kind, v1, draw(st.sampled_from(["add", "max"])), (m1,)))
        elif kind == "dot":
            stmts.append((kind, f"v{k}", "add", (m1, m2)))
            vecs.append(f"v{k}")
        elif kind == "bcast":
            out = m1 if m1 not in ("x", "w") and draw(st.booleans()) else f"m{k}"
            stmts.append((kind, out, draw(st.sampled_from(["add", "sub", "mul"])), (m1, v1)))
            mats.append(out)
        elif kind == "unop":
            out = m1 if m1 not in ("x", "w") and draw(st.booleans()) else f"m{k}"
            stmts.append((kind, out, draw(st.sampled_from(_MAT_UNOPS)), (m1,)))
            mats.append(out)
        elif kind == "scaled":  # a row sum read once by a vector op: inlined into it
            stmts.append(("reduce", f"s{k}", draw(st.sampled_from(["add", "max"])), (m1,)))
            stmts.append(("vec", f"v{k}", "mul", (f"s{k}", v1)))
            vecs.append(f"v{k}")
        else:
            stmts.append((kind, f"v{k}", draw(st.sampled_from(["add", "mul", "max"])), (v1, v2)))
            vecs.append(f"v{k}")
    return stmts


def _build(
    stmts: list[tuple[str, str, str, tuple[str, ...]]], hosted_mask: list[bool]
) -> tuple[Any, dict[str, Tnode]]:
    """The block of ``stmts`` and its nodes; a node is hosted (observed) where the mask says,
    the last result always (the others may be virtual, their sums inlined)."""
    nodes: dict[str, Tnode] = {"x": hosted((ROWS, COLS), "x"), "w": hosted((ROWS, COLS), "w")}
    for k, (_, out, _, _) in enumerate(stmts):
        if out not in nodes:
            dims = (ROWS,) if out[0] in "vs" else (ROWS, COLS)
            keep = out[0] != "s" and (hosted_mask[k % len(hosted_mask)] or k == len(stmts) - 1)
            nodes[out] = hosted(dims, out) if keep else Tnode.create(dims, label=out)
    block = []
    for kind, out, op, args in stmts:
        o, a = nodes[out], [nodes[x] for x in args]
        match kind:
            case "reduce":
                block.append(ir.accum(o, op, a[0], spec="rc->r"))
            case "reduce_into":
                block.append(ir.accum(o, op, a[0], spec="rc->r", initialize_neutral=False))
            case "dot":
                block.append(ir.accum(o, "add", a[0], a[1], op="mul", spec="rc,rc->r"))
            case "bcast":
                block.append(ir.binop(o, op, a[0], a[1], spec="rc,r->rc"))
            case "unop":
                block.append(ir.unop(o, op, a[0]))
            case _:
                block.append(ir.binop(o, op, a[0], a[1]))
    return ir.block(*block), nodes


def test_random_row_programs_match_the_interpreter(backend: Any) -> None:
    """Generated chains of row statements against the interpreter over the unoptimized lowered
    code; most of them must form row kernels (else this tests nothing new)."""
    formed: list[bool] = []

    @settings(
        max_examples=12,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(stmts=_row_program(), mask=st.lists(st.booleans(), min_size=1, max_size=4))
    def check(stmts: list[tuple[str, str, str, tuple[str, ...]]], mask: list[bool]) -> None:
        comp, nodes = _build(stmts, mask)
        code = backend.compile(comp, name="rowprog")
        program: GpuProgram = code.native.rendered
        formed.append(any((k.local_size or 0) >= 32 for k in program.kernels))
        start = {tn: RNG.uniform(-1, 1, tn.dims).astype(np.float32) for tn in nodes.values()}
        start = {tn: v for tn, v in start.items() if tn.array is not None}
        for tn, v in start.items():
            tn.set_values(v)
        routine = backend.link(new_context(backend), code)
        routine()
        oracle = interpret(lower(comp), {tn: v.copy() for tn, v in start.items()}, {})
        for tn in start:
            backend.to_host(routine.context, tn)
            got, ref = tn.get_values(), oracle[tn]
            scale = max(float(np.abs(ref).max()), 1.0)
            np.testing.assert_allclose(
                got, ref, rtol=1e-4, atol=1e-4 * scale, err_msg=f"{tn.debug_label}: {stmts}"
            )

    check()
    assert sum(formed) >= len(formed) // 2, formed


def test_softmax_rows_refuses_other_shapes() -> None:
    x, y = hosted((3, 4), "x"), hosted((4, 3), "y")
    with pytest.raises(UsageError, match=r"softmax_rows needs a 2-D .*\(3, 4\) and \(4, 3\)"):
        softmax_rows(x, y)
    with pytest.raises(UsageError, match="2-D"):
        softmax_rows(hosted((5,), "v"), hosted((5,), "w"))


def _row_arrays(src: str) -> list[str]:
    return [line.split()[-1] for line in src.splitlines() if "__local" in line and "row_" in line]


def test_a_row_the_chain_reads_back_is_held_in_local_memory(backend: Any) -> None:
    """Softmax with ``e`` hosted: the chain keeps each work group's row of ``e`` in local
    memory (its reads come from there), and its stores still reach ``e``'s buffer, which the
    host reads afterwards; ``m`` and ``se`` live in this kernel alone and are never stored."""
    rows, cols = 300, 500
    x, y, e = hosted((rows, cols), "x"), hosted((rows, cols), "y"), hosted((rows, cols), "e")
    m, se = Tnode.create((rows,), label="m"), Tnode.create((rows,), label="se")
    comp = ir.block(
        ir.accum(m, "max", x, spec="rc->r"),
        ir.binop(e, "sub", x, m, spec="rc,r->rc"),
        ir.unop(e, "exp", e),
        ir.accum(se, "add", e, spec="rc->r"),
        ir.binop(y, "div", e, se, spec="rc,r->rc"),
    )
    program, shapes = _shapes(backend, comp)
    assert shapes == [(rows * 32, 32)]  # 500 terms a row: 32 lanes
    src = program.source
    arrays = _row_arrays(src)
    assert [a.split("[")[1] for a in arrays] == [f"{cols}];", "1];", "1];"], arrays
    e_row = arrays[0].split("[")[0]
    # Every store of e goes to the row and the buffer; every read of e is of the row.
    e_buf = e_row.removeprefix("row_")
    # e's buffer only as the target of its two stores (``row_e[c] = e[r, c] = ...``)
    assert src.count(f"{e_buf}[") - src.count(f"{e_row}[") == src.count(f"= {e_buf}[") == 2
    assert "= m_" not in src and "= se_" not in src
    vx = RNG.uniform(-4, 4, (rows, cols)).astype(np.float32)
    got_y, got_e = run_once(backend, comp, {x: vx}, [y, e])
    ve = np.exp(vx.astype(np.float64) - vx.max(1, keepdims=True))
    np.testing.assert_allclose(got_e, ve, rtol=1e-5)
    np.testing.assert_allclose(got_y, ve / ve.sum(1, keepdims=True), rtol=1e-5, atol=1e-9)


def test_a_row_whose_first_touch_reads_it_stays_in_its_buffer(backend: Any) -> None:
    """``t = 0.5 * t + x`` reads ``t``'s value from before the kernel: a local row array would
    not hold it, so ``t`` keeps its buffer; two runs carry ``t`` over, against numpy and the
    interpreter."""
    rows, cols = 300, 400
    x, y, t = hosted((rows, cols), "x"), hosted((rows, cols), "y"), hosted((rows, cols), "t")
    h, s = Tnode.create((rows, cols), label="h"), Tnode.create((rows,), label="s")
    half = hosted((), "half")
    comp = ir.block(
        ir.binop(h, "mul", t, half, spec="rc,->rc"),
        ir.binop(t, "add", h, x),
        ir.accum(s, "add", t, spec="rc->r"),
        ir.binop(y, "div", t, s, spec="rc,r->rc"),
    )
    program, _ = _shapes(backend, comp)
    assert [k for k in program.kernels if k.local_size == 32], program.source  # the chain
    assert not any("row_t_" in a for a in _row_arrays(program.source))
    vx = RNG.uniform(1, 2, (rows, cols))
    vt = RNG.uniform(1, 2, (rows, cols))

    def step(state: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        t2 = 0.5 * state["t"] + state["x"]
        return {**state, "t": t2, "y": t2 / t2.sum(1, keepdims=True)}

    check_runs(
        backend,
        comp,
        {"x": x, "y": y, "t": t, "half": half},
        {"x": vx, "y": np.zeros((rows, cols)), "t": vt, "half": np.array(0.5)},
        step,
        runs=2,
        prec="single",
        observed=("t", "y"),
        numpy_rtol=1e-5,
        interpreters=False,
    )


def test_kernel_local_temporaries_are_never_stored(backend: Any) -> None:
    """``softmax_rows(kernel_local=True)``: ``m``, ``e`` and ``se`` are ``Local`` and only the
    chain touches them, so they live in its local arrays alone: no store to their buffers (each
    a one-byte stand-in), one read of ``x`` per row, one write of ``y``."""
    rows, cols = 300, 1000
    x, y = hosted((rows, cols), "x"), hosted((rows, cols), "y")
    comp = softmax_rows(x, y, kernel_local=True)
    program, shapes = _shapes(backend, comp)
    assert shapes == [(rows * 64, 64)]
    src = program.source
    assert len(_row_arrays(src)) == 3
    assert sorted(size for tn, size in program.scratch if tn is not None) == [1, 1, 1]
    body = src[src.index("__kernel") :]
    stores = [line for line in body.splitlines() if "] = " in line and "aj_sh" not in line]
    targets = [
        t.strip().removeprefix("if (aj_lid == 0) ") for s in stores for t in s.split(" = ")[:-1]
    ]
    assert targets and all(t.startswith(("row_", "y_")) for t in targets), targets
    vx = RNG.uniform(-4, 4, (rows, cols)).astype(np.float32)
    [got] = run_once(backend, comp, {x: vx}, [y])
    np.testing.assert_allclose(got, _softmax_np(vx.astype(np.float64)), rtol=1e-5, atol=1e-9)
