"""What conformance tests share: running a computation on a backend and on the oracle, the
per-precision tolerance table, input values per precision, capability skips.

The oracle is the reference interpreter over the *unoptimized* lowered code
(``interpret(lower(comp))``), which no optimizer bug can reach. The interpreter over the optimized
code is checked against that oracle separately, so that a disagreement is reported as an
optimizer bug, and the backend's values are compared with the oracle by the tests (a backend or
renderer bug).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pytest

from arrayjit_conformance.program import Program, evaluate_numpy
from arrayjit_ir import interpret, lower
from arrayjit_ir.indexing import StaticSymbol
from arrayjit_tnode import Prec, Tnode

FLOAT_PRECS = ("single", "double", "half", "bfloat16", "fp8")
INT_PRECS = ("byte", "uint16", "int32", "uint32", "int64", "uint64")
ALL_PRECS = (*FLOAT_PRECS, *INT_PRECS)

TOLERANCE: dict[str, float] = {
    "single": 2e-5,
    "double": 1e-12,
    "half": 4e-3,
    "bfloat16": 2e-2,
    "fp8": 0.13,
}
"""Relative and absolute tolerance against the interpreter, per precision (exact for integers).

Values are stored in their own format on both sides, so the tolerance covers differences in
the compute path (fused multiply-add, double-precision library math functions, float vs double
evaluation) of one rounding step of the format, not accumulated error. A float transcendental
alone (``exp``, ``log``, ``tanh``, ``sin``, ``pow``...) is held to the math library's documented
bound instead (:data:`arrayjit_conformance.math_oracle.MATH_ULPS`: 1 ulp of the exact value)."""


def prec_of(name: str) -> Prec:
    """The precision called ``name``."""
    return Prec[name]


def require_precs(backend: Any, *names: str) -> None:
    """Skip the test (with the reason) unless the backend supports every precision named."""
    supported = backend.capabilities.supported_precs
    for n in names:
        if prec_of(n) not in supported:
            pytest.skip(f"backend {backend.name} does not support precision {n}")


def require_devices(backend: Any, count: int) -> None:
    """Skip the test unless the backend has at least ``count`` devices."""
    if backend.num_devices() < count:
        pytest.skip(f"backend {backend.name} has {backend.num_devices()} device(s), need {count}")


def new_context(backend: Any, ordinal: int = 0) -> Any:
    """A context on a new stream of device ``ordinal``."""
    return backend.make_context(backend.new_stream(backend.get_device(ordinal)))


def sample(
    rng: np.random.Generator, prec: str, shape: tuple[int, ...], lo: float = -3.0, hi: float = 3.0
) -> np.ndarray:
    """Input values that every precision represents well: floats in ``[lo, hi)``, small
    non-negative integers (``[0, 9)``) for integer precisions."""
    if prec in FLOAT_PRECS:
        return rng.uniform(lo, hi, shape)
    return rng.integers(0, 9, shape)


def hosted(dims: tuple[int, ...], label: str, prec: str = "single", **kw: Any) -> Tnode:
    """A hosted node."""
    return Tnode.create(dims, prec=prec, label=label, hosted=True, **kw)


def on_interpreter(backend: Any) -> bool:
    """Whether ``backend`` is the reference interpreter (``sync_interp``), which runs a million
    scalar steps in about half a minute: tests give it smaller cases."""
    return bool(backend.name.endswith("interp"))


def run_once(
    backend: Any, comp: Any, inputs: Mapping[Tnode, np.ndarray], outputs: Sequence[Tnode]
) -> list[np.ndarray]:
    """Set ``inputs`` on the host, compile, link and run ``comp`` once on ``backend``; the
    values of ``outputs`` read back. For cases checked against numpy only: the oracle of
    :func:`run_against_interpreter` takes seconds where a case has a million scalar steps."""
    for tn, v in inputs.items():
        tn.set_values(v)
    routine = backend.link(new_context(backend), backend.compile(comp, name="case"))
    routine()
    for tn in outputs:
        assert backend.to_host(routine.context, tn), f"{tn.debug_label} is not in the context"
    return [np.asarray(tn.get_values()) for tn in outputs]


def run_against_interpreter(
    backend: Any,
    comp: Any,
    inputs: Mapping[Tnode, np.ndarray],
    outputs: Sequence[Tnode],
    bindings: Mapping[str, int] | None = None,
    symbols: tuple[StaticSymbol, ...] = (),
    name: str = "case",
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Set ``inputs`` on the host, compile, link and run ``comp`` once on ``backend``, read
    ``outputs`` back; run the *unoptimized* lowered code on the reference interpreter from the
    same host values (the oracle), and the optimized code too.

    Returns:
        ``(backend value, oracle value)`` per output.

    Raises:
        AssertionError: the interpreter over the optimized code differs from the oracle (the
            message says "optimizer bug" and names the node).
    """
    for tn, v in inputs.items():
        tn.set_values(v)
    code = backend.compile(comp, name=name, bindings=symbols)
    # Every node with a host array starts from it on the backend (hosted nodes are uploaded
    # when linked), inputs or not.
    start = {tn: tn.array.copy() for tn in code.optimized.traced if tn.array is not None}
    start.update({tn: tn.array.copy() for tn in inputs if tn.array is not None})
    routine = backend.link(new_context(backend), code)
    for sym, value in (bindings or {}).items():
        routine.bindings[sym] = value
    routine()
    for tn in outputs:
        assert backend.to_host(routine.context, tn), f"{tn.debug_label} is not in the context"
    values: dict[StaticSymbol | str, int] = {k: v for k, v in (bindings or {}).items()}
    oracle = interpret(lower(comp), {tn: a.copy() for tn, a in start.items()}, values)
    opt_bufs = {tn: a.copy() for tn, a in start.items()}
    for tn in code.optimized.context_nodes:
        opt_bufs.setdefault(tn, _zeros(tn))
    optimized = interpret(code.optimized, opt_bufs, values)
    result = []
    for tn in outputs:
        ref = oracle.get(tn, _zeros(tn))[tn.logical_slices()]
        opt = optimized.get(tn, _zeros(tn))[tn.logical_slices()]
        assert_close(
            opt,
            ref,
            tn.prec.name,
            what=f"optimizer bug: the interpreter over the optimized code of {name} gives "
            f"{tn.debug_label} other values than over the unoptimized lowered code",
        )
        result.append((tn.get_values(), ref))
    return result


def check_against_numpy(
    backend: Any,
    comp: Any,
    inputs: Mapping[Tnode, np.ndarray],
    expected: Mapping[Tnode, np.ndarray],
    prec: str = "single",
) -> None:
    """Run ``comp`` once (:func:`run_against_interpreter`); every node of ``expected`` equals
    numpy's value (within ``prec``'s tolerance) on the backend and in the oracle."""
    outs = list(expected)
    pairs = run_against_interpreter(backend, comp, inputs, outs)
    for tn, (got, ref) in zip(outs, pairs):
        want = np.asarray(expected[tn], dtype=np.float64)
        assert_close(ref, want, prec, what=f"oracle vs numpy, {tn.debug_label}")
        assert_close(got, want, prec, what=f"{backend.name} vs numpy, {tn.debug_label}")


def check_program(backend: Any, program: Program, runs: int = 2, interpreters: bool = True) -> None:
    """Run a random program ``runs`` times in a row on ``backend`` (each run continues from the
    previous one's values) and check every hosted node after each run (:func:`check_runs`,
    with the plain numpy evaluation of :mod:`arrayjit_conformance.programs`).

    Raises:
        AssertionError: any disagreement (see :func:`check_runs`); the message prints the
            program.
    """
    tns, comp = program.build()
    done: list[int] = []

    def step(state: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        done.append(1)
        return evaluate_numpy(program, state, program.batch(len(done) - 1))

    check_runs(
        backend,
        comp,
        tns,
        program.initial_values(),
        step,
        runs=runs,
        symbols=program.symbols,
        bindings=[{"i": program.batch(r)} for r in range(runs)] if program.symbols else (),
        prec=program.tolerance_prec,
        title=program.source(),
        interpreters=interpreters,
    )


def check_split_program(backend: Any, program: Program, cut: int, runs: int = 2) -> None:
    """Run a random program as two routines compiled together (``compile_batch``): the
    statements before ``cut``, then the rest, linked in one context lineage and run one after
    the other, ``runs`` times. After each run every hosted node equals the numpy evaluation of
    the whole program and the oracle (the interpreter over both unoptimized blocks in turn);
    the interpreter over both optimized routines equals the oracle.

    Raises:
        AssertionError: a disagreement, saying which part is wrong and printing the program.
    """
    tns, first, second = program.build_split(cut)
    values = program.initial_values()
    for name, v in values.items():
        tns[name].set_values(v)
    codes = backend.compile_batch([first, second], ["part1", "part2"], program.symbols)
    r1 = backend.link(new_context(backend), codes[0])
    r2 = backend.link(r1.context, codes[1])
    lowered = [lower(first), lower(second)]
    plain: dict[Tnode, np.ndarray] = {tns[k]: _host_copy(tns[k]) for k in values}
    opt: dict[Tnode, np.ndarray] = {tns[k]: _host_copy(tns[k]) for k in values}
    state: dict[str, np.ndarray] = dict(values)
    title = f"{program.source()}\n# split before statement {cut}"
    scale = max([float(np.abs(v).max()) for v in values.values() if v.size] + [1.0])
    for run in range(runs):
        binds: dict[StaticSymbol | str, int] = {"i": program.batch(run)} if program.symbols else {}
        for r in (r1, r2):
            for sym, value in binds.items():
                r.bindings[str(sym)] = value
            r()
        for name in values:
            backend.to_host(r2.context, tns[name])
        for low, code in zip(lowered, codes):
            plain = interpret(low, plain, binds)
            opt = interpret(code.optimized, opt, binds)
        state = evaluate_numpy(program, state, program.batch(run))
        scale = max([scale] + [float(np.abs(v).max()) for v in state.values() if v.size])
        for name in values:
            tn = tns[name]
            ref = plain[tn][tn.logical_slices()]
            head = f"run {run + 1}, node {name}, backend {backend.name}"
            for got, what in (
                (state[name], "lowering bug (or numpy reference): numpy disagrees with the oracle"),
                (
                    opt[tn][tn.logical_slices()],
                    "optimizer bug: the optimized routines disagree with the unoptimized blocks",
                ),
                (tn.get_values(), f"backend bug: {backend.name} disagrees with the oracle"),
            ):
                assert_close(
                    got,
                    ref,
                    program.tolerance_prec,
                    what=f"{what} ({head})\n{title}",
                    scale=8 * scale,
                )


def check_runs(
    backend: Any,
    comp: Any,
    tns: Mapping[str, Tnode],
    values: Mapping[str, np.ndarray],
    numpy_step: Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]],
    runs: int,
    prec: str,
    observed: Sequence[str] | None = None,
    numpy_rtol: float | None = None,
    feeds: Sequence[Mapping[str, np.ndarray]] = (),
    title: str = "",
    interpreters: bool = True,
    symbols: tuple[StaticSymbol, ...] = (),
    bindings: Sequence[Mapping[str, int]] = (),
) -> None:
    """Compile ``comp`` (whose nodes are ``tns``, by name) on ``backend``, set the hosted nodes
    to ``values``, link once and run ``runs`` times in a row. Before run ``r``, ``feeds[r-1]``
    (where given) sets new host values of some nodes and uploads them (``from_host``). After
    each run compare every observed node (default: every node of ``values``) three ways:

    - ``numpy_step`` (plain numpy: one run from the previous state, name -> array) against the
      oracle, the interpreter over the unoptimized lowered code (a disagreement is a lowering
      bug, or a bug of the numpy reference);
    - the interpreter over the optimized code against the oracle (an optimizer bug);
    - the backend against the oracle (a backend or renderer bug).

    Tolerances: the precision's (:data:`TOLERANCE`), the absolute one scaled by the largest
    magnitude seen so far (rounding through several statements); ``numpy_rtol`` (relative to
    the largest magnitude of the node) for a numpy reference that computes in double.

    ``interpreters=False`` (programs too large for the interpreter) compares the backend with
    numpy only. ``symbols`` are the static symbols the code needs; ``bindings[r-1]`` binds them
    for run ``r``.

    Raises:
        AssertionError: the first disagreement; the message says which part is wrong, names
            the run, node and backend, and ends with ``title``.
    """
    for name, v in values.items():
        tns[name].set_values(v)
    code = backend.compile(comp, name="program", bindings=symbols)
    routine = backend.link(new_context(backend), code)
    lowered = lower(comp)
    plain: dict[Tnode, np.ndarray] = {tns[k]: _host_copy(tns[k]) for k in values}
    opt: dict[Tnode, np.ndarray] = {tns[k]: _host_copy(tns[k]) for k in values}
    state: dict[str, np.ndarray] = {k: np.array(v, copy=True) for k, v in values.items()}
    in_context = set(code.optimized.context_nodes)
    names = list(observed if observed is not None else values)
    scale = max([float(np.abs(v).max()) for v in values.values() if v.size] + [1.0])
    for run in range(1, runs + 1):
        for name, v in (feeds[run - 1] if run <= len(feeds) else {}).items():
            tn = tns[name]
            tn.set_values(v)
            backend.from_host(routine.context, tn)
            plain[tn], opt[tn], state[name] = _host_copy(tn), _host_copy(tn), np.array(v)
        binds: dict[StaticSymbol | str, int] = {}
        binds.update(bindings[run - 1] if bindings else {})
        for sym, value in binds.items():
            routine.bindings[str(sym)] = value
        routine()
        for name in names:
            if tns[name] in in_context:
                backend.to_host(routine.context, tns[name])
        state = numpy_step(state)
        scale = max([scale] + [float(np.abs(v).max()) for v in state.values() if v.size])
        if not interpreters:
            for name in names:
                assert_close(
                    tns[name].get_values(),
                    np.asarray(state[name]),
                    prec,
                    what=f"backend bug: {backend.name} disagrees with numpy (run {run}, node "
                    f"{name})\n{title}",
                    scale=8 * scale,
                )
            continue
        plain = interpret(lowered, plain, binds)
        opt = interpret(code.optimized, opt, binds)
        for name in names:
            tn = tns[name]
            ref = plain[tn][tn.logical_slices()]
            head = f"run {run}, node {name}, backend {backend.name}"
            want = np.asarray(state[name])
            what = "lowering bug (or numpy reference): numpy disagrees with the oracle"
            if numpy_rtol is None:
                assert_close(want, ref, prec, what=f"{what} ({head})\n{title}", scale=8 * scale)
            else:
                mag = max(float(np.abs(want).max()) if want.size else 0.0, 1e-3)
                np.testing.assert_allclose(
                    ref, want, rtol=numpy_rtol, atol=numpy_rtol * mag, err_msg=f"{what} ({head})"
                )
            checks = (
                (
                    opt[tn][tn.logical_slices()],
                    "optimizer bug: the interpreter over the "
                    "optimized code disagrees with the unoptimized lowered code",
                ),
                (
                    tn.get_values(),
                    f"backend bug: {backend.name} disagrees with the interpreter "
                    "over the unoptimized lowered code",
                ),
            )
            for got, what in checks:
                assert_close(got, ref, prec, what=f"{what} ({head})\n{title}", scale=8 * scale)


def check_routines_runs(
    backend: Any,
    parts: Sequence[Any],
    names: Sequence[str],
    tns: Mapping[str, Tnode],
    values: Mapping[str, np.ndarray],
    numpy_step: Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]],
    runs: int,
    prec: str,
    observed: Sequence[str],
    numpy_rtol: float,
    title: str = "",
) -> None:
    """:func:`check_runs` for a program split into several routines (``parts``, compiled
    together with ``compile_batch`` and linked in one context lineage, each run calls them in
    order): after each run every observed node equals ``numpy_step``'s value (within
    ``numpy_rtol`` of its magnitude), the oracle (the interpreter over every unoptimized part
    in turn) and the interpreter over the optimized routines.

    Raises:
        AssertionError: the first disagreement, naming the part that is wrong, the run, the
            node and the backend.
    """
    for name, v in values.items():
        tns[name].set_values(v)
    codes = backend.compile_batch(list(parts), list(names))
    routines = [backend.link(new_context(backend), codes[0])]
    for code in codes[1:]:
        routines.append(backend.link(routines[-1].context, code))
    lowered = [lower(part) for part in parts]
    plain: dict[Tnode, np.ndarray] = {tns[k]: _host_copy(tns[k]) for k in values}
    opt: dict[Tnode, np.ndarray] = {tns[k]: _host_copy(tns[k]) for k in values}
    state: dict[str, np.ndarray] = {k: np.array(v, copy=True) for k, v in values.items()}
    scale = max([float(np.abs(v).max()) for v in values.values() if v.size] + [1.0])
    for run in range(1, runs + 1):
        for r in routines:
            r()
        for name in observed:
            backend.to_host(routines[-1].context, tns[name])
        for low, code in zip(lowered, codes):
            plain = interpret(low, plain, {})
            opt = interpret(code.optimized, opt, {})
        state = numpy_step(state)
        scale = max([scale] + [float(np.abs(v).max()) for v in state.values() if v.size])
        for name in observed:
            tn = tns[name]
            ref = plain[tn][tn.logical_slices()]
            head = f"{title}: run {run}, node {name}, backend {backend.name}"
            want = np.asarray(state[name])
            mag = max(float(np.abs(want).max()) if want.size else 0.0, 1e-3)
            np.testing.assert_allclose(
                ref,
                want,
                rtol=numpy_rtol,
                atol=numpy_rtol * mag,
                err_msg=f"lowering bug (or numpy reference): numpy disagrees with the oracle "
                f"({head})",
            )
            for got, what in (
                (opt[tn][tn.logical_slices()], "optimizer bug: the optimized routines disagree"),
                (tn.get_values(), f"backend bug: {backend.name} disagrees with the oracle"),
            ):
                assert_close(got, ref, prec, what=f"{what} ({head})", scale=8 * scale)


def _host_copy(tn: Tnode) -> np.ndarray:
    """A copy of ``tn``'s host array (padded, as the backend's buffer)."""
    assert tn.array is not None, f"{tn.debug_label} has no host array"
    return tn.array.copy()


def _zeros(tn: Tnode) -> np.ndarray:
    return np.zeros(tn.prec.host_shape(tn.dims), dtype=tn.prec.numpy_dtype)


def assert_close(
    got: np.ndarray, ref: np.ndarray, prec: str, what: str = "", scale: float = 1.0
) -> None:
    """``got`` equals ``ref`` within the precision's tolerance (exactly for integers), with
    NaNs in the same places. ``scale`` multiplies the absolute tolerance (for values computed
    through several statements, the magnitude of their intermediates); ``what`` heads the
    failure message.

    Raises:
        AssertionError: the arrays differ.
    """
    assert got.shape == ref.shape, f"{what}: shape {got.shape} != {ref.shape}"
    g, r = np.asarray(got, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    if prec in TOLERANCE:
        tol = TOLERANCE[prec]
        np.testing.assert_allclose(
            g, r, rtol=tol, atol=tol * max(scale, 1.0), equal_nan=True, err_msg=what
        )
    else:  # not through float64: int64 values above 2**53 differing by one would pass
        np.testing.assert_array_equal(np.asarray(got), np.asarray(ref), err_msg=what)


__all__ = [
    "ALL_PRECS",
    "FLOAT_PRECS",
    "INT_PRECS",
    "TOLERANCE",
    "assert_close",
    "check_program",
    "check_routines_runs",
    "check_runs",
    "check_split_program",
    "hosted",
    "new_context",
    "prec_of",
    "require_devices",
    "require_precs",
    "run_against_interpreter",
    "sample",
]
