"""Compile time of a growing program (issue 38): the L-layer MLP training step of
:mod:`arrayjit_conformance.compile_workload` (L = 2, 8, 32, 64) compiled cold
(``ARRAYJIT_NO_CACHE=1``: every compiler runs) on each backend, next to ``jax.jit``'s compile of
the same step in the same run (``jax.jit(step).lower(...).compile()``, where jax is installed),
and, at 64 layers, the recompile after editing one layer (the unedited step compiled first into
a fresh cache). The CPU backends compile the packed matmul's kernels once per process (their
kernel library, :mod:`arrayjit_backend_c.cpu.units`), as jax's runtime comes compiled: a cold
compile does not pay for it, and the row ``first in process`` (2 layers) is a cold compile
that does. The ``compile + first run`` groups (8 and 64 layers) add linking, one run and the
wait, next to ``jax.jit``'s first call: what a user waits for before the first values, and where
a driver that generates a kernel's code at its first launch (PoCL) pays for it. ``arrayjit
bench`` shows each row's speed relative to jax (``vs jax``: jax's time / ours). Few rounds: a
cold compile of 64 layers takes seconds."""

from __future__ import annotations

import importlib.util
import secrets
import tempfile
from collections.abc import Callable
from typing import Any

import pytest

from arrayjit_backends import fresh_backend
from arrayjit_conformance.benchmarking import JAX_IMPL, jax_or_skip
from arrayjit_conformance.compile_workload import jax_mlp_step, mlp_step
from arrayjit_conformance.plugin import fresh_or_skip

LAYERS = [2, 8, 32, 64]
EDITED = 64
FIRST_RUN_LAYERS = [8, 64]
ROUNDS = 3


def _group(layers: int) -> str:
    return f"compile time: {layers}-layer MLP step"


def _first_run_group(layers: int) -> str:
    return f"compile + first run: {layers}-layer MLP step"


def _time(
    benchmark: Any,
    backend_name: str,
    impl: str,
    program: Callable[[Any], Any],
    action: Callable[[Any, Any], None],
    before: Callable[[], None] = lambda: None,
) -> None:
    """Time ``action(backend, program(backend))`` for ``ROUNDS`` rounds, each on a fresh
    backend made after ``before()`` (``before`` and ``program`` untimed), as the row
    ``<backend_name> <impl>``."""
    fresh_or_skip(backend_name).finalize()
    backends: list[Any] = []

    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        before()
        be = fresh_backend(backend_name)
        backends.append(be)
        return (be, program(be)), {}

    benchmark.extra_info["impl"] = f"{backend_name} {impl}"
    try:
        benchmark.pedantic(action, setup=setup, rounds=ROUNDS)
    finally:
        for be in backends:
            be.finalize()


def _time_jax(benchmark: Any, layers: int, action: Callable[[Any, Any, Any], Any]) -> None:
    """Time ``action(jax, step, args)`` on the L-layer step, a new function each round (jax
    caches compiled functions by identity)."""
    jax = jax_or_skip()

    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        step, args = jax_mlp_step(jax, layers)
        return (step, args), {}

    benchmark.extra_info["impl"] = JAX_IMPL
    benchmark.pedantic(lambda step, args: action(jax, step, args), setup=setup, rounds=ROUNDS)


@pytest.mark.parametrize("layers", LAYERS)
def test_compile_cold(
    benchmark: Any, backend_name: str, layers: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fresh backend with the cache off each round: rendering, the compiler and loading."""
    monkeypatch.setenv("ARRAYJIT_NO_CACHE", "1")
    benchmark.group = _group(layers)
    benchmark.extra_info["statements"] = mlp_step(layers)[1]
    _time(
        benchmark,
        backend_name,
        "cold",
        lambda be: mlp_step(layers)[0],
        lambda be, comp: be.compile(comp, name=f"mlp{layers}"),
    )


@pytest.mark.skipif(
    importlib.util.find_spec("arrayjit_backend_c") is None,
    reason="arrayjit-backend-c is not installed",
)
def test_compile_first_in_process(
    benchmark: Any, backend_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cold compile of the 2-layer step that builds the CPU backends' kernel library too, as
    a process's first routine with matmuls does."""
    from arrayjit_backend_c.cpu.units import forget_libraries

    if not backend_name.endswith(("_cc", "_llvm")):
        pytest.skip(f"{backend_name} has no kernel library")
    monkeypatch.setenv("ARRAYJIT_NO_CACHE", "1")
    benchmark.group = _group(2)

    def program(be: Any) -> Any:
        forget_libraries()
        return mlp_step(2)[0]

    _time(
        benchmark,
        backend_name,
        "first in process",
        program,
        lambda be, comp: be.compile(comp, name="mlp2"),
    )


@pytest.mark.parametrize("layers", FIRST_RUN_LAYERS)
def test_compile_and_first_run(
    benchmark: Any, backend_name: str, layers: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Compile, link, run once and wait. Each round's nodes are labelled afresh (at random: a
    driver's kernel cache kept on disk between processes cannot serve a round either)."""
    monkeypatch.setenv("ARRAYJIT_NO_CACHE", "1")
    benchmark.group = _first_run_group(layers)

    def first_run(be: Any, comp: Any) -> None:
        code = be.compile(comp, name=f"mlp{layers}")
        stream = be.new_stream(be.get_device(0))
        be.link(be.make_context(stream), code)()
        be.await_stream(stream)

    _time(
        benchmark,
        backend_name,
        "compile + first run",
        lambda be: mlp_step(layers, tag=f"t{secrets.token_hex(4)}_")[0],
        first_run,
    )


def test_recompile_after_editing_one_layer(
    benchmark: Any, backend_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The step compiled into a fresh cache, then one layer edited (its bias subtracted): the
    time of the second compile, which a backend that caches per unit of code keeps short."""
    benchmark.group = _group(EDITED)

    def program(be: Any) -> Any:
        be.compile(mlp_step(EDITED)[0], name=f"mlp{EDITED}")
        return mlp_step(EDITED, edited=EDITED // 2)[0]

    _time(
        benchmark,
        backend_name,
        "edit 1 layer",
        program,
        lambda be, comp: be.compile(comp, name=f"mlp{EDITED}"),
        lambda: monkeypatch.setenv("ARRAYJIT_CACHE_DIR", tempfile.mkdtemp(prefix="aj-bench-edit-")),
    )


@pytest.mark.parametrize("layers", LAYERS)
def test_compile_jax(benchmark: Any, layers: int) -> None:
    """``jax.jit(step).lower(...).compile()`` of the same step."""
    benchmark.group = _group(layers)
    _time_jax(benchmark, layers, lambda jax, step, args: jax.jit(step).lower(*args).compile())


@pytest.mark.parametrize("layers", FIRST_RUN_LAYERS)
def test_compile_and_first_run_jax(benchmark: Any, layers: int) -> None:
    """``jax.jit(step)`` called once on the example arguments and waited for."""
    benchmark.group = _first_run_group(layers)
    _time_jax(
        benchmark, layers, lambda jax, step, args: jax.block_until_ready(jax.jit(step)(*args))
    )
