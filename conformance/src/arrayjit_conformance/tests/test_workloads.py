"""The workload catalogue (``arrayjit_conformance.workloads``) on every backend: whole programs
as users write them, each run as many times in a row as the workload says, compared after every
run with plain numpy (double precision), with the oracle (the interpreter over the unoptimized
lowered code) and with the interpreter over the optimized code."""

from __future__ import annotations

from typing import Any

import pytest

from arrayjit_conformance.harness import check_runs
from arrayjit_conformance.workloads import WORKLOADS, Workload

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
