"""The pytest plugin of the arrayjit conformance suite (entry point ``pytest11: arrayjit``).

Backends under test: ``--backend NAME`` (repeatable), else ``$ARRAYJIT_BACKENDS`` (comma
separated), else every registered backend under each of its full names. Every test that takes
the ``backend`` (or ``backend_name``) fixture runs once per backend, with the backend's name in
its id. A backend that is not usable here is a skip that prints why; naming it in
``$ARRAYJIT_REQUIRE`` (comma separated) turns that skip into a failure.

Hypothesis: the ``ci`` profile (``HYPOTHESIS_PROFILE=ci``, set by tox) is derandomized with a
fixed number of examples; the ``dev`` profile (the default) explores more.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from arrayjit_backends import registry
from arrayjit_backends.missing import MissingBackend

settings.register_profile(
    "ci",
    derandomize=True,
    max_examples=30,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
settings.register_profile(
    "dev",
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("arrayjit", "arrayjit conformance suite")
    group.addoption(
        "--backend",
        action="append",
        default=[],
        metavar="NAME",
        help="backend to test (repeatable); default: $ARRAYJIT_BACKENDS, else every backend",
    )


def selected_backends(config: pytest.Config) -> list[str]:
    """The backend names under test, in the order given."""
    names: list[str] = list(config.getoption("--backend") or [])
    if not names:
        env = os.environ.get("ARRAYJIT_BACKENDS", "")
        names = [n.strip() for n in env.split(",") if n.strip()]
    if not names:  # every full name, without the bare aliases of scheduled backends
        for e in registry.entries():
            names += e.full_names()[:-1] if e.scheduler_prefixes else [e.name]
    return list(dict.fromkeys(n.lower() for n in names))


def required_backends() -> set[str]:
    """Names in ``$ARRAYJIT_REQUIRE``: their absence is a failure, not a skip."""
    env = os.environ.get("ARRAYJIT_REQUIRE", "")
    return {n.strip().lower() for n in env.split(",") if n.strip()}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "backend_independent: the test does not depend on the backend under test"
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend_name" in metafunc.fixturenames:
        names = selected_backends(metafunc.config)
        metafunc.parametrize("backend_name", names, ids=names, scope="session")


def pytest_report_header(config: pytest.Config) -> list[str]:
    lines = []
    for name in selected_backends(config):
        try:
            reason = registry.resolve_name(name).probe()
        except Exception as exc:  # an unknown name is reported by the tests themselves
            reason = str(exc)
        lines.append(f"arrayjit backend {name}: {'available' if reason is None else reason}")
    return lines


def skip_or_fail(name: str, reason: str) -> None:
    """Skip (or, for a required backend, fail) with ``reason``."""
    message = f"backend {name} is not available: {reason}"
    if name in required_backends() or name.split("_", 1)[-1] in required_backends():
        pytest.fail(f"{message} (required by ARRAYJIT_REQUIRE)")
    pytest.skip(message)


def fresh_or_skip(name: str) -> Any:
    """A fresh, initialized backend, or a skip (a failure where required) saying why not."""
    be = registry.fresh_backend(name)  # probes the backend: a MissingBackend says why not
    if isinstance(be, MissingBackend):
        skip_or_fail(name, be.reason)
    be.initialize()
    return be


@pytest.fixture
def backend(backend_name: str) -> Iterator[Any]:
    """A fresh, initialized backend; finalized after the test."""
    be = fresh_or_skip(backend_name)
    try:
        yield be
    finally:
        be.finalize()
