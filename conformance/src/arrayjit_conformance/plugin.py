"""The pytest plugin of the arrayjit conformance suite (entry point ``pytest11: arrayjit``).

Backends under test: ``--arrayjit-backend NAME`` (repeatable), else ``$ARRAYJIT_BACKENDS``
(comma separated), else every registered backend under each of its full names. Every test that
takes the ``backend`` (or ``backend_name``) fixture runs once per backend, with the backend's
name in its id. A backend that is registered but not usable here is a skip that prints why;
naming it in ``$ARRAYJIT_REQUIRE`` (comma separated) turns that skip into a failure. A name that
no installed package registers is one usage error listing the valid names (and, for a
first-party backend, the command that installs it).

The plugin is loaded into every pytest run of an environment where it is installed, so it keeps
to itself: its option is prefixed, it prints and probes nothing unless a collected test uses the
``backend_name`` fixture (a *suite test*), and its Hypothesis settings apply to suite tests only
(``HYPOTHESIS_PROFILE=ci``, set by tox: derandomized, 30 examples; otherwise 60 random
examples). A suite test's own ``@settings`` wins over them.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.errors import InvalidArgument

from arrayjit_backends import registry
from arrayjit_backends.missing import MissingBackend

OPTION = "--arrayjit-backend"
_UNKNOWN = pytest.StashKey[str]()

_SUPPRESS = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
SUITE_SETTINGS = {
    "ci": settings(
        derandomize=True,
        max_examples=30,
        deadline=None,
        print_blob=True,
        suppress_health_check=_SUPPRESS,
    ),
    "dev": settings(max_examples=60, deadline=None, suppress_health_check=_SUPPRESS),
}


def suite_settings() -> settings:
    """The Hypothesis settings of suite tests: ``ci`` when ``$HYPOTHESIS_PROFILE`` is ``ci``,
    else ``dev``."""
    return SUITE_SETTINGS["ci" if os.environ.get("HYPOTHESIS_PROFILE") == "ci" else "dev"]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("arrayjit", "arrayjit conformance suite")
    group.addoption(
        OPTION,
        action="append",
        default=[],
        dest="arrayjit_backend",
        metavar="NAME",
        help="backend to test (repeatable); default: $ARRAYJIT_BACKENDS, else every backend",
    )


def selected_backends(config: pytest.Config) -> list[str]:
    """The backend names under test, in the order given."""
    names: list[str] = list(config.getoption("arrayjit_backend") or [])
    if not names:
        env = os.environ.get("ARRAYJIT_BACKENDS", "")
        names = [n.strip() for n in env.split(",") if n.strip()]
    if not names:  # every full name, without the bare aliases of scheduled backends
        for e in registry.entries():
            names += e.full_names()[:-1] if e.scheduler_prefixes else [e.name]
    return list(dict.fromkeys(n.lower() for n in names))


def unknown_backends_message(names: list[str]) -> str | None:
    """None when every name is registered, else the one message for all unknown names: the
    installed names and the install command of each first-party backend among them."""
    from arrayjit_backends.first_party import providing

    valid = registry.backend_names()
    unknown = [n for n in names if n not in valid]
    if not unknown:
        return None
    lines = [
        f"arrayjit: unknown backend {', '.join(repr(n) for n in unknown)} "
        f"(from {OPTION} or $ARRAYJIT_BACKENDS)",
        f"  installed backends: {', '.join(valid)}",
    ]
    for n in unknown:
        fp = providing(n)
        if fp is not None:
            lines.append(f"  {n} is provided by {fp.distribution}: {fp.install}")
    return "\n".join(lines)


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
        message = unknown_backends_message(names)
        if message is not None:
            # Raised once, after collection: one usage error, not one per module or test.
            metafunc.config.stash[_UNKNOWN] = message
            names = []
        metafunc.parametrize("backend_name", names, ids=names, scope="session")


def _is_suite_test(item: pytest.Item) -> bool:
    return "backend_name" in getattr(item, "fixturenames", ())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _UNKNOWN in config.stash:
        raise pytest.UsageError(config.stash[_UNKNOWN])
    chosen = suite_settings()
    for item in items:
        if not _is_suite_test(item):
            continue
        fn = getattr(item, "obj", None)
        fn = getattr(fn, "__func__", fn)  # a method's function carries the settings
        if fn is None or getattr(fn, "hypothesis", None) is None:
            continue
        # InvalidArgument: the test has its own @settings (or got these already, as another id).
        with contextlib.suppress(InvalidArgument):
            chosen(fn)  # the decorator, applied after @given as users write it


def pytest_report_collectionfinish(
    config: pytest.Config, start_path: Any, items: list[pytest.Item]
) -> list[str]:
    """One line per backend under test, only when suite tests were collected."""
    if _UNKNOWN in config.stash or not any(_is_suite_test(item) for item in items):
        return []
    lines = []
    for name in selected_backends(config):
        reason = registry.resolve_name(name).probe()
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
