"""The workload catalogue (``arrayjit_conformance.workloads``) on every backend: whole programs
as users write them, each run as many times in a row as the workload says, compared after every
run with plain numpy (double precision), with the oracle (the interpreter over the unoptimized
lowered code) and with the interpreter over the optimized code. The CNN training step runs
both as one routine (in the catalogue) and as forward, backward and update routines."""

from __future__ import annotations

from typing import Any

import pytest

from arrayjit_conformance.harness import check_routines_runs, check_runs
from arrayjit_conformance.workloads import (
    WORKLOADS,
    Workload,
    cnn_step_numpy,
    cnn_training_step_parts,
)

NUMPY_RTOL = 1e-4
"""Single precision against numpy in double, relative to the magnitude of each node."""


@pytest.mark.parametrize("workload", WORKLOADS, ids=[w.name for w in WORKLOADS])
def test_workload(backend: Any, workload: Workload) -> None:
    built = workload.make()
    check_runs(
        backend,
        built.comp,
        built.tns,
        built.values,
        workload.step,
        runs=workload.runs,
        prec="single",
        observed=workload.observed,
        numpy_rtol=NUMPY_RTOL,
        feeds=workload.feeds,
        title=workload.name,
    )


def test_cnn_step_as_forward_backward_and_update_routines(backend: Any) -> None:
    built, parts = cnn_training_step_parts()
    check_routines_runs(
        backend,
        parts,
        ["forward", "backward", "update"],
        built.tns,
        built.values,
        cnn_step_numpy,
        runs=3,
        prec="single",
        observed=("loss", "w1", "b1", "w2", "b2", "wd", "bd"),
        numpy_rtol=NUMPY_RTOL,
        title="cnn in three routines",
    )
