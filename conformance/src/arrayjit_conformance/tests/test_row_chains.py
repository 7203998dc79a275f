"""Row-wise programs at the shapes where running their statements row by row could go wrong
(the CPU renderers fuse consecutive loops over the same rows into one parallel loop, the GPU
renderers run them as one kernel a row): row counts that do not divide evenly across threads
or chunks, rows of one cell and of none, and rows longer than the fused loop's working-set
limit (``arrayjit_backends.codegen.row_plan.ROW_BYTES_LIMIT``: the statements then run apart).
Each compared after each of two runs with numpy, and with the oracle where the interpreter is
quick enough (:data:`ORACLE_MAX_CELLS`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from arrayjit_conformance.harness import check_runs
from arrayjit_conformance.workloads import (
    Built,
    State,
    attention,
    attention_numpy,
    layer_norm,
    layer_norm_numpy,
    softmax,
    softmax_numpy,
    softmax_rows,
)
from arrayjit_tnode import Tnode


def _softmax_local(rows: int, cols: int) -> Built:
    """Softmax with its temporaries ``Local``: a renderer may keep their rows in arrays of the
    kernel only (the cc row loop's stack, a GPU row chain's local memory)."""
    rng = np.random.default_rng(7)
    x = Tnode.create((rows, cols), label="x", hosted=True)
    y = Tnode.create((rows, cols), label="y", hosted=True)
    vx = rng.uniform(-4, 4, (rows, cols)).astype(np.float32).astype(np.float64)
    return Built({"x": x, "y": y}, softmax_rows(x, y, kernel_local=True), {"x": vx, "y": 0 * vx})


NUMPY_RTOL = 1e-4
ORACLE_MAX_CELLS = 20_000
"""Programs whose hosted nodes hold more cells compare with numpy only (the interpreter takes
a minute over the larger ones)."""

CASES: list[tuple[str, Callable[[], Built], Callable[[State], State], str]] = [
    # 1027 rows: not a multiple of any chunk count; enough work for several threads.
    ("softmax_1027x64", lambda: softmax(1027, 64), softmax_numpy, "y"),
    ("softmax_local_1027x64", lambda: _softmax_local(1027, 64), softmax_numpy, "y"),
    ("softmax_local_3x40000", lambda: _softmax_local(3, 40000), softmax_numpy, "y"),
    ("layer_norm_1027x64", lambda: layer_norm(1027, 64), layer_norm_numpy, "y"),
    ("attention_131x96x8", lambda: attention(131, 96, 8), attention_numpy, "o"),
    # Rows of one cell, and of none (the numpy reference of an empty row is empty).
    ("softmax_4099x1", lambda: softmax(4099, 1), softmax_numpy, "y"),
    ("layer_norm_4099x1", lambda: layer_norm(4099, 1), layer_norm_numpy, "y"),
    ("softmax_5x0", lambda: softmax(5, 0), lambda s: {**s, "y": np.zeros((5, 0))}, "y"),
    # Rows over the working-set limit: the loops stay apart.
    ("softmax_3x40000", lambda: softmax(3, 40000), softmax_numpy, "y"),
    ("layer_norm_3x40000", lambda: layer_norm(3, 40000), layer_norm_numpy, "y"),
]


@pytest.mark.parametrize(("name", "make", "step", "out"), CASES, ids=[c[0] for c in CASES])
def test_row_chain_shapes(
    backend: Any, name: str, make: Callable[[], Built], step: Callable[[State], State], out: str
) -> None:
    built = make()
    check_runs(
        backend,
        built.comp,
        built.tns,
        built.values,
        step,
        runs=2,
        prec="single",
        observed=(out,),
        numpy_rtol=NUMPY_RTOL,
        title=name,
        interpreters=sum(v.size for v in built.values.values()) <= ORACLE_MAX_CELLS,
    )
