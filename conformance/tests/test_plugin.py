"""The plugin itself: backend selection, test ids, missing backends as skips with the reason,
ARRAYJIT_REQUIRE turning them into failures."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

CASE = """
def test_one(backend):
    assert backend.num_devices() >= 1
"""


@pytest.fixture
def ghost_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ARRAYJIT_BACKENDS", raising=False)
    monkeypatch.delenv("ARRAYJIT_REQUIRE", raising=False)


def test_backend_option_selects_and_names_tests(
    pytester: pytest.Pytester, ghost_registered: None
) -> None:
    pytester.makepyfile(CASE)
    result = pytester.runpytest_subprocess(
        "--backend", "sync_interp", "--backend", "multicore_interp", "-v"
    )
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        ["*test_one[[]sync_interp[]] PASSED*", "*test_one[[]multicore_interp[]] PASSED*"]
    )


def test_environment_variable_selects(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ARRAYJIT_BACKENDS", "sync_interp")
    pytester.makepyfile(CASE)
    result = pytester.runpytest_subprocess("-v")
    result.assert_outcomes(passed=1)


GHOST = """
import pytest
from arrayjit_backends import BackendEntry, MissingBackend, registry

registry.register(BackendEntry(
    "ghost",
    lambda full: MissingBackend(full, "libghost.so not found", "pip install ghost"),
    probe=lambda: "libghost.so not found",
))

def test_one(backend):
    assert backend.num_devices() >= 1
"""


def test_missing_backend_is_a_skip_with_reason(
    pytester: pytest.Pytester, ghost_registered: None
) -> None:
    pytester.makepyfile(GHOST)
    result = pytester.runpytest_subprocess("--backend", "ghost", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*backend ghost is not available: libghost.so not found*"])


def test_required_backend_missing_is_a_failure(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, ghost_registered: None
) -> None:
    monkeypatch.setenv("ARRAYJIT_REQUIRE", "ghost")
    pytester.makepyfile(GHOST)
    result = pytester.runpytest_subprocess("--backend", "ghost")
    result.assert_outcomes(errors=1)  # the backend fixture fails: every test of it errors
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*required by ARRAYJIT_REQUIRE*"])
