"""The plugin itself: backend selection, test ids, missing backends as skips with the reason,
ARRAYJIT_REQUIRE turning them into failures, unknown names as one usage error, and the plugin
keeping to itself in projects that do not run the suite (its option, output and Hypothesis
settings)."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

# The inner runs depend on test order; pytest-randomly (installed by `hatch test`) would shuffle
# them. Blocking a plugin that is not installed is harmless.
KEEP_ORDER = ("-p", "no:randomly")

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
        "--arrayjit-backend",
        "sync_interp",
        "--arrayjit-backend",
        "multicore_interp",
        "-v",
        *KEEP_ORDER,
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
    result = pytester.runpytest_subprocess("--arrayjit-backend", "ghost", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*backend ghost is not available: libghost.so not found*"])


def test_required_backend_missing_is_a_failure(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, ghost_registered: None
) -> None:
    monkeypatch.setenv("ARRAYJIT_REQUIRE", "ghost")
    pytester.makepyfile(GHOST)
    result = pytester.runpytest_subprocess("--arrayjit-backend", "ghost")
    result.assert_outcomes(errors=1)  # the backend fixture fails: every test of it errors
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*required by ARRAYJIT_REQUIRE*"])


def test_unknown_names_are_one_usage_error(
    pytester: pytest.Pytester, ghost_registered: None
) -> None:
    # Two modules, two tests each: still one error, listing the installed names.
    pytester.makepyfile(test_a=CASE + CASE.replace("test_one", "test_two"), test_b=CASE)
    result = pytester.runpytest_subprocess(
        "--arrayjit-backend", "sync_interp", "--arrayjit-backend", "sync_bogus"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert (
        result.errlines.count(
            "ERROR: arrayjit: unknown backend 'sync_bogus' "
            "(from --arrayjit-backend or $ARRAYJIT_BACKENDS)"
        )
        == 1
    )
    result.stderr.fnmatch_lines(["*installed backends: *sync_interp*"])
    assert len(result.outlines) + len(result.errlines) < 20


def test_uninstalled_first_party_name_says_how_to_install(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ARRAYJIT_BACKENDS", "sync_llvm")
    # The llvm entry unregistered stands for arrayjit-backend-c not being installed.
    pytester.makeconftest(
        "from arrayjit_backends import registry\n"
        "registry.unregister('llvm')\n"
        "registry.unregister('cc')\n"
    )
    pytester.makepyfile(CASE)
    result = pytester.runpytest_subprocess()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*sync_llvm is provided by arrayjit-backend-c: pip install arrayjit-backend-c*"]
    )
    assert "sync_cc" not in result.stderr.str().split("installed backends:")[1].splitlines()[0]


UNRELATED = """
import pytest
from hypothesis import given, settings, strategies as st

CALLS = []

def test_profile_untouched():
    # Hypothesis's own profile ("default", or "ci" where Hypothesis sees a CI environment):
    # no profile of the suite was loaded.
    assert settings._current_profile in ("default", "ci")
    assert settings.default.max_examples == 100

@given(st.integers())
def test_counts(x):
    CALLS.append(x)

def test_ran_default_examples():
    assert len(CALLS) == 100

def test_own_backend_option(request):
    assert request.config.getoption("backend") == "theirs"
"""


def test_unrelated_project_is_left_alone(pytester: pytest.Pytester, ghost_registered: None) -> None:
    # A project defining its own --backend option, using Hypothesis with its default profile.
    pytester.makeconftest(
        "def pytest_addoption(parser):\n    parser.addoption('--backend', default='x')\n"
    )
    pytester.makepyfile(UNRELATED)
    result = pytester.runpytest_subprocess("--backend", "theirs", *KEEP_ORDER)
    result.assert_outcomes(passed=4)
    assert "arrayjit backend" not in result.stdout.str()  # no probing, no header


SUITE_HYPOTHESIS = """
from hypothesis import given, strategies as st

CALLS = []

@given(st.integers())
def test_counts(backend, x):
    CALLS.append(x)

@given(st.integers())
def test_unrelated(x):
    CALLS.append(None)

def test_zz_counted():
    assert CALLS.count(None) == 100  # not a suite test: Hypothesis's own default
    assert len(CALLS) - 100 == 30  # the suite's ci settings: 30 examples
"""


def test_suite_settings_apply_to_suite_tests_only(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, ghost_registered: None
) -> None:
    monkeypatch.setenv("HYPOTHESIS_PROFILE", "ci")
    pytester.makepyfile(SUITE_HYPOTHESIS)
    result = pytester.runpytest_subprocess("--arrayjit-backend", "sync_interp", "-v", *KEEP_ORDER)
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["arrayjit backend sync_interp: available"])
