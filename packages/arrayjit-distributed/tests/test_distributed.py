"""The collectives under ``mpiexec -n 2`` and ``-n 3`` (odd counts catch split bugs) on
multicore_cc and opencl: every scenario of mpi_scenarios.py runs on every rank, and each rank
must report it passed; the failing scenarios must end the job (non-zero exit, no hang) with the
cause printed by the failing rank and a message from every other rank."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip(
    "arrayjit_distributed", reason="arrayjit-distributed is not installed (tox -e dist runs these)"
)

SCENARIOS = Path(__file__).with_name("mpi_scenarios.py")
HAPPY = ["collectives", "random", "ordering", "hierarchical", "mismatch"]
TIMEOUT = 300


def mpiexec() -> str:
    """The ``mpiexec`` beside this Python (the ``mpich`` extra installs it), else on PATH."""
    beside = Path(sys.executable).with_name("mpiexec")
    found = str(beside) if beside.exists() else shutil.which("mpiexec")
    if found is None:
        pytest.fail("no mpiexec: install arrayjit-distributed[mpich] or a system MPI")
    return found


def launch(n: int, backend: str, *scenarios: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.run(
        [mpiexec(), "-n", str(n), sys.executable, str(SCENARIOS), backend, *scenarios],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=env,
    )


def require(backend: str) -> None:
    from arrayjit_backends import available_backends

    info = {b.name: b for b in available_backends()}
    entry = info.get(backend) or info.get(backend.removeprefix("multicore_"))
    if entry is None or not entry.available:
        why = entry.reason if entry is not None else "not registered"
        pytest.skip(f"backend {backend} is not usable here: {why}")


@pytest.mark.parametrize("n", [2, 3])
@pytest.mark.parametrize("backend", ["multicore_cc", "opencl"])
def test_collectives(backend: str, n: int) -> None:
    require(backend)
    scenarios = HAPPY + (["zero_copy", "threads"] if backend != "opencl" else []) + ["finalized"]
    done = launch(n, backend, *scenarios)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    for rank in range(n):
        for s in scenarios:
            assert f"rank {rank} ok {s}" in done.stdout, out


@pytest.mark.parametrize(
    ("backend", "n", "scenario", "cause"),
    [
        ("multicore_cc", 2, "stream_fails", "RuntimeError: injected failure in rank 1"),
        ("multicore_cc", 3, "stream_fails", "RuntimeError: injected failure in rank 1"),
        ("multicore_cc", 3, "program_raises", "ValueError: rank 1's own code failed"),
        ("opencl", 2, "stream_fails", "injected failure in rank 1"),
    ],
)
def test_a_failing_rank_ends_the_job(backend: str, n: int, scenario: str, cause: str) -> None:
    require(backend)
    done = launch(n, backend, scenario)
    out = done.stdout + done.stderr
    assert done.returncode != 0, out
    assert "was not aborted" not in out, out
    assert "arrayjit-distributed: rank 1 of" in out and "aborting the job" in out, out
    assert cause in out, out
    for rank in range(n):
        if rank != 1:
            assert f"arrayjit-distributed: rank {rank} of {n}: rank 1 failed" in out, out


def test_the_command_finds_the_demo_through_its_entry_point() -> None:
    """``arrayjit demo --distributed`` loads the demo from the entry-point group
    ``arrayjit.commands`` (arrayjit-backends may not import this package)."""
    from importlib.metadata import entry_points

    from arrayjit_distributed.demo import main

    (entry,) = entry_points(group="arrayjit.commands", name="demo-distributed")
    assert entry.load() is main


DEMO_ENTRIES = {
    "module": ["-m", "arrayjit_distributed.demo"],
    "cli": ["-m", "arrayjit_backends.cli.main", "demo", "--distributed"],
}


@pytest.mark.parametrize(
    ("backend", "n", "entry"),
    [
        ("multicore_cc", 2, "module"),
        ("multicore_cc", 3, "cli"),
        ("opencl", 2, "module"),
    ],
)
def test_data_parallel_demo(backend: str, n: int, entry: str) -> None:
    """The demo's own checks (identical parameters on every rank, equal to numpy's
    whole-batch SGD) pass, and it says so, whether started as the package's module or as
    ``arrayjit demo --distributed``."""
    require(backend)
    demo = [*DEMO_ENTRIES[entry], "--backend", backend, "--steps", "10"]
    done = subprocess.run(
        [mpiexec(), "-n", str(n), sys.executable, *demo],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert f"on {backend}, {n} rank(s)" in done.stdout, out
    assert done.stdout.count("[ok]") == 2 and "all checks passed" in done.stdout, out


DEMO = ["-m", "arrayjit_distributed.demo"]
BENCH = ["-m", "arrayjit_distributed.bench"]


@pytest.mark.parametrize(
    ("command", "message"),
    [
        ([*DEMO, "--steps", "0"], "argument --steps: 0 is not at least 1"),
        ([*DEMO, "--per-rank", "-1"], "argument --per-rank: -1 is not at least 1"),
        ([*DEMO, "--backend", "nonexistent"], "unknown backend 'nonexistent'"),
        ([*BENCH, "allreduce", "--repeat", "0"], "argument --repeat: 0 is not at least 1"),
    ],
)
def test_usage_errors_of_the_commands(command: list[str], message: str) -> None:
    """Bad options of the demo and bench modules are a usage message on every rank and exit
    status 2 (as for the ``arrayjit`` command), not a traceback or a NaN: the demo's
    ``--steps 0`` used to fail on an empty list of losses, ``--per-rank 0`` on a division by
    zero, and the bench's ``--repeat 0`` printed a median of nothing and exited 0."""
    done = subprocess.run(
        [mpiexec(), "-n", "2", sys.executable, *command],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 2, out
    assert done.stderr.count(message) == 2 and "Traceback" not in out, out
